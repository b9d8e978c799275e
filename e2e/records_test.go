package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

func (tp topicPartition) String() string { return fmt.Sprintf("%s-%d", tp.topic, tp.partition) }

// ledger holds the records a broker acknowledged, per partition, with the
// offsets it assigned. Safe for the producer's promise goroutine.
type ledger struct {
	mu      sync.Mutex
	records map[topicPartition][]*kgo.Record // bounded by what the test produces
}

func newLedger() *ledger { return &ledger{records: map[topicPartition][]*kgo.Record{}} }

func (l *ledger) add(r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tp := topicPartition{r.Topic, r.Partition}
	l.records[tp] = append(l.records[tp], r)
}

// sorted returns the records by partition, in offset order.
func (l *ledger) sorted() map[topicPartition][]*kgo.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[topicPartition][]*kgo.Record, len(l.records))
	for tp, records := range l.records {
		records = slices.Clone(records)
		sort.Slice(records, func(i, j int) bool { return records[i].Offset < records[j].Offset })
		out[tp] = records
	}
	return out
}

func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, records := range l.records {
		n += len(records)
	}
	return n
}

// merge returns the union of ledgers, sorted by offset per partition.
func merge(ledgers ...*ledger) map[topicPartition][]*kgo.Record {
	all := newLedger()
	for _, l := range ledgers {
		for _, records := range l.sorted() {
			for _, r := range records {
				all.add(r)
			}
		}
	}
	return all.sorted()
}

// produceAll produces records asynchronously, waits for every promise and
// adds the acknowledged ones to acked. It returns the first error.
func produceAll(ctx context.Context, client *kgo.Client, records []*kgo.Record, acked *ledger) error {
	var (
		mu       sync.Mutex
		firstErr error
		failed   int
	)
	for _, r := range records {
		client.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err == nil {
				acked.add(r)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			failed++
			if firstErr == nil {
				firstErr = fmt.Errorf("produce to %s-%d: %w", r.Topic, r.Partition, err)
			}
		})
	}
	if err := client.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("%d of %d records failed; first: %w", failed, len(records), firstErr)
	}
	return nil
}

// recordMaker makes records with varied keys (some null), compressible
// values and 0-3 headers, reproducible from the seed.
type recordMaker struct {
	random *rand.Rand
	words  []string
}

func newRecordMaker(seed uint64) *recordMaker {
	return &recordMaker{
		random: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		words:  strings.Fields("mirror offset epoch batch segment leader follower replica partition topic record header commit abort"),
	}
}

func (m *recordMaker) record(topic string, partition int32, index int) *kgo.Record {
	r := &kgo.Record{Topic: topic, Partition: partition}
	if m.random.IntN(10) != 0 {
		r.Key = fmt.Appendf(nil, "key-%s-%d-%d", topic, partition, index)
	}
	value := fmt.Appendf(nil, "%s/%d/%d:", topic, partition, index)
	for n := m.random.IntN(24); n > 0; n-- {
		value = append(value, m.words[m.random.IntN(len(m.words))]...)
		value = append(value, ' ')
	}
	value = append(value, byte(m.random.IntN(256)), byte(m.random.IntN(256))) // not only text
	r.Value = value
	for h := m.random.IntN(4); h > 0; h-- {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: fmt.Sprintf("h%d", h), Value: fmt.Appendf(nil, "%d", m.random.Uint32())})
	}
	return r
}

// consumeExactly reads the given partitions from offset 0 with
// ConsumePartitions (no consumer group) until each has as many records as
// want holds, and compares them. Extra records after those are not seen:
// callers check the high watermark (readPartition) for that.
func consumeExactly(ctx context.Context, t *testing.T, addr string, isolation kgo.IsolationLevel, want map[topicPartition][]*kgo.Record) {
	t.Helper()
	counts := make(map[topicPartition]int, len(want))
	for tp, records := range want {
		counts[tp] = len(records)
	}
	compareRecords(t, want, consume(ctx, t, addr, isolation, counts))
}

const (
	consumeWait       = 30 * time.Second
	consumeErrorsMax  = 5 // fetch errors logged before giving up
	consumePollsMax   = 100000
	mismatchesShowMax = 5
)

// consume reads each partition of counts from offset 0 until it has that
// many records (or the deadline passes) and returns what it read.
func consume(ctx context.Context, t *testing.T, addr string, isolation kgo.IsolationLevel, counts map[topicPartition]int) map[topicPartition][]*kgo.Record {
	t.Helper()
	return consumeFrom(ctx, t, addr, isolation, nil, counts)
}

// consumeFrom is consume from the offsets of from (0 for a partition it
// does not name).
func consumeFrom(ctx context.Context, t *testing.T, addr string, isolation kgo.IsolationLevel, from map[topicPartition]int64, counts map[topicPartition]int) map[topicPartition][]*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, consumeWait)
	defer cancel()
	partitions := map[string]map[int32]kgo.Offset{}
	remaining := 0
	for tp, count := range counts {
		if partitions[tp.topic] == nil {
			partitions[tp.topic] = map[int32]kgo.Offset{}
		}
		partitions[tp.topic][tp.partition] = kgo.NewOffset().At(from[tp])
		remaining += count
	}
	client, err := kgo.NewClient(seeds(addr), kgo.ConsumePartitions(partitions),
		kgo.FetchIsolationLevel(isolation), kgo.FetchMaxWait(250*time.Millisecond), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer client.Close()
	got := map[topicPartition][]*kgo.Record{}
	errorsSeen := 0
	for polls := 0; remaining > 0 && polls < consumePollsMax; polls++ {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		for _, fetchErr := range fetches.Errors() {
			errorsSeen++
			t.Errorf("fetch %s-%d: %v", fetchErr.Topic, fetchErr.Partition, fetchErr.Err)
		}
		if errorsSeen >= consumeErrorsMax {
			break
		}
		fetches.EachRecord(func(r *kgo.Record) {
			tp := topicPartition{r.Topic, r.Partition}
			if len(got[tp]) < counts[tp] {
				remaining--
			}
			got[tp] = append(got[tp], r)
		})
	}
	if remaining > 0 {
		t.Errorf("consume (%s): %d records not received (ctx: %v)", isolationName(isolation), remaining, ctx.Err())
	}
	return got
}

// compareRecords compares, per partition, keys (null or not), values,
// headers, offsets and timestamps (milliseconds, as stored; not when the
// wanted one is zero: a producer other than kgo chose it).
func compareRecords(t *testing.T, want, got map[topicPartition][]*kgo.Record) {
	t.Helper()
	shown := 0
	for _, tp := range sortedPartitions(want) {
		w, g := want[tp], got[tp]
		if len(g) < len(w) {
			t.Errorf("%s: %d records, want %d", tp, len(g), len(w))
		}
		for i := range min(len(w), len(g)) {
			if problem := recordDifference(w[i], g[i]); problem != "" {
				t.Errorf("%s record %d (offset %d): %s", tp, i, w[i].Offset, problem)
				if shown++; shown == mismatchesShowMax {
					t.Fatalf("stopping after %d mismatches", shown)
				}
			}
		}
	}
}

func recordDifference(want, got *kgo.Record) string {
	switch {
	case got.Offset != want.Offset:
		return fmt.Sprintf("offset %d, want %d", got.Offset, want.Offset)
	case (got.Key == nil) != (want.Key == nil) || !bytes.Equal(got.Key, want.Key):
		return fmt.Sprintf("key %q (null %v), want %q (null %v)", got.Key, got.Key == nil, want.Key, want.Key == nil)
	case !bytes.Equal(got.Value, want.Value):
		return fmt.Sprintf("value %q, want %q", got.Value, want.Value)
	case !want.Timestamp.IsZero() && got.Timestamp.UnixMilli() != want.Timestamp.UnixMilli():
		return fmt.Sprintf("timestamp %d, want %d", got.Timestamp.UnixMilli(), want.Timestamp.UnixMilli())
	case len(got.Headers) != len(want.Headers):
		return fmt.Sprintf("%d headers, want %d", len(got.Headers), len(want.Headers))
	}
	for i := range want.Headers {
		if got.Headers[i].Key != want.Headers[i].Key || !bytes.Equal(got.Headers[i].Value, want.Headers[i].Value) {
			return fmt.Sprintf("header %d %s=%q, want %s=%q", i, got.Headers[i].Key, got.Headers[i].Value, want.Headers[i].Key, want.Headers[i].Value)
		}
	}
	return ""
}

func sortedPartitions[V any](m map[topicPartition]V) []topicPartition {
	tps := make([]topicPartition, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].topic != tps[j].topic {
			return tps[i].topic < tps[j].topic
		}
		return tps[i].partition < tps[j].partition
	})
	return tps
}

// createTopics creates topics of the given partition counts with kadm.
func createTopics(ctx context.Context, t *testing.T, addr string, topics map[string]int32) {
	t.Helper()
	client, err := kgo.NewClient(seeds(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	for name, partitions := range topics {
		created, err := admin.CreateTopic(ctx, partitions, 1, nil, name)
		if err == nil {
			err = created.Err
		}
		if err != nil {
			t.Fatalf("create topic %s (%d partitions): %v", name, partitions, err)
		}
	}
}

// readAll reads every given partition raw (readPartition).
func readAll(ctx context.Context, t *testing.T, addr string, tps []topicPartition) map[topicPartition]storedPartition {
	t.Helper()
	out := make(map[topicPartition]storedPartition, len(tps))
	for _, tp := range tps {
		stored, err := readPartition(ctx, addr, tp.topic, tp.partition)
		if err != nil {
			t.Fatalf("raw read: %v", err)
		}
		out[tp] = stored
	}
	return out
}

// compareStored requires two raw reads of the same partitions to be
// identical byte for byte, with the same offsets.
func compareStored(t *testing.T, what string, before, after map[topicPartition]storedPartition) {
	t.Helper()
	for _, tp := range sortedPartitions(before) {
		b, a := before[tp], after[tp]
		switch {
		case a.highWatermark != b.highWatermark || a.lastStableOffset != b.lastStableOffset || a.logStartOffset != b.logStartOffset:
			t.Errorf("%s: %s: offsets (logStart %d, highWatermark %d, lastStable %d), before (%d, %d, %d)", what, tp,
				a.logStartOffset, a.highWatermark, a.lastStableOffset, b.logStartOffset, b.highWatermark, b.lastStableOffset)
		case !bytes.Equal(a.batches, b.batches):
			t.Errorf("%s: %s: %d bytes in %d batches differ from the %d bytes in %d batches before (first difference at byte %d)",
				what, tp, len(a.batches), a.batchCount, len(b.batches), b.batchCount, firstDifference(a.batches, b.batches))
		}
	}
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func isolationName(level kgo.IsolationLevel) string {
	if level == kgo.ReadCommitted() {
		return "read_committed"
	}
	return "read_uncommitted"
}
