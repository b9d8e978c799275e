package logstore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mirrord/mirrord/epoch"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// reopeners are the two ways a test checks that a change is durable: a
// clean close and reopen, and a crash that keeps only synced data.
var reopeners = []struct {
	name   string
	reopen func(t *testing.T, fsys *vfs.Mem, log *Log, cfg Config) *Log
}{
	{"close", func(t *testing.T, fsys *vfs.Mem, log *Log, cfg Config) *Log {
		closeLog(t, log)
		return openLog(t, fsys, "/d", cfg)
	}},
	{"crash", func(t *testing.T, fsys *vfs.Mem, _ *Log, cfg Config) *Log {
		fsys.CrashClean()
		return openLog(t, fsys, "/d", cfg)
	}},
}

// logState is what the truncation tests check of a log.
type logState struct {
	start, end rb.Offset
	segments   []rb.Offset
	visible    [][]byte // batches a reader sees
	epochs     []epoch.Entry
}

func checkState(t *testing.T, log *Log, want logState) {
	t.Helper()
	if got := log.LogStartOffset(); got != want.start {
		t.Errorf("log start %d, want %d", got, want.start)
	}
	if got := log.LogEndOffset(); got != want.end {
		t.Errorf("log end %d, want %d", got, want.end)
	}
	var bases []rb.Offset
	log.mu.RLock()
	for _, s := range log.segments {
		bases = append(bases, s.base)
	}
	log.mu.RUnlock()
	if !slices.Equal(bases, want.segments) {
		t.Errorf("segments %v, want %v", bases, want.segments)
	}
	if got := log.Epochs(); !slices.Equal(got, want.epochs) {
		t.Errorf("epochs %v, want %v", got, want.epochs)
	}
	if hw := log.HighWatermark(); hw < want.start || hw > want.end {
		t.Errorf("high watermark %d outside [%d, %d]", hw, want.start, want.end)
	}
	checkContents(t, log, want.visible)
}

var layoutEntries = []epoch.Entry{entry(1, 0), entry(2, 25), entry(3, 60)}

func entry(e rb.Epoch, start rb.Offset) epoch.Entry { return epoch.Entry{Epoch: e, StartOffset: start} }

func TestTruncateTo(t *testing.T) {
	tests := []struct {
		name     string
		start    rb.Offset // AdvanceLogStart to it first
		to       rb.Offset
		wantEnd  rb.Offset
		keep     int // layout batches left
		segments []rb.Offset
	}{
		{"at the log end", 0, layoutEnd, layoutEnd, 7, []rb.Offset{0, 25, 60}},
		{"past the log end", 0, 100, layoutEnd, 7, []rb.Offset{0, 25, 60}},
		{"inside the last batch", 0, 62, 45, 6, []rb.Offset{0, 25}},
		{"at the last segment base", 0, 60, 45, 6, []rb.Offset{0, 25}},
		{"gap across a segment end", 0, 50, 45, 6, []rb.Offset{0, 25}},
		{"inside a batch of the middle segment", 0, 32, 30, 4, []rb.Offset{0, 25}},
		{"inside the first batch of a segment", 0, 27, 25, 3, []rb.Offset{0}},
		{"at a segment base", 0, 25, 25, 3, []rb.Offset{0}},
		{"gap inside the first segment", 0, 12, 10, 2, []rb.Offset{0}},
		{"inside the first batch", 0, 3, 0, 0, []rb.Offset{0}},
		{"at the log start inside a batch", 7, 7, 7, 0, []rb.Offset{7}},
		{"below the log start", 7, 2, 2, 0, []rb.Offset{2}},
	}
	for _, test := range tests {
		for _, r := range reopeners {
			t.Run(test.name+"/"+r.name, func(t *testing.T) {
				fsys := vfs.NewMem()
				cfg := testConfig()
				log, batches := layoutLog(t, fsys, "/d", cfg)
				if err := log.AdvanceLogStart(test.start); err != nil {
					t.Fatal(err)
				}
				log.SetHighWatermark(layoutEnd)
				if err := log.TruncateTo(test.to); err != nil {
					t.Fatalf("truncate to %d: %v", test.to, err)
				}
				want := logState{start: min(test.start, test.to), end: test.wantEnd, segments: test.segments, visible: batches[:test.keep]}
				if test.keep == 0 {
					want.start, want.visible = test.wantEnd, nil
				}
				for _, e := range layoutEntries {
					if e.StartOffset < test.wantEnd && test.keep > 0 {
						want.epochs = append(want.epochs, e)
					}
				}
				checkState(t, log, want)
				if hw := log.HighWatermark(); hw != test.wantEnd {
					t.Errorf("high watermark %d, want the new log end %d", hw, test.wantEnd)
				}
				log = r.reopen(t, fsys, log, cfg)
				checkState(t, log, want)
				closeLog(t, log)
			})
		}
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	for _, offset := range []rb.Offset{1000, layoutEnd, 3, 0} {
		for _, r := range reopeners {
			t.Run(fmt.Sprintf("%d/%s", offset, r.name), func(t *testing.T) {
				fsys := vfs.NewMem()
				cfg := testConfig()
				log, _ := layoutLog(t, fsys, "/d", cfg)
				if err := log.TruncateFullyAndStartAt(offset); err != nil {
					t.Fatal(err)
				}
				want := logState{start: offset, end: offset, segments: []rb.Offset{offset}}
				checkState(t, log, want)
				if hw := log.HighWatermark(); hw != offset {
					t.Errorf("high watermark %d, want %d", hw, offset)
				}
				next := testBatch(offset, 4, baseTimestamp)
				mustAppend(t, log, next)
				want.end, want.visible, want.epochs = offset+5, [][]byte{next}, []epoch.Entry{entry(4, offset)}
				log = r.reopen(t, fsys, log, cfg)
				checkState(t, log, want)
				closeLog(t, log)
			})
		}
	}
}

func TestAdvanceLogStart(t *testing.T) {
	tests := []struct {
		name      string
		to        rb.Offset
		wantStart rb.Offset
		wantEnd   rb.Offset
		first     int // first layout batch visible
		segments  []rb.Offset
		epochs    []epoch.Entry
	}{
		{"no change", 0, 0, layoutEnd, 0, []rb.Offset{0, 25, 60}, layoutEntries},
		{"inside a batch", 7, 7, layoutEnd, 1, []rb.Offset{0, 25, 60}, []epoch.Entry{entry(1, 7), entry(2, 25), entry(3, 60)}},
		{"at a segment base", 25, 25, layoutEnd, 3, []rb.Offset{25, 60}, layoutEntries[1:]},
		{"inside a later segment", 27, 27, layoutEnd, 3, []rb.Offset{25, 60}, []epoch.Entry{entry(2, 27), entry(3, 60)}},
		{"in a gap across a segment end", 50, 50, layoutEnd, 6, []rb.Offset{25, 60}, []epoch.Entry{entry(2, 50), entry(3, 60)}},
		{"to the log end", layoutEnd, layoutEnd, layoutEnd, 7, []rb.Offset{60}, nil},
		{"past the log end", 100, 100, 100, 7, []rb.Offset{100}, nil},
	}
	for _, test := range tests {
		for _, r := range reopeners {
			t.Run(test.name+"/"+r.name, func(t *testing.T) {
				fsys := vfs.NewMem()
				cfg := testConfig()
				log, batches := layoutLog(t, fsys, "/d", cfg)
				log.SetHighWatermark(10)
				if err := log.AdvanceLogStart(test.to); err != nil {
					t.Fatalf("advance log start to %d: %v", test.to, err)
				}
				want := logState{start: test.wantStart, end: test.wantEnd, segments: test.segments, visible: batches[test.first:], epochs: test.epochs}
				checkState(t, log, want)
				if hw, wantHW := log.HighWatermark(), max(10, test.wantStart); hw != wantHW {
					t.Errorf("high watermark %d, want %d", hw, wantHW)
				}
				for _, base := range []rb.Offset{0, 25} { // segments wholly below are gone
					if exists, _ := fsys.Exists(segmentPath("/d", base, extLog)); exists != slices.Contains(test.segments, base) {
						t.Errorf("segment %d on disk: %v", base, exists)
					}
				}
				log = r.reopen(t, fsys, log, cfg)
				if r.name == "crash" && test.wantStart == test.wantEnd {
					// Recovery restarts a log with nothing visible at its
					// start, dropping the segments below it.
					want.segments = []rb.Offset{test.wantStart}
				}
				checkState(t, log, want)
				closeLog(t, log)
			})
		}
	}
}

func TestApplyRetention(t *testing.T) {
	// Segment max timestamps: 0 -> +20s, 25 -> +40s, 60 -> +60s.
	segmentZeroMax := time.UnixMilli(baseTimestamp + 20_000)
	tests := []struct {
		name         string
		bytes        int64
		age          time.Duration
		now          time.Time
		wantDeleted  int
		wantSegments []rb.Offset
	}{
		{"disabled", 0, 0, segmentZeroMax.Add(1000 * time.Hour), 0, []rb.Offset{0, 25, 60}},
		{"bytes: one segment over", 4 * batchSize, 0, segmentZeroMax, 1, []rb.Offset{25, 60}},
		{"bytes: deleting would go below the limit", 4*batchSize + 1, 0, segmentZeroMax, 0, []rb.Offset{0, 25, 60}},
		{"bytes: never the active segment", 1, 0, segmentZeroMax, 2, []rb.Offset{60}},
		{"age: oldest segment expired", 0, time.Hour, segmentZeroMax.Add(time.Hour + time.Millisecond), 1, []rb.Offset{25, 60}},
		{"age: oldest segment exactly at the limit", 0, time.Hour, segmentZeroMax.Add(time.Hour), 0, []rb.Offset{0, 25, 60}},
		{"age: never the active segment", 0, time.Hour, segmentZeroMax.Add(10 * time.Hour), 2, []rb.Offset{60}},
		{"age or bytes", 1, time.Hour, segmentZeroMax, 2, []rb.Offset{60}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := testConfig()
			clk := &clock{now: test.now}
			cfg.Now, cfg.RetentionBytes, cfg.RetentionAge = clk.Now, test.bytes, test.age
			log, batches := layoutLog(t, fsys, "/d", cfg)
			deleted, err := log.ApplyRetention()
			if err != nil || deleted != test.wantDeleted {
				t.Fatalf("apply retention: deleted %d (%v), want %d", deleted, err, test.wantDeleted)
			}
			start := test.wantSegments[0]
			first := slices.Index(layoutBases, start)
			want := logState{start: start, end: layoutEnd, segments: test.wantSegments, visible: batches[first:]}
			for _, e := range layoutEntries {
				if e.StartOffset >= start {
					want.epochs = append(want.epochs, e)
				}
			}
			checkState(t, log, want)
			log = reopeners[1].reopen(t, fsys, log, cfg)
			checkState(t, log, want)
			closeLog(t, log)
		})
	}
}

func TestSetHighWatermark(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := testConfig()
	log, _ := layoutLog(t, fsys, "/d", cfg)
	if err := log.AdvanceLogStart(10); err != nil {
		t.Fatal(err)
	}
	for _, test := range []struct{ set, want rb.Offset }{
		{5, 10}, {10, 10}, {40, 40}, {layoutEnd, layoutEnd}, {100, layoutEnd}, {-1, 10}, {22, 22},
	} {
		if got := log.SetHighWatermark(test.set); got != test.want || log.HighWatermark() != test.want {
			t.Errorf("set high watermark %d in [10, %d]: got %d, reads %d; want %d", test.set, layoutEnd, got, log.HighWatermark(), test.want)
		}
	}
	// 22 is persisted by Checkpoint; 30 is not until Close.
	if err := log.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	log.SetHighWatermark(30)
	fsys.CrashClean()
	log = openLog(t, fsys, "/d", cfg)
	if got := log.HighWatermark(); got != 22 {
		t.Errorf("high watermark %d after a crash, want the checkpointed 22", got)
	}
	log.SetHighWatermark(30)
	closeLog(t, log)
	log = openLog(t, fsys, "/d", cfg)
	if got := log.HighWatermark(); got != 30 {
		t.Errorf("high watermark %d after close, want 30", got)
	}
	closeLog(t, log)
}

// mapCheckFS wraps an FS to know whether each mapping is live, so a test
// can check that no index keeps a slice of a mapping it has released: on
// the real file system, reading one is a segfault (Mem's slices stay
// readable).
type mapCheckFS struct{ vfs.FS }

type mapCheckFile struct{ vfs.File }

type mapCheckMapping struct {
	vfs.Mapping
	live bool
}

func (m mapCheckFS) Create(name string) (vfs.File, error) { return wrapMapCheck(m.FS.Create(name)) }
func (m mapCheckFS) Open(name string) (vfs.File, error)   { return wrapMapCheck(m.FS.Open(name)) }

func wrapMapCheck(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return mapCheckFile{File: f}, nil
}

func (f mapCheckFile) Map(size int) (vfs.Mapping, error) {
	m, err := f.File.Map(size)
	if err != nil {
		return nil, err
	}
	return &mapCheckMapping{Mapping: m, live: true}, nil
}

func (m *mapCheckMapping) Unmap() error {
	err := m.Mapping.Unmap()
	if err == nil {
		m.live = false
	}
	return err
}

// checkMappings reports an index of log whose entries are not inside its
// file's live mapping.
func checkMappings(log *Log) string {
	log.mu.RLock()
	defer log.mu.RUnlock()
	for _, s := range log.segments {
		for _, x := range []*index{s.offsets, s.times} {
			var live []byte
			if m, ok := x.mapping.(*mapCheckMapping); ok && m.live {
				live = m.Bytes()
			}
			switch {
			case x.lazy.Load() && x.mapping == nil:
				// Sealed and unmapped: a lookup maps it first.
			case x.entries*x.entrySize > len(x.mapped):
				return fmt.Sprintf("%s: %d entries, %d bytes mapped", x.name, x.entries, len(x.mapped))
			case len(x.mapped) > 0 && (len(live) < len(x.mapped) || &live[0] != &x.mapped[0]):
				return fmt.Sprintf("%s: the index reads a mapping its file no longer has", x.name)
			}
		}
	}
	return ""
}
