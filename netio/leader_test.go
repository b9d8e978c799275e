package netio

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/recordbatch"
)

// clusterPartition is a partition of a two-node cluster that leader
// leads: it serves followers through ReadReplica (noting who read), and
// refuses produces unless this node (1) leads; an acks=-1 produce waits
// until two are waiting at once, or for its ctx's deadline.
type clusterPartition struct {
	Partition
	leader      int32
	replicaRead *atomic.Int32
	barrier     *produceBarrier
}

// produceBarrier lets acks=-1 produces through once two wait together.
type produceBarrier struct {
	mu      sync.Mutex
	entered int
	both    chan struct{}
}

func (p clusterPartition) Replication() (int32, []int32, []int32) {
	return p.leader, []int32{1, 2}, []int32{1, 2}
}

// ReplicaLeaderEpoch is 3, below the leader epoch clients see.
func (clusterPartition) ReplicaLeaderEpoch() recordbatch.Epoch { return 3 }

func (p clusterPartition) ReadReplica(replicaID int32, offset recordbatch.Offset, maxBytes int32, minOneBatch bool) (ReadResult, error) {
	p.replicaRead.Store(replicaID)
	return p.Partition.Read(offset, maxBytes, ReadUncommitted, minOneBatch)
}

func (p clusterPartition) Produce(ctx context.Context, batches []byte, request ProduceRequest) (ProduceResult, error) {
	if p.leader != 1 {
		return ProduceResult{}, kerr.NotLeaderForPartition
	}
	if request.Acks != -1 {
		return p.Partition.Produce(ctx, batches, request)
	}
	if _, ok := ctx.Deadline(); !ok {
		return ProduceResult{}, errors.New("acks=-1 without a deadline")
	}
	p.barrier.mu.Lock()
	if p.barrier.entered++; p.barrier.entered == 2 {
		close(p.barrier.both)
	}
	p.barrier.mu.Unlock()
	select {
	case <-p.barrier.both:
		return ProduceResult{BaseOffset: 0, LogAppendTime: -1}, nil
	case <-ctx.Done():
		return ProduceResult{}, kerr.RequestTimedOut
	}
}

// clusterBackend is a backend of a cluster of nodes 1 and 2.
type clusterBackend struct {
	*wrapBackend
	brokers []Broker
}

var _ ClusterBackend = clusterBackend{}

func (b clusterBackend) Brokers(string) []Broker { return b.brokers }

func (b clusterBackend) CreateReplicatedTopic(ctx context.Context, name string, partitions int32, _ int16, configs map[string]string, validateOnly bool) (TopicInfo, error) {
	return b.CreateTopic(ctx, name, partitions, configs, validateOnly)
}
func (b clusterBackend) ControllerID() int32 { return 1 }

// elsewhere is a topic the cluster has on node 2 alone, at leader epoch 9.
const elsewhere = "elsewhere"

// Partition refuses elsewhere's partitions, as a node not holding them.
func (b clusterBackend) Partition(topic string, partition int32) (Partition, error) {
	if topic == elsewhere {
		return nil, kerr.NotLeaderForPartition
	}
	return b.wrapBackend.Partition(topic, partition)
}

// Replication is the cluster's view of a partition, as its partitions
// answer it.
func (b clusterBackend) Replication(topic string, partition int32) (Replication, bool) {
	if topic == elsewhere {
		return Replication{Leader: 2, LeaderEpoch: 9, Replicas: []int32{2}, ISR: []int32{2}}, true
	}
	p, err := b.Partition(topic, partition)
	if err != nil {
		return Replication{}, false
	}
	leader, replicas, isr := p.(ReplicatedPartition).Replication()
	return Replication{Leader: leader, LeaderEpoch: p.LeaderEpoch(), Replicas: replicas, ISR: isr}, true
}

func (b clusterBackend) Coordinator(int8, string) (Broker, bool) { return b.brokers[0], true }

func startClusterServer(t *testing.T, leader *atomic.Int32, replicaRead *atomic.Int32) (*memBackend, string) {
	t.Helper()
	mem := newMemBackend()
	barrier := &produceBarrier{both: make(chan struct{})}
	backend := clusterBackend{wrapBackend: &wrapBackend{mem, func(_ string, _ int32, p Partition) Partition {
		return clusterPartition{Partition: p, leader: leader.Load(), replicaRead: replicaRead, barrier: barrier}
	}}, brokers: []Broker{{NodeID: 1, Host: "node-1.example", Port: 9092}, {NodeID: 2, Host: "node-2.example", Port: 9093, Rack: "r2"}}}
	addr, _ := startFetchServer(t, mem, backend, nil)
	return mem, addr
}

// TestFetchFollowerReadsReplica: a follower's fetch (ReplicaID before
// v15, ReplicaState.ID from it) reads through ReadReplica; a consumer's
// does not.
func TestFetchFollowerReadsReplica(t *testing.T) {
	var leader, replicaRead atomic.Int32
	leader.Store(1)
	mem, addr := startClusterServer(t, &leader, &replicaRead)
	info := fetchTestTopic(t, mem, "t", 1, []string{"a"})
	client := dialFetchTest(t, addr)
	for _, test := range []struct {
		version int16
		replica int32
	}{{12, -1}, {12, 2}, {17, -1}, {17, 2}} {
		replicaRead.Store(0)
		req := fetchTestRequest(test.version, info, at(0, 0))
		req.ReplicaID, req.ReplicaState.ID = test.replica, test.replica
		rp := fetchTestOnly(t, client.fetch(req))
		if rp.ErrorCode != 0 || len(fetchTestBatches(t, rp.RecordBatches)) != 1 {
			t.Fatalf("v%d replica %d: error %d, %d record bytes", test.version, test.replica, rp.ErrorCode, len(rp.RecordBatches))
		}
		if want := max(test.replica, 0); replicaRead.Load() != want {
			t.Fatalf("v%d replica %d: ReadReplica by %d, want %d", test.version, test.replica, replicaRead.Load(), want)
		}
	}
}

// TestFetchFollowerFencedByReplicaEpoch: a follower's CurrentLeaderEpoch
// is checked against ReplicaLeaderEpoch, a consumer's against LeaderEpoch.
func TestFetchFollowerFencedByReplicaEpoch(t *testing.T) {
	var leader, replicaRead atomic.Int32
	leader.Store(1)
	mem, addr := startClusterServer(t, &leader, &replicaRead)
	info := fetchTestTopic(t, mem, "t", 1, []string{"a"})
	setLeaderEpoch(t, mem, "t", 0, 7)
	client := dialFetchTest(t, addr)
	for _, test := range []struct {
		replica, epoch int32
		code           int16
	}{{2, 3, 0}, {2, 7, kerr.UnknownLeaderEpoch.Code}, {2, 2, kerr.FencedLeaderEpoch.Code}, {-1, 7, 0}, {-1, 3, kerr.FencedLeaderEpoch.Code}} {
		part := at(0, 0)
		part.currentLeaderEpoch = test.epoch
		req := fetchTestRequest(17, info, part)
		req.ReplicaState.ID = test.replica
		rp := fetchTestOnly(t, client.fetch(req))
		if rp.ErrorCode != test.code {
			t.Fatalf("replica %d at epoch %d: error %d, want %d", test.replica, test.epoch, rp.ErrorCode, test.code)
		}
		if test.replica >= 0 && test.code == kerr.FencedLeaderEpoch.Code && rp.CurrentLeader.LeaderEpoch != 3 {
			t.Fatalf("a fenced follower is told epoch %d, want 3", rp.CurrentLeader.LeaderEpoch)
		}
	}
}

// TestNotLeaderNamesLeader: a partition another node leads answers
// NOT_LEADER_OR_FOLLOWER to Fetch and Produce, naming the leader and its
// endpoint from Fetch v16 and Produce v10 (KIP-951); no leader is -1.
func TestNotLeaderNamesLeader(t *testing.T) {
	var leader, replicaRead atomic.Int32
	leader.Store(1)
	mem, addr := startClusterServer(t, &leader, &replicaRead)
	info := fetchTestTopic(t, mem, "t", 1, []string{"a"})
	setLeaderEpoch(t, mem, "t", 0, 7)
	client := dialFetchTest(t, addr)
	for _, test := range []struct {
		leader  int32
		version int16
		named   bool
	}{{2, 15, false}, {2, 16, true}, {2, 18, true}, {-1, 16, false}} {
		leader.Store(test.leader)
		resp := client.fetch(fetchTestRequest(test.version, info, at(0, 0)))
		rp := fetchTestOnly(t, resp)
		if rp.ErrorCode != kerr.NotLeaderForPartition.Code || len(rp.RecordBatches) != 0 {
			t.Fatalf("fetch v%d, leader %d: error %d, %d record bytes", test.version, test.leader, rp.ErrorCode, len(rp.RecordBatches))
		}
		named := rp.CurrentLeader.LeaderID == 2 && rp.CurrentLeader.LeaderEpoch == 7 &&
			len(resp.Brokers) == 1 && resp.Brokers[0].NodeID == 2 && resp.Brokers[0].Host == "node-2.example" && resp.Brokers[0].Port == 9093
		if named != test.named {
			t.Fatalf("fetch v%d, leader %d: current leader %+v, brokers %+v; named %v, want %v", test.version, test.leader, rp.CurrentLeader, resp.Brokers, named, test.named)
		}
		if test.version >= 16 && test.leader < 0 && (rp.CurrentLeader.LeaderID != -1 || rp.CurrentLeader.LeaderEpoch != -1 || len(resp.Brokers) != 0) {
			t.Fatalf("fetch v%d without a leader: current leader %+v, brokers %+v", test.version, rp.CurrentLeader, resp.Brokers)
		}
	}

	// A partition this node does not hold: the cluster names its leader.
	other := fetchTestTopic(t, mem, elsewhere, 1)
	resp := client.fetch(fetchTestRequest(17, other, at(0, 0)))
	if rp := fetchTestOnly(t, resp); rp.ErrorCode != kerr.NotLeaderForPartition.Code || rp.CurrentLeader.LeaderID != 2 || rp.CurrentLeader.LeaderEpoch != 9 ||
		len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 {
		t.Fatalf("fetch of a partition held elsewhere: error %d, current leader %+v, brokers %+v", rp.ErrorCode, rp.CurrentLeader, resp.Brokers)
	}
	if resp := produceOneRecord(t, client, other, 13, 1, 1000); resp.Topics[0].Partitions[0].CurrentLeader.LeaderEpoch != 9 || len(resp.Brokers) != 1 {
		t.Fatalf("produce to a partition held elsewhere: %+v, brokers %+v", resp.Topics[0].Partitions[0], resp.Brokers)
	}

	leader.Store(2)
	for _, version := range []int16{9, 10, 13} {
		resp := produceOneRecord(t, client, info, version, 1, 1000)
		sp := resp.Topics[0].Partitions[0]
		named := sp.CurrentLeader.LeaderID == 2 && sp.CurrentLeader.LeaderEpoch == 7 && len(resp.Brokers) == 1 &&
			resp.Brokers[0].Host == "node-2.example" && resp.Brokers[0].Rack != nil && *resp.Brokers[0].Rack == "r2"
		if sp.ErrorCode != kerr.NotLeaderForPartition.Code || named != (version >= 10) {
			t.Fatalf("produce v%d: error %d, current leader %+v, brokers %+v", version, sp.ErrorCode, sp.CurrentLeader, resp.Brokers)
		}
	}
}

// TestProduceAcksAllDeadline: an acks=-1 produce waits at most the
// request's timeout.
func TestProduceAcksAllDeadline(t *testing.T) {
	var leader, replicaRead atomic.Int32
	leader.Store(1)
	mem, addr := startClusterServer(t, &leader, &replicaRead)
	info := fetchTestTopic(t, mem, "t", 1)
	client := dialFetchTest(t, addr)
	start := time.Now()
	sp := produceOneRecord(t, client, info, 9, -1, 100).Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("acks=-1: error %d, want REQUEST_TIMED_OUT", sp.ErrorCode)
	}
	if took := time.Since(start); took < 100*time.Millisecond || took > 10*time.Second {
		t.Fatalf("answered after %v, want about the 100 ms timeout", took)
	}
	if sp := produceOneRecord(t, client, info, 9, 1, 0).Topics[0].Partitions[0]; sp.ErrorCode != 0 {
		t.Fatalf("acks=1 with timeout 0: error %d", sp.ErrorCode)
	}
}

// TestProduceAcksAllPartitionsWaitTogether: on a cluster's leader the
// partitions of an acks=-1 produce wait for their ISR at once, not one
// after the other (each here waits until both wait).
func TestProduceAcksAllPartitionsWaitTogether(t *testing.T) {
	var leader, replicaRead atomic.Int32
	leader.Store(1)
	mem, addr := startClusterServer(t, &leader, &replicaRead)
	info := fetchTestTopic(t, mem, "t", 2)
	client := dialFetchTest(t, addr)
	resp := produceOneRecord(t, client, info, 9, -1, 10_000, 0, 1)
	for _, sp := range resp.Topics[0].Partitions {
		if sp.ErrorCode != 0 {
			t.Fatalf("partition %d: error %d, want both answered together", sp.Partition, sp.ErrorCode)
		}
	}
}

// produceOneRecord sends one Produce of one record to each partition
// named (none: partition 0).
func produceOneRecord(t *testing.T, client *fetchTestClient, info TopicInfo, version, acks int16, timeoutMillis int32, partitions ...int32) *kmsg.ProduceResponse {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, acks, timeoutMillis
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = info.Name, info.ID
	if len(partitions) == 0 {
		partitions = []int32{0}
	}
	for _, partition := range partitions {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = partition
		rp.Records = recordbatch.Append(nil, recordbatch.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
			Records: []recordbatch.Record{{Value: []byte("v")}}})
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := client.roundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ProduceResponse)
}

// TestOffsetForLeaderEpochOnLeaderOnly: a follower's log may still
// diverge, so OffsetForLeaderEpoch is the leader's to answer, as Kafka's
// (fetchOnlyFromLeader); the leader answers.
func TestOffsetForLeaderEpochOnLeaderOnly(t *testing.T) {
	var leader, replicaRead atomic.Int32
	mem, addr := startClusterServer(t, &leader, &replicaRead)
	fetchTestTopic(t, mem, "t", 1, []string{"a", "b"})
	client := dialFetchTest(t, addr)
	for _, test := range []struct {
		leader int32
		code   int16
	}{{2, kerr.NotLeaderForPartition.Code}, {1, 0}} {
		leader.Store(test.leader)
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.Version, req.ReplicaID = 4, -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := client.roundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		sp := resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
		if sp.ErrorCode != test.code || test.code == 0 && sp.EndOffset != 2 {
			t.Fatalf("leader %d: %+v, want error %d", test.leader, sp, test.code)
		}
	}
}
