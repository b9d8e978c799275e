package logstore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path"
	"sync"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// fileCacheDir makes a Dir of partitions partitions, each of segments
// sealed segments of three test batches (an index entry per batch) and
// an active one with one batch, closes it and opens it again: every
// segment is then idle, in the cache's care. It returns the batches of
// each partition in order.
func fileCacheDir(t testing.TB, fsys vfs.FS, dirPath string, cfg Config, partitions, segments int) (*Dir, [][][]byte) {
	t.Helper()
	d := openDir(t, fsys, dirPath, cfg)
	id := rb.NewTopicID()
	want := make([][][]byte, partitions)
	for p := range partitions {
		log := createPartition(t, d, TopicPartition{"t", int32(p)}, id)
		for i := range 3*segments + 1 {
			b := testBatch(rb.Offset(5*i), 1, baseTimestamp+int64(1000*i))
			mustAppend(t, log, b)
			want[p] = append(want[p], b)
		}
	}
	closeDir(t, d)
	return openDir(t, fsys, dirPath, cfg), want
}

// checkFileCacheEmpty: once a Dir is closed, every descriptor and
// mapping it counted was given back, and no more.
func checkFileCacheEmpty(t *testing.T, d *Dir) {
	t.Helper()
	if st := d.FileCacheStats(); st.OpenFiles != 0 || st.IndexMappings != 0 || st.IndexMappedBytes != 0 || st.IdleMappedBytes != 0 {
		t.Fatalf("after close: %+v, want no open files and no mappings", st)
	}
}

// TestFileCacheConcurrentReads: readers of more partitions than the
// cache holds, at random offsets (index lookups) and by timestamp (time
// index lookups), with one writer rolling segments of two partitions,
// all read what was appended while eviction closes and unmaps under
// them; the counts stay within the bound plus what is pinned or held.
func TestFileCacheConcurrentReads(t *testing.T) {
	const (
		partitions = 24
		segments   = 3
		readers    = 6
		reads      = 300 // per reader
		maxFiles   = 8
	)
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := testConfig()
		cfg.OpenFilesMax = maxFiles
		cfg.IndexCacheBytesMax = 3 * 3 * (offsetEntrySize + timeEntrySize) // the indexes of three segments
		d, want := fileCacheDir(t, fsys, dir, cfg, partitions, segments)
		if st := d.FileCacheStats(); st.OpenFiles > maxFiles || st.IndexMappings > 0 {
			t.Fatalf("after open: %+v, want at most %d open files and no mappings", st, maxFiles)
		}
		logs := make([]*Log, partitions)
		for p := range logs {
			logs[p], _, _ = d.Get(TopicPartition{"t", int32(p)})
		}
		deadline := time.Now().Add(time.Minute)
		var wg sync.WaitGroup
		var mu sync.Mutex
		maxSeen := FileCacheStats{}
		// The writer appends to partitions 0 and 1, whose active segments
		// are then held (at most two of them open at once, two mappings
		// each), and rolls them.
		const written = 2
		appended := make([][][]byte, written)
		wg.Go(func() {
			for i := range 30 {
				p := i % written
				base := logs[p].LogEndOffset()
				b := testBatch(base, 1, baseTimestamp+int64(base)*1000)
				if _, err := logs[p].Append(b); err != nil {
					t.Errorf("append %d at %d: %v", p, base, err)
					return
				}
				appended[p] = append(appended[p], b)
			}
		})
		for g := range readers {
			wg.Go(func() {
				rnd := rand.New(rand.NewPCG(uint64(g), 1))
				for i := 0; i < reads && time.Now().Before(deadline); i++ {
					p := rnd.IntN(partitions)
					batch := rnd.IntN(len(want[p]))
					if i%10 == 9 {
						ts := baseTimestamp + int64(batch)*1000
						if offset, ok, err := logs[p].OffsetForTimestamp(ts); err != nil || !ok || offset != rb.Offset(5*batch) {
							t.Errorf("partition %d: offset for timestamp %d: %d %v %v, want %d", p, ts, offset, ok, err, 5*batch)
							return
						}
					} else {
						offset := rb.Offset(5*batch + rnd.IntN(5))
						got, err := logs[p].ReadBytes(nil, offset, batchSize, rb.Offset(5*len(want[p])), true)
						if err != nil || !bytes.Equal(got, want[p][batch]) {
							t.Errorf("partition %d: read at %d: %v (%d bytes), want the batch at %d", p, offset, err, len(got), 5*batch)
							return
						}
					}
					st := d.FileCacheStats()
					mu.Lock()
					maxSeen.OpenFiles = max(maxSeen.OpenFiles, st.OpenFiles)
					maxSeen.IndexMappings = max(maxSeen.IndexMappings, st.IndexMappings)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		st := d.FileCacheStats()
		// At any moment: the bound, plus one segment pinned by each reader
		// (a reader's pin may open one more before evicting), plus the
		// writer's held active segments.
		if limit := int64(maxFiles + readers + written); maxSeen.OpenFiles > limit || maxSeen.IndexMappings > 2*limit {
			t.Errorf("peak %d open files and %d mappings, want at most %d and %d", maxSeen.OpenFiles, maxSeen.IndexMappings, limit, 2*limit)
		}
		// Once no reader pins anything, the bound holds (the held active
		// segments count, but the writer's two are within it).
		if st.OpenFiles > maxFiles || st.IdleMappedBytes > cfg.IndexCacheBytesMax {
			t.Errorf("after the reads: %+v, want at most %d open files and %d idle mapped bytes", st, maxFiles, cfg.IndexCacheBytesMax)
		}
		if st.Evictions == 0 || st.Misses == 0 || st.Hits == 0 {
			t.Errorf("%+v: want hits, misses and evictions", st)
		}
		for p := range written {
			checkContents(t, logs[p], append(append([][]byte{}, want[p]...), appended[p]...))
		}
		closeDir(t, d)
		checkFileCacheEmpty(t, d)
	})
}

// TestFileCacheSliceOutlivesEviction: a Slice keeps its segment's file
// open while reads of other partitions evict everything else; once
// released, the next read evicts it, and the counts come back to the bound.
func TestFileCacheSliceOutlivesEviction(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := testConfig()
		cfg.OpenFilesMax = 1
		d, want := fileCacheDir(t, fsys, dir, cfg, 4, 1)
		log, _, _ := d.Get(TopicPartition{"t", 0})
		slice, err := log.Read(0, batchSize, log.LogEndOffset(), true)
		if err != nil || slice.Length != batchSize {
			t.Fatalf("read: %+v %v", slice, err)
		}
		for p := 1; p < 4; p++ {
			other, _, _ := d.Get(TopicPartition{"t", int32(p)})
			for i, b := range want[p] {
				if got, err := other.ReadBytes(nil, rb.Offset(5*i+1), batchSize, other.LogEndOffset(), true); err != nil || !bytes.Equal(got, b) {
					t.Fatalf("partition %d batch %d: %v", p, i, err)
				}
			}
		}
		if st := d.FileCacheStats(); st.OpenFiles != 1 || st.Evictions == 0 {
			t.Fatalf("with a Slice out: %+v, want 1 open file (the Slice's) and evictions", st)
		}
		got := make([]byte, slice.Length)
		if n, err := slice.File.ReadAt(got, slice.Position); n != len(got) || !bytes.Equal(got, want[0][0]) {
			t.Fatalf("the Slice's file after evictions: %d bytes, %v", n, err)
		}
		if err := slice.Release(); err != nil {
			t.Fatal(err)
		}
		other, _, _ := d.Get(TopicPartition{"t", 1})
		if got, err := other.ReadBytes(nil, 0, batchSize, other.LogEndOffset(), true); err != nil || !bytes.Equal(got, want[1][0]) {
			t.Fatalf("partition 1 after Release: %v", err)
		}
		if st := d.FileCacheStats(); st.OpenFiles != 1 {
			t.Fatalf("after Release and a read of another partition: %+v, want 1 open file", st)
		}
		closeDir(t, d)
		checkFileCacheEmpty(t, d)
	})
}

// TestFileCacheBoundAtOpen: a Dir of more idle partitions than the
// bound opens them all and holds at most the bound; each still reads
// and appends (an append holds its segment, a roll lets it go).
func TestFileCacheBoundAtOpen(t *testing.T) {
	tests := []struct {
		maxFiles, partitions int
	}{
		{1, 5},
		{4, 40},
		{64, 40},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d-of-%d", tt.maxFiles, tt.partitions), func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := testConfig()
			cfg.OpenFilesMax = tt.maxFiles
			d, want := fileCacheDir(t, fsys, "/data", cfg, tt.partitions, 1)
			files := int64(min(tt.maxFiles, 2*tt.partitions)) // two segments each
			if st := d.FileCacheStats(); st.OpenFiles != files || st.IndexMappings != 0 {
				t.Fatalf("after open: %+v, want %d open files, no mappings", st, files)
			}
			for p := range tt.partitions {
				log, _, _ := d.Get(TopicPartition{"t", int32(p)})
				checkContents(t, log, want[p])
				mustAppend(t, log, testBatch(log.LogEndOffset(), 1, baseTimestamp))
				if err := log.Roll(); err != nil {
					t.Fatal(err)
				}
			}
			if st := d.FileCacheStats(); st.OpenFiles > int64(max(tt.maxFiles, tt.partitions)) {
				t.Fatalf("after appends: %+v, want the active segments (%d) or the bound (%d)", st, tt.partitions, tt.maxFiles)
			}
			closeDir(t, d)
			checkFileCacheEmpty(t, d)
		})
	}
}

// BenchmarkReadFileCache is the read path's cost of the file cache: a
// Read (lookup in a sealed segment's index, Slice, Release) of one of 64
// partitions in turn, by logs outside a Dir (no cache), by a Dir whose
// bound holds every segment (pins hit), and by a Dir that holds one (every
// read opens the log file and maps the index again).
func BenchmarkReadFileCache(b *testing.B) {
	const partitions = 64
	for _, c := range []struct {
		name     string
		maxFiles int // 0: logs outside a Dir
	}{
		{"no-cache", 0},
		{"hits", 10000},
		{"misses", 1},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := testConfig()
			cfg.Flush = FlushOS
			cfg.OpenFilesMax = max(c.maxFiles, 1)
			dir := b.TempDir()
			d, _ := fileCacheDir(b, vfs.OS, dir, cfg, partitions, 3)
			logs := make([]*Log, partitions)
			for p := range logs {
				logs[p], _, _ = d.Get(TopicPartition{"t", int32(p)})
			}
			if c.maxFiles == 0 {
				if err := d.Close(); err != nil {
					b.Fatal(err)
				}
				for p := range logs {
					var err error
					if logs[p], err = Open(vfs.OS, path.Join(dir, fmt.Sprintf("t-%d", p)), cfg); err != nil {
						b.Fatal(err)
					}
					defer logs[p].Close()
				}
			} else {
				defer d.Close()
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				log := logs[i%partitions]
				offset := rb.Offset(5*(1+i%9) + 2) // a batch of a sealed segment found through its index
				i++
				slice, err := log.Read(offset, batchSize, rb.Offset(5*10), true)
				if err != nil || slice.Length != batchSize {
					b.Fatalf("read at %d: %+v %v", offset, slice, err)
				}
				slice.Release()
			}
		})
	}
}

// TestFileCacheAfterUncleanStop: after a crash every active segment is
// recovered, and then idle too: the Dir opens more partitions than the
// bound within it. An append maps the recovered indexes with room again,
// and the next Close trims them to their entries, as a seal does.
func TestFileCacheAfterUncleanStop(t *testing.T) {
	const partitions, maxFiles = 12, 4
	mem := vfs.NewMem()
	cfg := testConfig()
	cfg.OpenFilesMax = maxFiles
	d, want := fileCacheDir(t, mem, "/data", cfg, partitions, 1)
	for p := range partitions { // the first append removes the clean-shutdown marker
		log, _, _ := d.Get(TopicPartition{"t", int32(p)})
		b := testBatch(log.LogEndOffset(), 1, baseTimestamp)
		mustAppend(t, log, b)
		want[p] = append(want[p], b)
	}
	mem.CrashClean()
	d = openDir(t, mem, "/data", cfg)
	if st := d.FileCacheStats(); st.OpenFiles > maxFiles || st.IndexMappings > 0 {
		t.Fatalf("after an unclean open: %+v, want at most %d open files and no mappings", st, maxFiles)
	}
	for p := range partitions {
		log, _, _ := d.Get(TopicPartition{"t", int32(p)})
		checkContents(t, log, want[p])
		if p%2 == 0 {
			b := testBatch(log.LogEndOffset(), 1, baseTimestamp)
			mustAppend(t, log, b)
			want[p] = append(want[p], b)
		}
	}
	closeDir(t, d)
	checkFileCacheEmpty(t, d)
	for p := range partitions {
		dir := fmt.Sprintf("/data/t-%d", p)
		log := openLog(t, mem, dir, cfg)
		checkContents(t, log, want[p])
		active := log.segments[len(log.segments)-1]
		for _, x := range []*index{active.offsets, active.times} {
			if size := int64(len(fileBytes(t, mem, x.name))); size != int64(x.entries*x.entrySize) {
				t.Errorf("partition %d: %s holds %d bytes after a clean close, want its %d entries'", p, x.name, size, x.entries)
			}
		}
		if n := active.times.entries; n == 0 {
			t.Errorf("partition %d: no time entry after the seal", p)
		}
		closeLog(t, log)
	}
}
