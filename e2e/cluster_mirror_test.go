package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// clusterMirrorKillRounds is how many leaders TestClusterMirrorKafka kills
// while Kafka is written to and mirrored (make soak: more).
func clusterMirrorKillRounds() int {
	if os.Getenv("MIRRORD_SOAK") != "" {
		return 8
	}
	return 2
}

// TestClusterMirrorKafka mirrors a Kafka 4.4 source into a cluster of three
// `mirrord serve` processes on etcd (replication factor 3): a topic of three
// zstd partitions and a transactional one, the mirror created and started
// through node 2. Through every node, kgo, kcat and Kafka's console
// consumer read what Kafka's own broker serves, and every replica is
// byte-identical on disk.
//
// Then seeded rounds kill -9 the leader of a partition while a producer
// writes to Kafka: another replica leads and goes on mirroring, the killed
// node comes back and catches up, and at the end every node serves Kafka's
// batches byte for byte (nothing lost, duplicated or reordered).
//
// Last, the failover: the controller node, made the leader of every
// partition, is killed -9 while the stop it is running is half done (one
// follower paused, so that the stop's records cannot reach STOPPED before
// the kill). The new leaders resume the stop from the records in etcd and
// the --stop sent to another node answers success: every partition
// STOPPED at Kafka's log end, the mirrored batches Kafka's byte for byte,
// the topics writable through every node. Then an idempotent producer
// writes to the failed-over topic with acks=all while a seeded partition's
// leader is killed -9: nothing acknowledged is lost, duplicated or
// reordered, and the replicas end identical on disk.
func TestClusterMirrorKafka(t *testing.T) {
	t.Parallel()
	source := sharedKafkaBroker(t)
	libs := kafkaLibs(t)
	ctx, cancel := context.WithTimeout(context.Background(), interopDeadline)
	defer cancel()
	kafka := source.Bootstrap()
	seed := newSeed(t)
	maker := newRecordMaker(seed)
	topics := map[string]int32{"cm-events": 3, "cm-txn": 2}
	for name, partitions := range topics {
		createKafkaTopic(ctx, t, kafka, name, partitions, 1, nil)
	}
	produceEvents := func(count int) {
		client := newClient(t, kafka, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
		defer client.Close()
		for p := range topics["cm-events"] {
			produceTo(ctx, t, client, maker, topicPartition{"cm-events", p}, count, newLedger())
		}
	}
	produceEvents(500)
	produceTransactions(ctx, t, kafka, maker, "cm-txn", 0)

	c := startClusterNodes(t, 3, clusterLease)
	began := time.Now()
	runMirrorsOK(ctx, t, c.nodes[1].addr, "--create", "--mirror", "m", "--mirror-config", interopMirrorConfig(t, kafka))
	runMirrorsOK(ctx, t, c.nodes[1].addr, "--start", "--mirror", "m", "--topics", "cm-.*")
	tps := topicPartitions(topics)
	// endOffsets asks each partition's leader when given several addresses.
	waitMirrorCaughtUp(ctx, t, kafka, c.seeds(), tps)
	t.Logf("%v: mirrored through the cluster", time.Since(began).Round(time.Millisecond))
	for i, n := range c.nodes {
		if out := runMirrorsOK(ctx, t, n.addr, "--list"); !slices.Equal(listedMirrors(out), []string{"m"}) {
			t.Errorf("node %d --list:\n%s", i+1, out)
		}
	}
	// Through node i: its metadata names the leaders, which the reads go
	// to (the helpers ask a single address directly, several through
	// metadata).
	via := func(i int) string { return c.nodes[i].addr + "," + c.nodes[i].addr }
	fromKafka := readAll(ctx, t, kafka, tps)
	for i := range c.nodes {
		compareMirrored(t, fromKafka, readAll(ctx, t, via(i), tps))
	}
	replicasEqual := func() {
		for topic := range topics {
			c.waitPartitions(ctx, 0, topic, topic+": every replica in the ISR", 60*time.Second, fullISR)
		}
		waitMirrorCaughtUp(ctx, t, kafka, c.seeds(), tps) // the high watermark: every ISR member has it all
		for _, tp := range tps {
			compareReplicaLogs(t, c, tp.topic, tp.partition)
		}
	}
	replicasEqual()

	killLeadersWhileMirroring(ctx, t, c, kafka, seed, topics["cm-events"])
	replicasEqual()
	t.Logf("%v: kill rounds done, every replica identical", time.Since(began).Round(time.Millisecond))
	for i := range c.nodes {
		checkMirrorEqualsKafka(ctx, t, libs, kafka, via(i), topics)
	}
	t.Logf("%v: kcat, the console consumer and kafka-get-offsets through every node equal Kafka", time.Since(began).Round(time.Millisecond))

	stopWithControllerKilled(ctx, t, c, kafka, tps, seed)
	t.Logf("%v: stopped with the controller killed midway", time.Since(began).Round(time.Millisecond))
}

// killLeadersWhileMirroring runs the seeded kill rounds of
// TestClusterMirrorKafka: while a producer writes to Kafka's topic, the
// node leading a random partition of it is killed -9; a replica with a
// higher leader epoch leads it within the lease and a fetch round, the
// records Kafka gets meanwhile are mirrored through the survivors, and the
// killed node restarts and rejoins every ISR.
func killLeadersWhileMirroring(ctx context.Context, t *testing.T, c *testClusterNodes, kafka string, seed uint64, partitions int32) {
	t.Helper()
	const topic = "cm-events"
	random := rand.New(rand.NewPCG(seed, seed>>2))
	var tps []topicPartition
	for p := range partitions {
		tps = append(tps, topicPartition{topic, p})
	}
	producer := newClient(t, kafka, kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	stop := make(chan struct{})
	produced := make(chan error, 1)
	go func() { produced <- produceUntil(ctx, producer, topic, partitions, stop) }()
	defer func() {
		if stop != nil {
			close(stop)
			<-produced
		}
	}()
	rounds := clusterMirrorKillRounds()
	for round := range rounds {
		p := int32(random.IntN(int(partitions)))
		before := c.waitPartitions(ctx, 0, topic, "a leader for every partition", 30*time.Second, fullISR)
		old := before[p]
		victim := int(old.Leader) - 1
		survivor := (victim + 1) % len(c.nodes)
		floor, err := endOffsets(ctx, kafka, tps)
		if err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		c.nodes[victim].kill()
		c.waitPartitions(ctx, survivor, topic, fmt.Sprintf("round %d: a new leader of %s-%d", round, topic, p), clusterNewLeaderMax, func(ps kadm.PartitionDetails) bool {
			np := ps[p]
			return np.Err == nil && np.Leader > 0 && np.Leader != old.Leader && np.LeaderEpoch > old.LeaderEpoch
		})
		moved := time.Since(killed)
		// Records Kafka took after the kill are mirrored by the new leader.
		var survivors []string
		for i, n := range c.nodes {
			if i != victim {
				survivors = append(survivors, n.addr)
			}
		}
		for tp, end := range kafkaPast(ctx, t, kafka, tps, floor) {
			waitMirrorPast(ctx, t, strings.Join(survivors, ","), tp, end)
		}
		mirrored := time.Since(killed)
		c.nodes[victim].start()
		c.waitPartitions(ctx, survivor, topic, fmt.Sprintf("round %d: node %d back in every ISR", round, victim+1), 60*time.Second, fullISR)
		t.Logf("round %d: killed node %d (leader of %s-%d, epoch %d); new leader after %v, records Kafka took since mirrored after %v, back in every ISR after %v",
			round, victim+1, topic, p, old.LeaderEpoch, moved.Round(time.Millisecond), mirrored.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	}
	close(stop)
	stop = nil
	if err := <-produced; err != nil {
		t.Fatalf("producing to Kafka during the kill rounds: %v", err)
	}
	waitMirrorCaughtUp(ctx, t, kafka, c.seeds(), tps)
}

// produceUntil writes small batches to every partition of topic, in turn,
// until stop closes (bounded: at most 2,000 batches).
func produceUntil(ctx context.Context, client *kgo.Client, topic string, partitions int32, stop <-chan struct{}) error {
	for i := range 2000 {
		select {
		case <-stop:
			return nil
		default:
		}
		records := make([]*kgo.Record, 20)
		for j := range records {
			records[j] = &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: fmt.Appendf(nil, "during the kills %d.%d", i, j)}
		}
		if err := client.ProduceSync(ctx, records...).FirstErr(); err != nil {
			return err
		}
	}
	return nil
}

// kafkaPast waits until Kafka's end offsets of tps are past floor (the
// producer goes on), and returns them.
func kafkaPast(ctx context.Context, t *testing.T, kafka string, tps []topicPartition, floor map[topicPartition]int64) map[topicPartition]int64 {
	t.Helper()
	var ends map[topicPartition]int64
	reason := pollUntil(ctx, interopProgressWait, func(ctx context.Context) string {
		var err error
		if ends, err = endOffsets(ctx, kafka, tps); err != nil {
			return err.Error()
		}
		for _, tp := range tps {
			if ends[tp] <= floor[tp] {
				return fmt.Sprintf("Kafka's %s ends at %d, not past %d", tp, ends[tp], floor[tp])
			}
		}
		return ""
	})
	if reason != "" {
		t.Fatalf("Kafka takes no records: %s", reason)
	}
	return ends
}

// stopWithControllerKilled is TestClusterMirrorKafka's failover with the
// controller killed midway.
func stopWithControllerKilled(ctx context.Context, t *testing.T, c *testClusterNodes, kafka string, tps []topicPartition, seed uint64) {
	t.Helper()
	topicNames := map[string]bool{}
	for _, tp := range tps {
		topicNames[tp.topic] = true
	}
	meta, err := kadm.NewClient(newClient(t, c.nodes[0].addr)).Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	controller := int(meta.Controller) - 1
	if controller < 0 {
		t.Fatalf("no controller in node 1's metadata: %+v", meta)
	}
	// The controller leads every partition: the others are drained, then
	// undrained (leaders stay where they are).
	others := []int{(controller + 1) % 3, (controller + 2) % 3}
	for _, drain := range []string{"--drain", "--undrain"} {
		for _, i := range others {
			runNodes(ctx, t, c, drain, strconv.Itoa(i+1))
		}
	}
	for topic := range topicNames {
		c.waitPartitions(ctx, controller, topic, topic+": led by the controller with a full ISR", 60*time.Second, func(ps kadm.PartitionDetails) bool {
			return fullISR(ps) && !slices.ContainsFunc(slices.Collect(maps.Values(ps)), func(p kadm.PartitionDetail) bool { return int(p.Leader) != controller+1 })
		})
	}
	kafkaEnds, err := endOffsets(ctx, kafka, tps)
	if err != nil {
		t.Fatal(err)
	}
	fromKafka := readAll(ctx, t, kafka, tps)

	// Records of the stop: the first one written after the stop is sent
	// kills the controller. One follower is paused (SIGSTOP) so that the
	// stop's steps, which wait for the ISR to hold what they write, cannot
	// all finish before the kill.
	etcd, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	prefix := "/mirrord/" + meta.Cluster + "/mirrors/m/state/"
	current, err := etcd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch := etcd.Watch(watchCtx, prefix, clientv3.WithPrefix(), clientv3.WithRev(current.Header.Revision+1))
	paused, asker := c.nodes[others[0]], c.nodes[others[1]]
	if err := syscall.Kill(paused.proc.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			syscall.Kill(paused.proc.Pid(), syscall.SIGCONT)
		}
	}
	defer resume()
	killedAt := make(chan time.Time, 1)
	victim := c.nodes[controller]
	go func() {
		for resp := range watch { // bounded: the watch ends with watchCtx
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut {
					syscall.Kill(victim.proc.Pid(), syscall.SIGKILL)
					killedAt <- time.Now()
					return
				}
			}
		}
	}()
	asked := time.Now()
	result := runMirrors(ctx, t, asker.addr, "--stop", "--mirror", "m", "--topics", "cm-.*")
	var killed time.Time
	select {
	case killed = <-killedAt:
	case <-ctx.Done():
		t.Fatal("no record of the stop written")
	}
	resume()
	<-victim.proc.Exited()
	if !victim.proc.KilledBySignal(syscall.SIGKILL) {
		t.Fatalf("the controller (node %d) ended with %v, not by the kill", controller+1, victim.proc.ExitErr())
	}
	// It had not finished: its log holds fewer stopped partitions than it led.
	logged, err := os.ReadFile(victim.proc.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(logged, []byte("stopped mirroring: the partition is writable")); n >= len(tps) {
		t.Fatalf("the controller stopped all %d partitions before its kill (%d): the kill was not during the stop", len(tps), n)
	} else {
		t.Logf("controller (node %d) killed %v after the stop was sent, with %d of %d partitions stopped", controller+1, killed.Sub(asked).Round(time.Millisecond), n, len(tps))
	}
	if result.exit != 0 {
		// The node asked answered before the new leaders finished (its
		// wait is bounded): the operator asks again.
		t.Logf("the first --stop answered exit %d: %s%s; asking again", result.exit, result.stdout, result.stderr)
		result.stdout = runMirrorsOK(ctx, t, asker.addr, "--stop", "--mirror", "m", "--topics", "cm-.*")
	}
	for topic := range topicNames {
		if !strings.Contains(result.stdout, topic) || strings.Count(result.stdout, "stopped: writable") != len(topicNames) {
			t.Fatalf("--stop through node %d:\n%s", slices.Index(c.nodes, asker)+1, result.stdout)
		}
	}
	t.Logf("--stop answered %v after it was sent, %v after the controller's kill", time.Since(asked).Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	victim.start()

	// The end state of a stop on one node: every partition STOPPED at
	// Kafka's log end, its batches Kafka's, then the stop's own.
	for i, n := range c.nodes { // a node's cache may trail the leaders' writes by a moment
		if last := pollUntil(ctx, 30*time.Second, func(ctx context.Context) string {
			described, out := describeMirror(ctx, t, n.addr, "m")
			if len(described.Partitions) != len(tps) {
				return fmt.Sprintf("%d partitions described, want %d\n%s", len(described.Partitions), len(tps), out)
			}
			for _, p := range described.Partitions {
				tp := topicPartition{p.Topic, p.Partition}
				if p.State != "STOPPED" || p.LastMirrorOffset != kafkaEnds[tp] {
					return fmt.Sprintf("%s %s at last mirror offset %d, want STOPPED at Kafka's end %d\n%s", tp, p.State, p.LastMirrorOffset, kafkaEnds[tp], out)
				}
			}
			return ""
		}); last != "" {
			t.Fatalf("node %d describes %s", i+1, last)
		}
	}
	for i := range c.nodes {
		got := readAll(ctx, t, c.nodes[i].addr+","+c.nodes[i].addr, tps)
		for _, tp := range tps {
			if !bytes.HasPrefix(got[tp].batches, fromKafka[tp].batches) || got[tp].highWatermark <= kafkaEnds[tp] {
				t.Errorf("through node %d, %s: %d bytes to offset %d, want Kafka's %d bytes to %d, then the stop's batches", i+1, tp,
					len(got[tp].batches), got[tp].highWatermark, len(fromKafka[tp].batches), kafkaEnds[tp])
			}
		}
	}
	// Writable through every node, at the offsets after the stop's.
	for i, n := range c.nodes {
		cl := newClient(t, n.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
		for _, tp := range tps {
			r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: tp.topic, Partition: tp.partition, Value: fmt.Appendf(nil, "after the stop, through node %d", i+1)}).First()
			if err != nil || r.Offset <= kafkaEnds[tp] {
				t.Fatalf("produce to %s through node %d after the stop: %v %v, want an offset past Kafka's end %d", tp, i+1, r, err, kafkaEnds[tp])
			}
		}
		cl.Close()
	}
	for topic := range topicNames {
		c.waitPartitions(ctx, 0, topic, topic+": every replica in the ISR after the stop", 60*time.Second, fullISR)
	}
	events := int32(0)
	for _, tp := range tps {
		if tp.topic == "cm-events" {
			events++
		}
	}
	// The failed-over topic under acks=all produces, with its leaders
	// killed: the same rounds as a writable topic's.
	rounds := 1
	if os.Getenv("MIRRORD_SOAK") != "" {
		rounds = 6
	}
	killLeadersWhileProducing(ctx, t, c, "cm-events", events, seed, rounds, 3000)
	for _, n := range c.nodes {
		n.stop()
	}
	for _, tp := range tps {
		compareReplicaLogs(t, c, tp.topic, tp.partition)
	}
}

// runNodes runs `mirrord nodes` on the cluster's etcd with args, and
// requires it to succeed.
func runNodes(ctx context.Context, t *testing.T, c *testClusterNodes, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	args = append([]string{"nodes", "--etcd-endpoints", strings.Join(c.etcd.Endpoints(), ",")}, args...)
	out, err := exec.CommandContext(ctx, mirrordBinary, args...).CombinedOutput()
	var exit *exec.ExitError
	if err != nil || errors.As(err, &exit) {
		t.Fatalf("mirrord %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
