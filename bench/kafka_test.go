package bench

// The real-Kafka scenarios of the benchmark report: mirrord mirroring from
// a Kafka 4.4 broker, MirrorMaker 2 copying the same topic, Kafka's own
// follower replication of the same bytes, and a consumer reading them from
// Kafka and from mirrord. Brokers and MirrorMaker 2 are separate JVMs
// (kafkatest), mirrord a `mirrord serve` child (process_test.go).
//
// The data: per variant one topic of 1 KiB records (half pseudo-random,
// half text, so lz4 halves it), produced by a kgo producer with lz4, a
// linger of 5 ms and acks=all, until the leader's log holds mode.Bytes of
// record batches. Sample.Bytes is that log's size (DescribeLogDirs), the
// record batch bytes as stored at the source. One source broker is filled
// once per kafkaScenarios call and serves mirrord, MirrorMaker 2 and the
// Kafka consumer; the leader of the replication cluster is filled the
// same way, once.
//
// Clocks and CPU: CPU is utime+stime from /proc/<pid>/stat (10 ms ticks)
// of every process in the run, plus this process's rusage where it is the
// client; PeakRSS the largest VmHWM among them (a JVM's is its lifetime
// peak). Every wait polls with a deadline.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/mirrord/mirrord/mirrordtest"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	kafkaRecordBytes = 1024                 // value bytes per record (no key)
	kafkaLinger      = 5 * time.Millisecond // the filling producer's linger
	kafkaStartWait   = 3 * time.Minute      // formatting and starting a cluster, cold JVMs
	kafkaFillWait    = 5 * time.Minute      // one fill, at most
	kafkaRunWait     = 5 * time.Minute      // one measured run, start to caught up, at most
	kafkaPollEvery   = 10 * time.Millisecond
	kafkaFillRounds  = 16 // produce-and-measure rounds of one fill, at most
	// kafkaDebugReplica is ListOffsets' replica ID of a debugging
	// client: the broker answers from any replica, leader or follower,
	// with the log end offset (not the high watermark).
	kafkaDebugReplica = -2
	// mm2Tasks is MirrorMaker 2's tasks.max: one task, one consumer and
	// one producer, as mirrord runs one fetcher per source broker; more
	// tasks are more JVM threads on two cores.
	mm2Tasks = 1
)

// kafkaVariant is one configuration of the data.
type kafkaVariant struct{ partitions int32 }

// String is the report's Variant ("1 partition, lz4"), the name the
// other scenarios give the same data.
func (v kafkaVariant) String() string { return variantName(v.partitions, rb.CodecLZ4) }

func (v kafkaVariant) topic() string { return fmt.Sprintf("bench-%d", v.partitions) }

func kafkaVariants(mode benchMode) []kafkaVariant {
	if mode.Full {
		return []kafkaVariant{{1}, {64}}
	}
	return []kafkaVariant{{1}}
}

// kafkaTopicData is a filled topic: where, how much, and its log end
// offsets, per partition.
type kafkaTopicData struct {
	topic      string
	endOffsets []int64
	records    int64
	bytes      int64 // record batch bytes in the leader's log
}

// kafkaScenarios measures, on the same data (mode.Bytes of 1 KiB records,
// lz4, one topic of 1 partition, and in mode.Full also 64 partitions),
// each mode.Repeats times:
//
//   - "mirrord-from-kafka": a `mirrord serve` process mirroring the topic
//     from a 1-node Kafka broker, StartMirrorTopics to caught up (its
//     ListOffsets answers the source's log end offsets); CPU mirrord + the
//     broker; PeakRSS the larger VmHWM.
//   - "mm2": MirrorMaker 2 (dedicated mode, tasks.max=1) copying the topic
//     from that broker to a fresh 1-node cluster: the first record on the
//     target to the target's end offsets equal to the source's (the Note
//     gives MirrorMaker's start to that first record, not counted); CPU
//     of MirrorMaker and both brokers over the same time.
//   - "kafka-replication": Kafka's follower replication of the same
//     bytes: a 2-node cluster holding the topic on node 1 alone is asked
//     (AlterPartitionReassignments) to add a replica on node 2; the
//     request to node 2's log end offsets equal to the leader's (ListOffsets
//     as a debugging replica, sent to node 2); CPU both brokers. Each
//     repeat removes the replica again first. (Not a follower killed and
//     restarted: that measures a JVM start and, with two controllers, a
//     KRaft election, about 9 s here, rather than replication.)
//   - "serve-kafka": a kgo consumer (ConsumePartitions from the start, no
//     group) reading the topic from the source broker; CPU broker + this
//     process. "serve-mirrord": the same from the mirrord of that repeat,
//     right after it caught up.
//   - "serve-kafka-tls", "serve-mirrord-tls": the same consumer over the
//     SSL listener of the same broker and the same mirrord (one test CA,
//     client certificates required: sslCerts), right before or after the
//     plaintext read, the order alternating by repeat. The broker is read
//     once over each listener before the first repeat, not counted (JIT).
//
// Each repeat starts a fresh mirrord, MirrorMaker 2 and target cluster.
// Without Java or the Kafka jars the error wraps kafkatest.ErrNotInstalled
// and says which. Without the connect-mirror jar alone (MirrorMaker 2 is
// not served by every registry) the "mm2" rows come back with no Samples
// and a Note that says why, and the error is nil.
func kafkaScenarios(tb testing.TB, mode benchMode) ([]Measurement, error) {
	tb.Helper()
	if mode.Repeats < 1 || mode.Bytes < kafkaRecordBytes {
		return nil, fmt.Errorf("kafka scenarios: mode %+v: no repeats or no bytes", mode)
	}
	libs, err := kafkatest.Libs(".")
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	certs := newSSLCerts(tb)
	source, err := startKafka(ctx, kafkatest.Options{Libs: libs, Dir: filepath.Join(tb.TempDir(), "source"), Brokers: 1, SSL: certs.kafkaSSL()})
	if err != nil {
		return nil, err
	}
	defer source.Close()
	variants := kafkaVariants(mode)
	data := make([]kafkaTopicData, len(variants))
	for i, v := range variants {
		if data[i], err = createAndFill(ctx, source.Nodes[0], v, mode.Bytes); err != nil {
			return nil, fmt.Errorf("fill the source: %w\n%s", err, source.Logs())
		}
	}
	var measurements []Measurement
	for i, v := range variants {
		var replication Measurement
		var replicationErr error
		var beside sync.WaitGroup
		if mode.Name == "smoke" {
			// Smoke mode judges no number: the replication scenario's
			// 2-node cluster starts and runs beside the source scenarios
			// (its two JVMs' start was a fifth of the smoke).
			beside.Go(func() { replication, replicationErr = replicationScenario(tb, libs, v, mode) })
		}
		fromSource, err := sourceScenarios(tb, libs, source, certs, v, data[i], mode.Repeats)
		beside.Wait()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v, err)
		}
		if mode.Name != "smoke" {
			replication, replicationErr = replicationScenario(tb, libs, v, mode)
		}
		if replicationErr != nil {
			return nil, fmt.Errorf("%s: kafka-replication: %w", v, replicationErr)
		}
		measurements = append(measurements, fromSource[:2]...)
		measurements = append(measurements, replication)
		measurements = append(measurements, fromSource[2:]...)
	}
	return measurements, nil
}

// sourceScenarios runs the scenarios that read the filled source broker:
// mirrord-from-kafka, mm2, serve-kafka, serve-kafka-tls, serve-mirrord and
// serve-mirrord-tls, in that order.
func sourceScenarios(tb testing.TB, libs string, source *kafkatest.Cluster, certs sslCerts, v kafkaVariant, data kafkaTopicData, repeats int) ([]Measurement, error) {
	broker := source.Nodes[0]
	mirrored := Measurement{Scenario: "mirrord-from-kafka", Variant: v.String(),
		Note: "mirrord serve mirroring from a 1-node Kafka " + kafkatest.Version + ": StartMirrorTopics to caught up; CPU mirrord + broker"}
	mm2 := Measurement{Scenario: "mm2", Variant: v.String()}
	serveKafka := Measurement{Scenario: "serve-kafka", Variant: v.String(),
		Note: "kgo consumer from offset 0, no group, from the Kafka broker; CPU broker + consumer"}
	serveMirrord := Measurement{Scenario: "serve-mirrord", Variant: v.String(),
		Note: "kgo consumer from offset 0, no group, from the mirrord that mirrored the topic; CPU mirrord + consumer"}
	const tlsNote = " over its SSL listener (client certificate required), beside the plaintext read of the same repeat"
	serveKafkaTLS := Measurement{Scenario: scenarioServeKafkaTLS, Variant: v.String(), Note: serveKafka.Note + tlsNote}
	serveMirrordTLS := Measurement{Scenario: scenarioServeMirrordTLS, Variant: v.String(), Note: serveMirrord.Note + tlsNote}
	// One read over each of the broker's listeners first, not counted: its
	// JVM compiles the fetch and TLS paths on first use (a cold broker's
	// first TLS read ran at 84 MB/s here, the third at 219).
	if _, err := servePair(tb, broker.Addr, broker.SSLAddr, certs, data, broker.Pid(), false); err != nil {
		return nil, fmt.Errorf("serve-kafka warm-up: %w", err)
	}
	for i := range repeats {
		tlsFirst := i%2 == 1
		mirrorSample, served, err := mirrordFromKafkaOnce(tb, source, certs, data, tlsFirst)
		if err != nil {
			return nil, fmt.Errorf("mirrord-from-kafka: %w", err)
		}
		mirrored.Samples = append(mirrored.Samples, mirrorSample)
		serveMirrord.Samples = append(serveMirrord.Samples, served[0])
		serveMirrordTLS.Samples = append(serveMirrordTLS.Samples, served[1])
		if served, err = servePair(tb, broker.Addr, broker.SSLAddr, certs, data, broker.Pid(), tlsFirst); err != nil {
			return nil, fmt.Errorf("serve-kafka: %w", err)
		}
		serveKafka.Samples = append(serveKafka.Samples, served[0])
		serveKafkaTLS.Samples = append(serveKafkaTLS.Samples, served[1])
	}
	serving := []Measurement{serveKafka, serveKafkaTLS, serveMirrord, serveMirrordTLS}
	if err := kafkatest.MirrorMakerInstalled(libs); err != nil {
		mm2.Note = fmt.Sprintf("not measured: %v", err)
		return append([]Measurement{mirrored, mm2}, serving...), nil
	}
	var startups []string
	for range repeats {
		sample, startup, err := mm2Once(tb, libs, source, data)
		if err != nil {
			return nil, fmt.Errorf("mm2: %w", err)
		}
		mm2.Samples = append(mm2.Samples, sample)
		startups = append(startups, startup.Round(10*time.Millisecond).String())
	}
	mm2.Note = fmt.Sprintf("MirrorMaker 2 %s (dedicated mode, tasks.max=%d) to a fresh 1-node Kafka: first record on the target to caught up;"+
		" CPU MM2 + both brokers over that time; its start to the first record (not counted): %s", kafkatest.MirrorMakerVersion, mm2Tasks, strings.Join(startups, ", "))
	return append([]Measurement{mirrored, mm2}, serving...), nil
}

// servePair reads data from one server over its PLAINTEXT listener and
// over its SSL one (consumeSample), the TLS read first when tlsFirst; it
// returns the plaintext sample and the TLS one.
func servePair(tb testing.TB, plainAddr, sslAddr string, certs sslCerts, data kafkaTopicData, serverPid int, tlsFirst bool) (samples [2]Sample, err error) {
	order := []int{0, 1}
	if tlsFirst {
		order = []int{1, 0}
	}
	for _, i := range order {
		if i == 0 {
			samples[i], err = consumeSample(tb, plainAddr, data, serverPid)
		} else {
			samples[i], err = consumeSample(tb, sslAddr, data, serverPid, kgo.DialTLSConfig(certs.client))
		}
		if err != nil {
			return samples, fmt.Errorf("over %s: %w", []string{"PLAINTEXT", "SSL"}[i], err)
		}
	}
	return samples, nil
}

// mirrordFromKafkaOnce starts a mirrord with an SSL listener on a fresh
// data directory, mirrors the topic from source until caught up, then
// reads it back with a consumer over both listeners (servePair); it
// returns the mirroring sample and the two serving ones.
func mirrordFromKafkaOnce(tb testing.TB, source *kafkatest.Cluster, certs sslCerts, data kafkaTopicData, tlsFirst bool) (mirror Sample, serve [2]Sample, err error) {
	broker := source.Nodes[0]
	dir := filepath.Join(tb.TempDir(), "mirrord")
	sslAddr, err := mirrordtest.FreeAddress()
	if err != nil {
		return mirror, serve, err
	}
	process := startMirrord(tb, dir, certs.serveArgs(sslAddr)...)
	defer os.RemoveAll(dir) // as many bytes as the source
	defer process.kill()
	client := process.client()
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaRunWait)
	defer cancel()
	if err := createMirror(ctx, client, broker.Addr); err != nil {
		return mirror, serve, err
	}
	pids := []int{process.proc.Pid(), broker.Pid()}
	cpuStart, err := cpuOfAll(pids...)
	if err != nil {
		return mirror, serve, err
	}
	started := time.Now()
	if err := startMirrorTopicNamed(ctx, client, data.topic); err != nil {
		return mirror, serve, err
	}
	caughtUp, err := waitKafkaEndOffsets(ctx, direct(client), -1, data, nil)
	if err != nil {
		return mirror, serve, fmt.Errorf("mirrord did not catch up: %w", err)
	}
	if mirror, err = sampleOf(data, caughtUp.Sub(started), cpuStart, pids...); err != nil {
		return mirror, serve, err
	}
	if serve, err = servePair(tb, process.addr, sslAddr, certs, data, process.proc.Pid(), tlsFirst); err != nil {
		return mirror, serve, err
	}
	process.stop()
	return mirror, serve, nil
}

// mm2Once starts a 1-node target cluster and MirrorMaker 2 copying the
// topic from source to it, and measures MirrorMaker's start to the
// target's end offsets equal to the source's. It also returns the time
// from the start to the first record on the target.
func mm2Once(tb testing.TB, libs string, source *kafkatest.Cluster, data kafkaTopicData) (Sample, time.Duration, error) {
	ctx := context.Background()
	dir := filepath.Join(tb.TempDir(), "mm2")
	defer os.RemoveAll(dir)
	target, err := startKafkaCluster(ctx, libs, filepath.Join(dir, "target"), 1)
	if err != nil {
		return Sample{}, 0, err
	}
	defer target.Close()
	client, err := kgo.NewClient(kgo.SeedBrokers(target.Nodes[0].Addr))
	if err != nil {
		return Sample{}, 0, err
	}
	defer client.Close()
	brokerPids := []int{source.Nodes[0].Pid(), target.Nodes[0].Pid()}
	started := time.Now()
	mm, err := kafkatest.StartMirrorMaker(ctx, libs, filepath.Join(dir, "mm2"), source.Bootstrap(), target.Bootstrap(),
		data.topic, map[string]string{"tasks.max": fmt.Sprint(mm2Tasks)})
	if err != nil {
		return Sample{}, 0, err
	}
	defer mm.Close() // on the error paths; after the Close below it only reports that the process is gone
	runCtx, cancel := context.WithTimeoutCause(ctx, kafkaRunWait, errors.New("MirrorMaker 2 took too long"))
	defer cancel()
	runCtx, stopWatching := cancelWhenClosed(runCtx, mm.Exited(), errors.New("MirrorMaker 2 exited"))
	defer stopWatching()
	// The sample runs from the first record on the target: MirrorMaker's
	// JVM start, worker group join and connector start (seconds) are
	// reported in the Note, not charged to its throughput or CPU per GB.
	var firstRecord time.Duration
	var firstAt time.Time
	var cpuFirst time.Duration
	var cpuFirstErr error
	pids := append(brokerPids, mm.Pid())
	caughtUp, err := waitKafkaEndOffsets(runCtx, direct(client), -1, data, func() {
		firstAt = time.Now()
		firstRecord = firstAt.Sub(started)
		cpuFirst, cpuFirstErr = cpuOfAll(pids...)
	})
	if err == nil {
		err = cpuFirstErr
	}
	if err != nil {
		return Sample{}, 0, fmt.Errorf("MirrorMaker 2 did not catch up: %w\n%s", err, mm.LogTail())
	}
	sample, err := sampleOf(data, caughtUp.Sub(firstAt), cpuFirst, pids...)
	if err != nil {
		return Sample{}, 0, err
	}
	if err := mm.Close(); err != nil {
		return Sample{}, 0, fmt.Errorf("%w\n%s", err, mm.LogTail())
	}
	return sample, firstRecord, nil
}

// replicationScenario starts a 2-node cluster, fills v's topic on node 1
// (replication factor 1, acks=all, as the source), and each repeat adds
// a replica on node 2 and measures until it caught up, then removes it.
func replicationScenario(tb testing.TB, libs string, v kafkaVariant, mode benchMode) (Measurement, error) {
	ctx := context.Background()
	cluster, err := startKafkaCluster(ctx, libs, filepath.Join(tb.TempDir(), "replication"), 2)
	if err != nil {
		return Measurement{}, err
	}
	defer cluster.Close()
	data, err := createAndFill(ctx, cluster.Nodes[0], v, mode.Bytes)
	if err != nil {
		return Measurement{}, fmt.Errorf("fill the leader: %w\n%s", err, cluster.Logs())
	}
	m := Measurement{Scenario: "kafka-replication", Variant: v.String()}
	var firsts []string
	for range mode.Repeats {
		sample, first, err := replicationOnce(ctx, cluster, data)
		if err != nil {
			return Measurement{}, fmt.Errorf("%w\n%s", err, cluster.Logs())
		}
		m.Samples = append(m.Samples, sample)
		firsts = append(firsts, first.Round(time.Millisecond).String())
	}
	m.Note = fmt.Sprintf("Kafka %s follower replication (2 nodes): AlterPartitionReassignments adding a replica on node 2 to its log end offsets"+
		" equal to the leader's; CPU both brokers; to the first replicated record: %s", kafkatest.Version, strings.Join(firsts, ", "))
	return m, nil
}

// replicationOnce adds a replica of data's topic on node 2 (replicas
// [node 1, node 2] in every partition) and waits until node 2's log end
// offsets equal node 1's, then reassigns the topic back to node 1 alone
// and waits until node 2 dropped its copy. It returns the sample and the
// time from the reassignment to the first replicated record.
func replicationOnce(ctx context.Context, cluster *kafkatest.Cluster, data kafkaTopicData) (Sample, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, kafkaRunWait)
	defer cancel()
	leader, follower := cluster.Nodes[0], cluster.Nodes[1]
	client, err := kgo.NewClient(kgo.SeedBrokers(follower.Addr))
	if err != nil {
		return Sample{}, 0, err
	}
	defer client.Close()
	pids := []int{leader.Pid(), follower.Pid()}
	cpuStart, err := cpuOfAll(pids...)
	if err != nil {
		return Sample{}, 0, err
	}
	started := time.Now()
	if err := reassignKafkaTopic(ctx, client, data, []int32{leader.ID, follower.ID}); err != nil {
		return Sample{}, 0, err
	}
	var first time.Duration
	caughtUp, err := waitKafkaEndOffsets(ctx, direct(client), kafkaDebugReplica, data, func() { first = time.Since(started) })
	if err != nil {
		return Sample{}, 0, fmt.Errorf("the new replica did not catch up: %w", err)
	}
	sample, err := sampleOf(data, caughtUp.Sub(started), cpuStart, pids...)
	if err != nil {
		return Sample{}, 0, err
	}
	// Caught up in data; the reassignment completes when the ISR takes the
	// new replica in. Only then may the next one begin.
	if err := waitReassigned(ctx, client, data); err != nil {
		return Sample{}, 0, err
	}
	if err := reassignKafkaTopic(ctx, client, data, []int32{leader.ID}); err != nil {
		return Sample{}, 0, err
	}
	if err := waitReassigned(ctx, client, data); err != nil {
		return Sample{}, 0, err
	}
	if err := waitNoReplica(ctx, direct(client), data); err != nil {
		return Sample{}, 0, err
	}
	return sample, first, nil
}

// waitReassigned polls ListPartitionReassignments until no partition of
// data's topic is being reassigned.
func waitReassigned(ctx context.Context, client *kgo.Client, data kafkaTopicData) error {
	poll := time.NewTicker(kafkaPollEvery)
	defer poll.Stop()
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = int32(time.Minute / time.Millisecond)
	t := kmsg.NewListPartitionReassignmentsRequestTopic()
	t.Topic = data.topic
	for partition := range int32(len(data.endOffsets)) {
		t.Partitions = append(t.Partitions, partition)
	}
	req.Topics = append(req.Topics, t)
	for {
		resp, err := req.RequestWith(ctx, client)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil && len(resp.Topics) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: reassignment still in progress (error %v): %w", data.topic, err, ctx.Err())
		case <-poll.C:
		}
	}
}

// reassignKafkaTopic asks the cluster to move every partition of data's
// topic to replicas (AlterPartitionReassignments); it returns once the
// controller accepted, not once the replicas moved.
func reassignKafkaTopic(ctx context.Context, client *kgo.Client, data kafkaTopicData, replicas []int32) error {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = int32(time.Minute / time.Millisecond)
	t := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	t.Topic = data.topic
	for partition := range int32(len(data.endOffsets)) {
		p := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		p.Partition, p.Replicas = partition, replicas
		t.Partitions = append(t.Partitions, p)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return fmt.Errorf("reassign %s to %v: %w", data.topic, replicas, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("reassign %s to %v: %w", data.topic, replicas, err)
	}
	for _, topic := range resp.Topics {
		for _, p := range topic.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("reassign %s-%d to %v: %w", topic.Topic, p.Partition, replicas, err)
			}
		}
	}
	return nil
}

// waitNoReplica polls broker's log dirs until it holds no partition of
// data's topic.
func waitNoReplica(ctx context.Context, broker *kgo.Broker, data kafkaTopicData) error {
	poll := time.NewTicker(kafkaPollEvery)
	defer poll.Stop()
	for {
		held, err := kafkaLogPartitions(ctx, broker, data.topic, int32(len(data.endOffsets)))
		if err == nil && held == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %d partitions still on the removed replica (error %v): %w", data.topic, held, err, ctx.Err())
		case <-poll.C:
		}
	}
}
