package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Crash tests of a stop, in process: the target node runs over vfs.Mem,
// and a fault lets the first k-1 syncs of the stop succeed and fails
// every operation from the k-th on, as if the process died there. The
// Mem crashes (only synced bytes and names survive), a new node opens on
// it, and the stop must end, by itself, where an uninterrupted stop ends.

const crashTopic, crashPartitions = "orders", int32(2)

// crashSource is a kfake source holding committed, aborted and plain
// records and a transaction left open in every partition of crashTopic.
type crashSource struct {
	addr    string
	batches map[int32][]byte // every batch of each partition, as the source serves them
}

func newCrashSource(t *testing.T) *crashSource {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(crashPartitions, crashTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	s := &crashSource{addr: cluster.ListenAddrs()[0], batches: map[int32][]byte{}}
	rng := rand.New(rand.NewPCG(13, 1))
	produceTransactions(t, s.addr, crashTopic, crashPartitions, rng)
	// Longer than the test: kfake must not abort it by itself.
	beginOpenTransaction(t, s.addr, crashTopic, crashPartitions, rng, kgo.TransactionTimeout(5*time.Minute))
	client := newClient(t, s.addr)
	for p := range crashPartitions {
		s.batches[p], _, _ = rawPartition(t, client, crashTopic, p)
	}
	return s
}

// caughtUpTarget returns a Mem holding a closed target node that mirrored
// the source's topic until it held every source batch, MIRRORING. Each
// crash run opens a copy of it (copyMem): catching up once is faster.
func (s *crashSource) caughtUpTarget(t *testing.T) *vfs.Mem {
	t.Helper()
	mem := vfs.NewMem()
	n := openCrashTarget(t, mem)
	startMirroring(t, n, s.addr, crashTopic)
	s.waitCaughtUp(t, n)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	return mem
}

// copyMem copies every directory and file of src into a new Mem, synced.
func copyMem(t *testing.T, src *vfs.Mem) *vfs.Mem {
	t.Helper()
	dst := vfs.NewMem()
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		if depth > 8 {
			t.Fatalf("copy: %s is deeper than a data directory goes", dir)
		}
		if err := dst.MkdirAll(dir); err != nil {
			t.Fatal(err)
		}
		names, err := src.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			name = path.Join(dir, name)
			from, err := src.Open(name)
			if errors.Is(err, syscall.EISDIR) {
				walk(name, depth+1)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			size, err := from.Size()
			if err != nil {
				t.Fatal(err)
			}
			data := make([]byte, size)
			if _, err := from.ReadAt(data, 0); err != nil && size > 0 {
				t.Fatal(err)
			}
			to, err := dst.Create(name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := to.Write(data); err != nil {
				t.Fatal(err)
			}
			for _, err := range []error{to.Sync(), to.Close(), from.Close()} {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := dst.SyncDir(dir); err != nil {
			t.Fatal(err)
		}
	}
	walk("/data", 0)
	return dst
}

// openCrashTarget opens the target node over mem with every append
// synced: what was mirrored before the stop survives a crash, so the
// stop's own writes are what a crash interrupts. (With FlushOS a power
// loss may also take the mirrored tail, and a stop then ends lower.)
func openCrashTarget(t *testing.T, mem *vfs.Mem) *Node {
	t.Helper()
	cfg := logstore.DefaultConfig()
	cfg.Flush = logstore.FlushEveryAppend
	n, err := OpenNode(NodeConfig{FS: mem, DataDir: "/data", Log: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitCaughtUp waits until n holds every source batch, MIRRORING.
func (s *crashSource) waitCaughtUp(t *testing.T, n *Node) {
	t.Helper()
	waitUntil(t, "the mirror to catch up", func() bool {
		for _, status := range describeMirror(t, n).Partitions {
			if status.State != "MIRRORING" {
				return false
			}
		}
		for p := range crashPartitions {
			local, err := n.LocalPartition(crashTopic, p)
			if err != nil || int64(local.Log().LogEndOffset()) != int64(endOffset(s.batches[p])) {
				return false
			}
		}
		return true
	})
}

// stoppedPartition is what a finished stop leaves of a partition.
type stoppedPartition struct {
	lastMirrorEpoch  int32
	lastMirrorOffset int64
	leaderEpoch      rb.Epoch // of the stop's markers
}

// checkStopped checks that every partition of n is STOPPED and holds the
// source's batches byte for byte, then exactly one ABORT marker (one
// transaction was open) and one MIRROR_PID_RESET, at one leader epoch
// above every mirrored one, and nothing else; that the topic takes a
// Produce. It returns what it found per partition.
func (s *crashSource) checkStopped(t *testing.T, n *Node) map[int32]stoppedPartition {
	t.Helper()
	out := map[int32]stoppedPartition{}
	statuses := describeMirror(t, n).Partitions
	if len(statuses) != int(crashPartitions) {
		t.Fatalf("%d partitions described, want %d", len(statuses), crashPartitions)
	}
	for _, status := range statuses {
		p, source := status.Partition, s.batches[status.Partition]
		if status.State != "STOPPED" {
			t.Fatalf("partition %d: %s (%s), want STOPPED", p, status.State, status.Error)
		}
		local := localPartition(t, n, crashTopic, p)
		held, err := local.Log().ReadBytes(nil, local.Log().LogStartOffset(), 1<<30, local.Log().LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		if len(held) < len(source) || string(held[:len(source)]) != string(source) {
			t.Fatalf("partition %d: the log (%d bytes, offsets [%d, %d)) does not start with the source's %d bytes (offsets [0, %d))",
				p, len(held), local.Log().LogStartOffset(), local.Log().LogEndOffset(), len(source), endOffset(source))
		}
		var kinds []string
		var epochs []rb.Epoch
		for it := rb.NewIter(held[len(source):], false); it.Next(); {
			b := it.Batch()
			epochs = append(epochs, b.LeaderEpoch())
			switch kind, err := records.ControlType(b); {
			case records.IsMirrorPIDReset(b):
				kinds = append(kinds, "MIRROR_PID_RESET")
			case err == nil && kind == records.ControlAbort:
				kinds = append(kinds, "ABORT")
			default:
				kinds = append(kinds, "other")
			}
		}
		mirrored := epochEntries(source)
		top := mirrored[len(mirrored)-1].Epoch
		if fmt.Sprint(kinds) != "[ABORT MIRROR_PID_RESET]" || epochs[0] != epochs[1] || epochs[0] <= top {
			t.Fatalf("partition %d: after the source's batches %v at epochs %v; want [ABORT MIRROR_PID_RESET] at one epoch above %d", p, kinds, epochs, top)
		}
		end := endOffset(source)
		if status.LastMirrorOffset != int64(end) || status.LastMirrorEpoch != int32(top) {
			t.Fatalf("partition %d: last mirror epoch %d offset %d, want %d %d", p, status.LastMirrorEpoch, status.LastMirrorOffset, top, end)
		}
		if offsets := local.Offsets(); offsets.HighWatermark != end+2 || offsets.LastStableOffset != offsets.HighWatermark {
			t.Fatalf("partition %d: offsets %+v, want high watermark and last stable offset %d", p, offsets, end+2)
		}
		batch := rb.Append(nil, rb.Spec{ProducerID: -1, Records: []rb.Record{{Value: []byte("after the stop")}}})
		if _, err := local.Produce(context.Background(), batch, netio.ProduceRequest{Acks: -1}); err != nil {
			t.Fatalf("partition %d: produce after the stop: %v", p, err)
		}
		out[p] = stoppedPartition{status.LastMirrorEpoch, status.LastMirrorOffset, epochs[0]}
	}
	return out
}

// errDied is the fault of every operation after the process "died".
var errDied = fmt.Errorf("the process died here: %w", vfs.ErrInjected)

// dieAtSync arms mem to fail its k-th sync (OpSync or OpSyncDir) from now
// and every operation after it. died reports whether it happened, syncs
// how many syncs it counted.
func dieAtSync(mem *vfs.Mem, k int32) (died func() bool, syncs func() int32) {
	var count atomic.Int32
	var dead atomic.Bool
	mem.SetFault(func(op vfs.Op, _ string) error {
		if !dead.Load() && (op == vfs.OpSync || op == vfs.OpSyncDir) && count.Add(1) >= k {
			dead.Store(true)
		}
		if dead.Load() {
			return errDied
		}
		return nil
	})
	return dead.Load, count.Load
}

// closeDead closes a node whose file system crashed under it, ignoring
// its errors, and fails if that does not return.
func closeDead(t *testing.T, n *Node) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = n.Close() // its files are gone: errors are expected
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("closing the crashed node hangs:\n%s", buf[:runtime.Stack(buf, true)])
	}
}

func stopTopic(ctx context.Context, n *Node) error {
	results, err := n.Mirrors().SetTopicsDesiredState(ctx, "m", netio.StopMirroring, netio.TopicSelection{Names: []string{crashTopic}})
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// stopDurable reports whether n's mirror "m" restarted with crashTopic
// stopped in its selection (mirror-m.json said so before the crash).
func stopDurable(t *testing.T, n *Node) bool {
	t.Helper()
	n.mirrorsMu.Lock()
	m := n.mirrors["m"]
	n.mirrorsMu.Unlock()
	if m == nil {
		t.Fatal("the mirror m is gone after the crash")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopped[crashTopic]
}

// TestStopResumesAfterCrash: for k = 1, 2, ..., the process dies at the
// k-th sync of a stop; the restarted node ends the stop by itself (or,
// when the stop was lost before its desired state was durable, after the
// operator sends it again) in the state an uninterrupted stop reaches.
func TestStopResumesAfterCrash(t *testing.T) {
	s := newCrashSource(t)
	ctx := context.Background()

	base := s.caughtUpTarget(t)
	mem := copyMem(t, base)
	n := openCrashTarget(t, mem)
	s.waitCaughtUp(t, n)
	_, syncs := dieAtSync(mem, 1<<30) // counts, never fires
	if err := stopTopic(ctx, n); err != nil {
		t.Fatalf("uninterrupted stop: %v", err)
	}
	t.Logf("an uninterrupted stop of %d partitions syncs %d times", crashPartitions, syncs())
	want := s.checkStopped(t, n)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	const syncsMax = 64 // a stop of three partitions syncs far fewer times
	for k := int32(1); ; k++ {
		if k > syncsMax {
			t.Fatalf("the stop still had not finished before sync %d", k)
		}
		t.Logf("k=%d", k) // which run a failure is in
		mem := copyMem(t, base)
		n := openCrashTarget(t, mem)
		s.waitCaughtUp(t, n)
		died, _ := dieAtSync(mem, k)
		stopErr := stopTopic(ctx, n)
		finished := !died()
		if finished && stopErr != nil {
			t.Fatalf("k=%d: the stop failed without a fault: %v", k, stopErr)
		}
		mem.Crash(rand.New(rand.NewPCG(uint64(k), 13)))
		closeDead(t, n)
		mem.SetFault(nil)

		n = openCrashTarget(t, mem)
		resumed := stopDurable(t, n)
		if !resumed {
			if finished {
				t.Fatalf("k=%d: an answered stop is not durable", k)
			}
			for _, status := range describeMirror(t, n).Partitions {
				if status.State == "STOPPING" || status.State == "STOPPED" {
					t.Fatalf("k=%d: partition %d %s with the stop not in the mirror's selection", k, status.Partition, status.State)
				}
			}
			s.waitCaughtUp(t, n)
			if err := stopTopic(ctx, n); err != nil {
				t.Fatalf("k=%d: the stop sent again: %v", k, err)
			}
		}
		waitUntil(t, fmt.Sprintf("k=%d: every partition STOPPED", k), func() bool {
			for _, status := range describeMirror(t, n).Partitions {
				if status.State != "STOPPED" {
					return false
				}
			}
			return true
		})
		got := s.checkStopped(t, n)
		for p := range crashPartitions {
			if got[p] != want[p] {
				t.Fatalf("k=%d: partition %d: %+v, an uninterrupted stop gives %+v", k, p, got[p], want[p])
			}
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("k=%d: stop answered %v; resumed by itself %v", k, stopErr, resumed)
		if finished {
			return
		}
	}
}

// endOffset is the offset after the last of batches.
func endOffset(batches []byte) rb.Offset {
	end := rb.Offset(0)
	for it := rb.NewIter(batches, false); it.Next(); {
		end = it.Batch().NextOffset()
	}
	return end
}
