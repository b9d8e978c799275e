package logstore

import (
	"bytes"
	"errors"
	"testing"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// TestBatchBytesBelowLogStart: BatchBytes answers the batch holding an
// offset below the log start while its segment remains (Kafka's
// MAX_TIMESTAMP answer can lie there), and refuses offsets no segment
// holds.
func TestBatchBytesBelowLogStart(t *testing.T) {
	fsys := vfs.NewMem()
	log, batches := layoutLog(t, fsys, "/d", testConfig())
	defer closeLog(t, log)
	log.SetHighWatermark(layoutEnd)
	if err := log.AdvanceLogStart(27); err != nil { // inside batch 25, segment 25 remains
		t.Fatal(err)
	}
	if _, err := log.ReadBytes(nil, 25, 1, layoutEnd, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("ReadBytes below the log start: %v, want ErrOffsetOutOfRange", err)
	}
	for _, tc := range []struct {
		offset rb.Offset
		want   []byte
	}{{25, batches[3]}, {27, batches[3]}, {30, batches[4]}, {62, batches[6]}} {
		got, err := log.BatchBytes(nil, tc.offset)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("BatchBytes(%d) = %d bytes, %v; want the batch of %d bytes", tc.offset, len(got), err, len(tc.want))
		}
	}
	for _, offset := range []rb.Offset{5, layoutEnd} { // segment 0 deleted; the log end
		if _, err := log.BatchBytes(nil, offset); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Errorf("BatchBytes(%d): %v, want ErrOffsetOutOfRange", offset, err)
		}
	}
}
