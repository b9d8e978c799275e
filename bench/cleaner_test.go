package bench

// The cleaner scenario: the same keyed log (100-byte values over
// cleanerBenchKeys keys, uncompressed) written to a Kafka 4.4 broker and
// to mirrord, in one segment that a last large record rolls, so that each
// cleaner cleans it in one pass. Per sample: the dirty segment's bytes,
// the wall time from that roll to the cleaner's checkpoint passing it
// (polled every cleanerPollInterval; both cleaners look every 100 ms),
// and the CPU time of the cleaning: Kafka's cleaner thread
// (kafka-log-cleaner-thread-0, from /proc/<pid>/task) and mirrord's
// whole process (idle but for the cleaning).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/mirrord/mirrord/mirrordtest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	cleanerBenchKeys    = 100_000
	cleanerPollInterval = 20 * time.Millisecond
	cleanerWait         = 5 * time.Minute
	// cleanerSegmentSlack: the data stops within half of it below
	// segment.bytes, so that one record (under message.max.bytes) rolls
	// the segment.
	cleanerSegmentSlack = 512 << 10
)

// cleanerScenarios measures the cleaner of Kafka and of mirrord on the
// same data, mode.Repeats times each.
func cleanerScenarios(tb testing.TB, mode benchMode) ([]Measurement, error) {
	tb.Helper()
	libs, err := kafkatest.Libs(".")
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	dir := tb.TempDir()
	cluster, err := kafkatest.Start(ctx, kafkatest.Options{Libs: libs, Dir: filepath.Join(dir, "kafka"), Brokers: 1,
		Config: map[string]string{"log.cleaner.backoff.ms": "100"}})
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	mirrord := &mirrordtest.Server{Binary: mirrordBinary(tb), DataDir: filepath.Join(dir, "mirrord"), LogPath: filepath.Join(dir, "mirrord.log"),
		Args: []string{"--log-cleaner-backoff-ms", "100"}}
	if err := mirrord.Start(); err != nil {
		return nil, err
	}
	defer mirrord.Close()
	segmentBytes := mode.Bytes
	variant := fmt.Sprintf("1 partition, %d MiB, %d keys, none", mode.Bytes>>20, cleanerBenchKeys)
	kafka := Measurement{Scenario: "cleaner-kafka", Variant: variant,
		Note: "Kafka 4.4's log cleaner: one pass over one dirty segment; CPU of its cleaner thread"}
	ours := Measurement{Scenario: "cleaner-mirrord", Variant: variant,
		Note: "mirrord's log cleaner on the same data; CPU of the whole mirrord process"}
	node := cluster.Nodes[0]
	for i := range mode.Repeats {
		topic := fmt.Sprintf("cleaned-%d", i)
		sample, err := cleanerSample(ctx, node.Addr, topic, segmentBytes,
			func() string { return kafkaPartitionDir(cluster, dir, topic) },
			func() (bool, error) { return kafkaCleanedPast(cluster, dir, topic) },
			func() (time.Duration, error) { return threadCPUOf(node.Pid(), "kafka-log-clean") })
		if err != nil {
			return nil, fmt.Errorf("kafka: %w\n%s", err, cluster.Logs())
		}
		kafka.Samples = append(kafka.Samples, sample)
		sample, err = cleanerSample(ctx, mirrord.Addr(), topic, segmentBytes,
			func() string { return filepath.Join(mirrord.DataDir, topic+"-0") },
			func() (bool, error) { return checkpointPastActive(filepath.Join(mirrord.DataDir, topic+"-0")) },
			func() (time.Duration, error) { return processCPUOf(mirrord.Pid()) })
		if err != nil {
			return nil, fmt.Errorf("mirrord: %w", err)
		}
		ours.Samples = append(ours.Samples, sample)
	}
	return []Measurement{ours, kafka}, nil
}

// cleanerSample creates topic on the server at addr, fills one segment
// of segmentBytes nearly full, rolls it, and measures its cleaning.
func cleanerSample(ctx context.Context, addr, topic string, segmentBytes int64, partitionDir func() string,
	cleaned func() (bool, error), cpu func() (time.Duration, error)) (Sample, error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return Sample{}, err
	}
	defer client.Close()
	configs := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": strconv.FormatInt(segmentBytes, 10),
		"min.cleanable.dirty.ratio": "0.5", "segment.ms": "604800000"} {
		configs[k] = &v
	}
	created, err := kadm.NewClient(client).CreateTopic(ctx, 1, 1, configs, topic)
	if err == nil {
		err = created.Err
	}
	if err != nil {
		return Sample{}, fmt.Errorf("create %s: %w", topic, err)
	}
	value := bytes.Repeat([]byte("v"), 100)
	var records int64
	// Fill to within cleanerSegmentSlack/2 of segment.bytes, measuring the
	// segment between rounds (a record takes about 120 bytes).
	var dirty int64
	for rounds := 0; segmentBytes-dirty > cleanerSegmentSlack/2; rounds++ {
		if rounds == 1000 {
			return Sample{}, fmt.Errorf("segment at %d of %d bytes after %d rounds", dirty, segmentBytes, rounds)
		}
		batch := make([]*kgo.Record, min(10_000, max((segmentBytes-dirty-cleanerSegmentSlack/4)/130, 1)))
		for i := range batch {
			batch[i] = &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%08d", (records*7919)%cleanerBenchKeys), Value: value}
			records++
		}
		if err := client.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			return Sample{}, err
		}
		if dirty, err = activeSegmentBytes(partitionDir()); err != nil {
			return Sample{}, err
		}
	}
	if bases, err := segmentBases(partitionDir()); err != nil || len(bases) != 1 {
		return Sample{}, fmt.Errorf("the data rolled before the roll record: segments %v, %v", bases, err)
	}
	roll := &kgo.Record{Topic: topic, Key: []byte("roll"), Value: bytes.Repeat([]byte("r"), int(max(segmentBytes-dirty+1024, 1024)))}
	cpuStart, err := cpu()
	if err != nil {
		return Sample{}, err
	}
	if err := client.ProduceSync(ctx, roll).FirstErr(); err != nil {
		return Sample{}, fmt.Errorf("roll record of %d bytes: %w", len(roll.Value), err)
	}
	start := time.Now()
	waitCtx, cancel := context.WithTimeout(ctx, cleanerWait)
	defer cancel()
	if err := pollUntil(waitCtx, cleanerPollInterval, cleaned); err != nil {
		return Sample{}, fmt.Errorf("%s not cleaned: %w", topic, err)
	}
	wall := time.Since(start)
	cpuEnd, err := cpu()
	if err != nil {
		return Sample{}, err
	}
	return Sample{Wall: wall, Bytes: dirty, Records: records, CPU: cpuEnd - cpuStart}, nil
}

// activeSegmentBytes is the size of the last .log file of a partition.
func activeSegmentBytes(dir string) (int64, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(names) == 0 {
		return 0, fmt.Errorf("no segment in %s: %v", dir, err)
	}
	info, err := os.Stat(names[len(names)-1])
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// segmentBases are the base offsets of a partition's segments.
func segmentBases(dir string) ([]int64, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, name := range names {
		n, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(name), ".log"), 10, 64)
		if err == nil {
			bases = append(bases, n)
		}
	}
	return bases, nil
}

// checkpointPastActive reports whether mirrord's cleaner checkpoint of a
// partition reached its active segment (two segments: the cleaned one and
// the one the roll record started).
func checkpointPastActive(dir string) (bool, error) {
	bases, err := segmentBases(dir)
	if err != nil || len(bases) < 2 {
		return false, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "cleaner-offset-checkpoint"))
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(string(data), "0\n")), 10, 64)
	return err == nil && n >= bases[len(bases)-1], err
}

// kafkaPartitionDir is the directory of partition 0 of topic on the one
// broker.
func kafkaPartitionDir(cluster *kafkatest.Cluster, dir, topic string) string {
	names, _ := filepath.Glob(filepath.Join(dir, "kafka", "*", "node-*", "data", topic+"-0"))
	if len(names) == 0 {
		names, _ = filepath.Glob(filepath.Join(dir, "kafka", "node-*", "data", topic+"-0"))
	}
	if len(names) == 0 {
		return filepath.Join(dir, "kafka", "missing", topic+"-0")
	}
	return names[0]
}

// kafkaCleanedPast reports whether Kafka's cleaner-offset-checkpoint
// ("0\n<count>\n<topic> <partition> <offset>\n...") holds topic-0 at its
// active segment's base.
func kafkaCleanedPast(cluster *kafkatest.Cluster, dir, topic string) (bool, error) {
	partition := kafkaPartitionDir(cluster, dir, topic)
	bases, err := segmentBases(partition)
	if err != nil || len(bases) < 2 {
		return false, err
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(partition), "cleaner-offset-checkpoint"))
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 3 && fields[0] == topic && fields[1] == "0" {
			n, err := strconv.ParseInt(fields[2], 10, 64)
			return err == nil && n >= bases[len(bases)-1], err
		}
	}
	return false, nil
}

// threadCPUOf sums utime + stime of the threads of pid whose name starts
// with prefix (/proc/<pid>/task/<tid>/stat).
func threadCPUOf(pid int, prefix string) (time.Duration, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	var total time.Duration
	found := false
	for _, task := range tasks {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/comm", pid, task.Name()))
		if err != nil || !strings.HasPrefix(string(comm), prefix) {
			continue
		}
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		cpu, err := processCPUOf(tid) // /proc/<tid>/stat is the thread's own
		if err != nil {
			return 0, err
		}
		total += cpu
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no thread %s* in process %d", prefix, pid)
	}
	return total, nil
}

// TestCleanerScenarioSmoke runs the cleaner scenario on tiny sizes (numbers
// not judged): each side cleans, and the row has its sample. It skips
// without the Kafka jars (fails then under CI=true).
//
//	MIRRORD_BENCH_CLEANER=quick go test -count=1 -run TestCleanerScenarioSmoke -v ./bench/
func TestCleanerScenarioSmoke(t *testing.T) {
	mode := benchModes["smoke"]
	if name := os.Getenv("MIRRORD_BENCH_CLEANER"); name != "" {
		mode = benchModes[name]
	}
	measurements, err := cleanerScenarios(t, mode)
	if err != nil {
		if errors.Is(err, kafkatest.ErrNotInstalled) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	for _, m := range measurements {
		t.Log(formatMeasurement(m))
		if len(m.Samples) != mode.Repeats || m.Samples[0].Bytes <= 0 || m.Samples[0].Wall <= 0 || m.Samples[0].CPU <= 0 {
			t.Errorf("%s: samples %+v", m.Scenario, m.Samples)
		}
	}
}
