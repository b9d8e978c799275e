package bench

// The lag scenario's producer: the pool of prebuilt batches and the paced
// raw Produce requests that send them (see lag_test.go).

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// lagPool is lagPoolBatches lz4 batches of lagBatchRecords records, laid
// out twice in a row: any run of up to lagPoolBatches batches from a
// batch of the first copy is one slice, a partition's records in a
// Produce request, sent as they are. Nothing writes to it once built.
type lagPool struct {
	bytes  []byte // the batches, twice
	starts []int  // starts[i] is where batch i begins in bytes; 2*lagPoolBatches+1 of them
}

// lagText is the second half of every value.
var lagText = func() []byte {
	phrase := []byte("mirrord mirrors topics byte for byte. ")
	return bytes.Repeat(phrase, lagRecordBytes/2/len(phrase)+1)[:lagRecordBytes/2]
}()

// newLagPool builds the batches: each value is pseudo-random bytes up to
// the middle, then text, so that lz4 stores it in about half (as
// benchBatch's records); the random halves do not repeat in the pool.
func newLagPool(tb testing.TB) (*lagPool, error) {
	tb.Helper()
	random := rand.New(rand.NewPCG(3, 4))
	timestamp := time.Now().UnixMilli()
	var once []byte
	for range lagPoolBatches {
		records := make([]rb.Record, lagBatchRecords)
		for i := range records {
			value := make([]byte, lagRecordBytes)
			for at := 0; at < lagRecordBytes/2; at += 8 {
				binary.LittleEndian.PutUint64(value[at:], random.Uint64())
			}
			copy(value[lagRecordBytes/2:], lagText)
			records[i] = rb.Record{Value: value}
		}
		batch := rb.Append(nil, rb.Spec{BaseTimestamp: timestamp, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: records})
		once = append(once, withLZ4(tb, batch)...)
	}
	pool := &lagPool{bytes: append(slices.Clone(once), once...)}
	it := rb.NewIter(pool.bytes, true)
	for it.Next() { // bounded: 2*lagPoolBatches batches
		if b := it.Batch(); b.Codec() != rb.CodecLZ4 || b.RecordCount() != lagBatchRecords {
			return nil, fmt.Errorf("lag pool: a batch of %d records, codec %s", b.RecordCount(), b.Codec())
		}
		pool.starts = append(pool.starts, it.Position())
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("lag pool: %w", err)
	}
	pool.starts = append(pool.starts, len(pool.bytes))
	if len(pool.starts) != 2*lagPoolBatches+1 || len(once) <= lagRequestBytesMax {
		return nil, fmt.Errorf("lag pool: %d batches in %d bytes, want %d, each copy larger than %d bytes", len(pool.starts)-1, len(pool.bytes), 2*lagPoolBatches, lagRequestBytesMax)
	}
	return pool, nil
}

// size is the bytes of count batches from batch first (first+count <=
// 2*lagPoolBatches).
func (p *lagPool) size(first, count int) int { return p.starts[first+count] - p.starts[first] }

// run is the records of count batches from batch first (< lagPoolBatches,
// count <= lagPoolBatches): one slice of the pool.
func (p *lagPool) run(first, count int) []byte {
	return p.bytes[p.starts[first]:p.starts[first+count]]
}

// storedRatio is the pool's batch bytes over its value bytes.
func (p *lagPool) storedRatio() float64 {
	return float64(len(p.bytes)/2) / (lagPoolBatches * lagBatchRecords * lagRecordBytes)
}

// produce sends the timed batches: every lagPaceInterval, the bytes owed
// at rateBytes since the start, for at most duration and
// lagRecordsMax records; then it waits for every answer.
func (r *lagRun) produce(ctx context.Context, source lagEndpoint, rateBytes float64, duration time.Duration) error {
	ticker := time.NewTicker(lagPaceInterval)
	defer ticker.Stop()
	inflight := make(chan struct{}, lagInflightMax) // a slot per request awaiting its answer
	var answers sync.WaitGroup
	batchesMax := int64(lagRecordsMax / lagBatchRecords)
	start, first := time.Now(), r.since()
	for r.sentBatches < batchesMax && ctx.Err() == nil && !r.failed.Load() { // bounded: batchesMax, and duration below
		elapsed := time.Since(start)
		if elapsed >= duration {
			break
		}
		owed := int64(rateBytes*elapsed.Seconds()) + 1 // +1: the first batch goes at once
		r.sendOwed(ctx, source, owed, batchesMax, inflight, &answers)
		select {
		case <-ctx.Done():
		case <-ticker.C:
		}
	}
	answers.Wait()
	r.acksMu.Lock()
	defer r.acksMu.Unlock()
	if r.produceErr != nil {
		return r.produceErr
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	last := first
	for _, a := range r.acks {
		last = max(last, a.at)
	}
	r.produceTime = max(1, last-first)
	return nil
}

// sendOwed starts Produce requests until the bytes sent reach owed, all
// lagInflightMax requests await their answer, or batchesMax batches are
// sent.
func (r *lagRun) sendOwed(ctx context.Context, source lagEndpoint, owed, batchesMax int64, inflight chan struct{}, answers *sync.WaitGroup) {
	for r.sentBytes < owed && r.sentBatches < batchesMax { // bounded: each pass sends a batch at least
		select {
		case inflight <- struct{}{}:
		default:
			return // the rest is owed at the next tick
		}
		batches := r.batchesOwed(owed, batchesMax)
		r.sentBatches += int64(batches)
		r.sentBytes += int64(r.pool.size(r.cursor, batches))
		req, records := r.request(source.topicID, batches)
		answers.Add(1)
		go func() {
			defer answers.Done()
			defer func() { <-inflight }()
			sent := r.since()
			acks, err := r.send(ctx, source, req, records)
			r.acksMu.Lock()
			defer r.acksMu.Unlock()
			if err != nil {
				if r.produceErr == nil {
					r.produceErr = err
				}
				r.failed.Store(true)
				return
			}
			r.acks = append(r.acks, acks...)
			r.answers = append(r.answers, acks[0].at-sent)
		}()
	}
}

// batchesOwed is how many pool batches from r.cursor the next request
// holds: one, and more while the bytes sent stay below owed, the request
// within lagRequestBytesMax, the timed batches within batchesMax, and at
// most one batch per partition (Kafka 4.4, and mirrord as it, refuses a
// partition's records of more than one batch with INVALID_RECORD).
func (r *lagRun) batchesOwed(owed, batchesMax int64) int {
	count := 1
	for int64(count) < min(batchesMax-r.sentBatches, int64(r.partitions)) { // bounded: the partitions
		if r.sentBytes+int64(r.pool.size(r.cursor, count)) >= owed || r.pool.size(r.cursor, count+1) > lagRequestBytesMax {
			break
		}
		count++
	}
	return count
}

// request builds a Produce request (acks -1) of batches pool batches from
// r.cursor, round-robin over the partitions from r.partition: one run of
// consecutive batches per partition, the first batches%partitions runs
// one batch longer (batchesOwed keeps runs to one batch). records is each partition's record count, in the
// request's order.
func (r *lagRun) request(topicID [16]byte, batches int) (req *kmsg.ProduceRequest, records []int64) {
	req = kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, int32(lagProduceTimeout.Milliseconds())
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic, topic.TopicID = r.topic, topicID
	partitions := int(r.partitions)
	for i := range min(batches, partitions) {
		count := batches / partitions
		if i < batches%partitions {
			count++
		}
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition = int32((int(r.partition) + i) % partitions)
		p.Records = r.pool.run(r.cursor, count)
		topic.Partitions = append(topic.Partitions, p)
		records = append(records, int64(count*lagBatchRecords))
		r.cursor = (r.cursor + count) % lagPoolBatches
	}
	r.partition = int32((int(r.partition) + batches) % partitions)
	req.Topics = append(req.Topics, topic)
	return req, records
}

// send sends one Produce request and returns its runs of acknowledged
// records, all answered when the response arrived; a partition's error
// is an error.
func (r *lagRun) send(ctx context.Context, source lagEndpoint, req *kmsg.ProduceRequest, records []int64) ([]lagAck, error) {
	asked := req.Topics[0].Partitions
	kresp, err := source.broker.Request(ctx, req)
	at := r.since()
	if err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	resp := kresp.(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(asked) {
		return nil, fmt.Errorf("produce: %d topics answered, want 1 of %d partitions", len(resp.Topics), len(asked))
	}
	acks := make([]lagAck, len(asked))
	for i, p := range resp.Topics[0].Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return nil, fmt.Errorf("produce to %s-%d: %w", r.topic, p.Partition, err)
		}
		if p.Partition != asked[i].Partition || p.BaseOffset < 0 {
			return nil, fmt.Errorf("produce: partition %d answered offset %d in the place of partition %d", p.Partition, p.BaseOffset, asked[i].Partition)
		}
		acks[i] = lagAck{partition: p.Partition, baseOffset: p.BaseOffset, records: records[i], at: at}
	}
	return acks, nil
}
