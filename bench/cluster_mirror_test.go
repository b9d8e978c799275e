package bench

// The cluster scenario's mirror rows: the bench's mirrord source (the
// mirror scenario's startSource: clusterPartitions partitions of 1 KiB
// records, 16 to a batch, uncompressed, mode.Bytes of batches, filled
// offline and served by one `mirrord serve`) mirrored into three mirrord
// nodes on one etcd, once with default.replication.factor 1 and once
// with 3, a fresh cluster per sample. The mirror is created and its topic
// started through node 1 with the mirror admin RPCs (as `mirrord mirrors
// --create` and `--start` do); the clock runs from StartMirrorTopics
// until every replica of every partition (the leader's, and with RF 3 the
// followers') holds as many log bytes as the source's partition: a mirror
// appends the source's batches as sent, so that is the source's log end.
// The condition is polled on the segment files' sizes (a stat per
// replica every 10 ms, nothing read). CPU is the three mirrord nodes'
// (not etcd's, not the source's: the produce rows count the same); Bytes
// the source's batch bytes, which each replica stores.
//
// Checked on every sample, after the clock: the topic has the
// replication factor asked, every replica's log is byte-identical to the
// source's partition (a SHA-256 of the segments), and each partition's
// leader answers the source's log end offset (ListOffsets).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kadm"
)

const (
	scenarioClusterMirror   = "cluster-mirror"
	variantClusterMirrorRF1 = "3 nodes, RF 1"
	variantClusterMirrorRF3 = "3 nodes, RF 3"
	clusterMirrorTitle      = "Cluster: mirroring"
)

// clusterMirrorScenario measures mirroring one source into three nodes
// with replication factor 1, then 3: a row each, mode.Repeats samples.
// Then, on the last RF 3 cluster, it runs the failover rounds on the
// mirror topic while a producer writes to the source.
func clusterMirrorScenario(tb testing.TB, mode benchMode, check bool) ([]Measurement, []failoverRound, error) {
	tb.Helper()
	began := time.Now()
	defer func() { tb.Logf("cluster mirror: the scenario took %v", time.Since(began).Round(time.Millisecond)) }()
	source := startSource(tb, mirrorCase{partitions: clusterPartitions, codec: rb.CodecNone, totalBytes: int(mode.Bytes)})
	defer source.process.stop()
	logs := make([]replicaLogs, clusterPartitions)
	for p := range logs {
		var err error
		if logs[p], err = readReplicaLogs(filepath.Join(source.process.proc.DataDir, fmt.Sprintf("%s-%d", mirrorTopic, p))); err != nil {
			return nil, nil, fmt.Errorf("cluster mirror: source: %w", err)
		}
	}
	var rows []Measurement
	var rounds []failoverRound
	for _, v := range []struct {
		variant string
		rf      int
	}{{variantClusterMirrorRF1, 1}, {variantClusterMirrorRF3, 3}} {
		row := Measurement{Scenario: scenarioClusterMirror, Variant: v.variant,
			Note: fmt.Sprintf("a mirrord source (%d partitions, 1 KiB records, uncompressed) mirrored into three mirrord nodes on one etcd, a fresh cluster per sample, "+
				"StartMirrorTopics to every replica holding the source's bytes; CPU: the three nodes (not etcd, not the source); bytes: the source's batches, which one replica stores", clusterPartitions)}
		for sample := range mode.Repeats {
			c := startBenchCluster(tb, 3, v.rf)
			s, err := clusterMirrorSample(tb, c, source, logs, v.rf)
			if err == nil && v.rf == 3 && sample == mode.Repeats-1 {
				rounds, _, err = clusterFailover(tb, c, mirrorTopic, source.process.addr, clusterRounds(mode), check)
			}
			c.stop()
			for _, dir := range c.dirs { // as many bytes as the source, RF times
				if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
					err = rerr
				}
			}
			if err != nil {
				return rows, rounds, fmt.Errorf("cluster mirror, %s, sample %d: %w", v.variant, sample, err)
			}
			row.Samples = append(row.Samples, s)
		}
		rows = append(rows, row)
	}
	return rows, rounds, nil
}

// clusterMirrorSample creates the mirror on c, starts the source's topic
// and returns the sample once every replica holds the source's bytes
// (source: each partition's log), then checks the replicas and the
// leaders' log end offsets.
func clusterMirrorSample(tb testing.TB, c *benchCluster, source mirrorSource, logs []replicaLogs, rf int) (Sample, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	admin := c.nodes[0].client()
	defer admin.Close()
	if err := createMirrorWith(ctx, admin, mirrorName, source.process.addr, nil); err != nil {
		return Sample{}, err
	}
	cpu, started := c.cpu(), time.Now()
	if err := startMirroring(ctx, admin, mirrorName, []string{mirrorTopic}, nil); err != nil {
		return Sample{}, err
	}
	ps, err := c.waitPartitions(ctx, mirrorTopic, "every partition of the mirror topic led with a full ISR", fullISR)
	if err != nil {
		return Sample{}, err
	}
	led := time.Since(started)
	var leadersHeld time.Duration // when every leader held the source's bytes
	if err := pollUntil(ctx, clusterPollInterval, func() (bool, error) {
		leaders, all, err := replicasHold(c, ps, logs)
		if leaders && leadersHeld == 0 {
			leadersHeld = time.Since(started)
		}
		return all, err
	}); err != nil {
		return Sample{}, fmt.Errorf("cluster mirror: replicas never held the source's bytes: %w", err)
	}
	wall, used := time.Since(started), c.cpu()-cpu
	if err := checkMirrorReplicas(ctx, c, ps, source, logs, rf); err != nil {
		return Sample{}, err
	}
	records := sum(source.endOffsets)
	tb.Logf("cluster mirror: 3 nodes, RF %d: %d records, %d bytes per replica, every partition led after %v, every leader caught up after %v, every replica after %v, %v CPU of the nodes",
		rf, records, source.bytes, led.Round(time.Millisecond), leadersHeld.Round(time.Millisecond), wall.Round(time.Millisecond), used)
	return Sample{Wall: wall, Bytes: source.bytes, Records: records, CPU: used}, nil
}

// replicasHold reports whether every partition's leader, and whether
// every replica of every partition, in ps holds as many log bytes as the
// source's partition (a stat of each segment; a replica whose directory
// does not exist yet holds none).
func replicasHold(c *benchCluster, ps kadm.PartitionDetails, logs []replicaLogs) (leaders, all bool, err error) {
	leaders, all = true, true
	for p := range int32(clusterPartitions) {
		for _, replica := range ps[p].Replicas {
			size, err := segmentsSize(filepath.Join(c.dirs[replica-1], fmt.Sprintf("%s-%d", mirrorTopic, p)))
			if err != nil {
				return false, false, err
			}
			if size > logs[p].size {
				return false, false, fmt.Errorf("%w: %s-%d: node %d holds %d log bytes, the source %d", errClusterCheck, mirrorTopic, p, replica, size, logs[p].size)
			}
			if size < logs[p].size {
				all = false
				leaders = leaders && replica != ps[p].Leader
			}
		}
	}
	return leaders, all, nil
}

// segmentsSize is the size of the segments in a partition's directory,
// 0 when it does not exist yet.
func segmentsSize(dir string) (int64, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return 0, err
	}
	var size int64
	for _, name := range names {
		info, err := os.Stat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted between the glob and the stat: not counted, polled again
		}
		if err != nil {
			return 0, err
		}
		size += info.Size()
	}
	return size, nil
}

// checkMirrorReplicas requires rf replicas of every partition, each
// byte-identical to the source's log, and each partition's leader to
// answer the source's log end offset.
func checkMirrorReplicas(ctx context.Context, c *benchCluster, ps kadm.PartitionDetails, source mirrorSource, logs []replicaLogs, rf int) error {
	if len(ps) != clusterPartitions {
		return fmt.Errorf("%w: the mirror topic has %d partitions, the source %d", errClusterCheck, len(ps), clusterPartitions)
	}
	for p := range int32(clusterPartitions) {
		if len(ps[p].Replicas) != rf {
			return fmt.Errorf("%w: %s-%d has replicas %v, want %d (default.replication.factor)", errClusterCheck, mirrorTopic, p, ps[p].Replicas, rf)
		}
		for _, replica := range ps[p].Replicas {
			got, err := readReplicaLogs(filepath.Join(c.dirs[replica-1], fmt.Sprintf("%s-%d", mirrorTopic, p)))
			if err != nil {
				return err
			}
			if got != logs[p] {
				return fmt.Errorf("%w: %s-%d: node %d's log (%d bytes) differs from the source's (%d bytes)", errClusterCheck, mirrorTopic, p, replica, got.size, logs[p].size)
			}
		}
	}
	client := c.client()
	defer client.Close()
	ends, err := kadm.NewClient(client).ListEndOffsets(ctx, mirrorTopic)
	if err != nil {
		return fmt.Errorf("cluster mirror: end offsets: %w", err)
	}
	got := make([]int64, clusterPartitions)
	for p := range int32(clusterPartitions) {
		end, ok := ends.Lookup(mirrorTopic, p)
		if !ok || end.Err != nil {
			return fmt.Errorf("cluster mirror: end offset of %s-%d: %v", mirrorTopic, p, end.Err)
		}
		got[p] = end.Offset
	}
	if !slices.Equal(got, source.endOffsets) {
		return fmt.Errorf("%w: the leaders answer end offsets %v, the source %v", errClusterCheck, got, source.endOffsets)
	}
	return nil
}

// clusterMirrorTable is the report's section of the mirror rows, beside
// the run's limits and the produce rows of the same replication factor.
func clusterMirrorTable(rows []row) Table {
	t := Table{
		Title: clusterMirrorTitle,
		Intro: fmt.Sprintf("The bench's mirrord source (%d partitions, 1 KiB records 16 to a batch, uncompressed, filled once) mirrored into three mirrord nodes on one etcd, ", clusterPartitions) +
			"with default.replication.factor 1 and 3, a fresh cluster per sample; the mirror created and started through one node with the mirror admin RPCs. " +
			"Timed from StartMirrorTopics to every replica of every partition (with RF 3 the followers too) holding the source's bytes, " +
			"checked byte-identical to the source's log with each leader answering the source's log end offset. " +
			"CPU-s/GB: the three mirrord nodes (not etcd, not the source), per GB that one replica stores. " +
			"The limits are the run's loopback copy and file write rows; the produce rows are the section above's (RF 1 there is one node); " +
			"the source, every node and etcd share this machine's cores (bench/cluster_mirror_test.go).",
		Columns: []string{"Figure", variantClusterMirrorRF1, variantClusterMirrorRF3, "RF 3 / RF 1"},
		Numbers: map[string]float64{},
	}
	addReplicationRows(&t, rows, scenarioClusterMirror, variantClusterMirrorRF1, variantClusterMirrorRF3)
	one, hasOne := findRow(rows, scenarioClusterMirror, variantClusterMirrorRF1)
	three, hasThree := findRow(rows, scenarioClusterMirror, variantClusterMirrorRF3)
	produceOne, hasProduceOne := findRow(rows, scenarioClusterProduce, variantClusterRF1)
	produceThree, hasProduceThree := findRow(rows, scenarioClusterProduce, variantClusterRF3)
	if hasOne && hasThree && hasProduceOne && hasProduceThree {
		addRatioRows(&t, "produce replication's", "Produce", one, three, produceOne, produceThree)
	}
	return t
}

// TestClusterMirrorTable checks the mirroring section's figures on rows
// of known rates: the ratios, the peers beside each, and which rows a
// missing peer leaves out.
func TestClusterMirrorTable(t *testing.T) {
	// measurement is one sample of mbps MB/s costing cpu CPU-s/GB.
	measurement := func(scenario, variant string, mbps, cpu float64) Measurement {
		bytes := int64(mbps * bytesPerMegabyte) // one second's worth
		return Measurement{Scenario: scenario, Variant: variant,
			Samples: []Sample{{Wall: time.Second, Bytes: bytes, Records: 1, CPU: time.Duration(cpu * float64(bytes) / bytesPerGigabyte * float64(time.Second))}}}
	}
	mirrorOne := measurement(scenarioClusterMirror, variantClusterMirrorRF1, 400, 1)
	mirrorThree := measurement(scenarioClusterMirror, variantClusterMirrorRF3, 100, 4)
	produceOne := measurement(scenarioClusterProduce, variantClusterRF1, 200, 2)
	produceThree := measurement(scenarioClusterProduce, variantClusterRF3, 50, 8)
	loopback := measurement(scenarioLimit, variantLimit, 1000, 0.5)
	write := measurement(scenarioLimit, variantFileWrite, 500, 0.25)
	for _, tc := range []struct {
		name         string
		measurements []Measurement
		rows         int
		numbers      map[string]float64 // each must be there, within 1e-9
		absent       []string
	}{
		{"every peer", []Measurement{mirrorOne, mirrorThree, produceOne, produceThree, loopback, write}, 8,
			map[string]float64{"rf1MegabytesPerSecond": 400, "rf3MegabytesPerSecond": 100, "rf3OverRF1Throughput": 0.25, "rf3OverRF1CPU": 4,
				"rf1OverLoopback": 0.4, "rf3OverLoopback": 0.1, "rf1OverFileWrite": 0.8, "rf1OverProduce": 2, "rf3OverProduce": 2}, nil},
		{"no produce rows", []Measurement{mirrorOne, mirrorThree, loopback, write}, 6,
			map[string]float64{"rf3OverRF1Throughput": 0.25, "rf3OverFileWrite": 0.2}, []string{"rf1OverProduce", "rf3OverProduce"}},
		{"no limit rows", []Measurement{mirrorOne, mirrorThree, produceOne, produceThree}, 4,
			map[string]float64{"rf3OverRF1CPU": 4, "rf3OverProduce": 2}, []string{"rf1OverLoopback", "rf3OverFileWrite"}},
		{"no RF 3 mirror row", []Measurement{mirrorOne, produceOne, produceThree, loopback, write}, 0,
			nil, []string{"rf1MegabytesPerSecond", "rf3OverRF1Throughput", "rf1OverProduce"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := clusterMirrorTable(aggregateAll(tc.measurements))
			if table.Title != clusterMirrorTitle || len(table.Rows) != tc.rows {
				t.Fatalf("%q: %d rows, want %d: %v", table.Title, len(table.Rows), tc.rows, table.Rows)
			}
			for key, want := range tc.numbers {
				if got, ok := table.Numbers[key]; !ok || math.Abs(got-want) > 1e-9 {
					t.Errorf("%s = %v (present %v), want %v", key, got, ok, want)
				}
			}
			for _, key := range tc.absent {
				if got, ok := table.Numbers[key]; ok {
					t.Errorf("%s = %v, want absent", key, got)
				}
			}
			for _, row := range table.Rows {
				if len(row) != len(table.Columns) || slices.Contains(row, "") {
					t.Errorf("row %v: %d cells, want %d", row, len(row), len(table.Columns))
				}
			}
		})
	}
}
