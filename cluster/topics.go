package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// growAttempts bounds GrowTopic's compare-and-swap retries when other
// writers keep changing the spec between its read and its write.
const growAttempts = 8

// TopicSpec is a topic's value at topics/<topic>: what a CreateTopics
// request asked for. The node that receives the request writes it (no hop
// to the controller: a create is one compare-and-swap); the controller
// places its partitions.
type TopicSpec struct {
	TopicID    string `json:"topicID"`    // Kafka's topic ID, as its base64 string
	Partitions int32  `json:"partitions"` // the partition count; it only grows
	// ReplicationFactor is the request's; 0 takes the controller's
	// default.replication.factor. Either is capped by the live nodes.
	ReplicationFactor int               `json:"replicationFactor,omitempty"`
	Configs           map[string]string `json:"configs,omitempty"`
	Mirror            string            `json:"mirror,omitempty"` // the mirror it belongs to; empty for a topic of its own
}

// TopicState is a spec with the etcd ModRevision it was read at, which
// GrowTopic's compare-and-swap and the controller's placement compare.
type TopicState struct {
	TopicSpec
	ModRevision int64
}

func (s TopicSpec) valid() error {
	if s.TopicID == "" {
		return fmt.Errorf("%w: no topic ID", ErrInvalidTopic)
	}
	if s.Partitions < 1 {
		return fmt.Errorf("%w: %d", ErrInvalidPartitions, s.Partitions)
	}
	if s.ReplicationFactor < 0 {
		return fmt.Errorf("cluster: replication factor %d", s.ReplicationFactor)
	}
	return nil
}

func (s TopicSpec) clone() TopicSpec {
	s.Configs = maps.Clone(s.Configs)
	return s
}

// validTopicKey checks that a topic name can be the last element of a key.
func validTopicKey(topic string) error {
	if topic == "" || strings.Contains(topic, "/") {
		return fmt.Errorf("%w: %q", ErrInvalidTopic, topic)
	}
	return nil
}

func decodeTopicSpec(topic string, value []byte) (TopicSpec, error) {
	var s TopicSpec
	if err := json.Unmarshal(value, &s); err != nil {
		return TopicSpec{}, fmt.Errorf("cluster: topic %s: %w", topic, err)
	}
	if err := s.valid(); err != nil {
		return TopicSpec{}, fmt.Errorf("cluster: topic %s: %w", topic, err)
	}
	return s, nil
}

// CreateTopic writes topic's spec if no spec of that name exists
// (CreateRevision == 0 in one transaction), else ErrTopicExists. Any node
// may call it; the controller then places the partitions. It returns the
// spec as written, with its ModRevision (wait for it in a Cache with
// WaitRevision).
func CreateTopic(ctx context.Context, client *clientv3.Client, clusterID, topic string, spec TopicSpec) (TopicState, error) {
	if err := validTopicKey(topic); err != nil {
		return TopicState{}, err
	}
	if err := spec.valid(); err != nil {
		return TopicState{}, fmt.Errorf("cluster: create topic %s: %w", topic, err)
	}
	key := topicKey(clusterID, topic)
	resp, err := client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, encodeJSON(spec))).
		Commit()
	if err != nil {
		return TopicState{}, fmt.Errorf("cluster: create topic %s: %w", topic, err)
	}
	if !resp.Succeeded {
		return TopicState{}, fmt.Errorf("cluster: create topic %s: %w", topic, ErrTopicExists)
	}
	return TopicState{TopicSpec: spec.clone(), ModRevision: resp.Header.Revision}, nil
}

// DeleteTopic deletes topic's spec and all its partitions in one
// transaction, or returns ErrUnknownTopic. It returns the revision of the
// delete.
func DeleteTopic(ctx context.Context, client *clientv3.Client, clusterID, topic string) (int64, error) {
	if err := validTopicKey(topic); err != nil {
		return 0, err
	}
	key := topicKey(clusterID, topic)
	resp, err := client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(partitionsPrefix(clusterID, topic), clientv3.WithPrefix())).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("cluster: delete topic %s: %w", topic, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("cluster: delete topic %s: %w", topic, ErrUnknownTopic)
	}
	return resp.Header.Revision, nil
}

// GrowTopic raises topic's partition count to partitions (Kafka's
// CreatePartitions: a total, which must be above the current count, else
// ErrInvalidPartitions), by compare-and-swap on the spec's ModRevision so
// that no concurrent change of the spec is lost; a lost swap reads again,
// at most growAttempts times (then ErrStaleMetadata). The controller places
// the new partitions. It returns the spec as written.
func GrowTopic(ctx context.Context, client *clientv3.Client, clusterID, topic string, partitions int32) (TopicState, error) {
	return updateTopicSpec(ctx, client, clusterID, topic, "grow topic "+topic, func(spec TopicSpec) (TopicSpec, bool, error) {
		if partitions <= spec.Partitions {
			return spec, false, fmt.Errorf("cluster: grow topic %s from %d to %d partitions: %w", topic, spec.Partitions, partitions, ErrInvalidPartitions)
		}
		spec.Partitions = partitions
		return spec, true, nil
	})
}

// UpdateTopicConfigs replaces topic's configs with what change makes of
// its spec (an AlterConfigs, a mirror's config sync), by compare-and-swap
// on the spec's ModRevision: a lost swap reads again, at most
// growAttempts times (then ErrStaleMetadata). A change returning
// unchanged false writes nothing. It returns the spec as it stands.
func UpdateTopicConfigs(ctx context.Context, client *clientv3.Client, clusterID, topic string, change func(TopicSpec) (configs map[string]string, changed bool, err error)) (TopicState, error) {
	return updateTopicSpec(ctx, client, clusterID, topic, "set the configs of topic "+topic, func(spec TopicSpec) (TopicSpec, bool, error) {
		configs, changed, err := change(spec.clone())
		spec.Configs = configs
		return spec, changed, err
	})
}

// updateTopicSpec writes what change makes of topic's spec by
// compare-and-swap on its ModRevision: a lost swap reads again, at most
// growAttempts times (then ErrStaleMetadata). A change that errs or
// returns changed false writes nothing; the spec as it stands is
// returned.
func updateTopicSpec(ctx context.Context, client *clientv3.Client, clusterID, topic, what string, change func(TopicSpec) (TopicSpec, bool, error)) (TopicState, error) {
	if err := validTopicKey(topic); err != nil {
		return TopicState{}, err
	}
	key := topicKey(clusterID, topic)
	for range growAttempts {
		resp, err := client.Get(ctx, key)
		if err != nil {
			return TopicState{}, fmt.Errorf("cluster: %s: %w", what, err)
		}
		if len(resp.Kvs) == 0 {
			return TopicState{}, fmt.Errorf("cluster: %s: %w", what, ErrUnknownTopic)
		}
		kv := resp.Kvs[0]
		spec, err := decodeTopicSpec(topic, kv.Value)
		if err != nil {
			return TopicState{}, err
		}
		next, changed, err := change(spec.clone())
		if err != nil || !changed {
			return TopicState{TopicSpec: spec, ModRevision: kv.ModRevision}, err
		}
		txn, err := client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, encodeJSON(next))).
			Commit()
		if err != nil {
			return TopicState{}, fmt.Errorf("cluster: %s: %w", what, err)
		}
		if txn.Succeeded {
			return TopicState{TopicSpec: next, ModRevision: txn.Header.Revision}, nil
		}
	}
	return TopicState{}, fmt.Errorf("cluster: %s: changed under %d attempts: %w", what, growAttempts, ErrStaleMetadata)
}
