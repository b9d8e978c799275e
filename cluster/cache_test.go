package cluster

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestCacheConverges drives registry, controller and AlterISR writes while
// a cache watches, and requires the cache to equal a fresh read after each.
func TestCacheConverges(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	cache := StartCache(ctx, client, clusterID)
	defer cache.Close()
	converged := func(what string) {
		t.Helper()
		waitFor(t, 15*time.Second, "cache converges after "+what, func() (bool, error) {
			want, err := readState(ctx, client, clusterID)
			if err != nil {
				return false, err
			}
			got, _ := cache.Partitions()
			return reflect.DeepEqual(got, want.partitions) && slices.Equal(cache.LiveNodes(), want.liveNodes()), nil
		})
	}
	converged("start")
	registrations := joinNodes(t, clusterID, 1, 2, 3)
	converged("joins")
	if !slices.Equal(nodeIDs(cache.LiveNodes()), []int32{1, 2, 3}) {
		t.Fatalf("live nodes %v", cache.LiveNodes())
	}
	c, err := Campaign(ctx, client, clusterID, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreatePartitions(ctx, newPartitions("a", 4), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreatePartitions(ctx, newPartitions("b", 2), 3); err != nil {
		t.Fatal(err)
	}
	converged("creates")
	if got, _ := cache.Partitions(); len(got) != 6 {
		t.Fatalf("cache has %d partitions, want 6", len(got))
	}
	tp := TopicPartition{"b", 1}
	p, ok := cache.Partition(tp)
	if !ok {
		t.Fatalf("%s not cached", tp)
	}
	written, err := AlterISR(ctx, client, clusterID, tp, p.LeaderEpoch, p.ModRevision, []int32{p.Leader})
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.WaitRevision(ctx, written.ModRevision); err != nil {
		t.Fatal(err)
	}
	if got, _ := cache.Partition(tp); !reflect.DeepEqual(got, written) {
		t.Fatalf("cache has %+v after AlterISR, want %+v", got, written)
	}
	// A watcher of the live nodes hears node 3 leave.
	changed := cache.Changed()
	if err := registrations[3].Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no change seen after node 3 left")
	}
	waitFor(t, 15*time.Second, "node 3 leaves the cache's live nodes", func() (bool, error) {
		return slices.Equal(nodeIDs(cache.LiveNodes()), []int32{1, 2}), nil
	})
	if _, err := c.ElectLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	converged("a node's loss and the leader moves")
	if slices.Contains(nodeIDs(cache.LiveNodes()), 3) {
		t.Fatalf("node 3 still live in the cache: %v", cache.LiveNodes())
	}
	if err := cache.Err(); err != nil {
		t.Fatalf("cache error: %v", err)
	}
}

// TestCacheWatchCompacted: a cache that must watch from a compacted
// revision reads the prefix again (a resync) and has every write.
func TestCacheWatchCompacted(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	reg := joinNodes(t, clusterID, 1)
	before, err := readState(ctx, client, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg[1].Close(ctx); err != nil {
		t.Fatal(err)
	}
	joinNodes(t, clusterID, 2)
	resp, err := client.Get(ctx, "/") // the current revision
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	// A cache whose last read is before the compaction resyncs.
	cache := startCache(ctx, client, clusterID, before)
	defer cache.Close()
	waitFor(t, 15*time.Second, "cache resyncs to node 2 alone", func() (bool, error) {
		return slices.Equal(nodeIDs(cache.LiveNodes()), []int32{2}), nil
	})
	cache.mu.Lock()
	resyncs := cache.resyncs
	cache.mu.Unlock()
	if resyncs != 1 {
		t.Fatalf("%d resyncs, want 1", resyncs)
	}
	// And the watch from the compacted revision itself says why it ended.
	stale := &Cache{client: client, clusterID: clusterID, state: before, changed: make(chan struct{})}
	if err := stale.follow(ctx, before.revision+1); !errors.Is(err, errWatchEnded) {
		t.Fatalf("watch from compacted revision %d: %v, want errWatchEnded", before.revision+1, err)
	}
}
