package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterMirrorKafka mirrors a Kafka 4.4 source into a cluster of three
// `mirrord serve` processes on etcd (replication factor 3): a topic of three
// zstd partitions and a transactional one, the mirror created and started
// through node 2. Through every node, kgo, kcat and Kafka's console
// consumer read what Kafka's own broker serves, and every replica is
// byte-identical on disk. Then the leader of it-cm-events-0 is killed (-9):
// another replica leads and mirrors what Kafka gets afterwards, and the
// killed node comes back and catches up, byte for byte.
func TestClusterMirrorKafka(t *testing.T) {
	t.Parallel()
	source := startKafka(t, 1, nil)
	libs := kafkaLibs(t)
	ctx, cancel := context.WithTimeout(context.Background(), interopDeadline)
	defer cancel()
	kafka := source.Bootstrap()
	maker := newRecordMaker(newSeed(t))
	topics := map[string]int32{"it-cm-events": 3, "it-cm-txn": 2}
	for name, partitions := range topics {
		createKafkaTopic(ctx, t, kafka, name, partitions, 1, nil)
	}
	produceEvents := func(count int) {
		client := newClient(t, kafka, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
		defer client.Close()
		for p := range topics["it-cm-events"] {
			produceTo(ctx, t, client, maker, topicPartition{"it-cm-events", p}, count, newLedger())
		}
	}
	produceEvents(500)
	produceTransactions(ctx, t, kafka, maker, "it-cm-txn", 0)

	c := startClusterNodes(t, 3, clusterLease)
	began := time.Now()
	runMirrorsOK(ctx, t, c.nodes[1].addr, "--create", "--mirror", "m", "--mirror-config", interopMirrorConfig(t, kafka))
	runMirrorsOK(ctx, t, c.nodes[1].addr, "--start", "--mirror", "m", "--topics", "it-cm-.*")
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

	ps, err := c.partitions(ctx, 0, "it-cm-events")
	if err != nil {
		t.Fatal(err)
	}
	old := ps[0]
	victim := int(old.Leader) - 1
	killed := time.Now()
	c.nodes[victim].kill()
	survivor := (victim + 1) % len(c.nodes)
	c.waitPartitions(ctx, survivor, "it-cm-events", "a new leader of it-cm-events-0", clusterNewLeaderMax, func(ps kadm.PartitionDetails) bool {
		p, ok := ps[0]
		return ok && p.Leader > 0 && p.Leader != old.Leader && p.LeaderEpoch > old.LeaderEpoch
	})
	t.Logf("killed node %d (leader of it-cm-events-0, epoch %d); new leader after %v", old.Leader, old.LeaderEpoch, time.Since(killed).Round(time.Millisecond))
	produceEvents(300)
	var survivors []string
	for i, n := range c.nodes {
		if i != victim {
			survivors = append(survivors, n.addr)
		}
	}
	waitMirrorCaughtUp(ctx, t, kafka, strings.Join(survivors, ","), tps)
	t.Logf("%v after the kill: the records Kafka got since mirrored", time.Since(killed).Round(time.Millisecond))
	c.nodes[victim].start()
	replicasEqual()
	t.Logf("%v after the kill: node %d back, every replica identical", time.Since(killed).Round(time.Millisecond), victim+1)
	for i := range c.nodes {
		checkMirrorEqualsKafka(ctx, t, libs, kafka, via(i), topics)
	}
}
