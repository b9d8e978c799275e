package logstore

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
	"github.com/mirrord/mirrord/vfs"
)

// cleanLog is a log under test with a virtual clock and the next offset.
type cleanLog struct {
	t    *testing.T
	fs   vfs.FS
	log  *Log
	cfg  Config
	now  *time.Time
	next rb.Offset
}

func newCleanLog(t *testing.T, fsys vfs.FS) *cleanLog {
	t.Helper()
	now := time.UnixMilli(baseTimestamp)
	cfg := DefaultConfig()
	cfg.SegmentAge = 0
	cfg.IndexIntervalBytes = 0
	cfg.IndexBytesMax = 4096
	cfg.Flush = FlushEveryAppend
	cfg.Cleanup = CleanupCompact
	cfg.DeleteRetention = time.Hour
	c := &cleanLog{t: t, fs: fsys, cfg: cfg, now: &now}
	c.cfg.Now = func() time.Time { return *c.now }
	var err error
	if c.log, err = Open(fsys, "/p", c.cfg); err != nil {
		t.Fatal(err)
	}
	return c
}

// kv is one record: a nil value is a tombstone; key "" means no key.
type kv struct{ key, value string }

func (kv kv) record() rb.Record {
	r := rb.Record{}
	if kv.key != "" {
		r.Key = []byte(kv.key)
	}
	if kv.value != "" {
		r.Value = []byte(kv.value)
	}
	return r
}

// write appends one batch (gap: offsets skipped before it).
func (c *cleanLog) write(spec rb.Spec, gap int, kvs ...kv) {
	c.t.Helper()
	c.next += rb.Offset(gap)
	spec.BaseOffset = c.next
	spec.BaseTimestamp = c.now.UnixMilli()
	if spec.ProducerID == 0 {
		spec.ProducerID = -1
	}
	for _, r := range kvs {
		spec.Records = append(spec.Records, r.record())
	}
	if _, err := c.log.Append(rb.Append(nil, spec)); err != nil {
		c.t.Fatal(err)
	}
	c.next = c.log.LogEndOffset()
}

func (c *cleanLog) marker(pid int64, abort bool) {
	c.t.Helper()
	kind := byte(1)
	if abort {
		kind = 0
	}
	c.write(rb.Spec{ProducerID: pid, Transactional: true, Control: true}, 0, kv{key: string([]byte{0, 0, 0, kind}), value: string([]byte{0, 0, 0, 0, 0, 0})})
}

func (c *cleanLog) roll() {
	c.t.Helper()
	if err := c.log.Roll(); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cleanLog) clean(m *OffsetMap) CleanStats {
	c.t.Helper()
	stats, err := c.log.Clean(CleanOptions{Map: m, LastStableOffset: c.log.LogEndOffset()})
	if err != nil {
		c.t.Fatal(err)
	}
	return stats
}

// contents lists every record as "offset:key=value" (tombstones
// "key=<nil>", markers "<commit pid>"), and empty batches as
// "[first-last pid]", checking each batch's CRC on the way.
func contents(t *testing.T, log *Log) []string {
	t.Helper()
	batches, err := readAll(log)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range batches {
		if b.RecordCount() == 0 {
			out = append(out, fmt.Sprintf("[%d-%d p%d]", b.BaseOffset(), b.LastOffset(), b.ProducerID()))
			continue
		}
		if b.Control() {
			kind, err := records.ControlType(b)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%d:<%s p%d>", b.BaseOffset(), map[int16]string{0: "abort", 1: "commit"}[kind], b.ProducerID()))
			continue
		}
		section, err := records.Decompress(nil, b, 0)
		if err != nil {
			t.Fatal(err)
		}
		it := records.NewIter(section)
		n := 0
		for it.Next() {
			r := it.Record()
			value := string(r.Value)
			if r.Value == nil {
				value = "<nil>"
			}
			out = append(out, fmt.Sprintf("%d:%s=%s", b.BaseOffset()+rb.Offset(r.OffsetDelta), r.Key, value))
			n++
		}
		if it.Err() != nil || n != int(b.RecordCount()) {
			t.Fatalf("batch at %d: %d records, count %d, %v", b.BaseOffset(), n, b.RecordCount(), it.Err())
		}
	}
	return out
}

func expect(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("log holds\n  %s\nwant\n  %s", strings.Join(got, " "), strings.Join(want, " "))
	}
}

func TestCleanKeepsLatestOfEachKey(t *testing.T) {
	c := newCleanLog(t, vfs.NewMem())
	c.write(rb.Spec{}, 0, kv{"a", "1"}, kv{"b", "1"})
	c.write(rb.Spec{}, 0, kv{"a", "2"}, kv{"", "nokey"})
	c.roll()
	c.write(rb.Spec{}, 3, kv{"c", "1"}, kv{"b", "2"}) // a gap of 3 offsets before it
	c.roll()
	c.write(rb.Spec{}, 0, kv{"a", "3"}) // active: not cleaned
	lastDelta := rb.Batch(mustBatch(t, c.log, 0)).LastOffsetDelta()
	stats := c.clean(NewOffsetMap(1<<20, 0.9))
	if stats.End != 9 || c.log.CleanerOffset() != 9 {
		t.Fatalf("cleaned to %d (checkpoint %d), want 9: %s", stats.End, c.log.CleanerOffset(), stats)
	}
	// a=2 at 2 is superseded by the active segment's a=3, but the map
	// holds only the dirty range below the active segment.
	expect(t, contents(t, c.log), "2:a=2", "7:c=1", "8:b=2", "9:a=3")
	if d := rb.Batch(mustBatch(t, c.log, 2)).LastOffsetDelta(); d != lastDelta {
		t.Fatalf("rebuilt batch last offset delta %d, want %d (kept)", d, lastDelta)
	}
	if c.log.LogStartOffset() != 0 {
		t.Fatalf("log start %d moved", c.log.LogStartOffset())
	}
	// Reopened, the cleaned log and its checkpoint are the same.
	if err := c.log.Close(); err != nil {
		t.Fatal(err)
	}
	log, err := Open(c.fs, "/p", c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, contents(t, log), "2:a=2", "7:c=1", "8:b=2", "9:a=3")
	if log.CleanerOffset() != 9 {
		t.Fatalf("checkpoint %d after reopen", log.CleanerOffset())
	}
}

func mustBatch(t *testing.T, log *Log, offset rb.Offset) []byte {
	t.Helper()
	b, err := log.BatchBytes(nil, offset)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCleanTombstonesExpire(t *testing.T) {
	c := newCleanLog(t, vfs.NewMem())
	m := NewOffsetMap(1<<20, 0.9)
	c.write(rb.Spec{}, 0, kv{"a", "1"}, kv{"b", "1"})
	c.write(rb.Spec{}, 0, kv{"a", ""}) // tombstone
	c.roll()
	c.write(rb.Spec{}, 0, kv{"z", "1"})
	c.clean(m)
	expect(t, contents(t, c.log), "1:b=1", "2:a=<nil>", "3:z=1")
	b := rb.Batch(mustBatch(t, c.log, 2))
	horizon := c.now.Add(c.cfg.DeleteRetention).UnixMilli()
	if !b.HasDeleteHorizon() || b.BaseTimestamp() != horizon {
		t.Fatalf("tombstone batch: delete horizon %v at %d, want %d", b.HasDeleteHorizon(), b.BaseTimestamp(), horizon)
	}
	// Before the horizon a new cleaning keeps it; after, it goes.
	for i, step := range []time.Duration{time.Minute, time.Hour} {
		*c.now = c.now.Add(step)
		c.roll()
		c.write(rb.Spec{}, 0, kv{"y", "1"})
		c.clean(m)
		got := contents(t, c.log)
		if has := slices.Contains(got, "2:a=<nil>"); has != (i == 0) {
			t.Fatalf("after %v: tombstone kept %v: %v", step, has, got)
		}
	}
}

func TestCleanTransactions(t *testing.T) {
	c := newCleanLog(t, vfs.NewMem())
	m := NewOffsetMap(1<<20, 0.9)
	txn := func(pid int64) rb.Spec { return rb.Spec{ProducerID: pid, Transactional: true} }
	c.write(rb.Spec{}, 0, kv{"k", "0"})
	c.write(txn(7), 0, kv{"k", "aborted"}, kv{"x", "aborted"}) // 1-2
	c.write(txn(8), 0, kv{"k", "committed"})                   // 3
	c.marker(7, true)                                          // 4
	c.marker(8, false)                                         // 5
	c.write(rb.Spec{}, 0, kv{"y", "1"})                        // 6
	c.roll()
	c.write(rb.Spec{}, 0, kv{"z", "1"})
	c.clean(m)
	// The aborted records go; their producer's last batch stays as a
	// header (its sequence); the ABORT marker stays while a batch of its
	// transaction was met; the COMMIT marker stays (a batch of it is kept).
	expect(t, contents(t, c.log), "[1-2 p7]", "3:k=committed", "4:<abort p7>", "5:<commit p8>", "6:y=1", "7:z=1")
	// While p7's emptied batch stays (its producer is active), so does
	// its ABORT marker (Kafka meets the batch, so the transaction still
	// has one). Once p7 expires its batch goes; the next cleaning meets no
	// batch of the transaction and gives the marker a delete horizon,
	// and once that passes the marker goes. The COMMIT marker stays: its
	// record k=committed is kept.
	expire := func() {
		c.roll()
		c.write(rb.Spec{}, 0, kv{fmt.Sprintf("n%d", c.next), "1"})
		if _, err := c.log.Clean(CleanOptions{Map: m, LastStableOffset: c.log.LogEndOffset(), ProducerExpireBefore: c.now.UnixMilli() + 1}); err != nil {
			t.Fatal(err)
		}
	}
	expire()
	expect(t, contents(t, c.log), "3:k=committed", "4:<abort p7>", "5:<commit p8>", "6:y=1", "7:z=1", "8:n8=1")
	expire()
	if b := rb.Batch(mustBatch(t, c.log, 4)); !b.HasDeleteHorizon() || b.BaseTimestamp() != c.now.Add(time.Hour).UnixMilli() {
		t.Fatalf("ABORT marker without its delete horizon: %v %d", b.HasDeleteHorizon(), b.BaseTimestamp())
	}
	*c.now = c.now.Add(2 * time.Hour)
	expire()
	expect(t, contents(t, c.log), "3:k=committed", "5:<commit p8>", "6:y=1", "7:z=1", "8:n8=1", "9:n9=1", "10:n10=1")
}

func TestCleanKeepsProducerState(t *testing.T) {
	c := newCleanLog(t, vfs.NewMem())
	idem := rb.Spec{ProducerID: 42, ProducerEpoch: 3, BaseSequence: 10}
	c.write(idem, 0, kv{"a", "1"}, kv{"b", "1"})
	c.write(rb.Spec{}, 0, kv{"a", "2"}, kv{"b", "2"})
	c.write(rb.Spec{}, 0, kv{"c", "1"})
	c.roll()
	c.write(rb.Spec{}, 0, kv{"d", "1"})
	c.clean(NewOffsetMap(1<<20, 0.9))
	expect(t, contents(t, c.log), "[0-1 p42]", "2:a=2", "3:b=2", "4:c=1", "5:d=1")
	b := rb.Batch(mustBatch(t, c.log, 0))
	if b.ProducerEpoch() != 3 || b.BaseSequence() != 10 || b.LastOffsetDelta() != 1 || b.Verify() != nil {
		t.Fatalf("emptied batch: epoch %d sequence %d last delta %d, crc %v", b.ProducerEpoch(), b.BaseSequence(), b.LastOffsetDelta(), b.Verify())
	}
	// Expired, the producer keeps nothing.
	c.roll()
	c.write(rb.Spec{}, 0, kv{"e", "1"})
	if _, err := c.log.Clean(CleanOptions{Map: NewOffsetMap(1<<20, 0.9), LastStableOffset: c.log.LogEndOffset(), ProducerExpireBefore: c.now.UnixMilli() + 1}); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, c.log); got[0] == "[0-1 p42]" {
		t.Fatalf("expired producer's batch kept: %v", got)
	}
}

// TestCleanSmallOffsetMap: a map too small for the dirty range cleans
// what it holds each time and gets to the same log as a large one.
func TestCleanSmallOffsetMap(t *testing.T) {
	build := func() *cleanLog {
		c := newCleanLog(t, vfs.NewMem())
		for round := range 6 {
			for k := range 5 {
				c.write(rb.Spec{}, k%2, kv{fmt.Sprintf("k%d", (round+k)%7), fmt.Sprintf("v%d.%d", round, k)})
			}
			c.roll()
		}
		c.write(rb.Spec{}, 0, kv{"tail", "1"})
		return c
	}
	large := build()
	large.clean(NewOffsetMap(1<<20, 0.9))
	want := contents(t, large.log)

	small := build()
	m := NewOffsetMap(4*offsetMapSlotBytes, 1) // 3 keys
	for i := 0; ; i++ {
		if i == 50 {
			t.Fatal("small map: no end after 50 cleanings")
		}
		stats := small.clean(m)
		if stats.End == stats.FirstDirty {
			break
		}
		if m.Len() > m.Capacity() {
			t.Fatalf("map holds %d keys, capacity %d", m.Len(), m.Capacity())
		}
	}
	expect(t, contents(t, small.log), want...)
}

// TestCleanSkipsUncleanable: the last stable offset and
// min.compaction.lag.ms keep segments out of a cleaning.
func TestCleanSkipsUncleanable(t *testing.T) {
	c := newCleanLog(t, vfs.NewMem())
	c.write(rb.Spec{}, 0, kv{"a", "1"})
	c.roll()
	c.write(rb.Spec{}, 0, kv{"a", "2"})
	c.roll()
	c.write(rb.Spec{}, 0, kv{"a", "3"})
	if stats, err := c.log.Clean(CleanOptions{Map: NewOffsetMap(1<<20, 0.9), LastStableOffset: 1}); err != nil || stats.End != 1 {
		t.Fatalf("clean below the LSO 1: %v, %s", err, stats)
	}
	expect(t, contents(t, c.log), "0:a=1", "1:a=2", "2:a=3")
	c.log.cfg.MinCompactionLag = time.Hour
	if cl := c.log.Cleanable(c.log.LogEndOffset()); cl.FirstUncleanable != 1 || cl.DirtyBytes != 0 {
		t.Fatalf("min compaction lag: %+v", cl)
	}
	c.log.cfg.MinCompactionLag = 0
	if cl := c.log.Cleanable(c.log.LogEndOffset()); cl.FirstUncleanable != 2 || cl.Eligible(0.5) || !cl.Eligible(0.4) {
		t.Fatalf("cleanable %+v ratio %v", cl, cl.Ratio())
	}
	c.clean(NewOffsetMap(1<<20, 0.9))
	expect(t, contents(t, c.log), "1:a=2", "2:a=3")
}

// compressBatch rewrites an uncompressed batch with codec.
func compressBatch(t *testing.T, batch []byte, codec rb.Codec) []byte {
	t.Helper()
	out, err := records.Compress(make([]byte, rb.HeaderSize), rb.Batch(batch).Records(), records.Compression{Codec: codec})
	if err != nil {
		t.Fatal(err)
	}
	h := headerOf(rb.Batch(batch))
	h.Codec = codec
	rb.PutHeader(rb.Batch(out), h)
	return out
}

// TestCleanCompressedBatches: a compressed batch the cleaning keeps part
// of is rebuilt in its codec, with the kept records' timestamps.
func TestCleanCompressedBatches(t *testing.T) {
	for _, codec := range []rb.Codec{rb.CodecGzip, rb.CodecSnappy, rb.CodecLZ4, rb.CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			c := newCleanLog(t, vfs.NewMem())
			spec := rb.Spec{ProducerID: -1, BaseTimestamp: baseTimestamp, Records: []rb.Record{
				{Key: []byte("a"), Value: []byte("1")},
				{Key: []byte("b"), Value: []byte("1"), TimestampDelta: 5},
				{Key: []byte("c"), Value: []byte("1"), TimestampDelta: 9},
			}}
			if _, err := c.log.Append(compressBatch(t, rb.Append(nil, spec), codec)); err != nil {
				t.Fatal(err)
			}
			c.next = c.log.LogEndOffset()
			c.write(rb.Spec{}, 0, kv{"c", "2"})
			c.roll()
			c.write(rb.Spec{}, 0, kv{"z", "1"})
			c.clean(NewOffsetMap(1<<20, 0.9))
			expect(t, contents(t, c.log), "0:a=1", "1:b=1", "3:c=2", "4:z=1")
			b := rb.Batch(mustBatch(t, c.log, 0))
			if b.Codec() != codec || b.RecordCount() != 2 || b.LastOffsetDelta() != 2 || b.BaseTimestamp() != baseTimestamp || b.MaxTimestamp() != baseTimestamp+5 || b.Verify() != nil {
				t.Fatalf("rebuilt batch: %s, %d records, last delta %d, timestamps %d..%d, crc %v", b.Codec(), b.RecordCount(), b.LastOffsetDelta(), b.BaseTimestamp(), b.MaxTimestamp(), b.Verify())
			}
		})
	}
}

// TestCleanRacingTruncation: a truncation (a mirror's divergence) into a
// segment the cleaning is reading, then appends that seal it again, make
// the cleaning drop its copy: the log keeps what was written after the
// truncation, and the checkpoint does not move.
func TestCleanRacingTruncation(t *testing.T) {
	c := newCleanLog(t, vfs.NewMem())
	c.write(rb.Spec{}, 0, kv{"a", "1"})
	c.write(rb.Spec{}, 0, kv{"a", "2"})
	c.write(rb.Spec{}, 0, kv{"a", "3"})
	c.roll()
	c.write(rb.Spec{}, 0, kv{"z", "1"})
	truncated := false
	stats, err := c.log.Clean(CleanOptions{Map: NewOffsetMap(1<<20, 0.9), LastStableOffset: c.log.LogEndOffset(), Throttle: func(int64) {
		if truncated {
			return
		}
		truncated = true
		if err := c.log.TruncateTo(1); err != nil {
			t.Fatal(err)
		}
		c.next = 1
		c.write(rb.Spec{}, 0, kv{"b", "new"})
		c.write(rb.Spec{}, 0, kv{"b", "newer"})
		c.roll()
		c.write(rb.Spec{}, 0, kv{"y", "1"})
	}})
	if err != nil || !truncated {
		t.Fatalf("clean: %v (truncated %v)", err, truncated)
	}
	expect(t, contents(t, c.log), "0:a=1", "1:b=new", "2:b=newer", "3:y=1")
	if c.log.CleanerOffset() != noCleanerOffset || stats.End != stats.FirstDirty {
		t.Fatalf("checkpoint %d, stats %s: want no progress", c.log.CleanerOffset(), stats)
	}
	// The next cleaning cleans what is there now.
	c.clean(NewOffsetMap(1<<20, 0.9))
	expect(t, contents(t, c.log), "0:a=1", "2:b=newer", "3:y=1")
}
