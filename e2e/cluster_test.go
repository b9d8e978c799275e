package e2e

// A mirrord cluster as processes: three `mirrord serve --node-id N
// --etcd-endpoints ...` and a real etcd (Debian's etcd-server, from
// scripts/install-etcd.sh), with faults a process can take: kill -9 of the
// node leading a partition while an idempotent producer writes with
// acks=all, and etcd stopped for a while. After every round, the history
// of acknowledged writes is checked against what the cluster stores (lost,
// duplicated and reordered counts must be zero), and at the end every
// replica's log is compared byte for byte.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mirrord/mirrord/mirrordtest"
)

const (
	// clusterLease is the nodes' lease (node.lease.ms): a killed leader
	// is replaced after it.
	clusterLease = 2 * time.Second
	// outageLease is the lease of the etcd outage test: etcd's restart
	// and the nodes' reconnection (within a second) must fit in it on a
	// loaded machine.
	outageLease = 3 * time.Second
	// clusterReplicaLag is replica.lag.time.max.ms: a follower that stops
	// fetching leaves the ISR after it.
	clusterReplicaLag = 4 * time.Second
	// clusterNewLeaderMax bounds a leader change: the lease, the
	// controller's reaction and a fetch round, with room for a loaded
	// machine.
	clusterNewLeaderMax = clusterLease + 8*time.Second
)

// testClusterNodes is a cluster of mirrord processes on one etcd.
type testClusterNodes struct {
	t     *testing.T
	etcd  *mirrordtest.Etcd
	nodes []*server
}

func startClusterNodes(t *testing.T, count int, lease time.Duration) *testClusterNodes {
	t.Helper()
	c := &testClusterNodes{t: t, etcd: mirrordtest.StartEtcd(t)}
	for id := 1; id <= count; id++ {
		c.nodes = append(c.nodes, startServer(t,
			"--etcd-endpoints", strings.Join(c.etcd.Endpoints(), ","),
			"--node-id", strconv.Itoa(id),
			"--node-lease-ms", strconv.Itoa(int(lease.Milliseconds())),
			"--default-replication-factor", "3",
			"--replica-lag-time-max-ms", strconv.Itoa(int(clusterReplicaLag.Milliseconds())),
		))
	}
	return c
}

// seeds are every node's address, for a client that must survive any one.
func (c *testClusterNodes) seeds() string {
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.addr)
	}
	return strings.Join(addrs, ",")
}

// partitions asks node via (0-based) for the topic's partitions.
func (c *testClusterNodes) partitions(ctx context.Context, via int, topic string) (kadm.PartitionDetails, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.nodes[via].addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	meta, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := meta.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	return td.Partitions, nil
}

// waitPartitions polls node via's metadata until cond holds for the
// topic's partitions, and returns them.
func (c *testClusterNodes) waitPartitions(ctx context.Context, via int, topic, what string, timeout time.Duration, cond func(kadm.PartitionDetails) bool) kadm.PartitionDetails {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		ps, err := c.partitions(ctx, via, topic)
		if err == nil && cond(ps) {
			return ps
		}
		last = fmt.Sprint(ps, err)
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not within %v (node %d's metadata: %s)", what, timeout, via+1, last)
		}
		<-tick.C
	}
}

// createTopic creates a topic of the nodes' replication factor with
// min.insync.replicas=2 and returns its partitions once every one is led
// with a full ISR.
func (c *testClusterNodes) createTopic(ctx context.Context, topic string, partitions int32) kadm.PartitionDetails {
	c.t.Helper()
	admin := kadm.NewClient(newClient(c.t, c.seeds()))
	created, err := admin.CreateTopic(ctx, partitions, -1, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err == nil {
		err = created.Err
	}
	if err != nil {
		c.t.Fatalf("create topic: %v", err)
	}
	return c.waitPartitions(ctx, 0, topic, "every partition led with a full ISR", 30*time.Second, fullISR)
}

func fullISR(ps kadm.PartitionDetails) bool {
	for _, p := range ps {
		if p.Err != nil || p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
			return false
		}
	}
	return len(ps) > 0
}

// history is the check of acknowledged writes against what is stored, in
// the spirit of Jepsen's: every acknowledged record must be stored once,
// at the offset it was acknowledged with, in the order it was produced.
type history struct {
	acked, lost, duplicated, reordered int
}

func (h history) String() string {
	return fmt.Sprintf("%d acknowledged: %d lost, %d duplicated, %d reordered", h.acked, h.lost, h.duplicated, h.reordered)
}

// checkHistory compares one partition's acknowledged records (in the
// order they were produced, which an idempotent producer keeps) with what
// is stored.
func checkHistory(acked, stored []*kgo.Record) history {
	h := history{acked: len(acked)}
	at := map[string][]int64{}
	for _, r := range stored {
		at[string(r.Value)] = append(at[string(r.Value)], r.Offset)
	}
	last := int64(-1)
	for _, r := range acked {
		offsets := at[string(r.Value)]
		switch {
		case len(offsets) == 0:
			h.lost++
			continue
		case len(offsets) > 1:
			h.duplicated++
		}
		if offsets[0] != r.Offset {
			h.lost++ // stored, but not where it was acknowledged
		}
		if offsets[0] <= last {
			h.reordered++
		}
		last = offsets[0]
	}
	return h
}

// TestClusterLeaderKills: seeded rounds of kill -9 of the node leading a
// partition while an idempotent producer writes with acks=all and
// min.insync.replicas=2 (killLeadersWhileProducing). Then kcat reads every
// acknowledged record through every node, and the three replicas of every
// partition are byte-identical.
func TestClusterLeaderKills(t *testing.T) {
	t.Parallel()
	seed := newSeed(t)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	c := startClusterNodes(t, 3, clusterLease)
	const (
		topic      = "replicated"
		partitions = 3
	)
	c.createTopic(ctx, topic, partitions)
	rounds := 3
	if os.Getenv("MIRRORD_SOAK") != "" {
		rounds = 12
	}
	total := killLeadersWhileProducing(ctx, t, c, topic, partitions, seed, rounds, 12000)

	kcat := findKcat(t)
	for i := range c.nodes {
		out := runKcat(ctx, t, kcat, nil, "-C", "-b", c.nodes[i].addr, "-t", topic, "-e", "-q", "-f", "%p %o\n")
		if lines := bytes.Count(out, []byte("\n")); lines < total.acked {
			t.Errorf("kcat through node %d read %d records, %d were acknowledged", i+1, lines, total.acked)
		}
	}
	for _, n := range c.nodes {
		n.stop()
	}
	for p := range int32(partitions) {
		compareReplicaLogs(t, c, topic, p)
	}
}

// killLeadersWhileProducing writes records to topic with an idempotent
// producer, acks=all, while in rounds seeded by seed the node leading one
// of its partitions is killed -9: each round, a new leader with a higher
// epoch within the lease plus a fetch round, and the killed node restarts
// and rejoins every ISR (it caught up). At the end no acknowledged record
// is lost, duplicated or reordered (checkHistory, read through node 1 from
// the first acknowledged offset); it returns the counts.
func killLeadersWhileProducing(ctx context.Context, t *testing.T, c *testClusterNodes, topic string, partitions int32, seed uint64, rounds, records int) history {
	t.Helper()
	random := rand.New(rand.NewPCG(seed, seed>>1))
	producer := newClient(t, c.seeds(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(500),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.RecordDeliveryTimeout(2*time.Minute), kgo.RetryTimeout(2*time.Minute))
	maker := newRecordMaker(seed)
	batch := make([]*kgo.Record, records)
	for i := range batch {
		batch[i] = maker.record(topic, int32(i)%partitions, i)
	}
	acked := newLedger()
	done := make(chan error, 1)
	go func() { done <- produceAll(ctx, producer, batch, acked) }()
	var produceErr error
	finished := false
	for round := range rounds {
		target := acked.count() + records/(rounds+2)
		if !finished && !waitFor(ctx, func() bool { return acked.count() >= target }, done, &produceErr, &finished) {
			t.Fatalf("%s, round %d: %d acknowledged, want %d (produce: %v)", topic, round, acked.count(), target, produceErr)
		}
		p := int32(random.IntN(int(partitions)))
		old := c.waitPartitions(ctx, 0, topic, "a leader for every partition", 30*time.Second, fullISR)[p]
		victim := int(old.Leader) - 1
		via := (victim + 1) % len(c.nodes)
		atKill := acked.count()
		killed := time.Now()
		c.nodes[victim].kill()
		c.waitPartitions(ctx, via, topic, fmt.Sprintf("round %d: a new leader of %s-%d", round, topic, p), clusterNewLeaderMax, func(ps kadm.PartitionDetails) bool {
			np := ps[p]
			return np.Err == nil && np.Leader >= 0 && np.Leader != old.Leader && np.LeaderEpoch > old.LeaderEpoch
		})
		moved := time.Since(killed)
		c.nodes[victim].start()
		c.waitPartitions(ctx, via, topic, fmt.Sprintf("round %d: node %d back in every ISR", round, victim+1), 60*time.Second, fullISR)
		t.Logf("round %d: killed node %d (leader of %s-%d, epoch %d) with %d acknowledged; new leader after %v; back in every ISR after %v",
			round, victim+1, topic, p, old.LeaderEpoch, atKill, moved.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	}
	if !finished {
		produceErr = <-done // bounded: ctx and the delivery timeout
	}
	if produceErr != nil {
		t.Errorf("producer: %v", produceErr)
	}
	want := acked.sorted()
	from, counts := map[topicPartition]int64{}, map[topicPartition]int{}
	for tp, rs := range want {
		from[tp], counts[tp] = rs[0].Offset, len(rs)
	}
	got := consumeFrom(ctx, t, c.nodes[0].addr, kgo.ReadUncommitted(), from, counts)
	var total history
	for _, tp := range sortedPartitions(want) {
		h := checkHistory(want[tp], got[tp])
		total.acked, total.lost, total.duplicated, total.reordered = total.acked+h.acked, total.lost+h.lost, total.duplicated+h.duplicated, total.reordered+h.reordered
		if h.lost+h.duplicated+h.reordered > 0 {
			t.Errorf("%s: %s", tp, h)
		}
	}
	t.Logf("%s: history over %d rounds: %s", topic, rounds, total)
	return total
}

// compareReplicaLogs requires every node's copy of a partition, its
// segments' bytes concatenated, to be identical.
func compareReplicaLogs(t *testing.T, c *testClusterNodes, topic string, partition int32) {
	t.Helper()
	var first []byte
	for i, n := range c.nodes {
		dir := filepath.Join(n.dataDir, fmt.Sprintf("%s-%d", topic, partition))
		names, err := filepath.Glob(filepath.Join(dir, "*.log"))
		if err != nil || len(names) == 0 {
			t.Fatalf("node %d: no segments in %s (%v)", i+1, dir, err)
		}
		sort.Strings(names) // base offsets, zero-padded
		var data []byte
		for _, name := range names {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			data = append(data, b...)
		}
		if i == 0 {
			first = data
			continue
		}
		if !bytes.Equal(first, data) {
			t.Errorf("%s-%d: node %d's log (%d bytes) differs from node 1's (%d bytes) at byte %d",
				topic, partition, i+1, len(data), len(first), firstDifference(first, data))
		}
	}
	t.Logf("%s-%d: %d bytes on each of %d replicas, identical", topic, partition, len(first), len(c.nodes))
}

// TestClusterEtcdOutage: etcd stops for longer than the nodes' lease while
// a producer writes with acks=all. Data keeps flowing on the current
// leaders, no leadership moves (not while etcd is away, and not when it
// returns: the nodes resume their leases), and nothing acknowledged is
// lost.
func TestClusterEtcdOutage(t *testing.T) {
	t.Parallel()
	seed := newSeed(t)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	c := startClusterNodes(t, 3, outageLease)
	const topic, partitions = "outage", 3
	before := c.createTopic(ctx, topic, partitions)

	producer := newClient(t, c.seeds(), kgo.RequiredAcks(kgo.AllISRAcks()))
	maker := newRecordMaker(seed)
	acked := newLedger()
	next, ackedAt := 0, map[string]int{} // acknowledged records by phase
	produce := func(phase string, n int) {
		t.Helper()
		var rs []*kgo.Record
		for range n {
			rs = append(rs, maker.record(topic, int32(next%partitions), next))
			next++
		}
		if err := produceAll(ctx, producer, rs, acked); err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		ackedAt[phase] += n
	}
	produce("before", 2000)
	if err := c.etcd.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// Produce for longer than the lease: every acks=all write is
	// acknowledged by the current leaders and their ISR.
	for time.Since(stopped) < 2*outageLease {
		produce("etcd down", 200)
	}
	if err := c.etcd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd was down for %v", time.Since(stopped).Round(time.Millisecond))
	produce("after", 2000)
	// Past another lease after etcd's return, leaders and epochs are
	// those from before the outage.
	resumed := time.Now()
	for time.Since(resumed) < 2*outageLease {
		after, err := c.partitions(ctx, 0, topic)
		if err != nil {
			t.Fatal(err)
		}
		for p := range after {
			if after[p].Leader != before[p].Leader || after[p].LeaderEpoch != before[p].LeaderEpoch {
				t.Fatalf("%s-%d: leader %d epoch %d after the outage, %d epoch %d before: a leadership moved",
					topic, p, after[p].Leader, after[p].LeaderEpoch, before[p].Leader, before[p].LeaderEpoch)
			}
		}
		produce("after", 100)
	}
	t.Logf("acknowledged by phase: %v", ackedAt)

	want := acked.sorted()
	counts := map[topicPartition]int{}
	for tp, rs := range want {
		counts[tp] = len(rs)
	}
	got := consume(ctx, t, c.seeds(), kgo.ReadUncommitted(), counts)
	for _, tp := range sortedPartitions(want) {
		if h := checkHistory(want[tp], got[tp]); h.lost+h.duplicated+h.reordered > 0 {
			t.Errorf("%s: %s", tp, h)
		}
	}
}
