package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mirrord/mirrord/netio"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMirrorSyncsGroupOffsets: a group's offsets committed on the source
// reach this node's coordinator, with the source's metadata and the local
// log's leader epoch; a commit past what is mirrored is clamped to the
// local high watermark and a later source commit that only the clamp
// would lower does not move it back, while a reset on the source is
// followed; a group with members here is never overwritten; a stopped
// topic is no longer synced.
func TestMirrorSyncsGroupOffsets(t *testing.T) {
	rng := rand.New(rand.NewPCG(1279, 15))
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	sourceAddr := cluster.ListenAddrs()[0]
	produceBatches(t, sourceAddr, "orders", 0, rng, 4)
	produceBatches(t, sourceAddr, "orders", 1, rng, 4)
	target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
	config := mirrorConfig(sourceAddr)
	config["mirror.group.offsets.sync.interval.ms"] = "50"
	mirrorTopicWith(t, target, config, "orders")
	source, targetClient := newClient(t, sourceAddr), newClient(t, targetAddr)
	waitConverged(t, source, target, targetClient, "orders", 2)
	end0 := localPartition(t, target, "orders", 0).LogEndOffset()

	sourceAdmin := kadm.NewClient(source)
	commit := func(group string, partition int32, offset int64) {
		t.Helper()
		offsets := kadm.Offsets{}
		offsets.Add(kadm.Offset{Topic: "orders", Partition: partition, At: offset, LeaderEpoch: -1, Metadata: "meta-" + group})
		if _, err := sourceAdmin.CommitOffsets(context.Background(), group, offsets); err != nil {
			t.Fatal(err)
		}
	}
	waitSynced := func(group string, partition int32, want int64) kmsg.OffsetFetchResponseGroupTopicPartition {
		t.Helper()
		var got kmsg.OffsetFetchResponseGroupTopicPartition
		waitUntil(t, fmt.Sprintf("group %s's offset of orders-%d to be %d", group, partition, want), func() bool {
			got = localOffset(t, target, group, partition)
			return got.Offset == want
		})
		return got
	}

	commit("app", 0, 1)
	commit("app", 1, 2)
	synced := waitSynced("app", 0, 1)
	waitSynced("app", 1, 2)
	if synced.Metadata == nil || *synced.Metadata != "meta-app" {
		t.Errorf("synced metadata %v, want the source's", synced.Metadata)
	}
	if want := int32(localPartition(t, target, "orders", 0).CommittedLeaderEpoch(1)); synced.LeaderEpoch != want {
		t.Errorf("synced leader epoch %d, want the local log's %d", synced.LeaderEpoch, want)
	}

	// Past what is mirrored: the local high watermark, never beyond.
	commit("app", 0, int64(end0)+1000)
	waitSynced("app", 0, int64(end0))
	commit("app", 0, int64(end0)+500) // only the clamp would change it: it stays
	commit("app", 1, 3)               // a marker that the round ran
	waitSynced("app", 1, 3)
	if got := localOffset(t, target, "app", 0).Offset; got != int64(end0) {
		t.Fatalf("after a source commit past the mirror: %d, want %d", got, end0)
	}
	m := target.mirrors["m"]
	waitUntil(t, "the lag of group app to show the 500 offsets not mirrored", func() bool { return m.groupSync.get().Lag["app"] == 500 })
	if lag := metricByLabel(t, target, "mirrord_mirror_group_offset_lag", "group"); lag["app"] != 500 {
		t.Fatalf("mirrord_mirror_group_offset_lag %v, want app at 500", lag)
	}
	if sync := describedGroupSync(t, target); sync.At.IsZero() || sync.Error != "" || !slices.Contains(sync.Groups, netio.MirrorGroupSyncGroup{Group: "app", OffsetLag: 500}) {
		t.Fatalf("describe's group sync %+v, want app at lag 500", sync)
	}
	commit("app", 0, 0) // a reset on the source is followed, offset 0 too
	waitSynced("app", 0, 0)

	// A group with a member here is its consumers' own.
	live := newClient(t, targetAddr, kgo.ConsumerGroup("live"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit())
	waitUntil(t, "group live to be stable here", func() bool {
		fetches := live.PollRecords(context.Background(), 1) // joins the group
		_ = fetches
		d, err := kadm.NewClient(targetClient).DescribeGroups(context.Background(), "live")
		return err == nil && d["live"].State == "Stable"
	})
	commit("live", 0, 2)
	waitUntil(t, "the sync to skip group live", func() bool {
		status := m.groupSync.get()
		return status.Skipped >= 1 && !status.At.IsZero()
	})
	if got := localOffset(t, target, "live", 0).Offset; got != -1 {
		t.Fatalf("group live, active here, was given offset %d", got)
	}
	if sync := describedGroupSync(t, target); sync.Skipped < 1 || !slices.Contains(sync.Groups, netio.MirrorGroupSyncGroup{Group: "live", OffsetLag: -1, Skipped: true}) {
		t.Fatalf("describe's group sync %+v, want live skipped", sync)
	}
	live.Close()

	// A stopped topic is this node's: the source's commits stop here.
	setMirroring(t, target, netio.StopMirroring, "orders")
	commit("app", 1, 4)
	at := time.Now()
	waitUntil(t, "a sync round after the stop", func() bool { return m.groupSync.get().At.After(at.Add(100 * time.Millisecond)) })
	if got := localOffset(t, target, "app", 1).Offset; got != 3 {
		t.Fatalf("after the stop: group app's orders-1 at %d, want 3 (not synced any more)", got)
	}
	if status := m.groupSync.get(); status.Err != "" {
		t.Fatalf("sync error: %s", status.Err)
	}
	if lag := metricByLabel(t, target, "mirrord_mirror_group_offset_lag", "group"); lag["app"] != 0 {
		t.Fatalf("mirrord_mirror_group_offset_lag %v after the stop, want app at 0 (nothing mirrored)", lag)
	}
}

// describedGroupSync is the group sync of mirror m as DescribeMirrors
// tells it.
func describedGroupSync(t *testing.T, n *Node) netio.MirrorGroupSync {
	t.Helper()
	described := describeMirror(t, n)
	if described.GroupSync == nil {
		t.Fatalf("describe tells no group sync: %+v", described)
	}
	return *described.GroupSync
}

// localOffset is what this node's coordinator holds for group at
// orders-partition (offset -1: nothing).
func localOffset(t *testing.T, n *Node, group string, partition int32) kmsg.OffsetFetchResponseGroupTopicPartition {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = "orders", []int32{partition}
	g.Topics = append(g.Topics, rt)
	req.Groups = append(req.Groups, g)
	resp, err := n.Groups().OffsetFetch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, rg := range resp.Groups {
		for _, rt := range rg.Topics {
			for _, p := range rt.Partitions {
				if p.Partition == partition {
					return p
				}
			}
		}
	}
	return kmsg.OffsetFetchResponseGroupTopicPartition{Offset: -1}
}
