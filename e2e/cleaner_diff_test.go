package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	cleanerDiffWait = 3 * time.Minute // both cleaners, on a loaded machine
	cleanerDiffKeys = 40
)

// cleanerDiffConfigs make both cleaners run soon: segments roll 100 ms
// after their first append, any dirt is enough, no compaction lag;
// tombstones stay (delete.retention.ms keeps its day).
var cleanerDiffConfigs = map[string]string{"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}

// TestCleanerMatchesKafka writes the same keyed input (tombstones,
// committed and aborted transactions, an idempotent producer) to a Kafka
// 4.4 broker and to mirrord, each with a cleaner that looks every 100 ms,
// then keeps writing one new key per poll (which rolls the segments) until
// a consumer from offset 0 sees, on each, exactly what a cleaning leaves:
// the latest record of each key (aborted records gone, tombstones kept)
// and every later record. Then both hold the same records at the same
// offsets.
func TestCleanerMatchesKafka(t *testing.T) {
	t.Parallel()
	cluster := sharedKafkaBroker(t) // kafkatest's cleaner looks every 100 ms; the topic and transactional ID: cleaned, cleaner-diff
	mirror := startServer(t, "--log-cleaner-backoff-ms", "100")
	ctx, cancel := context.WithTimeout(context.Background(), cleanerDiffWait+time.Minute)
	defer cancel()
	servers := []struct{ name, addr string }{{"kafka", cluster.Bootstrap()}, {"mirrord", mirror.addr}}
	const topic = "cleaned"
	for _, s := range servers {
		createCompactedTopic(ctx, t, s.addr, topic)
	}
	// The same records, in the same order, to both: the same offsets.
	var model cleanerModel
	for _, s := range servers {
		model = cleanerModel{}
		writeCleanerInput(ctx, t, s.addr, topic, &model)
	}
	late := make([]*kgo.Client, len(servers))
	for i, s := range servers {
		late[i] = newClient(t, s.addr)
	}
	round := 0
	for _, s := range servers {
		var got []string
		reason := pollUntil(ctx, cleanerDiffWait, func(ctx context.Context) string {
			var err error
			if got, err = consumeFromStart(ctx, s.addr, topic); err != nil {
				return err.Error()
			}
			if slices.Equal(got, model.survivors()) {
				return ""
			}
			round++
			for _, client := range late { // a new key to both, keeping their offsets equal
				r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "late-%d", round), Value: []byte("v")}
				if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
					return err.Error()
				}
			}
			model.add(fmt.Sprintf("late-%d", round), "v", false)
			return fmt.Sprintf("%s: %d records, want %d", s.name, len(got), len(model.survivors()))
		})
		if reason != "" {
			t.Fatalf("%s not cleaned within %v: %s\nholds %v\nwant  %v", s.name, cleanerDiffWait, reason, got, model.survivors())
		}
	}
	// The first server stayed clean while the second was waited for (only
	// new keys were added): both are read once more and compared.
	kafka, err := consumeFromStart(ctx, servers[0].addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := consumeFromStart(ctx, servers[1].addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kafka, ours) {
		t.Fatalf("after cleaning, Kafka holds\n  %v\nmirrord\n  %v", kafka, ours)
	}
	t.Logf("%d records left of %d written (%d keys), identical on Kafka and mirrord", len(ours), model.written, cleanerDiffKeys)
}

func createCompactedTopic(ctx context.Context, t *testing.T, addr, topic string) {
	t.Helper()
	values := map[string]*string{}
	for k, v := range cleanerDiffConfigs {
		values[k] = &v
	}
	created, err := kadm.NewClient(newClient(t, addr)).CreateTopic(ctx, 1, 1, values, topic)
	if err == nil {
		err = created.Err
	}
	if err != nil {
		t.Fatalf("create %s on %s: %v", topic, addr, err)
	}
}

// cleanerModel is what a cleaning leaves: per key its latest committed or
// non-transactional record, in offset order of the records.
type cleanerModel struct {
	next    int64
	latest  map[string]int64 // key -> offset
	records map[int64]string // offset -> "offset:key=value"
	written int
}

func (m *cleanerModel) add(key, value string, aborted bool) {
	if m.latest == nil {
		m.latest, m.records = map[string]int64{}, map[int64]string{}
	}
	if !aborted {
		if old, ok := m.latest[key]; ok {
			delete(m.records, old)
		}
		m.latest[key] = m.next
		m.records[m.next] = fmt.Sprintf("%d:%s=%s", m.next, key, value)
	}
	m.next++
	m.written++
}

func (m *cleanerModel) marker() { m.next++ }

func (m *cleanerModel) survivors() []string {
	offsets := make([]int64, 0, len(m.records))
	for o := range m.records {
		offsets = append(offsets, o)
	}
	slices.Sort(offsets)
	out := make([]string, len(offsets))
	for i, o := range offsets {
		out[i] = m.records[o]
	}
	return out
}

// writeCleanerInput writes keyed records with tombstones, then a
// committed and an aborted transaction, then more keyed records, each
// step acknowledged before the next (so offsets follow the model).
func writeCleanerInput(ctx context.Context, t *testing.T, addr, topic string, m *cleanerModel) {
	t.Helper()
	plain := newClient(t, addr, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	write := func(client *kgo.Client, n, from int, aborted bool) {
		var records []*kgo.Record
		for i := from; i < from+n; i++ {
			key := fmt.Sprintf("key-%d", i%cleanerDiffKeys)
			r := &kgo.Record{Topic: topic, Key: []byte(key), Value: fmt.Appendf(nil, "v%d", i)}
			if i%37 == 0 {
				r.Value = nil // a tombstone
			}
			records = append(records, r)
			m.add(key, valueString(r.Value), aborted)
		}
		for _, r := range records {
			if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce to %s: %v", addr, err)
			}
		}
	}
	write(plain, 200, 0, false)
	txn := newClient(t, addr, kgo.TransactionalID("cleaner-diff"), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	for i, commit := range []bool{true, false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		write(txn, 30, 1000+100*i, !commit)
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction on %s: %v", addr, err)
		}
		m.marker()
	}
	write(plain, 100, 2000, false)
}

func valueString(v []byte) string {
	if v == nil {
		return "<nil>"
	}
	return string(v)
}

// consumeFromStart reads the partition from offset 0 to its high
// watermark as "offset:key=value" (read_uncommitted: aborted records show
// until a cleaning removes them).
func consumeFromStart(ctx context.Context, addr, topic string) ([]string, error) {
	admin, err := kgo.NewClient(seeds(addr))
	if err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, topic)
	admin.Close()
	if err != nil {
		return nil, err
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || end.Err != nil {
		return nil, fmt.Errorf("end offset of %s: %v", topic, end.Err)
	}
	client, err := kgo.NewClient(seeds(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	if err != nil {
		return nil, err
	}
	defer client.Close()
	var out []string
	for polls := 0; polls < 1000; polls++ {
		if len(out) > 0 && lastOffset(out) >= end.Offset-1 {
			return out, nil
		}
		pollCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fetches := client.PollFetches(pollCtx)
		cancel()
		if err := ctx.Err(); err != nil {
			return out, err
		}
		fetches.EachRecord(func(r *kgo.Record) {
			out = append(out, fmt.Sprintf("%d:%s=%s", r.Offset, r.Key, valueString(r.Value)))
		})
		if fetches.Empty() {
			return out, nil // nothing more below the high watermark (markers and emptied batches end it)
		}
	}
	return out, fmt.Errorf("reading %s did not end", topic)
}

func lastOffset(records []string) int64 {
	var o int64
	fmt.Sscanf(strings.SplitN(records[len(records)-1], ":", 2)[0], "%d", &o)
	return o
}
