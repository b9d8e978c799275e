package e2e

// The soak suites' source workload and its verdicts (soak_kill_test.go,
// soak_faults_test.go): transactional producers committing and aborting
// on one topic, every transaction kept (its ID, its records with the
// offsets the source acknowledged, committed or aborted), and an
// idempotent producer rewriting a few keys of a compacted topic whose
// source cleaner runs every 100 ms.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	soakTxnTopic        = "soak-txn"
	soakCompactTopic    = "soak-compact"
	soakTxnWriters      = 2                     // transactional IDs writing at once
	soakTxnRecordsMax   = 4                     // records per transaction: 1 to this
	soakTxnHoldTicksMax = 2                     // ticks a transaction stays open after its writes
	soakCompactKeys     = 25                    // keys the compacted topic's writer rewrites
	soakCompactBatchMax = 3                     // records per compacted write
	soakProduceEvery    = 20 * time.Millisecond // each writer's pacing
	soakWriterStepsMax  = 1_000_000             // bound on each writer's loop (the context ends it first)
	soakIndexStride     = 10_000_000            // record indexes of writer w start at w * this
)

// soakTopics: the compacted topic has its own configs (createCompactedTopic).
var soakTopics = map[string]int32{soakTxnTopic: 2}

// soakTxn is one transaction as its producer saw it end.
type soakTxn struct {
	id        string // transactional ID / sequence number
	records   []*kgo.Record
	committed bool
}

// soakWorkload writes to the source until halted.
type soakWorkload struct {
	mu   sync.Mutex
	txns []soakTxn // ended transactions, in the order they ended
	// gate is held (read) by a transaction from begin to end; a test
	// that must not cut one (a kill of the source) takes it to pause them.
	gate      sync.RWMutex
	compacted *ledger // acknowledged records of the compacted topic
	stop      chan struct{}
	stopOnce  sync.Once
	wg        sync.WaitGroup
	errs      chan error // one per writer
}

// startSoakWorkload creates both topics on addr and starts the writers.
func startSoakWorkload(ctx context.Context, t *testing.T, addr string, seed uint64) *soakWorkload {
	t.Helper()
	createTopics(ctx, t, addr, soakTopics)
	createCompactedTopic(ctx, t, addr, soakCompactTopic)
	w := &soakWorkload{compacted: newLedger(), stop: make(chan struct{}), errs: make(chan error, soakTxnWriters+1)}
	txnTps := topicPartitions(soakTopics)
	for i := range soakTxnWriters {
		id := fmt.Sprintf("soak-%d-%d", seed, i)
		client := newClient(t, addr, kgo.TransactionalID(id), kgo.TransactionTimeout(transactionTimeout),
			kgo.ProducerBatchCompression(codecs[i%len(codecs)].codec))
		random := rand.New(rand.NewPCG(seed, uint64(i)))
		w.run(func() error {
			return w.writeTransactions(ctx, client, id, newRecordMaker(seed+uint64(i)), random, txnTps, i)
		})
	}
	compacted := newClient(t, addr, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	random := rand.New(rand.NewPCG(seed, soakTxnWriters))
	w.run(func() error {
		return w.writeCompacted(ctx, compacted, newRecordMaker(seed+soakTxnWriters), random, soakTxnWriters)
	})
	return w
}

func (w *soakWorkload) run(writer func() error) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.errs <- writer()
	}()
}

// writeTransactions runs transactions of 1 to soakTxnRecordsMax records
// over the partitions, committing two in three, each held open a few
// ticks after its writes.
func (w *soakWorkload) writeTransactions(ctx context.Context, client *kgo.Client, id string, maker *recordMaker, random *rand.Rand, tps []topicPartition, writer int) error {
	ticker := time.NewTicker(soakProduceEvery)
	defer ticker.Stop()
	index := writer * soakIndexStride
	for n := range soakWriterStepsMax {
		select {
		case <-w.stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
		txn := soakTxn{id: fmt.Sprintf("%s/%d", id, n), committed: random.IntN(3) != 0}
		records := make([]*kgo.Record, 1+random.IntN(soakTxnRecordsMax))
		for i := range records {
			tp := tps[random.IntN(len(tps))]
			records[i] = maker.record(tp.topic, tp.partition, index)
			index++
		}
		hold := random.IntN(soakTxnHoldTicksMax + 1)
		if err := w.transaction(ctx, client, &txn, records, hold, ticker.C); err != nil {
			return fmt.Errorf("transaction %s: %w", txn.id, err)
		}
	}
	return nil
}

// transaction writes records in one transaction, waits hold ticks, and
// ends it; the ended transaction is kept.
func (w *soakWorkload) transaction(ctx context.Context, client *kgo.Client, txn *soakTxn, records []*kgo.Record, hold int, tick <-chan time.Time) error {
	w.gate.RLock()
	defer w.gate.RUnlock()
	if err := client.BeginTransaction(); err != nil {
		return err
	}
	written := newLedger()
	if err := produceAll(ctx, client, records, written); err != nil {
		return err
	}
	for range hold {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
		}
	}
	if err := client.EndTransaction(ctx, kgo.TransactionEndTry(txn.committed)); err != nil {
		return fmt.Errorf("end (commit %v): %w", txn.committed, err)
	}
	for _, records := range written.sorted() {
		txn.records = append(txn.records, records...)
	}
	w.mu.Lock()
	w.txns = append(w.txns, *txn)
	w.mu.Unlock()
	return nil
}

// writeCompacted writes 1 to soakCompactBatchMax records a tick to the
// compacted topic, keys drawn from soakCompactKeys; no tombstones (a
// cleaned batch with one carries its cleaning time, KIP-534's delete
// horizon, which differs between two nodes' cleaners).
func (w *soakWorkload) writeCompacted(ctx context.Context, client *kgo.Client, maker *recordMaker, random *rand.Rand, writer int) error {
	ticker := time.NewTicker(soakProduceEvery)
	defer ticker.Stop()
	index := writer * soakIndexStride
	for range soakWriterStepsMax {
		select {
		case <-w.stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
		records := make([]*kgo.Record, 1+random.IntN(soakCompactBatchMax))
		for i := range records {
			records[i] = maker.record(soakCompactTopic, 0, index)
			records[i].Key = fmt.Appendf(nil, "key-%d", random.IntN(soakCompactKeys))
			index++
		}
		if err := produceAll(ctx, client, records, w.compacted); err != nil {
			return fmt.Errorf("compacted write: %w", err)
		}
	}
	return nil
}

// finish stops the writers (each ends its transaction first) and
// requires that none failed.
func (w *soakWorkload) finish(t *testing.T) {
	t.Helper()
	w.halt()
	w.wg.Wait() // bounded: the context and kgo's timeouts
	close(w.errs)
	for err := range w.errs {
		if err != nil {
			t.Fatalf("source workload: %v", err)
		}
	}
}

func (w *soakWorkload) halt() { w.stopOnce.Do(func() { close(w.stop) }) }

// ended returns the ended transactions so far.
func (w *soakWorkload) ended() []soakTxn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]soakTxn(nil), w.txns...)
}

// soakCount is what a soak run did and found, printed at its end.
type soakCount struct {
	rounds, committed, aborted, committedRecords, abortedRecords, compactedRecords int
	kills                                                                          map[string]int // by where the kill landed
	lost, duplicated, abortedVisible, foreign                                      int
}

// report logs the counts and prints them to standard output (for the
// closing notes of `make soak`).
func (c *soakCount) report(t *testing.T, name string, took time.Duration) {
	kills, total := []string{}, 0
	for _, where := range []string{"timed", "mid-transaction", "mid-cleaning"} {
		kills = append(kills, fmt.Sprintf("%s %d", where, c.kills[where]))
		total += c.kills[where]
	}
	line := fmt.Sprintf("%s: rounds=%d kills=%d (%s) transactions committed=%d aborted=%d records committed=%d aborted=%d compacted=%d lost=%d duplicated=%d aborted-visible=%d foreign=%d in %v",
		name, c.rounds, total, strings.Join(kills, ", "), c.committed, c.aborted, c.committedRecords, c.abortedRecords, c.compactedRecords,
		c.lost, c.duplicated, c.abortedVisible, c.foreign, took.Round(time.Second))
	t.Log(line)
	fmt.Fprintln(os.Stdout, line)
}

// checkCommitted reads the transactional topic on addr read_committed
// with kgo to its end and requires every committed record exactly once,
// at the offset the source acknowledged, and nothing else: no aborted
// record, no record no transaction wrote. It adds what it found to count.
func checkCommitted(ctx context.Context, t *testing.T, addr string, txns []soakTxn, count *soakCount) {
	t.Helper()
	committed, aborted := map[string]*kgo.Record{}, map[string]bool{}
	last := map[topicPartition]int64{}
	count.committed, count.aborted, count.committedRecords, count.abortedRecords = 0, 0, 0, 0
	for _, txn := range txns {
		if !txn.committed {
			count.aborted++
			count.abortedRecords += len(txn.records)
			for _, r := range txn.records {
				aborted[string(r.Value)] = true
			}
			continue
		}
		count.committed++
		count.committedRecords += len(txn.records)
		for _, r := range txn.records {
			committed[string(r.Value)] = r
			tp := topicPartition{r.Topic, r.Partition}
			last[tp] = max(last[tp], r.Offset)
		}
	}
	seen := map[string]int{}
	for tp, records := range readCommittedToEnd(ctx, t, addr, topicPartitions(soakTopics), last) {
		for _, r := range records {
			value := string(r.Value)
			seen[value]++
			want, ok := committed[value]
			switch {
			case aborted[value]:
				count.abortedVisible++
				t.Errorf("%s: %s: read_committed shows an aborted record at offset %d", addr, tp, r.Offset)
			case !ok:
				count.foreign++
				t.Errorf("%s: %s: offset %d holds a record no transaction wrote: %q", addr, tp, r.Offset, r.Value)
			case seen[value] > 1:
				count.duplicated++
				t.Errorf("%s: %s: the record of offset %d is shown again at offset %d", addr, tp, want.Offset, r.Offset)
			default:
				if problem := recordDifference(want, r); problem != "" {
					t.Errorf("%s: %s: offset %d: %s", addr, tp, r.Offset, problem)
				}
			}
		}
	}
	for value, r := range committed {
		if seen[value] == 0 {
			count.lost++
			if count.lost <= mismatchesShowMax {
				t.Errorf("%s: committed record %s-%d offset %d is not shown read_committed", addr, r.Topic, r.Partition, r.Offset)
			}
		}
	}
}

const soakQuietPoll = 500 * time.Millisecond // an empty poll after the last wanted offset ends a read

// readCommittedToEnd reads tps from offset 0 read_committed until each
// partition has shown its record at last[tp] and one more poll shows
// nothing (a duplicate after it would show there).
func readCommittedToEnd(ctx context.Context, t *testing.T, addr string, tps []topicPartition, last map[topicPartition]int64) map[topicPartition][]*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, consumeWait)
	defer cancel()
	partitions := map[string]map[int32]kgo.Offset{}
	for _, tp := range tps {
		if partitions[tp.topic] == nil {
			partitions[tp.topic] = map[int32]kgo.Offset{}
		}
		partitions[tp.topic][tp.partition] = kgo.NewOffset().At(0)
	}
	client, err := kgo.NewClient(seeds(addr), kgo.ConsumePartitions(partitions),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer client.Close()
	got := map[topicPartition][]*kgo.Record{}
	reached := func() bool {
		for tp, want := range last {
			if records := got[tp]; len(records) == 0 || records[len(records)-1].Offset < want {
				return false
			}
		}
		return true
	}
	for polls := 0; polls < consumePollsMax; polls++ {
		done := reached()
		pollCtx, cancelPoll := context.WithTimeout(ctx, soakQuietPoll)
		fetches := client.PollFetches(pollCtx)
		cancelPoll()
		if ctx.Err() != nil {
			t.Fatalf("%s: read_committed not read to its end within %v", addr, consumeWait)
		}
		for _, fetchErr := range fetches.Errors() {
			if !errors.Is(fetchErr.Err, context.DeadlineExceeded) { // the quiet poll's end
				t.Fatalf("%s: fetch %s-%d: %v", addr, fetchErr.Topic, fetchErr.Partition, fetchErr.Err)
			}
		}
		records := 0
		fetches.EachRecord(func(r *kgo.Record) {
			tp := topicPartition{r.Topic, r.Partition}
			got[tp] = append(got[tp], r)
			records++
		})
		if done && records == 0 {
			return got
		}
	}
	t.Fatalf("%s: read_committed not read to its end in %d polls", addr, consumePollsMax)
	return nil
}
