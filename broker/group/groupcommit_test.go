package group

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// syncingStore is a GroupCommitStore over a MemoryStore: Write keeps the
// records, Sync counts, blocks while the test holds gate, and fails with
// the error set.
type syncingStore struct {
	*MemoryStore
	gate sync.Mutex

	mu      sync.Mutex
	writes  int
	syncs   int
	syncErr error
}

func (s *syncingStore) Write(records []Record) error {
	s.mu.Lock()
	s.writes++
	s.mu.Unlock()
	return s.MemoryStore.Append(records)
}

func (s *syncingStore) Sync() error {
	s.gate.Lock()
	defer s.gate.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncs++
	return s.syncErr
}

func (s *syncingStore) counts() (writes, syncs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes, s.syncs
}

// TestGroupCommit: the commits waiting in the loop's queue are written
// and made durable by one Sync, and none is answered before it; a failed
// Sync fails the commits it held and every later request.
func TestGroupCommit(t *testing.T) {
	store := &syncingStore{MemoryStore: &MemoryStore{}}
	c, err := New(DefaultConfig(), store)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	const committers = 16
	store.gate.Lock() // the first Sync waits: the other commits queue behind it
	var wg sync.WaitGroup
	answered := make(chan error, committers)
	for i := range committers {
		wg.Go(func() {
			resp, err := c.OffsetCommit(ctx, commitRequest(8, "g", "", -1, map[int32]int64{int32(i): int64(i)}))
			if err == nil {
				err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
			}
			answered <- err
		})
	}
	pollUntil(t, "every commit to be written or queued behind the first Sync", func() bool {
		writes, _ := store.counts()
		return writes >= 1 && len(c.calls)+writes >= committers
	})
	select {
	case err := <-answered:
		t.Fatalf("a commit was answered (%v) before its Sync", err)
	default:
	}
	store.gate.Unlock()
	wg.Wait()
	close(answered)
	for err := range answered {
		if err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	writes, syncs := store.counts()
	if writes != committers || syncs >= committers {
		t.Fatalf("%d writes and %d syncs for %d commits, want %d writes and fewer syncs", writes, syncs, committers, committers)
	}
	t.Logf("%d commits: %d syncs", committers, syncs)

	store.mu.Lock()
	store.syncErr = errors.New("disk gone")
	store.mu.Unlock()
	if _, err := c.OffsetCommit(ctx, commitRequest(8, "g", "", -1, map[int32]int64{0: 100})); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("commit over a failing sync: %v, want ErrStoreFailed", err)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 9
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
	if _, err := c.OffsetFetch(ctx, fetch); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("fetch after a failed sync: %v, want ErrStoreFailed (the groups may be ahead of the disk)", err)
	}
}

// pollUntil checks cond every millisecond until it holds, failing the test
// after answerWait.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(answerWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
