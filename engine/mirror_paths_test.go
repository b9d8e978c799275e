package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/epoch"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The harder cases of the mirror data path (DESIGN.md, data path): a
// source that answers DivergingEpoch, a source log start that passed the
// mirror's log end, compaction gaps, and transactions. Each test ends by
// comparing the mirror with its source: raw batches, topic IDs, log start
// and high watermark (waitMirrored), and what a client reads.

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
func TestMirrorDivergingEpoch(t *testing.T) {
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
	mirrorTopic(t, target, sourceAddr, "events")
	targetClient := newClient(t, targetAddr)
	waitConverged(t, source, target, targetClient, "events", 2)

	setMirroring(t, target, netio.PauseMirroring, "events")
	local0, local1 := localPartition(t, target, "events", 0), localPartition(t, target, "events", 1)
	if e0, e1 := local0.log.LatestEpoch(), local1.log.LatestEpoch(); e0 != 0 || e1 != 0 {
		t.Fatalf("kfake wrote epochs %d and %d, the scenario starts at 0", e0, e1)
	}
	a, x := local0.log.LogEndOffset(), local1.log.LogEndOffset()
	injectBatches(t, local0, 2, 3, rng)
	b := local0.log.LogEndOffset()
	injectBatches(t, local0, 5, 2, rng)
	c := local0.log.LogEndOffset()
	injectBatches(t, local1, 3, 3, rng)
	xk := local1.log.LogEndOffset()

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
	if got, want := leader.history[0].cache.Entries(), []epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 3, StartOffset: a}, {Epoch: 6, StartOffset: e}}; !slices.Equal(got, want) {
		t.Fatalf("source partition 0 epochs %v, the scenario wants %v", got, want)
	}
	if got, want := leader.history[1].cache.Entries(), []epoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 4, StartOffset: y0}}; !slices.Equal(got, want) {
		t.Fatalf("source partition 1 epochs %v, the scenario wants %v", got, want)
	}

	// What epoch.Cache.Divergence makes of the answers, from the mirror's
	// epochs now.
	cache0 := epochCache(t, local0.log.Epochs())
	if to, done := cache0.Divergence(3, e, c); to != b || done {
		t.Fatalf("partition 0, first answer: Divergence = (%d, %v), want (%d, false)", to, done, b)
	}
	cache0.TruncateFromEnd(b)
	if to, done := cache0.Divergence(0, a, b); to != a || !done {
		t.Fatalf("partition 0, second answer: Divergence = (%d, %v), want (%d, true)", to, done, a)
	}
	cache1 := epochCache(t, local1.log.Epochs())
	if to, done := cache1.Divergence(0, y0, xk); to != x || !done {
		t.Fatalf("partition 1: Divergence = (%d, %v), want (%d, true)", to, done, x)
	}

	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		resp, handled := leader.answer(req.(*kmsg.FetchRequest))
		if handled {
			cluster.KeepControl()
		}
		return resp, nil, handled
	})
	setMirroring(t, target, netio.ResumeMirroring, "events")
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
		local := localPartition(t, target, "events", partition)
		if got, want := local.log.Epochs(), leader.history[partition].cache.Entries(); !slices.Equal(got, want) {
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
func (l *divergingLeader) answer(req *kmsg.FetchRequest) (*kmsg.FetchResponse, bool) {
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
			if !ok || rp.LastFetchedEpoch < 0 || rp.CurrentLeaderEpoch != h.leaderEpoch {
				continue // kfake answers: a reader, or a fenced or unknown epoch
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

// TestMirrorRestartsBelowSourceLogStart pauses a mirror while the source
// (a mirrord) gets more records and deletes records past the mirror's log
// end: in the middle of a batch on partition 0, everything on partition
// 1. On resume the source answers OFFSET_OUT_OF_RANGE; the mirror must
// restart at the source's log start and converge, with the same log start.
func TestMirrorRestartsBelowSourceLogStart(t *testing.T) {
	const seed = 7
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	sourceNode, sourceAddr := startNode(t, filepath.Join(t.TempDir(), "source"))
	target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
	createTopic(t, sourceNode, "retained", 2)
	source, targetClient := newClient(t, sourceAddr), newClient(t, targetAddr)
	for p := range int32(2) {
		produceBatches(t, sourceAddr, "retained", p, rng, 3)
	}
	mirrorTopic(t, target, sourceAddr, "retained")
	waitConverged(t, source, target, targetClient, "retained", 2)

	setMirroring(t, target, netio.PauseMirroring, "retained")
	mirrorEnd := localPartition(t, target, "retained", 0).log.LogEndOffset()
	for p := range int32(2) {
		produceBatches(t, sourceAddr, "retained", p, rng, 4)
	}
	ctx := context.Background()
	p0, p1 := localPartition(t, sourceNode, "retained", 0), localPartition(t, sourceNode, "retained", 1)
	deleteTo := midBatchOffsetAfter(t, p0, mirrorEnd)
	if _, err := p0.DeleteRecords(ctx, deleteTo); err != nil {
		t.Fatal(err)
	}
	if _, err := p1.DeleteRecords(ctx, -1); err != nil {
		t.Fatal(err)
	}
	setMirroring(t, target, netio.ResumeMirroring, "retained")
	waitConverged(t, source, target, targetClient, "retained", 2)
	for p, sourcePartition := range []*partition{p0, p1} {
		if got, want := localPartition(t, target, "retained", int32(p)).Offsets(), sourcePartition.Offsets(); got != want {
			t.Errorf("partition %d: mirror offsets %+v, source %+v", p, got, want)
		}
		if got, want := localPartition(t, target, "retained", int32(p)).log.Epochs(), sourcePartition.log.Epochs(); !slices.Equal(got, want) {
			t.Errorf("partition %d: mirror epochs %v, source %v", p, got, want)
		}
	}

	// It goes on mirroring from there.
	for p := range int32(2) {
		produceBatches(t, sourceAddr, "retained", p, rng, 2)
	}
	waitConverged(t, source, target, targetClient, "retained", 2)
}

// midBatchOffsetAfter returns an offset inside a batch of several
// records that starts after offset.
func midBatchOffsetAfter(t *testing.T, p *partition, offset rb.Offset) rb.Offset {
	t.Helper()
	found := rb.Offset(-1)
	err := p.log.WalkBatches(offset, func(b rb.Batch) bool {
		if b.BaseOffset() > offset && b.LastOffsetDelta() > 0 {
			found = b.BaseOffset() + 1
			return false
		}
		return true
	})
	if err != nil || found < 0 {
		t.Fatalf("no batch of several records after %d (%v)", offset, err)
	}
	return found
}

// TestMirrorCompactedSource mirrors partitions with offset gaps: after
// kfake's compaction (batches dropped, or rebuilt without the records a
// later key replaced, keeping their offsets), and batches written at
// chosen offsets into a mirrord source's log. The gaps and offsets are kept byte for byte, and a client
// reads the same records at the same offsets from both.
func TestMirrorCompactedSource(t *testing.T) {
	t.Run("kfake", func(t *testing.T) {
		const seed = 42
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, 1))
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		defer cluster.Close()
		sourceAddr := cluster.ListenAddrs()[0]
		source := newClient(t, sourceAddr)
		compact := "compact"
		if _, err := kadm.NewClient(source).CreateTopic(context.Background(), 2, 1, map[string]*string{"cleanup.policy": &compact}, "compacted"); err != nil {
			t.Fatal(err)
		}
		for p := range int32(2) {
			produceBatches(t, sourceAddr, "compacted", p, rng, 12)
		}
		cluster.Compact()
		for p := range int32(2) {
			if raw, _, _ := rawPartition(t, source, "compacted", p); !hasGaps(raw) {
				t.Fatalf("partition %d: compaction left no gaps", p)
			}
		}
		target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
		mirrorTopic(t, target, sourceAddr, "compacted")
		targetClient := newClient(t, targetAddr)
		waitConverged(t, source, target, targetClient, "compacted", 2)
		for p := range int32(2) {
			sameRecords(t, sourceAddr, targetAddr, "compacted", p)
		}
	})
	t.Run("mirrord", func(t *testing.T) {
		sourceNode, sourceAddr := startNode(t, filepath.Join(t.TempDir(), "source"))
		createTopic(t, sourceNode, "gaps", 1)
		sourcePartition := localPartition(t, sourceNode, "gaps", 0)
		// A gap before the first batch, between batches, and epochs
		// that change across gaps.
		var batches []byte
		for i, at := range []struct {
			base    rb.Offset
			epoch   rb.Epoch
			records int
		}{{2, 0, 3}, {7, 0, 1}, {8, 1, 2}, {20, 1, 1}, {31, 4, 4}, {90, 6, 2}} {
			batches = appendTestBatch(batches, at.base, at.epoch, at.records, fmt.Sprintf("gap batch %d", i))
		}
		if _, err := sourcePartition.appendMirrored(batches); err != nil {
			t.Fatal(err)
		}
		target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
		mirrorTopic(t, target, sourceAddr, "gaps")
		source, targetClient := newClient(t, sourceAddr), newClient(t, targetAddr)
		waitConverged(t, source, target, targetClient, "gaps", 1)
		sameRecords(t, sourceAddr, targetAddr, "gaps", 0)

		// Records produced at the source after the gaps follow them.
		produceBatches(t, sourceAddr, "gaps", 0, rand.New(rand.NewPCG(3, 1)), 2)
		waitConverged(t, source, target, targetClient, "gaps", 1)
		sameRecords(t, sourceAddr, targetAddr, "gaps", 0)
		if got, want := localPartition(t, target, "gaps", 0).log.Epochs(), sourcePartition.log.Epochs(); !slices.Equal(got, want) {
			t.Errorf("mirror epochs %v, source %v", got, want)
		}
	})
}

// hasGaps reports whether batches skip an offset: between batches, or
// inside one (fewer records than offsets).
func hasGaps(batches []byte) bool {
	next := rb.Offset(-1)
	for it := rb.NewIter(batches, false); it.Next(); {
		b := it.Batch()
		if next >= 0 && b.BaseOffset() != next || int64(b.RecordCount()) != int64(b.LastOffsetDelta())+1 {
			return true
		}
		next = b.NextOffset()
	}
	return false
}

// sameRecords reads a partition with a franz-go consumer from the source
// and from the mirror and compares the records and their offsets.
func sameRecords(t *testing.T, sourceAddr, targetAddr, topic string, partition int32) {
	t.Helper()
	want := readRecords(t, sourceAddr, topic, partition, -1)
	if got := readRecords(t, targetAddr, topic, partition, len(want)); !slices.Equal(got, want) {
		t.Fatalf("%s-%d: the mirror reads\n%v\nthe source\n%v", topic, partition, got, want)
	}
}

// TestMirrorTransactions mirrors committed, aborted and open transactions
// from a mirrord and from kfake: a read_committed consumer reads the same
// records at the same offsets from both, the last stable offsets match,
// and while a transaction is open at the source the mirror's last stable
// offset stays at its first offset until the source commits it.
func TestMirrorTransactions(t *testing.T) {
	sources := []struct {
		name  string
		start func(t *testing.T, topic string, partitions int32) string
	}{
		{"mirrord", func(t *testing.T, topic string, partitions int32) string {
			node, addr := startNode(t, filepath.Join(t.TempDir(), "source"))
			createTopic(t, node, topic, partitions)
			return addr
		}},
		{"kfake", func(t *testing.T, topic string, partitions int32) string {
			cluster, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(partitions, topic))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cluster.Close)
			return cluster.ListenAddrs()[0]
		}},
	}
	for i, s := range sources {
		t.Run(s.name, func(t *testing.T) {
			seed := uint64(100 + i)
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 1))
			const topic, partitions = "payments", int32(2)
			sourceAddr := s.start(t, topic, partitions)
			committed := produceTransactions(t, sourceAddr, topic, partitions, rng)
			target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
			mirrorTopic(t, target, sourceAddr, topic)
			source, targetClient := newClient(t, sourceAddr), newClient(t, targetAddr)
			waitConverged(t, source, target, targetClient, topic, partitions)
			compareCommitted(t, source, targetClient, sourceAddr, targetAddr, topic, partitions, committed)

			// A transaction left open at the source.
			open, firstOffsets, pending := beginOpenTransaction(t, sourceAddr, topic, partitions, rng)
			waitConverged(t, source, target, targetClient, topic, partitions)
			for p := range partitions {
				lso := lastStableOffset(t, targetClient, topic, p)
				if lso != firstOffsets[p] {
					t.Fatalf("partition %d: mirror last stable offset %d with a transaction open from %d", p, lso, firstOffsets[p])
				}
				if n := committedBytesAt(t, targetClient, topic, p, lso); n != 0 {
					t.Fatalf("partition %d: read_committed at the last stable offset %d returned %d bytes", p, lso, n)
				}
			}
			compareCommitted(t, source, targetClient, sourceAddr, targetAddr, topic, partitions, committed)

			// The source commits it: the mirror's last stable offset
			// reaches its high watermark, and its records are readable.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := open.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			for p, n := range pending {
				committed[p] += n
			}
			waitConverged(t, source, target, targetClient, topic, partitions)
			for p := range partitions {
				_, _, offsets := rawPartition(t, targetClient, topic, p)
				if lso := lastStableOffset(t, targetClient, topic, p); lso != offsets[1] {
					t.Fatalf("partition %d: mirror last stable offset %d after the commit, high watermark %d", p, lso, offsets[1])
				}
			}
			compareCommitted(t, source, targetClient, sourceAddr, targetAddr, topic, partitions, committed)
		})
	}
}

// compareCommitted checks that the last stable offsets match and that a
// read_committed consumer reads committed[p] records from each, the same.
func compareCommitted(t *testing.T, source, target *kgo.Client, sourceAddr, targetAddr, topic string, partitions int32, committed map[int32]int) {
	t.Helper()
	for p := range partitions {
		if got, want := lastStableOffset(t, target, topic, p), lastStableOffset(t, source, topic, p); got != want {
			t.Fatalf("partition %d: mirror last stable offset %d, source %d", p, got, want)
		}
		want := readRecords(t, sourceAddr, topic, p, committed[p])
		if got := readRecords(t, targetAddr, topic, p, committed[p]); !slices.Equal(got, want) {
			t.Fatalf("partition %d: read_committed from the mirror\n%v\nfrom the source\n%v", p, got, want)
		}
	}
}

// produceTransactions writes plain records and transactions over every
// partition, committed and aborted (both at least once), and returns the
// records a read_committed consumer reads per partition.
func produceTransactions(t *testing.T, addr, topic string, partitions int32, rng *rand.Rand) map[int32]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	plain, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	txn, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("paths-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	committed := map[int32]int{}
	for round, commit := range []bool{true, false, rng.IntN(2) == 0, false, true} {
		for p := range partitions {
			n := 1 + rng.IntN(3)
			produceRecords(ctx, t, plain, topic, p, n, fmt.Sprintf("plain round %d", round))
			committed[p] += n
		}
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range partitions {
			n := 1 + rng.IntN(4)
			produceRecords(ctx, t, txn, topic, p, n, fmt.Sprintf("txn round %d commit=%v", round, commit))
			if commit {
				committed[p] += n
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	return committed
}

// beginOpenTransaction produces records to every partition in a
// transaction it leaves open, and returns the producer, the
// transaction's first offset and its number of records per partition.
func beginOpenTransaction(t *testing.T, addr, topic string, partitions int32, rng *rand.Rand) (*kgo.Client, map[int32]int64, map[int32]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("paths-open"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(open.Close)
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	first, records := map[int32]int64{}, map[int32]int{}
	for p := range partitions {
		records[p] = 1 + rng.IntN(3)
		first[p] = produceRecords(ctx, t, open, topic, p, records[p], "open txn")
	}
	return open, first, records
}

// produceRecords produces n records to one partition, one at a time, and
// returns the first one's offset.
func produceRecords(ctx context.Context, t *testing.T, client *kgo.Client, topic string, partition int32, n int, label string) int64 {
	t.Helper()
	first := int64(-1)
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: partition, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s record %d", label, i)}
		if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to %s-%d: %v", topic, partition, err)
		}
		if first < 0 {
			first = r.Offset
		}
	}
	return first
}

// produceBatches produces count batches of 1-6 records, with keys from a
// small set (so that compaction finds duplicates), to one partition. The
// records of a batch are flushed together, so the batches do not depend
// on timing.
func produceBatches(t *testing.T, addr, topic string, partition int32, rng *rand.Rand, count int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ManualFlushing(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for range count {
		n := 1 + rng.IntN(6)
		results := make(chan error, n)
		for range n {
			r := &kgo.Record{Topic: topic, Partition: partition, Key: fmt.Appendf(nil, "key-%d", rng.IntN(6)), Value: fmt.Appendf(nil, "value %d", rng.Uint64())}
			client.Produce(ctx, r, func(_ *kgo.Record, err error) { results <- err })
		}
		if err := client.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := <-results; err != nil {
				t.Fatalf("produce to %s-%d: %v", topic, partition, err)
			}
		}
	}
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
func injectBatches(t *testing.T, p *partition, epoch rb.Epoch, count int, rng *rand.Rand) {
	t.Helper()
	for range count {
		batch := appendTestBatch(nil, p.log.LogEndOffset(), epoch, 1+rng.IntN(4), "lost")
		if _, err := p.appendMirrored(batch); err != nil {
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
			local, err := target.partition(topic, p)
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
	startMirroring(t, target, source, topic)
	waitUntil(t, "the mirror topic "+topic, func() bool {
		_, ok := target.Topic(topic)
		return ok
	})
}

func localPartition(t *testing.T, n *Node, topic string, index int32) *partition {
	t.Helper()
	p, err := n.partition(topic, index)
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
	deadline := time.Now().Add(20 * time.Second)
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

// lastStableOffset asks ListOffsets for the latest read_committed offset.
func lastStableOffset(t *testing.T, client *kgo.Client, topic string, partition int32) int64 {
	t.Helper()
	return listOffsets(t, client, topic, partition, -1, 1)
}

// committedBytesAt is the size of the records a read_committed Fetch at
// offset returns at once.
func committedBytesAt(t *testing.T, client *kgo.Client, topic string, partition int32, offset int64) int {
	t.Helper()
	_, id, _ := rawPartition(t, client, topic, partition)
	req := kmsg.NewPtrFetchRequest()
	req.Version = 13
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.IsolationLevel = -1, 0, 1<<20, 1
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID, rt.Topic = id, topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = partition, offset, -1, -1, -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := client.Request(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	answer := kresp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if answer.ErrorCode != 0 {
		t.Fatalf("fetch %s-%d read_committed at %d: error %d", topic, partition, offset, answer.ErrorCode)
	}
	return len(answer.RecordBatches)
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
