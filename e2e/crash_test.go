package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	inflightRecords     = 50000
	inflightKillAfter   = 5000 // acknowledged records before the kill
	inflightPartitions  = 3
	inflightBufferedMax = 2000 // kgo's buffer: keeps records in flight at the kill
)

// TestKgoKillDuringProduce: the server is killed (SIGKILL) while an
// idempotent producer is producing, and restarted on the same address;
// the producer retries what was in flight. Every acknowledged record is
// stored at the offset it was acknowledged with and no record is stored
// twice: the server rebuilt the producers' sequence state from its log.
func TestKgoKillDuringProduce(t *testing.T) {
	t.Parallel()
	seed := newSeed(t)
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	const topic = "inflight"
	createTopics(ctx, t, s.addr, map[string]int32{topic: inflightPartitions})
	address := s.addr
	client := newClient(t, s.addr, kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.MaxBufferedRecords(inflightBufferedMax))
	maker := newRecordMaker(seed)
	records := make([]*kgo.Record, inflightRecords)
	for i := range records {
		records[i] = maker.record(topic, int32(i%inflightPartitions), i)
	}
	acked := newLedger()
	done := make(chan error, 1)
	go func() { done <- produceAll(ctx, client, records, acked) }()

	var produceErr error
	finished := false
	if !waitFor(ctx, func() bool { return acked.count() >= inflightKillAfter }, done, &produceErr, &finished) {
		t.Fatalf("%d records acknowledged before the deadline, want %d (produce: %v)", acked.count(), inflightKillAfter, produceErr)
	}
	atKill := acked.count()
	s.kill()
	s.start()
	if !finished {
		produceErr = <-done // bounded: ctx and RecordDeliveryTimeout
	}
	t.Logf("killed with %d of %d records acknowledged (producer finished before the kill: %v); %d acknowledged in all",
		atKill, inflightRecords, finished, acked.count())
	if s.addr != address {
		t.Skipf("restarted on %s, not %s: the producer cannot reach it", s.addr, address)
	}
	if produceErr != nil {
		t.Errorf("after the restart: %v", produceErr)
	}

	want := acked.sorted()
	tps := sortedPartitions(want)
	stored := readAll(ctx, t, s.addr, tps)
	counts := map[topicPartition]int{}
	for _, tp := range tps {
		counts[tp] = int(stored[tp].highWatermark)
	}
	got := consume(ctx, t, s.addr, kgo.ReadUncommitted(), counts)
	for _, tp := range tps {
		checkAcknowledgedStored(t, tp, want[tp], got[tp])
	}
	s.stop()
}

// waitFor polls condition until it holds, ctx is done, or done delivers
// (the producer finished: its error goes to *err, and *finished is set).
func waitFor(ctx context.Context, condition func() bool, done <-chan error, err *error, finished *bool) bool {
	ticker := time.NewTicker(2 * time.Millisecond)
	defer ticker.Stop()
	for !condition() {
		select {
		case <-ctx.Done():
			return false
		case *err = <-done:
			*finished = true
			return condition()
		case <-ticker.C:
		}
	}
	return true
}

// checkAcknowledgedStored: each acknowledged record is stored at its
// offset, the log has no gap (offsets 0, 1, ...), and no value (each is
// unique) is stored twice.
func checkAcknowledgedStored(t *testing.T, tp topicPartition, acked, stored []*kgo.Record) {
	t.Helper()
	byOffset := make(map[int64]*kgo.Record, len(stored))
	seen := make(map[string]int64, len(stored))
	for i, r := range stored {
		if r.Offset != int64(i) {
			t.Errorf("%s: stored record %d has offset %d", tp, i, r.Offset)
			return
		}
		if first, ok := seen[string(r.Value)]; ok {
			t.Errorf("%s: the record at offset %d is stored again at %d (duplicate after the restart)", tp, first, r.Offset)
			return
		}
		seen[string(r.Value)] = r.Offset
		byOffset[r.Offset] = r
	}
	for _, want := range acked {
		got, ok := byOffset[want.Offset]
		if !ok {
			t.Errorf("%s: acknowledged offset %d is not stored (%d records stored)", tp, want.Offset, len(stored))
			return
		}
		if problem := recordDifference(want, got); problem != "" {
			t.Errorf("%s: acknowledged offset %d: %s", tp, want.Offset, problem)
			return
		}
	}
	if len(stored) != len(acked) {
		t.Logf("%s: %d records stored, %d acknowledged", tp, len(stored), len(acked))
	}
}
