package cluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func nodes(ids ...int32) []Node {
	out := make([]Node, len(ids))
	for i, id := range ids {
		out[i] = Node{ID: id, Host: "127.0.0.1", Port: 9092 + id}
	}
	return out
}

func newPartitions(topic string, n int32) []NewPartition {
	out := make([]NewPartition, n)
	for i := range n {
		out[i] = NewPartition{TopicPartition: TopicPartition{topic, i}, TopicID: topic + "-id"}
	}
	return out
}

// counts returns, per node, the leaderships and the replicas it carries.
func counts(as Assignments) (leaders, replicas map[int32]int) {
	leaders, replicas = map[int32]int{}, map[int32]int{}
	for _, a := range as {
		if a.Leader != NoLeader {
			leaders[a.Leader]++
		}
		for _, r := range a.Replicas {
			replicas[r]++
		}
	}
	return leaders, replicas
}

// spread returns max-min of the counts over ids.
func spread(count map[int32]int, ids []Node) int {
	lo, hi := count[ids[0].ID], count[ids[0].ID]
	for _, n := range ids {
		lo, hi = min(lo, count[n.ID]), max(hi, count[n.ID])
	}
	return hi - lo
}

func TestAssignReplicasSpread(t *testing.T) {
	tests := []struct {
		name       string
		live       []Node
		partitions int32
		rf         int
		wantRF     int
	}{
		{"one node", nodes(1), 4, 3, 1},
		{"three nodes rf3", nodes(1, 2, 3), 6, 3, 3},
		{"three nodes rf2", nodes(1, 2, 3), 7, 2, 2},
		{"five nodes rf3", nodes(10, 11, 12, 13, 14), 20, 3, 3},
		{"rf capped by live", nodes(1, 2), 5, 3, 2},
		{"rf1", nodes(1, 2, 3, 4), 9, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AssignReplicas(tc.live, nil, newPartitions("t", tc.partitions), tc.rf)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != int(tc.partitions) {
				t.Fatalf("%d partitions placed, want %d", len(got), tc.partitions)
			}
			for tp, a := range got {
				if len(a.Replicas) != tc.wantRF || a.valid() != nil || a.Leader != a.Replicas[0] || a.LeaderEpoch != 0 || !slices.Equal(a.ISR, a.Replicas) {
					t.Errorf("%s: %+v (want %d replicas, leader first, all in sync)", tp, a, tc.wantRF)
				}
			}
			leaders, replicas := counts(got)
			if s := spread(leaders, tc.live); s > 1 {
				t.Errorf("leaders %v: spread %d > 1", leaders, s)
			}
			if s := spread(replicas, tc.live); s > 1 {
				t.Errorf("replicas %v: spread %d > 1", replicas, s)
			}
		})
	}
}

func TestAssignReplicasJoiningNodeGetsShare(t *testing.T) {
	existing, err := AssignReplicas(nodes(1, 2), nil, newPartitions("old", 4), 2)
	if err != nil {
		t.Fatal(err)
	}
	live := nodes(1, 2, 3)
	got, err := AssignReplicas(live, existing, newPartitions("new", 2), 1)
	if err != nil {
		t.Fatal(err)
	}
	for tp, a := range got {
		if !slices.Equal(a.Replicas, []int32{3}) {
			t.Errorf("%s on %v: the empty node 3 should take the new partitions", tp, a.Replicas)
		}
	}
	// Already placed partitions are left alone.
	again, err := AssignReplicas(live, existing, newPartitions("old", 4), 3)
	if err != nil || len(again) != 0 {
		t.Fatalf("re-placing existing partitions: %v, %v", again, err)
	}
}

func TestAssignReplicasRacks(t *testing.T) {
	live := []Node{{ID: 1, Rack: "a"}, {ID: 2, Rack: "a"}, {ID: 3, Rack: "b"}, {ID: 4, Rack: "b"}, {ID: 5, Rack: "c"}, {ID: 6, Rack: "c"}}
	rack := map[int32]string{}
	for _, n := range live {
		rack[n.ID] = n.Rack
	}
	got, err := AssignReplicas(live, nil, newPartitions("t", 12), 3)
	if err != nil {
		t.Fatal(err)
	}
	for tp, a := range got {
		seen := map[string]bool{}
		for _, r := range a.Replicas {
			if seen[rack[r]] {
				t.Errorf("%s: replicas %v share rack %s", tp, a.Replicas, rack[r])
			}
			seen[rack[r]] = true
		}
	}
	leaders, replicas := counts(got)
	if spread(leaders, live) > 1 || spread(replicas, live) > 1 {
		t.Errorf("leaders %v replicas %v not even", leaders, replicas)
	}
}

func TestAssignReplicasErrors(t *testing.T) {
	if _, err := AssignReplicas(nil, nil, newPartitions("t", 1), 1); !errors.Is(err, ErrNoLiveNodes) {
		t.Errorf("no live nodes: %v", err)
	}
	if _, err := AssignReplicas(nodes(1), nil, newPartitions("t", 1), 0); err == nil {
		t.Error("replication factor 0 accepted")
	}
	if _, err := AssignReplicas(nodes(1, 1), nil, newPartitions("t", 1), 1); err == nil {
		t.Error("a node listed twice accepted")
	}
	if _, err := AssignReplicas(drain(nodes(1, 2), 1, 2), nil, newPartitions("t", 1), 1); !errors.Is(err, ErrNoLiveNodes) {
		t.Errorf("every live node drained: %v", err)
	}
}

// drain marks ids drained in ns.
func drain(ns []Node, ids ...int32) []Node {
	for i := range ns {
		ns[i].Drained = slices.Contains(ids, ns[i].ID)
	}
	return ns
}

// TestAssignReplicasSkipsDrained: nothing new goes to a drained node, and
// the replication factor is capped by the undrained live nodes.
func TestAssignReplicasSkipsDrained(t *testing.T) {
	got, err := AssignReplicas(drain(nodes(1, 2, 3, 4), 2), nil, newPartitions("t", 12), 3)
	if err != nil {
		t.Fatal(err)
	}
	for tp, a := range got {
		if len(a.Replicas) != 3 || slices.Contains(a.Replicas, 2) {
			t.Errorf("%s: %+v, want 3 replicas without drained node 2", tp, a)
		}
	}
	got, err = AssignReplicas(drain(nodes(1, 2, 3), 2, 3), nil, newPartitions("t", 2), 3)
	if err != nil {
		t.Fatal(err)
	}
	for tp, a := range got {
		if !slices.Equal(a.Replicas, []int32{1}) {
			t.Errorf("%s: %+v, want node 1 alone", tp, a)
		}
	}
}

func TestElectLeaders(t *testing.T) {
	tp := TopicPartition{"t", 0}
	tests := []struct {
		name string
		live []Node
		in   Assignment
		want *Assignment // nil: no change
	}{
		{"all live: no change", nodes(1, 2, 3),
			Assignment{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2, 3}}, nil},
		{"leader lost: first in-sync live replica leads, epoch+1", nodes(2, 3),
			Assignment{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2, 3}},
			&Assignment{Replicas: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 5, ISR: []int32{2, 3}}},
		{"leader lost: out-of-sync replica 2 skipped", nodes(2, 3),
			Assignment{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 3}},
			&Assignment{Replicas: []int32{1, 2, 3}, Leader: 3, LeaderEpoch: 5, ISR: []int32{3}}},
		{"leader lost, no in-sync live replica: leaderless, ISR kept", nodes(2, 3),
			Assignment{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1}},
			&Assignment{Replicas: []int32{1, 2, 3}, Leader: NoLeader, LeaderEpoch: 5, ISR: []int32{1}}},
		{"follower lost: leaves the ISR, same leader and epoch", nodes(1, 2),
			Assignment{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2, 3}},
			&Assignment{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2}}},
		{"leaderless, in-sync replica returns: it leads, epoch+1", nodes(1, 2),
			Assignment{Replicas: []int32{1, 2, 3}, Leader: NoLeader, LeaderEpoch: 5, ISR: []int32{1}},
			&Assignment{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 6, ISR: []int32{1}}},
		{"leaderless, only out-of-sync replicas live: no change", nodes(2, 3),
			Assignment{Replicas: []int32{1, 2, 3}, Leader: NoLeader, LeaderEpoch: 5, ISR: []int32{1}}, nil},
		{"nothing live", nil,
			Assignment{Replicas: []int32{1, 2}, Leader: 2, LeaderEpoch: 0, ISR: []int32{1, 2}},
			&Assignment{Replicas: []int32{1, 2}, Leader: NoLeader, LeaderEpoch: 1, ISR: []int32{1, 2}}},
		{"leader drained: first in-sync undrained replica leads, epoch+1, ISR kept", drain(nodes(1, 2, 3), 1),
			Assignment{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2, 3}},
			&Assignment{Replicas: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 5, ISR: []int32{1, 2, 3}}},
		{"leader drained: out-of-sync replica 2 skipped", drain(nodes(1, 2, 3), 1),
			Assignment{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 3}},
			&Assignment{Replicas: []int32{1, 2, 3}, Leader: 3, LeaderEpoch: 5, ISR: []int32{1, 3}}},
		{"leader drained, alone in sync: it keeps leading", drain(nodes(1, 2, 3), 1),
			Assignment{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1}}, nil},
		{"follower drained: no change", drain(nodes(1, 2, 3), 2),
			Assignment{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2, 3}}, nil},
		{"leader lost, undrained replica preferred over a drained one", drain(nodes(2, 3), 2),
			Assignment{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2, 3}},
			&Assignment{Replicas: []int32{1, 2, 3}, Leader: 3, LeaderEpoch: 5, ISR: []int32{2, 3}}},
		{"leader lost, only a drained replica in sync: it leads rather than none", drain(nodes(2, 3), 2),
			Assignment{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2}},
			&Assignment{Replicas: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 5, ISR: []int32{2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ElectLeaders(tc.live, Assignments{tp: tc.in})
			if tc.want == nil {
				if len(got) != 0 {
					t.Fatalf("got %+v, want no change", got)
				}
				return
			}
			a, ok := got[tp]
			if !ok || len(got) != 1 {
				t.Fatalf("got %+v, want %+v", got, *tc.want)
			}
			if !slices.Equal(a.Replicas, tc.want.Replicas) || a.Leader != tc.want.Leader || a.LeaderEpoch != tc.want.LeaderEpoch || !slices.Equal(a.ISR, tc.want.ISR) {
				t.Fatalf("got %+v, want %+v", a, *tc.want)
			}
		})
	}
}

// TestPlacementRandomized runs seeded random sequences of node losses and
// returns, topic creations and leader-made ISR changes through the
// placement functions, and checks the invariants after every step.
func TestPlacementRandomized(t *testing.T) {
	const rounds, steps = 40, 60
	for round := range rounds {
		seed := uint64(round) + 1
		rng := rand.New(rand.NewPCG(seed, 0x636c7573746572))
		if err := placementRound(rng, steps); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

func placementRound(rng *rand.Rand, steps int) error {
	all := nodes(1, 2, 3, 4, 5, 6)
	for i := range all {
		all[i].Rack = fmt.Sprintf("r%d", rng.IntN(3))
	}
	isLive := map[int32]bool{}
	for _, n := range all {
		isLive[n.ID] = rng.IntN(4) != 0
	}
	liveNodes := func() []Node {
		var out []Node
		for _, n := range all {
			if isLive[n.ID] {
				out = append(out, n)
			}
		}
		return out
	}
	state := Assignments{}
	wantRF := map[TopicPartition]int{}
	topics := 0
	for step := range steps {
		before := cloneAssignments(state)
		switch op := rng.IntN(4); op {
		case 0: // a node is lost or returns
			n := all[rng.IntN(len(all))].ID
			isLive[n] = !isLive[n]
		case 1: // a new topic
			live := liveNodes()
			rf := 1 + rng.IntN(4)
			ps := newPartitions(fmt.Sprintf("t%d", topics), int32(1+rng.IntN(5)))
			topics++
			placed, err := AssignReplicas(live, state, ps, rf)
			if len(live) == 0 {
				if !errors.Is(err, ErrNoLiveNodes) {
					return fmt.Errorf("step %d: no live nodes gave %v", step, err)
				}
				break
			}
			if err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			for tp, a := range placed {
				state[tp] = a
				wantRF[tp] = min(rf, len(live))
			}
		case 2, 3: // a live leader shrinks or expands its ISR (AlterISR)
			for tp, a := range state {
				if a.Leader == NoLeader || !isLive[a.Leader] || rng.IntN(3) != 0 {
					continue
				}
				r := a.Replicas[rng.IntN(len(a.Replicas))]
				switch {
				case r != a.Leader && slices.Contains(a.ISR, r):
					a.ISR = slices.DeleteFunc(slices.Clone(a.ISR), func(x int32) bool { return x == r })
				case isLive[r] && !slices.Contains(a.ISR, r):
					a.ISR = append(slices.Clone(a.ISR), r)
				}
				state[tp] = a
			}
		}
		// The controller reacts to the live set after every step.
		for tp, a := range ElectLeaders(liveNodes(), state) {
			state[tp] = a
		}
		if err := checkPlacement(before, state, wantRF, isLive); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
	}
	return nil
}

func checkPlacement(before, after Assignments, wantRF map[TopicPartition]int, isLive map[int32]bool) error {
	for tp, a := range after {
		if err := a.valid(); err != nil {
			return fmt.Errorf("%s %+v: %w", tp, a, err)
		}
		if len(a.Replicas) != wantRF[tp] {
			return fmt.Errorf("%s: %d replicas, want %d", tp, len(a.Replicas), wantRF[tp])
		}
		liveInSync := slices.ContainsFunc(a.ISR, func(r int32) bool { return isLive[r] })
		if liveInSync != (a.Leader != NoLeader) {
			return fmt.Errorf("%s %+v: a live in-sync replica exists = %v but leader %d", tp, a, liveInSync, a.Leader)
		}
		if a.Leader != NoLeader && !isLive[a.Leader] {
			return fmt.Errorf("%s %+v: leader %d is not live", tp, a, a.Leader)
		}
		old, ok := before[tp]
		if !ok {
			continue
		}
		if a.LeaderEpoch < old.LeaderEpoch {
			return fmt.Errorf("%s: leader epoch went down from %d to %d", tp, old.LeaderEpoch, a.LeaderEpoch)
		}
		if a.Leader != old.Leader {
			if a.LeaderEpoch <= old.LeaderEpoch {
				return fmt.Errorf("%s: leader %d -> %d without an epoch bump", tp, old.Leader, a.Leader)
			}
			if a.Leader != NoLeader && !slices.Contains(old.ISR, a.Leader) {
				return fmt.Errorf("%s: out-of-sync replica %d elected (ISR was %v)", tp, a.Leader, old.ISR)
			}
		}
	}
	return nil
}

func cloneAssignments(as Assignments) Assignments {
	out := make(Assignments, len(as))
	for tp, a := range as {
		out[tp] = a
	}
	return out
}

// TestAssignReplicasEvenFromEmpty places 1 to 40 partitions on 1 to 8 nodes
// with replication factors 1 to 4: leaders and replicas each stay within one
// of even.
func TestAssignReplicasEvenFromEmpty(t *testing.T) {
	for n := int32(1); n <= 8; n++ {
		var ids []int32
		for id := range n {
			ids = append(ids, 100+id)
		}
		live := nodes(ids...)
		for rf := 1; rf <= 4; rf++ {
			for p := int32(1); p <= 40; p++ {
				got, err := AssignReplicas(live, nil, newPartitions("t", p), rf)
				if err != nil {
					t.Fatal(err)
				}
				leaders, replicas := counts(got)
				if spread(leaders, live) > 1 || spread(replicas, live) > 1 {
					t.Fatalf("%d nodes, rf %d, %d partitions: leaders %v replicas %v", n, rf, p, leaders, replicas)
				}
			}
		}
	}
}
