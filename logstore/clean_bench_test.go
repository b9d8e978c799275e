package logstore

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
	"github.com/mirrord/mirrord/vfs"
)

// cleanBenchLog writes a compacted log of about size bytes on the OS file
// system: batches of 100 records of 100-byte values over keys distinct
// keys, in 16 MiB segments, all sealed but for a last small one.
func cleanBenchLog(b *testing.B, dir string, size int, keys int, codec rb.Codec) *Log {
	b.Helper()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 16 << 20
	cfg.Cleanup = CleanupCompact
	log, err := Open(vfs.OS, dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 100)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	recs := make([]rb.Record, 100)
	written, n := 0, 0
	for written < size {
		for i := range recs {
			recs[i] = rb.Record{Key: fmt.Appendf(nil, "key-%08d", (n*7919)%keys), Value: value}
			n++
		}
		batch := rb.Append(nil, rb.Spec{BaseOffset: log.LogEndOffset(), BaseTimestamp: 1_700_000_000_000, ProducerID: -1, Records: recs})
		if codec != rb.CodecNone {
			out, err := records.Compress(make([]byte, rb.HeaderSize), rb.Batch(batch).Records(), records.Compression{Codec: codec})
			if err != nil {
				b.Fatal(err)
			}
			h := headerOf(rb.Batch(batch))
			h.Codec = codec
			rb.PutHeader(rb.Batch(out), h)
			batch = out
		}
		if _, err := log.Append(batch); err != nil {
			b.Fatal(err)
		}
		written += len(batch)
	}
	if err := log.Roll(); err != nil {
		b.Fatal(err)
	}
	if _, err := log.Append(rb.Append(nil, rb.Spec{BaseOffset: log.LogEndOffset(), ProducerID: -1, Records: recs[:1]})); err != nil {
		b.Fatal(err)
	}
	return log
}

// BenchmarkClean cleans a 64 MiB dirty log (100,000 keys, so about a
// third of it survives) and, in the same iteration, copies the same
// segment files with plain read(2) and write(2) into one file: the I/O a
// cleaning cannot avoid. It reports the cleaner's MB/s of dirty log and
// its CPU-seconds per GB beside the raw copy's, and their ratios. Kafka's
// own cleaner is not measured here (see README: not built).
func BenchmarkClean(b *testing.B) {
	for _, c := range []struct {
		name  string
		codec rb.Codec
	}{{"none", rb.CodecNone}, {"lz4", rb.CodecLZ4}} {
		b.Run(c.name, func(b *testing.B) {
			const size = 64 << 20
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var cleanTime, rawTime cost
			var dirty int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), "t-0")
				log := cleanBenchLog(b, dir, size, 100_000, c.codec)
				cl := log.Cleanable(log.LogEndOffset())
				dirty += cl.DirtyBytes
				m := NewOffsetMap(128<<20, 0.9)
				b.StartTimer()
				var stats CleanStats
				cleanTime.add(measure(func() {
					var err error
					if stats, err = log.Clean(CleanOptions{Map: m, LastStableOffset: log.LogEndOffset()}); err != nil {
						b.Fatal(err)
					}
				}))
				b.StopTimer()
				if stats.BytesWritten == 0 || stats.BytesWritten >= stats.BytesRead {
					b.Fatalf("the cleaning kept %d of %d bytes", stats.BytesWritten, stats.BytesRead)
				}
				if err := log.Close(); err != nil {
					b.Fatal(err)
				}
				// The raw copy reads the cleaned files: the same page-cache
				// state as the log read (just written), of the size read.
				rawTime.add(measure(func() { rawCopy(b, dir, stats.BytesRead) }))
			}
			gb := float64(dirty) / 1e9
			b.ReportMetric(float64(dirty)/cleanTime.wall.Seconds()/1e6, "clean-MB/s")
			b.ReportMetric(float64(dirty)/rawTime.wall.Seconds()/1e6, "raw-MB/s")
			b.ReportMetric(cleanTime.cpu.Seconds()/gb, "clean-CPU-s/GB")
			b.ReportMetric(rawTime.cpu.Seconds()/gb, "raw-CPU-s/GB")
			b.ReportMetric(rawTime.wall.Seconds()/cleanTime.wall.Seconds(), "x-raw")
		})
	}
}

// rawCopy reads bytes bytes of the .log files of dir (in 1 MiB reads,
// again from the first file when they run out) and writes them to a new
// file, synced: a cleaning's I/O with nothing filtered.
func rawCopy(b *testing.B, dir string, bytes int64) {
	b.Helper()
	out, err := os.Create(filepath.Join(dir, "raw-copy"))
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(names) == 0 {
		b.Fatalf("no segments in %s: %v", dir, err)
	}
	buf := make([]byte, 1<<20)
	for copied, i := int64(0), 0; copied < bytes; i++ {
		f, err := os.Open(names[i%len(names)])
		if err != nil {
			b.Fatal(err)
		}
		for copied < bytes {
			n, err := f.Read(buf[:min(int64(len(buf)), bytes-copied)])
			if n > 0 {
				if _, werr := out.Write(buf[:n]); werr != nil {
					b.Fatal(werr)
				}
				copied += int64(n)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		f.Close()
		if i > 1000 {
			b.Fatal("raw copy: no progress")
		}
	}
	if err := out.Sync(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCleanSmallSegments cleans a log of many small sealed segments
// (3 one-record batches each over 50 keys, as a topic with segment.ms=100
// rolls them) on the OS file system: all of them merge into one group, so
// the cost is per segment (open, read, three files removed), and it must
// grow linearly with their number. It reports the cleaning's time per
// segment.
func BenchmarkCleanSmallSegments(b *testing.B) {
	for _, segments := range []int{1000, 2000} {
		b.Run(fmt.Sprint(segments), func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				log := smallSegmentsLog(b, filepath.Join(b.TempDir(), "t-0"), segments)
				b.StartTimer()
				started := time.Now()
				stats, err := log.Clean(CleanOptions{Map: NewOffsetMap(1<<20, 0.9), LastStableOffset: log.LogEndOffset()})
				total += time.Since(started)
				b.StopTimer()
				if err != nil || stats.Segments != segments {
					b.Fatalf("cleaned %d of %d segments: %v", stats.Segments, segments, err)
				}
				if err := log.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N*segments), "µs/segment")
		})
	}
}

func smallSegmentsLog(b *testing.B, dir string, segments int) *Log {
	b.Helper()
	cfg := DefaultConfig()
	cfg.Cleanup = CleanupCompact
	log, err := Open(vfs.OS, dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	for s := range segments + 1 {
		for r := range 3 {
			n := s*3 + r
			record := rb.Record{Key: fmt.Appendf(nil, "key-%d", n%50), Value: fmt.Appendf(nil, "value %d", n)}
			batch := rb.Append(nil, rb.Spec{BaseOffset: log.LogEndOffset(), BaseTimestamp: 1_700_000_000_000, ProducerID: -1, Records: []rb.Record{record}})
			if _, err := log.Append(batch); err != nil {
				b.Fatal(err)
			}
		}
		if s < segments {
			if err := log.Roll(); err != nil {
				b.Fatal(err)
			}
		}
	}
	return log
}
