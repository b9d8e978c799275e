package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testPartition is a partition over a fresh in-memory log.
func testPartition(t testing.TB) *Partition {
	t.Helper()
	cfg := logstore.DefaultConfig()
	cfg.Flush = logstore.FlushEveryAppend
	log, err := logstore.Open(vfs.NewMem(), "/data/t-0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	return newPartition(nil, logstore.TopicPartition{Topic: "t", Partition: 0}, log, nodeProduceLimits(Config{}))
}

// dataBatch is a batch of n records from a producer (producerID -1: not
// idempotent), timestamps base+0, base+10, ...
func dataBatch(producerID int64, epoch int16, sequence int32, n int, transactional bool) []byte {
	recs := make([]rb.Record, n)
	for i := range recs {
		recs[i] = rb.Record{Value: []byte{byte(i)}, TimestampDelta: int64(10 * i)}
	}
	return rb.Append(nil, rb.Spec{BaseTimestamp: 1_700_000_000_000, ProducerID: producerID, ProducerEpoch: epoch,
		BaseSequence: sequence, Transactional: transactional, Records: recs})
}

func produceTo(p *Partition, batches []byte, transactionalID string) (netio.ProduceResult, error) {
	return p.Produce(context.Background(), batches, netio.ProduceRequest{Acks: -1, TransactionalID: transactionalID})
}

// wantCode checks that err carries the Kafka error want (nil: no error).
func wantCode(t *testing.T, what string, err error, want *kerr.Error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("%s: %v, want success", what, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %s", what, err, want.Message)
	}
}

func TestSequenceArithmetic(t *testing.T) {
	for _, tc := range []struct {
		sequence, increment, want int32
	}{
		{0, 4, 4},
		{math.MaxInt32 - 1, 1, math.MaxInt32},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 3, 1},
	} {
		if got := sequenceAdd(tc.sequence, tc.increment); got != tc.want {
			t.Errorf("sequenceAdd(%d, %d) = %d, want %d", tc.sequence, tc.increment, got, tc.want)
		}
	}
	for _, tc := range []struct {
		last, next int32
		want       bool
	}{
		{4, 5, true}, {4, 6, false}, {4, 4, false}, {-1, 0, true}, {math.MaxInt32, 0, true}, {math.MaxInt32 - 1, 0, false},
	} {
		if got := inSequence(tc.last, tc.next); got != tc.want {
			t.Errorf("inSequence(%d, %d) = %v, want %v", tc.last, tc.next, got, tc.want)
		}
	}
}

// TestProducerState runs one partition through a sequence of produces:
// each step's answer and the log end after it.
func TestProducerState(t *testing.T) {
	p := testPartition(t)
	const maxSeq = math.MaxInt32
	for _, step := range []struct {
		name       string
		producerID int64
		epoch      int16
		sequence   int32
		records    int
		want       *kerr.Error
		wantBase   rb.Offset // when want is nil
		wantEnd    int64
	}{
		{"a new producer starts at any sequence", 1, 0, 7, 3, nil, 0, 3},
		{"in order", 1, 0, 10, 2, nil, 3, 5},
		{"duplicate of the last batch", 1, 0, 10, 2, nil, 3, 5},
		{"duplicate of an older batch", 1, 0, 7, 3, nil, 0, 5},
		{"gap", 1, 0, 13, 1, kerr.OutOfOrderSequenceNumber, 0, 5},
		{"behind", 1, 0, 8, 1, kerr.OutOfOrderSequenceNumber, 0, 5},
		{"new epoch not at sequence 0", 1, 1, 12, 1, kerr.OutOfOrderSequenceNumber, 0, 5},
		{"new epoch at sequence 0", 1, 1, 0, 1, nil, 5, 6},
		{"fenced epoch", 1, 0, 12, 1, kerr.InvalidProducerEpoch, 0, 6},
		{"a retry from the fenced epoch is no duplicate", 1, 0, 10, 2, kerr.InvalidProducerEpoch, 0, 6},
		{"new epoch continues", 1, 1, 1, 2, nil, 6, 8},
		{"wrap-around: up to the last sequence", 2, 0, maxSeq - 1, 2, nil, 8, 10},
		{"wrap-around: 0 follows the last sequence", 2, 0, 0, 1, nil, 10, 11},
		{"wrap-around inside a batch", 3, 0, maxSeq - 1, 4, nil, 11, 15},
		{"after a batch that wrapped", 3, 0, 2, 1, nil, 15, 16},
		{"not idempotent: no state", -1, -1, -1, 2, nil, 16, 18},
		{"another not idempotent batch", -1, -1, -1, 1, nil, 18, 19},
	} {
		result, err := produceTo(p, dataBatch(step.producerID, step.epoch, step.sequence, step.records, false), "")
		wantCode(t, step.name, err, step.want)
		if step.want == nil && result.BaseOffset != step.wantBase {
			t.Fatalf("%s: base offset %d, want %d", step.name, result.BaseOffset, step.wantBase)
		}
		if end := int64(p.log.LogEndOffset()); end != step.wantEnd {
			t.Fatalf("%s: log end %d, want %d", step.name, end, step.wantEnd)
		}
	}
}

// TestProducerStateRetains checks that exactly the last five batches are
// recognized as duplicates.
func TestProducerStateRetains(t *testing.T) {
	p := testPartition(t)
	for seq := range int32(7) {
		if _, err := produceTo(p, dataBatch(4, 0, seq, 1, false), ""); err != nil {
			t.Fatalf("sequence %d: %v", seq, err)
		}
	}
	for seq := range int32(7) {
		result, err := produceTo(p, dataBatch(4, 0, seq, 1, false), "")
		if seq < 2 {
			wantCode(t, "retry of an evicted batch", err, kerr.OutOfOrderSequenceNumber)
			continue
		}
		if err != nil || result.BaseOffset != rb.Offset(seq) {
			t.Fatalf("retry of sequence %d: offset %d, %v; want the duplicate's offset %d", seq, result.BaseOffset, err, seq)
		}
	}
	if end := p.log.LogEndOffset(); end != 7 {
		t.Fatalf("log end %d after retries, want 7", end)
	}
}

func TestProduceSeveralBatches(t *testing.T) {
	p := testPartition(t)
	two := append(dataBatch(5, 0, 0, 2, false), dataBatch(5, 0, 2, 2, false)...)
	if result, err := produceTo(p, two, ""); err != nil || result.BaseOffset != 0 {
		t.Fatalf("two batches in order: %d, %v", result.BaseOffset, err)
	}
	retry := append(dataBatch(5, 0, 0, 2, false), dataBatch(5, 0, 2, 2, false)...) // as sent: Produce stamped two's offsets
	if result, err := produceTo(p, retry, ""); err != nil || result.BaseOffset != 0 || p.log.LogEndOffset() != 4 {
		t.Fatalf("the same request retried: offset %d, %v, log end %d; want 0, nil, 4", result.BaseOffset, err, p.log.LogEndOffset())
	}
	mixed := append(dataBatch(5, 0, 2, 2, false), dataBatch(5, 0, 4, 1, false)...)
	_, err := produceTo(p, mixed, "")
	wantCode(t, "a retried and a new batch", err, kerr.OutOfOrderSequenceNumber)
	gap := append(dataBatch(5, 0, 4, 1, false), dataBatch(5, 0, 9, 1, false)...)
	_, err = produceTo(p, gap, "")
	wantCode(t, "second batch out of order", err, kerr.OutOfOrderSequenceNumber)
	if end := p.log.LogEndOffset(); end != 4 {
		t.Fatalf("log end %d after refused requests, want 4 (nothing appended)", end)
	}
	// The refused request staged nothing: sequence 4 is still next.
	if _, err := produceTo(p, dataBatch(5, 0, 4, 1, false), ""); err != nil {
		t.Fatalf("sequence 4 after the refused requests: %v", err)
	}
}

func TestProduceValidation(t *testing.T) {
	p := testPartition(t)
	control := markerBatch(7, 0, true, 0)
	badCRC := dataBatch(-1, -1, -1, 1, false)
	badCRC[len(badCRC)-1] ^= 1
	badCount := dataBatch(-1, -1, -1, 2, false)
	rb.Batch(badCount).SetLeaderEpoch(0)
	badCount[60] = 3 // recordCount 3, two records
	rb.Batch(badCount).SetCRC(rb.Batch(badCount).ComputeCRC())
	for _, tc := range []struct {
		name            string
		batches         []byte
		transactionalID string
		want            *kerr.Error
	}{
		{"a control batch", control, "tx", kerr.InvalidRecord},
		{"a transactional batch without a transactional ID", dataBatch(7, 0, 0, 1, true), "", kerr.TransactionalIDAuthorizationFailed},
		{"a transactional batch without a producer ID", dataBatch(-1, -1, -1, 1, true), "tx", kerr.InvalidProducerIDMapping},
		{"a negative sequence", dataBatch(7, 0, -5, 1, false), "", kerr.InvalidRecord},
		{"a bad CRC", badCRC, "", kerr.CorruptMessage},
		{"a record count the records do not match", badCount, "", kerr.InvalidRecord},
		{"a transactional batch to a partition not in the transaction", dataBatch(7, 0, 0, 1, true), "tx", kerr.InvalidTxnState},
	} {
		_, err := produceTo(p, tc.batches, tc.transactionalID)
		wantCode(t, tc.name, err, tc.want)
	}
	if end := p.log.LogEndOffset(); end != 0 {
		t.Fatalf("log end %d, want nothing appended", end)
	}
}

// offsets returns the partition's high watermark and last stable offset.
func stable(p *Partition) (hw, lso rb.Offset) {
	o := p.Offsets()
	return o.HighWatermark, o.LastStableOffset
}

func TestTransactionInPartition(t *testing.T) {
	p := testPartition(t)
	mustProduce := func(batch []byte, transactionalID string) rb.Offset {
		t.Helper()
		result, err := produceTo(p, batch, transactionalID)
		if err != nil {
			t.Fatal(err)
		}
		return result.BaseOffset
	}
	mustProduce(dataBatch(-1, -1, -1, 2, false), "") // [0, 1]
	p.addToTransaction(8, 0, "tx-a")
	// (The transactional ID is the coordinator's to check, before the
	// partition: transactions.verifyTransaction.)
	_, err := produceTo(p, dataBatch(8, 1, 0, 1, true), "tx-a")
	wantCode(t, "an epoch not added", err, kerr.InvalidTxnState)
	first := mustProduce(dataBatch(8, 0, 0, 3, true), "tx-a") // [2, 4]
	mustProduce(dataBatch(-1, -1, -1, 1, false), "")          // 5
	if hw, lso := stable(p); hw != 6 || lso != first {
		t.Fatalf("open transaction: high watermark %d, last stable %d; want 6, %d", hw, lso, first)
	}
	_, err = produceTo(p, dataBatch(8, 0, 3, 1, false), "")
	wantCode(t, "a non-transactional batch inside the transaction", err, kerr.InvalidTxnState)
	mustProduce(dataBatch(8, 0, 3, 1, true), "tx-a") // 6
	written, err := p.writeMarker(8, 0, false, 1_700_000_000_000)
	if err != nil || !written {
		t.Fatalf("abort marker: %v, written %v", err, written)
	}
	if hw, lso := stable(p); hw != 8 || lso != 8 {
		t.Fatalf("after the abort: high watermark %d, last stable %d; want 8, 8", hw, lso)
	}
	if written, err := p.writeMarker(8, 0, false, 1_700_000_000_000); err != nil || written {
		t.Fatalf("the abort again: written %v, %v; want it skipped", written, err)
	}
	want := []abortedTxn{{producerID: 8, firstOffset: 2, lastOffset: 7}}
	if got := p.producers.aborted.snapshot(); !slices.Equal(got, want) {
		t.Fatalf("aborted index %v, want %v", got, want)
	}
	_, err = produceTo(p, dataBatch(8, 0, 4, 1, true), "tx-a")
	wantCode(t, "a transactional batch after the marker", err, kerr.InvalidTxnState)
	for _, q := range []struct {
		from, to rb.Offset
		want     int
	}{{0, 2, 0}, {0, 3, 1}, {4, 5, 1}, {7, 8, 1}, {8, 9, 0}} {
		if got := p.abortedTransactions(q.from, q.to); len(got) != q.want || got == nil {
			t.Errorf("aborted in [%d, %d): %v, want %d (and never nil)", q.from, q.to, got, q.want)
		}
	}
	// Truncating the marker away opens the transaction again.
	if _, err := p.truncateTo(7, 0); err != nil {
		t.Fatal(err)
	}
	if hw, lso := stable(p); hw != 7 || lso != 2 || p.producers.aborted.len() != 0 {
		t.Fatalf("after truncating the marker: high watermark %d, last stable %d, %d aborted; want 7, 2, 0", hw, lso, p.producers.aborted.len())
	}
	if written, err := p.writeMarker(8, 0, false, 1_700_000_000_000); err != nil || !written {
		t.Fatalf("abort after truncation: %v, written %v", err, written)
	}
	// DeleteRecords past the marker drops the index entry.
	if _, err := p.DeleteRecords(context.Background(), 8); err != nil {
		t.Fatal(err)
	}
	if n := p.producers.aborted.len(); n != 0 {
		t.Fatalf("%d aborted entries below the log start, want 0", n)
	}
}

func TestAbortedIndexOverlapping(t *testing.T) {
	var x abortedIndex
	for _, e := range []abortedTxn{{1, 0, 5}, {2, 3, 10}, {3, 12, 13}, {4, 1, 20}} {
		x.add(e)
	}
	ids := func(found []netio.AbortedTransaction) []int64 {
		var out []int64
		for _, a := range found {
			out = append(out, a.ProducerID)
		}
		return out
	}
	for _, q := range []struct {
		from, to rb.Offset
		want     []int64
	}{
		{0, 1, []int64{1}},
		{0, 3, []int64{1, 4}},
		{6, 11, []int64{2, 4}},
		{11, 12, []int64{4}},
		{14, 30, []int64{4}},
		{21, 30, nil},
	} {
		if got := ids(x.overlapping(q.from, q.to, nil)); !slices.Equal(got, q.want) {
			t.Errorf("overlapping [%d, %d): %v, want %v", q.from, q.to, got, q.want)
		}
	}
	x.dropBelow(11)
	if got := x.snapshot(); len(got) != 2 || got[0].producerID != 3 {
		t.Errorf("after dropBelow(11): %v", got)
	}
}

func TestListOffsetNarrowsToRecord(t *testing.T) {
	p := testPartition(t)
	if _, err := produceTo(p, dataBatch(-1, -1, -1, 4, false), ""); err != nil { // timestamps +0, +10, +20, +30
		t.Fatal(err)
	}
	const base = 1_700_000_000_000
	for _, tc := range []struct {
		timestamp     int64
		wantOffset    rb.Offset
		wantTimestamp int64
	}{{base, 0, base}, {base + 15, 2, base + 20}, {base + 30, 3, base + 30}, {base + 31, -1, -1}} {
		offset, ts, _, err := p.ListOffset(tc.timestamp, netio.ReadUncommitted)
		if err != nil || offset != tc.wantOffset || ts != tc.wantTimestamp {
			t.Errorf("ListOffset(%d) = %d, %d, %v; want %d, %d", tc.timestamp, offset, ts, err, tc.wantOffset, tc.wantTimestamp)
		}
	}
	// Kafka looks only at records from the log start on (inside a batch
	// too), but answers MAX_TIMESTAMP from the batches, below it too.
	if _, err := p.DeleteRecords(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if offset, ts, _, err := p.ListOffset(base, netio.ReadUncommitted); err != nil || offset != 2 || ts != base+20 {
		t.Errorf("ListOffset(%d) after DeleteRecords(2) = %d, %d, %v; want 2, %d", int64(base), offset, ts, err, int64(base+20))
	}
	if offset, ts, epoch, err := p.ListOffset(-3, netio.ReadUncommitted); err != nil || offset != 3 || ts != base+30 || epoch != 0 {
		t.Errorf("ListOffset(max timestamp) = %d, %d, epoch %d, %v; want 3, %d, epoch 0", offset, ts, epoch, err, int64(base+30))
	}
}

func TestProducerExpiration(t *testing.T) {
	s := newProducerStates()
	s.applyReplicated(batchInfo{producerID: 1, epoch: 0, firstSeq: 0, lastSeq: 0, firstOffset: 0, lastOffset: 0, maxTimestamp: 100})
	s.applyReplicated(batchInfo{producerID: 2, epoch: 0, firstSeq: 0, lastSeq: 0, firstOffset: 1, lastOffset: 1, maxTimestamp: 100, transactional: true})
	s.applyReplicated(batchInfo{producerID: 3, epoch: 0, firstSeq: 0, lastSeq: 0, firstOffset: 2, lastOffset: 2, maxTimestamp: 300})
	if n := s.expire(99); n != 0 {
		t.Fatalf("expire(99) dropped %d", n)
	}
	if n := s.expire(100); n != 1 || s.producers[1] != nil || s.producers[2] == nil || s.producers[3] == nil {
		t.Fatalf("expire(100) dropped %d; want only producer 1 (2 has an open transaction, 3 is recent)", n)
	}
	if first := s.firstUnstable.Load(); first != 1 {
		t.Fatalf("first unstable offset %d, want 1", first)
	}
}

// TestKafkaClientIdempotentProducer produces with franz-go's idempotent
// producer (many requests in flight), restarts the node, goes on with the
// same producer, and reads everything back exactly once, in order.
func TestKafkaClientIdempotentProducer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := serveDir(t, filepath.Join(t.TempDir(), "data"), "127.0.0.1:0")
	defer func() { s.close() }()
	client := newClient(t, s.addr, kgo.MaxBufferedRecords(64))
	if _, err := kadm.NewClient(client).CreateTopic(ctx, 2, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	want := map[int32][]string{}
	produceAsync := func(prefix string, n int) {
		t.Helper()
		errs := make(chan error, n)
		for i, v := range values(prefix, n) {
			r := &kgo.Record{Value: []byte(v), Partition: int32(i % 2)}
			want[r.Partition] = append(want[r.Partition], v)
			client.Produce(ctx, r, func(_ *kgo.Record, err error) { errs <- err })
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	produceAsync("x", 400)
	before := nodeState(t, s.node, "t", 2)
	for i, p := range before {
		if len(p.Producers) != 1 || p.Offsets.HighWatermark != 200 {
			t.Fatalf("partition %d: %d producers, high watermark %d; want 1, 200", i, len(p.Producers), p.Offsets.HighWatermark)
		}
		for _, producer := range p.Producers {
			if last := producer.Batches[len(producer.Batches)-1]; last.lastSeq != 199 || last.lastOffset != 199 {
				t.Fatalf("partition %d: last batch %+v, want sequence and offset 199", i, last)
			}
		}
	}
	s = s.restart(true)
	if after := nodeState(t, s.node, "t", 2); !reflect.DeepEqual(before, after) {
		t.Fatalf("restart:\nbefore %+v\nafter  %+v", before, after)
	}
	produceAsync("y", 100)
	produceValues(ctx, t, client, nil, "end", "end")
	if got := consumeValues(ctx, t, s.addr, kgo.ReadUncommitted()); !reflect.DeepEqual(got, want) {
		t.Fatalf("read back:\ngot  %v\nwant %v", got, want)
	}
}

// TestProducerStateModel drives a partition with seeded random produces
// (in order, retried, out of order, transactional, new epochs) and
// markers, and checks it against a simple model of open and aborted
// transactions; every few steps the state is rebuilt from the log and
// must come back the same.
func TestProducerStateModel(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runProducerModel(t, seed, 300) })
	}
}

type modelProducer struct {
	epoch   int16
	next    int32
	batches [][]byte // sent, for retries
	offsets []rb.Offset
}

func runProducerModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	p := testPartition(t)
	producers := []*modelProducer{{}, {}, {}, {}} // 0, 1 idempotent; 2, 3 transactional
	openFirst := map[int64]rb.Offset{}
	var aborted []abortedTxn
	for step := range steps {
		id := int64(rng.IntN(len(producers)))
		m := producers[id]
		transactional := id >= 2
		txnID := fmt.Sprint("tx-", id)
		switch op := rng.IntN(10); {
		case op < 5: // the next batch
			if transactional && rng.IntN(3) == 0 {
				p.addToTransaction(id, m.epoch, txnID)
			}
			batch := dataBatch(id, m.epoch, m.next, 1+rng.IntN(3), transactional)
			result, err := produceTo(p, batch, txnID)
			if transactional && err != nil && errors.Is(err, kerr.InvalidTxnState) {
				continue // not added to a transaction
			}
			if err != nil {
				t.Fatalf("seed %d step %d: producer %d: %v", seed, step, id, err)
			}
			m.next += int32(rb.Batch(batch).RecordCount())
			m.batches, m.offsets = append(m.batches, batch), append(m.offsets, result.BaseOffset)
			if _, open := openFirst[id]; transactional && !open {
				openFirst[id] = result.BaseOffset
			}
		case op < 7 && len(m.batches) > 0: // a retry of one of the last five
			i := max(len(m.batches)-1-rng.IntN(5), 0)
			end := p.log.LogEndOffset()
			result, err := produceTo(p, slices.Clone(m.batches[i]), txnID)
			if err == nil && (result.BaseOffset != m.offsets[i] || p.log.LogEndOffset() != end) {
				t.Fatalf("seed %d step %d: retry answered %d (log end %d -> %d), want %d", seed, step, result.BaseOffset, end, p.log.LogEndOffset(), m.offsets[i])
			}
		case op < 8 && p.producers.producers[id] != nil: // out of order (an unknown producer may start anywhere)
			_, err := produceTo(p, dataBatch(id, m.epoch, m.next+2, 1, transactional), txnID)
			if err == nil {
				t.Fatalf("seed %d step %d: a gap was accepted", seed, step)
			}
		case transactional: // the transaction ends
			commit := rng.IntN(2) == 0
			marker := p.log.LogEndOffset()
			if _, err := p.writeMarker(id, m.epoch, commit, 1_700_000_000_000); err != nil {
				t.Fatal(err)
			}
			if first, open := openFirst[id]; open {
				if !commit {
					aborted = append(aborted, abortedTxn{producerID: id, firstOffset: rb.Offset(first), lastOffset: marker})
				}
				delete(openFirst, id)
			}
		default: // an idempotent producer bumps its epoch
			m.epoch, m.next, m.batches, m.offsets = m.epoch+1, 0, nil, nil
		}
		hw, lso := stable(p)
		want := hw
		for _, first := range openFirst {
			want = min(want, first)
		}
		if lso != want || !slices.Equal(p.producers.aborted.snapshot(), aborted) {
			t.Fatalf("seed %d step %d: last stable %d (want %d), aborted %v (want %v)", seed, step, lso, want, p.producers.aborted.snapshot(), aborted)
		}
		if step%10 == 9 {
			before := stateOf(p)
			p.mu.Lock()
			_, err := p.loadProducerState(0)
			p.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if after := stateOf(p); !reflect.DeepEqual(before, after) {
				t.Fatalf("seed %d step %d: rebuilt from the log:\nlive    %+v\nrebuilt %+v", seed, step, before, after)
			}
		}
	}
	if len(aborted) == 0 {
		t.Fatalf("seed %d: no transaction was aborted; the run proves little", seed)
	}
}
