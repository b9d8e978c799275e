package mirrord

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterMirrorDescribeFailed: when the source topic is deleted, each
// partition's leader stores FAILED (waiting for --recover) in etcd, and
// every node's describe --failed shows the 3 partitions, once each, with
// the failure its leader stored (the two the node does not lead from their
// records), their leader and ISR; before, --failed shows none on any node.
func TestClusterMirrorDescribeFailed(t *testing.T) {
	source, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "gone"))
	if err != nil {
		t.Fatal(err)
	}
	defer source.Close()
	sourceAddr := source.ListenAddrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	producer, err := kgo.NewClient(kgo.SeedBrokers(sourceAddr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for i := range 30 {
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "gone", Partition: int32(i % 3), Value: fmt.Appendf(nil, "g%02d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce to the source: %v", err)
		}
	}

	tc := startTestCluster(t, 3)
	waitUntil(t, 30*time.Second, "three live nodes", func() (bool, string) {
		m, err := kadm.NewClient(tc.client(0)).Metadata(ctx)
		return err == nil && len(m.Brokers) == 3, fmt.Sprint(m.Brokers, err)
	})
	admin := tc.nodes[0].Admin()
	if err := admin.CreateMirror(ctx, "m", map[string]string{"bootstrap.servers": sourceAddr, "mirror.metadata.refresh.interval.ms": "200"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SetTopicsDesiredState(ctx, "m", StartMirroring, TopicSelection{Names: []string{"gone"}}); err != nil {
		t.Fatal(err)
	}
	tc.waitReplicas("gone", 3, 30)

	// describeEach polls until every node describes the 3 partitions,
	// each as ok says, with the leader and ISR of Metadata.
	describeEach := func(what string, failedOnly bool, ok func(MirrorPartitionStatus) bool) {
		t.Helper()
		meta, err := kadm.NewClient(tc.client(0)).Metadata(ctx, "gone")
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range tc.nodes {
			waitUntil(t, 30*time.Second, fmt.Sprintf("node %d describes the 3 partitions %s", i+1, what), func() (bool, string) {
				descriptions, err := n.Admin().DescribeMirrors(ctx, []string{"m"}, failedOnly)
				if err != nil || len(descriptions) != 1 || len(descriptions[0].Partitions) != 3 {
					return false, fmt.Sprintf("%+v (%v)", descriptions, err)
				}
				for j, p := range descriptions[0].Partitions {
					want := meta.Topics["gone"].Partitions[int32(j)]
					if p.Topic != "gone" || p.Partition != int32(j) || !ok(p) || p.Leader != want.Leader || !sameIDs(p.ISR, want.Replicas) {
						return false, fmt.Sprintf("row %d: %+v, want leader %d, ISR %v", j, p, want.Leader, want.Replicas)
					}
				}
				return true, ""
			})
		}
	}
	describeEach("MIRRORING", false, func(p MirrorPartitionStatus) bool { return p.State == "MIRRORING" && p.Error == "" })
	for i, n := range tc.nodes {
		if failed, err := n.Admin().DescribeMirrors(ctx, []string{"m"}, true); err != nil || len(failed) != 1 || len(failed[0].Partitions) != 0 {
			t.Fatalf("node %d describes as failed %+v (%v), want none", i+1, failed, err)
		}
	}

	if _, err := kadm.NewClient(producer).DeleteTopics(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	describeEach("FAILED, waiting for --recover", true, func(p MirrorPartitionStatus) bool {
		return p.State == "FAILED" && p.RetryCount == -1 && strings.Contains(p.Error, "was deleted")
	})
}
