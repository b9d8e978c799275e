package netio

import (
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The leader of a partition, as a NOT_LEADER_OR_FOLLOWER or
// FENCED_LEADER_EPOCH answer names it (KIP-951: Fetch v16+ and Produce
// v10+ carry the current leader and its endpoint, so that the client goes
// there without a Metadata round trip).

// ReplicaEpochPartition is a ReplicaPartition whose followers are fenced
// by the cluster's leader epoch for it, which may be below LeaderEpoch
// (the epoch its clients see: a mirror's keeps ahead of its source's
// epochs, which its batches carry). A follower's Fetch checks its
// CurrentLeaderEpoch against ReplicaLeaderEpoch; without it, against
// LeaderEpoch.
type ReplicaEpochPartition interface {
	ReplicaLeaderEpoch() rb.Epoch
}

// fencingEpoch is the leader epoch a fetch's CurrentLeaderEpoch is
// checked against.
func fencingEpoch(partition Partition, follower bool) rb.Epoch {
	if replica, ok := partition.(ReplicaEpochPartition); ok && follower {
		return replica.ReplicaLeaderEpoch()
	}
	return partition.LeaderEpoch()
}

// partitionLeader is the leader of a partition, its leader epoch, and its
// endpoint on the connection's listener (found false when the leader is
// unknown, or not among the live brokers). A cluster node answers from
// the cluster's view (cluster.go), for partitions it holds or not; a
// node alone leads its partitions, unless the partition says otherwise
// (ReplicatedPartition). partition is nil when this node holds none.
func (c *conn) partitionLeader(topic string, index int32, partition Partition) (leader int32, epoch rb.Epoch, endpoint Broker, found bool) {
	self := c.cluster()
	leader, epoch = self.NodeID, -1
	if c.clusterBackend() != nil {
		r, ok := c.replication(topic, index, partition)
		if !ok {
			return -1, -1, Broker{}, false
		}
		leader, epoch = r.Leader, r.LeaderEpoch
	} else if replicated, ok := partition.(ReplicatedPartition); ok {
		leader, _, _ = replicated.Replication()
	}
	if leader < 0 {
		return -1, -1, Broker{}, false
	}
	if partition != nil && (leader == self.NodeID || epoch < 0) {
		epoch = partition.LeaderEpoch() // ours, or the only one known
	}
	endpoint, found = c.brokerByID(leader)
	return leader, epoch, endpoint, found
}

// checkLeader answers NOT_LEADER_OR_FOLLOWER for a ReplicatedPartition
// another node leads (or none), as Kafka's Partition.getLocalLog does for
// a Fetch of the leader, after the current leader epoch check.
func checkLeader(partition Partition, self int32) error {
	replicated, ok := partition.(ReplicatedPartition)
	if !ok {
		return nil
	}
	if leader, _, _ := replicated.Replication(); leader != self {
		return kerr.NotLeaderForPartition
	}
	return nil
}
