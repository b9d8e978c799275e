package e2e

// Failover and failback between mirrord processes (DESIGN.md, "Failover
// and failback"): node A is the primary, node B mirrors it (mirror
// a-to-b); stopping the mirror on B makes B's topics writable with A's
// offsets; failback mirrors B back into A (mirror b-to-a on A) after A
// truncates to the last mirror epoch B stored.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	failoverDeadline   = 3 * time.Minute
	failoverRecords    = 400 // per partition, mirrored before the stop
	failoverPartitions = 2
	failoverTopic      = "orders"
)

var failoverTopics = map[string]int32{failoverTopic: failoverPartitions}

// mirrorPair is a primary and the node that mirrors it.
type mirrorPair struct {
	a, b  *server
	maker *recordMaker
	tps   []topicPartition
}

// startMirrorPair starts A with the topic and some records, and B
// mirroring it (a-to-b), caught up.
func startMirrorPair(ctx context.Context, t *testing.T) *mirrorPair {
	t.Helper()
	pair := &mirrorPair{a: startServer(t), b: startServer(t), maker: newRecordMaker(newSeed(t)), tps: topicPartitions(failoverTopics)}
	createTopics(ctx, t, pair.a.addr, failoverTopics)
	for _, tp := range pair.tps {
		produceTo(ctx, t, newClient(t, pair.a.addr, kgo.ProducerBatchCompression(kgo.Lz4Compression())), pair.maker, tp, failoverRecords, newLedger())
	}
	startMirror(ctx, t, pair.b, "a-to-b", pair.a.addr)
	waitMirrorCaughtUp(ctx, t, pair.a.addr, pair.b.addr, pair.tps)
	return pair
}

// startMirror creates mirror name on target from source and starts the
// failover topic.
func startMirror(ctx context.Context, t *testing.T, target *server, name, source string) {
	t.Helper()
	runMirrorsOK(ctx, t, target.addr, "--create", "--mirror", name, "--mirror-config", writeMirrorConfig(t, source))
	runMirrorsOK(ctx, t, target.addr, "--start", "--mirror", name, "--topics", failoverTopic)
}

// stopMirror fails over the topic on node (mirror name) and requires every
// partition STOPPED; it returns the last mirror offsets per partition.
func stopMirror(ctx context.Context, t *testing.T, node *server, name string) map[topicPartition]int64 {
	t.Helper()
	out := runMirrorsOK(ctx, t, node.addr, "--stop", "--mirror", name, "--topics", failoverTopic)
	if !strings.Contains(out, "stopped: writable") {
		t.Fatalf("--stop: %q", out)
	}
	return stoppedPartitions(ctx, t, node, name)
}

// stoppedPartitions reads --describe --json and requires every partition
// of mirror name STOPPED with a last mirror offset; it returns those.
func stoppedPartitions(ctx context.Context, t *testing.T, node *server, name string) map[topicPartition]int64 {
	t.Helper()
	described, out := describeMirror(ctx, t, node.addr, name)
	lme := map[topicPartition]int64{}
	for _, p := range described.Partitions {
		if p.State != "STOPPED" || p.LastMirrorOffset < 0 {
			t.Fatalf("after --stop: %+v, want STOPPED with a last mirror offset\n%s", p, out)
		}
		lme[topicPartition{p.Topic, p.Partition}] = p.LastMirrorOffset
	}
	if len(lme) != failoverPartitions {
		t.Fatalf("after --stop: %d partitions described, want %d\n%s", len(lme), failoverPartitions, out)
	}
	return lme
}

// TestFailoverWritable: B mirrors A, with a transaction left open on A;
// the stop on B makes the topic writable at once: an idempotent and a
// transactional producer write to B, and B's log is A's up to the last
// mirror offset, then the stop's markers, then the new records, offsets
// continuing. read_committed readers of B never see the open
// transaction's records; the records A committed are all there.
func TestFailoverWritable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), failoverDeadline)
	defer cancel()
	pair := startMirrorPair(ctx, t)
	open := newClient(t, pair.a.addr, kgo.TransactionalID("left-open"), kgo.TransactionTimeout(time.Minute))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	openRecords := map[string]bool{}
	for _, tp := range pair.tps {
		r := pair.maker.record(tp.topic, tp.partition, 1_000_000)
		r.Value = fmt.Appendf(nil, "open transaction %s", tp)
		openRecords[string(r.Value)] = true
		if err := produceAll(ctx, open, []*kgo.Record{r}, newLedger()); err != nil {
			t.Fatal(err)
		}
	}
	waitMirrorCaughtUp(ctx, t, pair.a.addr, pair.b.addr, pair.tps)

	// The dry run reports the lag and stops nothing.
	if out := runMirrorsOK(ctx, t, pair.b.addr, "--stop", "--dry-run", "--mirror", "a-to-b", "--topics", failoverTopic); !strings.Contains(out, "Nothing was stopped") {
		t.Errorf("--stop --dry-run: %q", out)
	}
	fromA := readAll(ctx, t, pair.a.addr, pair.tps)
	lme := stopMirror(ctx, t, pair.b, "a-to-b")

	written := newLedger()
	for _, tp := range pair.tps {
		produceTo(ctx, t, newClient(t, pair.b.addr), pair.maker, tp, 50, written)
	}
	txn := newClient(t, pair.b.addr, kgo.TransactionalID("on-b"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, tp := range pair.tps {
		produceTo(ctx, t, txn, pair.maker, tp, 20, written)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("transaction on the former mirror: %v", err)
	}

	fromB := readAll(ctx, t, pair.b.addr, pair.tps)
	for _, tp := range pair.tps {
		a, b := fromA[tp], fromB[tp]
		if lme[tp] != a.highWatermark {
			t.Errorf("%s: last mirror offset %d, A's high watermark %d", tp, lme[tp], a.highWatermark)
		}
		if !bytes.HasPrefix(b.batches, a.batches) {
			t.Errorf("%s: B's log does not start with A's %d bytes (first difference at %d)", tp, len(a.batches), firstDifference(a.batches, b.batches))
		}
		if b.markers["abort"] == 0 {
			t.Errorf("%s: no ABORT marker for the transaction left open on A: markers %v", tp, b.markers)
		}
		if b.lastStableOffset != b.highWatermark {
			t.Errorf("%s: last stable offset %d, high watermark %d: a transaction stays open", tp, b.lastStableOffset, b.highWatermark)
		}
		for _, r := range written.sorted()[tp] {
			if r.Offset <= lme[tp] {
				t.Errorf("%s: record written to B at offset %d, at or below the last mirror offset %d (the stop's marker)", tp, r.Offset, lme[tp])
			}
		}
	}
	checkContinuousLog(ctx, t, pair.b.addr, pair.tps, openRecords)
}

// checkContinuousLog reads B read_committed from the start: offsets only
// grow, nothing of the open transaction shows, and the records written
// after the stop follow A's.
func checkContinuousLog(ctx context.Context, t *testing.T, addr string, tps []topicPartition, hidden map[string]bool) {
	t.Helper()
	counts := map[topicPartition]int{}
	for _, tp := range tps {
		counts[tp] = failoverRecords + 50 + 20
	}
	got := consume(ctx, t, addr, kgo.ReadCommitted(), counts)
	for _, tp := range tps {
		records := got[tp]
		if len(records) != counts[tp] {
			t.Errorf("%s: read_committed read %d records, want %d", tp, len(records), counts[tp])
		}
		for i, r := range records {
			if hidden[string(r.Value)] {
				t.Errorf("%s: read_committed shows the open transaction's record at offset %d", tp, r.Offset)
			}
			if i > 0 && r.Offset <= records[i-1].Offset {
				t.Errorf("%s: offset %d after %d", tp, r.Offset, records[i-1].Offset)
			}
			if i < failoverRecords && r.Offset != int64(i) {
				t.Errorf("%s: mirrored record %d at offset %d", tp, i, r.Offset)
			}
		}
	}
}

// TestFailback runs DESIGN.md's two situations end to end, then switches
// the primary back, in one round trip:
//
//  1. A wrote past what B mirrored (B was paused), then B took over and
//     wrote its own records at the same offsets;
//  2. the offsets line up (both logs end at the same offset) but the
//     epochs differ.
//
// Failback (b-to-a on A) truncates A to the last mirror epoch, keeps what
// it removed in A's truncated/ folder, and mirrors B's records: A ends
// equal to B byte for byte. A mirror loop (starting a-to-b on B while A
// mirrors from B) is refused. Then the primary moves back: stop b-to-a on
// A, write to A, recover a-to-b on B: both end byte-identical.
func TestFailback(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		aExtra, bAfterPID int // records A writes after B paused; B writes after its stop
	}{
		{"A wrote past the mirror", 30, 10},
		{"same offsets, other epochs", 30, 29}, // B's stop marker takes one offset
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), failoverDeadline)
			defer cancel()
			pair := startMirrorPair(ctx, t)
			runMirrorsOK(ctx, t, pair.b.addr, "--pause", "--mirror", "a-to-b", "--topics", failoverTopic)
			for _, tp := range pair.tps {
				produceTo(ctx, t, newClient(t, pair.a.addr), pair.maker, tp, tc.aExtra, newLedger())
			}
			stopMirror(ctx, t, pair.b, "a-to-b")
			for _, tp := range pair.tps {
				produceTo(ctx, t, newClient(t, pair.b.addr), pair.maker, tp, tc.bAfterPID, newLedger())
			}
			aEnds, err := endOffsets(ctx, pair.a.addr, pair.tps)
			if err != nil {
				t.Fatal(err)
			}
			bEnds, err := endOffsets(ctx, pair.b.addr, pair.tps)
			if err != nil {
				t.Fatal(err)
			}
			for _, tp := range pair.tps {
				if same := aEnds[tp] == bEnds[tp]; same != (tc.aExtra == tc.bAfterPID+1) {
					t.Fatalf("%s: A ends at %d, B at %d: not the situation under test", tp, aEnds[tp], bEnds[tp])
				}
			}

			startMirror(ctx, t, pair.a, "b-to-a", pair.b.addr)
			// Aligned first (LOG_ALIGNMENT until then): in the second case
			// the logs end at the same offset before A truncates.
			waitDescribed(ctx, t, pair.a, "b-to-a", func(p describedRow) bool { return p.State == "MIRRORING" })
			waitMirrorCaughtUp(ctx, t, pair.b.addr, pair.a.addr, pair.tps)
			compareMirrored(t, readAll(ctx, t, pair.b.addr, pair.tps), readAll(ctx, t, pair.a.addr, pair.tps))
			checkTruncatedKept(t, pair.a, pair.tps, tc.aExtra)

			// A mirror loop: B may not mirror the topic from A while A
			// mirrors it from B.
			runMirrorsOK(ctx, t, pair.b.addr, "--start", "--mirror", "a-to-b", "--topics", failoverTopic)
			waitDescribed(ctx, t, pair.b, "a-to-b", func(p describedRow) bool {
				return p.State == "FAILED" && strings.Contains(p.Error, "mirror loop")
			})

			// The primary moves back to A.
			stopMirror(ctx, t, pair.a, "b-to-a")
			for _, tp := range pair.tps {
				produceTo(ctx, t, newClient(t, pair.a.addr), pair.maker, tp, 15, newLedger())
			}
			runMirrorsOK(ctx, t, pair.b.addr, "--recover", "--mirror", "a-to-b", "--topics", failoverTopic)
			waitDescribed(ctx, t, pair.b, "a-to-b", func(p describedRow) bool { return p.State == "MIRRORING" })
			waitMirrorCaughtUp(ctx, t, pair.a.addr, pair.b.addr, pair.tps)
			compareMirrored(t, readAll(ctx, t, pair.a.addr, pair.tps), readAll(ctx, t, pair.b.addr, pair.tps))
		})
	}
}

// checkTruncatedKept: A's truncated/ folder holds, per partition, the
// batches failback removed: the records A wrote after B paused.
func checkTruncatedKept(t *testing.T, a *server, tps []topicPartition, records int) {
	t.Helper()
	for _, tp := range tps {
		matches, err := filepath.Glob(filepath.Join(a.dataDir, "truncated", fmt.Sprintf("%s-%d", tp.topic, tp.partition), "*.batches"))
		if err != nil || len(matches) != 1 {
			t.Errorf("%s: truncated batch files %v (%v), want one", tp, matches, err)
			continue
		}
		data, err := os.ReadFile(matches[0])
		if err != nil {
			t.Fatal(err)
		}
		kept := storedPartition{codecs: map[int8]int{}, markers: map[string]int{}}
		if _, err := kept.addBatches(data, 0); err != nil || len(kept.batches) != len(data) {
			t.Errorf("%s: %s is not whole batches: %v", tp, matches[0], err)
			continue
		}
		count := 0
		for rest := kept.batches; len(rest) >= batchHeaderBytes; {
			size := 12 + int(int32(beUint32(rest[batchLengthAt:])))
			count += int(int32(beUint32(rest[57:])))
			rest = rest[size:]
		}
		if count != records {
			t.Errorf("%s: %s keeps %d records, want the %d A wrote past the mirror", tp, matches[0], count, records)
		}
	}
}

// waitDescribed polls --describe --json until every partition of mirror
// name satisfies ok.
func waitDescribed(ctx context.Context, t *testing.T, node *server, name string, ok func(describedRow) bool) {
	t.Helper()
	outer := ctx // each CLI run gets its own time, not what is left of the poll's
	reason := pollUntil(ctx, mirrorCatchUpWait, func(context.Context) string {
		result := runMirrors(outer, t, node.addr, "--describe", "--mirror", name, "--json")
		if result.exit != 0 {
			return result.stderr
		}
		out := result.stdout
		var described describeJSON
		if err := json.Unmarshal([]byte(out), &described); err != nil {
			return err.Error()
		}
		if len(described.Partitions) == 0 {
			return "no partitions"
		}
		for _, p := range described.Partitions {
			if !ok(p) {
				return fmt.Sprintf("%+v", p)
			}
		}
		return ""
	})
	if reason != "" {
		t.Fatalf("mirror %s on %s: not as expected within %v: %s", name, node.addr, mirrorCatchUpWait, reason)
	}
}

// TestMirrorsStartedTowardsEachOther: after a failover, both nodes are
// told at once to mirror the topic from the other. Each one's alignment
// may ask the other while the other asks it: both must answer at once (no
// node waits on its own alignment to answer), and never may both mirror:
// either one side won (MIRRORING) and the other refuses the loop, or both
// refuse it.
func TestMirrorsStartedTowardsEachOther(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), failoverDeadline)
	defer cancel()
	pair := startMirrorPair(ctx, t)
	stopMirror(ctx, t, pair.b, "a-to-b")
	runMirrorsOK(ctx, t, pair.a.addr, "--create", "--mirror", "b-to-a", "--mirror-config", writeMirrorConfig(t, pair.b.addr))
	started := time.Now()
	done := make(chan mirrorsResult, 1)
	go func() {
		done <- runMirrors(ctx, t, pair.a.addr, "--start", "--mirror", "b-to-a", "--topics", failoverTopic)
	}()
	runMirrorsOK(ctx, t, pair.b.addr, "--start", "--mirror", "a-to-b", "--topics", failoverTopic)
	if result := <-done; result.exit != 0 {
		t.Fatalf("%s: exit %d: %s", result.command(), result.exit, result.stderr)
	}
	loop := func(p describedRow) bool { return p.State == "FAILED" && strings.Contains(p.Error, "mirror loop") }
	settled := func(p describedRow) bool { return p.State == "MIRRORING" || loop(p) }
	waitDescribed(ctx, t, pair.a, "b-to-a", settled)
	waitDescribed(ctx, t, pair.b, "a-to-b", settled)
	if took := time.Since(started); took > mirrorCLIWait {
		t.Errorf("settled after %v: the alignments waited on each other", took)
	}
	refused := 0
	for _, side := range []struct {
		node *server
		name string
	}{{pair.a, "b-to-a"}, {pair.b, "a-to-b"}} {
		all := true
		described, _ := describeMirror(ctx, t, side.node.addr, side.name)
		for _, p := range described.Partitions {
			all = all && loop(p)
		}
		if all {
			refused++
		}
	}
	if refused == 0 {
		t.Fatalf("both nodes mirror the topic from each other: a mirror loop was not refused")
	}
}
