package netio

// CreateTopics, versions 2-7, answered as a Kafka 4.4 broker answers:
//   - a name given more than once in one request is INVALID_REQUEST,
//     answered once, and none of its entries is created;
//   - a partition count of -1 means the backend's default
//     (num.partitions), a replication factor of -1 means 1; a replication factor of 0 or below -1, or
//     above 1 (one node cannot meet it), is INVALID_REPLICATION_FACTOR;
//   - a config with a null value is INVALID_CONFIG;
//   - a manual replica assignment needs partition count and replication
//     factor -1 (else INVALID_REQUEST); its partitions must be 0..n-1, each
//     with the same number of distinct replicas, all of them this node
//     (else INVALID_REPLICA_ASSIGNMENT): here that is one replica each;
//   - v5+ answers the partition count, replication factor and effective
//     configs (with their sources) of a created or validated topic, and an
//     empty config list with -1 counts for a refused one; v7 the topic ID.
//   - with an authorizer, CREATE on the cluster or on the topic (else
//     TOPIC_AUTHORIZATION_FAILED, "Authorization failed.", as Kafka's
//     ControllerApis.createTopics); the configs of a topic the client may
//     not DESCRIBE_CONFIGS are left out, and its partition count and
//     replication factor are -1, TOPIC_AUTHORIZATION_FAILED in
//     the config error code (tag 0), as Kafka's
//     ReplicationControlManager.createTopics answers.
// What the engine refuses (names, collisions, existing topics, configs it
// cannot honour) comes back as its kerr error.

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveCreateTopics(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	answered := map[string]bool{}
	for _, rt := range req.Topics {
		if answered[rt.Topic] {
			continue
		}
		answered[rt.Topic] = true
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		var (
			t   TopicInfo
			err error
		)
		if count[rt.Topic] > 1 {
			err = fmt.Errorf("%w: create topics request contains duplicate topic %s", kerr.InvalidRequest, rt.Topic)
		} else if !c.authorizeQuietly(opCreate, resourceCluster, clusterResourceName) && !c.authorize(opCreate, resourceTopic, rt.Topic) {
			err = refuse(kerr.TopicAuthorizationFailed, "Authorization failed.")
		} else {
			t, err = createTopic(ctx, c, rt, req.ValidateOnly)
		}
		if err != nil {
			st.ErrorCode = errorCode(c.server.log, err, kerr.UnknownServerError)
			message := err.Error()
			st.ErrorMessage = &message
			st.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
		} else {
			st.TopicID, st.NumPartitions, st.ReplicationFactor = t.ID, t.Partitions, max(t.ReplicationFactor, 1)
			st.Configs = make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(t.Configs))
			if !c.authorizeQuietly(opDescribeConfigs, resourceTopic, rt.Topic) {
				st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
				st.NumPartitions, st.ReplicationFactor = -1, -1
				t.Configs = nil
			}
			for _, cfg := range t.Configs {
				rc := kmsg.NewCreateTopicsResponseTopicConfig()
				rc.Name, rc.Value, rc.Source = cfg.Name, &cfg.Value, int8(cfg.Source)
				st.Configs = append(st.Configs, rc)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// createTopic checks one topic's request and asks the backend to create it.
func createTopic(ctx context.Context, c *conn, rt kmsg.CreateTopicsRequestTopic, validateOnly bool) (TopicInfo, error) {
	partitions := rt.NumPartitions
	configs := map[string]string{}
	for _, cfg := range rt.Configs {
		if cfg.Value == nil {
			return TopicInfo{}, fmt.Errorf("%w: null value not supported for topic config %s", kerr.InvalidConfig, cfg.Name)
		}
		configs[cfg.Name] = *cfg.Value
	}
	cb := c.clusterBackend()
	if len(rt.ReplicaAssignment) > 0 && cb != nil {
		return TopicInfo{}, fmt.Errorf("%w: a replica assignment: the controller of a mirrord cluster places replicas itself", kerr.InvalidRequest)
	}
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return TopicInfo{}, fmt.Errorf("%w: both a replica assignment and a partition count or replication factor", kerr.InvalidRequest)
		}
		if err := checkReplicaAssignment(rt.ReplicaAssignment, c.server.backend.Cluster().NodeID); err != nil {
			return TopicInfo{}, err
		}
		partitions = int32(len(rt.ReplicaAssignment))
	}
	live := 1
	if cb != nil {
		live = len(cb.Brokers(c.listenerName()))
	}
	switch {
	case rt.ReplicationFactor == 0 || rt.ReplicationFactor < -1:
		return TopicInfo{}, fmt.Errorf("%w: replication factor must be larger than 0, or -1 to use the default", kerr.InvalidReplicationFactor)
	case cb != nil && int(rt.ReplicationFactor) > live:
		// Kafka's message (ReplicationControlManager).
		return TopicInfo{}, fmt.Errorf("%w: Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.",
			kerr.InvalidReplicationFactor, rt.ReplicationFactor, rt.ReplicationFactor, live)
	case cb == nil && rt.ReplicationFactor > 1:
		return TopicInfo{}, fmt.Errorf("%w: replication factor %d cannot be reached by one node", kerr.InvalidReplicationFactor, rt.ReplicationFactor)
	case partitions == -1: // the backend's num.partitions
	case partitions <= 0 || partitions > maxPartitionsPerRequest:
		return TopicInfo{}, fmt.Errorf("%w: %d partitions, at most %d at a time", kerr.InvalidPartitions, partitions, maxPartitionsPerRequest)
	}
	if cb != nil {
		return cb.CreateReplicatedTopic(ctx, rt.Topic, partitions, rt.ReplicationFactor, configs, validateOnly)
	}
	return c.server.backend.CreateTopic(ctx, rt.Topic, partitions, configs, validateOnly)
}

// checkReplicaAssignment checks a manual assignment on a one-node cluster.
func checkReplicaAssignment(assignment []kmsg.CreateTopicsRequestTopicReplicaAssignment, node int32) error {
	if len(assignment) > maxPartitionsPerRequest {
		return fmt.Errorf("%w: %d partitions, at most %d at a time", kerr.InvalidPartitions, len(assignment), maxPartitionsPerRequest)
	}
	indexes := make([]int32, 0, len(assignment))
	for _, a := range assignment {
		indexes = append(indexes, a.Partition)
		switch {
		case len(a.Replicas) == 0:
			return fmt.Errorf("%w: partition %d has no replicas", kerr.InvalidReplicaAssignment, a.Partition)
		case len(a.Replicas) != len(assignment[0].Replicas):
			return fmt.Errorf("%w: all partitions must have the same number of replicas", kerr.InvalidReplicaAssignment)
		}
		for i, r := range a.Replicas {
			if slices.Contains(a.Replicas[:i], r) {
				return fmt.Errorf("%w: partition %d lists broker %d twice", kerr.InvalidReplicaAssignment, a.Partition, r)
			}
			if r != node {
				return fmt.Errorf("%w: the manual partition assignment includes broker %d, but no such broker is registered", kerr.InvalidReplicaAssignment, r)
			}
		}
	}
	slices.Sort(indexes)
	for i, index := range indexes {
		if index != int32(i) {
			return fmt.Errorf("%w: partitions must be numbered 0 to %d", kerr.InvalidReplicaAssignment, len(indexes)-1)
		}
	}
	return nil
}
