package logstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"syscall"
	"testing"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// contiguousLog writes [0-4] [5-9] ... [35-39] in epoch 1 into dir, four
// batches a segment (segments 0 and 20), closes it and returns its batches
// and configuration. No index entries: an open walks every header.
func contiguousLog(t *testing.T, fsys vfs.FS, dir string) ([][]byte, Config) {
	t.Helper()
	cfg := testConfig()
	cfg.SegmentBytes = 4 * batchSize
	cfg.IndexIntervalBytes = 1 << 20
	log := openLog(t, fsys, dir, cfg)
	var batches [][]byte
	for i := range 8 {
		batches = append(batches, testBatch(rb.Offset(5*i), 1, baseTimestamp))
		mustAppend(t, log, batches[i])
	}
	closeLog(t, log)
	return batches, cfg
}

// withRecordCount sets the record count of batch b (a test batch's last
// offset delta is 4) and makes its CRC again, so only the header checks
// can tell.
func withRecordCount(b []byte, count int32) []byte {
	binary.BigEndian.PutUint32(b[57:], uint32(count))
	rb.Batch(b).SetCRC(rb.Batch(b).ComputeCRC())
	return b
}

// TestRecoverHeaderChecks changes header fields the CRC does not cover
// (base offset, partition leader epoch), and a record count with its CRC
// made again, in a log of contiguous batches: recovery must cut at the
// first batch whose offsets, epoch or count it cannot trust. When a base
// offset collides with the batch before it, the cut goes before both
// unless the one before continues the segment's base without a gap
// (anchored). The base offset cases fail with the recovery before issue
// 19, which kept a raised batch and cut the one after it, and did not
// check sealed segments' order at all.
func TestRecoverHeaderChecks(t *testing.T) {
	at := func(i int) int64 { return int64(i) * batchSize }
	setBase := func(i int, base rb.Offset) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint64(b[at(i):], uint64(base)); return b }
	}
	setEpoch := func(i int, e rb.Epoch) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint32(b[at(i)+12:], uint32(e)); return b }
	}
	setCount := func(i int, count int32) func([]byte) []byte {
		return func(b []byte) []byte { withRecordCount(b[at(i):at(i)+batchSize], count); return b }
	}
	tests := []struct {
		name    string
		segment rb.Offset // the segment changed: 0 (sealed) or 20 (active)
		change  func([]byte) []byte
		keep    int // batches of the log left
		noIndex bool
	}{
		{"active: base offset raised by 5 mid-segment", 20, setBase(1, 30), 5, false},
		{"active: base offset lowered by 5 mid-segment", 20, setBase(2, 25), 6, false},
		{"active: first base offset raised into the next batch", 20, setBase(0, 22), 4, false},
		{"active: last base offset raised by 5 (a gap: kept)", 20, setBase(3, 40), 8, false},
		{"active: leader epoch going backwards", 20, setEpoch(2, 0), 6, false},
		{"active: more records than offsets", 20, setCount(1, 6), 5, false},
		{"sealed: base offset raised by 5 mid-segment", 0, setBase(1, 10), 1, false},
		{"sealed: last batch raised past the next segment's base", 0, setBase(3, 20), 3, false},
		{"sealed: base offset lowered to the previous batch's", 0, setBase(2, 5), 2, false},
		{"sealed: leader epoch going backwards", 0, setEpoch(3, 0), 3, false},
		{"sealed: more records than offsets", 0, setCount(2, 7), 2, false},
		{"sealed, index deleted: base offset raised by 5 mid-segment", 0, setBase(1, 10), 1, true},
	}
	for _, test := range tests {
		for _, clean := range []bool{false, true} {
			if clean && test.segment == 20 {
				continue // a clean shutdown trusts the active segment, as Kafka does
			}
			t.Run(fmt.Sprintf("%s/clean=%v", test.name, clean), func(t *testing.T) {
				dir := path.Join(t.TempDir(), "t-0")
				want, cfg := contiguousLog(t, vfs.OS, dir)
				rewriteFile(t, vfs.OS, segmentPath(dir, test.segment, extLog), test.change)
				if test.noIndex {
					removeFile(t, vfs.OS, segmentPath(dir, test.segment, extIndex))
				}
				if !clean {
					removeFile(t, vfs.OS, path.Join(dir, cleanShutdownName))
				}
				var cuts []Truncation
				cfg.RecoveryTruncated = func(c Truncation) { cuts = append(cuts, c) }
				log := openLog(t, vfs.OS, dir, cfg)
				defer closeLog(t, log)
				if test.keep == len(want) { // the change is kept: read it back
					want[len(want)-1] = fileBytes(t, vfs.OS, segmentPath(dir, test.segment, extLog))[at(3):]
				}
				checkContents(t, log, want[:test.keep])
				if end := rb.Batch(want[test.keep-1]).NextOffset(); log.LogEndOffset() != end {
					t.Errorf("log end %d, want %d", log.LogEndOffset(), end)
				}
				if test.keep < len(want) && (len(cuts) == 0 || !errors.Is(cuts[len(cuts)-1].Cause, rb.ErrCorrupt)) {
					t.Errorf("cuts reported %+v, want the last (the cut, after the segments dropped) caused by a corrupt batch", cuts)
				}
			})
		}
	}
}

// TestRecoveryTruncationKept flips one byte in the middle of a segment and
// reopens: the cut is reported once with its fields (and logged at WARN
// with them), and the truncated folder holds exactly the removed bytes.
// A sealed segment is checked by its headers at open (as Kafka reads only
// the segments past its recovery point whole), so its flipped byte is a
// header's; the segment after it is dropped, before the cut, and kept too
// (moved whole).
func TestRecoveryTruncationKept(t *testing.T) {
	tests := []struct {
		name     string
		segment  rb.Offset
		flipAt   int64 // in the segment
		position int64 // of the cut
		first    rb.Offset
		last     rb.Offset // of the cut in the segment
		dropped  bool      // segment 20 dropped whole after it
	}{
		{"active segment, a record byte", 20, batchSize + rb.HeaderSize + 40, batchSize, 25, 39, false},
		{"sealed segment, the magic byte", 0, 2*batchSize + 16, 2 * batchSize, -1, -1, true},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) { // dir is <fresh>/t-0
				_, cfg := contiguousLog(t, fsys, dir)
				name := segmentPath(dir, test.segment, extLog)
				original := fileBytes(t, fsys, name)
				nextSegment := fileBytes(t, fsys, segmentPath(dir, 20, extLog))
				rewriteFile(t, fsys, name, func(b []byte) []byte { return flip(b, int(test.flipAt)) })
				removeFile(t, fsys, path.Join(dir, cleanShutdownName))
				var lines bytes.Buffer
				logger := slog.New(slog.NewTextHandler(&lines, nil))
				var cuts []Truncation
				cfg.RecoveryTruncated = func(c Truncation) { c.Warn(logger); cuts = append(cuts, c) }
				log := openLog(t, fsys, dir, cfg)
				closeLog(t, log)

				wantCuts := 1
				if test.dropped {
					wantCuts = 2
				}
				if len(cuts) != wantCuts {
					t.Fatalf("%d cuts reported (%+v), want %d", len(cuts), cuts, wantCuts)
				}
				c := cuts[len(cuts)-1] // after the segments dropped after it, newest first
				removed := flip(bytes.Clone(original), int(test.flipAt))[test.position:]
				want := Truncation{Partition: TopicPartition{Topic: "t", Partition: 0}, Dir: dir, Segment: name, Position: test.position,
					Bytes: int64(len(removed)), FirstOffset: test.first, LastOffset: test.last,
					Kept: path.Join(path.Dir(dir), TruncatedDir, "t-0", fmt.Sprintf("recovery-%d-%d.bytes", test.segment, test.position))}
				c.Cause = nil
				if c != want {
					t.Errorf("cut\n%+v, want\n%+v", c, want)
				}
				if got := fileBytes(t, fsys, want.Kept); !bytes.Equal(got, removed) {
					t.Errorf("kept %d bytes, want the %d removed", len(got), len(removed))
				}
				if got := fileBytes(t, fsys, name); !bytes.Equal(got, original[:test.position]) {
					t.Errorf("segment is %d bytes after the cut, want the %d before it", len(got), test.position)
				}
				if test.dropped {
					c := cuts[0]
					if !c.WholeSegment || c.Position != 0 || c.Bytes != int64(len(nextSegment)) || c.FirstOffset != 20 || c.LastOffset != 39 {
						t.Errorf("dropped segment reported as %+v", c)
					}
					if got := fileBytes(t, fsys, c.Kept); !bytes.Equal(got, nextSegment) {
						t.Errorf("kept %d bytes of the dropped segment, want its %d", len(got), len(nextSegment))
					}
				}
				line := strings.Split(lines.String(), "\n")[len(cuts)-1]
				for _, field := range []string{"level=WARN", "topic=t", "partition=0", "segment=" + name, fmt.Sprintf("position=%d", test.position),
					fmt.Sprintf("bytes=%d", len(removed)), fmt.Sprintf("first_offset=%d", test.first), fmt.Sprintf("last_offset=%d", test.last),
					"kept=" + want.Kept, "cause="} {
					if !strings.Contains(line, field) {
						t.Errorf("log line %q lacks %q", line, field)
					}
				}
			})
		})
	}
}

// TestRecoveryKeepsBeforeCutting makes recovery's copy of the removed
// bytes fail (a full disk), or stops it between the copy and the cut (a
// crash there): the segment must be whole until the bytes are durably
// kept, so neither loses a byte; the next open cuts and keeps.
func TestRecoveryKeepsBeforeCutting(t *testing.T) {
	const dir = "/data/t-0"
	segment := segmentPath(dir, 20, extLog)
	position := batchSize // of the flipped batch in segment 20
	tests := []struct {
		name  string
		fault func(op vfs.Op, name string) error
		crash bool
	}{
		{"the copy finds the disk full", func(op vfs.Op, name string) error {
			if op == vfs.OpWrite && strings.Contains(name, "/"+TruncatedDir+"/") {
				return syscall.ENOSPC
			}
			return nil
		}, false},
		{"a crash between the copy and the cut", func(op vfs.Op, name string) error {
			if op == vfs.OpTruncate && name == segment {
				return syscall.EIO
			}
			return nil
		}, true},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			_, cfg := contiguousLog(t, fsys, dir)
			rewriteFile(t, fsys, segment, func(b []byte) []byte { return flip(b, int(position)+rb.HeaderSize+40) })
			removeFile(t, fsys, path.Join(dir, cleanShutdownName))
			damaged := fileBytes(t, fsys, segment)
			var cuts []Truncation
			cfg.RecoveryTruncated = func(c Truncation) { cuts = append(cuts, c) }

			fsys.SetFault(test.fault)
			if log, err := Open(fsys, dir, cfg); err == nil {
				log.Close()
				t.Fatal("open succeeded with the removed bytes not kept")
			}
			fsys.SetFault(nil)
			if len(cuts) != 0 {
				t.Errorf("a cut that did not happen was reported: %+v", cuts)
			}
			kept := path.Join("/data", TruncatedDir, "t-0", fmt.Sprintf("recovery-20-%d.bytes", position))
			if test.crash {
				fsys.CrashClean()
				if got, ok := fsys.Durable(kept); !ok || !bytes.Equal(got, damaged[position:]) {
					t.Fatalf("kept file after the crash: %d bytes (durable %v), want the %d removed", len(got), ok, len(damaged)-int(position))
				}
			}
			if got, _ := fsys.Durable(segment); !bytes.Equal(got, damaged) {
				t.Fatalf("segment is %d bytes before the bytes were kept, want all %d", len(got), len(damaged))
			}

			log := openLog(t, fsys, dir, cfg)
			defer closeLog(t, log)
			if len(cuts) != 1 || cuts[0].Position != position || cuts[0].Bytes != int64(len(damaged))-position {
				t.Fatalf("cuts %+v, want one at %d", cuts, position)
			}
			if got := fileBytes(t, fsys, cuts[0].Kept); !bytes.Equal(got, damaged[position:]) {
				t.Errorf("kept %d bytes in %s, want the %d removed", len(got), cuts[0].Kept, len(damaged)-int(position))
			}
			if got := log.LogEndOffset(); got != 25 {
				t.Errorf("log end %d, want 25", got)
			}
		})
	}
}

// TestRecoveryDropCrash stops the open that cuts sealed segment 0 (a bad
// magic byte in its third batch) and drops segment 20 after it at each
// step, then crashes: the next open must end with the same log, and the
// truncated folder must hold segment 20 whole and segment 0's tail.
func TestRecoveryDropCrash(t *testing.T) {
	const dir = "/data/t-0"
	first, second := segmentPath(dir, 0, extLog), segmentPath(dir, 20, extLog)
	keptDir := path.Join("/data", TruncatedDir, "t-0")
	steps := []struct {
		op   vfs.Op
		name string
		// goesOn: a failed rename (another file system) copies instead
		goesOn bool
	}{
		{vfs.OpRename, second, true},                                           // segment 20 moves to the truncated folder
		{vfs.OpSyncDir, keptDir, false},                                        // ... durably
		{vfs.OpRemove, segmentPath(dir, 20, extIndex), false},                  // its indexes go
		{vfs.OpSyncDir, dir, false},                                            // ... durably
		{vfs.OpCreate, path.Join(keptDir, "recovery-0-1212.bytes.tmp"), false}, // segment 0's tail is copied
		{vfs.OpTruncate, first, false},                                         // and cut
	}
	for _, step := range steps {
		t.Run(fmt.Sprintf("%v %s", step.op, step.name), func(t *testing.T) {
			fsys := vfs.NewMem()
			want, cfg := contiguousLog(t, fsys, dir)
			rewriteFile(t, fsys, first, func(b []byte) []byte { return setByte(b, int(2*batchSize)+16, 7) })
			segment0, segment20 := fileBytes(t, fsys, first), fileBytes(t, fsys, second)
			fired := false
			fsys.SetFault(func(op vfs.Op, name string) error {
				if op == step.op && name == step.name && !fired {
					fired = true
					return syscall.EIO
				}
				return nil
			})
			log, err := Open(fsys, dir, cfg)
			if !fired || (err == nil) != step.goesOn {
				t.Fatalf("open through a failed %v of %s (fired %v): %v", step.op, step.name, fired, err)
			}
			if err == nil {
				log.Close()
			}
			fsys.SetFault(nil)
			fsys.CrashClean()

			log = openLog(t, fsys, dir, cfg)
			defer closeLog(t, log)
			checkContents(t, log, want[:2])
			names, err := fsys.List(keptDir)
			if err != nil {
				t.Fatal(err)
			}
			var keptWhole, keptTail bool
			for _, name := range names {
				data := fileBytes(t, fsys, path.Join(keptDir, name))
				keptWhole = keptWhole || bytes.Equal(data, segment20)
				keptTail = keptTail || bytes.Equal(data, segment0[2*batchSize:])
			}
			if !keptWhole || !keptTail {
				t.Errorf("kept %v: segment 20 whole %v, segment 0's tail %v; want both", names, keptWhole, keptTail)
			}
		})
	}
}
