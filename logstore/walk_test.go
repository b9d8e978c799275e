package logstore

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// walked is what WalkBatches reported of one batch.
type walked struct {
	base, last rb.Offset
	control    bool
	whole      []byte // control batches only
}

func walkAll(t *testing.T, log *Log, from rb.Offset, stopAfter int) []walked {
	t.Helper()
	var got []walked
	err := log.WalkBatches(from, func(b rb.Batch) bool {
		w := walked{base: b.BaseOffset(), last: b.LastOffset(), control: b.Control()}
		if b.Control() {
			if int64(len(b)) != b.SizeOnDisk() {
				t.Errorf("control batch at %d: %d bytes given, %d on disk", b.BaseOffset(), len(b), b.SizeOnDisk())
			}
			w.whole = slices.Clone(b)
		} else if len(b) != rb.HeaderSize {
			t.Errorf("data batch at %d: %d bytes given, want a %d-byte header view", b.BaseOffset(), len(b), rb.HeaderSize)
		}
		got = append(got, w)
		return len(got) < stopAfter
	})
	if err != nil {
		t.Fatalf("walk from %d: %v", from, err)
	}
	return got
}

func TestWalkBatches(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		log, _ := layoutLog(t, fsys, dir, testConfig())
		defer closeLog(t, log)
		// A control batch (a transaction marker) at the end, read whole.
		marker := rb.Append(nil, rb.Spec{BaseOffset: layoutEnd, LeaderEpoch: 3, ProducerID: 7, BaseSequence: -1,
			Transactional: true, Control: true, Records: []rb.Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}}})
		mustAppend(t, log, marker)
		bases := func(ws []walked) []rb.Offset {
			out := make([]rb.Offset, len(ws))
			for i, w := range ws {
				out[i] = w.base
			}
			return out
		}
		for _, tc := range []struct {
			from      rb.Offset
			stopAfter int
			want      []rb.Offset
		}{
			{0, 100, []rb.Offset{0, 5, 20, 25, 30, 40, 60, 65}},
			{7, 100, []rb.Offset{5, 20, 25, 30, 40, 60, 65}}, // inside a batch
			{12, 100, []rb.Offset{20, 25, 30, 40, 60, 65}},   // in a compaction gap
			{25, 100, []rb.Offset{25, 30, 40, 60, 65}},       // a segment base
			{50, 100, []rb.Offset{60, 65}},                   // a gap across a segment end
			{66, 100, nil},                                   // the log end
			{0, 3, []rb.Offset{0, 5, 20}},                    // fn stops the walk
		} {
			got := walkAll(t, log, tc.from, tc.stopAfter)
			if !slices.Equal(bases(got), tc.want) {
				t.Errorf("walk from %d (stop after %d): bases %v, want %v", tc.from, tc.stopAfter, bases(got), tc.want)
			}
		}
		all := walkAll(t, log, 0, 100)
		last := all[len(all)-1]
		if !last.control || !bytes.Equal(last.whole[rb.LengthPrefixSize:], marker[rb.LengthPrefixSize:]) {
			t.Errorf("last batch: control %v, want the marker read whole", last.control)
		}
		// Below the log start offset the walk starts at the log start.
		if err := log.AdvanceLogStart(27); err != nil {
			t.Fatal(err)
		}
		if got := bases(walkAll(t, log, 0, 100)); !slices.Equal(got, []rb.Offset{25, 30, 40, 60, 65}) {
			t.Errorf("after the log start moved to 27: bases %v", got)
		}
	})
}

func TestWalkBatchesClosed(t *testing.T) {
	log, _ := layoutLog(t, vfs.NewMem(), "/data/t-0", testConfig())
	closeLog(t, log)
	if err := log.WalkBatches(0, func(rb.Batch) bool { return true }); !errors.Is(err, ErrClosed) {
		t.Fatalf("walk after close: %v, want ErrClosed", err)
	}
}
