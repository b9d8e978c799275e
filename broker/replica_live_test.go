package broker

import (
	"slices"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
)

// TestReplicaDeadFollowerHoldsNothing: a follower that caught up and then
// died, once the cluster drops it from the ISR, no longer holds the
// high watermark back, though it caught up within the lag time; while its
// node counts as live, it does (Kafka's rule for a follower about to
// join the ISR).
func TestReplicaDeadFollowerHoldsNothing(t *testing.T) {
	node, p, _ := replicaNode(t, nil)
	p.SetRole(Role{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, PartitionEpoch: 10})
	if _, err := produceAcks(p, 1, 4, 0); err != nil {
		t.Fatal(err)
	}
	fetchAs(t, p, 2, 4)
	fetchAs(t, p, 3, 4)
	if hw := p.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d, want 4", hw)
	}
	if _, err := produceAcks(p, 1, 2, 0); err != nil {
		t.Fatal(err)
	}
	fetchAs(t, p, 2, 6) // node 3 dies at 4, caught up a moment ago
	node.SetLiveNodes([]int32{1, 2, 3})
	p.SetRole(Role{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, PartitionEpoch: 11})
	if hw := p.HighWatermark(); hw != rb.Offset(4) {
		t.Fatalf("high watermark %d with node 3 live and caught up at 4, want 4", hw)
	}
	node.SetLiveNodes([]int32{1, 2})
	p.SetRole(Role{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, PartitionEpoch: 12})
	if hw := p.HighWatermark(); hw != 6 {
		t.Fatalf("high watermark %d once node 3 is not live, want 6", hw)
	}
}

// TestReplicaDeadFollowerDoesNotRejoin: on an idle partition a dead
// follower's last fetch stays at the high watermark; once the cluster has
// dropped it from the ISR, the leader does not propose it back.
func TestReplicaDeadFollowerDoesNotRejoin(t *testing.T) {
	node, p, clock := replicaNode(t, nil)
	p.SetRole(Role{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, PartitionEpoch: 10})
	if _, err := produceAcks(p, 1, 3, 0); err != nil {
		t.Fatal(err)
	}
	fetchAs(t, p, 2, 3) // caught up, then node 2 dies
	node.SetLiveNodes([]int32{1})
	p.SetRole(Role{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, PartitionEpoch: 11})
	clock.advance(time.Second)
	if proposal, ok := p.proposeISR(clock.Now()); ok {
		t.Fatalf("the ISR goroutine proposes %v with node 2 dead", proposal.isr)
	}
	node.SetLiveNodes([]int32{1, 2}) // back: its next fetch at the high watermark takes it in
	fetchAs(t, p, 2, 3)
	if proposal, ok := p.proposeISR(clock.Now()); !ok || !slices.Equal(proposal.isr, []int32{1, 2}) {
		t.Fatalf("node 2 live and caught up: proposal %v %v, want [1 2]", proposal.isr, ok)
	}
}
