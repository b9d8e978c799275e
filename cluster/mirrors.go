package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Mirror errors.
var (
	// ErrMirrorExists is a create of a mirror name etcd already has.
	ErrMirrorExists = errors.New("cluster: mirror already exists")
	// ErrUnknownMirror is a change of a mirror etcd does not have.
	ErrUnknownMirror = errors.New("cluster: unknown mirror")
)

// MirrorSpec is a mirror's value at mirrors/<name>: its config as the
// engine validated it (the operator's keys; secrets by reference, as in
// mirror-<name>.json) and, in order, the topic admin changes the operator
// made (start, pause, resume, recover), each as its RPC carried it. Every
// node applies the changes it has not applied yet to its own copy of the
// mirror, in order: the selection is the same on every node. The node
// that receives the admin RPC writes the key (no hop to the controller),
// by compare-and-swap on its ModRevision.
type MirrorSpec struct {
	Config  map[string]string `json:"config"`
	Changes []MirrorChange    `json:"changes,omitempty"`
}

// MirrorChange is one topic admin change of a mirror: the wire's change
// (mirrorwire.TopicsChange) and the topics it selects.
type MirrorChange struct {
	Change  int8     `json:"change"`
	Names   []string `json:"names,omitempty"`
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
}

// MirrorState is a mirror's spec with the revisions it was read at: the
// CreateRevision tells a mirror from one deleted and created again under
// its name.
type MirrorState struct {
	MirrorSpec
	CreateRevision, ModRevision int64
}

func (s MirrorSpec) clone() MirrorSpec {
	s.Config = maps.Clone(s.Config)
	s.Changes = slices.Clone(s.Changes)
	return s
}

// mirrorMaxChanges bounds the changes one mirror's key holds (each is a
// few hundred bytes; etcd's request limit is 1.5 MB).
const mirrorMaxChanges = 1000

// appendAttempts bounds AppendMirrorChange's compare-and-swap retries.
const appendAttempts = 8

func mirrorsPrefix(clusterID string) string { return clusterPrefix(clusterID) + "mirrors/" }

func mirrorKey(clusterID, name string) string { return mirrorsPrefix(clusterID) + name }

func validMirrorKey(name string) error {
	if name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("cluster: invalid mirror name %q", name)
	}
	return nil
}

// parseMirrorKey is the mirror a key of mirrors/ names; false for a key
// below a mirror's (mirrors/<name>/state/...: mirror_states.go).
func parseMirrorKey(clusterID, key string) (string, bool) {
	name := strings.TrimPrefix(key, mirrorsPrefix(clusterID))
	if name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return name, true
}

func decodeMirrorSpec(name string, value []byte) (MirrorSpec, error) {
	var s MirrorSpec
	if err := json.Unmarshal(value, &s); err != nil {
		return MirrorSpec{}, fmt.Errorf("cluster: mirror %s: %w", name, err)
	}
	return s, nil
}

// CreateMirror writes a mirror's spec if etcd has no mirror of that name
// (CreateRevision == 0), else ErrMirrorExists.
func CreateMirror(ctx context.Context, client *clientv3.Client, clusterID, name string, config map[string]string) (MirrorState, error) {
	if err := validMirrorKey(name); err != nil {
		return MirrorState{}, err
	}
	key := mirrorKey(clusterID, name)
	spec := MirrorSpec{Config: maps.Clone(config)}
	resp, err := client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, encodeJSON(spec))).
		Commit()
	if err != nil {
		return MirrorState{}, fmt.Errorf("cluster: create mirror %s: %w", name, err)
	}
	if !resp.Succeeded {
		return MirrorState{}, fmt.Errorf("cluster: create mirror %s: %w", name, ErrMirrorExists)
	}
	return MirrorState{MirrorSpec: spec, CreateRevision: resp.Header.Revision, ModRevision: resp.Header.Revision}, nil
}

// DeleteMirror deletes a mirror's key, or returns ErrUnknownMirror. It
// returns the revision of the delete. Its partitions' records stay, as
// __mirror_state keeps them on a node alone: the last mirror epochs of
// its stopped partitions answer failback's lookups.
func DeleteMirror(ctx context.Context, client *clientv3.Client, clusterID, name string) (int64, error) {
	if err := validMirrorKey(name); err != nil {
		return 0, err
	}
	key := mirrorKey(clusterID, name)
	resp, err := client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("cluster: delete mirror %s: %w", name, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("cluster: delete mirror %s: %w", name, ErrUnknownMirror)
	}
	return resp.Header.Revision, nil
}

// AppendMirrorChange appends change to a mirror's changes by
// compare-and-swap on the key's ModRevision (a lost swap reads again, at
// most appendAttempts times, then ErrStaleMetadata). It returns the spec
// as written: the change is its last.
func AppendMirrorChange(ctx context.Context, client *clientv3.Client, clusterID, name string, change MirrorChange) (MirrorState, error) {
	if err := validMirrorKey(name); err != nil {
		return MirrorState{}, err
	}
	key := mirrorKey(clusterID, name)
	for range appendAttempts {
		resp, err := client.Get(ctx, key)
		if err != nil {
			return MirrorState{}, fmt.Errorf("cluster: change mirror %s: %w", name, err)
		}
		if len(resp.Kvs) == 0 {
			return MirrorState{}, fmt.Errorf("cluster: change mirror %s: %w", name, ErrUnknownMirror)
		}
		kv := resp.Kvs[0]
		spec, err := decodeMirrorSpec(name, kv.Value)
		if err != nil {
			return MirrorState{}, err
		}
		if len(spec.Changes) >= mirrorMaxChanges {
			return MirrorState{}, fmt.Errorf("cluster: change mirror %s: it holds %d changes, the most a mirror keeps", name, len(spec.Changes))
		}
		spec.Changes = append(spec.Changes, change)
		txn, err := client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, encodeJSON(spec))).
			Commit()
		if err != nil {
			return MirrorState{}, fmt.Errorf("cluster: change mirror %s: %w", name, err)
		}
		if txn.Succeeded {
			return MirrorState{MirrorSpec: spec, CreateRevision: kv.CreateRevision, ModRevision: txn.Header.Revision}, nil
		}
	}
	return MirrorState{}, fmt.Errorf("cluster: change mirror %s: changed under %d attempts: %w", name, appendAttempts, ErrStaleMetadata)
}

// MirrorCreateRevision returns the CreateRevision of a mirror's key (its
// incarnation), without copying its spec; false if etcd has no such
// mirror.
func (c *Cache) MirrorCreateRevision(name string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.state.mirrors[name]
	return m.CreateRevision, ok
}

// Mirrors returns a copy of the mirrors' specs, by name.
func (c *Cache) Mirrors() map[string]MirrorState {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]MirrorState, len(c.state.mirrors))
	for name, m := range c.state.mirrors {
		m.MirrorSpec = m.MirrorSpec.clone()
		out[name] = m
	}
	return out
}

// RaiseLeaderEpoch is a mirror partition's EPOCH_FENCING through etcd:
// its leader raises the stored leader epoch to epoch (its local one, kept
// above the source's), so that the epoch every node answers and fences
// with is the leader's. Fenced as AlterISR: the key's ModRevision, the
// stored epoch, and the stored leader must be what the leader saw.
func RaiseLeaderEpoch(ctx context.Context, client *clientv3.Client, clusterID string, tp TopicPartition, leader, leaderEpoch int32, modRevision int64, epoch int32) (PartitionState, error) {
	key := partitionKey(clusterID, tp)
	resp, err := client.Get(ctx, key)
	if err != nil {
		return PartitionState{}, fmt.Errorf("cluster: raise the leader epoch of %s: %w", tp, err)
	}
	if len(resp.Kvs) == 0 {
		return PartitionState{}, fmt.Errorf("cluster: raise the leader epoch of %s: %w", tp, ErrUnknownPartition)
	}
	kv := resp.Kvs[0]
	current, err := decodeAssignment(tp, kv.Value)
	if err != nil {
		return PartitionState{}, err
	}
	if kv.ModRevision != modRevision || current.LeaderEpoch != leaderEpoch || current.Leader != leader || epoch <= leaderEpoch {
		return PartitionState{}, fmt.Errorf("cluster: raise the leader epoch of %s to %d by leader %d at epoch %d revision %d, the partition is led by %d at epoch %d revision %d: %w",
			tp, epoch, leader, leaderEpoch, modRevision, current.Leader, current.LeaderEpoch, kv.ModRevision, ErrStaleMetadata)
	}
	next := current
	next.LeaderEpoch = epoch
	txn, err := client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", modRevision)).
		Then(clientv3.OpPut(key, encodeJSON(next))).
		Commit()
	if err != nil {
		return PartitionState{}, fmt.Errorf("cluster: raise the leader epoch of %s: %w", tp, err)
	}
	if !txn.Succeeded {
		return PartitionState{}, fmt.Errorf("cluster: raise the leader epoch of %s at revision %d: %w", tp, modRevision, ErrStaleMetadata)
	}
	return PartitionState{Assignment: next, ModRevision: txn.Header.Revision}, nil
}
