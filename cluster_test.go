package mirrord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/cluster/etcdtest"
	"github.com/mirrord/mirrord/logstore"
)

// clusterTestLease is the nodes' lease in these tests: a node closed
// without leaving is replaced after it.
const clusterTestLease = 2 * time.Second

// testCluster is three mirrord nodes of one cluster on 127.0.0.1, with an
// embedded 3-member etcd.
type testCluster struct {
	t         *testing.T
	endpoints string
	dirs      []string
	nodes     []*Node // nil while stopped
	addrs     []string
	stops     []func()
}

func startTestCluster(t *testing.T, nodes int) *testCluster {
	t.Helper()
	etcd, err := etcdtest.Start(3)
	if err != nil {
		t.Fatalf("etcd: %v", err)
	}
	t.Cleanup(etcd.Close)
	tc := &testCluster{t: t, endpoints: strings.Join(etcd.Endpoints(), ",")}
	for i := range nodes {
		tc.dirs = append(tc.dirs, t.TempDir())
		tc.nodes, tc.addrs, tc.stops = append(tc.nodes, nil), append(tc.addrs, ""), append(tc.stops, nil)
		tc.start(i)
	}
	t.Cleanup(func() {
		for i := range tc.nodes {
			tc.stop(i)
		}
	})
	return tc
}

// start opens node i (ID i+1) and serves it on a new 127.0.0.1 port.
func (tc *testCluster) start(i int) {
	t := tc.t
	t.Helper()
	node, err := Open(Config{DataDir: tc.dirs[i], Properties: map[string]string{
		"etcd.endpoints":             tc.endpoints,
		"node.id":                    strconv.Itoa(i + 1),
		"node.lease.ms":              strconv.Itoa(int(clusterTestLease.Milliseconds())),
		"default.replication.factor": "3",
	}})
	if err != nil {
		t.Fatalf("open node %d: %v", i+1, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Serve(ctx, ln) }()
	tc.nodes[i], tc.addrs[i] = node, ln.Addr().String()
	tc.stops[i] = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node %d serve: %v", i+1, err)
		}
		if err := node.Close(); err != nil {
			t.Errorf("node %d close: %v", i+1, err)
		}
	}
}

func (tc *testCluster) stop(i int) {
	if tc.stops[i] != nil {
		tc.stops[i]()
		tc.stops[i], tc.nodes[i] = nil, nil
	}
}

func (tc *testCluster) client(i int, opts ...kgo.Opt) *kgo.Client {
	tc.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tc.addrs[i])}, opts...)...)
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.t.Cleanup(cl.Close)
	return cl
}

// waitReplicas polls until every running node's replica of each partition
// of topic has the same log end, and the ends add up to at least
// wantRecords, then requires their bytes to be equal.
func (tc *testCluster) waitReplicas(topic string, partitions int32, wantRecords int64) {
	t := tc.t
	t.Helper()
	waitUntil(t, 60*time.Second, topic+": replicas' log ends equal", func() (bool, string) {
		total := int64(0)
		var all [][]int64
		equal := true
		for p := range partitions {
			var ends []int64
			for _, n := range tc.nodes {
				if n == nil {
					continue
				}
				end := int64(-1)
				if local, err := n.engine.LocalPartition(topic, p); err == nil {
					end = int64(local.LogEndOffset())
				}
				ends = append(ends, end)
			}
			equal = equal && slices.Min(ends) == slices.Max(ends) && ends[0] >= 0
			total += ends[0]
			all = append(all, ends)
		}
		return equal && total >= wantRecords, fmt.Sprint(all)
	})
	for p := range partitions {
		tp := logstore.TopicPartition{Topic: topic, Partition: p}
		var first []byte
		for i, n := range tc.nodes {
			if n == nil {
				continue
			}
			local, err := n.engine.LocalPartition(topic, p)
			if err != nil {
				t.Fatal(err)
			}
			data, err := local.ReadBatches(nil, local.LogStartOffset(), 1<<30, local.LogEndOffset())
			if err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = data
			} else if !bytes.Equal(first, data) {
				t.Fatalf("%s: node %d's replica (%d bytes) differs from the first's (%d bytes)", tp, i+1, len(data), len(first))
			}
		}
	}
}

// produceAll produces count records with acks=all and requires each one
// acknowledged; it returns the values.
func produceAll(t *testing.T, cl *kgo.Client, topic string, from, count int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var values []string
	var records []*kgo.Record
	for i := from; i < from+count; i++ {
		v := fmt.Sprintf("v%06d", i)
		values = append(values, v)
		records = append(records, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i % 7)), Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce %d records from %d: %v", count, from, err)
	}
	return values
}

// consumeAll reads topic from the start through node i's bootstrap until
// it has want records, and returns the values by partition order.
func (tc *testCluster) consumeAll(i int, topic string, want int) []string {
	t := tc.t
	t.Helper()
	cl := tc.client(i, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records through node %d: %v", len(got), want, i+1, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch %s-%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// TestClusterReplicates: three nodes replicate a topic of replication
// factor 3; every replica is byte-identical; a client reads everything
// through any node; when a leader leaves, another in-sync replica leads
// with a higher epoch and no acknowledged record is lost; the node comes
// back and catches up.
func TestClusterReplicates(t *testing.T) {
	tc := startTestCluster(t, 3)
	admin := kadm.NewClient(tc.client(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitUntil(t, 30*time.Second, "three live nodes in node 1's metadata", func() (bool, string) {
		m, err := admin.Metadata(ctx)
		return err == nil && len(m.Brokers) == 3, fmt.Sprint(m.Brokers, err)
	})
	resp, err := admin.CreateTopic(ctx, 3, -1, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "orders")
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	// CreateTopics answers once the controller placed the topic, as the
	// node that took it saw; another node's view may lag a watch event,
	// as a Kafka broker's metadata cache lags its controller.
	var meta kadm.Metadata
	waitUntil(t, 30*time.Second, "orders placed in the metadata", func() (bool, string) {
		meta, err = admin.Metadata(ctx, "orders")
		if err != nil {
			return false, err.Error()
		}
		for _, p := range meta.Topics["orders"].Partitions {
			if len(p.Replicas) != 3 || p.Leader < 1 {
				return false, fmt.Sprintf("partition %d: replicas %v leader %d", p.Partition, p.Replicas, p.Leader)
			}
		}
		return len(meta.Brokers) == 3, fmt.Sprint(len(meta.Brokers), " brokers")
	})
	leaders := map[int32]int{}
	for _, p := range meta.Topics["orders"].Partitions {
		leaders[p.Leader]++
	}
	if len(leaders) != 3 {
		t.Errorf("leaders %v: placement spreads 3 partitions' leaders over 3 nodes", leaders)
	}

	// Producer IDs are the cluster's: two nodes never hand out one.
	seen := map[int64]int32{}
	for id := int32(1); id <= 3; id++ {
		for range 3 {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionTimeoutMillis = 60000
			resp, err := req.RequestWith(ctx, tc.client(0).Broker(int(id)))
			if err != nil || resp.ErrorCode != 0 {
				t.Fatalf("InitProducerID on node %d: %v %v", id, resp, err)
			}
			if other, ok := seen[resp.ProducerID]; ok {
				t.Fatalf("nodes %d and %d both handed out producer ID %d", other, id, resp.ProducerID)
			}
			seen[resp.ProducerID] = id
		}
	}

	// An explicit replication factor is the topic's.
	pairs, err := admin.CreateTopic(ctx, 2, 2, nil, "pairs")
	if err != nil || pairs.Err != nil || pairs.ReplicationFactor != 2 {
		t.Fatalf("create topic with replication factor 2: %+v %v", pairs, err)
	}
	waitUntil(t, 30*time.Second, "pairs placed with two replicas in the metadata", func() (bool, string) {
		m, err := admin.Metadata(ctx, "pairs")
		if err != nil {
			return false, err.Error()
		}
		ps := m.Topics["pairs"].Partitions
		return len(ps) == 2 && len(ps[0].Replicas) == 2 && len(ps[1].Replicas) == 2, fmt.Sprint(ps)
	})
	if resps, err := admin.DeleteTopics(ctx, "pairs"); err != nil || resps["pairs"].Err != nil {
		t.Fatalf("delete pairs: %v %v", err, resps["pairs"].Err)
	}

	// Every node names the controller as the group coordinator.
	var coordinators []int32
	for i := range tc.nodes {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "g"
		resp, err := req.RequestWith(ctx, tc.client(i))
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("FindCoordinator through node %d: %+v %v", i+1, resp, err)
		}
		coordinators = append(coordinators, resp.NodeID)
	}
	if controller := meta.Controller; slices.Min(coordinators) != controller || slices.Max(coordinators) != controller {
		t.Fatalf("coordinators %v, want the controller %d everywhere", coordinators, controller)
	}

	// Transactional producers are refused, naming why (not built yet).
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.TransactionalID, txn.TransactionTimeoutMillis = kmsg.StringPtr("tx"), 60000
	if resp, err := txn.RequestWith(ctx, tc.client(0).Broker(1)); err != nil || resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("transactional InitProducerID: %+v %v, want INVALID_REQUEST", resp, err)
	}

	began := time.Now()
	phase := func(what string) { t.Logf("%v: %s", time.Since(began).Round(time.Millisecond), what) }
	producer := tc.client(1, kgo.RequiredAcks(kgo.AllISRAcks()))
	values := produceAll(t, producer, "orders", 0, 300)
	phase("produced 300")
	tc.waitReplicas("orders", 3, 300)
	phase("replicas equal")
	if got := tc.consumeAll(2, "orders", 300); !sameValues(got, values) {
		t.Fatalf("consumed through node 3: %d records, not the 300 produced", len(got))
	}

	// The leader of partition 0 leaves: another replica leads, with a
	// higher leader epoch; produce and consume go on.
	phase("consumed 300")
	p0 := meta.Topics["orders"].Partitions[0]
	tc.stop(int(p0.Leader) - 1)
	phase("leader stopped")
	survivor := 0
	if p0.Leader == 1 {
		survivor = 1
	}
	waitUntil(t, 30*time.Second, "a new leader of orders-0", func() (bool, string) {
		m, err := kadm.NewClient(tc.client(survivor)).Metadata(ctx, "orders")
		if err != nil {
			return false, err.Error()
		}
		p := m.Topics["orders"].Partitions[0]
		return p.Leader > 0 && p.Leader != p0.Leader && p.LeaderEpoch > p0.LeaderEpoch, fmt.Sprintf("leader %d epoch %d", p.Leader, p.LeaderEpoch)
	})
	phase("new leader")
	more := produceAll(t, tc.client(survivor, kgo.RequiredAcks(kgo.AllISRAcks())), "orders", 300, 100)
	values = append(values, more...)
	phase("produced 100 more")
	if got := tc.consumeAll(survivor, "orders", 400); !sameValues(got, values) {
		t.Fatalf("after the leader left: consumed %d records, not the 400 produced", len(got))
	}

	phase("consumed 400")
	waitUntil(t, 30*time.Second, "under-replicated partitions counted while a node is away", func() (bool, string) {
		under, offline := tc.gauge("mirrord_partitions_under_replicated"), tc.gauge("mirrord_partitions_offline")
		return under == 3 && offline == 0, fmt.Sprintf("under-replicated %v, offline %v", under, offline)
	})
	// It comes back, and catches up byte for byte.
	tc.start(int(p0.Leader) - 1)
	phase("restarted")
	tc.waitReplicas("orders", 3, 400)
	phase("caught up")
	waitUntil(t, 30*time.Second, "no under-replicated partition once the node is back in every ISR", func() (bool, string) {
		under := tc.gauge("mirrord_partitions_under_replicated")
		return under == 0, fmt.Sprint(under)
	})

	// A deleted topic goes from every node.
	if resps, err := admin.DeleteTopics(ctx, "orders"); err != nil || resps["orders"].Err != nil {
		t.Fatalf("delete topic: %v %v", err, resps["orders"].Err)
	}
	waitUntil(t, 30*time.Second, "orders gone from every node", func() (bool, string) {
		var left []int
		for i, n := range tc.nodes {
			if _, err := n.engine.LocalPartition("orders", 0); err == nil {
				left = append(left, i+1)
			}
		}
		return len(left) == 0, fmt.Sprint("still on nodes ", left)
	})
}

// gauge sums a gauge over the running nodes' /metrics.
func (tc *testCluster) gauge(name string) float64 {
	sum := 0.0
	for _, n := range tc.nodes {
		if n == nil {
			continue
		}
		families, err := n.Metrics().Gather()
		if err != nil {
			tc.t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == name {
				for _, m := range f.GetMetric() {
					sum += m.GetGauge().GetValue()
				}
			}
		}
	}
	return sum
}

// waitUntil polls cond, the exact condition the test goes on with, every
// 20 ms until it holds, failing with its last state after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v (%s)", what, timeout, state)
		}
		<-tick.C
	}
}

// sameValues reports whether got holds exactly the values of want (the
// order across partitions is the consumer's).
func sameValues(got, want []string) bool {
	a, b := slices.Clone(got), slices.Clone(want)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestClusterRefusesNamingWithTopics: a node alone, with topics, pointed
// at an etcd holding no cluster (a wiped etcd, or a first try at a
// cluster) refuses to start: it would name a cluster without its topics
// and delete them at its first reconcile.
func TestClusterRefusesNamingWithTopics(t *testing.T) {
	dir := t.TempDir()
	alone, err := Open(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := alone.CreateTopic(context.Background(), "kept", 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := alone.Close(); err != nil {
		t.Fatal(err)
	}
	etcd, err := etcdtest.Start(1)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	_, err = Open(Config{DataDir: dir, Properties: map[string]string{"etcd.endpoints": strings.Join(etcd.Endpoints(), ","), "node.id": "1"}})
	if err == nil || !strings.Contains(err.Error(), "holds topics [kept] and etcd") {
		t.Fatalf("open with topics on an empty etcd: %v", err)
	}
	// Nothing was deleted, and the node still opens alone.
	again, err := Open(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.engine.LocalPartition("kept", 1); err != nil {
		t.Fatalf("kept-1 after the refused start: %v", err)
	}
}
