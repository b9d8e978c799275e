package cluster

import (
	"cmp"
	"fmt"
	"slices"
)

// Placement: pure functions from live nodes and the current assignments to
// the assignments the controller must write. No I/O, no goroutines, no
// clock: the same input always gives the same output (ties break by node
// ID, partitions are visited in (topic, partition) order).

// NewPartition is a partition to be given replicas.
type NewPartition struct {
	TopicPartition
	TopicID string
}

// nodeLoad counts what a live node already carries.
type nodeLoad struct {
	node     Node
	leaders  int
	replicas int
}

// AssignReplicas places the partitions not yet in existing: each gets
// min(replicationFactor, live nodes not drained) distinct replicas (placeOne: the
// leader evens out leaderships, the followers replicas, spread over racks
// when nodes have racks). Counts include existing assignments, so
// a node that just joined gets the new partitions until it has its share.
// The result holds only the new partitions, each led by its first replica
// with leader epoch 0 and every replica in sync.
func AssignReplicas(live []Node, existing Assignments, partitions []NewPartition, replicationFactor int) (Assignments, error) {
	if replicationFactor < 1 {
		return nil, fmt.Errorf("cluster: replication factor %d", replicationFactor)
	}
	loads := make([]*nodeLoad, 0, len(live))
	byID := make(map[int32]*nodeLoad, len(live))
	for _, n := range live {
		if _, dup := byID[n.ID]; dup {
			return nil, fmt.Errorf("cluster: node %d listed twice as live", n.ID)
		}
		if n.Drained {
			continue
		}
		l := &nodeLoad{node: n}
		loads = append(loads, l)
		byID[n.ID] = l
	}
	if len(loads) == 0 {
		return nil, ErrNoLiveNodes
	}
	rf := min(replicationFactor, len(loads))
	slices.SortFunc(loads, func(a, b *nodeLoad) int { return cmp.Compare(a.node.ID, b.node.ID) })
	for _, a := range existing {
		for _, r := range a.Replicas {
			if l, ok := byID[r]; ok {
				l.replicas++
			}
		}
		if l, ok := byID[a.Leader]; ok {
			l.leaders++
		}
	}

	ordered := slices.Clone(partitions)
	slices.SortFunc(ordered, func(a, b NewPartition) int { return compareTopicPartition(a.TopicPartition, b.TopicPartition) })
	out := make(Assignments, len(ordered))
	for _, p := range ordered {
		if _, ok := existing[p.TopicPartition]; ok {
			continue
		}
		if _, ok := out[p.TopicPartition]; ok {
			continue
		}
		replicas := placeOne(loads, rf)
		out[p.TopicPartition] = Assignment{
			TopicID:  p.TopicID,
			Replicas: replicas,
			Leader:   replicas[0],
			ISR:      slices.Clone(replicas),
		}
	}
	return out, nil
}

// placeOne picks rf distinct nodes from loads (sorted by ID) and counts
// them. The leader, first, is the node leading the fewest partitions (then
// carrying the fewest replicas, then the lowest ID). Each follower is the
// node carrying the fewest replicas, preferring a rack the partition does
// not use yet, then the nearest after the leader in ID order (as Kafka's
// replica assignment walks the brokers from the leader): from an even start
// this keeps leaders and replicas each within one of even.
func placeOne(loads []*nodeLoad, rf int) []int32 {
	leader := 0
	for i, l := range loads {
		best := loads[leader]
		if cmp.Or(cmp.Compare(l.leaders, best.leaders), cmp.Compare(l.replicas, best.replicas)) < 0 {
			leader = i
		}
	}
	chosen := []*nodeLoad{loads[leader]}
	racks := map[string]bool{loads[leader].node.Rack: true}
	rackPenalty := func(l *nodeLoad) int {
		if l.node.Rack != "" && racks[l.node.Rack] {
			return 1
		}
		return 0
	}
	for len(chosen) < rf {
		var best *nodeLoad
		for step := 1; step < len(loads); step++ {
			l := loads[(leader+step)%len(loads)]
			if slices.Contains(chosen, l) {
				continue
			}
			if best == nil || cmp.Or(cmp.Compare(rackPenalty(l), rackPenalty(best)), cmp.Compare(l.replicas, best.replicas)) < 0 {
				best = l
			}
		}
		chosen = append(chosen, best)
		racks[best.node.Rack] = true
	}
	replicas := make([]int32, len(chosen))
	for i, l := range chosen {
		l.replicas++
		replicas[i] = l.node.ID
	}
	chosen[0].leaders++
	return replicas
}

// ElectLeaders returns the assignments that change when the live nodes are
// live: lost nodes leave the ISR (unless none of the ISR is live: the ISR
// then stays as it was, so that one of its members can lead again when it
// returns), and a partition whose leader is lost or drained, or that has
// none, gets a new leader (electLeader), with the leader epoch bumped. An
// out-of-sync replica is never elected: with no live in-sync replica the
// partition is leaderless (NoLeader), also with the epoch bumped if it had
// a leader. Drained nodes stay replicas and in the ISR.
func ElectLeaders(live []Node, existing Assignments) Assignments {
	nodes := make(map[int32]Node, len(live))
	for _, n := range live {
		nodes[n.ID] = n
	}
	out := make(Assignments)
	for tp, a := range existing {
		isr := make([]int32, 0, len(a.ISR))
		for _, r := range a.ISR {
			if _, ok := nodes[r]; ok {
				isr = append(isr, r)
			}
		}
		if len(isr) == 0 {
			isr = slices.Clone(a.ISR)
		}
		leader := electLeader(nodes, a.Replicas, isr, a.Leader)
		if leader == a.Leader && slices.Equal(isr, a.ISR) {
			continue
		}
		epoch := a.LeaderEpoch
		if leader != a.Leader {
			epoch++
		}
		out[tp] = Assignment{
			TopicID:     a.TopicID,
			Replicas:    slices.Clone(a.Replicas),
			Leader:      leader,
			LeaderEpoch: epoch,
			ISR:         isr,
		}
	}
	return out
}

// electLeader returns a partition's leader given the live nodes: the
// current one while it is live and not drained; else the first replica
// (in replica order, the preferred first) that is live, in the ISR and not
// drained; else the current one if it is live (drained, but no other
// in-sync replica can take over: moving would take the partition offline);
// else the first live in-sync replica even if drained; else NoLeader.
func electLeader(nodes map[int32]Node, replicas, isr []int32, current int32) int32 {
	if n, ok := nodes[current]; ok && !n.Drained {
		return current
	}
	for _, r := range replicas {
		if n, ok := nodes[r]; ok && !n.Drained && slices.Contains(isr, r) {
			return r
		}
	}
	if _, ok := nodes[current]; ok {
		return current
	}
	for _, r := range replicas {
		if _, ok := nodes[r]; ok && slices.Contains(isr, r) {
			return r
		}
	}
	return NoLeader
}

func compareTopicPartition(a, b TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}
