package e2e

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	transactionRounds     = 9
	transactionRecords    = 300 // per transaction
	betweenRecords        = 50  // non-transactional records between transactions
	transactionPartitions = 3
	transactionTimeout    = 30 * time.Second // longer than the test: the coordinator does not abort by timeout
)

// TestKgoTransactions: a transactional producer commits and aborts
// transactions over 3 partitions while an idempotent one writes between
// them, then leaves one transaction open. read_committed sees the
// committed and the non-transactional records only, read_uncommitted every
// acknowledged record; each ended transaction leaves one marker per
// partition, and the open one holds the last stable offset at its first
// record. All of it holds after kill -9 and a restart; then a new producer
// with the same transactional ID aborts the open transaction (fencing) and
// commits, and the open transaction's records never become visible to
// read_committed.
func TestKgoTransactions(t *testing.T) {
	t.Parallel()
	seed := newSeed(t)
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	const topic = "txn"
	createTopics(ctx, t, s.addr, map[string]int32{topic: transactionPartitions})
	var tps []topicPartition
	for p := range int32(transactionPartitions) {
		tps = append(tps, topicPartition{topic, p})
	}
	transactionalID := fmt.Sprintf("e2e-%d", seed)
	committed, aborted, plain, open := newLedger(), newLedger(), newLedger(), newLedger()
	maker := newRecordMaker(seed)
	markers := map[string]int{}
	t.Run("produce", func(t *testing.T) {
		producer := newClient(t, s.addr, kgo.TransactionalID(transactionalID), kgo.TransactionTimeout(transactionTimeout))
		idempotent := newClient(t, s.addr)
		for round := range transactionRounds {
			commit := round%3 != 1
			target := committed
			if !commit {
				target = aborted
			}
			runTransaction(ctx, t, producer, maker, topic, transactionRecords, commit, target)
			if commit {
				markers["commit"]++
			} else {
				markers["abort"]++
			}
			records := make([]*kgo.Record, betweenRecords)
			for i := range records {
				records[i] = maker.record(topic, int32(i%transactionPartitions), i)
			}
			if err := produceAll(ctx, idempotent, records, plain); err != nil {
				t.Fatal(err)
			}
		}
	})
	if t.Failed() {
		return
	}
	// The open transaction's producer is closed only after the kill, so
	// it cannot end the transaction.
	pending, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID(transactionalID), kgo.TransactionTimeout(transactionTimeout), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Close()
	t.Run("produce/open-transaction", func(t *testing.T) {
		if err := pending.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		records := make([]*kgo.Record, transactionRecords)
		for i := range records {
			records[i] = maker.record(topic, int32(i%transactionPartitions), i)
		}
		if err := produceAll(ctx, pending, records, open); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%d committed, %d aborted, %d non-transactional, %d open records", committed.count(), aborted.count(), plain.count(), open.count())
	openFirst := map[topicPartition]int64{}
	for tp, records := range open.sorted() {
		openFirst[tp] = records[0].Offset
	}
	check := func(t *testing.T, stored map[topicPartition]storedPartition, lastStable map[topicPartition]int64, markers map[string]int) {
		for _, tp := range tps {
			p := stored[tp]
			want, ok := lastStable[tp]
			if !ok {
				want = p.highWatermark
			}
			if p.lastStableOffset != want {
				t.Errorf("%s: lastStable %d, want %d (highWatermark %d)", tp, p.lastStableOffset, want, p.highWatermark)
			}
			if p.markers["commit"] != markers["commit"] || p.markers["abort"] != markers["abort"] || p.markers["other"] != 0 {
				t.Errorf("%s: markers %v, want %v", tp, p.markers, markers)
			}
		}
	}
	t.Run("consume/read_committed", func(t *testing.T) {
		consumeExactly(ctx, t, s.addr, kgo.ReadCommitted(), merge(committed, plain))
	})
	t.Run("consume/read_uncommitted", func(t *testing.T) {
		consumeExactly(ctx, t, s.addr, kgo.ReadUncommitted(), merge(committed, aborted, plain, open))
	})
	before := readAll(ctx, t, s.addr, tps)
	t.Run("stored", func(t *testing.T) { check(t, before, openFirst, markers) })

	s.kill()
	pending.Close()
	s.start()
	t.Run("after-kill/stored", func(t *testing.T) { compareStored(t, "after kill -9", before, readAll(ctx, t, s.addr, tps)) })
	t.Run("after-kill/consume/read_committed", func(t *testing.T) {
		consumeExactly(ctx, t, s.addr, kgo.ReadCommitted(), merge(committed, plain))
	})
	t.Run("after-kill/fence-and-commit", func(t *testing.T) {
		producer := newClient(t, s.addr, kgo.TransactionalID(transactionalID), kgo.TransactionTimeout(transactionTimeout))
		runTransaction(ctx, t, producer, maker, topic, transactionRecords, true, committed)
		consumeExactly(ctx, t, s.addr, kgo.ReadCommitted(), merge(committed, plain))
		consumeExactly(ctx, t, s.addr, kgo.ReadUncommitted(), merge(committed, aborted, plain, open))
		after := map[string]int{"commit": markers["commit"] + 1, "abort": markers["abort"] + 1}
		check(t, readAll(ctx, t, s.addr, tps), nil, after)
	})
	// kcat (librdkafka) reading read_committed: a second implementation
	// of the aborted-transaction filtering.
	t.Run("after-kill/kcat-read_committed", func(t *testing.T) {
		kcat := findKcat(t)
		want := merge(committed, plain)
		for _, tp := range tps {
			out := runKcat(ctx, t, kcat, nil, "-b", s.addr, "-m", kcatMetadataTimeout, "-C", "-t", topic,
				"-p", fmt.Sprint(tp.partition), "-X", "isolation.level=read_committed", "-o", "beginning", "-e", "-q", "-f", "%o|%s\n")
			var lines bytes.Buffer
			for _, r := range want[tp] {
				fmt.Fprintf(&lines, "%d|%s\n", r.Offset, r.Value)
			}
			compareLines(t, "kcat -C "+tp.String(), out, lines.Bytes())
		}
	})
	s.stop()
}

// runTransaction produces count records over the topic's partitions in one
// transaction and commits or aborts it; the acknowledged records go to
// acked once the transaction has ended as asked.
func runTransaction(ctx context.Context, t *testing.T, producer *kgo.Client, maker *recordMaker, topic string, count int, commit bool, acked *ledger) {
	t.Helper()
	if err := producer.BeginTransaction(); err != nil {
		t.Fatalf("begin transaction: %v", err)
	}
	records := make([]*kgo.Record, count)
	for i := range records {
		records[i] = maker.record(topic, int32(i%transactionPartitions), i)
	}
	written := newLedger()
	if err := produceAll(ctx, producer, records, written); err != nil {
		producer.EndTransaction(ctx, kgo.TryAbort)
		t.Fatalf("transactional produce: %v", err)
	}
	end := kgo.TransactionEndTry(commit)
	if err := producer.EndTransaction(ctx, end); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
	for _, records := range written.sorted() {
		for _, r := range records {
			acked.add(r)
		}
	}
}
