package logstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"syscall"
	"testing"

	"github.com/mirrord/mirrord/epoch"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// rewriteFile replaces the contents of name with edit(contents), durably.
func rewriteFile(t *testing.T, fsys vfs.FS, name string, edit func([]byte) []byte) {
	t.Helper()
	data := edit(fileBytes(t, fsys, name))
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(path.Dir(name)); err != nil {
		t.Fatal(err)
	}
}

func removeFile(t *testing.T, fsys vfs.FS, name string) {
	t.Helper()
	if err := fsys.Remove(name); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(path.Dir(name)); err != nil {
		t.Fatal(err)
	}
}

func TestIndexRebuild(t *testing.T) {
	// Timestamps are not monotonic: the largest is in a segment's first
	// batch, so an index rebuilt from its last entries alone gets it wrong.
	timestamps := []int64{9000, 1000, 2000, 3000, 4000, 8000, 5000}
	queries := []int64{0, 1000, 1001, 3000, 4000, 4001, 8000, 8001, 9000, 9001}
	garbage := func(entrySize int, words ...uint32) func([]byte) []byte {
		return func([]byte) []byte {
			var out []byte
			for i, w := range words {
				if entrySize == timeEntrySize && i%2 == 0 {
					out = binary.BigEndian.AppendUint32(out, 0) // high half of the timestamp
				}
				out = binary.BigEndian.AppendUint32(out, w)
			}
			return out
		}
	}
	damages := []struct {
		name   string
		damage func(t *testing.T, fsys vfs.FS, base string)
	}{
		{"offset index deleted", func(t *testing.T, fsys vfs.FS, base string) { removeFile(t, fsys, base+extIndex) }},
		{"time index deleted", func(t *testing.T, fsys vfs.FS, base string) { removeFile(t, fsys, base+extTimeIndex) }},
		{"both deleted", func(t *testing.T, fsys vfs.FS, base string) {
			removeFile(t, fsys, base+extIndex)
			removeFile(t, fsys, base+extTimeIndex)
		}},
		{"offset index not monotonic", func(t *testing.T, fsys vfs.FS, base string) {
			rewriteFile(t, fsys, base+extIndex, garbage(offsetEntrySize, 5, 1200, 3, 600, 9, 10, 1, 1))
		}},
		{"offset index past the log end", func(t *testing.T, fsys vfs.FS, base string) {
			rewriteFile(t, fsys, base+extIndex, garbage(offsetEntrySize, 5, 1<<30))
		}},
		{"time index not monotonic", func(t *testing.T, fsys vfs.FS, base string) {
			rewriteFile(t, fsys, base+extTimeIndex, garbage(timeEntrySize, 7000, 5, 6000, 10, 9999, 1))
		}},
	}
	for _, damage := range damages {
		for _, segment := range []rb.Offset{0, 20} { // sealed, active
			t.Run(fmt.Sprintf("%s/segment %d", damage.name, segment), func(t *testing.T) {
				eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
					cfg := testConfig()
					cfg.SegmentBytes = 4 * batchSize
					log := openLog(t, fsys, dir, cfg)
					var batches [][]byte
					for i, ts := range timestamps {
						batches = append(batches, testBatch(rb.Offset(5*i), 0, ts))
						mustAppend(t, log, batches[i])
					}
					closeLog(t, log)
					base := segmentPath(dir, segment, "")
					indexBefore, timesBefore := fileBytes(t, fsys, base+extIndex), fileBytes(t, fsys, base+extTimeIndex)
					damage.damage(t, fsys, base)

					log = openLog(t, fsys, dir, cfg)
					checkContents(t, log, batches)
					for _, q := range queries {
						want := rb.Offset(-1)
						for _, b := range batches {
							if rb.Batch(b).MaxTimestamp() >= q {
								want = rb.Batch(b).BaseOffset()
								break
							}
						}
						if got, ok, err := log.OffsetForTimestamp(q); err != nil || ok != (want >= 0) || ok && got != want {
							t.Errorf("offset for timestamp %d: %d %v %v, want %d", q, got, ok, err, want)
						}
					}
					if ts, offset, _ := log.MaxTimestamp(); ts != 9000 || offset != 4 {
						t.Errorf("max timestamp %d at %d, want 9000 at 4 (its batch's last offset)", ts, offset)
					}
					closeLog(t, log)
					if got := fileBytes(t, fsys, base+extIndex); !bytes.Equal(got, indexBefore) {
						t.Errorf("rebuilt offset index %x, want %x", got, indexBefore)
					}
					if got := fileBytes(t, fsys, base+extTimeIndex); !bytes.Equal(got, timesBefore) {
						t.Errorf("rebuilt time index %x, want %x", got, timesBefore)
					}
				})
			})
		}
	}
}

// TestRecoverTail writes a bad tail into the active segment by hand and
// reopens without the clean-shutdown marker: recovery cuts exactly the
// tail.
func TestRecoverTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 300)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	next := func() []byte { return testBatch(layoutEnd, 3, baseTimestamp) }
	tests := []struct {
		name string
		tail []byte
		keep bool // the tail is a good batch, kept
	}{
		{"good batch", next(), true},
		{"random bytes", random, false},
		{"zeros", make([]byte, 4096), false},
		{"torn header", next()[:30], false},
		{"torn half batch", next()[:batchSize/2], false},
		{"bad crc", flip(next(), rb.HeaderSize+10), false},
		{"bad crc then a good batch", slices.Concat(flip(next(), 40), testBatch(layoutEnd+5, 3, baseTimestamp)), false},
		{"offset below the log end", testBatch(layoutEnd-5, 3, baseTimestamp), false},
		{"epoch unknown to the checkpoint", testBatch(layoutEnd, 9, baseTimestamp), false},
		{"no epoch after epochs", testBatch(layoutEnd, rb.NoEpoch, baseTimestamp), false},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig()
			cfg.SegmentBytes = 1 << 20 // room for the tail in the active segment
			log, batches := layoutLog(t, vfs.OS, dir, testConfig())
			closeLog(t, log)
			active := segmentPath(dir, 60, extLog)
			sizeBefore := int64(len(fileBytes(t, vfs.OS, active)))
			rewriteFile(t, vfs.OS, active, func(b []byte) []byte { return append(b, test.tail...) })
			removeFile(t, vfs.OS, path.Join(dir, cleanShutdownName))

			log = openLog(t, vfs.OS, dir, cfg)
			want, wantSize := batches, sizeBefore
			if test.keep {
				want, wantSize = append(want, test.tail), sizeBefore+int64(len(test.tail))
			}
			checkContents(t, log, want)
			if got := int64(len(fileBytes(t, vfs.OS, active))); got != wantSize {
				t.Errorf("active segment is %d bytes after recovery, want %d", got, wantSize)
			}
			next := testBatch(log.LogEndOffset(), 3, baseTimestamp)
			mustAppend(t, log, next)
			closeLog(t, log)
			log = openLog(t, vfs.OS, dir, cfg)
			checkContents(t, log, append(want, next))
			closeLog(t, log)
		})
	}
}

// TestRecoverSealedSegment corrupts a batch in the middle segment: the open
// cuts it there, deletes the segments after it and appends go on from there.
func TestRecoverSealedSegment(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(b []byte) []byte // of segment 25: [25-29] [30-34] [40-44]
		keep    int                   // layout batches left
	}{
		{"bad magic", func(b []byte) []byte { return setByte(b, int(batchSize)+16, 7) }, 4},
		{"huge batch length", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[batchSize+8:], 1<<31-1)
			return b
		}, 4},
		{"batch length past the segment end", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[batchSize+8:], uint32(10*batchSize))
			return b
		}, 4},
		{"crc flip before a bad magic", func(b []byte) []byte {
			return setByte(flip(b, rb.HeaderSize+3), int(2*batchSize)+16, 0)
		}, 3},
	}
	for _, test := range tests {
		for _, clean := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/clean=%v", test.name, clean), func(t *testing.T) {
				dir := t.TempDir()
				cfg := testConfig()
				cfg.IndexIntervalBytes = 1 << 20 // no index entries: open walks every header
				log, batches := layoutLog(t, vfs.OS, dir, cfg)
				closeLog(t, log)
				rewriteFile(t, vfs.OS, segmentPath(dir, 25, extLog), test.corrupt)
				if !clean {
					removeFile(t, vfs.OS, path.Join(dir, cleanShutdownName))
				}
				log = openLog(t, vfs.OS, dir, cfg)
				want := batches[:test.keep]
				checkContents(t, log, want)
				for _, ext := range []string{extLog, extIndex, extTimeIndex} {
					if exists, err := vfs.OS.Exists(segmentPath(dir, 60, ext)); exists || err != nil {
						t.Errorf("segment 60 %s still there after a cut before it (%v)", ext, err)
					}
				}
				end := rb.Batch(want[len(want)-1]).NextOffset()
				if log.LogEndOffset() != end || log.HighWatermark() > end {
					t.Errorf("log end %d, high watermark %d; want the end %d", log.LogEndOffset(), log.HighWatermark(), end)
				}
				next := testBatch(end, 3, baseTimestamp)
				mustAppend(t, log, next)
				closeLog(t, log)
				log = openLog(t, vfs.OS, dir, cfg)
				checkContents(t, log, append(slices.Clone(want), next))
				closeLog(t, log)
			})
		}
	}
}

func TestCleanShutdown(t *testing.T) {
	marker := "/d/" + cleanShutdownName
	t.Run("close writes the marker, open keeps it", func(t *testing.T) {
		fsys := vfs.NewMem()
		log, _ := layoutLog(t, fsys, "/d", testConfig())
		if exists, _ := fsys.Exists(marker); exists {
			t.Fatal("marker present while the log is open")
		}
		closeLog(t, log)
		closeLog(t, openLog(t, fsys, "/d", testConfig())) // no writes in between
		fsys.CrashClean()
		if _, ok := fsys.Durable(marker); !ok {
			t.Fatal("no durable marker after close")
		}
	})
	t.Run("open trusts the marker", func(t *testing.T) {
		for _, clean := range []bool{true, false} {
			fsys := vfs.NewMem()
			log, batches := layoutLog(t, fsys, "/d", testConfig())
			closeLog(t, log)
			// A flipped record byte keeps the framing: only a recovery
			// scan, which checks CRCs, finds it.
			rewriteFile(t, fsys, segmentPath("/d", 60, extLog), func(b []byte) []byte { return flip(b, rb.HeaderSize+20) })
			if !clean {
				removeFile(t, fsys, marker)
			}
			log = openLog(t, fsys, "/d", testConfig())
			if clean {
				got, err := log.ReadBytes(nil, 60, 1<<20, layoutEnd, true)
				if want := flip(slices.Clone(batches[6]), rb.HeaderSize+20); err != nil || !bytes.Equal(got, want) || log.LogEndOffset() != layoutEnd {
					t.Errorf("clean open: end %d, read at 60 %d bytes (%v); want the batch as on disk (no recovery scan)", log.LogEndOffset(), len(got), err)
				}
			} else {
				checkContents(t, log, batches[:6])
			}
			closeLog(t, log)
		}
	})
	writes := []struct {
		name  string
		write func(log *Log) error
	}{
		{"append", func(log *Log) error { _, err := log.Append(testBatch(layoutEnd, 3, baseTimestamp)); return err }},
		{"append assign", func(log *Log) error { _, err := log.AppendAssign(testBatch(0, 3, baseTimestamp), 3); return err }},
		{"roll", (*Log).Roll},
		{"truncate", func(log *Log) error { return log.TruncateTo(30) }},
		{"truncate fully", func(log *Log) error { return log.TruncateFullyAndStartAt(100) }},
		{"advance log start", func(log *Log) error { return log.AdvanceLogStart(27) }},
		{"retention", func(log *Log) error { _, err := log.ApplyRetention(); return err }},
	}
	for _, w := range writes {
		t.Run("first write removes the marker durably/"+w.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := testConfig()
			cfg.Flush = FlushOS
			cfg.RetentionBytes = 1
			log, _ := layoutLog(t, fsys, "/d", cfg)
			closeLog(t, log)
			log = openLog(t, fsys, "/d", cfg)
			if err := w.write(log); err != nil {
				t.Fatal(err)
			}
			if _, ok := fsys.Durable(marker); ok {
				t.Fatal("the marker is still durable after the first write")
			}
			fsys.CrashClean()
			closeLog(t, openLog(t, fsys, "/d", cfg))
		})
	}
}

func TestAppendENOSPC(t *testing.T) {
	appends := []struct {
		name    string
		batches []byte
		assign  bool // AppendAssign in epoch 3
	}{
		{"same epoch", testBatch(layoutEnd, 3, baseTimestamp), false},
		{"new epoch", testBatch(layoutEnd, 4, baseTimestamp), false},
		{"assign", testBatch(0, rb.NoEpoch, baseTimestamp), true},
		{"rolls first", slices.Concat(testBatch(layoutEnd, 3, 0), testBatch(layoutEnd+5, 3, 0), testBatch(layoutEnd+10, 3, 0)), false},
	}
	for _, a := range appends {
		do := func(log *Log) error {
			var err error
			if a.assign {
				_, err = log.AppendAssign(a.batches, 3)
			} else {
				_, err = log.Append(a.batches)
			}
			return err
		}
		t.Run(a.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := testConfig()
			log, batches := layoutLog(t, fsys, "/d", cfg)
			active := segmentPath("/d", 60, extLog)
			activeBefore, epochsBefore := fileBytes(t, fsys, active), log.Epochs()
			fsys.SetFault(vfs.FailAfter(vfs.OpWrite, 0, syscall.ENOSPC))
			if err := do(log); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("append on a full disk: got %v, want ENOSPC", err)
			}
			if log.Size() != 7*batchSize || log.LogEndOffset() != layoutEnd || !slices.Equal(log.Epochs(), epochsBefore) {
				t.Errorf("failed append changed the log: size %d, end %d, epochs %v", log.Size(), log.LogEndOffset(), log.Epochs())
			}
			if got := fileBytes(t, fsys, active); !bytes.Equal(got, activeBefore) {
				t.Errorf("failed append left %d bytes in the segment, had %d", len(got), len(activeBefore))
			}
			checkContents(t, log, batches)
			fsys.SetFault(nil)
			if err := do(log); err != nil {
				t.Fatalf("append after the disk has room again: %v", err)
			}
			want := slices.Clone(batches)
			for it := rb.NewIter(a.batches, false); it.Next(); {
				want = append(want, it.Batch())
			}
			fsys.CrashClean() // FlushEveryAppend: acknowledged is durable
			log = openLog(t, fsys, "/d", cfg)
			checkContents(t, log, want)
			closeLog(t, log)
		})
	}
}

// TestAppendCutBackFails: when a write fails and cutting the file back
// fails too, the file may hold a partial batch: the log must refuse writes
// until reopened.
func TestAppendCutBackFails(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := testConfig()
	log, batches := layoutLog(t, fsys, "/d", cfg)
	fsys.SetFault(func(op vfs.Op, _ string) error {
		if op == vfs.OpWrite || op == vfs.OpTruncate {
			return syscall.EIO
		}
		return nil
	})
	if _, err := log.Append(testBatch(layoutEnd, 3, baseTimestamp)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append: got %v, want EIO", err)
	}
	fsys.SetFault(nil)
	if _, err := log.Append(testBatch(layoutEnd, 3, baseTimestamp)); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after a failed cut-back: got %v, want ErrFailed", err)
	}
	checkContents(t, log, batches)
	closeLog(t, log)
	log = openLog(t, fsys, "/d", cfg)
	checkContents(t, log, batches)
	closeLog(t, log)
}

// TestRecoverNoEpochPrefix: batches without a leader epoch (from old
// message formats) may precede the first epoch; recovery keeps them.
func TestRecoverNoEpochPrefix(t *testing.T) {
	for _, start := range []rb.Offset{0, 7} {
		fsys := vfs.NewMem()
		cfg := testConfig()
		cfg.SegmentBytes = 1 << 20
		log := openLog(t, fsys, "/d", cfg)
		batches := [][]byte{testBatch(0, rb.NoEpoch, 0), testBatch(5, rb.NoEpoch, 0), testBatch(10, 4, 0), testBatch(15, 4, 0)}
		mustAppend(t, log, slices.Concat(batches...))
		if err := log.AdvanceLogStart(start); err != nil {
			t.Fatal(err)
		}
		fsys.CrashClean()
		log = openLog(t, fsys, "/d", cfg)
		checkContents(t, log, batches[start/5:])
		if got, want := log.Epochs(), []epoch.Entry{entry(4, 10)}; !slices.Equal(got, want) {
			t.Errorf("start %d: epochs %v, want %v", start, got, want)
		}
		closeLog(t, log)
	}
}

func TestFailedSync(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := testConfig()
			log, batches := layoutLog(t, fsys, "/d", cfg)
			fsys.SetFault(vfs.FailAfter(vfs.OpSync, 0, syscall.EIO))
			if _, err := log.Append(testBatch(layoutEnd, 3, baseTimestamp)); !errors.Is(err, syscall.EIO) {
				t.Fatalf("append with a failing sync: got %v, want EIO", err)
			}
			fsys.SetFault(nil)
			writes := map[string]error{
				"append":   func() error { _, err := log.Append(testBatch(100, 3, 0)); return err }(),
				"truncate": log.TruncateTo(10),
				"advance":  log.AdvanceLogStart(10),
				"roll":     log.Roll(),
			}
			for name, err := range writes {
				if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
					t.Errorf("%s on a failed log: got %v, want ErrFailed wrapping EIO", name, err)
				}
			}
			got, err := readAll(log)
			if err != nil || len(got) < 7 {
				t.Fatalf("failed log serves %d batches (%v), want at least the 7 acknowledged", len(got), err)
			}
			if crash {
				fsys.CrashClean()
			} else if err := log.Close(); err != nil {
				t.Fatalf("close of a failed log: %v", err)
			}
			log = openLog(t, fsys, "/d", cfg)
			if got, _ := readAll(log); len(got) < 7 || !bytes.Equal(got[6], batches[6]) {
				t.Fatalf("reopened failed log lost acknowledged batches: %v", baseOffsets(got))
			}
			mustAppend(t, log, testBatch(log.LogEndOffset(), 3, baseTimestamp))
			closeLog(t, log)
		})
	}
}

// TestFaultSweep fails the n-th operation of each kind (once, or from then
// on) during a roll, truncation, log start advance or retention; checks
// that the log still answers reads; then crashes (or closes) and checks
// that nothing acknowledged before was lost.
func TestFaultSweep(t *testing.T) {
	actions := []struct {
		name    string
		do      func(log *Log) error
		starts  []rb.Offset // log start offsets allowed after the crash; the last when it succeeded
		minKeep int         // layout batches that must survive, counting those below the start; exactly these when it succeeded
	}{
		{"roll", (*Log).Roll, []rb.Offset{0}, 7},
		{"truncate inside a segment", func(log *Log) error { return log.TruncateTo(32) }, []rb.Offset{0}, 4},
		{"truncate to empty", func(log *Log) error { return log.TruncateTo(3) }, []rb.Offset{0}, 0},
		{"advance log start", func(log *Log) error { return log.AdvanceLogStart(27) }, []rb.Offset{0, 27}, 7},
		{"advance past the end", func(log *Log) error { return log.AdvanceLogStart(100) }, []rb.Offset{0, 100}, 7},
		{"retention", func(log *Log) error { _, err := log.ApplyRetention(); return err }, []rb.Offset{0, 60}, 7},
	}
	runs := 0
	for _, action := range actions {
		for op := vfs.OpCreate; op <= vfs.OpClose; op++ {
			for _, mode := range []faultMode{{once: true}, {}, {once: true, close: true}, {close: true}} {
				for n := 0; n < 100; n++ {
					runs++
					if !faultRun(t, action.name, action.do, action.starts, action.minKeep, op, n, mode) {
						break
					}
				}
			}
		}
	}
	t.Logf("%d fault runs", runs)
}

// faultMode: fail the operation once or from then on; close the log
// before reopening, or crash.
type faultMode struct{ once, close bool }

// faultRun runs one case of TestFaultSweep; it returns whether the fault
// fired (so a larger n may fire too).
func faultRun(t *testing.T, name string, do func(*Log) error, starts []rb.Offset, minKeep int, op vfs.Op, n int, mode faultMode) (fired bool) {
	t.Helper()
	mem := vfs.NewMem()
	fsys := mapCheckFS{mem}
	cfg := testConfig()
	cfg.RetentionBytes = 1
	log, batches := layoutLog(t, fsys, "/d", cfg)
	seen := 0
	mem.SetFault(func(got vfs.Op, _ string) error {
		if got != op {
			return nil
		}
		seen++
		if seen-1 < n || mode.once && seen-1 > n {
			return nil
		}
		fired = true
		return vfs.ErrInjected
	})
	err := do(log)
	mem.SetFault(nil)
	where := fmt.Sprintf("%s, %s #%d fails (%+v), action error %v", name, op, n, mode, err)
	if err != nil && !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("%s: error does not wrap the injected fault", where)
	}
	if msg := checkMappings(log); msg != "" {
		t.Fatalf("%s: %s", where, msg)
	}
	if got, rerr := readAll(log); rerr != nil || len(got) > len(batches) {
		t.Fatalf("%s: the log does not serve reads after the failure: %d batches, %v", where, len(got), rerr)
	}
	var extra []byte // an append after a failure the log survived
	if err != nil && log.failed == nil {
		extra = testBatch(max(log.LogEndOffset(), 100), 3, baseTimestamp)
		if _, aerr := log.Append(extra); aerr != nil {
			t.Fatalf("%s: log not failed, yet append: %v", where, aerr)
		}
	}
	if !mode.close {
		mem.CrashClean()
	} else if cerr := log.Close(); cerr != nil {
		t.Fatalf("%s: close: %v", where, cerr)
	}
	log, oerr := Open(fsys, "/d", cfg)
	if oerr != nil {
		t.Fatalf("%s: open after crash: %v", where, oerr)
	}
	start := log.LogStartOffset()
	if !slices.Contains(starts, start) || err == nil && start != starts[len(starts)-1] {
		t.Fatalf("%s: log start %d after crash, want one of %v", where, start, starts)
	}
	got, rerr := readAll(log)
	if rerr != nil {
		t.Fatalf("%s: read after crash: %v", where, rerr)
	}
	if extra != nil {
		if len(got) == 0 || !bytes.Equal(got[len(got)-1], extra) {
			t.Fatalf("%s: acknowledged append after the failure lost", where)
		}
		got = got[:len(got)-1]
	}
	first := 0
	for first < len(batches) && rb.Batch(batches[first]).LastOffset() < start {
		first++
	}
	keep := first + len(got)
	if keep < max(minKeep, first) || keep > len(batches) || err == nil && keep != minKeep {
		t.Fatalf("%s: %d layout batches after crash (from %d), want at least %d", where, keep, first, minKeep)
	}
	for i, b := range got {
		if !bytes.Equal(b, batches[first+i]) {
			t.Fatalf("%s: batch %d differs after crash", where, first+i)
		}
	}
	if cerr := log.Close(); cerr != nil {
		t.Fatalf("%s: close after crash: %v", where, cerr)
	}
	return fired
}

func TestHighWatermarkAfterCrash(t *testing.T) {
	// FlushOS: segments 0 and 25 were synced when they rolled; the batch
	// in segment 60 was not, so the recovered log end is 45.
	for _, test := range []struct{ checkpointed, want rb.Offset }{{layoutEnd, 45}, {45, 45}, {30, 30}, {0, 0}} {
		fsys := vfs.NewMem()
		cfg := testConfig()
		cfg.Flush = FlushOS
		log, _ := layoutLog(t, fsys, "/d", cfg)
		log.SetHighWatermark(test.checkpointed)
		if err := log.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		fsys.CrashClean()
		log = openLog(t, fsys, "/d", cfg)
		if got := log.HighWatermark(); got != test.want || log.LogEndOffset() != 45 {
			t.Errorf("checkpointed %d: high watermark %d, log end %d after crash; want %d and 45", test.checkpointed, got, log.LogEndOffset(), test.want)
		}
		closeLog(t, log)
	}
}

// TestFirstEpochStartsAtLogStart: the first batch of an empty log may
// begin past its log start (a source whose head was compacted away); its
// epoch starts at the log start, as on the source, whose leader recorded
// the epoch at its log end when elected. It survives a crash.
func TestFirstEpochStartsAtLogStart(t *testing.T) {
	for _, start := range []rb.Offset{0, 7} {
		fsys := vfs.NewMem()
		log := openLog(t, fsys, "/d", testConfig())
		if err := log.TruncateFullyAndStartAt(start); err != nil {
			t.Fatal(err)
		}
		batches := [][]byte{testBatch(start+5, 3, 0), testBatch(start+20, 4, 0)}
		mustAppend(t, log, slices.Concat(batches...))
		want := []epoch.Entry{entry(3, start), entry(4, start+20)}
		if got := log.Epochs(); !slices.Equal(got, want) {
			t.Errorf("start %d: epochs %v, want %v", start, got, want)
		}
		fsys.CrashClean()
		log = openLog(t, fsys, "/d", testConfig())
		checkContents(t, log, batches)
		if got := log.Epochs(); !slices.Equal(got, want) {
			t.Errorf("start %d: epochs after a crash %v, want %v", start, got, want)
		}
		closeLog(t, log)
	}
}
