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

// partitionLeader is the leader of a partition, its leader epoch, and
// its endpoint on the listener (found false when the leader is unknown,
// or not among the live brokers): as the local partition says, or nil
// (this node does not hold it) as the cluster says. A local partition
// that is not a ReplicatedPartition is led by this node.
func (s *Server) partitionLeader(l *Listener, topic string, index int32, partition Partition) (leader int32, epoch rb.Epoch, endpoint Broker, found bool) {
	cluster := advertisedCluster(s.backend.Cluster(), l)
	replicated, isReplicated := partition.(ReplicatedPartition)
	nodes, isCluster := s.backend.(ClusterBackend)
	switch {
	case partition == nil && isCluster:
		r, ok := nodes.Replication(topic, index)
		if !ok {
			return -1, -1, Broker{}, false
		}
		leader, epoch = r.Leader, r.LeaderEpoch
	case partition == nil:
		return -1, -1, Broker{}, false
	case isReplicated:
		leader, _, _ = replicated.Replication()
		epoch = partition.LeaderEpoch()
	default:
		leader, epoch = cluster.NodeID, partition.LeaderEpoch()
	}
	if leader < 0 {
		return -1, -1, Broker{}, false
	}
	if leader == cluster.NodeID {
		return leader, epoch, Broker{NodeID: leader, Host: cluster.Host, Port: cluster.Port}, true
	}
	if isCluster {
		name := ""
		if l != nil {
			name = l.Name
		}
		for _, b := range nodes.Brokers(name) {
			if b.NodeID == leader {
				return leader, epoch, b, true
			}
		}
	}
	return leader, epoch, Broker{}, false
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
