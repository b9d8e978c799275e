package bench

// Helpers of the real-Kafka scenarios (kafka_test.go): clusters, topics,
// filling, offsets, CPU and memory of processes.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/mirrord/mirrord/mirrorwire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startKafkaCluster starts a KRaft cluster of brokers nodes in dir.
func startKafkaCluster(ctx context.Context, libs, dir string, brokers int) (*kafkatest.Cluster, error) {
	return startKafka(ctx, kafkatest.Options{Libs: libs, Dir: dir, Brokers: brokers})
}

// startKafka starts the cluster of opts, within kafkaStartWait.
func startKafka(ctx context.Context, opts kafkatest.Options) (*kafkatest.Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, kafkaStartWait)
	defer cancel()
	cluster, err := kafkatest.Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("start Kafka %s (%d nodes): %w", kafkatest.Version, opts.Brokers, err)
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
	offsets, err := listLatestOffsets(ctx, broker, replicaID, []string{topic}, partitions)
	if err != nil {
		return nil, err
	}
	return offsets[0], nil
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
// (consumeAll, opts added to its client's) from the server at addr and
// measures it: CPU of the server and of this process, PeakRSS of the
// server.
func consumeSample(tb testing.TB, addr string, data kafkaTopicData, serverPid int, opts ...kgo.Opt) (Sample, error) {
	serverStart, err := processCPUOf(serverPid)
	if err != nil {
		return Sample{}, err
	}
	selfStart, started := processCPU(), time.Now()
	consumeAll(tb, addr, data.topic, int32(len(data.endOffsets)), data.records, opts...)
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
	req := &mirrorwire.MirrorTopicsRequest{Change: mirrorwire.StartMirroring, MirrorName: mirrorName,
		Topics: []mirrorwire.MirrorTopicsRequestTopic{{TopicName: topic}}}
	kresp, err := client.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("start mirror topics: %w", err)
	}
	resp := kresp.(*mirrorwire.MirrorTopicsResponse)
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
	parallelInSmoke(t, mode)
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
	if want := 7 * len(kafkaVariants(mode)); len(measurements) != want {
		t.Errorf("%d rows, want %d", len(measurements), want)
	}
	for _, v := range kafkaVariants(mode) {
		for _, scenario := range []string{"mirrord-from-kafka", "mm2", "kafka-replication", "serve-kafka", "serve-kafka-tls", "serve-mirrord", "serve-mirrord-tls"} {
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
