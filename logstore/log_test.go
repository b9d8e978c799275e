package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/epoch"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// baseTimestamp is the timestamp of offset 0 in the test batches; each
// offset adds a second.
const baseTimestamp = 1_700_000_000_000

// testBatch is one batch of five 100-byte records, [base, base+4]. All test
// batches have the same size, batchSize.
func testBatch(base rb.Offset, leaderEpoch rb.Epoch, timestamp int64) []byte {
	records := make([]rb.Record, 5)
	for i := range records {
		records[i] = rb.Record{Value: bytes.Repeat([]byte{byte(base) + byte(i)}, 100)}
	}
	return rb.Append(nil, rb.Spec{BaseOffset: base, LeaderEpoch: leaderEpoch, BaseTimestamp: timestamp, ProducerID: -1, Records: records})
}

var batchSize = int64(len(testBatch(0, 0, 0)))

// layout is the test log of the read, truncation and retention tests:
// three segments (SegmentBytes is three batches) with compaction gaps
// inside a segment (10-19, 35-39) and across a segment end (45-59).
//
//	segment 0:  [0-4] [5-9] [20-24]     epoch 1
//	segment 25: [25-29] [30-34] [40-44] epoch 2
//	segment 60: [60-64]                 epoch 3
var (
	layoutBases  = []rb.Offset{0, 5, 20, 25, 30, 40, 60}
	layoutEpochs = []rb.Epoch{1, 1, 1, 2, 2, 2, 3}
)

const layoutEnd rb.Offset = 65

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 3 * batchSize
	cfg.SegmentAge = 0
	cfg.IndexIntervalBytes = 0 // an index entry per batch
	cfg.IndexBytesMax = 4096
	cfg.Flush = FlushEveryAppend
	return cfg
}

func openLog(t *testing.T, fsys vfs.FS, dir string, cfg Config) *Log {
	t.Helper()
	log, err := Open(fsys, dir, cfg)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return log
}

func closeLog(t *testing.T, log *Log) {
	t.Helper()
	if err := log.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func mustAppend(t testing.TB, log *Log, batches []byte) AppendInfo {
	t.Helper()
	info, err := log.Append(batches)
	if err != nil {
		t.Fatalf("append at %d: %v", rb.Batch(batches).BaseOffset(), err)
	}
	return info
}

// layoutLog opens a log in dir and appends the layout one batch at a time.
func layoutLog(t *testing.T, fsys vfs.FS, dir string, cfg Config) (*Log, [][]byte) {
	t.Helper()
	log := openLog(t, fsys, dir, cfg)
	batches := make([][]byte, len(layoutBases))
	for i, base := range layoutBases {
		batches[i] = testBatch(base, layoutEpochs[i], baseTimestamp+int64(base)*1000)
		mustAppend(t, log, batches[i])
	}
	if got := log.Segments(); got != 3 || log.LogEndOffset() != layoutEnd {
		t.Fatalf("layout: %d segments, log end %d; want 3 and %d", got, log.LogEndOffset(), layoutEnd)
	}
	return log, batches
}

// checkContents reads the whole log and compares it with want.
func checkContents(t *testing.T, log *Log, want [][]byte) {
	t.Helper()
	got, err := readAll(log)
	if err != nil {
		t.Fatalf("read all: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d batches (%v), want %d", len(got), baseOffsets(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d at offset %d differs from the one appended", i, got[i].BaseOffset())
		}
	}
}

func baseOffsets(batches []rb.Batch) []rb.Offset {
	out := make([]rb.Offset, len(batches))
	for i, b := range batches {
		out[i] = b.BaseOffset()
	}
	return out
}

// fileBytes returns the current contents of name.
func fileBytes(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	if n, err := f.ReadAt(data, 0); int64(n) != size {
		t.Fatalf("read %s: %d of %d bytes: %v", name, n, size, err)
	}
	return data
}

// eachFS runs test on Mem and on the real file system.
func eachFS(t *testing.T, test func(t *testing.T, fsys vfs.FS, dir string)) {
	t.Run("mem", func(t *testing.T) { test(t, vfs.NewMem(), "/data/t-0") })
	t.Run("os", func(t *testing.T) { test(t, vfs.OS, path.Join(t.TempDir(), "t-0")) })
}

// clock is a virtual clock for Config.Now.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func TestAppendRejects(t *testing.T) {
	two := func(first, second rb.Offset, firstEpoch, secondEpoch rb.Epoch) []byte {
		return append(testBatch(first, firstEpoch, baseTimestamp), testBatch(second, secondEpoch, baseTimestamp)...)
	}
	// The log holds [0-4] [5-9] in epoch 2; its end is 10.
	tests := []struct {
		name    string
		batches []byte
		want    []error
	}{
		{"overlaps the log end", testBatch(9, 2, 0), []error{ErrInvalidAppend}},
		{"rewrites the last batch", testBatch(5, 2, 0), []error{ErrInvalidAppend}},
		{"second base offset equals first", two(10, 10, 2, 2), []error{ErrInvalidAppend}},
		{"second base offset inside first", two(10, 14, 2, 2), []error{ErrInvalidAppend}},
		{"second base offset below first", two(20, 10, 2, 2), []error{ErrInvalidAppend}},
		{"crc flip in the second batch", flip(two(10, 15, 2, 2), int(batchSize)+rb.HeaderSize+7), []error{ErrInvalidAppend, rb.ErrCorrupt}},
		{"crc flip in the header", flip(testBatch(10, 2, 0), 30), []error{ErrInvalidAppend, rb.ErrCorrupt}},
		{"bad magic", setByte(testBatch(10, 2, 0), 16, 1), []error{ErrInvalidAppend, rb.ErrCorrupt}},
		{"truncated last batch", two(10, 15, 2, 2)[:2*batchSize-1], []error{ErrInvalidAppend, rb.ErrTruncated}},
		{"shorter than a length prefix", testBatch(10, 2, 0)[:7], []error{ErrInvalidAppend, rb.ErrTruncated}},
		{"empty", []byte{}, []error{ErrInvalidAppend}},
		{"nil", nil, []error{ErrInvalidAppend}},
		{"decreasing leader epoch", testBatch(10, 1, 0), []error{ErrInvalidAppend}},
		{"no epoch after epochs", testBatch(10, rb.NoEpoch, 0), []error{ErrInvalidAppend}},
		{"epoch decreasing inside one append", two(10, 15, 3, 2), []error{ErrInvalidAppend}},
		{"one batch larger than segment.bytes", slices.Concat(testBatch(10, 2, 0), bigBatch(15, 2, 4)), []error{ErrTooLarge}},
		{"crc flip in a later segment's piece", flip(slices.Concat(testBatch(10, 2, 0), testBatch(15, 2, 0), testBatch(20, 2, 0), testBatch(25, 2, 0)), int(3*batchSize)+rb.HeaderSize+7),
			[]error{ErrInvalidAppend, rb.ErrCorrupt}},
		{"more records than its offsets span", withRecordCount(testBatch(10, 2, 0), 6), []error{ErrInvalidAppend}},
		{"offset span above MaxInt32", two(10, 10+math.MaxInt32+1, 2, 2), []error{ErrInvalidAppend}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			log := openLog(t, fsys, "/d", testConfig())
			good := [][]byte{testBatch(0, 2, baseTimestamp), testBatch(5, 2, baseTimestamp)}
			mustAppend(t, log, slices.Concat(good...))
			active := segmentPath("/d", 0, extLog)
			fileBefore, epochsBefore := fileBytes(t, fsys, active), log.Epochs()
			_, err := log.Append(test.batches)
			for _, want := range test.want {
				if !errors.Is(err, want) {
					t.Fatalf("append: got %v, want an error wrapping %v", err, want)
				}
			}
			if got := log.Size(); got != 2*batchSize {
				t.Errorf("size %d after a rejected append, want %d", got, 2*batchSize)
			}
			if got := log.LogEndOffset(); got != 10 {
				t.Errorf("log end %d after a rejected append, want 10", got)
			}
			if got := log.Epochs(); !slices.Equal(got, epochsBefore) {
				t.Errorf("epochs %v after a rejected append, want %v", got, epochsBefore)
			}
			if got := fileBytes(t, fsys, active); !bytes.Equal(got, fileBefore) {
				t.Errorf("segment file changed by a rejected append: %d bytes, was %d", len(got), len(fileBefore))
			}
			next := testBatch(10, 2, baseTimestamp)
			mustAppend(t, log, next) // the log is still writable
			checkContents(t, log, append(good, next))
			closeLog(t, log)
		})
	}
}

func flip(b []byte, i int) []byte { b[i] ^= 0x40; return b }

// bigBatch is a batch of the test's shape with n times its records.
func bigBatch(base rb.Offset, leaderEpoch rb.Epoch, n int) []byte {
	records := make([]rb.Record, 5*n)
	for i := range records {
		records[i] = rb.Record{Value: bytes.Repeat([]byte{byte(i)}, 100)}
	}
	return rb.Append(nil, rb.Spec{BaseOffset: base, LeaderEpoch: leaderEpoch, BaseTimestamp: baseTimestamp, ProducerID: -1, Records: records})
}

// TestAppendLargerThanSegment: a mirror's fetch of more bytes than its
// topic's segment.bytes (fetch.max.bytes above it) is written across
// segments, cut between batches, as the same batches appended one by one
// would be; epochs and offsets as given.
func TestAppendLargerThanSegment(t *testing.T) {
	fsys := vfs.NewMem()
	log := openLog(t, fsys, "/d", testConfig()) // segments of three batches
	var batches [][]byte
	for i := range 8 {
		batches = append(batches, testBatch(rb.Offset(10*i), rb.Epoch(1+i/4), baseTimestamp))
	}
	info := mustAppend(t, log, slices.Concat(batches...))
	if info.FirstOffset != 0 || info.LastOffset != 74 || info.Batches != 8 || info.Bytes != int(8*batchSize) || info.MaxTimestamp != baseTimestamp {
		t.Errorf("append info %+v, want offsets 0-74, 8 batches, %d bytes, max timestamp %d", info, 8*batchSize, baseTimestamp)
	}
	if got := log.Segments(); got != 3 {
		t.Errorf("%d segments, want 3 (three batches each)", got)
	}
	checkContents(t, log, batches)
	if got, want := log.Epochs(), []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 40}}; !slices.Equal(got, want) {
		t.Errorf("epochs %v, want %v", got, want)
	}
	closeLog(t, log)
	log = openLog(t, fsys, "/d", testConfig())
	checkContents(t, log, batches)
	closeLog(t, log)
}

func setByte(b []byte, i int, v byte) []byte { b[i] = v; return b }

func TestAppendAssign(t *testing.T) {
	tests := []struct {
		name        string
		leaderEpoch rb.Epoch
		wantErr     error
		wantEpochs  []epoch.Entry
	}{
		{"same epoch", 2, nil, []epoch.Entry{{Epoch: 2, StartOffset: 0}}},
		{"new epoch", 5, nil, []epoch.Entry{{Epoch: 2, StartOffset: 0}, {Epoch: 5, StartOffset: 30}}},
		{"epoch below the latest", 1, ErrInvalidAppend, []epoch.Entry{{Epoch: 2, StartOffset: 0}}},
		{"negative epoch", rb.NoEpoch, ErrInvalidAppend, []epoch.Entry{{Epoch: 2, StartOffset: 0}}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 1 << 20
			log := openLog(t, vfs.NewMem(), "/d", cfg)
			// The log end is 30: [0-4] then a gap, [25-29].
			mustAppend(t, log, slices.Concat(testBatch(0, 2, baseTimestamp), testBatch(25, 2, baseTimestamp)))
			// Batches as a producer sends them: offsets from 0, no epoch.
			batches := slices.Concat(testBatch(0, rb.NoEpoch, baseTimestamp), testBatch(0, rb.NoEpoch, baseTimestamp+1), testBatch(0, rb.NoEpoch, baseTimestamp+2))
			info, err := log.AppendAssign(batches, test.leaderEpoch)
			if !errors.Is(err, test.wantErr) || (err != nil) != (test.wantErr != nil) {
				t.Fatalf("append assign: got %v, want %v", err, test.wantErr)
			}
			if got := log.Epochs(); !slices.Equal(got, test.wantEpochs) {
				t.Errorf("epochs %v, want %v", got, test.wantEpochs)
			}
			if err != nil {
				if log.LogEndOffset() != 30 || log.Size() != 2*batchSize {
					t.Errorf("rejected append assign changed the log: end %d, size %d", log.LogEndOffset(), log.Size())
				}
				return
			}
			if info.FirstOffset != 30 || info.LastOffset != 44 || info.Batches != 3 {
				t.Errorf("info %+v, want offsets 30 to 44 in 3 batches", info)
			}
			it := rb.NewIter(batches, true) // stamped in place, CRCs still valid
			for i := 0; it.Next(); i++ {
				b := it.Batch()
				if b.BaseOffset() != rb.Offset(30+5*i) || b.LeaderEpoch() != test.leaderEpoch {
					t.Errorf("batch %d stamped with offset %d epoch %d, want %d and %d", i, b.BaseOffset(), b.LeaderEpoch(), 30+5*i, test.leaderEpoch)
				}
			}
			if it.Err() != nil {
				t.Fatalf("stamped batches do not verify: %v", it.Err())
			}
			got, err := log.ReadBytes(nil, 30, 1<<20, log.LogEndOffset(), false)
			if err != nil || !bytes.Equal(got, batches) {
				t.Fatalf("read back %d bytes (%v), want the %d stamped bytes", len(got), err, len(batches))
			}
			closeLog(t, log)
		})
	}
}

func TestRead(t *testing.T) {
	log, batches := layoutLog(t, vfs.NewMem(), "/d", testConfig())
	defer closeLog(t, log)
	all := slices.Concat(batches...)
	max := int64(1 << 20)
	// want is the batch the slice starts at and its length in bytes.
	tests := []struct {
		name        string
		offset      rb.Offset
		maxBytes    int64
		maxOffset   rb.Offset
		minOneBatch bool
		wantFirst   int
		wantLength  int64
	}{
		{"first segment whole", 0, max, layoutEnd, false, 0, 3 * batchSize},
		{"next call reads the next segment", 25, max, layoutEnd, false, 3, 3 * batchSize},
		{"last segment", 60, max, layoutEnd, false, 6, batchSize},
		{"offset inside a batch", 7, max, layoutEnd, false, 1, 2 * batchSize},
		{"last offset of a batch", 24, max, layoutEnd, false, 2, batchSize},
		{"compaction gap inside a segment", 12, max, layoutEnd, false, 2, batchSize},
		{"compaction gap in a later segment", 37, max, layoutEnd, false, 5, batchSize},
		{"compaction gap across a segment end", 50, max, layoutEnd, false, 6, batchSize},
		{"high watermark inside a batch", 0, max, 22, false, 0, 2 * batchSize},
		{"high watermark at a batch base", 0, max, 20, false, 0, 2 * batchSize},
		{"high watermark in a gap", 0, max, 12, false, 0, 2 * batchSize},
		{"high watermark in the next segment", 20, max, 27, false, 2, batchSize},
		{"high watermark inside the first batch", 7, max, 8, true, 0, 0},
		{"high watermark at the offset", 25, max, 25, true, 0, 0},
		{"high watermark below the offset", 30, max, 25, true, 0, 0},
		{"max offset past the log end", 60, max, 1000, false, 6, batchSize},
		{"max bytes cuts the last batch", 0, batchSize + 10, layoutEnd, false, 0, batchSize + 10},
		{"max bytes cuts, min one batch satisfied", 0, batchSize + 10, layoutEnd, true, 0, batchSize + 10},
		{"max bytes inside the first batch", 0, 10, layoutEnd, false, 0, 10},
		{"min one batch returns it whole", 5, 10, layoutEnd, true, 1, batchSize},
		{"zero max bytes", 0, 0, layoutEnd, false, 0, 0},
		{"zero max bytes, min one batch", 0, 0, layoutEnd, true, 0, batchSize},
		{"min one batch stops at the segment end", 20, 1, layoutEnd, true, 2, batchSize},
		{"at the log end", layoutEnd, max, layoutEnd, true, 0, 0},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			got, err := log.ReadBytes(nil, test.offset, test.maxBytes, test.maxOffset, test.minOneBatch)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			start := int64(test.wantFirst) * batchSize
			if want := all[start : start+test.wantLength]; !bytes.Equal(got, want) {
				first := rb.Offset(-1)
				if len(got) >= 8 {
					first = rb.Batch(got).BaseOffset()
				}
				t.Fatalf("read %d bytes from offset %d, want %d bytes from batch %d", len(got), first, test.wantLength, test.wantFirst)
			}
		})
	}
}

func TestReadOutOfRange(t *testing.T) {
	log, _ := layoutLog(t, vfs.NewMem(), "/d", testConfig())
	defer closeLog(t, log)
	if err := log.AdvanceLogStart(27); err != nil {
		t.Fatal(err)
	}
	for _, offset := range []rb.Offset{0, 26, layoutEnd + 1, 1 << 40} {
		if _, err := log.Read(offset, 1<<20, layoutEnd, true); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Errorf("read at %d in [27, %d]: got %v, want ErrOffsetOutOfRange", offset, layoutEnd, err)
		}
	}
	got, err := log.ReadBytes(nil, 27, 1<<20, layoutEnd, true)
	if err != nil || rb.Batch(got).BaseOffset() != 25 { // the batch holding the start
		t.Errorf("read at the log start 27: %d bytes, %v; want the batch at 25", len(got), err)
	}
}

func TestSliceOutlivesDeletedSegment(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		log, batches := layoutLog(t, fsys, dir, testConfig())
		defer closeLog(t, log)
		slice, err := log.Read(0, 1<<20, layoutEnd, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := log.AdvanceLogStart(25); err != nil {
			t.Fatal(err)
		}
		if exists, err := fsys.Exists(segmentPath(dir, 0, extLog)); err != nil || exists {
			t.Fatalf("segment 0 still on disk after AdvanceLogStart: %v %v", exists, err)
		}
		got := make([]byte, slice.Length)
		if n, err := slice.File.ReadAt(got, slice.Position); int64(n) != slice.Length {
			t.Fatalf("read of a deleted segment before release: %d bytes, %v", n, err)
		}
		if want := slices.Concat(batches[:3]...); !bytes.Equal(got, want) {
			t.Fatalf("deleted segment read back wrong")
		}
		if err := slice.Release(); err != nil {
			t.Fatalf("release: %v", err)
		}
		if _, err := slice.File.ReadAt(got, 0); !errors.Is(err, fs.ErrClosed) {
			t.Errorf("read after the last release: got %v, want fs.ErrClosed", err)
		}
		if err := (Slice{}).Release(); err != nil {
			t.Errorf("release of an empty slice: %v", err)
		}
	})
}

func TestOffsetForTimestamp(t *testing.T) {
	// Timestamps are not monotonic; the largest is in the middle of the
	// active segment. Segment 0: 1000 3000 2000; segment 15: 2500 9000 4000.
	timestamps := []int64{1000, 3000, 2000, 2500, 9000, 4000}
	cfg := testConfig()
	fsys := vfs.NewMem()
	log := openLog(t, fsys, "/d", cfg)
	if _, _, ok := log.MaxTimestamp(); ok {
		t.Errorf("empty log has a max timestamp")
	}
	if _, ok, err := log.OffsetForTimestamp(0); ok || err != nil {
		t.Errorf("empty log has an offset for timestamp 0: %v", err)
	}
	for i, ts := range timestamps {
		mustAppend(t, log, testBatch(rb.Offset(5*i), 0, ts))
	}
	tests := []struct {
		timestamp int64
		want      rb.Offset // -1: none
	}{
		{0, 0}, {1000, 0}, {1001, 5}, {2000, 5}, {3000, 5}, {3001, 20}, {9000, 20}, {9001, -1},
	}
	check := func(t *testing.T, log *Log) {
		for _, test := range tests {
			got, ok, err := log.OffsetForTimestamp(test.timestamp)
			if err != nil || ok != (test.want >= 0) || ok && got != test.want {
				t.Errorf("offset for timestamp %d: %d %v %v; want %d", test.timestamp, got, ok, err, test.want)
			}
		}
		// The offset is its batch's last, as Kafka's time index keeps it.
		if ts, offset, ok := log.MaxTimestamp(); ts != 9000 || offset != 24 || !ok {
			t.Errorf("max timestamp %d at %d (%v), want 9000 at 24", ts, offset, ok)
		}
	}
	t.Run("open", func(t *testing.T) { check(t, log) })
	closeLog(t, log)
	log = openLog(t, fsys, "/d", cfg) // from the sealed indexes
	t.Run("reopened", func(t *testing.T) { check(t, log) })
	if err := log.AdvanceLogStart(7); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := log.OffsetForTimestamp(0); got != 7 || !ok || err != nil {
		t.Errorf("offset for timestamp 0 after the start moved to 7: %d %v %v", got, ok, err)
	}
	closeLog(t, log)
}

func TestRoll(t *testing.T) {
	const hour = time.Hour
	tests := []struct {
		name   string
		config func(*Config)
		// steps: advance the clock by the duration, then append one batch.
		steps        []time.Duration
		wantSegments []rb.Offset
	}{
		{"by size", nil, make([]time.Duration, 7), []rb.Offset{0, 15, 30}},
		{"by age", func(c *Config) { c.SegmentBytes = 1 << 20; c.SegmentAge = hour },
			[]time.Duration{0, 59 * time.Minute, time.Minute, 30 * time.Minute, 30 * time.Minute}, []rb.Offset{0, 10, 20}},
		{"age counts from the first append", func(c *Config) { c.SegmentBytes = 1 << 20; c.SegmentAge = hour },
			[]time.Duration{2 * hour, 0, 59 * time.Minute}, []rb.Offset{0}},
		// An index entry per batch after the first (more than the
		// interval since the last); shouldRoll reserves three per append,
		// and the time index holds four.
		{"by full index", func(c *Config) { c.SegmentBytes = 1 << 20; c.IndexBytesMax = 48; c.IndexIntervalBytes = batchSize - 1 },
			make([]time.Duration, 7), []rb.Offset{0, 15, 30}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := testConfig()
			clk := &clock{now: time.UnixMilli(baseTimestamp)}
			cfg.Now = clk.Now
			if test.config != nil {
				test.config(&cfg)
			}
			log := openLog(t, fsys, "/d", cfg)
			var want [][]byte
			for i, d := range test.steps {
				clk.now = clk.now.Add(d)
				want = append(want, testBatch(rb.Offset(5*i), 0, clk.now.UnixMilli()+int64(i)))
				mustAppend(t, log, want[i])
			}
			var wantNames []string
			for _, base := range test.wantSegments {
				for _, ext := range []string{extIndex, extLog, extTimeIndex} {
					wantNames = append(wantNames, fmt.Sprintf("%020d%s", base, ext))
				}
			}
			names, err := fsys.List("/d")
			if err != nil {
				t.Fatal(err)
			}
			names = slices.DeleteFunc(names, func(n string) bool { _, ok := parseSegmentName(n, path.Ext(n)); return !ok })
			if !slices.Equal(names, wantNames) {
				t.Errorf("segment files %v, want %v", names, wantNames)
			}
			checkContents(t, log, want)
			closeLog(t, log)
		})
	}
}

// TestAppendFillsIndex appends more batches than an empty segment's index
// can hold in one append: the entries that do not fit are skipped, and a
// recovery keeps every batch.
func TestAppendFillsIndex(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.IndexBytesMax = 48 // 6 offset entries, 4 time entries
	fsys := vfs.NewMem()
	log := openLog(t, fsys, "/d", cfg)
	var want [][]byte
	for i := range 20 {
		want = append(want, testBatch(rb.Offset(5*i), 0, baseTimestamp+int64(i)))
	}
	mustAppend(t, log, slices.Concat(want...))
	checkContents(t, log, want)
	fsys.CrashClean()
	log = openLog(t, fsys, "/d", cfg)
	checkContents(t, log, want)
	closeLog(t, log)
}

func TestAppendZeroAllocs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Flush = FlushOS
	log := openLog(t, vfs.OS, t.TempDir(), cfg)
	defer closeLog(t, log)
	var set []byte // 16 KiB: 16 batches of one 1000-byte record
	for range 16 {
		set = rb.Append(set, rb.Spec{LeaderEpoch: 0, BaseTimestamp: baseTimestamp, ProducerID: -1, Records: []rb.Record{{Value: make([]byte, 1000)}}})
	}
	const runs = 100
	t.Run("AppendAssign", func(t *testing.T) {
		allocs := testing.AllocsPerRun(runs, func() {
			if _, err := log.AppendAssign(set, 0); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("AppendAssign allocates %.1f times per call", allocs)
		}
	})
	t.Run("Append", func(t *testing.T) {
		sets := make([][]byte, runs+1) // AllocsPerRun runs once more to warm up
		next := log.LogEndOffset()
		for i := range sets {
			sets[i] = slices.Clone(set)
			for it := rb.NewIter(sets[i], false); it.Next(); {
				it.Batch().SetBaseOffset(next)
				next = it.Batch().NextOffset()
			}
		}
		i := 0
		allocs := testing.AllocsPerRun(runs, func() {
			if _, err := log.Append(sets[i]); err != nil {
				t.Fatal(err)
			}
			i++
		})
		if allocs != 0 {
			t.Errorf("Append allocates %.1f times per call", allocs)
		}
	})
}

// A caller may still hold a log that Dir.Delete or shutdown closed: the
// offset accessors keep answering, reads and writes report ErrClosed.
func TestAccessorsAfterClose(t *testing.T) {
	log := openLog(t, vfs.NewMem(), "/d/t-0", DefaultConfig())
	set := benchSet(4<<10, 1<<10)
	if _, err := log.Append(set); err != nil {
		t.Fatal(err)
	}
	end := log.LogEndOffset()
	log.SetHighWatermark(end)
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	if got := log.LogEndOffset(); got != end {
		t.Errorf("log end offset after close: %d, want %d", got, end)
	}
	if got := log.HighWatermark(); got != end {
		t.Errorf("high watermark after close: %d, want %d", got, end)
	}
	if e, o := log.EndOffsetForEpoch(0); e != 0 || o != end {
		t.Errorf("end offset for epoch 0 after close: (%d, %d), want (0, %d)", e, o, end)
	}
	if _, err := log.Read(0, 1<<20, end, true); !errors.Is(err, ErrClosed) {
		t.Errorf("read after close: %v, want ErrClosed", err)
	}
	if _, _, err := log.OffsetForTimestamp(0); !errors.Is(err, ErrClosed) {
		t.Errorf("offset for timestamp after close: %v, want ErrClosed", err)
	}
	if _, err := log.Append(set); !errors.Is(err, ErrClosed) {
		t.Errorf("append after close: %v, want ErrClosed", err)
	}
}

// writeBehindFS records the WriteBehind calls on segment files.
type writeBehindFS struct {
	vfs.FS
	calls *[][2]int64
}

type writeBehindFile struct {
	vfs.File
	calls *[][2]int64
}

func (w writeBehindFS) Create(name string) (vfs.File, error) { return w.wrap(w.FS.Create(name)) }
func (w writeBehindFS) Open(name string) (vfs.File, error)   { return w.wrap(w.FS.Open(name)) }

func (w writeBehindFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return writeBehindFile{f, w.calls}, nil
}

func (f writeBehindFile) WriteBehind(offset, length int64) error {
	*f.calls = append(*f.calls, [2]int64{offset, length})
	return f.File.WriteBehind(offset, length)
}

// TestWriteBehind: a log not synced on every append starts the write-back
// of each 4 MiB of its active segment as it goes, contiguously, so the
// roll's sync finds little to write; a truncation moves the start back; a
// log synced on every append never asks.
func TestWriteBehind(t *testing.T) {
	big := make([]rb.Record, 1000)
	for i := range big {
		big[i] = rb.Record{Value: bytes.Repeat([]byte{byte(i)}, 1000)}
	}
	appendMiB := func(t *testing.T, log *Log) {
		t.Helper()
		mustAppend(t, log, rb.Append(nil, rb.Spec{BaseOffset: log.LogEndOffset(), BaseTimestamp: baseTimestamp, ProducerID: -1, Records: big}))
	}
	for _, flush := range []FlushPolicy{FlushOS, FlushEveryAppend} {
		t.Run(flush.String(), func(t *testing.T) {
			var calls [][2]int64
			cfg := testConfig()
			cfg.Flush, cfg.SegmentBytes, cfg.IndexIntervalBytes, cfg.IndexBytesMax = flush, 1<<30, 4096, 1<<20
			log := openLog(t, writeBehindFS{vfs.NewMem(), &calls}, "/d", cfg)
			for range 10 {
				appendMiB(t, log)
			}
			size := log.active().size
			if flush == FlushEveryAppend {
				if len(calls) != 0 {
					t.Fatalf("write-behind calls %v on a log synced every append", calls)
				}
				closeLog(t, log)
				return
			}
			next := int64(0)
			for _, c := range calls {
				if c[0] != next || c[1] < 4<<20 {
					t.Fatalf("write-behind calls %v: want contiguous ranges of at least 4 MiB from 0", calls)
				}
				next = c[0] + c[1]
			}
			if len(calls) != 2 || size-next >= 4<<20 {
				t.Fatalf("write-behind calls %v for %d bytes: want 2, leaving less than 4 MiB", calls, size)
			}
			if err := log.TruncateTo(log.LogEndOffset() - rb.Offset(8*len(big))); err != nil { // 8 of the 10 batches
				t.Fatal(err)
			}
			cut := log.active().size
			calls = calls[:0]
			for range 5 {
				appendMiB(t, log)
			}
			if len(calls) != 1 || calls[0][0] != cut {
				t.Fatalf("write-behind calls %v after truncating to %d bytes, want one from there", calls, cut)
			}
			closeLog(t, log)
		})
	}
}

// TestSealedIndexesMapWhenRead: a sealed segment's indexes hold no
// mapping (rolled, or found at open) until a lookup needs one; lookups,
// also concurrent ones and ones whose mapping fails, find the same
// batches as mapped indexes do.
func TestSealedIndexesMapWhenRead(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig()
	log := openLog(t, mem, "/d", cfg)
	var want [][]byte
	for i := range 12 { // four segments of three batches
		b := testBatch(rb.Offset(5*i), 1, baseTimestamp+int64(1000*i))
		mustAppend(t, log, b)
		want = append(want, b)
	}
	unmapped := func(log *Log) (offsets, times int) {
		for _, s := range log.segments[:len(log.segments)-1] {
			if s.offsets.mapping == nil && s.offsets.lazy.Load() {
				offsets++
			}
			if s.times.mapping == nil && s.times.lazy.Load() {
				times++
			}
		}
		return offsets, times
	}
	for round, reopen := range []bool{false, true} {
		if reopen {
			closeLog(t, log)
			log = openLog(t, mem, "/d", cfg)
		}
		if o, ti := unmapped(log); len(log.segments) != 4 || o != 3 || ti != 3 {
			t.Fatalf("round %d: %d segments, %d offset and %d time indexes of sealed segments unmapped; want 4, 3, 3", round, len(log.segments), o, ti)
		}
		// Offset 27 is inside the second segment's (15-29) last batch: its
		// offset index is needed (and mapped), no other.
		got, err := log.ReadBytes(nil, 27, 1<<20, log.LogEndOffset(), true)
		if err != nil || !bytes.HasPrefix(got, want[5]) {
			t.Fatalf("round %d: read at 27: %v, want the batch at 25", round, err)
		}
		if o, ti := unmapped(log); o != 2 || ti != 3 {
			t.Fatalf("round %d: after one read %d offset and %d time indexes unmapped; want 2 and 3", round, o, ti)
		}
		if offset, ok, err := log.OffsetForTimestamp(baseTimestamp + 4000); err != nil || !ok || offset != 20 {
			t.Fatalf("round %d: offset for timestamp: %d %v %v, want 20", round, offset, ok, err)
		}
		if _, ti := unmapped(log); ti != 2 {
			t.Fatalf("round %d: after a timestamp lookup %d time indexes unmapped, want 2", round, ti)
		}
	}
	// Concurrent first lookups of one unmapped index, and a failing map:
	// every read finds its batch.
	closeLog(t, log)
	log = openLog(t, mem, "/d", cfg)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			offset := rb.Offset(32 + g%3*5) // the third segment, 30-44

			if got, err := log.ReadBytes(nil, offset, 1<<20, log.LogEndOffset(), true); err != nil || !bytes.HasPrefix(got, want[offset/5]) {
				t.Errorf("concurrent read at %d: %v", offset, err)
			}
		})
	}
	wg.Wait()
	mem.SetFault(vfs.FailAfter(vfs.OpMap, 0, vfs.ErrInjected))
	for i := range 9 {
		if got, err := log.ReadBytes(nil, rb.Offset(5*i+2), 1<<20, log.LogEndOffset(), true); err != nil || !bytes.HasPrefix(got, want[i]) {
			t.Fatalf("read at %d while mapping fails: %v", 5*i+2, err)
		}
	}
	mem.SetFault(nil)
	closeLog(t, log)
}
