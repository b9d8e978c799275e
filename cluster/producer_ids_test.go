package cluster

import (
	"slices"
	"sync"
	"testing"
)

// TestAllocateProducerIDs: blocks allocated at once by many nodes never
// overlap, and none starts below what was asked.
func TestAllocateProducerIDs(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	const nodes, blocks, size = 4, 10, 100
	var (
		mu     sync.Mutex
		starts []int64
		wg     sync.WaitGroup
	)
	for range nodes {
		wg.Go(func() {
			for range blocks {
				start, err := AllocateProducerIDs(ctx, client, clusterID, 0, size)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				starts = append(starts, start)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(starts)
	for i := 1; i < len(starts); i++ {
		if starts[i] < starts[i-1]+size {
			t.Fatalf("blocks from %d and %d overlap", starts[i-1], starts[i])
		}
	}
	if len(starts) != nodes*blocks {
		t.Fatalf("%d blocks, want %d", len(starts), nodes*blocks)
	}
	above, err := AllocateProducerIDs(ctx, client, clusterID, 1_000_000, size)
	if err != nil || above != 1_000_000 {
		t.Fatalf("a block from 1000000: %d, %v", above, err)
	}
	if next, err := AllocateProducerIDs(ctx, client, clusterID, 0, size); err != nil || next != 1_000_000+size {
		t.Fatalf("the next block: %d, %v", next, err)
	}
}
