package broker

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// etlMember is one consume-transform-produce member, as franz-go's
// examples/transactions/eos: poll "in", produce each value to "out" and
// commit the consumed offsets in one transaction.
type etlMember struct {
	name    string
	session *kgo.GroupTransactSession

	mu        sync.Mutex
	committed int // transactions committed with records in them
}

func newETLMember(t *testing.T, addr, name string) *etlMember {
	t.Helper()
	session, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(addr),
		kgo.DefaultProduceTopic("out"),
		kgo.TransactionalID(name),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumerGroup("etl"),
		kgo.ConsumeTopics("in"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RequireStableFetchOffsets(),
		kgo.FetchMaxPartitionBytes(1), // a batch per partition per fetch: many transactions
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	return &etlMember{name: name, session: session}
}

// run is the member's loop, until ctx ends, the session is closed, or
// stopAfter transactions with records have committed (0: no limit), when
// it closes the session (leaving the group).
func (m *etlMember) run(ctx context.Context, t *testing.T, stopAfter int) {
	defer m.session.Close()
	for range 10_000 { // bounded; ctx bounds it in time
		fetches := m.session.PollFetches(ctx)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			return
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			t.Logf("%s: fetch %s-%d: %v", m.name, topic, partition, err)
		})
		if err := m.session.Begin(); err != nil {
			t.Errorf("%s: begin: %v", m.name, err)
			return
		}
		promise := kgo.AbortingFirstErrPromise(m.session.Client())
		records := 0
		fetches.EachRecord(func(r *kgo.Record) {
			records++
			m.session.Produce(ctx, kgo.StringRecord(string(r.Value)), promise.Promise())
		})
		committed, err := m.session.End(ctx, kgo.TransactionEndTry(promise.Err() == nil))
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("%s: end: %v", m.name, err)
			}
			return
		}
		if committed && records > 0 {
			m.mu.Lock()
			m.committed++
			done := stopAfter > 0 && m.committed >= stopAfter
			m.mu.Unlock()
			if done {
				return
			}
		}
	}
}

func (m *etlMember) commits() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.committed
}

// TestGroupTransactSession runs franz-go's GroupTransactSession
// consume-transform-produce with two members of one group against a
// served node; one closes mid-run and the other takes its partitions over
// from the offsets committed in its transactions. The output, read
// read_committed, holds each input exactly once.
func TestGroupTransactSession(t *testing.T) {
	const inputs, partitions = 120, 4
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s := serveDir(t, filepath.Join(t.TempDir(), "data"), "127.0.0.1:0")
	defer s.close()
	admin := newClient(t, s.addr)
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, partitions, 1, nil, "in"); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	producer := newClient(t, s.addr, kgo.DefaultProduceTopic("in"))
	for i := range inputs { // one batch each, so that each fetch returns few
		r := &kgo.Record{Value: fmt.Appendf(nil, "v%03d", i), Partition: int32(i % partitions)}
		if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	leaving, staying := newETLMember(t, s.addr, "etl-1"), newETLMember(t, s.addr, "etl-2")
	var wg sync.WaitGroup
	stayCtx, stopStaying := context.WithCancel(ctx)
	defer stopStaying()
	wg.Add(2)
	go func() { defer wg.Done(); leaving.run(ctx, t, 3) }()
	go func() { defer wg.Done(); staying.run(stayCtx, t, 0) }()

	// Read the output until every input is there (or the deadline).
	reader := newClient(t, s.addr, kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	seen := map[string]int{}
	for len(seen) < inputs && ctx.Err() == nil {
		reader.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	stopStaying()
	wg.Wait()
	if len(seen) < inputs {
		t.Fatalf("only %d of %d inputs in the output before the deadline", len(seen), inputs)
	}
	if leaving.commits() < 3 || staying.commits() == 0 {
		t.Fatalf("transactions with records: leaving member %d (closed after 3), staying member %d; want both to have worked", leaving.commits(), staying.commits())
	}

	// Everything the members wrote is committed or aborted now: read the
	// rest up to a sentinel, for any duplicate.
	if err := newClient(t, s.addr, kgo.DefaultProduceTopic("out")).ProduceSync(ctx, kgo.StringRecord("end")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for seen["end"] == 0 && ctx.Err() == nil {
		reader.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for i := range inputs {
		if v := fmt.Sprintf("v%03d", i); seen[v] != 1 {
			t.Errorf("%s is in the output %d times, want once", v, seen[v])
		}
	}
	if len(seen) != inputs+1 {
		t.Errorf("%d distinct values in the output, want %d inputs and the end", len(seen), inputs)
	}
	t.Logf("transactions with records: leaving member %d, staying member %d", leaving.commits(), staying.commits())
}
