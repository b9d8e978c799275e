package e2e

// The interop suite: mirrord mirrors from real Apache Kafka brokers
// (kafkatest: KRaft, from the Maven jars, on loopback), and Kafka's own
// clients read the mirror. Per partition, the raw batches and topic IDs
// from Kafka and from mirrord must be identical, and kafka-console-consumer
// (Java), kcat (librdkafka), kafka-get-offsets, ListOffsets and
// OffsetForLeaderEpoch must answer the same from both.
//
// Run with `make interop`; `make test` runs it too (CI=true makes missing
// jars fail instead of skip).

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// interopDeadline bounds a test: the suite's tests run in parallel,
	// two at once, sharing a loaded 2-core machine.
	interopDeadline       = 10 * time.Minute
	interopProgressWait   = 2 * time.Minute // the producer's, the mirror's, an election's progress; beside another test
	interopRecords        = 3000            // per codec topic, before and again while mirroring
	interopCompactKeys    = 40
	interopCompactRounds  = 400 // bounded wait for Kafka's cleaner, one small produce per poll
	interopCompactedWait  = 60 * time.Second
	interopPerfRecords    = "20000"
	interopTrimBefore     = 500  // it-trimmed log start moved before the mirror starts
	interopTrimAfter      = 1200 // and again while mirroring
	interopMirrorPattern  = "it-.*"
	interopTimestampProbe = 3 // ListOffsets by timestamp: this many record timestamps per partition
	// kcatEOFFetchWaitMs: kcat -e exits at the end of the partition, which
	// its first fetch there (empty) tells after the fetch's max wait;
	// librdkafka's default, 500 ms, made 80-odd kcat runs of a check
	// take 48 s. The records fetched and printed are the same.
	kcatEOFFetchWaitMs = "10"
)

// interopMirrorConfig is the mirror config of a Kafka source for tests.
func interopMirrorConfig(t *testing.T, bootstrap string) string {
	return writeMirrorConfig(t, bootstrap)
}

// TestInteropKafkaSingleBroker mirrors from a one-node Kafka 4.4: five
// codec topics written by idempotent kgo producers, a transactional topic
// (commits and aborts), a topic written by Kafka's own
// kafka-producer-perf-test in transactions, a compacted topic after
// Kafka's cleaner ran, a topic whose log start kafka-delete-records moved
// before and during mirroring, and a topic created after the mirror
// started.
func TestInteropKafkaSingleBroker(t *testing.T) {
	t.Parallel()
	cluster := sharedKafkaBroker(t) // its topics, transactional IDs and mirror pattern: it-*
	libs := kafkaLibs(t)
	ctx, cancel := context.WithTimeout(context.Background(), interopDeadline)
	defer cancel()
	kafka := cluster.Bootstrap()
	maker := newRecordMaker(newSeed(t))

	topics := map[string]int32{"it-txn": 2, "it-perf": 1, "it-compacted": 1, "it-trimmed": 2}
	for _, c := range codecs {
		topics["it-codec-"+c.name] = 2
	}
	for name, partitions := range topics {
		var configs map[string]string
		if name == "it-compacted" {
			configs = map[string]string{"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0", "delete.retention.ms": "0"}
		}
		createKafkaTopic(ctx, t, kafka, name, partitions, 1, configs)
	}

	produceCodecTopics(ctx, t, kafka, maker, 0)
	produceTransactions(ctx, t, kafka, maker, "it-txn", 0)
	if _, err := cluster.Tool(ctx, "org.apache.kafka.tools.ProducerPerformance", "--topic", "it-perf",
		"--num-records", interopPerfRecords, "--record-size", "300", "--throughput", "-1",
		"--transactional-id", "it-perf-txn", "--transaction-duration-ms", "200",
		"--producer-props", "bootstrap.servers="+kafka, "compression.type=zstd", "linger.ms=5"); err != nil {
		t.Fatalf("kafka-producer-perf-test: %v", err)
	}
	produceCompactedUntilCleaned(ctx, t, kafka, maker, topicPartition{"it-compacted", 0})
	produceTo(ctx, t, newClient(t, kafka), maker, topicPartition{"it-trimmed", 0}, interopTrimAfter+300, newLedger())
	produceTo(ctx, t, newClient(t, kafka), maker, topicPartition{"it-trimmed", 1}, interopTrimAfter+300, newLedger())
	deleteRecords(ctx, t, cluster, map[topicPartition]int64{{"it-trimmed", 0}: interopTrimBefore})

	mirror := startServer(t)
	runMirrorsOK(ctx, t, mirror.addr, "--create", "--mirror", "m", "--mirror-config", interopMirrorConfig(t, kafka))
	runMirrorsOK(ctx, t, mirror.addr, "--start", "--mirror", "m", "--topics", interopMirrorPattern)

	// While mirroring: a new topic, more records, a moved log start.
	createKafkaTopic(ctx, t, kafka, "it-late", 2, 1, nil)
	topics["it-late"] = 2
	produceTo(ctx, t, newClient(t, kafka, kgo.ProducerBatchCompression(kgo.Lz4Compression())), maker, topicPartition{"it-late", 0}, 700, newLedger())
	produceTo(ctx, t, newClient(t, kafka), maker, topicPartition{"it-late", 1}, 300, newLedger())
	produceCodecTopics(ctx, t, kafka, maker, 1)
	produceTransactions(ctx, t, kafka, maker, "it-txn", 1)
	tps := topicPartitions(topics)
	waitMirrorCaughtUp(ctx, t, kafka, mirror.addr, tps)
	deleteRecords(ctx, t, cluster, map[topicPartition]int64{{"it-trimmed", 0}: interopTrimAfter, {"it-trimmed", 1}: interopTrimBefore})
	waitLogStartFollowed(ctx, t, kafka, mirror.addr, []topicPartition{{"it-trimmed", 0}, {"it-trimmed", 1}})

	checkMirrorEqualsKafka(ctx, t, libs, kafka, mirror.addr, topics)
}

// produceCodecTopics writes interopRecords to each it-codec-* topic with
// its codec, idempotently (kgo's default), spread over both partitions.
func produceCodecTopics(ctx context.Context, t *testing.T, addr string, maker *recordMaker, round int) {
	t.Helper()
	for _, c := range codecs {
		client := newClient(t, addr, kgo.ProducerBatchCompression(c.codec), kgo.ProducerLinger(5*time.Millisecond))
		topic := "it-codec-" + c.name
		var records []*kgo.Record
		for i := range interopRecords {
			records = append(records, maker.record(topic, int32(i%2), round*interopRecords+i))
		}
		if err := produceAll(ctx, client, records, newLedger()); err != nil {
			t.Fatalf("produce %s to Kafka: %v", topic, err)
		}
		client.Close()
	}
}

// produceTransactions writes six transactions to both partitions of topic,
// committing four and aborting two.
func produceTransactions(ctx context.Context, t *testing.T, addr string, maker *recordMaker, topic string, round int) {
	t.Helper()
	// The topic names the transactional ID: tests sharing a broker must not fence each other.
	client := newClient(t, addr, kgo.TransactionalID(fmt.Sprintf("%s-%d", topic, round)), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	defer client.Close()
	for txn := range 6 {
		if err := client.BeginTransaction(); err != nil {
			t.Fatalf("begin transaction: %v", err)
		}
		var records []*kgo.Record
		for i := range 100 {
			records = append(records, maker.record(topic, int32(i%2), (round*6+txn)*100+i))
		}
		if err := produceAll(ctx, client, records, newLedger()); err != nil {
			t.Fatalf("transactional produce: %v", err)
		}
		commit := kgo.TransactionEndTry(txn%3 != 2)
		if err := client.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end transaction %d: %v", txn, err)
		}
	}
}

// produceCompactedUntilCleaned writes keyed records (many versions of
// interopCompactKeys keys, some tombstones) and keeps writing one record
// per poll, which rolls the 100 ms segments, until Kafka's cleaner has
// compacted the partition: a fetch shows an offset gap.
func produceCompactedUntilCleaned(ctx context.Context, t *testing.T, addr string, maker *recordMaker, tp topicPartition) {
	t.Helper()
	client := newClient(t, addr)
	var records []*kgo.Record
	for i := range interopCompactKeys * 10 {
		r := maker.record(tp.topic, tp.partition, i)
		r.Key = fmt.Appendf(nil, "key-%d", i%interopCompactKeys)
		if i%37 == 0 {
			r.Value = nil // a tombstone
		}
		records = append(records, r)
	}
	if err := produceAll(ctx, client, records, newLedger()); err != nil {
		t.Fatalf("produce %s: %v", tp, err)
	}
	round := 0
	reason := pollUntil(ctx, interopCompactedWait, func(ctx context.Context) string {
		stored, err := readPartition(ctx, addr, tp.topic, tp.partition)
		if err != nil {
			return err.Error()
		}
		if hasOffsetGap(stored.batches) {
			return ""
		}
		if round++; round > interopCompactRounds {
			return "too many rounds"
		}
		r := maker.record(tp.topic, tp.partition, len(records)+round)
		r.Key = fmt.Appendf(nil, "key-%d", round%interopCompactKeys)
		if err := produceAll(ctx, client, []*kgo.Record{r}, newLedger()); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("not compacted after %d rounds", round)
	})
	if reason != "" {
		t.Fatalf("Kafka's cleaner did not compact %s within %v: %s", tp, interopCompactedWait, reason)
	}
}

// hasOffsetGap reports whether some offsets have no record: a batch holds
// fewer records than its offset range (the cleaner keeps a batch's base
// and last offsets), or does not start right after the previous one.
func hasOffsetGap(batches []byte) bool {
	next := int64(-1)
	for len(batches) >= batchHeaderBytes {
		size := 12 + int(int32(beUint32(batches[batchLengthAt:])))
		if size < batchHeaderBytes || size > len(batches) {
			return false
		}
		base := int64(beUint32(batches))<<32 | int64(beUint32(batches[4:]))
		last := base + int64(int32(beUint32(batches[batchLastDeltaAt:])))
		const recordCountAt = 57
		if next >= 0 && base != next || int64(int32(beUint32(batches[recordCountAt:]))) != last-base+1 {
			return true
		}
		next = last + 1
		batches = batches[size:]
	}
	return false
}

// waitLogStartFollowed waits until mirrord's log start offsets are
// Kafka's.
func waitLogStartFollowed(ctx context.Context, t *testing.T, kafkaAddr, mirrorAddr string, tps []topicPartition) {
	t.Helper()
	reason := pollUntil(ctx, mirrorCatchUpWait, func(ctx context.Context) string {
		for _, tp := range tps {
			want, err := listOffsets(ctx, kafkaAddr, tp, -2)
			if err != nil {
				return err.Error()
			}
			got, err := listOffsets(ctx, mirrorAddr, tp, -2)
			if err != nil {
				return err.Error()
			}
			if got.Offset != want.Offset {
				return fmt.Sprintf("%s: mirror log start %d, Kafka %d", tp, got.Offset, want.Offset)
			}
		}
		return ""
	})
	if reason != "" {
		failWithDescribe(ctx, t, mirrorAddr, "log start not followed within %v: %s", mirrorCatchUpWait, reason)
	}
}

// checkMirrorEqualsKafka is the suite's verdict on a caught-up mirror of
// topics: the same topic IDs; per partition the same batches byte for
// byte, log start, high watermark and last stable offset; the same output
// from kcat and kafka-console-consumer (read_committed and
// read_uncommitted); the same kafka-get-offsets, ListOffsets and
// OffsetForLeaderEpoch answers.
func checkMirrorEqualsKafka(ctx context.Context, t *testing.T, libs, kafka, mirror string, topics map[string]int32) {
	t.Helper()
	kafkaIDs, mirrorIDs := topicIDs(ctx, t, kafka, topics), topicIDs(ctx, t, mirror, topics)
	for name, id := range kafkaIDs {
		if mirrorIDs[name] != id {
			t.Errorf("topic %s: mirrord's ID %v, Kafka's %v", name, mirrorIDs[name], id)
		}
	}
	tps := topicPartitions(topics)
	fromKafka, fromMirror := readAll(ctx, t, kafka, tps), readAll(ctx, t, mirror, tps)
	compareMirrored(t, fromKafka, fromMirror)

	kcat := findKcat(t)
	for _, tp := range tps {
		stored := fromKafka[tp]
		for _, isolation := range []string{"read_committed", "read_uncommitted"} {
			kcatArgs := func(addr string) []string {
				return []string{"-C", "-b", addr, "-t", tp.topic, "-p", fmt.Sprint(tp.partition), "-o", "beginning", "-e", "-q",
					"-X", "isolation.level=" + isolation, "-X", "fetch.wait.max.ms=" + kcatEOFFetchWaitMs, "-f", `%p|%o|%T|%k|%h|%s\n`}
			}
			compareOutputs(t, fmt.Sprintf("kcat %s %s", tp, isolation), runKcat(ctx, t, kcat, nil, kcatArgs(kafka)...), runKcat(ctx, t, kcat, nil, kcatArgs(mirror)...))
			if !consoleChecked(tp, stored, isolation) {
				continue
			}
			// Values hold any byte, newlines too: count offsets alone.
			count := strings.Count(string(runKcat(ctx, t, kcat, nil, append(kcatArgs(kafka), "-f", `%o\n`)...)), "\n")
			fromKafka, fromMirror := consoleConsume(ctx, t, libs, kafka, mirror, tp, isolation, count)
			compareOutputs(t, fmt.Sprintf("kafka-console-consumer %s %s", tp, isolation), fromKafka, fromMirror)
		}
		compareOffsetAnswers(ctx, t, kafka, mirror, tp, batchEpochs(stored.batches), recordTimestamps(stored.batches))
	}
	for _, at := range []int64{-1, -2, -3} {
		want, got := getOffsets(ctx, t, libs, kafka, mirror, topicsPattern(topics), at)
		if got != want {
			t.Errorf("kafka-get-offsets --time %d: mirrord\n%s\nKafka\n%s", at, got, want)
		}
	}
}

// topicsPattern is a --topic regular expression of exactly topics: a
// shared broker holds other tests' topics too.
func topicsPattern(topics map[string]int32) string {
	names := slices.Sorted(maps.Keys(topics))
	for i, name := range names {
		names[i] = regexp.QuoteMeta(name)
	}
	return "^(" + strings.Join(names, "|") + ")$"
}

// consoleChecked picks the partitions kafka-console-consumer reads (a JVM
// start each, so not all of them): partition 0 of every topic, and both
// isolation levels only where transactions make them differ.
func consoleChecked(tp topicPartition, stored storedPartition, isolation string) bool {
	if tp.partition != 0 {
		return false
	}
	return isolation == "read_committed" || stored.transactional > 0
}

// recordTimestamps returns up to interopTimestampProbe batch first
// timestamps spread over the partition, plus one after every record.
func recordTimestamps(batches []byte) []int64 {
	var all []int64
	for len(batches) >= batchHeaderBytes {
		size := 12 + int(int32(beUint32(batches[batchLengthAt:])))
		if size < batchHeaderBytes || size > len(batches) {
			break
		}
		const firstTimestampAt = 27
		all = append(all, int64(beUint32(batches[firstTimestampAt:]))<<32|int64(beUint32(batches[firstTimestampAt+4:])))
		batches = batches[size:]
	}
	var out []int64
	for i := 0; i < len(all) && len(out) < interopTimestampProbe; i += max(1, len(all)/interopTimestampProbe) {
		out = append(out, all[i])
	}
	return append(out, time.Now().Add(time.Hour).UnixMilli())
}

// TestInteropKafkaLeaderKilled mirrors from a three-node Kafka cluster
// (replication factor 3, min.insync.replicas 2) while an idempotent
// producer writes, kills the leader of partition 0 with SIGKILL (a real
// leader change and epoch bump), keeps writing, brings the node back, and
// requires the mirror to end equal to Kafka: no loss, no divergence, the
// new epoch in the mirrored batches.
func TestInteropKafkaLeaderKilled(t *testing.T) {
	t.Parallel()
	cluster := startKafka(t, 3, nil)
	libs := kafkaLibs(t)
	ctx, cancel := context.WithTimeout(context.Background(), interopDeadline)
	defer cancel()
	kafka := cluster.Bootstrap()
	topics := map[string]int32{"it-replicated": 3}
	createKafkaTopic(ctx, t, kafka, "it-replicated", 3, 3, map[string]string{"min.insync.replicas": "2"})
	tps := topicPartitions(topics)
	target := topicPartition{"it-replicated", 0}

	producer := startKafkaProducer(ctx, t, kafka, newSeed(t), tps)
	defer producer.halt()
	mirror := startServer(t)
	runMirrorsOK(ctx, t, mirror.addr, "--create", "--mirror", "m", "--mirror-config", interopMirrorConfig(t, kafka))
	runMirrorsOK(ctx, t, mirror.addr, "--start", "--mirror", "m", "--topics", interopMirrorPattern)
	before := waitMirrorPast(ctx, t, mirror.addr, target, interopLeaderKillAfter)

	leader, epoch := partitionLeader(ctx, t, kafka, target)
	t.Logf("killing node %d, leader of %s in epoch %d, with the mirror at %d", leader, target, epoch, before)
	if err := cluster.Kill(cluster.Node(leader)); err != nil {
		t.Fatal(err)
	}
	var newEpoch int32
	reason := pollUntil(ctx, interopProgressWait, func(ctx context.Context) string {
		var newLeader int32
		newLeader, newEpoch = partitionLeader(ctx, t, kafka, target)
		if newLeader == leader || newLeader < 0 || newEpoch <= epoch {
			return fmt.Sprintf("leader %d in epoch %d", newLeader, newEpoch)
		}
		return ""
	})
	if reason != "" {
		t.Fatalf("no new leader of %s after killing node %d: %s", target, leader, reason)
	}
	// Records written in the new epoch; mirrored while the node is down,
	// and again after it is back.
	producer.waitAcked(ctx, t, target, producer.ackedOn(target)+interopRecordsAfterKill)
	waitMirrorPast(ctx, t, mirror.addr, target, producer.ackedOn(target)+1)
	if err := cluster.Restart(ctx, cluster.Node(leader)); err != nil {
		t.Fatal(err)
	}
	producer.waitAcked(ctx, t, target, producer.ackedOn(target)+interopRecordsAfterKill)
	waitMirrorPast(ctx, t, mirror.addr, target, producer.ackedOn(target)+1)
	producer.finish(t)

	waitMirrorCaughtUp(ctx, t, kafka, mirror.addr, tps)
	checkMirrorEqualsKafka(ctx, t, libs, kafka, mirror.addr, topics)
	stored, err := readPartition(ctx, mirror.addr, target.topic, target.partition)
	if err != nil {
		t.Fatal(err)
	}
	if epochs := batchEpochs(stored.batches); len(epochs) < 2 || epochs[len(epochs)-1] < newEpoch {
		t.Errorf("%s: mirrored batch epochs %v; want the epoch %d of the new leader after %d", target, epochs, newEpoch, epoch)
	}
}

const (
	interopLeaderKillAfter  = 2000 // records of partition 0 mirrored before the kill
	interopRecordsAfterKill = 500  // and written after it, then after the restart
	interopProduceRounds    = 6000
	interopProduceEvery     = 5 * time.Millisecond
	interopRoundRecords     = 30
)

// kafkaProducer writes rounds of records to partitions of a Kafka cluster
// with an idempotent kgo producer (acks=all) until halted, and remembers
// the highest acknowledged offset per partition.
type kafkaProducer struct {
	stop     chan struct{}
	stopOnce sync.Once
	done     chan error
	mu       sync.Mutex
	acked    map[topicPartition]int64
}

func startKafkaProducer(ctx context.Context, t *testing.T, addr string, seed uint64, tps []topicPartition) *kafkaProducer {
	t.Helper()
	client := newClient(t, addr, kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerLinger(2*time.Millisecond))
	p := &kafkaProducer{stop: make(chan struct{}), done: make(chan error, 1), acked: map[topicPartition]int64{}}
	maker := newRecordMaker(seed)
	go func() { p.done <- p.run(ctx, client, maker, tps) }()
	return p
}

func (p *kafkaProducer) run(ctx context.Context, client *kgo.Client, maker *recordMaker, tps []topicPartition) error {
	ticker := time.NewTicker(interopProduceEvery)
	defer ticker.Stop()
	for round := range interopProduceRounds {
		var records []*kgo.Record
		for i := range interopRoundRecords {
			tp := tps[i%len(tps)]
			records = append(records, maker.record(tp.topic, tp.partition, round*interopRoundRecords+i))
		}
		acked := newLedger()
		if err := produceAll(ctx, client, records, acked); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		p.mu.Lock()
		for tp, rs := range acked.sorted() {
			p.acked[tp] = max(p.acked[tp], rs[len(rs)-1].Offset)
		}
		p.mu.Unlock()
		select {
		case <-p.stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
	return nil
}

// ackedOn is the highest offset Kafka acknowledged on tp so far.
func (p *kafkaProducer) ackedOn(tp topicPartition) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked[tp]
}

func (p *kafkaProducer) halt() { p.stopOnce.Do(func() { close(p.stop) }) }

// finish halts the producer and fails the test if it failed.
func (p *kafkaProducer) finish(t *testing.T) {
	t.Helper()
	p.halt()
	if err := <-p.done; err != nil {
		t.Fatalf("producer to Kafka: %v", err)
	}
}

// waitAcked waits until Kafka acknowledged offset on tp.
func (p *kafkaProducer) waitAcked(ctx context.Context, t *testing.T, tp topicPartition, offset int64) {
	t.Helper()
	reason := pollUntil(ctx, interopProgressWait, func(context.Context) string {
		select {
		case err := <-p.done:
			t.Fatalf("producer to Kafka stopped early: %v", err)
		default:
		}
		if acked := p.ackedOn(tp); acked < offset {
			return fmt.Sprintf("%s acknowledged up to %d", tp, acked)
		}
		return ""
	})
	if reason != "" {
		t.Fatalf("Kafka does not acknowledge %s offset %d within %v: %s", tp, offset, interopProgressWait, reason)
	}
}

// waitMirrorPast waits until the mirror's high watermark of tp reaches
// offset, and returns it.
func waitMirrorPast(ctx context.Context, t *testing.T, addr string, tp topicPartition, offset int64) int64 {
	t.Helper()
	var end int64
	reason := pollUntil(ctx, interopProgressWait, func(ctx context.Context) string {
		ends, err := endOffsets(ctx, addr, []topicPartition{tp})
		if err != nil {
			return err.Error()
		}
		if end = ends[tp]; end < offset {
			return fmt.Sprintf("%s at %d", tp, end)
		}
		return ""
	})
	if reason != "" {
		failWithDescribe(ctx, t, addr, "the mirror does not reach %d within %v: %s", offset, interopProgressWait, reason)
	}
	return end
}

// partitionLeader asks Kafka's metadata for tp's leader and leader epoch
// (-1 while there is none).
func partitionLeader(ctx context.Context, t *testing.T, addr string, tp topicPartition) (int32, int32) {
	t.Helper()
	client, err := kgo.NewClient(seeds(addr), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	details, err := kadm.NewClient(client).ListTopics(ctx, tp.topic)
	if err != nil {
		return -1, -1
	}
	p, ok := details[tp.topic].Partitions[tp.partition]
	if !ok || p.Err != nil {
		return -1, -1
	}
	return p.Leader, p.LeaderEpoch
}
