package engine

// DescribeMirrors on a cluster (docs/cluster.md, issue 22: "mirrord
// mirrors --describe shows each partition's leader and ISR").
//
// A node runs the machines of the mirror partitions it leads only, but
// every partition's record is etcd's (cluster_mirror_states.go), read
// through the node's cache, as are the partitions' leader and ISR. So any
// node describes every partition of a mirror's cluster topics, each
// exactly once:
//
//   - a partition this node has a machine for: the machine's row (as a
//     node alone describes it: offsets, lag, source high watermark);
//   - any other: a row built from its etcd record (state, error, retry
//     count, last mirror epoch and offset at a stop, the source leader's
//     epoch), UNKNOWN without one; the source high watermark, lag and
//     lag time unknown (-1); the log end offset and the latest leader
//     epoch this node's replica's, if it holds one, else unknown.
//
// Every row has the leader and ISR the node's cache holds. failedOnly
// keeps the FAILED rows and those with an error, as on a node alone; the
// machines are listed unfiltered first, so that one the filter hides is
// not described again from etcd.

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/cluster"
	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
)

// describeClusterMirrors is clusterMirrors.DescribeMirrors: the node's
// own descriptions (the mirrors named, or all of them), each completed
// with the cluster's partitions.
func (n *Node) describeClusterMirrors(ctx context.Context, names []string, failedOnly bool) ([]netio.MirrorDescription, error) {
	described, err := n.Mirrors().DescribeMirrors(ctx, names, false)
	if err != nil {
		return nil, err
	}
	for i := range described {
		if described[i].Err == nil {
			n.describeClusterPartitions(&described[i], failedOnly)
		}
	}
	return described, nil
}

// describeClusterPartitions replaces d's partitions (this node's
// machines) with every partition of the mirror's cluster topics, sorted
// by topic, then partition.
func (n *Node) describeClusterPartitions(d *netio.MirrorDescription, failedOnly bool) {
	machines := make(map[logstore.TopicPartition]bool, len(d.Partitions))
	var rows []netio.MirrorPartitionStatus
	for _, status := range d.Partitions {
		machines[logstore.TopicPartition{Topic: status.Topic, Partition: status.Partition}] = true
		status.Leader, status.ISR = n.leaderAndISR(status.Topic, status.Partition)
		rows = appendDescribed(rows, status, failedOnly)
	}
	for topic, spec := range n.member.cache.MirrorTopics(d.Name) {
		id, idErr := rb.ParseTopicID(spec.TopicID)
		for index := range spec.Partitions {
			if machines[logstore.TopicPartition{Topic: topic, Partition: index}] {
				continue
			}
			status := n.describeFromRecord(d.Name, topic, id, index)
			if idErr != nil { // etcd's spec is damaged: say so on each of its partitions
				status.Error = fmt.Sprintf("engine: topic %s: %v", topic, idErr)
			}
			rows = appendDescribed(rows, status, failedOnly)
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	d.Partitions = rows
}

// appendDescribed appends status to rows, unless failedOnly and the
// partition neither FAILED nor has an error (mirror.describe's filter).
func appendDescribed(rows []netio.MirrorPartitionStatus, status netio.MirrorPartitionStatus, failedOnly bool) []netio.MirrorPartitionStatus {
	if failedOnly && status.State != mirrorstate.Failed.String() && status.Error == "" {
		return rows
	}
	return append(rows, status)
}

// describeFromRecord is the row of a mirror partition this node has no
// machine for: its etcd record's, with this node's replica's log end and
// latest epoch if it holds one. A topic ID that did not parse (the zero
// ID) finds no record.
func (n *Node) describeFromRecord(mirror, topic string, id rb.TopicID, index int32) netio.MirrorPartitionStatus {
	status := netio.MirrorPartitionStatus{Topic: topic, Partition: index, State: mirrorstate.Unknown.String(),
		SourceHighWatermark: -1, SourceHighWatermarkAge: -1, LogEndOffset: -1, LagTime: -1,
		LastMirrorEpoch: -1, LastMirrorOffset: -1, LeaderEpoch: -1, SourceLeaderEpoch: -1}
	status.Leader, status.ISR = n.leaderAndISR(topic, index)
	if id != (rb.TopicID{}) {
		if record, ok := n.states.get(MirrorStateKey{Mirror: mirror, TopicID: id, Partition: index}); ok {
			status.State, status.Error, status.RetryCount = record.State.String(), record.Error, retryCount(record)
			status.SourceLeaderEpoch = max(int32(record.SourceLeaderEpoch), -1)
			if record.State == mirrorstate.Stopping || record.State == mirrorstate.Stopped { // as the leader's machine shows them
				status.LastMirrorEpoch, status.LastMirrorOffset = int32(record.LastMirrorEpoch), int64(record.LastMirrorOffset)
			}
		}
	}
	if p, ok := n.replicaHere(topic, index); ok {
		status.LogEndOffset = int64(p.LogEndOffset())
		status.LeaderEpoch = max(int32(p.LatestEpoch()), -1)
	}
	return status
}

// replicaHere is this node's replica of the partition, if the cache
// places one here and its log is open (a node holds every partition of a
// topic of which one is placed here; only the replicas follow).
func (n *Node) replicaHere(topic string, index int32) (*broker.Partition, bool) {
	st, ok := n.member.cache.Partition(cluster.TopicPartition{Topic: topic, Partition: index})
	if !ok || !slices.Contains(st.Replicas, n.member.cfg.NodeID) {
		return nil, false
	}
	p, err := n.LocalPartition(topic, index)
	return p, err == nil
}

// leaderAndISR is the partition's leader (cluster.NoLeader: none) and ISR
// as the node's cache holds them; -1 and nil when it holds no assignment.
func (n *Node) leaderAndISR(topic string, index int32) (int32, []int32) {
	st, ok := n.member.cache.Partition(cluster.TopicPartition{Topic: topic, Partition: index})
	if !ok {
		return -1, nil
	}
	return max(st.Leader, -1), slices.Clone(st.ISR)
}
