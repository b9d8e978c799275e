package logstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// spanBatch is one batch of count 50-byte records, [base, base+count-1],
// every record at timestamp.
func spanBatch(base rb.Offset, count int, timestamp int64) []byte {
	records := make([]rb.Record, count)
	for i := range records {
		records[i] = rb.Record{Value: bytes.Repeat([]byte{byte(base) + byte(i)}, 50)}
	}
	return rb.Append(nil, rb.Spec{BaseOffset: base, BaseTimestamp: timestamp, ProducerID: -1, Records: records})
}

// emptyBatch is a batch as Kafka's cleaner keeps one whose records it all
// removed, for its producer's state: the header of [base, base+lastDelta]
// at timestamp, without records.
func emptyBatch(base rb.Offset, lastDelta int32, timestamp int64) []byte {
	b := rb.Batch(rb.Append(nil, rb.Spec{BaseOffset: base, BaseTimestamp: timestamp, ProducerID: 7}))
	binary.BigEndian.PutUint32(b[23:], uint32(lastDelta)) // lastOffsetDelta
	binary.BigEndian.PutUint64(b[35:], uint64(timestamp)) // maxTimestamp
	b.SetCRC(b.ComputeCRC())
	return b
}

// offsetEntry and timeEntry are index entries as the files hold them.
type offsetEntry struct{ relative, position uint32 }

type timeEntry struct {
	timestamp int64
	relative  uint32
}

func decodeOffsetEntries(t *testing.T, data []byte) []offsetEntry {
	t.Helper()
	if len(data)%offsetEntrySize != 0 {
		t.Fatalf("offset index of %d bytes", len(data))
	}
	var out []offsetEntry
	for e := data; len(e) > 0; e = e[offsetEntrySize:] {
		out = append(out, offsetEntry{binary.BigEndian.Uint32(e), binary.BigEndian.Uint32(e[4:])})
	}
	return out
}

func decodeTimeEntries(t *testing.T, data []byte) []timeEntry {
	t.Helper()
	if len(data)%timeEntrySize != 0 {
		t.Fatalf("time index of %d bytes", len(data))
	}
	var out []timeEntry
	for e := data; len(e) > 0; e = e[timeEntrySize:] {
		out = append(out, timeEntry{int64(binary.BigEndian.Uint64(e)), binary.BigEndian.Uint32(e[8:])})
	}
	return out
}

// TestIndexEntryLayout pins the entries as Kafka's LogSegment writes them:
// an offset entry holds the LAST offset of its batch and the batch's
// position, added for a batch that starts more than index.interval.bytes
// after the last indexed one; a time entry holds the max timestamp so far
// and the last offset of the batch holding it, added when the maximum
// grows, and once more when the segment is sealed (here by Close).
func TestIndexEntryLayout(t *testing.T) {
	five := int64(len(spanBatch(0, 5, 0))) // the size of a five-record batch
	// The batches of most cases: a compaction gap (10-19), timestamps not
	// monotonic, and a last batch of one record.
	gapped := [][]byte{spanBatch(0, 5, 1000), spanBatch(5, 5, 3000), spanBatch(20, 5, 2000), spanBatch(25, 1, 4000)}
	type segmentWant struct {
		base rb.Offset
		// offsets are (relative last offset, index of the batch in the
		// segment: its position is the sum of the sizes before it).
		offsets [][2]int
		times   []timeEntry
	}
	tests := []struct {
		name         string
		interval     int64
		segmentBytes int64
		batches      [][]byte
		want         []segmentWant
	}{
		{"an entry per batch after the first", 0, 1 << 20, gapped, []segmentWant{
			{0, [][2]int{{9, 1}, {24, 2}, {25, 3}}, []timeEntry{{3000, 9}, {4000, 25}}},
		}},
		{"more than the interval: the entry names its batch, the time entry the batch holding the max", five, 1 << 20, gapped, []segmentWant{
			{0, [][2]int{{24, 2}}, []timeEntry{{3000, 9}, {4000, 25}}}, // the second from the seal at close
		}},
		{"exactly the interval is not more", 2 * five, 1 << 20, gapped, []segmentWant{
			{0, [][2]int{{25, 3}}, []timeEntry{{4000, 25}}},
		}},
		{"no timestamps: no time entries", 0, 1 << 20,
			[][]byte{spanBatch(0, 5, -1), spanBatch(5, 5, -1), spanBatch(10, 2, -1)}, []segmentWant{
				{0, [][2]int{{9, 1}, {11, 2}}, nil},
			}},
		{"a batch without records holds no timestamp", 0, 1 << 20,
			[][]byte{spanBatch(0, 5, 1000), emptyBatch(5, 4, 9000), spanBatch(10, 5, 2000)}, []segmentWant{
				{0, [][2]int{{9, 1}, {14, 2}}, []timeEntry{{1000, 4}, {2000, 14}}},
			}},
		{"relative to each segment", 0, 3 * five,
			[][]byte{spanBatch(0, 5, 1000), spanBatch(5, 5, 3000), spanBatch(20, 5, 2000), spanBatch(25, 5, 4000), spanBatch(30, 5, 500)}, []segmentWant{
				{0, [][2]int{{9, 1}, {24, 2}}, []timeEntry{{3000, 9}}},
				{25, [][2]int{{9, 1}}, []timeEntry{{4000, 4}}},
			}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
				cfg := testConfig()
				cfg.IndexIntervalBytes, cfg.SegmentBytes = test.interval, test.segmentBytes
				log := openLog(t, fsys, dir, cfg)
				for _, b := range test.batches {
					mustAppend(t, log, b)
				}
				if msg := checkIndexLayout(log); msg != "" {
					t.Errorf("before close: %s", msg)
				}
				closeLog(t, log)
				if got := log.Segments(); got != len(test.want) {
					t.Fatalf("%d segments, want %d", got, len(test.want))
				}
				batches := test.batches
				for _, seg := range test.want {
					var inSegment [][]byte
					for len(batches) > 0 && (len(inSegment) == 0 || int64(len(slices.Concat(inSegment...))+len(batches[0])) <= test.segmentBytes) {
						inSegment, batches = append(inSegment, batches[0]), batches[1:]
					}
					if got := rb.Batch(inSegment[0]).BaseOffset(); got != seg.base {
						t.Fatalf("segment of batches from %d, want %d", got, seg.base)
					}
					var wantOffsets []offsetEntry
					for _, e := range seg.offsets {
						wantOffsets = append(wantOffsets, offsetEntry{uint32(e[0]), uint32(len(slices.Concat(inSegment[:e[1]]...)))})
					}
					base := segmentPath(dir, seg.base, "")
					if got := decodeOffsetEntries(t, fileBytes(t, fsys, base+extIndex)); !slices.Equal(got, wantOffsets) {
						t.Errorf("segment %d: offset index %v, want %v", seg.base, got, wantOffsets)
					}
					if got := decodeTimeEntries(t, fileBytes(t, fsys, base+extTimeIndex)); !slices.Equal(got, seg.times) {
						t.Errorf("segment %d: time index %v, want %v", seg.base, got, seg.times)
					}
				}
			})
		})
	}
}

// checkIndexLayout checks every segment's indexes as Kafka's
// DumpLogSegments --verify-index-only does: the batch at each offset
// entry's position ends at the entry's offset; each time entry names the
// last offset of a batch whose max timestamp is the entry's, with
// timestamps increasing. It returns what is wrong.
func checkIndexLayout(l *Log) string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segments {
		lastAt := map[int64]rb.Offset{}       // position -> the batch's last offset
		maxTimestamp := map[rb.Offset]int64{} // last offset -> the batch's max timestamp
		w := s.walk(0, s.size, false)
		for w.next() {
			lastAt[w.position] = w.batch.LastOffset()
			maxTimestamp[w.batch.LastOffset()] = w.batch.MaxTimestamp()
		}
		w.close()
		if w.err != nil {
			return fmt.Sprintf("segment %d: %v", s.base, w.err)
		}
		for i := range s.offsets.readable() {
			relative, position := s.offsets.offsetAt(i)
			if last, ok := lastAt[int64(position)]; !ok || last != s.base+rb.Offset(relative) {
				return fmt.Sprintf("segment %d: offset entry %d (%d, %d): the batch there ends at %d (found %v)", s.base, i, relative, position, last, ok)
			}
		}
		previous := int64(noTimestamp)
		for i := range s.times.readable() {
			timestamp, relative := s.times.timeAt(i)
			if got, ok := maxTimestamp[s.base+rb.Offset(relative)]; !ok || got != timestamp || timestamp <= previous {
				return fmt.Sprintf("segment %d: time entry %d (%d, %d): no batch ends there with that max timestamp (found %v, %d), or not after %d", s.base, i, timestamp, relative, ok, got, previous)
			}
			previous = timestamp
		}
	}
	return ""
}

// TestIndexPreviousLayout opens a log whose indexes the previous release
// wrote, keyed by first offsets. The active segment's indexes are rebuilt
// in Kafka's layout at open; the sealed segments' are kept (rebuilding
// them would read the whole log) and every lookup stays correct with them.
func TestIndexPreviousLayout(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := testConfig()
		log, batches := layoutLog(t, fsys, dir, cfg)
		for _, base := range []rb.Offset{65, 70} { // the active segment 60 gets index entries too
			batches = append(batches, testBatch(base, 3, baseTimestamp+int64(base)*1000))
			mustAppend(t, log, batches[len(batches)-1])
		}
		closeLog(t, log)
		// Every test batch holds five offsets: the previous release keyed
		// each entry four offsets lower.
		firstOffsetKeys := func(entrySize, keyAt int) func([]byte) []byte {
			return func(data []byte) []byte {
				for e := data; len(e) > 0; e = e[entrySize:] {
					binary.BigEndian.PutUint32(e[keyAt:], binary.BigEndian.Uint32(e[keyAt:])-4)
				}
				return data
			}
		}
		kafkaLayout := map[string][]byte{}
		for _, segment := range []rb.Offset{0, 25, 60} {
			base := segmentPath(dir, segment, "")
			for _, ext := range []string{extIndex, extTimeIndex} {
				kafkaLayout[base+ext] = fileBytes(t, fsys, base+ext)
				if len(kafkaLayout[base+ext]) == 0 {
					t.Fatalf("%s is empty", base+ext)
				}
			}
			rewriteFile(t, fsys, base+extIndex, firstOffsetKeys(offsetEntrySize, 0))
			rewriteFile(t, fsys, base+extTimeIndex, firstOffsetKeys(timeEntrySize, 8))
		}
		previousLayout := map[string][]byte{}
		for name := range kafkaLayout {
			previousLayout[name] = fileBytes(t, fsys, name)
		}

		log = openLog(t, fsys, dir, cfg)
		checkContents(t, log, batches)
		end := log.LogEndOffset()
		for offset := range end {
			got, err := log.ReadBytes(nil, offset, 1, end, true)
			if err != nil {
				t.Fatalf("read at %d: %v", offset, err)
			}
			if want := firstBatchFrom(batches, offset); !bytes.Equal(got, want) {
				t.Errorf("read at %d: batch from %d, want %d", offset, rb.Batch(got).BaseOffset(), rb.Batch(want).BaseOffset())
			}
		}
		for _, b := range batches {
			for _, timestamp := range []int64{rb.Batch(b).MaxTimestamp() - 1, rb.Batch(b).MaxTimestamp()} {
				if got, ok, err := log.OffsetForTimestamp(timestamp); err != nil || !ok || got != rb.Batch(b).BaseOffset() {
					t.Errorf("offset for timestamp %d: %d %v %v, want %d", timestamp, got, ok, err, rb.Batch(b).BaseOffset())
				}
			}
		}
		last := rb.Batch(batches[len(batches)-1])
		if ts, offset, ok := log.MaxTimestamp(); !ok || ts != last.MaxTimestamp() || offset != last.LastOffset() {
			t.Errorf("max timestamp %d at %d (%v), want %d at %d", ts, offset, ok, last.MaxTimestamp(), last.LastOffset())
		}
		closeLog(t, log)
		for name, want := range kafkaLayout {
			if name[len(dir)+1:len(dir)+21] != fmt.Sprintf("%020d", 60) {
				want = previousLayout[name] // sealed: kept as it was
			}
			if got := fileBytes(t, fsys, name); !bytes.Equal(got, want) {
				t.Errorf("%s after open and close: %x, want %x", name, got, want)
			}
		}
	})
}
