package engine

// clusterBackend is the netio.Backend of a cluster node: the node, with
// the topics and their placement answered from the cluster (etcd through
// the cache), and the topic admin calls made as etcd transactions.
//
// What a cluster does not do yet is refused with an error naming it:
// a mirror's --stop (cluster_mirrors.go) and transactional producers (the
// coordinator writes markers only into partitions it holds).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mirrord/mirrord/cluster"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
)

type clusterBackend struct{ *Node }

var _ netio.ClusterBackend = clusterBackend{}

func (b clusterBackend) cache() *cluster.Cache { return b.member.cache }

// Topics are the cluster's topics, by name.
func (b clusterBackend) Topics() []netio.TopicInfo {
	topics := b.cache().TopicIDs()
	out := make([]netio.TopicInfo, 0, len(topics))
	for name, t := range topics {
		if info, ok := topicInfo(name, t); ok {
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func topicInfo(name string, spec cluster.TopicIDCount) (netio.TopicInfo, bool) {
	id, err := rb.ParseTopicID(spec.TopicID)
	if err != nil {
		return netio.TopicInfo{}, false
	}
	return netio.TopicInfo{Name: name, ID: id, Partitions: spec.Partitions}, true
}

// Topic reads one topic's spec: every Produce, Fetch by name and
// ListOffsets asks, so it copies no other.
func (b clusterBackend) Topic(name string) (netio.TopicInfo, bool) {
	st, ok := b.cache().Topic(name)
	if !ok {
		return netio.TopicInfo{}, false
	}
	return topicInfo(name, cluster.TopicIDCount{TopicID: st.TopicID, Partitions: st.Partitions})
}

// TopicByID finds a topic by ID (Fetch v13+ names every partition so, a
// follower's at every round): through the node's own index when it holds
// the topic (its local copy has the cluster's ID, reconcile sees to it),
// else by a scan of the cluster's specs.
func (b clusterBackend) TopicByID(id netio.TopicID) (netio.TopicInfo, bool) {
	want := id.String()
	if local, ok := b.Node.Node.TopicByID(id); ok && !local.Internal {
		if t, ok := b.Topic(local.Name); ok && t.ID == id {
			return t, true
		}
	}
	for name, t := range b.cache().TopicIDs() {
		if t.TopicID == want {
			return topicInfo(name, t)
		}
	}
	return netio.TopicInfo{}, false
}

// CreateTopic checks the topic as this node would create it, then puts its
// spec in etcd (the one transaction that decides between two creates of a
// name), and answers once the controller has placed every partition.
func (b clusterBackend) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string, validateOnly bool) (netio.TopicInfo, error) {
	return b.CreateReplicatedTopic(ctx, name, partitions, -1, configs, validateOnly)
}

// CreateReplicatedTopic is CreateTopic with a replication factor (-1:
// default.replication.factor; the controller caps either by the live
// nodes).
func (b clusterBackend) CreateReplicatedTopic(ctx context.Context, name string, partitions int32, replicationFactor int16, configs map[string]string, validateOnly bool) (netio.TopicInfo, error) {
	if _, ok := b.Topic(name); ok {
		return netio.TopicInfo{}, kerr.TopicAlreadyExists
	}
	info, err := b.Node.Node.CreateTopic(ctx, name, partitions, configs, true)
	if err != nil || validateOnly {
		return info, err
	}
	info.ID = rb.NewTopicID()
	spec := cluster.TopicSpec{TopicID: info.ID.String(), Partitions: info.Partitions, ReplicationFactor: int(max(replicationFactor, 0)), Configs: configs}
	st, err := cluster.CreateTopic(ctx, b.member.client, b.member.id, name, spec)
	if err != nil {
		if errors.Is(err, cluster.ErrTopicExists) {
			return netio.TopicInfo{}, kerr.TopicAlreadyExists
		}
		return netio.TopicInfo{}, fmt.Errorf("engine: create topic %s: %w", name, err)
	}
	if err := b.waitPlaced(ctx, name, st.ModRevision); err != nil {
		return info, err
	}
	if p, ok := b.cache().Partition(cluster.TopicPartition{Topic: name}); ok {
		info.ReplicationFactor = int16(len(p.Replicas))
	}
	return info, nil
}

// waitPlaced waits until the cache shows every partition of the topic
// placed, as Kafka's CreateTopics answers once the controller committed.
func (b clusterBackend) waitPlaced(ctx context.Context, name string, revision int64) error {
	ctx, cancel := context.WithTimeout(ctx, clusterCreateTopicWait)
	defer cancel()
	if err := b.cache().WaitTopicPlaced(ctx, name, revision); err != nil {
		return fmt.Errorf("engine: topic %s: the controller has not placed it: %w: %w", name, err, kerr.RequestTimedOut)
	}
	return nil
}

func (b clusterBackend) DeleteTopic(ctx context.Context, name string) error {
	if _, err := cluster.DeleteTopic(ctx, b.member.client, b.member.id, name); err != nil {
		if errors.Is(err, cluster.ErrUnknownTopic) {
			return kerr.UnknownTopicOrPartition
		}
		return fmt.Errorf("engine: delete topic %s: %w", name, err)
	}
	return nil
}

func (b clusterBackend) CreatePartitions(ctx context.Context, name string, count int32, validateOnly bool) error {
	t, ok := b.Topic(name)
	switch {
	case !ok:
		return kerr.UnknownTopicOrPartition
	case count < t.Partitions:
		return fmt.Errorf("topic %s has %d partitions, which is more than the %d asked: %w", name, t.Partitions, count, kerr.InvalidPartitions)
	case count == t.Partitions:
		return fmt.Errorf("topic %s already has %d partitions: %w", name, count, kerr.InvalidPartitions)
	case validateOnly:
		return nil
	}
	st, err := cluster.GrowTopic(ctx, b.member.client, b.member.id, name, count)
	if err != nil {
		if errors.Is(err, cluster.ErrUnknownTopic) {
			return kerr.UnknownTopicOrPartition
		}
		return fmt.Errorf("engine: create partitions of %s: %w", name, err)
	}
	return b.waitPlaced(ctx, name, st.ModRevision)
}

// Partition is the local replica, whose role answers for it (a follower
// or a non-replica refuses what only a leader does); a partition the
// cluster has elsewhere is NOT_LEADER_OR_FOLLOWER, as a Kafka broker
// answers for a partition it does not host.
func (b clusterBackend) Partition(topic string, partition int32) (netio.Partition, error) {
	if p, err := b.Node.Node.Partition(topic, partition); err == nil {
		return p, nil
	}
	if _, ok := b.cache().Partition(cluster.TopicPartition{Topic: topic, Partition: partition}); ok {
		return nil, kerr.NotLeaderForPartition
	}
	return nil, kerr.UnknownTopicOrPartition
}

// Brokers are the live nodes at their registered addresses. Every
// listener answers the node's one registered address: a node of a
// cluster advertises its first listener.
func (b clusterBackend) Brokers(string) []netio.Broker {
	live := b.cache().LiveNodes()
	out := make([]netio.Broker, 0, len(live))
	for _, n := range live {
		out = append(out, netio.Broker{NodeID: n.ID, Host: n.Host, Port: n.Port, Rack: n.Rack})
	}
	return out
}

func (b clusterBackend) ControllerID() int32 { return b.cache().ControllerID() }

func (b clusterBackend) Replication(topic string, partition int32) (netio.Replication, bool) {
	st, ok := b.cache().Partition(cluster.TopicPartition{Topic: topic, Partition: partition})
	if !ok {
		return netio.Replication{}, false
	}
	return netio.Replication{Leader: st.Leader, LeaderEpoch: rb.Epoch(st.LeaderEpoch), Replicas: slices.Clone(st.Replicas), ISR: slices.Clone(st.ISR)}, true
}

// Coordinator is the controller, for every group (and transactional ID):
// one node every member agrees on, which moves only when the controller
// goes (a node coming back does not take the role back, as it would if
// the lowest ID coordinated, splitting a group between the node its
// members still talk to and the one new members are sent to). The
// groups' state is that node's own: groups are not replicated yet, so
// committed offsets stay behind when the role moves (docs/cluster.md).
func (b clusterBackend) Coordinator(int8, string) (netio.Broker, bool) {
	id := b.ControllerID()
	for _, n := range b.Brokers("") {
		if n.NodeID == id {
			return n, true
		}
	}
	return netio.Broker{}, false
}

// errClusterTransactions refuses transactional producers on a cluster
// node: the transaction coordinator writes its markers into the
// partitions it holds, and in a cluster the others are led elsewhere.
var errClusterTransactions = fmt.Errorf("transactions do not run on a mirrord cluster yet (idempotent producers do): %w", kerr.InvalidRequest)

// Transactions hands out producer IDs (the cluster's blocks) to
// idempotent producers and refuses transactional ones.
func (b clusterBackend) Transactions() netio.Transactions {
	return clusterTransactions{b.Node.Transactions()}
}

type clusterTransactions struct{ netio.Transactions }

func (t clusterTransactions) InitProducerID(ctx context.Context, transactionalID string, timeoutMillis int32, producerID int64, producerEpoch int16) (int64, int16, error) {
	if transactionalID != "" {
		return -1, -1, errClusterTransactions
	}
	return t.Transactions.InitProducerID(ctx, transactionalID, timeoutMillis, producerID, producerEpoch)
}

// Mirrors are the cluster's mirrors, in etcd (cluster_mirrors.go).
func (b clusterBackend) Mirrors() netio.MirrorAdmin { return clusterMirrors{b.Node} }
