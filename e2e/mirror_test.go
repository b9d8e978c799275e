package e2e

// Mirroring between real processes: a `mirrord serve` source, a `mirrord
// serve` mirror, and the `mirrord mirrors` CLI run as a process against
// the mirror. The mirror is killed (SIGKILL) and restarted on its data
// directory while the source takes writes; it must resume by itself from
// the mirror definitions it persisted, and end byte for byte equal to the
// source.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	mirrorTestDeadline      = 3 * time.Minute // beside another test (t.Parallel) on a loaded machine
	mirrorKillRounds        = 6
	mirrorKillDelayMin      = 100 * time.Millisecond // mirroring time before a kill
	mirrorKillDelayMax      = 900 * time.Millisecond
	mirrorProgressWait      = 20 * time.Second // a restarted mirror fetches again
	mirrorCatchUpWait       = 30 * time.Second // the source stopped: the mirror holds all of it
	mirrorPollInterval      = 25 * time.Millisecond
	mirrorCLIWait           = 20 * time.Second // one `mirrord mirrors` run
	mirrorCLIDescribeMax    = 10 * time.Second // describe of an unreachable source answers within this
	mirrorProduceRoundsMax  = 3000
	mirrorProduceRoundsMin  = 20                    // the rounds between transactions have used every codec
	mirrorProduceEvery      = 10 * time.Millisecond // producer pacing: one round per tick at most
	mirrorRoundRecords      = 25                    // records per round, over every partition
	mirrorTransactionRounds = 4                     // a transaction spans 4 rounds: the first and last write in it
	mirrorKcatTimeout       = "5000"                // librdkafka message.timeout.ms for the refused produce
)

// mirrorTopics are the source topics of TestMirrorSurvivesKill; the CLI
// starts them as 'orders,pay-.*' (a name and a pattern).
var mirrorTopics = map[string]int32{"orders": 3, "pay-eu": 2}

// TestMirrorSurvivesKill: a mirror created and started with the CLI copies
// two topics while a producer writes to the source with every codec,
// idempotently and in committed and aborted transactions. The mirror
// process is killed (SIGKILL) and restarted on the same data directory
// and port at seeded random moments; each time it resumes by itself and
// never loses what it served before the kill. Once the producer stops and
// the mirror caught up, every partition holds the source's batches byte
// for byte from the log start to the high watermark (same offsets, last
// stable offset, topic ID), and kgo consumers read the same records at the
// same offsets from both, read_committed and read_uncommitted.
func TestMirrorSurvivesKill(t *testing.T) {
	t.Parallel()
	seed := newSeed(t)
	random := rand.New(rand.NewPCG(seed, seed^0x6d6972726f72))
	ctx, cancel := context.WithTimeout(context.Background(), mirrorTestDeadline)
	defer cancel()
	started := time.Now()
	source := startServer(t)
	createTopics(ctx, t, source.addr, mirrorTopics)
	tps := topicPartitions(mirrorTopics)
	producer := startMirrorProducer(ctx, t, source.addr, seed, tps)
	defer producer.halt()

	target := startServer(t)
	config := writeMirrorConfig(t, source.addr)
	runMirrorsOK(ctx, t, target.addr, "--create", "--mirror", "m", "--mirror-config", config)
	if out := runMirrorsOK(ctx, t, target.addr, "--start", "--mirror", "m", "--topics", "orders,pay-.*"); !strings.Contains(out, "topic orders: start requested") {
		t.Errorf("--start: output %q does not confirm topic orders", out)
	}
	waitMirrorAdvances(ctx, t, target, tps, nil)
	t.Logf("mirroring after %v", time.Since(started).Round(time.Millisecond))

	address := target.addr
	for round := range mirrorKillRounds {
		delay := mirrorKillDelayMin + time.Duration(random.Int64N(int64(mirrorKillDelayMax-mirrorKillDelayMin)))
		select {
		case <-ctx.Done():
			t.Fatalf("kill round %d: %v", round, ctx.Err())
		case <-time.After(delay):
		}
		beforeKill, err := endOffsets(ctx, target.addr, tps)
		if err != nil {
			t.Fatalf("kill round %d: mirror end offsets: %v", round, err)
		}
		target.kill()
		target.start()
		if target.addr != address {
			t.Fatalf("kill round %d: restarted on %s, not on its address %s", round, target.addr, address)
		}
		atRestart := waitMirrorAdvances(ctx, t, target, tps, beforeKill)
		t.Logf("kill round %d after %v: mirror end offsets %v at the kill, %v at the restart", round, delay.Round(time.Millisecond), beforeKill, atRestart)
	}

	producer.finish(t)
	t.Logf("source: %d committed, %d aborted, %d non-transactional records in %d rounds; stopped after %v",
		producer.committed.count(), producer.aborted.count(), producer.plain.count(), producer.rounds, time.Since(started).Round(time.Millisecond))
	sourceEnds := waitMirrorCaughtUp(ctx, t, source.addr, target.addr, tps)
	t.Logf("caught up at %v after %v", sourceEnds, time.Since(started).Round(time.Millisecond))

	t.Run("raw", func(t *testing.T) {
		want, got := readAll(ctx, t, source.addr, tps), readAll(ctx, t, target.addr, tps)
		checkMirrorWorkload(t, want)
		compareMirrored(t, want, got)
	})
	t.Run("topic-ids", func(t *testing.T) {
		want, got := topicIDs(ctx, t, source.addr, mirrorTopics), topicIDs(ctx, t, target.addr, mirrorTopics)
		for topic, id := range want {
			if got[topic] != id {
				t.Errorf("%s: topic ID %x on the mirror, %x on the source", topic, got[topic], id)
			}
		}
	})
	for _, isolation := range []kgo.IsolationLevel{kgo.ReadCommitted(), kgo.ReadUncommitted()} {
		t.Run("consume/"+isolationName(isolation), func(t *testing.T) {
			want := merge(producer.committed, producer.plain)
			if isolation == kgo.ReadUncommitted() {
				want = merge(producer.committed, producer.aborted, producer.plain)
			}
			counts := map[topicPartition]int{}
			for _, tp := range tps {
				counts[tp] = len(want[tp])
			}
			fromSource := consume(ctx, t, source.addr, isolation, counts)
			compareRecords(t, want, fromSource)
			compareRecords(t, fromSource, consume(ctx, t, target.addr, isolation, counts))
		})
	}
	t.Run("describe", func(t *testing.T) { checkDescribedCaughtUp(ctx, t, target.addr, source.addr, sourceEnds) })
	t.Logf("done after %v", time.Since(started).Round(time.Millisecond))
}

// TestMirrorCLIErrors: what an operator sees when a mirror command cannot
// do what it was asked, from the CLI process: a missing mirror and an
// unknown config key are one-line errors naming them with a non-zero
// exit; a mirror of an unreachable source is refused at --create with a
// one-line error naming the address. (What a mirror topic refuses:
// mirror_guard_test.go.)
func TestMirrorCLIErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), mirrorTestDeadline)
	defer cancel()
	target := startServer(t)

	t.Run("describe-missing", func(t *testing.T) {
		result := runMirrors(ctx, t, target.addr, "--describe", "--mirror", "missing")
		result.wantOneLineError(t, `"missing"`)
	})
	t.Run("create-unknown-key", func(t *testing.T) {
		config := writeProperties(t, "bootstrap.servers=127.0.0.1:1\nfetch.wait.max.msec=100\n")
		result := runMirrors(ctx, t, target.addr, "--create", "--mirror", "bad", "--mirror-config", config)
		result.wantOneLineError(t, "fetch.wait.max.msec")
		if out := runMirrorsOK(ctx, t, target.addr, "--list"); strings.Contains(out, "bad") {
			t.Errorf("--list after a failed --create shows the mirror:\n%s", out)
		}
	})
	t.Run("unreachable-source", func(t *testing.T) {
		closed := freeAddress(t) // nothing listens there
		result := runMirrors(ctx, t, target.addr, "--create", "--mirror", "nowhere", "--mirror-config", writeMirrorConfig(t, closed))
		if result.took > mirrorCLIDescribeMax {
			t.Errorf("--create of a mirror of an unreachable source took %v (want within %v)", result.took, mirrorCLIDescribeMax)
		}
		result.wantOneLineError(t, closed)
		if out := runMirrorsOK(ctx, t, target.addr, "--list"); strings.Contains(out, "nowhere") {
			t.Errorf("--list after a refused --create shows the mirror:\n%s", out)
		}
	})
}

// mirrorProducer writes to the source until finished, in rounds of
// records over every partition. A transaction (committed or aborted,
// seeded) spans mirrorTransactionRounds rounds: it writes in the first
// and the last, which ends it, and idempotent clients, one per codec in
// turn, write the rounds between. So a transaction is open most of the
// time, and a kill of the mirror often finds one whose records it holds
// without the marker. Stopping ends the open transaction first.
type mirrorProducer struct {
	committed, aborted, plain *ledger
	stop                      chan struct{}
	stopOnce                  sync.Once
	done                      chan error // the run's result, once
	rounds                    int        // rounds produced, valid after finish
}

// openTransaction is the producer's transaction in progress.
type openTransaction struct {
	commit  bool
	written *ledger
}

func startMirrorProducer(ctx context.Context, t *testing.T, addr string, seed uint64, tps []topicPartition) *mirrorProducer {
	t.Helper()
	clients := make([]*kgo.Client, len(codecs))
	for i, c := range codecs {
		clients[i] = newClient(t, addr, kgo.ProducerBatchCompression(c.codec))
	}
	transactional := newClient(t, addr, kgo.TransactionalID(fmt.Sprintf("e2e-mirror-%d", seed)),
		kgo.TransactionTimeout(transactionTimeout), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	p := &mirrorProducer{committed: newLedger(), aborted: newLedger(), plain: newLedger(), stop: make(chan struct{}), done: make(chan error, 1)}
	maker := newRecordMaker(seed)
	go func() {
		rounds, err := p.run(ctx, clients, transactional, maker, tps)
		p.rounds = rounds
		p.done <- err
	}()
	return p
}

func (p *mirrorProducer) run(ctx context.Context, clients []*kgo.Client, transactional *kgo.Client, maker *recordMaker, tps []topicPartition) (int, error) {
	ticker := time.NewTicker(mirrorProduceEvery)
	defer ticker.Stop()
	var txn *openTransaction
	for round := range mirrorProduceRoundsMax {
		// A halt is honoured once the rounds have used every codec: on a
		// loaded machine the kill rounds can end before that.
		stop := p.stop
		if round < mirrorProduceRoundsMin {
			stop = nil
		}
		select {
		case <-stop:
			return round, p.endTransaction(ctx, transactional, txn)
		case <-ctx.Done():
			return round, ctx.Err()
		case <-ticker.C:
		}
		records := make([]*kgo.Record, mirrorRoundRecords)
		for i := range records {
			tp := tps[(round+i)%len(tps)]
			records[i] = maker.record(tp.topic, tp.partition, round*mirrorRoundRecords+i)
		}
		var err error
		switch round % mirrorTransactionRounds {
		case 0:
			if err = transactional.BeginTransaction(); err == nil {
				// Every third transaction aborts, the others commit: the
				// rounds the producer always runs hold both (a coin of 2 in 3
				// aborted all seven of one run's).
				txn = &openTransaction{commit: (round/mirrorTransactionRounds)%3 != 2, written: newLedger()}
				err = produceAll(ctx, transactional, records, txn.written)
			}
		case mirrorTransactionRounds - 1:
			if err = produceAll(ctx, transactional, records, txn.written); err == nil {
				err = p.endTransaction(ctx, transactional, txn)
				txn = nil
			}
		default:
			err = produceAll(ctx, clients[round%len(clients)], records, p.plain)
		}
		if err != nil {
			return round, fmt.Errorf("produce round %d: %w", round, err)
		}
	}
	return mirrorProduceRoundsMax, p.endTransaction(ctx, transactional, txn)
}

// endTransaction commits or aborts txn (nil: none is open); its records
// go to the committed or aborted ledger once it ended as asked.
func (p *mirrorProducer) endTransaction(ctx context.Context, client *kgo.Client, txn *openTransaction) error {
	if txn == nil {
		return nil
	}
	if err := client.EndTransaction(ctx, kgo.TransactionEndTry(txn.commit)); err != nil {
		return fmt.Errorf("end transaction (commit %v): %w", txn.commit, err)
	}
	target := p.aborted
	if txn.commit {
		target = p.committed
	}
	for _, records := range txn.written.sorted() {
		for _, r := range records {
			target.add(r)
		}
	}
	return nil
}

// halt asks the producer to stop after its current round.
func (p *mirrorProducer) halt() { p.stopOnce.Do(func() { close(p.stop) }) }

// finish stops the producer and requires that it never failed.
func (p *mirrorProducer) finish(t *testing.T) {
	t.Helper()
	p.halt()
	if err := <-p.done; err != nil { // bounded: the context and kgo's timeouts
		t.Fatalf("source producer: %v", err)
	}
	if p.rounds < mirrorProduceRoundsMin {
		t.Fatalf("source producer: %d rounds, want at least %d", p.rounds, mirrorProduceRoundsMin)
	}
}

// topicPartitions lists every partition of topics, sorted.
func topicPartitions(topics map[string]int32) []topicPartition {
	set := map[topicPartition]bool{}
	for topic, partitions := range topics {
		for p := range partitions {
			set[topicPartition{topic, p}] = true
		}
	}
	return sortedPartitions(set)
}

// writeMirrorConfig writes a mirror config of the source at bootstrap,
// with fast metadata refreshes, long polls and retries for tests.
func writeMirrorConfig(t *testing.T, bootstrap string) string {
	t.Helper()
	return writeProperties(t, fmt.Sprintf(`# e2e mirror of %[1]s
bootstrap.servers=%[1]s
mirror.metadata.refresh.interval.ms=500
fetch.wait.max.ms=100
mirror.failed.retry.initial.backoff.ms=20
mirror.failed.retry.max.backoff.ms=500
`, bootstrap))
}

func writeProperties(t *testing.T, text string) string {
	t.Helper()
	file, err := os.CreateTemp(t.TempDir(), "mirror-*.properties")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteString(text); err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(file.Name())
}

// mirrorsResult is what one `mirrord mirrors` process did.
type mirrorsResult struct {
	args           []string
	stdout, stderr string
	exit           int
	took           time.Duration
}

// runMirrors runs `mirrord mirrors --bootstrap-server addr args...`,
// bounded by mirrorCLIWait.
func runMirrors(ctx context.Context, t *testing.T, addr string, args ...string) mirrorsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, mirrorCLIWait)
	defer cancel()
	args = append([]string{"mirrors", "--bootstrap-server", addr}, args...)
	cmd := exec.CommandContext(ctx, mirrordBinary, args...)
	if _, set := os.LookupEnv("GORACE"); !set {
		// A race-enabled binary sleeps 1 s at a normal exit (for late
		// reports) by default; the CLI's goroutines have ended by then.
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=50")
	}
	var stdout, stderr boundedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	started := time.Now()
	err := cmd.Run()
	result := mirrorsResult{args: args, stdout: stdout.String(), stderr: stderr.String(), took: time.Since(started)}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s: no answer within %v\nstderr:\n%s", result.command(), mirrorCLIWait, result.stderr)
	case errors.As(err, &exit):
		result.exit = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", result.command(), err)
	}
	if strings.Contains(result.stderr, "WARNING: DATA RACE") {
		t.Errorf("%s: the race detector reported a data race:\n%s", result.command(), result.stderr)
	}
	return result
}

// runMirrorsOK runs the CLI, requires exit 0 and no standard error, and
// returns its standard output.
func runMirrorsOK(ctx context.Context, t *testing.T, addr string, args ...string) string {
	t.Helper()
	result := runMirrors(ctx, t, addr, args...)
	if result.exit != 0 || result.stderr != "" {
		t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", result.command(), result.exit, result.stdout, result.stderr)
	}
	return result.stdout
}

func (r mirrorsResult) command() string { return "mirrord " + strings.Join(r.args, " ") }

// wantOneLineError requires a non-zero exit, nothing on standard output,
// and one line on standard error that contains want.
func (r mirrorsResult) wantOneLineError(t *testing.T, want string) {
	t.Helper()
	message := strings.TrimSuffix(r.stderr, "\n")
	if r.exit == 0 || r.stdout != "" || message == "" || strings.Contains(message, "\n") || !strings.Contains(message, want) {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want a non-zero exit and one line naming %s", r.command(), r.exit, r.stdout, r.stderr, want)
	}
}

// describeJSON is the part of `--describe --json` the tests read.
type describeJSON struct {
	Mirrors []struct {
		Mirror          string `json:"mirror"`
		SourceBootstrap string `json:"sourceBootstrap"`
		SourceClusterID string `json:"sourceClusterId"`
	} `json:"mirrors"`
	Partitions []describedRow `json:"partitions"`
}

// describedRow is one partition of --describe --json.
type describedRow struct {
	Mirror              string `json:"mirror"`
	Topic               string `json:"topic"`
	Partition           int32  `json:"partition"`
	State               string `json:"state"`
	SourceHighWatermark int64  `json:"sourceHighWatermark"`
	LogEndOffset        int64  `json:"logEndOffset"`
	Lag                 int64  `json:"lag"`
	Error               string `json:"error"`
	LastMirrorOffset    int64  `json:"lastMirrorOffset"`
}

// describeMirror runs --describe --mirror name --json on addr and
// returns it parsed, and as printed.
func describeMirror(ctx context.Context, t *testing.T, addr, name string) (describeJSON, string) {
	t.Helper()
	out := runMirrorsOK(ctx, t, addr, "--describe", "--mirror", name, "--json")
	var described describeJSON
	if err := json.Unmarshal([]byte(out), &described); err != nil {
		t.Fatalf("--describe --json: %v\n%s", err, out)
	}
	return described, out
}

// checkDescribedCaughtUp: --describe --json shows every partition
// MIRRORING at the source's end, without lag or error, and the source's
// address.
func checkDescribedCaughtUp(ctx context.Context, t *testing.T, addr, sourceAddr string, sourceEnds map[topicPartition]int64) {
	t.Helper()
	described, out := describeMirror(ctx, t, addr, "m")
	if len(described.Mirrors) != 1 || described.Mirrors[0].SourceBootstrap != sourceAddr || described.Mirrors[0].SourceClusterID == "" {
		t.Errorf("--describe --json: mirrors %+v, want m of %s with the source's cluster ID", described.Mirrors, sourceAddr)
	}
	seen := map[topicPartition]bool{}
	for _, p := range described.Partitions {
		tp := topicPartition{p.Topic, p.Partition}
		end, ok := sourceEnds[tp]
		seen[tp] = true
		if !ok || p.State != "MIRRORING" || p.LogEndOffset != end || p.SourceHighWatermark != end || p.Lag != 0 || p.Error != "" {
			t.Errorf("--describe --json: %+v; want MIRRORING at the source's end %d without lag or error", p, end)
		}
	}
	if len(seen) != len(sourceEnds) {
		t.Errorf("--describe --json: partitions %v, want %d\n%s", seen, len(sourceEnds), out)
	}
}

// endOffsets asks addr for the high watermark (ListOffsets latest,
// read_uncommitted) of each partition in one raw request.
func endOffsets(ctx context.Context, addr string, tps []topicPartition) (map[topicPartition]int64, error) {
	if strings.Contains(addr, ",") { // a Kafka cluster: ask each partition's leader
		out := make(map[topicPartition]int64, len(tps))
		for _, tp := range tps {
			leader, err := leaderAddress(ctx, addr, tp)
			if err != nil {
				return nil, err
			}
			one, err := endOffsets(ctx, leader, []topicPartition{tp})
			if err != nil {
				return nil, err
			}
			out[tp] = one[tp]
		}
		return out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := dialRaw(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.close()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 4, -1
	index := map[string]int{}
	for _, tp := range tps {
		i, ok := index[tp.topic]
		if !ok {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = tp.topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			index[tp.topic] = i
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = tp.partition, -1, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	kresp, err := c.request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("ListOffsets: %w", err)
	}
	out := make(map[topicPartition]int64, len(tps))
	for _, rt := range kresp.(*kmsg.ListOffsetsResponse).Topics {
		for _, rp := range rt.Partitions {
			tp := topicPartition{rt.Topic, rp.Partition}
			if rp.ErrorCode != 0 {
				return nil, fmt.Errorf("ListOffsets %s: error code %d", tp, rp.ErrorCode)
			}
			out[tp] = rp.Offset
		}
	}
	if len(out) != len(tps) {
		return nil, fmt.Errorf("ListOffsets: %d partitions answered, %d asked", len(out), len(tps))
	}
	return out, nil
}

// pollUntil calls check every mirrorPollInterval until it returns "" or
// wait passes; then it returns what check said last.
func pollUntil(ctx context.Context, wait time.Duration, check func(context.Context) string) string {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	ticker := time.NewTicker(mirrorPollInterval)
	defer ticker.Stop()
	last := ""
	for {
		reason := check(ctx)
		if reason == "" {
			return ""
		}
		if ctx.Err() == nil || last == "" { // not the deadline's own error
			last = reason
		}
		select {
		case <-ctx.Done():
			return last
		case <-ticker.C:
		}
	}
}

// failWithDescribe fails the test with what the mirror's --describe shows.
func failWithDescribe(ctx context.Context, t *testing.T, addr string, format string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mirrorCLIWait)
	defer cancel()
	described := runMirrors(ctx, t, addr, "--describe")
	t.Fatalf(format+"\nmirrord mirrors --describe (exit %d):\n%s%s", append(args, described.exit, described.stdout, described.stderr)...)
}

// waitMirrorAdvances waits until every partition on the mirror has moved
// past where it was when it answered first (a restarted mirror resumed by
// itself), and requires that first answer to be at or past floor (what
// the mirror served before a kill: a kill loses nothing it served). It
// returns that first answer.
func waitMirrorAdvances(ctx context.Context, t *testing.T, target *server, tps []topicPartition, floor map[topicPartition]int64) map[topicPartition]int64 {
	t.Helper()
	var first map[topicPartition]int64
	reason := pollUntil(ctx, mirrorProgressWait, func(ctx context.Context) string {
		ends, err := endOffsets(ctx, target.addr, tps)
		if err != nil {
			return err.Error()
		}
		if first == nil {
			first = ends
			for _, tp := range tps {
				if ends[tp] < floor[tp] {
					t.Fatalf("%s: mirror high watermark %d after the restart, %d before the kill", tp, ends[tp], floor[tp])
				}
			}
			return "first answer"
		}
		for _, tp := range tps {
			if ends[tp] <= first[tp] {
				return fmt.Sprintf("%s still at %d", tp, ends[tp])
			}
		}
		return ""
	})
	if reason != "" {
		failWithDescribe(ctx, t, target.addr, "the mirror does not fetch within %v: %s", mirrorProgressWait, reason)
	}
	return first
}

// waitMirrorCaughtUp waits until the mirror's high watermarks are the
// (no longer moving) source's, and returns them.
func waitMirrorCaughtUp(ctx context.Context, t *testing.T, sourceAddr, targetAddr string, tps []topicPartition) map[topicPartition]int64 {
	t.Helper()
	var want map[topicPartition]int64
	reason := pollUntil(ctx, mirrorCatchUpWait, func(ctx context.Context) string {
		var err error
		if want, err = endOffsets(ctx, sourceAddr, tps); err != nil {
			return "source: " + err.Error()
		}
		got, err := endOffsets(ctx, targetAddr, tps)
		if err != nil {
			return "mirror: " + err.Error()
		}
		for _, tp := range tps {
			if got[tp] != want[tp] {
				return fmt.Sprintf("%s: mirror at %d, source at %d", tp, got[tp], want[tp])
			}
		}
		return ""
	})
	if reason != "" {
		failWithDescribe(ctx, t, targetAddr, "the mirror does not catch up within %v: %s", mirrorCatchUpWait, reason)
	}
	return want
}

// compareMirrored requires each mirror partition to hold the source's
// batches byte for byte, with the same log start, high watermark and last
// stable offset.
func compareMirrored(t *testing.T, source, mirror map[topicPartition]storedPartition) {
	t.Helper()
	for _, tp := range sortedPartitions(source) {
		s, m := source[tp], mirror[tp]
		if m.logStartOffset != s.logStartOffset || m.highWatermark != s.highWatermark || m.lastStableOffset != s.lastStableOffset {
			t.Errorf("%s: mirror (logStart %d, highWatermark %d, lastStable %d), source (%d, %d, %d)", tp,
				m.logStartOffset, m.highWatermark, m.lastStableOffset, s.logStartOffset, s.highWatermark, s.lastStableOffset)
		}
		if !bytes.Equal(m.batches, s.batches) {
			t.Errorf("%s: mirror has %d bytes in %d batches, source %d bytes in %d batches; first difference at byte %d",
				tp, len(m.batches), m.batchCount, len(s.batches), s.batchCount, firstDifference(m.batches, s.batches))
		}
	}
}

// checkMirrorWorkload: the source holds what the test means to mirror:
// batches of several codecs, transactional batches, commit and abort
// markers.
func checkMirrorWorkload(t *testing.T, source map[topicPartition]storedPartition) {
	t.Helper()
	codecsSeen, markers, transactional := map[int8]bool{}, map[string]int{}, 0
	for _, p := range source {
		for codec := range p.codecs {
			codecsSeen[codec] = true
		}
		for kind, n := range p.markers {
			markers[kind] += n
		}
		transactional += p.transactional
	}
	if len(codecsSeen) < len(codecs) || markers["commit"] == 0 || markers["abort"] == 0 || transactional == 0 {
		t.Errorf("source workload: codecs %v, markers %v, %d transactional batches; want every codec, commits and aborts", codecsSeen, markers, transactional)
	}
}

// topicIDs reads the topics' IDs from addr's metadata.
func topicIDs(ctx context.Context, t *testing.T, addr string, topics map[string]int32) map[string]kadm.TopicID {
	t.Helper()
	client, err := kgo.NewClient(seeds(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	names := make([]string, 0, len(topics))
	for name := range topics {
		names = append(names, name)
	}
	details, err := kadm.NewClient(client).ListTopics(ctx, names...)
	if err != nil {
		t.Fatalf("metadata of %s: %v", addr, err)
	}
	ids := map[string]kadm.TopicID{}
	for _, name := range names {
		detail, ok := details[name]
		if !ok || detail.Err != nil || detail.ID == (kadm.TopicID{}) || int32(len(detail.Partitions)) != topics[name] {
			t.Fatalf("metadata of %s: topic %s: %+v", addr, name, detail)
		}
		ids[name] = detail.ID
	}
	return ids
}

// runKcatFailing runs kcat expecting it to fail, and returns its standard
// error and its exit error. Not exiting within kcatWait fails the test.
func runKcatFailing(ctx context.Context, t *testing.T, kcat string, stdin []byte, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, kcatWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr boundedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kcat %s: no exit within %v\nstderr:\n%s", strings.Join(args, " "), kcatWait, stderr.Bytes())
	}
	return stderr.Bytes(), err
}
