package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/mirrorwire"
	"github.com/mirrord/mirrord/netio"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMirrorRebuildsOfflinePartition: two mirrored partitions corrupted
// while the node is down (a junk partition.metadata; a bad magic byte
// mid-segment of a sealed segment) come back offline: FAILED with the
// reason, waiting for --recover, while the third mirrors on. --recover
// moves each broken directory aside under failed/, starts an empty log of
// the source's topic ID and re-fetches it from the source's log start:
// the partitions end byte-identical to the source's.
func TestMirrorRebuildsOfflinePartition(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	sourceAddr := cluster.ListenAddrs()[0]
	cfg := logstore.DefaultConfig()
	cfg.SegmentBytes, cfg.IndexIntervalBytes = 4096, 0 // each mirrored round a segment; each batch but a segment's first indexed
	dir := filepath.Join(t.TempDir(), "target")
	target, targetAddr, stop := serveNodeLog(t, dir, cfg)
	produceMixed(t, sourceAddr, "events", 3, 3)
	config := mirrorConfig(sourceAddr)
	config["fetch.max.bytes"] = "2048" // each append within a segment
	startMirroringWith(t, target, config, "events")
	source := newClient(t, sourceAddr)
	waitMirrored(t, source, newClient(t, targetAddr), "events", 3)
	produceMixed(t, sourceAddr, "events", 3, 3) // a second segment
	waitMirrored(t, source, newClient(t, targetAddr), "events", 3)
	stop()

	junk := []byte("version: 0\ntopic_id: junk\n")
	if err := os.WriteFile(filepath.Join(dir, "events-0", "partition.metadata"), junk, 0o644); err != nil {
		t.Fatal(err)
	}
	corruptMagic(t, filepath.Join(dir, "events-1"))

	target, targetAddr, _ = serveNodeLog(t, dir, cfg)
	if offline := target.OfflinePartitions(); len(offline) != 2 || offline[0].Partition != 0 || offline[1].Partition != 1 {
		t.Fatalf("offline partitions %v, want events-0 and events-1", offline)
	}
	if got := offlineMetrics(t, target); got != "2 events-0 events-1" {
		t.Errorf("offline metrics %q, want 2 and events-0, events-1", got)
	}
	described, err := newClient(t, targetAddr, kgo.MaxVersions(netio.MirrorClientVersions())).Request(context.Background(), &mirrorwire.DescribeClusterMirrorsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if offline := described.(*mirrorwire.DescribeClusterMirrorsResponse).OfflinePartitions; len(offline) != 2 ||
		offline[0].PartitionIndex != 0 || !strings.Contains(offline[0].ErrorMessage, "partition.metadata") ||
		offline[1].PartitionIndex != 1 || !strings.Contains(offline[1].ErrorMessage, "magic") {
		t.Errorf("DescribeClusterMirrors lists offline partitions %+v", offline)
	}
	reasons := map[int32]string{0: "partition.metadata", 1: "magic"}
	waitPartitionStates(t, target, func(p netio.MirrorPartitionStatus) bool {
		if want, bad := reasons[p.Partition]; bad {
			return p.State == "FAILED" && p.RetryCount == -1 && strings.Contains(p.Error, want)
		}
		return p.State == "MIRRORING"
	})
	produceMixed(t, sourceAddr, "events", 3, 1)
	targetClient := newClient(t, targetAddr)
	waitMirroredPartitions(t, source, targetClient, "events", 2)

	results, err := target.Mirrors().SetTopicsDesiredState(context.Background(), "m", netio.RecoverMirroring, netio.TopicSelection{Names: []string{"events"}})
	if err != nil || len(results) != 1 || results[0].Err != nil {
		t.Fatalf("recover: %v %v", results, err)
	}
	waitMirrored(t, source, targetClient, "events", 3)
	if offline := target.OfflinePartitions(); len(offline) != 0 {
		t.Errorf("offline after --recover: %v", offline)
	}
	if got := offlineMetrics(t, target); got != "0" {
		t.Errorf("offline metrics after --recover %q, want 0 and no partition", got)
	}
	kept, err := filepath.Glob(filepath.Join(dir, logstore.FailedDir, "events-*"))
	if err != nil || len(kept) != 2 {
		t.Errorf("broken directories kept under failed/: %v (%v), want events-0 and events-1", kept, err)
	}
	waitPartitionStates(t, target, func(p netio.MirrorPartitionStatus) bool { return p.State == "MIRRORING" })
}

// corruptMagic sets the magic byte of the second batch of the first
// segment of a partition directory: a sealed segment whose indexes are
// trusted at open, so only the producer state replay reads that batch.
func corruptMagic(t *testing.T, partitionDir string) {
	t.Helper()
	segments, err := filepath.Glob(filepath.Join(partitionDir, "*.log"))
	if err != nil || len(segments) < 2 {
		t.Fatalf("want a sealed segment in %s, got %v (%v)", partitionDir, segments, err)
	}
	sort.Strings(segments)
	data, err := os.ReadFile(segments[0])
	if err != nil {
		t.Fatal(err)
	}
	second := 12 + int(binary.BigEndian.Uint32(data[8:])) // baseOffset int64, batchLength int32, then the batch
	if second+17 > len(data) || second+12+int(binary.BigEndian.Uint32(data[second+8:])) >= len(data) {
		t.Fatalf("%s holds fewer than three batches", segments[0])
	}
	data[second+16] = 7 // magic: after partitionLeaderEpoch int32
	if err := os.WriteFile(segments[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitPartitionStates polls mirror m's description until every partition
// satisfies ok, or fails at the deadline.
func waitPartitionStates(t *testing.T, n *Node, ok func(netio.MirrorPartitionStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		described, err := n.Mirrors().DescribeMirrors(context.Background(), []string{"m"}, false)
		if err != nil {
			t.Fatal(err)
		}
		all := len(described) == 1 && len(described[0].Partitions) > 0
		for _, p := range described[0].Partitions {
			all = all && ok(p)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mirror partitions did not reach the states: %+v", described[0].Partitions)
		}
		<-poll.C
	}
}

// offlineMetrics is what /metrics says of offline partitions:
// mirrord_offline_partitions, then each mirrord_partition_offline series
// as topic-partition.
func offlineMetrics(t *testing.T, n *Node) string {
	t.Helper()
	families, err := n.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var count string
	var partitions []string
	for _, f := range families {
		switch f.GetName() {
		case "mirrord_offline_partitions":
			count = fmt.Sprint(f.GetMetric()[0].GetGauge().GetValue())
		case "mirrord_partition_offline":
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				partitions = append(partitions, labels["topic"]+"-"+labels["partition"])
			}
		}
	}
	sort.Strings(partitions)
	return strings.Join(append([]string{count}, partitions...), " ")
}
