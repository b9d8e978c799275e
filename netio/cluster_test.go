package netio

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterMem is a memBackend that is one node of three: node 1 (this
// one), 2 and 3 are live, 4 is a replica that is not.
type clusterMem struct {
	*memBackend
	brokers     []Broker
	replication map[int32]Replication // partitions of topic "t"
}

func (b *clusterMem) Brokers(listener string) []Broker { return slices.Clone(b.brokers) }
func (b *clusterMem) ControllerID() int32              { return 2 }
func (b *clusterMem) Replication(topic string, partition int32) (Replication, bool) {
	r, ok := b.replication[partition]
	return r, ok && topic == "t"
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
			// 2: not placed yet
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
	if p := ps[2]; p.ErrorCode != kerr.LeaderNotAvailable.Code || p.Leader != -1 {
		t.Errorf("partition 2 (not placed): %+v", p)
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
	if c := fresp.Coordinators[0]; c.ErrorCode != 0 || c.NodeID != 3 || c.Port != 9094 {
		t.Errorf("coordinator of g: %+v", c)
	}
	if c := fresp.Coordinators[1]; c.ErrorCode != kerr.CoordinatorNotAvailable.Code || c.NodeID != -1 {
		t.Errorf("coordinator of orphan: %+v", c)
	}
}
