package broker

import (
	"testing"

	"github.com/mirrord/mirrord/recordbatch/records"
)

// TestPIDResetDropsProducers: the stop's MIRROR_PID_RESET batch drops the
// producer state before it, when written and again when the log is
// loaded; writing it twice leaves one; the open transaction the stop
// aborts no longer holds the last stable offset back.
func TestPIDResetDropsProducers(t *testing.T) {
	p := testPartition(t)
	// A mirrored producer 7 with an open transaction, as appendMirrored
	// leaves it.
	if _, err := p.AppendMirrored(dataBatch(7, 0, 0, 3, true)); err != nil {
		t.Fatal(err)
	}
	if got := p.Offsets().LastStableOffset; got != 0 {
		t.Fatalf("last stable offset %d with the transaction open, want 0", got)
	}
	p.RaiseLeaderEpoch(11)
	if err := p.AbortOpenTransactions("m"); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent: a resumed stop writes no second batch
		if err := p.WriteMirrorPIDReset(); err != nil {
			t.Fatal(err)
		}
	}
	if end := p.log.LogEndOffset(); end != 5 { // 3 records, ABORT, MIRROR_PID_RESET
		t.Fatalf("log end %d, want 5", end)
	}
	if offsets := p.Offsets(); offsets.LastStableOffset != 5 || offsets.HighWatermark != 5 {
		t.Fatalf("offsets %+v, want last stable offset and high watermark 5", offsets)
	}
	if len(p.producers.producers) != 0 {
		t.Fatalf("producers after the reset: %v", p.producers.producers)
	}
	p.mu.Lock()
	_, err := p.loadProducerState(0)
	last := p.endsWithPIDReset()
	p.mu.Unlock()
	if err != nil || len(p.producers.producers) != 0 || !last {
		t.Fatalf("after a reload: %v, producers %v, ends with the reset %v", err, p.producers.producers, last)
	}
	if p.producers.aborted.overlapping(0, 5, nil) == nil {
		t.Fatalf("the aborted transaction left the aborted index")
	}
	if got := p.LeaderEpoch(); got != 11 {
		t.Fatalf("leader epoch %d, want 11", got)
	}
	data, err := p.log.BatchBytes(nil, 4)
	if err != nil || !records.IsMirrorPIDReset(data) {
		t.Fatalf("batch at 4: %v, not a MIRROR_PID_RESET", err)
	}
}
