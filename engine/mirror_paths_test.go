package engine

import (
	"context"
	"fmt"
	"github.com/mirrord/mirrord/broker"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/netio"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The harder cases of the mirror data path (DESIGN.md, data path): a
// source that answers DivergingEpoch, a source log start that passed the
// mirror's log end, compaction gaps, and transactions. Each test ends by
// comparing the mirror with its source: raw batches, topic IDs, log start
// and high watermark (waitMirrored), and what a client reads.
// The tests are in mirror_divergence_test.go, mirror_compaction_test.go
// and mirror_transactions_test.go; this file holds the helpers they share.

// waitConverged waits until the mirror's log start and high watermark
// are the source's, then compares the bytes (waitMirrored). The first
// wait reads the local partitions: waitMirrored fails on a fetch error,
// and a mirror that truncates or restarts its log under the reader's
// feet answers one.
func waitConverged(t *testing.T, source *kgo.Client, target *Node, targetClient *kgo.Client, topic string, partitions int32) {
	t.Helper()
	for p := range partitions {
		want := [2]int64{sourceOffset(t, source, topic, p, -2), sourceOffset(t, source, topic, p, -1)}
		waitUntil(t, fmt.Sprintf("the mirror of %s-%d to reach offsets %v", topic, p, want), func() bool {
			local, err := target.LocalPartition(topic, p)
			if err != nil {
				return false
			}
			offsets := local.Offsets()
			return int64(offsets.LogStartOffset) == want[0] && int64(offsets.HighWatermark) == want[1]
		})
	}
	waitMirrored(t, source, targetClient, topic, partitions)
}

// sourceOffset asks ListOffsets for an offset by timestamp (-2 earliest,
// -1 latest).
func sourceOffset(t *testing.T, client *kgo.Client, topic string, partition int32, timestamp int64) int64 {
	t.Helper()
	return listOffsets(t, client, topic, partition, timestamp, 0)
}

// listOffsets asks ListOffsets for an offset by timestamp and isolation
// level; the client sends it to the partition's leader.
func listOffsets(t *testing.T, client *kgo.Client, topic string, partition int32, timestamp int64, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = -1, isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, timestamp, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := client.Request(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	answer := kresp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if answer.ErrorCode != 0 {
		t.Fatalf("list offsets %s-%d at %d, isolation %d: error %d", topic, partition, timestamp, isolation, answer.ErrorCode)
	}
	return answer.Offset
}

// mirrorTopic starts mirroring topic from source and waits until the
// mirror created it here (waitMirrored reads its metadata).
func mirrorTopic(t *testing.T, target *Node, source, topic string) {
	t.Helper()
	mirrorTopicWith(t, target, mirrorConfig(source), topic)
}

// mirrorTopicWith is mirrorTopic with the mirror's config.
func mirrorTopicWith(t *testing.T, target *Node, config map[string]string, topic string) {
	t.Helper()
	startMirroringWith(t, target, config, topic)
	waitUntil(t, "the mirror topic "+topic, func() bool {
		_, ok := target.Topic(topic)
		return ok
	})
}

func localPartition(t *testing.T, n *Node, topic string, index int32) *broker.Partition {
	t.Helper()
	p, err := n.LocalPartition(topic, index)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// setMirroring pauses or resumes the mirror "m" of topic, and on pause
// waits until no fetcher runs (this test mirrors nothing else), so that
// the test may change the local log.
func setMirroring(t *testing.T, n *Node, change netio.TopicsChange, topic string) {
	t.Helper()
	results, err := n.Mirrors().SetTopicsDesiredState(context.Background(), "m", change, netio.TopicSelection{Names: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("%v %s: %v", change, r.Topic, r.Err)
		}
	}
	if change != netio.PauseMirroring {
		return
	}
	n.mirrorsMu.Lock()
	m := n.mirrors["m"]
	n.mirrorsMu.Unlock()
	waitUntil(t, "the mirror's fetchers to stop", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.fetchers) == 0
	})
}

// waitUntil polls cond until it holds or fails at the deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitUntilWithin(t, what, 20*time.Second, cond)
}

// waitUntilWithin is waitUntil with a deadline of its own.
func waitUntilWithin(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-poll.C
	}
}

// readRecords reads one partition from its start with a read_committed
// franz-go consumer until it has want records (want < 0: up to the end
// offset it finds first) and returns them as "offset key value".
func readRecords(t *testing.T, addr, topic string, partition int32, want int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	end := int64(-1)
	if want < 0 {
		end = lastStableOffset(t, client, topic, partition)
	}
	var got []string
	last := int64(-1)
	for want >= 0 && len(got) < want || want < 0 && last+1 < end {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s-%d at %s: read %d records, want %d (end %d)", topic, partition, addr, len(got), want, end)
		}
		for _, fe := range fetches.Errors() {
			t.Fatalf("%s-%d at %s: %v", topic, partition, addr, fe.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			got = append(got, fmt.Sprintf("%d %s %s", r.Offset, r.Key, r.Value))
			last = r.Offset
		})
	}
	if want >= 0 && len(got) != want {
		t.Fatalf("%s-%d at %s: read %d records, want %d", topic, partition, addr, len(got), want)
	}
	return got
}

// TestIncrementalFetchNamesChangedPartitions: once a fetch session is
// established, the mirror's requests name only partitions whose fetch
// position changed (KIP-227): none while the source is idle, the one
// written to after a write, and the mirror still converges.
func TestIncrementalFetchNamesChangedPartitions(t *testing.T) {
	const partitions = 20
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "many"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	sourceAddr := cluster.ListenAddrs()[0]
	rng := rand.New(rand.NewPCG(7, 1))
	for p := range int32(partitions) {
		produceBatches(t, sourceAddr, "many", p, rng, 2)
	}
	var (
		mu       sync.Mutex
		requests [][]int32 // the partitions each incremental request named
	)
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if fetch := req.(*kmsg.FetchRequest); fetch.SessionEpoch > 0 {
			named := []int32{}
			for _, rt := range fetch.Topics {
				for _, rp := range rt.Partitions {
					named = append(named, rp.Partition)
				}
			}
			mu.Lock()
			requests = append(requests, named)
			mu.Unlock()
		}
		return nil, nil, false
	})
	// requestSince waits for an incremental request after the first
	// from that names exactly want, and returns how many there were.
	requestSince := func(what string, from int, want []int32) int {
		t.Helper()
		var n int
		waitUntil(t, what, func() bool {
			mu.Lock()
			defer mu.Unlock()
			n = len(requests)
			return slices.ContainsFunc(requests[min(from, n):], func(named []int32) bool { return slices.Equal(named, want) })
		})
		return n
	}
	target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
	mirrorTopic(t, target, sourceAddr, "many")
	source, targetClient := newClient(t, sourceAddr), newClient(t, targetAddr)
	waitConverged(t, source, target, targetClient, "many", partitions)
	mu.Lock()
	converged := len(requests)
	mu.Unlock()
	idle := requestSince("an idle incremental fetch naming no partition", converged, []int32{})

	produceBatches(t, sourceAddr, "many", 3, rng, 1)
	waitConverged(t, source, target, targetClient, "many", partitions)
	requestSince("an incremental fetch naming only partition 3", idle, []int32{3})
	mu.Lock()
	defer mu.Unlock()
	for _, named := range requests[converged:] {
		if len(named) > 1 {
			t.Errorf("an incremental fetch after convergence named %v; want none or partition 3", named)
		}
	}
}
