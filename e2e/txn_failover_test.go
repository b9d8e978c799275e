package e2e

// Transactional producers fail over from Kafka 4.4 to mirrord without a
// restart (issue 16): a franz-go transactional producer and Kafka's Java
// TransactionalMessageCopier work against a Kafka 4.4 broker
// (transaction.version 2, finalized by default on a new cluster) through
// a loopback forwarder that Kafka advertises; mirrord mirrors their
// topics and advertises the same forwarder. The broker is killed, the
// topics are stopped on mirrord, the forwarder moves to mirrord (cutting
// every connection), and both clients, still the same processes and
// clients, must commit again; read_committed on mirrord then holds every
// committed record exactly once and nothing of an aborted transaction.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	txnFailoverDeadline     = 4 * time.Minute
	txnFailoverMirror       = "txf"
	txnFailoverKgoTopic     = "txf-kgo" // franz-go's transactions
	txnFailoverInputTopic   = "txf-in"  // the copier's input
	txnFailoverOutputTopic  = "txf-out" // the copier's output
	txnFailoverPartitions   = 3         // of txf-kgo; the copier's topics have one
	txnFailoverRecords      = 60        // per franz-go transaction
	txnFailoverBefore       = 6         // franz-go transactions on Kafka (every third aborted)
	txnFailoverCommitsAfter = 3         // franz-go commits wanted on mirrord
	txnFailoverAttemptsMax  = 8         // franz-go transactions tried on mirrord
	txnFailoverPrefill      = 1000      // records of the aborted transaction under the copier's input
	txnFailoverFeed         = 300       // input records fed to the copier before, and again after
	txnFailoverWait         = 60 * time.Second
	txnFailoverTraceMax     = 400 // franz-go log lines kept from the failover on
	txnFailoverStderrMax    = 48 << 10
)

// TestInteropTxnFailover: franz-go runs transactions (every third
// aborted) on Kafka, the copier copies what the test feeds it; mirrord
// mirrors the three topics and syncs the copier's group offsets. With
// franz-go's last transaction open (its records acknowledged by Kafka and
// mirrored) and the copier idle with its offsets synced: Kafka is killed,
// the topics stopped, the forwarder moved to mirrord. franz-go goes on
// with its open transaction (a failure is aborted, as an application
// does) and commits new ones on the same client; the copier copies new
// input fed to mirrord. read_committed on mirrord (franz-go and kcat)
// holds each committed franz-go record once at its offset, nothing of an
// aborted transaction, and each input record copied exactly once.
func TestInteropTxnFailover(t *testing.T) {
	t.Parallel()
	libs := kafkaLibs(t)
	kcat := findKcat(t)
	started := time.Now()
	forward := startForwarder(t)
	cluster := startKafkaCluster(t, kafkatest.Options{Brokers: 1, Advertise: func(n *kafkatest.Node) string {
		forward.switchTo(n.Addr)
		return forward.addr()
	}})
	kafka := cluster.Bootstrap()
	ctx, cancel := context.WithTimeout(context.Background(), txnFailoverDeadline)
	defer cancel()
	kafkaVersion, kafkaEpoch := finalizedTransactionVersion(ctx, t, kafka)
	if kafkaVersion != 2 {
		t.Fatalf("Kafka %s finalized transaction.version %d, want 2 (the default of a new cluster)", kafkatest.Version, kafkaVersion)
	}
	topics := map[string]int32{txnFailoverKgoTopic: txnFailoverPartitions, txnFailoverInputTopic: 1, txnFailoverOutputTopic: 1, mirrorConfigsTopic: 1}
	names := slices.Sorted(maps.Keys(topics))
	for _, name := range names {
		createKafkaTopic(ctx, t, kafka, name, topics[name], 1, nil)
	}
	tps := topicPartitions(topics)
	input, output := topicPartition{txnFailoverInputTopic, 0}, topicPartition{txnFailoverOutputTopic, 0}
	prefillAborted(ctx, t, kafka, input, txnFailoverPrefill)

	mirror := startServer(t, "--advertise", forward.addr())
	mirrorVersion, mirrorEpoch := finalizedTransactionVersion(ctx, t, mirror.addr)
	t.Logf("transaction.version finalized: Kafka %d (features epoch %d), mirrord %d (features epoch %d)", kafkaVersion, kafkaEpoch, mirrorVersion, mirrorEpoch)
	startGroupSyncMirror(ctx, t, mirror, txnFailoverMirror, kafka, strings.Join(names, ","), groupSyncInterval)
	waitDescribed(ctx, t, mirror, txnFailoverMirror, func(p describedRow) bool { return p.State == "MIRRORING" })
	checkConfigsSynced(ctx, t, kafka, mirror.addr, mirrorConfigsTopic)

	const group = "txf-copier"
	java := startCopier(t, libs, forward.addr(), txnFailoverInputTopic, txnFailoverOutputTopic, group, "txf-copier")
	producer := newTxnProducer(t, forward.addr(), "txf-kgo")
	fed := feedCopier(ctx, t, newClient(t, forward.addr()), input, 0, txnFailoverFeed)
	for txn := range txnFailoverBefore {
		producer.transaction(ctx, t, txnFailoverRecords, txn%3 != 2)
	}
	java.waitProcessed(ctx, t, fed, txnFailoverWait, "on Kafka")
	waitGroupOffsetSynced(ctx, t, newClient(t, kafka), newClient(t, mirror.addr, forward.dialAround(mirror.addr)), group, input)
	open := producer.begin(ctx, t, txnFailoverRecords)
	waitMirrorCaughtUp(ctx, t, kafka, mirror.addr, tps)

	// The disaster.
	if err := cluster.Kill(cluster.Nodes[0]); err != nil {
		t.Fatal(err)
	}
	forward.switchTo("")
	killed := time.Now()
	out := runMirrorsOK(ctx, t, mirror.addr, "--stop", "--mirror", txnFailoverMirror, "--topics", strings.Join(names, ","))
	if !strings.Contains(out, "stopped: writable") {
		t.Fatalf("--stop: %q", out)
	}
	lastMirrorOffsets(ctx, t, mirror, txnFailoverMirror, tps)
	javaLogFrom := java.stderrSize()
	producer.failedOver()
	forward.switchTo(mirror.addr)
	t.Logf("failed over %v after the start, %v after the kill", time.Since(started).Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))

	producer.finish(ctx, t, open, txnFailoverRecords/2)
	for attempt := 0; producer.commitsAfter < txnFailoverCommitsAfter && attempt < txnFailoverAttemptsMax && ctx.Err() == nil; attempt++ {
		producer.transaction(ctx, t, txnFailoverRecords, true)
	}
	t.Logf("franz-go after the failover: %d commits; errors: %s\nits log from the failover on:\n%s",
		producer.commitsAfter, strings.Join(producer.errorsAfter, "; "), producer.trace.text())
	fed += feedCopier(ctx, t, newClient(t, mirror.addr), input, fed, txnFailoverFeed)
	copied := java.tryWaitProcessed(ctx, t, fed, txnFailoverWait)
	javaLog, _ := java.stderrSince(javaLogFrom, txnFailoverStderrMax)
	t.Logf("copier after the failover (its standard error):\n%s", javaLog)
	if producer.commitsAfter < txnFailoverCommitsAfter {
		t.Errorf("franz-go: %d commits on mirrord in %d attempts, want %d: %s", producer.commitsAfter, txnFailoverAttemptsMax, txnFailoverCommitsAfter, strings.Join(producer.errorsAfter, "; "))
	}
	if copied != "" {
		t.Errorf("copier on mirrord: %s", copied)
	}

	checkCommittedOnce(ctx, t, kcat, mirror.addr, txnFailoverKgoTopic, producer.committed, producer.abortedValues)
	checkCopiedOnce(ctx, t, kcat, mirror.addr, output, fed, java.processed)
	t.Logf("done in %v: franz-go %d records committed in %d transactions (%d after the failover), %d records in aborted ones; copier %d records",
		time.Since(started).Round(time.Millisecond), producer.committed.count(), producer.commits, producer.commitsAfter, len(producer.abortedValues), fed)
}

// finalizedTransactionVersion is the transaction.version addr finalizes
// in ApiVersions (0: none), and the finalized features epoch. (A Java
// client adopts finalized features only from an epoch above the highest
// it has seen.)
func finalizedTransactionVersion(ctx context.Context, t *testing.T, addr string) (int16, int64) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "e2e", "1"
	resp, err := rawRequest(ctx, strings.Split(addr, ",")[0], req)
	if err != nil {
		t.Fatalf("ApiVersions of %s: %v", addr, err)
	}
	versions := resp.(*kmsg.ApiVersionsResponse)
	for _, f := range versions.FinalizedFeatures {
		if f.Name == "transaction.version" {
			return f.MaxVersionLevel, versions.FinalizedFeaturesEpoch
		}
	}
	return 0, versions.FinalizedFeaturesEpoch
}

// prefillAborted writes count records to tp in one aborted transaction:
// offsets the copier counts as its budget and never copies.
func prefillAborted(ctx context.Context, t *testing.T, addr string, tp topicPartition, count int) {
	t.Helper()
	client := newClient(t, addr, kgo.TransactionalID("txf-prefill"))
	defer client.Close()
	if err := client.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	records := make([]*kgo.Record, count)
	for i := range records {
		records[i] = &kgo.Record{Topic: tp.topic, Partition: tp.partition, Value: fmt.Appendf(nil, "prefill-%d", i)}
	}
	if err := produceAll(ctx, client, records, newLedger()); err != nil {
		t.Fatalf("prefill %s: %v", tp, err)
	}
	if err := client.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("prefill %s: abort: %v", tp, err)
	}
}

// copierValue is the value of the input record index.
func copierValue(index int64) string { return fmt.Sprintf("in-%06d", index) }

// feedCopier produces count input records from index from on, and
// returns count.
func feedCopier(ctx context.Context, t *testing.T, client *kgo.Client, tp topicPartition, from, count int64) int64 {
	t.Helper()
	records := make([]*kgo.Record, count)
	for i := range records {
		records[i] = &kgo.Record{Topic: tp.topic, Partition: tp.partition, Value: []byte(copierValue(from + int64(i)))}
	}
	if err := produceAll(ctx, client, records, newLedger()); err != nil {
		t.Fatalf("feed the copier: %v", err)
	}
	return count
}

// waitGroupOffsetSynced waits until mirrord (the client mirror) holds
// Kafka's committed offset of group on tp.
func waitGroupOffsetSynced(ctx context.Context, t *testing.T, kafka, mirror *kgo.Client, group string, tp topicPartition) {
	t.Helper()
	kafkaAdmin, mirrorAdmin := kadm.NewClient(kafka), kadm.NewClient(mirror)
	offsetOf := func(admin *kadm.Client) (int64, error) {
		fetched, err := admin.FetchOffsets(ctx, group)
		if err != nil {
			return -1, err
		}
		o, ok := fetched.Lookup(tp.topic, tp.partition)
		if !ok {
			return -1, nil
		}
		return o.At, o.Err
	}
	reason := pollUntil(ctx, txnFailoverWait, func(context.Context) string {
		want, err := offsetOf(kafkaAdmin)
		if err != nil {
			return "Kafka: " + err.Error()
		}
		got, err := offsetOf(mirrorAdmin)
		if err != nil {
			return "mirrord: " + err.Error()
		}
		if want < 0 || got != want {
			return fmt.Sprintf("group %s %s: mirrord %d, Kafka %d", group, tp, got, want)
		}
		return ""
	})
	if reason != "" {
		t.Fatalf("group offsets not synced within %v: %s", txnFailoverWait, reason)
	}
}

// checkCommittedOnce reads topic read_committed at addr with franz-go
// (each committed record at its offset, as acknowledged) and with kcat
// (every record to the end: each committed value once, nothing else, so
// nothing of an aborted transaction).
func checkCommittedOnce(ctx context.Context, t *testing.T, kcat, addr, topic string, committed *ledger, aborted map[string]bool) {
	t.Helper()
	want := committed.sorted()
	consumeExactly(ctx, t, addr, kgo.ReadCommitted(), want)
	where := map[string]string{}
	for tp, records := range want {
		for _, r := range records {
			where[string(r.Value)] = fmt.Sprintf("%d %d", tp.partition, r.Offset)
		}
	}
	seen := map[string]int{}
	for _, line := range kcatReadCommitted(ctx, t, kcat, addr, topic) {
		at, value, _ := strings.Cut(line, "|")
		switch {
		case aborted[value]:
			t.Errorf("kcat read_committed %s: %q at %s, from an aborted transaction", topic, value, at)
		case where[value] == "":
			t.Errorf("kcat read_committed %s: %q at %s, never produced", topic, value, at)
		case where[value] != at:
			t.Errorf("kcat read_committed %s: %q at %s, acknowledged at %s", topic, value, at, where[value])
		}
		seen[value]++
	}
	for value := range where {
		if seen[value] != 1 {
			t.Errorf("kcat read_committed %s: committed %q read %d times", topic, value, seen[value])
		}
	}
}

// checkCopiedOnce requires the copier's output read_committed at addr
// to hold each of the fed input values exactly once: read to the end by
// kcat, and by franz-go as far as the copier says it committed (the
// input is copied in order; a copier that died does not make it wait).
func checkCopiedOnce(ctx context.Context, t *testing.T, kcat, addr string, output topicPartition, fed, processed int64) {
	t.Helper()
	check := func(reader string, values []string, fed int64) {
		seen := map[string]int{}
		for _, v := range values {
			seen[v]++
		}
		var wrong []string // bounded: examples only
		missing, twice := 0, 0
		for i := range fed {
			switch n := seen[copierValue(i)]; {
			case n == 0:
				missing++
			case n > 1:
				twice++
			}
			if n := seen[copierValue(i)]; n != 1 && len(wrong) < mismatchesShowMax {
				wrong = append(wrong, fmt.Sprintf("%s %d times", copierValue(i), n))
			}
			delete(seen, copierValue(i))
		}
		if missing+twice+len(seen) > 0 {
			t.Errorf("%s read_committed %s: of %d inputs %d not copied, %d copied more than once (%s); %d values are no input",
				reader, output, fed, missing, twice, strings.Join(wrong, ", "), len(seen))
		}
	}
	var values []string
	for _, r := range consume(ctx, t, addr, kgo.ReadCommitted(), map[topicPartition]int{output: int(processed)})[output] {
		values = append(values, string(r.Value))
	}
	check("franz-go", values, processed)
	values = values[:0]
	for _, line := range kcatReadCommitted(ctx, t, kcat, addr, output.topic) {
		_, value, _ := strings.Cut(line, "|")
		values = append(values, value)
	}
	check("kcat", values, fed)
}

// kcatReadCommitted is every record of topic read_committed, to the end,
// as "partition offset|value" lines.
func kcatReadCommitted(ctx context.Context, t *testing.T, kcat, addr, topic string) []string {
	t.Helper()
	out := runKcat(ctx, t, kcat, nil, "-b", addr, "-m", kcatMetadataTimeout, "-C", "-t", topic,
		"-X", "isolation.level=read_committed", "-o", "beginning", "-e", "-q", "-f", "%p %o|%s\n")
	return strings.FieldsFunc(string(out), func(r rune) bool { return r == '\n' })
}
