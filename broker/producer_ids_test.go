package broker

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/vfs"
)

// TestProducerIDsFromCluster: with a cluster's allocator, IDs come from
// the blocks it hands out and nowhere else, a new block is taken when one
// runs out, and reserveAbove moves past a source's ID without going below
// the block the cluster gave.
func TestProducerIDsFromCluster(t *testing.T) {
	ids, err := openProducerIDs(vfs.NewMem(), "/data")
	if err != nil {
		t.Fatal(err)
	}
	ids.blockSize = 3
	var mu sync.Mutex
	next := int64(1000) // the cluster's next free ID
	var asked []int64
	ids.allocate = func(minStart, size int64) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, minStart)
		start := max(next, minStart)
		next = start + size
		return start, nil
	}
	ids.cluster.Store(true)
	var got []int64
	for range 4 {
		id, err := ids.next()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if want := []int64{1000, 1001, 1002, 1003}; !slices.Equal(got, want) {
		t.Fatalf("IDs %v, want %v from the cluster's blocks", got, want)
	}
	next = 5000 // other nodes took blocks meanwhile
	if err := ids.reserveAbove(1004); err != nil {
		t.Fatal(err)
	}
	id, err := ids.next()
	if err != nil {
		t.Fatal(err)
	}
	if id != 1005 {
		t.Fatalf("after reserveAbove(1004) inside the block: %d, want 1005", id)
	}
	if err := ids.reserveAbove(2000); err != nil { // past the block: a new one, from the cluster's next
		t.Fatal(err)
	}
	if id, _ := ids.next(); id != 5000 {
		t.Fatalf("after reserveAbove(2000) with the cluster at 5000: %d, want 5000 (never an ID of another node's block)", id)
	}

	// reserveAbove runs on the append path: it never waits for the
	// cluster. Its background reservation does, and next() after it.
	gate := make(chan struct{})
	ids.allocate = func(minStart, size int64) (int64, error) {
		<-gate
		mu.Lock()
		defer mu.Unlock()
		start := max(next, minStart)
		next = start + size
		return start, nil
	}
	returned := make(chan error, 1)
	go func() { returned <- ids.reserveAbove(7000) }()
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reserveAbove waited for the cluster's allocator")
	}
	close(gate)
	if id, _ := ids.next(); id != 7001 {
		t.Fatalf("after reserveAbove(7000) past the block: %d, want 7001", id)
	}
}
