package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/netio"
	"github.com/mirrord/mirrord/vfs"
)

// groupMember is one franz-go consumer of group "g" and what it saw: the
// partitions it owns now (from the rebalance callbacks) and, per
// partition, the offsets of the records it polled.
type groupMember struct {
	client *kgo.Client

	mu       sync.Mutex
	owned    map[int32]bool
	consumed map[int32][]int64
}

func newGroupMember(t *testing.T, addr, topic string, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{owned: map[int32]bool{}, consumed: map[int32][]int64{}}
	update := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, partitions map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range partitions[topic] {
				if add {
					m.owned[p] = true
				} else {
					delete(m.owned, p)
				}
			}
		}
	}
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(update(true)), kgo.OnPartitionsRevoked(update(false)), kgo.OnPartitionsLost(update(false))}, opts...)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	m.client = client
	t.Cleanup(client.Close)
	return m
}

// poll polls once, for at most wait, and records what came back.
func (m *groupMember) poll(t *testing.T, wait time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	fetches := m.client.PollFetches(ctx)
	for _, e := range fetches.Errors() {
		if !errors.Is(e.Err, context.DeadlineExceeded) {
			t.Fatalf("poll: %s-%d: %v", e.Topic, e.Partition, e.Err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	fetches.EachRecord(func(r *kgo.Record) { m.consumed[r.Partition] = append(m.consumed[r.Partition], r.Offset) })
}

func (m *groupMember) ownedPartitions() map[int32]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int32]bool{}
	for p := range m.owned {
		out[p] = true
	}
	return out
}

// pollUntil polls the members in turn until done holds, for at most a
// minute (each poll waits 200 ms at most).
func pollUntil(t *testing.T, what string, done func() bool, members ...*groupMember) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !done() {
		if time.Now().After(deadline) {
			var state []string
			for i, m := range members {
				m.mu.Lock()
				counts := map[int32]int{}
				for p, offsets := range m.consumed {
					counts[p] = len(offsets)
				}
				state = append(state, fmt.Sprintf("member %d owns %v, polled %v records per partition", i, m.owned, counts))
				m.mu.Unlock()
			}
			t.Fatalf("%s: not within a minute: %v", what, state)
		}
		for _, m := range members {
			m.poll(t, 200*time.Millisecond)
		}
	}
}

// consumedRange reports whether the members together polled every offset
// in [from, end) of partitions [0, count).
func consumedRange(count int32, from, end int64, members ...*groupMember) bool {
	for p := range count {
		seen := map[int64]bool{}
		for _, m := range members {
			m.mu.Lock()
			for _, o := range m.consumed[p] {
				seen[o] = true
			}
			m.mu.Unlock()
		}
		for o := from; o < end; o++ {
			if !seen[o] {
				return false
			}
		}
	}
	return true
}

func produceRound(t *testing.T, client *kgo.Client, topic string, partitions int32, perPartition int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range perPartition * int(partitions) {
		r := &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: fmt.Appendf(nil, "%d", i)}
		if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

func fetchCommitted(t *testing.T, addr string) map[int32]int64 {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offsets, err := kadm.NewClient(client).FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	out := map[int32]int64{}
	offsets.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Fatalf("fetch offsets %s-%d: %v", o.Topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.At
	})
	return out
}

// TestConsumerGroupOnNode: two franz-go members of one group
// (cooperative-sticky) share a topic, commit, one leaves and the other
// takes its partitions over from the committed offsets; after a restart
// of the node the committed offsets are still there, in
// __consumer_offsets, an internal topic clients cannot write.
func TestConsumerGroupOnNode(t *testing.T) {
	t.Run("classic", func(t *testing.T) { testConsumerGroupOnNode(t, false) })
	t.Run("consumer (KIP-848)", func(t *testing.T) { testConsumerGroupOnNode(t, true) })
}

func testConsumerGroupOnNode(t *testing.T, kip848 bool) {
	const topic, partitions = "orders", int32(4)
	var opts []kgo.Opt
	if kip848 {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	dir := filepath.Join(t.TempDir(), "data")
	_, addr, stop := serveNode(t, dir)
	producer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(producer).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produceRound(t, producer, topic, partitions, 10)

	a, b := newGroupMember(t, addr, topic, opts...), newGroupMember(t, addr, topic, opts...)
	split := func() bool {
		pa, pb := a.ownedPartitions(), b.ownedPartitions()
		if len(pa) != 2 || len(pb) != 2 {
			return false
		}
		for p := range pa {
			if pb[p] {
				return false
			}
		}
		return consumedRange(partitions, 0, 10, a, b)
	}
	pollUntil(t, "two members own two partitions each and consumed everything", split, a, b)
	if kip848 {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"g"}
		resp, err := req.RequestWith(ctx, producer)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Members) != 2 {
			t.Fatalf("ConsumerGroupDescribe: %+v, %v: the members did not use the consumer protocol", resp, err)
		}
	}
	for _, m := range []*groupMember{a, b} {
		if err := m.client.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	for p := range partitions {
		if got := fetchCommitted(t, addr)[p]; got != 10 {
			t.Fatalf("partition %d: committed %d, want 10", p, got)
		}
	}

	// b leaves (Close sends LeaveGroup): a takes its partitions over from
	// the offsets b committed, not from the start.
	produceRound(t, producer, topic, partitions, 5)
	fromB := b.ownedPartitions()
	b.client.Close()
	a.mu.Lock()
	for p := range fromB {
		delete(a.consumed, p)
	}
	a.mu.Unlock()
	pollUntil(t, "a owns every partition and consumed the new records", func() bool {
		return len(a.ownedPartitions()) == int(partitions) && consumedRange(partitions, 10, 15, a)
	}, a)
	a.mu.Lock()
	for p := range fromB {
		if first := a.consumed[p][0]; first != 10 {
			t.Errorf("partition %d, taken over from b: a's first record is at %d, want the committed 10", p, first)
		}
	}
	a.mu.Unlock()
	if err := a.client.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	a.client.Close()
	producer.Close()

	stop()
	_, addr, _ = serveNode(t, dir)
	committed := fetchCommitted(t, addr)
	for p := range partitions {
		if committed[p] != 15 {
			t.Fatalf("after a restart: partition %d committed %d, want 15 (all: %v)", p, committed[p], committed)
		}
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	topics, err := admin.ListTopicsWithInternal(ctx, consumerOffsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	if d := topics[consumerOffsetsTopic]; d.Err != nil || !d.IsInternal || len(d.Partitions) != 1 {
		t.Fatalf("metadata of %s: internal %v, %d partitions, error %v; want internal, 1 partition", consumerOffsetsTopic, d.IsInternal, len(d.Partitions), d.Err)
	}
	err = client.ProduceSync(ctx, &kgo.Record{Topic: consumerOffsetsTopic, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to %s: %v, want INVALID_TOPIC_EXCEPTION", consumerOffsetsTopic, err)
	}
	if _, err := admin.DeleteTopic(ctx, consumerOffsetsTopic); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("delete %s: %v, want INVALID_TOPIC_EXCEPTION", consumerOffsetsTopic, err)
	}
}

// TestGroupStoreCompactsAtOpen: a log grown past four records per live
// key is rewritten at open to its live records; the offsets replay the
// same, and a deleted group's records are gone.
func TestGroupStoreCompactsAtOpen(t *testing.T) {
	fs := vfs.NewMem()
	n := openTestNodeAt(t, fs, "/data")
	ctx := context.Background()
	if _, err := n.CreateTopic(ctx, "t", 2, nil, false); err != nil {
		t.Fatal(err)
	}
	commit := func(group string, partition int32, offset int64) {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 9, group, -1
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: partition, Offset: offset, LeaderEpoch: -1}}}}
		resp, err := n.Groups().OffsetCommit(ctx, req)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit %s %d: %v %+v", group, offset, err, resp)
		}
	}
	const commits = 600 // two keys: 1200 records
	for i := range int64(commits) {
		commit("kept", 0, i)
		commit("kept", 1, 2*i)
	}
	commit("deleted", 0, 7)
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"deleted"}
	if resp, err := n.Groups().DeleteGroups(ctx, del); err != nil || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete group: %v %+v", err, resp)
	}
	p, err := n.Partition(consumerOffsetsTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	before := p.Offsets()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = openTestNodeAt(t, fs, "/data")
	defer n.Close()
	p, err = n.Partition(consumerOffsetsTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	after := p.Offsets()
	if after.LogStartOffset != before.LogEndOffset || after.LogEndOffset != before.LogEndOffset+2 {
		t.Fatalf("after compaction: log start %d, end %d; want %d, %d (the two live offsets rewritten)",
			after.LogStartOffset, after.LogEndOffset, before.LogEndOffset, before.LogEndOffset+2)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 9
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "kept", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0, 1}}}}, {Group: "deleted"}}
	resp, err := n.Groups().OffsetFetch(ctx, fetch)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]int64{}
	for _, part := range resp.Groups[0].Topics[0].Partitions {
		got[part.Partition] = part.Offset
	}
	if got[0] != commits-1 || got[1] != 2*(commits-1) {
		t.Fatalf("replayed offsets %v, want 0: %d, 1: %d", got, commits-1, 2*(commits-1))
	}
	if len(resp.Groups[1].Topics) != 0 {
		t.Fatalf("the deleted group has offsets again: %+v", resp.Groups[1].Topics)
	}
	// Clients may read the internal topic but not write it.
	if _, err := p.Produce(ctx, nil, netio.ProduceRequest{}); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	if _, err := n.CreateTopic(ctx, consumerOffsetsTopic, 1, nil, false); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("create: %v, want INVALID_REQUEST", err)
	}
}
