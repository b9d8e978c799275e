package engine

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/mirrord/mirrord/cluster"
	"github.com/mirrord/mirrord/cluster/etcdtest"
	"github.com/mirrord/mirrord/engine/mirrorstate"
	rb "github.com/mirrord/mirrord/recordbatch"
)

// TestClusterStates: the records of a cluster's mirror partitions in etcd.
// A node reads its own write at once, though its cache has not caught up;
// a node that did not see another's write fails its next one in etcd
// (ErrMirrorStateConflict) rather than overwrite it; a record of a state
// epoch not above the stored one is refused before etcd; STOPPED records
// answer failback's last mirror epochs, whichever node stored them.
func TestClusterStates(t *testing.T) {
	etcd, err := etcdtest.Start(1)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := cluster.NewClient(etcd.Endpoints(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	const id = "states-test"
	created, err := cluster.CreateMirror(ctx, client, id, "m", map[string]string{"bootstrap.servers": "127.0.0.1:9"})
	if err != nil {
		t.Fatal(err)
	}
	member := func() *clusterNode {
		c := &clusterNode{id: id, client: client, ctx: ctx, log: slog.Default(), cache: cluster.StartCache(ctx, client, id)}
		if err := c.cache.WaitRevision(ctx, created.ModRevision); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Node a's cache stops at the mirror's creation: it sees nothing else.
	stale := member()
	stale.cache.Close()
	live := member()
	defer live.cache.Close()
	a, b := newClusterStates(stale), newClusterStates(live)
	key := testStateKey("m", 0)

	if err := a.putAll([]stateEntry{{key, mirroringValue(1)}}); err != nil {
		t.Fatal(err)
	}
	if got, ok := a.get(key); !ok || got.StateEpoch != 1 {
		t.Fatalf("a reads its own write as %+v (%v), want state epoch 1", got, ok)
	}
	waitRecord(t, b, key, 1)
	if err := b.putAll([]stateEntry{{key, failedValue(2, "taken over")}}); err != nil {
		t.Fatal(err)
	}
	if err := a.putAll([]stateEntry{{key, mirroringValue(3)}}); !errors.Is(err, cluster.ErrMirrorStateConflict) {
		t.Fatalf("a write over b's unseen one: %v, want ErrMirrorStateConflict", err)
	}
	waitRecord(t, b, key, 2)
	if err := b.putAll([]stateEntry{{key, mirroringValue(2)}}); err == nil {
		t.Fatal("a record of the stored state epoch was written")
	}

	stopped := mirrorstate.Record{State: mirrorstate.Stopped, Previous: mirrorstate.Stopping, StateEpoch: 3, LeaderEpoch: 7,
		SourceLeaderEpoch: rb.NoEpoch, NextRetryAtMillis: -1, LastMirrorEpoch: 5, LastMirrorOffset: 1200, TruncateTo: -1}
	if err := b.putAll([]stateEntry{{key, stopped}}); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, b, key, 3)
	lme, ok := b.stoppedEpochs()[MirrorStateKey{TopicID: key.TopicID, Partition: key.Partition}]
	if !ok || lme.epoch != 5 || lme.offset != 1200 {
		t.Fatalf("stopped epochs %+v (%v), want epoch 5 offset 1200", lme, ok)
	}
}

// waitRecord polls s until key's record has state epoch epoch.
func waitRecord(t *testing.T, s *clusterStates, key MirrorStateKey, epoch mirrorstate.StateEpoch) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if got, ok := s.get(key); ok && got.StateEpoch == epoch {
			return
		}
		if time.Now().After(deadline) {
			got, ok := s.get(key)
			t.Fatalf("%v: record %+v (%v), want state epoch %d", key, got, ok, epoch)
		}
		<-tick.C
	}
}
