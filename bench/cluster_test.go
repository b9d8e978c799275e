package bench

// The cluster scenario: mirrord nodes joined on one etcd (`mirrord serve
// --node-id --etcd-endpoints`, docs/cluster.md), measured as produce
// replication, failover, and mirroring (cluster_mirror_test.go):
//
//   - produce: an idempotent franz-go producer (acks=all, no compression,
//     1 KiB records, clusterPartitions partitions, mode.Bytes per sample)
//     into a fresh topic, timed from the first record handed to the client
//     to Flush (every record acknowledged), on one node with replication
//     factor 1 and on three nodes with replication factor 3 and
//     min.insync.replicas 2. CPU is every mirrord process's (etcd's and the
//     producer's are not counted), Bytes the record batches one replica
//     stores. Checked on every sample: every acknowledged record has its
//     own offset, the offsets of a partition are 0..n-1, and every replica's
//     log of every partition holds the same bytes; with check (smoke), every
//     acknowledged record is read back at its offset.
//   - failover: on the three nodes, seeded rounds of kill -9 of the leader
//     of one partition while a paced producer writes to it (acks=all) and a
//     consumer polls it. Two times from the kill: until a surviving node's
//     Metadata names a new leader with a higher epoch (the lease and the
//     controller), and until the consumer receives the first record handed
//     to the producer after the kill (cluster_failover_test.go says why
//     that one). The killed node restarts and rejoins every ISR before the
//     next round; every acknowledged record of the round is read back.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/mirrordtest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	scenarioClusterProduce = "cluster-produce"
	variantClusterRF1      = "1 node, RF 1"
	variantClusterRF3      = "3 nodes, RF 3, min.insync 2"

	// clusterLease is node.lease.ms: a killed leader keeps its
	// partitions this long. Shorter than Kafka-like defaults (10 s) so
	// that rounds are short, long enough that a loaded machine keeps its
	// leases.
	clusterLease = 2 * time.Second
	// clusterReplicaLag is replica.lag.time.max.ms.
	clusterReplicaLag  = 4 * time.Second
	clusterPartitions  = 4
	clusterRecordBytes = 1024
	// clusterWait bounds a produce sample, a round, or a wait for the
	// cluster's state.
	clusterWait         = 3 * time.Minute
	clusterPollInterval = 10 * time.Millisecond
	// clusterClientBackoff is the clients' retry backoff and the least
	// age of their metadata: a client's own delays stay small beside the
	// cluster's.
	clusterClientBackoff = 20 * time.Millisecond
)

// benchCluster is count mirrord processes joined on one etcd.
type benchCluster struct {
	tb    testing.TB
	etcd  *mirrordtest.Etcd
	nodes []*mirrordProcess
	dirs  []string // data directories, by node (node ID = index + 1)
}

// startBenchCluster starts etcd and count nodes with default.replication.factor rf.
func startBenchCluster(tb testing.TB, count, rf int) *benchCluster {
	tb.Helper()
	c := &benchCluster{tb: tb, etcd: mirrordtest.StartEtcd(tb)}
	root := tb.TempDir()
	for id := 1; id <= count; id++ {
		dir := filepath.Join(root, fmt.Sprintf("node%d", id))
		c.dirs = append(c.dirs, dir)
		c.nodes = append(c.nodes, startMirrord(tb, dir,
			"--etcd-endpoints", strings.Join(c.etcd.Endpoints(), ","),
			"--node-id", strconv.Itoa(id),
			"--node-lease-ms", strconv.Itoa(int(clusterLease.Milliseconds())),
			"--default-replication-factor", strconv.Itoa(rf),
			"--replica-lag-time-max-ms", strconv.Itoa(int(clusterReplicaLag.Milliseconds())),
		))
	}
	return c
}

// seeds are the addresses of the nodes running.
func (c *benchCluster) seeds() []string {
	var addrs []string
	for _, n := range c.nodes {
		if n.proc.Running() {
			addrs = append(addrs, n.addr)
		}
	}
	return addrs
}

// client is a kgo client of the running nodes, quick to retry; the
// caller closes it.
func (c *benchCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.tb.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.MetadataMinAge(clusterClientBackoff),
		kgo.RetryBackoffFn(func(int) time.Duration { return clusterClientBackoff })}
	client, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		c.tb.Fatal(err)
	}
	return client
}

// cpu is the CPU time so far of every node running.
func (c *benchCluster) cpu() time.Duration {
	var total time.Duration
	for _, n := range c.nodes {
		if n.proc.Running() {
			total += n.cpu()
		}
	}
	return total
}

// stop stops every node running (SIGTERM, clean exit).
func (c *benchCluster) stop() {
	for _, n := range c.nodes {
		if n.proc.Running() {
			n.stop()
		}
	}
}

// createTopic creates topic (replication factor: the cluster's default)
// and waits until every partition has a leader and a full ISR.
func (c *benchCluster) createTopic(ctx context.Context, topic string, configs map[string]*string) (kadm.PartitionDetails, error) {
	client := c.client()
	defer client.Close()
	created, err := kadm.NewClient(client).CreateTopic(ctx, clusterPartitions, -1, configs, topic)
	if err == nil {
		err = created.Err
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: create topic %s: %w", topic, err)
	}
	return c.waitPartitions(ctx, topic, "every partition led with a full ISR", fullISR)
}

// deleteTopic deletes topic (DeleteTopics answered without error).
func (c *benchCluster) deleteTopic(ctx context.Context, topic string) error {
	client := c.client()
	defer client.Close()
	deleted, err := kadm.NewClient(client).DeleteTopic(ctx, topic)
	if err == nil {
		err = deleted.Err
	}
	if err != nil {
		return fmt.Errorf("cluster: delete topic %s: %w", topic, err)
	}
	return nil
}

// partitions asks the running nodes for the topic's partitions.
func (c *benchCluster) partitions(ctx context.Context, topic string) (kadm.PartitionDetails, error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	if err != nil {
		return nil, err
	}
	defer client.Close()
	meta, err := kadm.NewClient(client).Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := meta.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	return td.Partitions, nil
}

// waitPartitions polls Metadata until cond holds for the topic's
// partitions (clusterWait at most) and returns them.
func (c *benchCluster) waitPartitions(ctx context.Context, topic, what string, cond func(kadm.PartitionDetails) bool) (kadm.PartitionDetails, error) {
	ctx, cancel := context.WithTimeout(ctx, clusterWait)
	defer cancel()
	var ps kadm.PartitionDetails
	var last error
	err := pollUntil(ctx, clusterPollInterval, func() (bool, error) {
		ps, last = c.partitions(ctx, topic)
		return last == nil && cond(ps), nil
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: %s: %s: %w (last metadata %v, %v)", topic, what, err, ps, last)
	}
	return ps, nil
}

// fullISR: every partition led, every replica in its ISR.
func fullISR(ps kadm.PartitionDetails) bool {
	for _, p := range ps {
		if p.Err != nil || p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
			return false
		}
	}
	return len(ps) > 0
}

// replicaLogs is one node's copy of a partition: its segments' bytes
// concatenated, as a size and a SHA-256.
type replicaLogs struct {
	size int64
	sum  [sha256.Size]byte
}

func readReplicaLogs(dir string) (replicaLogs, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(names) == 0 {
		return replicaLogs{}, fmt.Errorf("no segments in %s (%v)", dir, err)
	}
	slices.Sort(names) // base offsets, zero-padded
	hash := sha256.New()
	var r replicaLogs
	for _, name := range names {
		file, err := os.Open(name)
		if err != nil {
			return replicaLogs{}, err
		}
		n, err := io.Copy(hash, file)
		file.Close()
		if err != nil {
			return replicaLogs{}, err
		}
		r.size += n
	}
	copy(r.sum[:], hash.Sum(nil))
	return r, nil
}

// waitReplicasEqual waits until every running node holds the same bytes
// for every partition of topic (the followers fetch the last batches
// after the acknowledgement's high watermark) and returns the bytes one
// replica stores.
func (c *benchCluster) waitReplicasEqual(ctx context.Context, topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, clusterWait)
	defer cancel()
	var total int64
	var differ string
	err := pollUntil(ctx, clusterPollInterval, func() (bool, error) {
		total, differ = 0, ""
		for p := range int32(clusterPartitions) {
			var first replicaLogs
			for i, dir := range c.dirs {
				r, err := readReplicaLogs(filepath.Join(dir, fmt.Sprintf("%s-%d", topic, p)))
				if err != nil {
					return false, err
				}
				if i == 0 {
					first = r
					total += r.size
				} else if r != first && differ == "" {
					differ = fmt.Sprintf("%s-%d: node %d holds %d bytes, node 1 %d", topic, p, i+1, r.size, first.size)
				}
			}
		}
		return differ == "", nil
	})
	if err != nil {
		return 0, fmt.Errorf("cluster: replicas of %s not identical: %w (%s)", topic, err, differ)
	}
	return total, nil
}

// clusterResult is what the cluster scenario measured.
type clusterResult struct {
	Produce []Measurement // the RF 1 and RF 3 rows
	Mirror  []Measurement // the mirror RF 1 and RF 3 rows (cluster_mirror_test.go)
	// MirrorRounds are the failover rounds on a mirror topic, the
	// producer writing to the source.
	MirrorRounds []failoverRound
	Rounds       []failoverRound
	Lease        time.Duration
	Restarts     time.Duration // the longest restart of a killed node until back in every ISR
}

// clusterScenario measures produce on one node (RF 1) and three (RF 3),
// then the failover rounds on the three, then mirroring into three nodes
// with RF 1 and RF 3.
func clusterScenario(tb testing.TB, mode benchMode, check bool) (clusterResult, error) {
	tb.Helper()
	r := clusterResult{Lease: clusterLease}
	for _, v := range []struct {
		variant string
		nodes   int
		configs map[string]*string
	}{
		{variantClusterRF1, 1, nil},
		{variantClusterRF3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}},
	} {
		c := startBenchCluster(tb, v.nodes, v.nodes)
		row := Measurement{Scenario: scenarioClusterProduce, Variant: v.variant,
			Note: fmt.Sprintf("idempotent franz-go producer, acks=all, %d partitions, 1 KiB records, uncompressed, into mirrord nodes on one etcd; "+
				"CPU: every mirrord process (not etcd, not the producer); bytes: the batches one replica stores", clusterPartitions)}
		for sample := range mode.Repeats {
			s, err := clusterProduceSample(tb, c, fmt.Sprintf("produce-%d", sample), v.configs, mode.Bytes, check)
			if err != nil {
				return r, fmt.Errorf("%s, sample %d: %w", v.variant, sample, err)
			}
			row.Samples = append(row.Samples, s)
		}
		r.Produce = append(r.Produce, row)
		if v.nodes == 3 {
			rounds, restarts, err := clusterFailover(tb, c, "failover", "", clusterRounds(mode), check)
			if err != nil {
				return r, err
			}
			r.Rounds, r.Restarts = rounds, restarts
		}
		c.stop()
	}
	var err error
	r.Mirror, r.MirrorRounds, err = clusterMirrorScenario(tb, mode, check)
	return r, err
}

// clusterRounds is how many leader kills a mode times.
func clusterRounds(mode benchMode) int {
	switch {
	case mode.Full:
		return 7
	case mode.Name == "smoke":
		return 1
	}
	return 3
}

// clusterProduceSample produces total bytes of records into a new topic
// and returns the sample once every record is acknowledged and every
// replica holds the same bytes.
func clusterProduceSample(tb testing.TB, c *benchCluster, topic string, configs map[string]*string, total int64, check bool) (Sample, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	if _, err := c.createTopic(ctx, topic, configs); err != nil {
		return Sample{}, err
	}
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(10_000), kgo.RecordDeliveryTimeout(clusterWait))
	defer producer.Close()
	if err := producer.Ping(ctx); err != nil {
		return Sample{}, err
	}
	records := max(total/clusterRecordBytes, clusterPartitions)
	acks := newAckLedger(clusterPartitions)
	filler := clusterFiller()
	cpu, started := c.cpu(), time.Now()
	for seq := range records {
		value := make([]byte, clusterRecordBytes)
		copy(value, strconv.AppendInt(nil, seq, 10))
		copy(value[24:], filler[seq%clusterFillerRecords*clusterRecordBytes:])
		producer.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(seq % clusterPartitions), Value: value}, acks.promise(seq))
	}
	if err := producer.Flush(ctx); err != nil {
		return Sample{}, err
	}
	wall, used := time.Since(started), c.cpu()-cpu
	if err := acks.check(records); err != nil {
		return Sample{}, fmt.Errorf("%s: %w", topic, err)
	}
	stored, err := c.waitReplicasEqual(ctx, topic)
	if err != nil {
		return Sample{}, err
	}
	if check {
		if err := readBack(ctx, c, topic, acks, nil); err != nil {
			return Sample{}, err
		}
	}
	tb.Logf("cluster: %d node(s), %s: %d records, %d bytes stored per replica, in %v, %v CPU of the nodes",
		len(c.nodes), topic, records, stored, wall.Round(time.Millisecond), used)
	if err := c.deleteTopic(ctx, topic); err != nil { // its disk space, before the next sample
		return Sample{}, err
	}
	return Sample{Wall: wall, Bytes: stored, Records: records, CPU: used}, nil
}

// clusterFillerRecords is how many distinct fillers clusterFiller holds.
const clusterFillerRecords = 64

// clusterFiller is pseudo-random bytes, clusterFillerRecords records' worth
// (and one more, so that each record's slice is full).
func clusterFiller() []byte {
	out := make([]byte, (clusterFillerRecords+1)*clusterRecordBytes)
	state := uint64(0x9e3779b97f4a7c15)
	for i := range out {
		state ^= state << 13
		state ^= state >> 7
		state ^= state << 17
		out[i] = byte(state)
	}
	return out
}

// errClusterCheck is a failed check of the cluster scenario.
var errClusterCheck = errors.New("bench: cluster check")
