package netio

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// newWaitingFetch is the fetchReply serveFetch makes of a sessionless
// req, without a connection.
func newWaitingFetch(server *Server, req *kmsg.FetchRequest) *fetchReply {
	f := &fetchReply{server: server, conn: &conn{server: server}, version: req.Version}
	f.addRequestPartitions(req)
	return f
}

// waitingFetch is a fetch served in its own goroutine.
type waitingFetch struct {
	f      *fetchReply
	done   chan error
	cancel context.CancelFunc
}

func startWaitingFetch(t *testing.T, server *Server, req *kmsg.FetchRequest) *waitingFetch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &waitingFetch{f: newWaitingFetch(server, req), done: make(chan error, 1), cancel: cancel}
	go func() { w.done <- w.f.fetch(ctx, req, ReadUncommitted) }()
	t.Cleanup(func() {
		cancel()
		<-w.done
		w.f.releaseRecords()
	})
	return w
}

// answer waits (10 s at most) for the fetch's end and returns the
// partitions it answers with records.
func (w *waitingFetch) answer(t *testing.T) []int32 {
	t.Helper()
	select {
	case err := <-w.done:
		w.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch is still waiting after 10s")
	}
	var withRecords []int32
	for _, p := range w.f.partitions {
		if p.records.Length > 0 {
			withRecords = append(withRecords, p.partition)
		}
	}
	return withRecords
}

// waitTestSetup is a topic of partitions and a waiting fetch of the
// first watched of them at their end.
func waitTestSetup(t *testing.T, partitions, watched int32, maxWait, minBytes int32) (*memBackend, *Server, *waitingFetch) {
	t.Helper()
	mem := newMemBackend()
	server := NewServer(Config{Backend: mem})
	info := fetchTestTopic(t, mem, "w", partitions)
	var parts []fetchTestPart
	for i := range watched {
		parts = append(parts, at(i, 0))
	}
	req := fetchTestRequest(18, info, parts...)
	req.MaxWaitMillis, req.MinBytes = maxWait, minBytes
	return mem, server, startWaitingFetch(t, server, req)
}

func waitTestPartition(t *testing.T, mem *memBackend, partition int32) *memPartition {
	t.Helper()
	p, err := mem.Partition("w", partition)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*memPartition)
}

// An append to any one of a waiting fetch's partitions wakes it, and the
// response carries that partition's records.
func TestFetchWaitWakesOnAnyPartition(t *testing.T) {
	const partitions = 100
	for _, appended := range []int32{0, 1, 50, partitions - 1} {
		t.Run(fmt.Sprint("partition ", appended), func(t *testing.T) {
			mem, server, w := waitTestSetup(t, partitions, partitions, 20_000, 1)
			fetchTestEventually(t, 10*time.Second, "waiting", func() bool { return server.sessions.stats.waiting.Load() == 1 })
			for i := range int32(partitions) {
				if n := waitTestPartition(t, mem, i).watchers.watching(); n != 1 {
					t.Fatalf("partition %d has %d waiting fetches, want 1", i, n)
				}
			}
			start := time.Now()
			fetchTestProduce(t, waitTestPartition(t, mem, appended), "a")
			if got := w.answer(t); fmt.Sprint(got) != fmt.Sprint([]int32{appended}) {
				t.Fatalf("partitions with records %v, want [%d]", got, appended)
			}
			if elapsed := time.Since(start); elapsed > 10*time.Second {
				t.Fatalf("woken after %v", elapsed)
			}
			if waits := server.sessions.stats.waits.Load(); waits != 1 {
				t.Fatalf("%d waits, want 1", waits)
			}
		})
	}
}

// A waiting fetch answers at MaxWait when nothing arrives, and its
// registrations are dropped by the partitions' next registration.
func TestFetchWaitTimesOutAtMaxWait(t *testing.T) {
	const maxWait = 150 * time.Millisecond
	start := time.Now()
	mem, server, w := waitTestSetup(t, 3, 3, int32(maxWait/time.Millisecond), 1)
	if got := w.answer(t); len(got) != 0 {
		t.Fatalf("partitions with records %v, want none", got)
	}
	if elapsed := time.Since(start); elapsed < maxWait {
		t.Fatalf("answered after %v, MaxWait is %v", elapsed, maxWait)
	}
	if waiting := server.sessions.stats.waiting.Load(); waiting != 0 {
		t.Fatalf("%d fetches still waiting", waiting)
	}
	p := waitTestPartition(t, mem, 0)
	for range 10 { // ended fetches never pile up on a partition
		ended := newFetchWaiter()
		p.watchers.watch(ended, 0, p.watchers.Changed())
		ended.end()
	}
	if n := p.watchers.watching(); n > 2 {
		t.Fatalf("partition 0 holds %d registrations of ended fetches, want at most 2", n)
	}
}

// MinBytes counts the bytes of every partition: appends to two
// partitions, each below MinBytes, answer together, and each wake-up that
// finds too few bytes waits again.
func TestFetchWaitMinBytesAcrossPartitions(t *testing.T) {
	batchBytes := func() int32 {
		mem := newMemBackend()
		fetchTestTopic(t, mem, "size", 1, []string{"a"})
		p, _ := mem.Partition("size", 0)
		read, _ := p.Read(0, 1<<20, ReadUncommitted, true)
		return int32(read.Records.Length)
	}()
	mem, server, w := waitTestSetup(t, 10, 10, 20_000, 2*batchBytes)
	waits := &server.sessions.stats.waits
	fetchTestEventually(t, 10*time.Second, "waiting", func() bool { return waits.Load() == 1 })
	fetchTestProduce(t, waitTestPartition(t, mem, 3), "a")
	fetchTestEventually(t, 10*time.Second, "waiting again with one batch", func() bool { return waits.Load() == 2 })
	if len(w.done) > 0 {
		t.Fatal("answered with one batch, MinBytes is two")
	}
	fetchTestProduce(t, waitTestPartition(t, mem, 7), "b")
	if got := w.answer(t); fmt.Sprint(got) != "[3 7]" {
		t.Fatalf("partitions with records %v, want [3 7]", got)
	}
}

// Appends to partitions a fetch does not watch signal nothing: the
// signal is synchronous (under the appender's call), so once they
// returned the fetch has no wake-up pending and was never woken.
func TestFetchWaitNotWokenByOtherPartitions(t *testing.T) {
	mem, server, w := waitTestSetup(t, 10, 3, 20_000, 1)
	fetchTestEventually(t, 10*time.Second, "waiting", func() bool { return server.sessions.stats.waiting.Load() == 1 })
	for i := int32(3); i < 10; i++ {
		p := waitTestPartition(t, mem, i)
		fetchTestProduce(t, p, "other")
		if n := p.watchers.watching(); n != 0 {
			t.Fatalf("unwatched partition %d has %d waiting fetches", i, n)
		}
	}
	if waits := server.sessions.stats.waits.Load(); waits != 1 || len(w.done) > 0 {
		t.Fatalf("after appends elsewhere: %d waits, answered %v; want 1 wait, still waiting", waits, len(w.done) > 0)
	}
	fetchTestProduce(t, waitTestPartition(t, mem, 2), "mine")
	if got := w.answer(t); fmt.Sprint(got) != "[2]" {
		t.Fatalf("partitions with records %v, want [2]", got)
	}
}

// A wake-up re-reads only the partitions that signalled: after the
// first pass (every partition once), an append to one partition reads
// that one alone while MinBytes is not reached.
func TestFetchWaitReadsOnlyChangedPartitions(t *testing.T) {
	const partitions = 50
	mem, server, w := waitTestSetup(t, partitions, partitions, 20_000, 1<<20)
	waits := &server.sessions.stats.waits
	fetchTestEventually(t, 10*time.Second, "waiting", func() bool { return waits.Load() == 1 })
	reads := func() (total int) {
		for i := range int32(partitions) {
			p := waitTestPartition(t, mem, i)
			p.mu.Lock()
			total += p.reads
			p.mu.Unlock()
		}
		return total
	}
	before := reads()
	fetchTestProduce(t, waitTestPartition(t, mem, 17), "a")
	fetchTestEventually(t, 10*time.Second, "waiting again", func() bool { return waits.Load() == 2 })
	if got := reads() - before; got != 1 {
		t.Fatalf("a wake-up read %d partitions, want 1", got)
	}
	w.cancel()
}
