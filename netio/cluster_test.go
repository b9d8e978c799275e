package netio

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/recordbatch"
)

// clusterMem is a memBackend that is one node of three: node 1 (this
// one), 2 and 3 are live, 4 is a replica that is not.
type clusterMem struct {
	*memBackend
	brokers     []Broker
	replication map[int32]Replication // partitions of topic "t"
}

var _ ClusterBackend = (*clusterMem)(nil)

func (b *clusterMem) CreateReplicatedTopic(ctx context.Context, name string, partitions int32, rf int16, configs map[string]string, validateOnly bool) (TopicInfo, error) {
	t, err := b.memBackend.CreateTopic(ctx, name, partitions, configs, validateOnly)
	t.ReplicationFactor = max(rf, 3)
	return t, err
}

func (b *clusterMem) Brokers(listener string) []Broker { return slices.Clone(b.brokers) }
func (b *clusterMem) ControllerID() int32              { return 2 }
func (b *clusterMem) Replication(topic string, partition int32) (Replication, bool) {
	r, ok := b.replication[partition]
	return r, ok && topic == "t"
}

// Partition holds nothing of "t"'s partition 2: another node does.
func (b *clusterMem) Partition(topic string, partition int32) (Partition, error) {
	if topic == "t" && partition == 2 {
		return nil, kerr.NotLeaderForPartition
	}
	return b.memBackend.Partition(topic, partition)
}

func (b *clusterMem) Coordinator(kind int8, key string) (Broker, bool) {
	if key == "orphan" {
		return Broker{}, false
	}
	return b.brokers[2], true
}

func TestClusterMetadata(t *testing.T) {
	mem := newMemBackend()
	if _, err := mem.CreateTopic(context.Background(), "t", 3, nil, false); err != nil {
		t.Fatal(err)
	}
	cm := &clusterMem{memBackend: mem,
		brokers: []Broker{{NodeID: 1, Host: "127.0.0.1", Port: 9092}, {NodeID: 2, Host: "127.0.0.2", Port: 9093, Rack: "r2"}, {NodeID: 3, Host: "127.0.0.3", Port: 9094}},
		replication: map[int32]Replication{
			0: {Leader: 2, LeaderEpoch: 7, Replicas: []int32{2, 1, 3}, ISR: []int32{2, 1}},
			1: {Leader: 4, LeaderEpoch: 3, Replicas: []int32{4, 1}, ISR: []int32{4}},
			2: {Leader: 3, LeaderEpoch: 5, Replicas: []int32{3, 2}, ISR: []int32{3, 2}}, // held by nodes 2 and 3
		}}
	addr := startServer(t, cm)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()

	req := kmsg.NewPtrMetadataRequest()
	topic := kmsg.NewMetadataRequestTopic()
	topic.Topic = kmsg.StringPtr("t")
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 3 || resp.ControllerID != 2 || resp.Brokers[1].Port != 9093 || resp.Brokers[1].Rack == nil || *resp.Brokers[1].Rack != "r2" || resp.Brokers[0].Rack != nil {
		t.Fatalf("brokers %+v controller %d", resp.Brokers, resp.ControllerID)
	}
	ps := resp.Topics[0].Partitions
	if len(ps) != 3 {
		t.Fatalf("partitions %+v", ps)
	}
	if p := ps[0]; p.ErrorCode != 0 || p.Leader != 2 || p.LeaderEpoch != 7 || !slices.Equal(p.Replicas, []int32{2, 1, 3}) || !slices.Equal(p.ISR, []int32{2, 1}) || len(p.OfflineReplicas) != 0 {
		t.Errorf("partition 0: %+v", p)
	}
	if p := ps[1]; p.ErrorCode != kerr.LeaderNotAvailable.Code || p.Leader != -1 || p.LeaderEpoch != 3 || !slices.Equal(p.OfflineReplicas, []int32{4}) {
		t.Errorf("partition 1 (leader 4 not live): %+v", p)
	}
	if p := ps[2]; p.ErrorCode != 0 || p.Leader != 3 || p.LeaderEpoch != 5 {
		t.Errorf("partition 2 (held by other nodes): %+v", p)
	}
	delete(cm.replication, 2)
	if m, err := req.RequestWith(ctx, cl); err != nil || m.Topics[0].Partitions[2].ErrorCode != kerr.LeaderNotAvailable.Code || m.Topics[0].Partitions[2].Leader != -1 {
		t.Errorf("partition 2 not placed: %+v %v", m.Topics[0].Partitions[2], err)
	}
	cm.replication[2] = Replication{Leader: 3, LeaderEpoch: 5, Replicas: []int32{3, 2}, ISR: []int32{3, 2}}

	// A produce to the partition held elsewhere names its leader (KIP-951).
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks, produce.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 2
	rp.Records = recordbatch.Append(nil, recordbatch.Spec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: []recordbatch.Record{{Value: []byte("v")}}})
	rt.Partitions = append(rt.Partitions, rp)
	produce.Topics = append(produce.Topics, rt)
	produce.Version = 10
	raw, err := dialFetchTest(t, addr).roundTrip(produce)
	if err != nil {
		t.Fatal(err)
	}
	presp := raw.(*kmsg.ProduceResponse)
	sp := presp.Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code || sp.CurrentLeader.LeaderID != 3 || sp.CurrentLeader.LeaderEpoch != 5 || len(presp.Brokers) != 1 || presp.Brokers[0].Port != 9094 {
		t.Errorf("produce to a partition held elsewhere: %+v, brokers %+v", sp, presp.Brokers)
	}

	// CreateTopics: a replication factor up to the live nodes goes to the
	// cluster; above is Kafka's refusal; a manual assignment is refused.
	for _, test := range []struct {
		rf         int16
		assignment bool
		code       int16
	}{{2, false, 0}, {4, false, kerr.InvalidReplicationFactor.Code}, {-1, true, kerr.InvalidRequest.Code}} {
		ct := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("rf%d", test.rf), 1, test.rf
		if test.assignment {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Replicas = []int32{1}
			rt.NumPartitions, rt.ReplicaAssignment = -1, append(rt.ReplicaAssignment, ra)
		}
		ct.Topics = append(ct.Topics, rt)
		ct.Version = 7
		raw, err := dialFetchTest(t, addr).roundTrip(ct) // kgo would send it to the controller, node 2
		if err != nil {
			t.Fatal(err)
		}
		st := raw.(*kmsg.CreateTopicsResponse).Topics[0]
		if st.ErrorCode != test.code || test.code == 0 && st.ReplicationFactor != 3 {
			t.Errorf("CreateTopics rf %d assignment %v: %+v, want error %d", test.rf, test.assignment, st, test.code)
		}
		if test.rf == 4 && (st.ErrorMessage == nil || !strings.Contains(*st.ErrorMessage, "only 3 broker(s) are registered")) {
			t.Errorf("rf 4: message %v", st.ErrorMessage)
		}
	}

	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtpTopic := kmsg.NewDescribeTopicPartitionsRequestTopic()
	dtpTopic.Topic = "t"
	dtp.Topics = append(dtp.Topics, dtpTopic)
	dresp0, err := dtp.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if dps := dresp0.Topics[0].Partitions; len(dps) != 3 || dps[0].LeaderID != 2 || dps[0].LeaderEpoch != 7 || !slices.Equal(dps[0].ISR, []int32{2, 1}) ||
		dps[1].LeaderID != -1 || !slices.Equal(dps[1].OfflineReplicas, []int32{4}) || dps[2].LeaderID != 3 {
		t.Errorf("DescribeTopicPartitions: %+v", dps)
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	dresp, err := dc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Brokers) != 3 || dresp.ControllerID != 2 || dresp.Brokers[2].Host != "127.0.0.3" {
		t.Errorf("DescribeCluster: %+v", dresp)
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g", "orphan"}
	fresp, err := fc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	coordinators := map[string]kmsg.FindCoordinatorResponseCoordinator{}
	for _, c := range fresp.Coordinators { // a client may split the keys over requests
		coordinators[c.Key] = c
	}
	if c := coordinators["g"]; c.ErrorCode != 0 || c.NodeID != 3 || c.Port != 9094 {
		t.Errorf("coordinator of g: %+v", c)
	}
	if c := coordinators["orphan"]; c.ErrorCode != kerr.CoordinatorNotAvailable.Code || c.NodeID != -1 {
		t.Errorf("coordinator of orphan: %+v", c)
	}
}
