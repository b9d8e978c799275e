package e2e

// Kafka's kafka-transactions tool (TransactionsCommand) run against the
// differential test's broker and node (diff_tools_test.go), once a
// franz-go transactional producer committed a transaction and another
// left one open: list (all IDs, and by ID pattern) and describe of each.
// The tables must print the same columns and values, once what
// legitimately differs is made equal: coordinator node IDs, producer IDs
// (ordinals by first appearance), and the clock (a transaction's start
// time and duration: checked to lie within the test's run instead).
//
// Not run: describe-producers and find-hanging (DescribeProducers, API
// 61), abort (WriteTxnMarkers, API 27): mirrord serves neither.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	toolTxnTopic      = "diff-tools-txn"
	toolTxnCommitted  = "diff-tools-txn-committed"
	toolTxnOpen       = "diff-tools-txn-open"
	toolTxnTimeout    = 5 * time.Minute // past the tools' runs: the open transaction stays Ongoing
	transactionsClass = "org.apache.kafka.tools.TransactionsCommand"
)

func init() {
	diffTools["kafka-transactions"] = diffKafkaTransactions
}

// toolTxnRuns are the kafka-transactions runs compared, by name.
var toolTxnRuns = []struct {
	name string
	args []string
}{
	{"list", []string{"list"}},
	{"list --transactional-id-pattern", []string{"list", "--transactional-id-pattern", toolTxnTopic + "-.*"}},
	{"describe committed", []string{"describe", "--transactional-id", toolTxnCommitted}},
	{"describe open", []string{"describe", "--transactional-id", toolTxnOpen}},
}

func diffKafkaTransactions(t *testing.T, d diffTargets) {
	ctx, cancel := context.WithTimeout(context.Background(), diffToolWait)
	defer cancel()
	servers := [2]diffServer{d.kafka, d.mirrord}
	began := time.Now().UnixMilli()
	for _, server := range servers {
		createTopics(ctx, t, server.addr, map[string]int32{toolTxnTopic: 2})
		committed := newClient(t, server.addr, kgo.TransactionalID(toolTxnCommitted), kgo.TransactionTimeout(toolTxnTimeout))
		produceInTransaction(ctx, t, committed, 0, 1)
		if err := committed.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit on %s: %v", server.addr, err)
		}
		open := newClient(t, server.addr, kgo.TransactionalID(toolTxnOpen), kgo.TransactionTimeout(toolTxnTimeout))
		produceInTransaction(ctx, t, open, 1, 0)
		t.Cleanup(func() { // before the client closes (cleanups run last first)
			abortCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := open.EndTransaction(abortCtx, kgo.TryAbort); err != nil {
				t.Errorf("abort the open transaction on %s: %v", server.addr, err)
			}
		})
	}
	// Kafka's CompleteCommit comes after its markers, after EndTxn answered.
	awaitToolTxnComplete(ctx, t, d.kafka)
	outputs := runToolTxns(ctx, t, d.libs, servers)
	ended := time.Now().UnixMilli()
	var tables [2][]toolTable
	for i, server := range servers {
		producers := map[string]string{} // producer ID -> ordinal, over this server's tables in run order
		for j, run := range toolTxnRuns {
			table, err := normaliseTransactionsTable(outputs[i][j], server.node, producers, began, ended)
			if err != nil {
				t.Fatalf("kafka-transactions %s against %s: %v\n%s", run.name, server.addr, err, outputs[i][j])
			}
			tables[i] = append(tables[i], table)
		}
	}
	for j, run := range toolTxnRuns {
		t.Logf("kafka-transactions %s printed, Kafka:\n%smirrord:\n%s", run.name, outputs[0][j], outputs[1][j])
		rows := 2 // both IDs listed
		if strings.HasPrefix(run.name, "describe") {
			rows = 1
		}
		if kafka := tables[0][j]; len(kafka.rows) != rows {
			t.Errorf("kafka-transactions %s: Kafka printed %d rows of the test's IDs, want %d", run.name, len(kafka.rows), rows)
		}
		if got, want := fmt.Sprint(tables[1][j]), fmt.Sprint(tables[0][j]); got != want {
			t.Errorf("kafka-transactions %s: mirrord printed (normalised)\n%s\nKafka printed\n%s", run.name, got, want)
		}
	}
}

// produceInTransaction begins a transaction of client and writes one
// record to each partition of toolTxnTopic, in that order.
func produceInTransaction(ctx context.Context, t *testing.T, client *kgo.Client, partitions ...int32) {
	t.Helper()
	if err := client.BeginTransaction(); err != nil {
		t.Fatalf("begin transaction: %v", err)
	}
	for _, p := range partitions {
		record := &kgo.Record{Topic: toolTxnTopic, Partition: p, Value: []byte(fmt.Sprint(p))}
		if err := client.ProduceSync(ctx, record).FirstErr(); err != nil {
			t.Fatalf("transactional produce to %s-%d: %v", toolTxnTopic, p, err)
		}
	}
}

// awaitToolTxnComplete waits until the committed transactional ID is no
// longer PrepareCommit on server.
func awaitToolTxnComplete(ctx context.Context, t *testing.T, server diffServer) {
	t.Helper()
	s := &txnSession{server: server, sequence: toolTxnTopic, producers: map[string]*diffTxnProducer{}, ordinals: map[int64]int64{}}
	if err := awaitTxnComplete("committed").await(ctx, s); err != nil {
		t.Fatalf("%s of %s: %v", toolTxnCommitted, server.addr, err)
	}
}

// runToolTxns runs every toolTxnRuns against both servers at once (cold
// JVMs: their start is most of the time) and returns the outputs, by
// server, then run.
func runToolTxns(ctx context.Context, t *testing.T, libs string, servers [2]diffServer) [2][]string {
	t.Helper()
	var outputs [2][]string
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, server := range servers {
		outputs[i] = make([]string, len(toolTxnRuns))
		for j, run := range toolTxnRuns {
			wg.Go(func() {
				out, err := kafkatest.RunTool(ctx, libs, nil, transactionsClass, append([]string{"--bootstrap-server", server.addr}, run.args...)...)
				outputs[i][j] = string(out)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("kafka-transactions %s against %s: %w\n%s", run.name, server.addr, err, out))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return outputs
}

// toolTable is a table kafka-transactions printed: its header and the
// rows of the test's transactional IDs, normalised and sorted.
type toolTable struct {
	header []string
	rows   [][]string
}

func (tt toolTable) String() string {
	var b strings.Builder
	for _, row := range append([][]string{tt.header}, tt.rows...) {
		fmt.Fprintf(&b, "%q\n", row)
	}
	return b.String()
}

// toolTimeColumns are the columns of the clock, and toolNodeColumns those
// naming the coordinator.
var (
	toolTimeColumns = []string{"CurrentTransactionStartTimeMs", "TransactionDurationMs"}
	toolNodeColumns = []string{"Coordinator", "CoordinatorId"}
)

// normaliseTransactionsTable parses a table (ToolsUtils.prettyPrintTable:
// a header line, then a line a row, cells padded and ended by a tab),
// keeps the rows of the test's IDs, sorted by ID (Kafka lists the
// transactions of a coordinator in the order of a hash map), and
// normalises: the node as (node); producer IDs as ordinals, by first
// appearance in producers; a time as (time), once it is checked to lie
// between began and ended (a start) or to be at most their difference (a
// duration); partitions sorted (Kafka keeps them in a hash set).
func normaliseTransactionsTable(out string, node int32, producers map[string]string, began, ended int64) (toolTable, error) {
	var table toolTable
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i, line := range lines {
		cells := strings.Split(strings.TrimSuffix(line, "\t"), "\t")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if i == 0 {
			table.header = cells
			continue
		}
		if len(cells) != len(table.header) {
			return table, fmt.Errorf("line %d: %d cells under %d columns", i+1, len(cells), len(table.header))
		}
		if !strings.HasPrefix(cells[slices.Index(table.header, "TransactionalId")], toolTxnTopic+"-") {
			continue // another test's
		}
		table.rows = append(table.rows, cells)
	}
	if table.header == nil || !slices.Contains(table.header, "TransactionalId") {
		return table, fmt.Errorf("no table")
	}
	id := slices.Index(table.header, "TransactionalId")
	slices.SortFunc(table.rows, func(a, b []string) int { return strings.Compare(a[id], b[id]) })
	for _, row := range table.rows {
		for j, column := range table.header {
			cell := &row[j]
			switch {
			case slices.Contains(toolNodeColumns, column) && *cell == fmt.Sprint(node):
				*cell = "(node)"
			case column == "ProducerId":
				if _, ok := producers[*cell]; !ok {
					producers[*cell] = fmt.Sprint(txnProducerIDBase + len(producers))
				}
				*cell = producers[*cell]
			case slices.Contains(toolTimeColumns, column) && *cell != "None":
				ms, err := strconv.ParseInt(*cell, 10, 64)
				low, high := began, ended
				if column == "TransactionDurationMs" {
					low, high = 0, ended-began
				}
				if err != nil || ms < low || ms > high {
					return table, fmt.Errorf("%s %s: not within [%d, %d]", column, *cell, low, high)
				}
				*cell = "(time)"
			case column == "TopicPartitions":
				partitions := strings.Split(*cell, ",")
				slices.Sort(partitions)
				*cell = strings.Join(partitions, ",")
			}
		}
	}
	return table, nil
}
