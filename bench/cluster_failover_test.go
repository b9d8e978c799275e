package bench

// The cluster scenario's failover rounds, its checks and its report
// sections (cluster_test.go describes the scenario).
//
// The failover time is taken at the consumer: from the kill -9 of the
// partition's leader to the first record the consumer receives that was
// handed to the producer after the kill (its value carries the time). Not
// the first successful fetch from the new leader: a fetch can succeed
// (empty) before the partition takes writes again, and an application
// sees a partition back when writes with acks=all go through and a
// reader gets them: this time holds the lease's expiry, the controller's
// election, both clients' metadata refresh (clusterClientBackoff), the
// producer's resend of what it had in flight, the follower's fetch that
// moves the high watermark, and the consumer's fetch. The time until a
// surviving node's Metadata names the new leader is given beside it (the
// cluster's share of it).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	clusterProduceTitle  = "Cluster: produce replication"
	clusterFailoverTitle = "Cluster: leader failover (kill -9)"
	// clusterPaceInterval is the failover producer's pace: a record
	// every interval, so a post-kill record exists within it.
	clusterPaceInterval = 5 * time.Millisecond
	clusterPacedMax     = 100_000 // records of one round, at most
	clusterWarmRecords  = 20      // records the consumer reads before the kill
	clusterFailoverSeed = 22
)

// ackLedger keeps the offset each record was acknowledged at, by
// partition; its promises run on the producer's goroutines.
type ackLedger struct {
	mu      sync.Mutex
	offsets []map[int64]int64 // by partition: offset -> seq
	count   int64
	err     error
	// cancelled is the context error of records the producer fails when
	// the failover round ends: not an error there. Nil elsewhere.
	cancelled error
}

func newAckLedger(partitions int) *ackLedger {
	l := &ackLedger{offsets: make([]map[int64]int64, partitions)}
	for p := range l.offsets {
		l.offsets[p] = map[int64]int64{}
	}
	return l
}

func (l *ackLedger) promise(seq int64) func(*kgo.Record, error) {
	return func(r *kgo.Record, err error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch {
		case err != nil && l.cancelled != nil && errors.Is(err, l.cancelled):
			// not acknowledged: produced as the round ended
		case err != nil:
			l.err = cmpOr(l.err, fmt.Errorf("record %d: %w", seq, err))
		case r.Partition < 0 || int(r.Partition) >= len(l.offsets):
			l.err = cmpOr(l.err, fmt.Errorf("record %d acknowledged on partition %d", seq, r.Partition))
		default:
			if other, ok := l.offsets[r.Partition][r.Offset]; ok {
				l.err = cmpOr(l.err, fmt.Errorf("%w: records %d and %d acknowledged at offset %d of partition %d", errClusterCheck, other, seq, r.Offset, r.Partition))
			}
			l.offsets[r.Partition][r.Offset] = seq
			l.count++
		}
	}
}

func cmpOr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// acked is the number of records acknowledged so far.
func (l *ackLedger) acked() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

// check requires records acknowledgements, without error, each partition's
// offsets 0..n-1 (a fresh topic, an idempotent producer: no gap, no
// duplicate).
func (l *ackLedger) check(records int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if l.count != records {
		return fmt.Errorf("%w: %d of %d records acknowledged", errClusterCheck, l.count, records)
	}
	for p, offsets := range l.offsets {
		for o := range int64(len(offsets)) {
			if _, ok := offsets[o]; !ok {
				return fmt.Errorf("%w: partition %d: %d records acknowledged, none at offset %d", errClusterCheck, p, len(offsets), o)
			}
		}
	}
	return nil
}

// seqOf is the sequence number a value starts with (decimal digits).
func seqOf(value []byte) (int64, bool) {
	end := 0
	for end < len(value) && value[end] >= '0' && value[end] <= '9' {
		end++
	}
	seq, err := strconv.ParseInt(string(value[:end]), 10, 64)
	return seq, err == nil
}

// readBack consumes topic from the offsets from (the start of every
// partition when nil) until every acknowledged record was read, and
// requires each at the offset it was acknowledged at.
func readBack(ctx context.Context, c *benchCluster, topic string, acks *ackLedger, from map[int32]int64) error {
	acks.mu.Lock()
	want := make([]map[int64]int64, len(acks.offsets))
	for p, offsets := range acks.offsets {
		want[p] = maps.Clone(offsets)
	}
	acks.mu.Unlock()
	starts := map[int32]kgo.Offset{}
	for p := range int32(len(want)) {
		starts[p] = kgo.NewOffset().At(from[p]) // 0 when from is nil
	}
	consumer := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}), kgo.FetchMaxWait(250*time.Millisecond))
	defer consumer.Close()
	missing := 0
	for _, offsets := range want {
		missing += len(offsets)
	}
	for polls := 0; missing > 0; polls++ {
		if polls > missing+1000 {
			return fmt.Errorf("%w: %s: %d acknowledged records not read after %d polls", errClusterCheck, topic, missing, polls)
		}
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: %s: %d acknowledged records not read: %v", errClusterCheck, topic, missing, err)
		}
		var bad error
		fetches.EachError(func(_ string, p int32, err error) {
			bad = cmpOr(bad, fmt.Errorf("%s-%d: %w", topic, p, err))
		})
		fetches.EachRecord(func(r *kgo.Record) {
			seq, ok := want[r.Partition][r.Offset]
			if !ok {
				return // not acknowledged (a round's unacknowledged tail) or read twice
			}
			if got, _ := seqOf(r.Value); got != seq {
				bad = cmpOr(bad, fmt.Errorf("%w: %s-%d offset %d holds record %d, record %d was acknowledged there", errClusterCheck, topic, r.Partition, r.Offset, got, seq))
			}
			delete(want[r.Partition], r.Offset)
			missing--
		})
		if bad != nil {
			return bad
		}
	}
	return nil
}

// failoverRound is one kill of a partition's leader.
type failoverRound struct {
	Partition   int32
	Victim      int32 // the killed leader's node ID
	Elected     time.Duration
	FirstRecord time.Duration // kill to the first post-kill record read
	Rejoined    time.Duration // kill to the victim back in every ISR
	Acked       int64
}

// clusterFailover runs rounds of kill -9 of a seeded partition's leader
// of topic. With sourceAddr "" the topic is created for them and the
// producer writes into the cluster; else topic is a mirror topic of the
// source at sourceAddr (a single node), which the producer writes to and
// the cluster mirrors.
func clusterFailover(tb testing.TB, c *benchCluster, topic, sourceAddr string, rounds int, check bool) ([]failoverRound, time.Duration, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds+1)*clusterWait)
	defer cancel()
	if sourceAddr == "" {
		if _, err := c.createTopic(ctx, topic, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}); err != nil {
			return nil, 0, err
		}
	}
	random := rand.New(rand.NewPCG(clusterFailoverSeed, clusterFailoverSeed>>1))
	var out []failoverRound
	var slowest time.Duration
	for round := range rounds {
		r, err := clusterFailoverRound(ctx, tb, c, topic, sourceAddr, int32(random.IntN(clusterPartitions)), check)
		if err != nil {
			return out, slowest, fmt.Errorf("cluster failover round %d: %w", round, err)
		}
		tb.Logf("cluster failover round %d: killed node %d (leader of %s-%d): new leader in metadata after %v, first post-kill record read after %v, back in every ISR after %v, %d acknowledged",
			round, r.Victim, topic, r.Partition, r.Elected.Round(time.Millisecond), r.FirstRecord.Round(time.Millisecond), r.Rejoined.Round(time.Millisecond), r.Acked)
		out, slowest = append(out, r), max(slowest, r.Rejoined)
	}
	return out, slowest, nil
}

// clusterFailoverRound kills the leader of partition p while a paced
// producer writes to it (or to the source at sourceAddr it mirrors) and
// a consumer reads it.
func clusterFailoverRound(ctx context.Context, tb testing.TB, c *benchCluster, topic, sourceAddr string, p int32, check bool) (failoverRound, error) {
	tb.Helper()
	r := failoverRound{Partition: p}
	before, err := c.waitPartitions(ctx, topic, "every partition led with a full ISR", fullISR)
	if err != nil {
		return r, err
	}
	old := before[p]
	r.Victim = old.Leader
	admin := c.client()
	defer admin.Close()
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, topic)
	if err != nil {
		return r, err
	}
	from := map[int32]int64{}
	for q := range int32(clusterPartitions) {
		end, ok := ends.Lookup(topic, q)
		if !ok || end.Err != nil {
			return r, fmt.Errorf("end offset of %s-%d: %v", topic, q, end.Err)
		}
		from[q] = end.Offset
	}

	var killedAt, firstAfter atomic.Int64 // UnixNano; 0: not yet
	var read atomic.Int64
	consumer := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from[p])}}),
		kgo.FetchMaxWait(250*time.Millisecond))
	defer consumer.Close()
	produceOpts := []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(clusterWait)}
	if sourceAddr != "" {
		produceOpts = append(produceOpts, kgo.SeedBrokers(sourceAddr)) // in place of the cluster's
	}
	producer := c.client(produceOpts...)
	defer producer.Close()
	acks := newAckLedger(clusterPartitions)
	acks.cancelled = context.Canceled
	roundCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the consumer
		defer wg.Done()
		for roundCtx.Err() == nil { // bounded by the round
			consumer.PollFetches(roundCtx).EachRecord(func(rec *kgo.Record) {
				read.Add(1)
				_, rest, _ := bytes.Cut(rec.Value, []byte(" "))
				produced, _ := strconv.ParseInt(string(rest), 10, 64)
				if killed := killedAt.Load(); killed != 0 && produced > killed && firstAfter.Load() == 0 {
					firstAfter.Store(time.Now().UnixNano())
				}
			})
		}
	}()
	go func() { // the paced producer
		defer wg.Done()
		ticker := time.NewTicker(clusterPaceInterval)
		defer ticker.Stop()
		for seq := range int64(clusterPacedMax) {
			value := fmt.Appendf(nil, "%d %d", seq, time.Now().UnixNano())
			producer.Produce(roundCtx, &kgo.Record{Topic: topic, Partition: p, Value: value}, acks.promise(seq))
			select {
			case <-roundCtx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	defer wg.Wait()
	defer stop()

	if err := pollUntil(ctx, clusterPollInterval, func() (bool, error) { return read.Load() >= clusterWarmRecords, nil }); err != nil {
		return r, fmt.Errorf("the consumer read %d records before the kill: %w", read.Load(), err)
	}
	victim := c.nodes[r.Victim-1]
	killed := time.Now()
	killedAt.Store(killed.UnixNano())
	if err := victim.proc.Kill(); err != nil {
		return r, err
	}
	if _, err := c.waitPartitions(ctx, topic, fmt.Sprintf("a new leader of %s-%d", topic, p), func(ps kadm.PartitionDetails) bool {
		np := ps[p]
		return np.Err == nil && np.Leader >= 0 && np.Leader != old.Leader && np.LeaderEpoch > old.LeaderEpoch
	}); err != nil {
		return r, err
	}
	r.Elected = time.Since(killed)
	waitCtx, cancelWait := context.WithTimeout(ctx, clusterWait)
	defer cancelWait()
	if err := pollUntil(waitCtx, time.Millisecond, func() (bool, error) { return firstAfter.Load() != 0, nil }); err != nil {
		return r, fmt.Errorf("no record produced after the kill was read: %w", err)
	}
	r.FirstRecord = time.Duration(firstAfter.Load() - killed.UnixNano())
	stop()
	wg.Wait()
	if err := producer.Flush(ctx); err != nil {
		return r, err
	}
	if err := victim.proc.Start(); err != nil {
		return r, fmt.Errorf("restart of node %d: %w", r.Victim, err)
	}
	if _, err := c.waitPartitions(ctx, topic, fmt.Sprintf("node %d back in every ISR", r.Victim), fullISR); err != nil {
		return r, err
	}
	r.Rejoined = time.Since(killed)
	acks.mu.Lock()
	r.Acked, err = acks.count, acks.err
	acks.mu.Unlock()
	if err != nil {
		return r, err
	}
	if check {
		// Records cancelled with the round's context are not
		// acknowledged; every one that was is read back at its offset.
		if err := readBack(ctx, c, topic, acks, from); err != nil {
			return r, err
		}
	}
	return r, nil
}

// clusterTables are the report's three cluster sections; rows are every
// aggregated throughput row of the run (the limit's among them).
func clusterTables(r clusterResult, rows []row) []Table {
	return []Table{clusterProduceTable(rows), clusterFailoverTable(r), clusterMirrorTable(rows)}
}

func clusterProduceTable(rows []row) Table {
	t := Table{
		Title: clusterProduceTitle,
		Intro: "Produce replication (mirroring into a cluster is the next section). " +
			fmt.Sprintf("An idempotent franz-go producer (acks=all, %d partitions, 1 KiB uncompressed records) into one mirrord node on etcd (replication factor 1) ", clusterPartitions) +
			"and into three on one etcd (replication factor 3, min.insync.replicas 2), a fresh topic per sample, timed to every record acknowledged. " +
			"CPU-s/GB: every mirrord process (not etcd, not the producer), per GB that one replica stores. " +
			"The limits are the run's loopback copy and file write rows; every node and the producer share this machine's cores (bench/cluster_test.go).",
		Columns: []string{"Figure", variantClusterRF1, variantClusterRF3, "RF 3 / RF 1"},
		Numbers: map[string]float64{},
	}
	addReplicationRows(&t, rows, scenarioClusterProduce, variantClusterRF1, variantClusterRF3)
	return t
}

// addReplicationRows adds to t the MB/s and CPU-s/GB of the scenario's
// RF 1 and RF 3 rows, their ratio, and each beside the run's limits
// (loopback copy, file write); nothing when either row is missing.
func addReplicationRows(t *Table, rows []row, scenario, rf1, rf3 string) {
	one, hasOne := findRow(rows, scenario, rf1)
	three, hasThree := findRow(rows, scenario, rf3)
	if !hasOne || !hasThree {
		return
	}
	loopback, hasLoopback := findRow(rows, scenarioLimit, variantLimit)
	write, hasWrite := findRow(rows, scenarioLimit, variantFileWrite)
	t.Rows = append(t.Rows,
		[]string{"MB/s (median)", formatNumber(rowMegabytesPerSecond(one)), formatNumber(rowMegabytesPerSecond(three)), ratioCell(rowMegabytesPerSecond(three), rowMegabytesPerSecond(one))},
		[]string{"CPU-s/GB of the mirrord processes (median)", formatNumber(rowCPUSecondsPerGigabyte(one)), formatNumber(rowCPUSecondsPerGigabyte(three)), ratioCell(rowCPUSecondsPerGigabyte(three), rowCPUSecondsPerGigabyte(one))})
	t.Numbers["rf1MegabytesPerSecond"], t.Numbers["rf3MegabytesPerSecond"] = rowMegabytesPerSecond(one), rowMegabytesPerSecond(three)
	t.Numbers["rf1CPUSecondsPerGigabyte"], t.Numbers["rf3CPUSecondsPerGigabyte"] = rowCPUSecondsPerGigabyte(one), rowCPUSecondsPerGigabyte(three)
	if v := ratioOf(rowMegabytesPerSecond(three), rowMegabytesPerSecond(one)); v != nil {
		t.Numbers["rf3OverRF1Throughput"] = *v
	}
	if v := ratioOf(rowCPUSecondsPerGigabyte(three), rowCPUSecondsPerGigabyte(one)); v != nil {
		t.Numbers["rf3OverRF1CPU"] = *v
	}
	for _, limit := range []struct {
		ok   bool
		r    row
		name string
		key  string
	}{{hasLoopback, loopback, "loopback copy", "Loopback"}, {hasWrite, write, "file write", "FileWrite"}} {
		if !limit.ok {
			continue
		}
		addRatioRows(t, "the "+limit.name+"'s", limit.key, one, three, limit.r, limit.r)
	}
}

// addRatioRows adds the rows of one and three over peers (one's peer,
// three's peer: the same row for a limit) in MB/s and CPU-s/GB.
func addRatioRows(t *Table, name, key string, one, three, peerOne, peerThree row) {
	mbps, cost := rowMegabytesPerSecond, rowCPUSecondsPerGigabyte
	peerMBps, peerCost := formatNumber(mbps(peerOne)), formatPrecise(cost(peerOne))
	if peerOne.label() != peerThree.label() {
		peerMBps += " and " + formatNumber(mbps(peerThree))
		peerCost += " and " + formatPrecise(cost(peerThree))
	}
	t.Rows = append(t.Rows,
		[]string{"MB/s over " + name + " (" + peerMBps + " MB/s)", ratioCell(mbps(one), mbps(peerOne)), ratioCell(mbps(three), mbps(peerThree)), "-"},
		[]string{"CPU-s/GB over " + name + " (" + peerCost + ")", ratioCell(cost(one), cost(peerOne)), ratioCell(cost(three), cost(peerThree)), "-"})
	if v := ratioOf(mbps(one), mbps(peerOne)); v != nil {
		t.Numbers["rf1Over"+key] = *v
	}
	if v := ratioOf(mbps(three), mbps(peerThree)); v != nil {
		t.Numbers["rf3Over"+key] = *v
	}
}

func rowMegabytesPerSecond(x row) float64    { return x.MegabytesPerSecond.Median }
func rowCPUSecondsPerGigabyte(x row) float64 { return x.CPUSecondsPerGigabyte.Median }

// ratioCell is a/b as a table cell ("-" when there is none).
func ratioCell(a, b float64) string {
	if v := ratioOf(a, b); v != nil {
		return formatPrecise(*v) + "x"
	}
	return "-"
}

func clusterFailoverTable(r clusterResult) Table {
	t := Table{
		Title: clusterFailoverTitle,
		Intro: fmt.Sprintf("Three nodes on one etcd, node.lease.ms %d, replica.lag.time.max.ms %d, a topic of %d partitions, replication factor 3, min.insync.replicas 2. ",
			clusterLease.Milliseconds(), clusterReplicaLag.Milliseconds(), clusterPartitions) +
			fmt.Sprintf("Each round (seeded): kill -9 of the leader of one partition while an idempotent producer writes to it with acks=all (a record every %v) and a consumer polls it. ", clusterPaceInterval) +
			"New leader: kill to a surviving node's Metadata naming a new leader with a higher epoch (polled every 10 ms). " +
			"First record read: kill to the consumer receiving the first record handed to the producer after the kill: the partition back for writes and reads " +
			"(an empty fetch answered by the new leader can come before it takes writes). " +
			fmt.Sprintf("Both clients retry and refresh metadata after %v. The killed node restarts and rejoins every ISR before the next round. ", clusterClientBackoff) +
			"Mirror rows: the same rounds on the mirror topic of the Cluster: mirroring section (RF 3, the partition's leader mirrors the source), " +
			"the producer writing to the source (one mirrord node) and the consumer reading the cluster: the first record produced at the source after the kill, " +
			"read through the new leader, holds the new leader starting to mirror from its log end besides the rest.",
		Columns: []string{"Time from the kill (ms)", "min", "median", "max", "rounds"},
		Numbers: map[string]float64{"leaseSeconds": r.Lease.Seconds(), "rounds": float64(len(r.Rounds)), "mirrorRounds": float64(len(r.MirrorRounds))},
	}
	add := func(rounds []failoverRound, name, key string, of func(failoverRound) time.Duration) {
		if len(rounds) == 0 {
			return
		}
		var ms []float64
		for _, round := range rounds {
			ms = append(ms, durationMilliseconds(of(round)))
		}
		s := spreadOf(ms)
		t.Rows = append(t.Rows, []string{name, formatNumber(s.Min), formatNumber(s.Median), formatNumber(s.Max), strconv.Itoa(len(ms))})
		t.Numbers[key+"MinMilliseconds"], t.Numbers[key+"MedianMilliseconds"], t.Numbers[key+"MaxMilliseconds"] = s.Min, s.Median, s.Max
	}
	elected := func(f failoverRound) time.Duration { return f.Elected }
	firstRecord := func(f failoverRound) time.Duration { return f.FirstRecord }
	rejoined := func(f failoverRound) time.Duration { return f.Rejoined }
	add(r.Rounds, "new leader in Metadata", "elected", elected)
	add(r.Rounds, "first record produced after the kill, read", "firstRecord", firstRecord)
	add(r.Rounds, "killed node restarted and back in every ISR", "rejoined", rejoined)
	add(r.MirrorRounds, "mirror: new leader in Metadata", "mirrorElected", elected)
	add(r.MirrorRounds, "mirror: first record produced at the source after the kill, read", "mirrorFirstRecord", firstRecord)
	add(r.MirrorRounds, "mirror: killed node restarted and back in every ISR", "mirrorRejoined", rejoined)
	return t
}

func TestClusterScenarioSmoke(t *testing.T) {
	mode := scenarioMode(t)
	skipForReportSmoke(t, mode, "checkCluster")
	r, err := clusterScenario(t, mode, mode.Name == "smoke")
	if err != nil {
		t.Fatal(err)
	}
	var measurements []Measurement
	measurements = append(append(append(measurements, limitScenarios(t, mode)...), r.Produce...), r.Mirror...)
	tables := clusterTables(r, aggregateAll(measurements))
	for _, table := range tables {
		t.Logf("%s: %v %v", table.Title, table.Rows, table.Numbers)
	}
	checkCluster(t, mode, r, tables)
}

// checkCluster checks what clusterScenario(mode) returned and its tables.
func checkCluster(t *testing.T, mode benchMode, r clusterResult, tables []Table) {
	t.Helper()
	if len(r.Produce) != 2 || len(r.Mirror) != 2 || len(r.Rounds) != clusterRounds(mode) || len(r.MirrorRounds) != clusterRounds(mode) || len(tables) != 3 {
		t.Fatalf("not sane: %d produce rows, %d mirror rows, %d and %d mirror rounds (want %d), %d tables",
			len(r.Produce), len(r.Mirror), len(r.Rounds), len(r.MirrorRounds), clusterRounds(mode), len(tables))
	}
	for _, m := range slices.Concat(r.Produce, r.Mirror) {
		if len(m.Samples) != mode.Repeats {
			t.Errorf("%s: %d samples, want %d", m.Variant, len(m.Samples), mode.Repeats)
		}
		for _, s := range m.Samples {
			// One replica stores at least the values produced; the
			// mirror's source holds mode.Bytes of batches.
			least := mode.Bytes / clusterRecordBytes
			if m.Scenario == scenarioClusterMirror {
				least = mode.Bytes / (clusterRecordBytes + 100) // a record's framing and its batch's share of a header, less than 100 bytes
			}
			if s.Wall <= 0 || s.CPU <= 0 || s.Records < least || s.Bytes < s.Records*clusterRecordBytes || s.Bytes < mode.Bytes {
				t.Errorf("%s: sample %+v", m.Variant, s)
			}
		}
	}
	for i, round := range slices.Concat(r.Rounds, r.MirrorRounds) {
		// The lease ends between 2/3 of its TTL (keep-alives go every
		// third) and the TTL after the kill; a third leaves room for a
		// keep-alive a loaded machine sent late. A new leader sooner
		// would not have waited for the lease.
		if round.Elected < r.Lease/3 || round.FirstRecord < r.Lease/3 || round.Rejoined < round.Elected || round.Acked < clusterWarmRecords {
			t.Errorf("round %d: %+v (lease %v)", i, round, r.Lease)
		}
	}
	produce, failover, mirror := tables[0], tables[1], tables[2]
	if produce.Title != clusterProduceTitle || len(produce.Rows) != 6 || produce.Numbers["rf3OverRF1Throughput"] <= 0 || produce.Numbers["rf3OverLoopback"] <= 0 {
		t.Errorf("produce table not sane: %+v", produce)
	}
	if failover.Title != clusterFailoverTitle || len(failover.Rows) != 6 || failover.Numbers["firstRecordMinMilliseconds"] <= 0 || failover.Numbers["mirrorFirstRecordMinMilliseconds"] <= 0 {
		t.Errorf("failover table not sane: %+v", failover)
	}
	if mirror.Title != clusterMirrorTitle || len(mirror.Rows) != 8 || mirror.Numbers["rf3OverRF1Throughput"] <= 0 || mirror.Numbers["rf3OverRF1CPU"] <= 0 ||
		mirror.Numbers["rf3OverLoopback"] <= 0 || mirror.Numbers["rf3OverProduce"] <= 0 {
		t.Errorf("mirror table not sane: %+v", mirror)
	}
	for _, table := range tables {
		for _, row := range table.Rows {
			if len(row) != len(table.Columns) || slices.Contains(row, "") {
				t.Errorf("%s: row %v: %d cells, want %d", table.Title, row, len(row), len(table.Columns))
			}
		}
	}
}
