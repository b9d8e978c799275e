package cluster

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// joinNodes registers nodes ids, each closed at the end of the test.
func joinNodes(t *testing.T, clusterID string, ids ...int32) map[int32]*Registration {
	t.Helper()
	client, ctx := testClient(t), testContext(t)
	out := map[int32]*Registration{}
	for _, id := range ids {
		r, err := Join(ctx, client, clusterID, Node{ID: id, Host: "127.0.0.1", Port: 9000 + id}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = r
		t.Cleanup(func() { r.Close(testContext(t)) })
	}
	return out
}

func TestControllerFencing(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	joinNodes(t, clusterID, 1, 2, 3)
	first, err := Campaign(ctx, client, clusterID, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	placed, err := first.CreatePartitions(ctx, newPartitions("orders", 3), 3)
	if err != nil || len(placed) != 3 {
		t.Fatalf("create: %v, %v", placed, err)
	}
	state, err := readState(ctx, client, clusterID)
	if err != nil || len(state.partitions) != 3 {
		t.Fatalf("read back: %+v, %v", state.partitions, err)
	}
	tp := TopicPartition{"orders", 0}
	read := state.partitions[tp]

	// A second candidate waits while the first holds the election.
	type result struct {
		c   *Controller
		err error
	}
	second := make(chan result, 1)
	secondClient := testClient(t)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := Campaign(ctx, secondClient, clusterID, 2, 5*time.Second)
		second <- result{c, err}
	}()
	defer wg.Wait()

	// The first controller's session closes: it is deposed, and its write,
	// computed from what it read while it was controller, is refused.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	stale := read.Assignment
	stale.ISR = []int32{stale.Leader}
	err = first.Apply(ctx, []Write{{Partition: tp, Assignment: stale, ModRevision: read.ModRevision}})
	if !errors.Is(err, ErrNotController) {
		t.Fatalf("deposed controller's write: %v, want ErrNotController", err)
	}
	var r result
	select {
	case r = <-second:
	case <-ctx.Done():
		t.Fatal("the second candidate was not elected")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.c.Close()
	after, err := readState(ctx, client, clusterID)
	if err != nil || after.partitions[tp].ModRevision != read.ModRevision {
		t.Fatalf("the refused write changed %s: %+v, %v", tp, after.partitions[tp], err)
	}

	// The new controller's write succeeds; the same write again is stale.
	write := Write{Partition: tp, Assignment: stale, ModRevision: read.ModRevision}
	if err := r.c.Apply(ctx, []Write{write}); err != nil {
		t.Fatalf("new controller's write: %v", err)
	}
	if err := r.c.Apply(ctx, []Write{write}); !errors.Is(err, ErrStaleMetadata) {
		t.Fatalf("write at an old ModRevision: %v, want ErrStaleMetadata", err)
	}
	// Creating a partition that exists is stale too.
	if err := r.c.Apply(ctx, []Write{{Partition: tp, Assignment: stale}}); !errors.Is(err, ErrStaleMetadata) {
		t.Fatalf("re-create of %s: %v, want ErrStaleMetadata", tp, err)
	}
}

// TestControllerMovesLeadership: the leader of a partition leaves; the
// controller moves its leaderships to the next in-sync replica with the
// epoch bumped and takes it out of the ISR.
func TestControllerMovesLeadership(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	registrations := joinNodes(t, clusterID, 1, 2, 3)
	c, err := Campaign(ctx, client, clusterID, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	placed, err := c.CreatePartitions(ctx, newPartitions("events", 6), 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := registrations[2].Close(ctx); err != nil {
		t.Fatal(err)
	}
	changed, err := c.ElectLeaders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	state, err := readState(ctx, client, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != 6 { // node 2 was in every ISR
		t.Errorf("%d partitions changed, want 6", len(changed))
	}
	for tp, before := range placed {
		after := state.partitions[tp]
		if slices.Contains(after.ISR, 2) || after.Leader == 2 || after.Leader == NoLeader {
			t.Errorf("%s: %+v still has node 2 or no leader", tp, after)
		}
		wantEpoch := before.LeaderEpoch
		if before.Leader == 2 {
			wantEpoch++
		}
		if after.LeaderEpoch != wantEpoch {
			t.Errorf("%s: leader %d -> %d, epoch %d -> %d, want %d", tp, before.Leader, after.Leader, before.LeaderEpoch, after.LeaderEpoch, wantEpoch)
		}
	}
	// Nothing more to do: a second pass writes nothing.
	if again, err := c.ElectLeaders(ctx); err != nil || len(again) != 0 {
		t.Fatalf("second pass: %v, %v", again, err)
	}
}

func TestAlterISR(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	joinNodes(t, clusterID, 1, 2, 3)
	c, err := Campaign(ctx, client, clusterID, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreatePartitions(ctx, newPartitions("isr", 1), 3); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"isr", 0}
	state, err := readState(ctx, client, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	p := state.partitions[tp]
	leader := p.Leader
	var follower int32
	for _, r := range p.Replicas {
		if r != leader {
			follower = r
			break
		}
	}
	shrunk := slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return r == follower })

	if _, err := AlterISR(ctx, client, clusterID, tp, p.LeaderEpoch, p.ModRevision, []int32{follower}); !errors.Is(err, ErrInvalidISR) {
		t.Errorf("ISR without the leader: %v, want ErrInvalidISR", err)
	}
	if _, err := AlterISR(ctx, client, clusterID, tp, p.LeaderEpoch+1, p.ModRevision, shrunk); !errors.Is(err, ErrStaleMetadata) {
		t.Errorf("wrong leader epoch: %v, want ErrStaleMetadata", err)
	}
	if _, err := AlterISR(ctx, client, clusterID, TopicPartition{"isr", 9}, 0, 1, shrunk); !errors.Is(err, ErrUnknownPartition) {
		t.Errorf("unknown partition: %v, want ErrUnknownPartition", err)
	}

	// Two changes from the same revision race: exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, isr := range [][]int32{shrunk, {leader}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = AlterISR(ctx, client, clusterID, tp, p.LeaderEpoch, p.ModRevision, isr)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrStaleMetadata):
			t.Fatalf("racing AlterISR: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d racing AlterISR calls won (%v), want 1", won, errs)
	}
	current, err := readState(ctx, client, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	q := current.partitions[tp]
	// The winner's revision moves on: a change from it succeeds once.
	next, err := AlterISR(ctx, client, clusterID, tp, q.LeaderEpoch, q.ModRevision, p.ISR)
	if err != nil || !slices.Equal(next.ISR, p.ISR) || next.ModRevision <= q.ModRevision {
		t.Fatalf("expand back: %+v, %v", next, err)
	}
	if _, err := AlterISR(ctx, client, clusterID, tp, q.LeaderEpoch, q.ModRevision, shrunk); !errors.Is(err, ErrStaleMetadata) {
		t.Fatalf("change from a replaced revision: %v, want ErrStaleMetadata", err)
	}
}

// TestControllerManyPartitions writes more partitions than one transaction
// holds (writesPerTxn) and reads them all back.
func TestControllerManyPartitions(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	joinNodes(t, clusterID, 1, 2)
	c, err := Campaign(ctx, client, clusterID, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const partitions = 2*writesPerTxn + 3
	placed, err := c.CreatePartitions(ctx, newPartitions("wide", partitions), 2)
	if err != nil || len(placed) != partitions {
		t.Fatalf("create: %d placed, %v", len(placed), err)
	}
	state, err := readState(ctx, client, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	if len(state.partitions) != partitions {
		t.Fatalf("%d partitions read back, want %d", len(state.partitions), partitions)
	}
	for tp, a := range placed {
		if got := state.partitions[tp].Assignment; !slices.Equal(got.Replicas, a.Replicas) || got.Leader != a.Leader {
			t.Fatalf("%s read back %+v, wrote %+v", tp, got, a)
		}
	}
	twice := Write{Partition: TopicPartition{"wide", 0}, Assignment: placed[TopicPartition{"wide", 0}], ModRevision: 1}
	if err := c.Apply(ctx, []Write{twice, twice}); err == nil {
		t.Fatal("a partition written twice in one Apply was accepted")
	}
}
