package logstore

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
	"golang.org/x/sys/unix"
)

// benchSet returns size bytes of batches of batchSize bytes (1 KiB
// records), with offsets from 0.
func benchSet(size, batchSize int) []byte {
	value := make([]byte, 1000)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	records := make([]rb.Record, max(1, (batchSize-rb.HeaderSize)/(len(value)+8)))
	for i := range records {
		records[i] = rb.Record{Value: value}
	}
	var out []byte
	for offset := rb.Offset(0); len(out) < size; offset += rb.Offset(len(records)) {
		out = rb.Append(out, rb.Spec{BaseOffset: offset, BaseTimestamp: 1_700_000_000_000, ProducerID: -1, Records: records})
	}
	return out
}

// restamp moves the batches of set to start at next, as a source would
// have assigned them; it returns the offset after them.
func restamp(set []byte, next rb.Offset) rb.Offset {
	for it := rb.NewIter(set, false); it.Next(); {
		it.Batch().SetBaseOffset(next)
		next = it.Batch().NextOffset()
	}
	return next
}

// BenchmarkAppend appends batch sets through the mirror path (Append, the
// source's offsets re-stamped per call) and, between appends with the
// timer stopped, writes the same bytes with plain write(2) to a plain file:
// both see the same page cache and writeback pressure. It reports the
// log's MB/s (from SetBytes), the raw MB/s, and their ratio.
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct {
		name      string
		setSize   int
		batchSize int
		flush     FlushPolicy
	}{
		{"set=16KiB/flush=os", 16 << 10, 16 << 10, FlushOS},
		{"set=1MiB/flush=os", 1 << 20, 16 << 10, FlushOS},
		{"set=1MiB/flush=every", 1 << 20, 16 << 10, FlushEveryAppend},
	} {
		b.Run(c.name, func(b *testing.B) {
			set := benchSet(c.setSize, c.batchSize)
			cfg := DefaultConfig()
			cfg.Flush = c.flush
			log, err := Open(vfs.OS, filepath.Join(b.TempDir(), "t-0"), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer log.Close()
			raw := newRawFile(b)
			defer raw.Close()
			b.SetBytes(int64(len(set)))
			b.ReportAllocs()
			// CPU time is read per thread, so this goroutine keeps its thread.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var logTime, rawTime cost
			next := rb.Offset(0)
			for i := 0; i < b.N; i++ {
				// Alternate which goes first: a write that crosses the
				// kernel's dirty-page threshold is made to sleep for
				// writeback, and that should not fall on one side only.
				if i%2 == 1 {
					b.StopTimer()
					rawTime.add(measure(func() { rawWrite(b, raw, set, c.flush == FlushEveryAppend) }))
					b.StartTimer()
				}
				logTime.add(measure(func() {
					next = restamp(set, next)
					if _, err := log.Append(set); err != nil {
						b.Fatal(err)
					}
				}))
				if i%2 == 0 {
					b.StopTimer()
					rawTime.add(measure(func() { rawWrite(b, raw, set, c.flush == FlushEveryAppend) }))
					b.StartTimer()
				}
			}
			reportRatio(b, len(set), logTime, rawTime)
		})
	}
}

// cost is wall-clock and on-CPU (user + system, this thread) time.
type cost struct{ wall, cpu time.Duration }

func (c *cost) add(d cost) { c.wall += d.wall; c.cpu += d.cpu }

func measure(fn func()) cost {
	cpuStart, start := threadCPU(), time.Now()
	fn()
	return cost{wall: time.Since(start), cpu: threadCPU() - cpuStart}
}

// threadCPU is this thread's CPU time, user and system, to the
// nanosecond (getrusage counts in scheduler ticks, too coarse here).
func threadCPU() time.Duration {
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &now); err != nil {
		panic(err)
	}
	return time.Duration(now.Nano())
}

func newRawFile(b *testing.B) *os.File {
	f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// rawWrite writes set to f with write(2), then fdatasync when sync is set.
func rawWrite(b *testing.B, f *os.File, set []byte, sync bool) {
	fd := int(f.Fd())
	if _, err := unix.Write(fd, set); err != nil {
		b.Fatal(err)
	}
	if sync {
		if err := unix.Fdatasync(fd); err != nil {
			b.Fatal(err)
		}
	}
}

// reportRatio reports the log's and the raw path's MB/s by wall clock,
// their ratio (x-raw), and the ratio of CPU time per byte (cpu-x-raw: raw
// CPU / log CPU). Wall time on this kind of machine swings with the
// kernel's writeback; CPU time shows what the log itself adds.
func reportRatio(b *testing.B, setSize int, logTime, rawTime cost) {
	total := float64(setSize) * float64(b.N)
	b.ReportMetric(total/logTime.wall.Seconds()/1e6, "log-MB/s")
	b.ReportMetric(total/rawTime.wall.Seconds()/1e6, "raw-MB/s")
	b.ReportMetric(rawTime.wall.Seconds()/logTime.wall.Seconds(), "x-raw")
	if logTime.cpu > 0 {
		b.ReportMetric(rawTime.cpu.Seconds()/logTime.cpu.Seconds(), "cpu-x-raw")
	}
}

// BenchmarkRead reads a 256 MiB log from start to end in 1 MiB reads
// (Read to find the file range, then pread into a buffer: the plain-bytes
// path) and the same log file with plain pread(2), in the same run.
func BenchmarkRead(b *testing.B) {
	const logBytes = 256 << 20
	set := benchSet(1<<20, 16<<10)
	dir := filepath.Join(b.TempDir(), "t-0")
	log, err := Open(vfs.OS, dir, DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	next := rb.Offset(0)
	for written := 0; written < logBytes; written += len(set) {
		next = restamp(set, next)
		if _, err := log.Append(set); err != nil {
			b.Fatal(err)
		}
	}
	size := log.Size()
	buf := make([]byte, 0, 2<<20)
	b.SetBytes(size)
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	logTime := measure(func() {
		for b.Loop() {
			for offset, end := log.LogStartOffset(), log.LogEndOffset(); offset < end; {
				if buf, err = log.ReadBytes(buf[:0], offset, 1<<20, end, true); err != nil {
					b.Fatal(err)
				}
				offset = lastWhole(buf).NextOffset()
			}
		}
	})
	b.StopTimer()
	rawTime := measure(func() { rawRead(b, filepath.Join(dir, fmt.Sprintf("%020d.log", 0)), size, b.N) })
	reportRatio(b, int(size), logTime, rawTime)
}

// lastWhole returns the last whole batch of a read, which may end with a
// partial batch, without the error path (and its allocation) of Iter.
func lastWhole(buf []byte) rb.Batch {
	var last rb.Batch
	for len(buf) >= rb.HeaderSize {
		b, err := rb.ParseHeader(buf)
		if err != nil || b.SizeOnDisk() > int64(len(buf)) {
			break
		}
		last, buf = b, buf[b.SizeOnDisk():]
	}
	return last
}

func rawRead(b *testing.B, name string, size int64, count int) {
	f, err := os.Open(name)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for range count {
		for position := int64(0); position < size; position += int64(len(buf)) {
			if _, err := unix.Pread(int(f.Fd()), buf, position); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkTailRead is a tailing consumer: each iteration appends one
// 16 KiB batch and reads it back from its first offset, the offset the
// consumer's previous fetch ended at. With lastAppend that read skips the
// index search and header walk; "search" forces the search by reading
// one batch further back, for comparison.
func BenchmarkTailRead(b *testing.B) {
	for _, search := range []bool{false, true} {
		b.Run(fmt.Sprintf("search=%v", search), func(b *testing.B) {
			log, err := Open(vfs.OS, filepath.Join(b.TempDir(), "t-0"), DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			defer log.Close()
			set := benchSet(16<<10, 16<<10)
			next := rb.Offset(0)
			var previous rb.Offset
			for range 64 { // some history, so the index has entries to search
				previous = next
				next = restamp(set, next)
				if _, err := log.Append(set); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			var readTime time.Duration
			for b.Loop() {
				first := next
				next = restamp(set, next)
				if _, err := log.Append(set); err != nil {
					b.Fatal(err)
				}
				from := first
				if search {
					from = previous
				}
				start := time.Now()
				slice, err := log.Read(from, 1<<20, next, true)
				readTime += time.Since(start)
				if err != nil || slice.Length < int64(len(set)) {
					b.Fatalf("read at %d: %d bytes, %v", from, slice.Length, err)
				}
				slice.Release()
				previous = first
			}
			b.ReportMetric(float64(readTime.Nanoseconds())/float64(b.N), "read-ns/op")
		})
	}
}
