package e2e

// The franz-go application of the transactional failover test
// (txn_failover_test.go): one kgo client with a transactional ID, for the
// whole test, running transactions of records over the partitions of
// txnFailoverKgoTopic as an application does: begin, produce, commit; on
// a failure, abort what is buffered and the transaction, and go on. What
// each transaction ended as is recorded: the committed records with the
// offsets they were acknowledged at, the values of every record of a
// transaction that did not commit (acknowledged or not: a produce whose
// answer was lost may still be written).

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	txnProducerDeliveryTimeout = 10 * time.Second // per record; Kafka's default is 2 minutes
	txnProducerTimeout         = time.Minute      // transaction.timeout.ms: no timeout during the test
)

// txnProducer is the franz-go transactional application. Before the
// failover every step must succeed; after it, failures are recorded.
type txnProducer struct {
	client        *kgo.Client
	trace         *kgoTrace
	txn           int             // transactions begun
	committed     *ledger         // records of committed transactions, as acknowledged
	abortedValues map[string]bool // values of every record of the other transactions
	commits       int             // transactions committed
	commitsAfter  int             // of those, after the failover
	after         bool            // failed over
	errorsAfter   []string        // step and error of each failure after the failover
}

// newTxnProducer is a transactional kgo client of addr, closed when the
// test ends.
func newTxnProducer(t *testing.T, addr, transactionalID string) *txnProducer {
	t.Helper()
	trace := &kgoTrace{max: txnFailoverTraceMax}
	client := newClient(t, addr, kgo.TransactionalID(transactionalID), kgo.TransactionTimeout(txnProducerTimeout),
		kgo.RecordDeliveryTimeout(txnProducerDeliveryTimeout), kgo.WithLogger(trace))
	return &txnProducer{client: client, trace: trace, committed: newLedger(), abortedValues: map[string]bool{}}
}

// failedOver marks the failover: from now on failures are recorded, and
// the client's log is kept.
func (p *txnProducer) failedOver() {
	p.after = true
	p.trace.start()
}

// transaction runs one transaction of count records and commits it
// (commit) or aborts it.
func (p *txnProducer) transaction(ctx context.Context, t *testing.T, count int, commit bool) {
	t.Helper()
	p.txn++
	if err := p.client.BeginTransaction(); err != nil {
		p.fail(t, fmt.Sprintf("transaction %d: BeginTransaction", p.txn), err)
		return
	}
	written := newLedger()
	values, err := p.produce(ctx, count, written)
	p.end(ctx, t, written, values, err, commit)
}

// begin begins a transaction and produces count records in it, leaving
// it open; finish goes on with it.
func (p *txnProducer) begin(ctx context.Context, t *testing.T, count int) *openTxn {
	t.Helper()
	p.txn++
	if err := p.client.BeginTransaction(); err != nil {
		p.fail(t, fmt.Sprintf("transaction %d: BeginTransaction", p.txn), err)
	}
	open := &openTxn{written: newLedger()}
	open.values, open.err = p.produce(ctx, count, open.written)
	if open.err != nil {
		p.fail(t, fmt.Sprintf("transaction %d (left open): Produce", p.txn), open.err)
	}
	return open
}

// openTxn is a transaction begun and not ended.
type openTxn struct {
	written *ledger
	values  []string
	err     error
}

// finish produces more records in the open transaction and commits it.
func (p *txnProducer) finish(ctx context.Context, t *testing.T, open *openTxn, more int) {
	t.Helper()
	values, err := p.produce(ctx, more, open.written)
	p.end(ctx, t, open.written, append(open.values, values...), err, true)
}

// produce produces count records of transaction p.txn over the topic's
// partitions and returns their values.
func (p *txnProducer) produce(ctx context.Context, count int, written *ledger) ([]string, error) {
	records := make([]*kgo.Record, count)
	values := make([]string, count)
	for i := range records {
		values[i] = fmt.Sprintf("kgo-%d-%d", p.txn, i)
		records[i] = &kgo.Record{Topic: txnFailoverKgoTopic, Partition: int32(i % txnFailoverPartitions), Value: []byte(values[i])}
	}
	return values, produceAll(ctx, p.client, records, written)
}

// end commits (commit, and nothing failed) or aborts the transaction of
// the records written (values: all of them, acknowledged or not).
func (p *txnProducer) end(ctx context.Context, t *testing.T, written *ledger, values []string, produceErr error, commit bool) {
	t.Helper()
	step := fmt.Sprintf("transaction %d", p.txn)
	if produceErr != nil {
		p.fail(t, step+": Produce", produceErr)
	} else if commit {
		err := p.client.EndTransaction(ctx, kgo.TryCommit)
		if err == nil {
			for _, records := range written.sorted() {
				for _, r := range records {
					p.committed.add(r)
				}
			}
			p.commits++
			if p.after {
				p.commitsAfter++
			}
			return
		}
		p.fail(t, step+": EndTransaction(commit)", err)
	}
	for _, v := range values {
		p.abortedValues[v] = true
	}
	if err := p.client.AbortBufferedRecords(ctx); err != nil {
		p.fail(t, step+": AbortBufferedRecords", err)
	}
	if err := p.client.EndTransaction(ctx, kgo.TryAbort); err != nil {
		p.fail(t, step+": EndTransaction(abort)", err)
	}
}

// fail records a failure after the failover; before it, it fails the
// test: Kafka must take every step.
func (p *txnProducer) fail(t *testing.T, step string, err error) {
	t.Helper()
	if !p.after {
		t.Fatalf("franz-go on Kafka: %s: %v", step, err)
	}
	p.errorsAfter = append(p.errorsAfter, fmt.Sprintf("%s: %v", step, err))
}

// kgoTrace is a kgo.Logger that keeps the client's debug log (every
// request written and read, with its version and errors) once started,
// up to max lines.
type kgoTrace struct {
	max     int
	mu      sync.Mutex
	started bool
	lines   []string // at most max
	dropped int
}

func (l *kgoTrace) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started = true
}

func (l *kgoTrace) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l *kgoTrace) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		return
	}
	if len(l.lines) >= l.max {
		l.dropped++
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", time.Now().Format("15:04:05.000"), level, msg)
	for i := 0; i+1 < len(keyvals); i += 2 {
		fmt.Fprintf(&b, " %v=%v", keyvals[i], keyvals[i+1])
	}
	l.lines = append(l.lines, b.String())
}

// text is the kept lines.
func (l *kgoTrace) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n") + fmt.Sprintf("\n(%d more lines dropped)", l.dropped)
}
