package engine

import (
	"fmt"
	"github.com/mirrord/mirrord/broker"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mirrord/mirrord/epoch"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMirrorDivergingEpoch makes kfake answer as a Kafka leader does when
// the fetcher's last fetched epoch is not its own history (kfake does not
// check LastFetchedEpoch: a Fetch control hook does). The mirror holds
// batches the source no longer has, as after an unclean election at the
// source (whose new leaders took higher epochs, as a controller assigns
// them); it must truncate where epoch.Cache.Divergence says, asking again
// while the answer is not final, and then copy the source's bytes.
//
// Partition 0, two rounds (the first not done: the mirror never saw the
// source's epoch 3):
//
//	mirror  epoch 0 [0,A)  epoch 2 [A,B)  epoch 5 [B,C)
//	source  epoch 0 [0,A)  epoch 3 [A,E)  epoch 6 [E,D)
//	fetch (C, 5) -> DivergingEpoch{3, E} -> Divergence: (B, not done)
//	fetch (B, 2) -> DivergingEpoch{0, A} -> Divergence: (A, done)
//	fetch (A, 0) -> records from A
//
// Partition 1, one round, cut by the mirror's own epoch cache (X < Y0):
//
//	mirror  epoch 0 [0,X)   epoch 3 [X,X+k)
//	source  epoch 0 [0,Y0)  epoch 4 [Y0,Y)
//	fetch (X+k, 3) -> DivergingEpoch{0, Y0} -> Divergence: (X, done)
//	fetch (X, 0) -> records from X
//
// That is ULE_RECOVERY, with mirror.support.unclean.leader.election. Without
// it the partitions go FAILED waiting for --recover, with an error naming
// the setting, and nothing is truncated.
func TestMirrorDivergingEpoch(t *testing.T) {
	for _, support := range []bool{true, false} {
		t.Run(fmt.Sprintf("mirror.support.unclean.leader.election=%t", support), func(t *testing.T) {
			testMirrorDivergingEpoch(t, support)
		})
	}
}

func testMirrorDivergingEpoch(t *testing.T, supportULE bool) {
	const seed = 1279
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(2, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	sourceAddr := cluster.ListenAddrs()[0]
	source := newClient(t, sourceAddr)
	produceBatches(t, sourceAddr, "events", 0, rng, 4)
	produceBatches(t, sourceAddr, "events", 1, rng, 4)
	target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
	config := mirrorConfig(sourceAddr)
	config["mirror.support.unclean.leader.election"] = fmt.Sprint(supportULE)
	mirrorTopicWith(t, target, config, "events")
	targetClient := newClient(t, targetAddr)
	waitConverged(t, source, target, targetClient, "events", 2)

	setMirroring(t, target, netio.PauseMirroring, "events")
	local0, local1 := localPartition(t, target, "events", 0), localPartition(t, target, "events", 1)
	if e0, e1 := local0.Log().LatestEpoch(), local1.Log().LatestEpoch(); e0 != 0 || e1 != 0 {
		t.Fatalf("kfake wrote epochs %d and %d, the scenario starts at 0", e0, e1)
	}
	a, x := local0.Log().LogEndOffset(), local1.Log().LogEndOffset()
	injectBatches(t, local0, 2, 3, rng)
	b := local0.Log().LogEndOffset()
	injectBatches(t, local0, 5, 2, rng)
	c := local0.Log().LogEndOffset()
	injectBatches(t, local1, 3, 3, rng)
	xk := local1.Log().LogEndOffset()

	// The source: leader changes and records in each new epoch.
	moveLeader := func(partition int32, times int) {
		for range times {
			if err := cluster.MoveTopicPartition("events", partition, (cluster.LeaderFor("events", partition)+1)%3); err != nil {
				t.Fatal(err)
			}
		}
	}
	moveLeader(0, 3)
	produceBatches(t, sourceAddr, "events", 0, rng, 2)
	_, _, offsets := rawPartition(t, source, "events", 0)
	e := rb.Offset(offsets[1])
	moveLeader(0, 3)
	produceBatches(t, sourceAddr, "events", 0, rng, 2)
	produceBatches(t, sourceAddr, "events", 1, rng, 2)
	_, _, offsets = rawPartition(t, source, "events", 1)
	y0 := rb.Offset(offsets[1])
	moveLeader(1, 4)
	produceBatches(t, sourceAddr, "events", 1, rng, 1)
	leader := newDivergingLeader(t, source, "events", 2)
	for p := range int32(2) { // a fetch sent to another broker gets kfake's NOT_LEADER, as from Kafka
		h := leader.history[p]
		h.leader = cluster.LeaderFor("events", p)
		leader.history[p] = h
	}
	if got, want := leader.history[0].cache.Entries(), []epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 3, StartOffset: a}, {Epoch: 6, StartOffset: e}}; !slices.Equal(got, want) {
		t.Fatalf("source partition 0 epochs %v, the scenario wants %v", got, want)
	}
	if got, want := leader.history[1].cache.Entries(), []epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 4, StartOffset: y0}}; !slices.Equal(got, want) {
		t.Fatalf("source partition 1 epochs %v, the scenario wants %v", got, want)
	}

	// What epoch.Cache.Divergence makes of the answers, from the mirror's
	// epochs now.
	cache0 := epochCache(t, local0.Log().Epochs())
	if to, done := cache0.Divergence(3, e, c); to != b || done {
		t.Fatalf("partition 0, first answer: Divergence = (%d, %v), want (%d, false)", to, done, b)
	}
	cache0.TruncateFromEnd(b)
	if to, done := cache0.Divergence(0, a, b); to != a || !done {
		t.Fatalf("partition 0, second answer: Divergence = (%d, %v), want (%d, true)", to, done, a)
	}
	cache1 := epochCache(t, local1.Log().Epochs())
	if to, done := cache1.Divergence(0, y0, xk); to != x || !done {
		t.Fatalf("partition 1: Divergence = (%d, %v), want (%d, true)", to, done, x)
	}

	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		resp, handled := leader.answer(req.(*kmsg.FetchRequest), cluster.CurrentNode())
		if handled {
			cluster.KeepControl()
		}
		return resp, nil, handled
	})
	setMirroring(t, target, netio.ResumeMirroring, "events")
	if !supportULE {
		var failed []netio.MirrorPartitionStatus
		waitUntil(t, "both partitions to fail", func() bool {
			failed = failedPartitions(t, target)
			return len(failed) == 2
		})
		for _, p := range failed {
			if p.State != "FAILED" || p.RetryCount != -1 || !strings.Contains(p.Error, "mirror.support.unclean.leader.election") {
				t.Errorf("partition %d: %s, retry count %d, error %q; want FAILED waiting for recover, naming the setting", p.Partition, p.State, p.RetryCount, p.Error)
			}
		}
		if got0, got1 := local0.Log().LogEndOffset(), local1.Log().LogEndOffset(); got0 != c || got1 != xk {
			t.Errorf("log ends %d and %d, want %d and %d: nothing truncated", got0, got1, c, xk)
		}
		return
	}
	waitUntil(t, "the source to serve both partitions", func() bool {
		leader.mu.Lock()
		defer leader.mu.Unlock()
		return len(leader.resumed) == 2
	})
	waitConverged(t, source, target, targetClient, "events", 2)

	leader.mu.Lock()
	defer leader.mu.Unlock()
	wantAnswers := map[int32][]divergenceAnswer{
		0: {{fetchPosition{c, 5}, 3, e}, {fetchPosition{b, 2}, 0, a}},
		1: {{fetchPosition{xk, 3}, 0, y0}},
	}
	wantResumed := map[int32]fetchPosition{0: {a, 0}, 1: {x, 0}}
	for partition := range int32(2) {
		if got := leader.answers[partition]; !slices.Equal(got, wantAnswers[partition]) {
			t.Errorf("partition %d: divergence answers %v, want %v", partition, got, wantAnswers[partition])
		}
		if got := leader.outOfRange[partition]; len(got) > 0 {
			t.Errorf("partition %d: fetches with an epoch the source never had: %v", partition, got)
		}
		if got := leader.resumed[partition]; got != wantResumed[partition] {
			t.Errorf("partition %d: first fetch the source served %v, want %v", partition, got, wantResumed[partition])
		}
		if got, want := uncleanTruncations(target, partition), int64(len(wantAnswers[partition])); got != want {
			t.Errorf("partition %d: mirrord_mirror_unclean_truncations_total %d, want %d (one per divergence answer)", partition, got, want)
		}
		local := localPartition(t, target, "events", partition)
		if got, want := local.Log().Epochs(), leader.history[partition].cache.Entries(); !slices.Equal(got, want) {
			t.Errorf("partition %d: mirror epochs %v, source %v", partition, got, want)
		}
	}
}

// fetchPosition is what a fetcher sends for one partition: its fetch
// offset and last fetched epoch.
type fetchPosition struct {
	offset           rb.Offset
	lastFetchedEpoch rb.Epoch
}

// divergenceAnswer is a DivergingEpoch sent for a fetch position.
type divergenceAnswer struct {
	at        fetchPosition
	epoch     rb.Epoch
	endOffset rb.Offset
}

// sourceHistory is one source partition as a leader sees it.
type sourceHistory struct {
	cache        *epoch.Cache
	logEndOffset rb.Offset
	leaderEpoch  int32
	leader       int32 // the broker that leads it
}

// divergingLeader checks a mirror's fetches against the source's epoch
// history as Kafka's Partition.fetchRecords does (netio's
// checkDivergence is the same rule) and answers DivergingEpoch where the
// fetcher's history is not the source's, and OFFSET_OUT_OF_RANGE where
// its last fetched epoch is above every epoch of the source. Other
// fetches, and every fetch without a last fetched epoch (test readers),
// go to kfake. The history is read once: the source must not change while
// it answers.
type divergingLeader struct {
	topic   string
	topicID [16]byte
	history map[int32]sourceHistory

	mu         sync.Mutex                   // the control hook runs on kfake's goroutines
	answers    map[int32][]divergenceAnswer // every DivergingEpoch sent
	outOfRange map[int32][]fetchPosition    // every OFFSET_OUT_OF_RANGE sent
	resumed    map[int32]fetchPosition      // the first fetch passed to kfake
}

func newDivergingLeader(t *testing.T, source *kgo.Client, topic string, partitions int32) *divergingLeader {
	t.Helper()
	l := &divergingLeader{topic: topic, history: map[int32]sourceHistory{}, answers: map[int32][]divergenceAnswer{}, outOfRange: map[int32][]fetchPosition{},
		resumed: map[int32]fetchPosition{}}
	for p := range partitions {
		raw, id, offsets := rawPartition(t, source, topic, p)
		l.topicID = id
		entries := epochEntries(raw)
		l.history[p] = sourceHistory{cache: epochCache(t, entries), logEndOffset: rb.Offset(offsets[1]), leaderEpoch: int32(entries[len(entries)-1].Epoch)}
	}
	return l
}

// answer returns a Fetch response for the partitions of req it answers
// itself, or false when kfake is to answer all of them.
func (l *divergingLeader) answer(req *kmsg.FetchRequest, broker int32) (*kmsg.FetchResponse, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range req.Topics {
		if rt.TopicID != l.topicID && rt.Topic != l.topic {
			continue
		}
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = l.topic, l.topicID
		for _, rp := range rt.Partitions {
			h, ok := l.history[rp.Partition]
			if !ok || rp.LastFetchedEpoch < 0 || rp.CurrentLeaderEpoch != h.leaderEpoch || broker != h.leader {
				continue // kfake answers: a reader, a fenced or unknown epoch, or not the leader
			}
			at := fetchPosition{rb.Offset(rp.FetchOffset), rb.Epoch(rp.LastFetchedEpoch)}
			endEpoch, endOffset := h.cache.EndOffsetFor(at.lastFetchedEpoch, h.logEndOffset)
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case endOffset < 0: // an epoch the leader never had
				l.outOfRange[rp.Partition] = append(l.outOfRange[rp.Partition], at)
				sp.ErrorCode = kerr.OffsetOutOfRange.Code
			case endOffset >= at.offset && endEpoch == at.lastFetchedEpoch:
				if _, seen := l.resumed[rp.Partition]; !seen {
					l.resumed[rp.Partition] = at
				}
				continue
			default:
				l.answers[rp.Partition] = append(l.answers[rp.Partition], divergenceAnswer{at, endEpoch, endOffset})
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = int64(h.logEndOffset), int64(h.logEndOffset), 0
				sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = int32(endEpoch), int64(endOffset)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 {
			resp.Topics = append(resp.Topics, st)
		}
	}
	return resp, len(resp.Topics) > 0
}

// appendTestBatch appends a batch of records at base with epoch.
func appendTestBatch(dst []byte, base rb.Offset, epoch rb.Epoch, records int, label string) []byte {
	spec := rb.Spec{BaseOffset: base, LeaderEpoch: epoch, BaseTimestamp: 1_700_000_000_000 + int64(base), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	for i := range records {
		spec.Records = append(spec.Records, rb.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s record %d", label, i), TimestampDelta: int64(i)})
	}
	return rb.Append(dst, spec)
}

// injectBatches appends count batches at the log end with epoch, as if a
// source leader that was later lost had sent them.
func injectBatches(t *testing.T, p *broker.Partition, epoch rb.Epoch, count int, rng *rand.Rand) {
	t.Helper()
	for range count {
		batch := appendTestBatch(nil, p.Log().LogEndOffset(), epoch, 1+rng.IntN(4), "lost")
		if _, err := p.AppendMirrored(batch); err != nil {
			t.Fatal(err)
		}
	}
}

// epochEntries lists the epochs of batches as an epoch cache holds them.
func epochEntries(batches []byte) []epoch.Entry {
	var entries []epoch.Entry
	for it := rb.NewIter(batches, false); it.Next(); {
		b := it.Batch()
		if len(entries) == 0 || entries[len(entries)-1].Epoch < b.LeaderEpoch() {
			entries = append(entries, epoch.Entry{Epoch: b.LeaderEpoch(), StartOffset: b.BaseOffset()})
		}
	}
	return entries
}

func epochCache(t *testing.T, entries []epoch.Entry) *epoch.Cache {
	t.Helper()
	c, err := epoch.New(entries)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// uncleanTruncations is the partition of events' ULE_RECOVERY truncation
// count, as the metrics report it.
func uncleanTruncations(n *Node, partition int32) int64 {
	for _, m := range n.MirrorReports() {
		for _, p := range m.Partitions {
			if p.Topic == "events" && p.Partition == partition {
				return p.UncleanTruncations
			}
		}
	}
	return -1
}
