package netio

import (
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The leader of a partition, as a NOT_LEADER_OR_FOLLOWER or
// FENCED_LEADER_EPOCH answer names it (KIP-951: Fetch v16+ and Produce
// v10+ carry the current leader and its endpoint, so that the client goes
// there without a Metadata round trip).

// partitionLeader is the leader of partition, its leader epoch, and its
// endpoint on the listener (found false when the leader is unknown, or
// not among the live brokers). A partition that is not a
// ReplicatedPartition is led by this node.
func (s *Server) partitionLeader(l *Listener, partition Partition) (leader int32, epoch rb.Epoch, endpoint Broker, found bool) {
	cluster := advertisedCluster(s.backend.Cluster(), l)
	leader = cluster.NodeID
	if replicated, ok := partition.(ReplicatedPartition); ok {
		leader, _, _ = replicated.Replication()
	}
	if leader < 0 {
		return -1, -1, Broker{}, false
	}
	epoch = partition.LeaderEpoch()
	if leader == cluster.NodeID {
		return leader, epoch, Broker{NodeID: leader, Host: cluster.Host, Port: cluster.Port}, true
	}
	if nodes, ok := s.backend.(ClusterBackend); ok {
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
