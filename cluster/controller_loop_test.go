package cluster

import (
	"maps"
	"slices"
	"strconv"
	"testing"
)

// planState builds a state for planControl: live nodes, specs (each at
// ModRevision 10+i) and partitions (each at ModRevision 100).
func planState(live []Node, specs map[string]TopicSpec, partitions Assignments) clusterState {
	s := newClusterState()
	for _, n := range live {
		s.nodes[n.ID] = Node{ID: n.ID, Host: n.Host, Port: n.Port}
		if n.Drained {
			s.drained[n.ID] = true
		}
	}
	for i, name := range slices.Sorted(maps.Keys(specs)) {
		s.topics[name] = TopicState{TopicSpec: specs[name], ModRevision: int64(10 + i)}
	}
	for tp, a := range partitions {
		s.partitions[tp] = PartitionState{Assignment: a, ModRevision: 100}
	}
	return s
}

func TestPlanControl(t *testing.T) {
	led := func(id string, leader int32, replicas ...int32) Assignment {
		return Assignment{TopicID: id, Replicas: replicas, Leader: leader, ISR: slices.Clone(replicas)}
	}
	tp := func(topic string, n int32) TopicPartition { return TopicPartition{topic, n} }
	tests := []struct {
		name       string
		live       []Node
		specs      map[string]TopicSpec
		partitions Assignments
		defaultRF  int
		// want, per partition: "place/<rf>", "elect/<leader>", "delete"
		want     map[TopicPartition]string
		unplaced int
	}{
		{"new spec placed with the default factor", nodes(1, 2, 3),
			map[string]TopicSpec{"a": {TopicID: "A", Partitions: 3}}, nil, 2,
			map[TopicPartition]string{tp("a", 0): "place/2", tp("a", 1): "place/2", tp("a", 2): "place/2"}, 0},
		{"spec's factor over the default, capped by the live nodes", nodes(1, 2),
			map[string]TopicSpec{"a": {TopicID: "A", Partitions: 1, ReplicationFactor: 3}}, nil, 1,
			map[TopicPartition]string{tp("a", 0): "place/2"}, 0},
		{"grown spec: only the new partitions", nodes(1, 2),
			map[string]TopicSpec{"a": {TopicID: "A", Partitions: 2}},
			Assignments{tp("a", 0): led("A", 1, 1, 2)}, 2,
			map[TopicPartition]string{tp("a", 1): "place/2"}, 0},
		{"steady: nothing", nodes(1, 2),
			map[string]TopicSpec{"a": {TopicID: "A", Partitions: 1}},
			Assignments{tp("a", 0): led("A", 1, 1, 2)}, 2, map[TopicPartition]string{}, 0},
		{"spec gone: its partitions deleted", nodes(1, 2), nil,
			Assignments{tp("a", 0): led("A", 1, 1, 2), tp("a", 1): led("A", 2, 2, 1)}, 2,
			map[TopicPartition]string{tp("a", 0): "delete", tp("a", 1): "delete"}, 0},
		{"spec of another topic ID: old partition deleted, placed after", nodes(1, 2),
			map[string]TopicSpec{"a": {TopicID: "B", Partitions: 2}},
			Assignments{tp("a", 0): led("A", 1, 1, 2)}, 2,
			map[TopicPartition]string{tp("a", 0): "delete", tp("a", 1): "place/2"}, 0},
		{"leader lost: elected, lost node out of the ISR", nodes(2, 3),
			map[string]TopicSpec{"a": {TopicID: "A", Partitions: 1}},
			Assignments{tp("a", 0): led("A", 1, 1, 2, 3)}, 3,
			map[TopicPartition]string{tp("a", 0): "elect/2"}, 0},
		{"leader drained: moved", drain(nodes(1, 2, 3), 1),
			map[string]TopicSpec{"a": {TopicID: "A", Partitions: 1}},
			Assignments{tp("a", 0): led("A", 1, 1, 3, 2)}, 3,
			map[TopicPartition]string{tp("a", 0): "elect/3"}, 0},
		{"every node drained: nothing placed, elections still made", drain(nodes(2, 3), 2, 3),
			map[string]TopicSpec{"a": {TopicID: "A", Partitions: 1}, "b": {TopicID: "B", Partitions: 2}},
			Assignments{tp("a", 0): led("A", 1, 1, 2)}, 3,
			map[TopicPartition]string{tp("a", 0): "elect/2"}, 2},
		{"no live node: nothing placed", nil,
			map[string]TopicSpec{"b": {TopicID: "B", Partitions: 2}}, nil, 3,
			map[TopicPartition]string{}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state := planState(tc.live, tc.specs, tc.partitions)
			plan, err := planControl(state, tc.defaultRF)
			if err != nil {
				t.Fatal(err)
			}
			got := map[TopicPartition]string{}
			for _, op := range plan.ops {
				spec := state.topics[op.Partition.Topic]
				switch {
				case op.delete:
					got[op.Partition] = "delete"
					if !op.guardSpec || op.specRevision != spec.ModRevision || op.ModRevision != 100 {
						t.Errorf("%s: delete %+v not guarded by spec revision %d and partition revision 100", op.Partition, op, spec.ModRevision)
					}
				case op.ModRevision == 0:
					got[op.Partition] = "place/" + strconv.Itoa(len(op.Assignment.Replicas))
					if !op.guardSpec || op.specRevision != spec.ModRevision || op.Assignment.TopicID != spec.TopicID {
						t.Errorf("%s: placement %+v not guarded by spec %+v", op.Partition, op, spec)
					}
					for _, r := range op.Assignment.Replicas {
						if !slices.ContainsFunc(tc.live, func(n Node) bool { return n.ID == r && !n.Drained }) {
							t.Errorf("%s: placed on %d, not a live undrained node", op.Partition, r)
						}
					}
				default:
					got[op.Partition] = "elect/" + strconv.Itoa(int(op.Assignment.Leader))
					if op.ModRevision != 100 || op.Assignment.LeaderEpoch != 1 {
						t.Errorf("%s: election %+v, want from revision 100 with epoch 1", op.Partition, op)
					}
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("ops %v, want %v", got, tc.want)
			}
			for p, w := range tc.want {
				if got[p] != w {
					t.Errorf("%s: %q, want %q (all: %v)", p, got[p], w, got)
				}
			}
			if plan.unplaced != tc.unplaced {
				t.Errorf("%d unplaced, want %d", plan.unplaced, tc.unplaced)
			}
		})
	}
}
