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
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/mirrord/mirrord/netio"
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
	source, err := startKafkaCluster(ctx, libs, filepath.Join(tb.TempDir(), "source"), 1)
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
		fromSource, err := sourceScenarios(tb, libs, source, v, data[i], mode.Repeats)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v, err)
		}
		replication, err := replicationScenario(tb, libs, v, mode)
		if err != nil {
			return nil, fmt.Errorf("%s: kafka-replication: %w", v, err)
		}
		measurements = append(measurements, fromSource[:2]...)
		measurements = append(measurements, replication)
		measurements = append(measurements, fromSource[2:]...)
	}
	return measurements, nil
}

// sourceScenarios runs the scenarios that read the filled source broker:
// mirrord-from-kafka, mm2, serve-kafka and serve-mirrord, in that order.
func sourceScenarios(tb testing.TB, libs string, source *kafkatest.Cluster, v kafkaVariant, data kafkaTopicData, repeats int) ([]Measurement, error) {
	broker := source.Nodes[0]
	mirrored := Measurement{Scenario: "mirrord-from-kafka", Variant: v.String(),
		Note: "mirrord serve mirroring from a 1-node Kafka " + kafkatest.Version + ": StartMirrorTopics to caught up; CPU mirrord + broker"}
	mm2 := Measurement{Scenario: "mm2", Variant: v.String()}
	serveKafka := Measurement{Scenario: "serve-kafka", Variant: v.String(),
		Note: "kgo consumer from offset 0, no group, from the Kafka broker; CPU broker + consumer"}
	serveMirrord := Measurement{Scenario: "serve-mirrord", Variant: v.String(),
		Note: "kgo consumer from offset 0, no group, from the mirrord that mirrored the topic; CPU mirrord + consumer"}
	for range repeats {
		mirrorSample, serveSample, err := mirrordFromKafkaOnce(tb, source, data)
		if err != nil {
			return nil, fmt.Errorf("mirrord-from-kafka: %w", err)
		}
		mirrored.Samples = append(mirrored.Samples, mirrorSample)
		serveMirrord.Samples = append(serveMirrord.Samples, serveSample)
		served, err := consumeSample(tb, broker.Addr, data, broker.Pid())
		if err != nil {
			return nil, fmt.Errorf("serve-kafka: %w", err)
		}
		serveKafka.Samples = append(serveKafka.Samples, served)
	}
	if err := kafkatest.MirrorMakerInstalled(libs); err != nil {
		mm2.Note = fmt.Sprintf("not measured: %v", err)
		return []Measurement{mirrored, mm2, serveKafka, serveMirrord}, nil
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
	return []Measurement{mirrored, mm2, serveKafka, serveMirrord}, nil
}

// mirrordFromKafkaOnce starts a mirrord on a fresh data directory, mirrors
// the topic from source until caught up, then reads it back with a
// consumer; it returns both samples.
func mirrordFromKafkaOnce(tb testing.TB, source *kafkatest.Cluster, data kafkaTopicData) (mirror, serve Sample, err error) {
	broker := source.Nodes[0]
	dir := filepath.Join(tb.TempDir(), "mirrord")
	process := startMirrord(tb, dir)
	defer os.RemoveAll(dir) // as many bytes as the source
	defer process.kill()
	client := process.client()
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaRunWait)
	defer cancel()
	if err := createMirror(ctx, client, broker.Addr); err != nil {
		return mirror, serve, err
	}
	pids := []int{process.cmd.Process.Pid, broker.Pid()}
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
	if serve, err = consumeSample(tb, process.addr, data, process.cmd.Process.Pid); err != nil {
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

// startKafkaCluster starts a KRaft cluster of brokers nodes in dir.
func startKafkaCluster(ctx context.Context, libs, dir string, brokers int) (*kafkatest.Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, kafkaStartWait)
	defer cancel()
	cluster, err := kafkatest.Start(ctx, kafkatest.Options{Libs: libs, Dir: dir, Brokers: brokers})
	if err != nil {
		return nil, fmt.Errorf("start Kafka %s (%d nodes): %w", kafkatest.Version, brokers, err)
	}
	return cluster, nil
}

// createAndFill creates v's topic on node alone (replication factor 1)
// and fills it.
func createAndFill(ctx context.Context, node *kafkatest.Node, v kafkaVariant, totalBytes int64) (kafkaTopicData, error) {
	ctx, cancel := context.WithTimeout(ctx, kafkaFillWait)
	defer cancel()
	if err := createKafkaTopic(ctx, node.Addr, v.topic(), v.partitions, []int32{node.ID}); err != nil {
		return kafkaTopicData{}, err
	}
	return fillKafka(ctx, node.Addr, v.topic(), v.partitions, totalBytes)
}

// createKafkaTopic creates topic on the cluster of the broker at addr with
// replicas as every partition's replica list (the first leads), then
// waits until that broker answers ListOffsets for every partition.
func createKafkaTopic(ctx context.Context, addr, topic string, partitions int32, replicas []int32) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer client.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(time.Minute / time.Millisecond)
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, -1, -1
	for partition := range partitions {
		assignment := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		assignment.Partition, assignment.Replicas = partition, replicas
		t.ReplicaAssignment = append(t.ReplicaAssignment, assignment)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("create topic %s: %d topics in the answer", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	empty := kafkaTopicData{topic: topic, endOffsets: make([]int64, partitions)}
	if _, err := waitKafkaEndOffsets(ctx, direct(client), kafkaDebugReplica, empty, nil); err != nil {
		return fmt.Errorf("created topic %s not served: %w", topic, err)
	}
	return nil
}

// fillKafka produces 1 KiB records round-robin over the partitions of topic,
// led by the broker at addr, with lz4, a 5 ms linger and acks=all, in rounds
// (produce, flush, measure the log) until that broker's log of the topic
// holds at least totalBytes of record batches. The first round writes
// about an eighth of them; the next ones what the measured bytes per
// record say is missing.
func fillKafka(ctx context.Context, addr, topic string, partitions int32, totalBytes int64) (kafkaTopicData, error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerLinger(kafkaLinger), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return kafkaTopicData{}, err
	}
	defer client.Close()
	data := kafkaTopicData{topic: topic, endOffsets: make([]int64, partitions)}
	values := newValueSource()
	round := max(1, totalBytes/kafkaRecordBytes/4) // lz4 halves the values
	for range kafkaFillRounds {
		if err := produceRecords(ctx, client, values, &data, round); err != nil {
			return data, err
		}
		if data.bytes, err = kafkaLogBytes(ctx, direct(client), topic, partitions); err != nil {
			return data, err
		}
		if data.bytes >= totalBytes {
			break
		}
		perRecord := max(1, data.bytes/data.records)
		round = max(1, (totalBytes-data.bytes)/perRecord+1)
	}
	if data.bytes < totalBytes {
		return data, fmt.Errorf("fill %s: %d of %d bytes after %d rounds", topic, data.bytes, totalBytes, kafkaFillRounds)
	}
	got, err := listKafkaEndOffsets(ctx, direct(client), kafkaDebugReplica, topic, partitions)
	if err != nil {
		return data, err
	}
	if !slices.Equal(got, data.endOffsets) {
		return data, fmt.Errorf("fill %s: log end offsets %v, produced %v", topic, got, data.endOffsets)
	}
	return data, nil
}

// produceRecords produces count records after data's, round-robin over
// its partitions, and waits until every one is acknowledged.
func produceRecords(ctx context.Context, client *kgo.Client, values *valueSource, data *kafkaTopicData, count int64) error {
	var mu sync.Mutex
	var firstErr error
	partitions := int64(len(data.endOffsets))
	for i := range count {
		partition := (data.records + i) % partitions
		record := &kgo.Record{Partition: int32(partition), Value: values.next()}
		client.Produce(ctx, record, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if firstErr == nil {
				firstErr = err
			}
		}) // blocks while kgo's buffer (10,000 records) is full: bounded
		data.endOffsets[partition]++
	}
	if err := client.Flush(ctx); err != nil {
		return err
	}
	data.records += count
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("produce to %s: %w", data.topic, firstErr)
	}
	return nil
}

// valueSource makes distinct 1 KiB values as benchBatch does: half
// pseudo-random (seeded, so every run writes the same), half text.
type valueSource struct {
	random *rand.Rand
	text   []byte
	count  int
}

func newValueSource() *valueSource {
	return &valueSource{random: rand.New(rand.NewPCG(1, 2)),
		text: bytes.Repeat([]byte("mirrord mirrors topics byte for byte. "), kafkaRecordBytes/2)}
}

func (s *valueSource) next() []byte {
	value := make([]byte, kafkaRecordBytes)
	for i := 0; i+8 <= kafkaRecordBytes/2; i += 8 {
		binary.LittleEndian.PutUint64(value[i:], s.random.Uint64())
	}
	copy(value[kafkaRecordBytes/2:], s.text[s.count%kafkaRecordBytes:])
	s.count++
	return value
}

// direct is the broker a client was seeded with (exactly one address):
// requests go to that address without a metadata lookup, which works
// while the broker is still starting or is not yet in any metadata.
func direct(client *kgo.Client) *kgo.Broker { return client.SeedBrokers()[0] }

// listKafkaEndOffsets asks broker for the latest offset of every partition
// of topic; as replica kafkaDebugReplica a Kafka broker answers the log
// end offset from any replica, as -1 (a consumer) the high watermark from
// the leader. A partition error is an error.
func listKafkaEndOffsets(ctx context.Context, broker *kgo.Broker, replicaID int32, topic string, partitions int32) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = replicaID
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = topic
	for partition := range partitions {
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp, p.CurrentLeaderEpoch = partition, -1, -1
		t.Partitions = append(t.Partitions, p)
	}
	req.Topics = append(req.Topics, t)
	kresp, err := broker.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != int(partitions) {
		return nil, fmt.Errorf("list offsets %s: %d topics in the answer", topic, len(resp.Topics))
	}
	offsets := make([]int64, partitions)
	for _, p := range resp.Topics[0].Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return nil, fmt.Errorf("list offsets %s-%d: %w", topic, p.Partition, err)
		}
		if p.Partition < 0 || p.Partition >= partitions {
			return nil, fmt.Errorf("list offsets %s: partition %d in the answer", topic, p.Partition)
		}
		offsets[p.Partition] = p.Offset
	}
	return offsets, nil
}

// waitKafkaEndOffsets polls listKafkaEndOffsets until it answers data's
// end offsets and returns when it first did; it fails when ctx ends or an
// offset passes data's. It calls first, if not nil, when the offsets
// first sum to more than zero.
func waitKafkaEndOffsets(ctx context.Context, broker *kgo.Broker, replicaID int32, data kafkaTopicData, first func()) (time.Time, error) {
	poll := time.NewTicker(kafkaPollEvery)
	defer poll.Stop()
	partitions := int32(len(data.endOffsets))
	for {
		got, err := listKafkaEndOffsets(ctx, broker, replicaID, data.topic, partitions)
		now := time.Now()
		if err == nil {
			if slices.Equal(got, data.endOffsets) {
				if first != nil && data.records > 0 {
					first()
				}
				return now, nil
			}
			var sum int64
			for i, offset := range got {
				if offset > data.endOffsets[i] {
					return now, fmt.Errorf("log end offsets %v, beyond %v", got, data.endOffsets)
				}
				sum += offset
			}
			if first != nil && sum > 0 {
				first()
				first = nil
			}
		}
		select {
		case <-ctx.Done():
			return now, fmt.Errorf("log end offsets of %s %v (error %v), want %v: %w", data.topic, got, err, data.endOffsets, context.Cause(ctx))
		case <-poll.C:
		}
	}
}

// kafkaLogBytes is the size of the logs of every partition of topic on
// broker (DescribeLogDirs): the record batch bytes it stores.
func kafkaLogBytes(ctx context.Context, broker *kgo.Broker, topic string, partitions int32) (int64, error) {
	sizes, err := kafkaLogSizes(ctx, broker, topic, partitions)
	if err != nil {
		return 0, err
	}
	if len(sizes) != int(partitions) {
		return 0, fmt.Errorf("describe log dirs: %d of %d partitions of %s", len(sizes), partitions, topic)
	}
	var total int64
	for _, size := range sizes {
		total += size
	}
	return total, nil
}

// kafkaLogPartitions is how many partitions of topic broker holds.
func kafkaLogPartitions(ctx context.Context, broker *kgo.Broker, topic string, partitions int32) (int, error) {
	sizes, err := kafkaLogSizes(ctx, broker, topic, partitions)
	return len(sizes), err
}

// kafkaLogSizes is the log size of each partition of topic (of the first
// partitions) that broker holds, by partition (DescribeLogDirs).
func kafkaLogSizes(ctx context.Context, broker *kgo.Broker, topic string, partitions int32) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeLogDirsRequest()
	t := kmsg.NewDescribeLogDirsRequestTopic()
	t.Topic = topic
	for partition := range partitions {
		t.Partitions = append(t.Partitions, partition)
	}
	req.Topics = append(req.Topics, t)
	kresp, err := broker.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.DescribeLogDirsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("describe log dirs: %w", err)
	}
	sizes := map[int32]int64{}
	for _, dir := range resp.Dirs {
		if err := kerr.ErrorForCode(dir.ErrorCode); err != nil {
			return nil, fmt.Errorf("describe log dir %s: %w", dir.Dir, err)
		}
		for _, dt := range dir.Topics {
			for _, p := range dt.Partitions {
				if dt.Topic == topic && !p.IsFuture && p.Partition >= 0 && p.Partition < partitions {
					sizes[p.Partition] += p.Size
				}
			}
		}
	}
	return sizes, nil
}

// consumeSample reads the topic from the start with a kgo consumer
// (consumeAll) from the server at addr and measures it: CPU of the server
// and of this process, PeakRSS of the server.
func consumeSample(tb testing.TB, addr string, data kafkaTopicData, serverPid int) (Sample, error) {
	serverStart, err := processCPUOf(serverPid)
	if err != nil {
		return Sample{}, err
	}
	selfStart, started := processCPU(), time.Now()
	consumeAll(tb, addr, data.topic, int32(len(data.endOffsets)), data.records)
	wall, self := time.Since(started), processCPU()-selfStart
	sample, err := sampleOf(data, wall, serverStart, serverPid)
	sample.CPU += self
	return sample, err
}

// sampleOf is a run over data that took wall, with the CPU time of pids
// since it was cpuStart and their largest peak RSS.
func sampleOf(data kafkaTopicData, wall, cpuStart time.Duration, pids ...int) (Sample, error) {
	cpu, err := cpuOfAll(pids...)
	if err != nil {
		return Sample{}, err
	}
	rss, err := peakRSSOfAll(pids...)
	if err != nil {
		return Sample{}, err
	}
	return Sample{Wall: wall, Bytes: data.bytes, Records: data.records, CPU: cpu - cpuStart, PeakRSS: rss}, nil
}

// cpuOfAll is the CPU time of live processes, summed.
func cpuOfAll(pids ...int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		if pid <= 0 {
			return 0, fmt.Errorf("cpu: process %d not running", pid)
		}
		cpu, err := processCPUOf(pid)
		if err != nil {
			return 0, err
		}
		total += cpu
	}
	return total, nil
}

// peakRSSOf is the peak resident set (VmHWM) of a live process, bytes.
func peakRSSOf(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(status)) {
		value, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("/proc/%d/status: VmHWM %q", pid, value)
		}
		kib, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status: VmHWM: %w", pid, err)
		}
		return kib << 10, nil
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmHWM", pid)
}

// peakRSSOfAll is the largest peakRSSOf of live processes.
func peakRSSOfAll(pids ...int) (int64, error) {
	var peak int64
	for _, pid := range pids {
		rss, err := peakRSSOf(pid)
		if err != nil {
			return 0, err
		}
		peak = max(peak, rss)
	}
	return peak, nil
}

// cancelWhenClosed returns ctx canceled with cause once done is closed;
// stop ends the watch (and cancels the returned context).
func cancelWhenClosed(ctx context.Context, done <-chan struct{}, cause error) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stopped, watching := make(chan struct{}), make(chan struct{})
	go func() { // owned: stop waits for it
		defer close(watching)
		select {
		case <-done:
			cancel(cause)
		case <-stopped:
		}
	}()
	return ctx, func() {
		close(stopped)
		<-watching
		cancel(nil)
	}
}

// startMirrorTopicNamed starts mirroring topic in the mirror of
// createMirror.
func startMirrorTopicNamed(ctx context.Context, client *kgo.Client, topic string) error {
	req := &netio.MirrorTopicsRequest{Change: netio.StartMirroring, MirrorName: mirrorName,
		Topics: []netio.MirrorTopicsRequestTopic{{TopicName: topic}}}
	kresp, err := client.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("start mirror topics: %w", err)
	}
	resp := kresp.(*netio.MirrorTopicsResponse)
	if resp.ErrorCode != 0 {
		return fmt.Errorf("start mirror topics: %w", kerr.ErrorForCode(resp.ErrorCode))
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		return fmt.Errorf("start mirror topics: topic results %+v", resp.Topics)
	}
	return nil
}

// TestKafkaScenariosSmoke runs kafkaScenarios in smoke mode (4 MiB, one
// repeat) so that `make test` keeps the real-Kafka harness working; it
// asserts no timing. It skips without Java or the Kafka jars, and fails
// then under CI=true. MirrorMaker 2 may be missing alone (not every
// registry serves connect-mirror): its row must then say so.
//
// MIRRORD_BENCH_KAFKA=quick (or full) runs that mode instead, to read the
// numbers of one run without the report:
//
//	MIRRORD_BENCH_KAFKA=quick go test -count=1 -timeout 30m -run TestKafkaScenariosSmoke -v ./bench/
func TestKafkaScenariosSmoke(t *testing.T) {
	mode := benchModes["smoke"]
	if name := os.Getenv("MIRRORD_BENCH_KAFKA"); name != "" {
		var ok bool
		if mode, ok = benchModes[name]; !ok {
			t.Fatalf("MIRRORD_BENCH_KAFKA=%q: want smoke, quick or full", name)
		}
	}
	libs, err := kafkatest.Libs(".")
	if err == nil {
		var measurements []Measurement
		if measurements, err = kafkaScenarios(t, mode); err == nil {
			for _, m := range measurements {
				t.Log(formatMeasurement(m))
			}
			checkKafkaMeasurements(t, mode, measurements, kafkatest.MirrorMakerInstalled(libs))
			return
		}
	}
	if !errors.Is(err, kafkatest.ErrNotInstalled) {
		t.Fatal(err)
	}
	message := fmt.Sprintf("%v: run `make tools` (scripts/install-kafka.sh)", err)
	if os.Getenv("CI") == "true" {
		t.Fatal(message)
	}
	t.Skip(message)
}

// checkKafkaMeasurements requires one row per scenario and variant, each
// with mode.Repeats samples that moved bytes; the mm2 rows instead say
// "not measured" when mirrorMakerErr is not nil.
func checkKafkaMeasurements(t *testing.T, mode benchMode, measurements []Measurement, mirrorMakerErr error) {
	t.Helper()
	rows := map[[2]string]Measurement{}
	for _, m := range measurements {
		key := [2]string{m.Scenario, m.Variant}
		if _, ok := rows[key]; ok {
			t.Errorf("%s / %s: two rows", m.Scenario, m.Variant)
		}
		rows[key] = m
	}
	if want := 5 * len(kafkaVariants(mode)); len(measurements) != want {
		t.Errorf("%d rows, want %d", len(measurements), want)
	}
	for _, v := range kafkaVariants(mode) {
		for _, scenario := range []string{"mirrord-from-kafka", "mm2", "kafka-replication", "serve-kafka", "serve-mirrord"} {
			m, ok := rows[[2]string{scenario, v.String()}]
			switch {
			case !ok:
				t.Errorf("%s / %s: missing", scenario, v)
			case scenario == "mm2" && mirrorMakerErr != nil:
				if len(m.Samples) != 0 || !strings.HasPrefix(m.Note, "not measured") {
					t.Errorf("mm2 / %s without MirrorMaker 2: %d samples, note %q", v, len(m.Samples), m.Note)
				}
				t.Logf("mm2 / %s not measured: %v", v, mirrorMakerErr)
			case len(m.Samples) != mode.Repeats:
				t.Errorf("%s / %s: %d samples, want %d", scenario, v, len(m.Samples), mode.Repeats)
			default:
				for i, s := range m.Samples {
					if s.Bytes <= 0 || s.Records <= 0 || s.Wall <= 0 || s.PeakRSS <= 0 {
						t.Errorf("%s / %s sample %d: %+v", scenario, v, i, s)
					}
				}
			}
		}
	}
}

// formatMeasurement is a row as the test log shows it: per sample MB/s,
// CPU-seconds per GB and peak RSS.
func formatMeasurement(m Measurement) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-18s %-18s", m.Scenario, m.Variant)
	for _, s := range m.Samples {
		gb := float64(s.Bytes) / 1e9
		fmt.Fprintf(&b, " | %.0f MB/s, %.2f CPU-s/GB, %d MiB RSS (%d B in %v)",
			gb*1e3/s.Wall.Seconds(), s.CPU.Seconds()/gb, s.PeakRSS>>20, s.Bytes, s.Wall.Round(time.Millisecond))
	}
	if m.Note != "" {
		fmt.Fprintf(&b, "\n    %s", m.Note)
	}
	return b.String()
}
