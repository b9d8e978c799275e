package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// replicaCluster is nodes 1..n of one process, each served by netio on
// 127.0.0.1, with one topic "t" of one partition on every node (same
// topic ID) and roles set by hand (no etcd).
type replicaCluster struct {
	nodes   []*Node
	brokers []netio.Broker
	addrs   []string
}

var replicaTP = logstore.TopicPartition{Topic: "t", Partition: 0}

func startReplicaCluster(t testing.TB, n int) *replicaCluster {
	t.Helper()
	return startReplicaClusterLag(t, n, 0)
}

// startReplicaClusterLag is startReplicaCluster with the nodes'
// replica.lag.time.max.ms (0: Kafka's).
func startReplicaClusterLag(t testing.TB, n int, lagMax time.Duration) *replicaCluster {
	t.Helper()
	c := &replicaCluster{}
	clusterID, topicID := rb.NewTopicID().String(), rb.NewTopicID()
	for id := int32(1); id <= int32(n); id++ {
		dir := t.TempDir()
		meta := fmt.Sprintf("version=1\ncluster.id=%s\nnode.id=%d\n", clusterID, id)
		if err := os.WriteFile(filepath.Join(dir, "meta.properties"), []byte(meta), 0o644); err != nil {
			t.Fatal(err)
		}
		node, addr := startNodeConfig(t, NodeConfig{FS: vfs.OS, DataDir: dir, Log: logstore.DefaultConfig(), ReplicaLagTimeMax: lagMax})
		if got := node.Cluster().NodeID; got != id {
			t.Fatalf("node ID %d, want %d", got, id)
		}
		if _, err := node.EnsureTopic(context.Background(), replicaTP.Topic, topicID, 1); err != nil {
			t.Fatal(err)
		}
		host, port, _ := net.SplitHostPort(addr)
		portNumber, _ := strconv.Atoi(port)
		c.nodes = append(c.nodes, node)
		c.addrs = append(c.addrs, addr)
		c.brokers = append(c.brokers, netio.Broker{NodeID: id, Host: host, Port: int32(portNumber)})
	}
	return c
}

// partition is node id's partition of "t".
func (c *replicaCluster) partition(t testing.TB, id int32) *broker.Partition {
	t.Helper()
	p, err := c.nodes[id-1].LocalPartition(replicaTP.Topic, replicaTP.Partition)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// lead makes leader lead at epoch with isr on every node, and every
// other node follow it.
func (c *replicaCluster) lead(t testing.TB, leader int32, epoch rb.Epoch, isr ...int32) {
	t.Helper()
	var replicas []int32
	for _, b := range c.brokers {
		replicas = append(replicas, b.NodeID)
	}
	role := broker.Role{Leader: leader, LeaderEpoch: epoch, Replicas: replicas, ISR: isr, PartitionEpoch: int64(epoch)}
	for _, b := range c.brokers {
		c.partition(t, b.NodeID).SetRole(role)
	}
	for _, b := range c.brokers {
		c.follow(t, b.NodeID, leader, epoch)
	}
}

// follow makes node id follow leader at epoch (itself: nothing).
func (c *replicaCluster) follow(t testing.TB, id, leader int32, epoch rb.Epoch) {
	t.Helper()
	if id == leader {
		c.nodes[id-1].SetFollowing(nil)
		return
	}
	c.nodes[id-1].SetFollowing(map[logstore.TopicPartition]FollowTarget{replicaTP: {Leader: c.brokers[leader-1], LeaderEpoch: epoch}})
}

// logBytes is every batch of node id's log.
func (c *replicaCluster) logBytes(t testing.TB, id int32) []byte {
	t.Helper()
	p := c.partition(t, id)
	data, err := p.ReadBatches(nil, p.LogStartOffset(), 1<<30, p.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// waitIdentical waits until every node's log is the leader's, byte for
// byte, and every high watermark the leader's log end (the followers'
// next fetch moves the leader's, the answer to it theirs).
func (c *replicaCluster) waitIdentical(t *testing.T, leader int32) {
	t.Helper()
	waitUntil(t, "the followers to hold the leader's log", func() bool {
		want := c.partition(t, leader)
		if want.HighWatermark() != want.LogEndOffset() {
			return false
		}
		for _, b := range c.brokers {
			p := c.partition(t, b.NodeID)
			if p.LogEndOffset() != want.LogEndOffset() || p.HighWatermark() != want.HighWatermark() ||
				!bytes.Equal(c.logBytes(t, b.NodeID), c.logBytes(t, leader)) {
				return false
			}
		}
		return true
	})
}

func oneBatch(values ...string) []byte {
	var records []rb.Record
	for _, v := range values {
		records = append(records, rb.Record{Value: []byte(v)})
	}
	return rb.Append(nil, rb.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: records})
}

// produceRaw sends one Produce of one batch to addr and returns the
// partition's answer.
func (c *replicaCluster) produceRaw(t *testing.T, addr string, acks int16, timeout time.Duration, values ...string) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	acksOption := kgo.AllISRAcks()
	if acks == 1 {
		acksOption = kgo.LeaderAck()
	}
	// kgo sends a raw Produce with the client's acks.
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(acksOption), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, acks, int32(timeout.Milliseconds())
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = replicaTP.Topic
	if info, ok := c.nodes[0].Topic(replicaTP.Topic); ok {
		topic.TopicID = info.ID // kgo sends the version both sides serve: v13 names topics by ID
	}
	partition := kmsg.NewProduceRequestTopicPartition()
	partition.Partition, partition.Records = replicaTP.Partition, oneBatch(values...)
	topic.Partitions = append(topic.Partitions, partition)
	req.Topics = append(req.Topics, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := client.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// TestReplicaFetcherAcksAll: followers copy the leader byte for byte, and
// an acks=all produce is answered only once every ISR follower has the
// batch; with a follower of the ISR not fetching it times out.
func TestReplicaFetcherAcksAll(t *testing.T) {
	c := startReplicaCluster(t, 3)
	c.lead(t, 1, 1, 1, 2, 3)
	client, err := kgo.NewClient(kgo.SeedBrokers(c.addrs[0]), kgo.DefaultProduceTopic(replicaTP.Topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const produced = 40
	for i := range produced {
		r, err := client.ProduceSync(ctx, &kgo.Record{Value: []byte("v" + strconv.Itoa(i))}).First()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		for _, id := range []int32{2, 3} {
			if end := c.partition(t, id).LogEndOffset(); end <= rb.Offset(r.Offset) {
				t.Fatalf("record at %d acknowledged while follower %d ends at %d", r.Offset, id, end)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		t.Fatal(err)
	}
	c.waitIdentical(t, 1)
	if hw := c.partition(t, 1).HighWatermark(); hw != produced {
		t.Fatalf("high watermark %d, want %d", hw, produced)
	}

	// Follower 3 stops fetching and stays in the ISR (no ISR writer):
	// acks=all times out, acks=1 is answered, the high watermark waits.
	c.nodes[2].SetFollowing(nil)
	if got := c.produceRaw(t, c.addrs[0], -1, 300*time.Millisecond, "late"); got.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("acks=all without follower 3: error %d, want REQUEST_TIMED_OUT", got.ErrorCode)
	}
	if got := c.produceRaw(t, c.addrs[0], 1, time.Second, "one"); got.ErrorCode != 0 || got.BaseOffset != produced+1 {
		t.Fatalf("acks=1: error %d at %d, want none at %d", got.ErrorCode, got.BaseOffset, produced+1)
	}
	waitUntil(t, "follower 2 to catch up", func() bool { return c.partition(t, 2).LogEndOffset() == produced+2 })
	if hw := c.partition(t, 1).HighWatermark(); hw != produced {
		t.Fatalf("high watermark %d without follower 3, want %d", hw, produced)
	}
	c.follow(t, 3, 1, 1)
	c.waitIdentical(t, 1)
	if hw := c.partition(t, 1).HighWatermark(); hw != produced+2 {
		t.Fatalf("high watermark %d with follower 3 back, want %d", hw, produced+2)
	}

	// A follower refuses clients, naming the leader (KIP-951).
	got := c.produceRaw(t, c.addrs[1], 1, time.Second, "to a follower")
	if got.ErrorCode != kerr.NotLeaderForPartition.Code || got.CurrentLeader.LeaderID != 1 || got.CurrentLeader.LeaderEpoch != 1 {
		t.Fatalf("produce to a follower: error %d, leader %+v; want NOT_LEADER_OR_FOLLOWER naming node 1 at epoch 1", got.ErrorCode, got.CurrentLeader)
	}
}

// TestReplicaFetcherTruncatesOnDivergingEpoch: after a leader change the
// old leader's records past the new leader's log are cut (DivergingEpoch)
// and every log ends as the new leader's.
func TestReplicaFetcherTruncatesOnDivergingEpoch(t *testing.T) {
	c := startReplicaCluster(t, 3)
	c.lead(t, 1, 1, 1, 2, 3)
	for i := range 5 {
		if got := c.produceRaw(t, c.addrs[0], -1, 10*time.Second, "a"+strconv.Itoa(i)); got.ErrorCode != 0 {
			t.Fatalf("produce %d: error %d", i, got.ErrorCode)
		}
	}
	c.waitIdentical(t, 1)
	common := c.partition(t, 1).LogEndOffset()

	// Node 1 writes what no follower copies, then loses the leadership.
	c.nodes[1].SetFollowing(nil)
	c.nodes[2].SetFollowing(nil)
	for i := range 3 {
		if got := c.produceRaw(t, c.addrs[0], 1, time.Second, "lost"+strconv.Itoa(i)); got.ErrorCode != 0 {
			t.Fatalf("produce to node 1: error %d", got.ErrorCode)
		}
	}
	if end := c.partition(t, 1).LogEndOffset(); end != common+3 {
		t.Fatalf("node 1 ends at %d, want %d", end, common+3)
	}
	c.lead(t, 2, 2, 2, 3)
	for i := range 2 {
		if got := c.produceRaw(t, c.addrs[1], -1, 10*time.Second, "b"+strconv.Itoa(i)); got.ErrorCode != 0 {
			t.Fatalf("produce to node 2: error %d", got.ErrorCode)
		}
	}
	c.waitIdentical(t, 2)
	p := c.partition(t, 1)
	if end := p.LogEndOffset(); end != common+2 {
		t.Fatalf("node 1 ends at %d, want %d", end, common+2)
	}
	if e, ok := p.Log().EpochForOffset(common); !ok || e != 2 {
		t.Fatalf("node 1's epoch at %d: %d (%v), want 2", common, e, ok)
	}
	// The old leader is a follower now: its fetch answers are fenced.
	if _, err := p.Read(0, 1<<20, netio.ReadUncommitted, true); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("read on a follower: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
}

// TestReplicaFetcherISR: the leader's ISR goroutine takes a follower that
// stopped fetching out of the ISR through the ISR writer (acks=all is
// answered again without it), and back in once it has caught up.
func TestReplicaFetcherISR(t *testing.T) {
	c := startReplicaClusterLag(t, 2, time.Second)
	c.lead(t, 1, 1, 1, 2)
	leader := c.partition(t, 1)
	var writes atomic.Int32
	c.nodes[0].SetISRWriter(func(_ context.Context, tp logstore.TopicPartition, r broker.Role, isr []int32) (broker.Role, error) {
		if tp != replicaTP {
			return broker.Role{}, fmt.Errorf("ISR written for %s", tp)
		}
		writes.Add(1)
		r.ISR, r.PartitionEpoch = isr, r.PartitionEpoch+1
		return r, nil
	})
	isrIs := func(want ...int32) func() bool {
		return func() bool {
			r, _ := leader.Role()
			return slices.Equal(r.ISR, want)
		}
	}
	if got := c.produceRaw(t, c.addrs[0], -1, 10*time.Second, "a"); got.ErrorCode != 0 {
		t.Fatalf("acks=all with the follower: error %d", got.ErrorCode)
	}
	c.nodes[1].SetFollowing(nil)
	if got := c.produceRaw(t, c.addrs[0], 1, time.Second, "b"); got.ErrorCode != 0 {
		t.Fatalf("acks=1: error %d", got.ErrorCode)
	}
	waitUntil(t, "the follower to leave the ISR", isrIs(1))
	if got := c.produceRaw(t, c.addrs[0], -1, 10*time.Second, "c"); got.ErrorCode != 0 {
		t.Fatalf("acks=all with the ISR the leader alone: error %d", got.ErrorCode)
	}
	if hw, end := leader.HighWatermark(), leader.LogEndOffset(); hw != end {
		t.Fatalf("high watermark %d, want the log end %d", hw, end)
	}
	c.follow(t, 2, 1, 1)
	waitUntil(t, "the follower to join the ISR", isrIs(1, 2))
	c.waitIdentical(t, 1)
	if n := writes.Load(); n < 2 {
		t.Fatalf("%d ISR writes, want the shrink and the expansion", n)
	}
}

// TestReplicaFetcherMirrorTopic: a mirror topic's leader serves its
// clients a leader epoch above the cluster's (the source's epochs in its
// batches, and the mirror's own kept ahead of them); its followers are
// fenced by the cluster's epoch and copy it.
func TestReplicaFetcherMirrorTopic(t *testing.T) {
	c := startReplicaCluster(t, 2)
	c.lead(t, 1, 1, 1, 2)
	leader := c.partition(t, 1)
	leader.SetReadOnly(func(action string) error { return fmt.Errorf("%s refused: a mirror writes this topic", action) })
	var batches []byte
	for i := range 3 {
		batches = rb.Append(batches, rb.Spec{BaseOffset: rb.Offset(i), LeaderEpoch: 30, BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
			Records: []rb.Record{{Value: []byte("m" + strconv.Itoa(i))}}})
	}
	if _, err := leader.AppendMirrored(batches); err != nil {
		t.Fatal(err)
	}
	leader.RaiseLeaderEpoch(40)
	if e := leader.LeaderEpoch(); e != 40 {
		t.Fatalf("leader epoch %d, want the mirror's 40", e)
	}
	c.waitIdentical(t, 1)
	if hw := leader.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d, want 3", hw)
	}
}

// TestReplicaFetcherOutOfRange: a follower whose log ends below the
// leader's log start (DeleteRecords while it was away) restarts its log
// there (OFFSET_OUT_OF_RANGE, then ListOffsets earliest).
func TestReplicaFetcherOutOfRange(t *testing.T) {
	c := startReplicaCluster(t, 2)
	c.lead(t, 1, 1, 1, 2)
	for i := range 2 {
		if got := c.produceRaw(t, c.addrs[0], -1, 10*time.Second, "a"+strconv.Itoa(i)); got.ErrorCode != 0 {
			t.Fatalf("produce: error %d", got.ErrorCode)
		}
	}
	c.waitIdentical(t, 1)
	c.nodes[1].SetFollowing(nil)
	c.lead(t, 1, 2, 1) // the follower left the ISR
	c.nodes[1].SetFollowing(nil)
	for i := range 3 {
		if got := c.produceRaw(t, c.addrs[0], -1, 10*time.Second, "b"+strconv.Itoa(i)); got.ErrorCode != 0 {
			t.Fatalf("produce: error %d", got.ErrorCode)
		}
	}
	leader := c.partition(t, 1)
	if start, err := leader.DeleteRecords(context.Background(), -1); err != nil || start != 5 {
		t.Fatalf("delete records: start %d, %v; want 5", start, err)
	}
	c.follow(t, 2, 1, 2)
	c.waitIdentical(t, 1)
	if start := c.partition(t, 2).LogStartOffset(); start != 5 {
		t.Fatalf("follower log start %d, want 5", start)
	}
}
