package epoch_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mirrord/mirrord/epoch"
	"github.com/mirrord/mirrord/recordbatch"
)

func TestDivergence(t *testing.T) {
	// Follower: epoch 3 from 0, 5 from 40, 9 from 70, log end offset 100.
	const logEndOffset = 100
	cases := []struct {
		name            string
		entries         []epoch.Entry
		leaderEpoch     recordbatch.Epoch
		leaderEndOffset recordbatch.Offset
		wantTruncateTo  recordbatch.Offset
		wantDone        bool
	}{
		{"leader end offset undefined keeps the log", nil, 5, epoch.UndefinedOffset, logEndOffset, true},
		{"leader end offset undefined, any epoch", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, recordbatch.NoEpoch, epoch.UndefinedOffset, logEndOffset, true},
		{"leader end offset garbage is undefined", []epoch.Entry{e(3, 0)}, 3, -7, logEndOffset, true},
		{"leader without epochs, lower offset", []epoch.Entry{e(3, 0), e(5, 40)}, recordbatch.NoEpoch, 60, 60, true},
		{"leader without epochs, higher offset", []epoch.Entry{e(3, 0), e(5, 40)}, recordbatch.NoEpoch, 500, logEndOffset, true},
		{"empty cache trusts the leader", nil, 5, 30, 30, true},
		{"empty cache, leader ahead", nil, 5, 300, logEndOffset, true},
		{"leader epoch above all local epochs", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 12, 80, 80, true},
		{"leader epoch above all, leader ahead", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 12, 150, logEndOffset, true},
		{"same latest epoch, leader shorter", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 9, 85, 85, true},
		{"same latest epoch, leader longer", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 9, 120, logEndOffset, true},
		{"known middle epoch, leader ended it earlier", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 5, 60, 60, true},
		{"known middle epoch, leader ended it later", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 5, 75, 70, true},
		{"known earliest epoch", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 3, 40, 40, true},
		{"unknown epoch between: truncate and ask again", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 7, 90, 70, false},
		{"unknown epoch between first two", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 4, 50, 40, false},
		// EndOffsetFor answers (requested, earliest start) for an epoch older
		// than the cache, so the follower believes it knows the epoch.
		{"epoch older than the cache", []epoch.Entry{e(3, 20), e(5, 40)}, 1, 30, 20, true},
		{"epoch older than the cache, leader shorter", []epoch.Entry{e(3, 20), e(5, 40)}, 1, 10, 10, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustNew(t, tc.entries...)
			before := c.Entries()
			truncateTo, done := c.Divergence(tc.leaderEpoch, tc.leaderEndOffset, logEndOffset)
			if truncateTo != tc.wantTruncateTo || done != tc.wantDone {
				t.Errorf("Divergence(%d, %d, %d) = (%d, %v), want (%d, %v)", tc.leaderEpoch, tc.leaderEndOffset,
					logEndOffset, truncateTo, done, tc.wantTruncateTo, tc.wantDone)
			}
			if after := c.Entries(); !slices.Equal(after, before) {
				t.Errorf("Divergence changed the cache from %v to %v", before, after)
			}
		})
	}
}

func TestDivergencePanicsOnNegativeLogEndOffset(t *testing.T) {
	c := threeEpochs(t)
	mustPanic(t, "Divergence with log end offset -1", func() { c.Divergence(3, 10, -1) })
	mustPanic(t, "TruncationPointForLastMirrorEpoch with log end offset -1",
		func() { c.TruncationPointForLastMirrorEpoch(3, 10, -1) })
}

// replica is a log reduced to what divergence needs: its epoch cache and its
// log end offset.
type replica struct {
	cache        *epoch.Cache
	logEndOffset recordbatch.Offset
}

// appendRun appends count offsets in epoch ep, as the log store would.
func (r *replica) appendRun(ep recordbatch.Epoch, count int) {
	r.cache.Assign(ep, r.logEndOffset)
	r.logEndOffset += recordbatch.Offset(count)
}

func (r *replica) truncateTo(offset recordbatch.Offset) {
	r.logEndOffset = min(r.logEndOffset, offset)
	r.cache.TruncateFromEnd(offset)
}

// reconcile runs Kafka's OffsetForLeaderEpoch exchange: the follower asks
// for its latest epoch, the leader answers with EndOffsetFor, the follower
// truncates per Divergence until done. It returns the final truncation
// point and the number of rounds.
func reconcile(t *testing.T, follower, leader *replica) (recordbatch.Offset, int) {
	t.Helper()
	// Every round that is not the last removes at least one follower entry.
	roundsMax := follower.cache.Len() + 1
	for round := 1; ; round++ {
		if round > roundsMax {
			t.Fatalf("no agreement after %d rounds", round-1)
		}
		latest, ok := follower.cache.Latest()
		if !ok {
			// Kafka truncates a replica without epochs to its high watermark
			// without asking; here the tests always give the follower one.
			t.Fatal("follower lost every epoch")
		}
		leaderEpoch, leaderEndOffset := leader.cache.EndOffsetFor(latest.Epoch, leader.logEndOffset)
		truncateTo, done := follower.cache.Divergence(leaderEpoch, leaderEndOffset, follower.logEndOffset)
		follower.truncateTo(truncateTo)
		if done {
			return truncateTo, round
		}
	}
}

// TestDivergenceConvergesRandomly builds two replicas that share a prefix and
// then continue in disjoint sets of epochs, as two leaders of different terms
// write, and checks that the exchange truncates the follower to exactly the
// shared prefix.
func TestDivergenceConvergesRandomly(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 0))
	for trial := range 2000 {
		follower := &replica{cache: &epoch.Cache{}}
		leader := &replica{cache: &epoch.Cache{}}
		ep := recordbatch.Epoch(rng.IntN(3))
		for range 1 + rng.IntN(4) {
			n := 1 + rng.IntN(5)
			follower.appendRun(ep, n)
			leader.appendRun(ep, n)
			ep += recordbatch.Epoch(1 + rng.IntN(2))
		}
		shared := follower.logEndOffset
		// Later epochs go to one side or the other, never both: one leader per
		// epoch. The leader's current epoch is the highest of all, assigned
		// at its log end offset when it took over.
		for range rng.IntN(6) {
			side := follower
			if rng.IntN(2) == 0 {
				side = leader
			}
			side.appendRun(ep, 1+rng.IntN(5))
			ep += recordbatch.Epoch(1 + rng.IntN(2))
		}
		leader.cache.Assign(ep, leader.logEndOffset)

		followerEntries, leaderEntries := follower.cache.Entries(), leader.cache.Entries()
		got, rounds := reconcile(t, follower, leader)
		if got != shared {
			t.Fatalf("trial %d: follower %v, leader %v: truncated to %d in %d rounds, want the shared prefix %d",
				trial, followerEntries, leaderEntries, got, rounds, shared)
		}
	}
}

func TestTruncationPointForLastMirrorEpoch(t *testing.T) {
	const logEndOffset = 100
	cases := []struct {
		name      string
		entries   []epoch.Entry
		lmeEpoch  recordbatch.Epoch
		lmeOffset recordbatch.Offset
		want      recordbatch.Offset
	}{
		{"empty cache", nil, 3, 50, 0},
		{"no LME epoch", []epoch.Entry{e(3, 0)}, recordbatch.NoEpoch, 50, 0},
		{"no LME offset", []epoch.Entry{e(3, 0)}, 3, -1, 0},
		{"LME in the latest epoch", []epoch.Entry{e(3, 0), e(5, 40)}, 5, 60, 60},
		{"LME in the latest epoch, at the end", []epoch.Entry{e(3, 0), e(5, 40)}, 5, 100, 100},
		{"LME past our log end", []epoch.Entry{e(3, 0), e(5, 40)}, 5, 130, logEndOffset},
		{"LME epoch ended before its offset", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 5, 90, 70},
		{"LME offset inside its epoch", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 5, 50, 50},
		{"LME epoch unknown, between ours", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 7, 90, 70},
		{"LME epoch unknown, below ours", []epoch.Entry{e(3, 20), e(5, 40)}, 1, 30, 20},
		{"LME epoch above ours", []epoch.Entry{e(3, 0), e(5, 40)}, 8, 60, 60},
		{"LME epoch above ours, LME past our end", []epoch.Entry{e(3, 0), e(5, 40)}, 8, 160, logEndOffset},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustNew(t, tc.entries...)
			got := c.TruncationPointForLastMirrorEpoch(tc.lmeEpoch, tc.lmeOffset, logEndOffset)
			if got != tc.want {
				t.Errorf("TruncationPointForLastMirrorEpoch(%d, %d, %d) = %d, want %d",
					tc.lmeEpoch, tc.lmeOffset, logEndOffset, got, tc.want)
			}
		})
	}
}

// TestFailbackStaleOffsetSameEpoch: old primary A wrote offsets 0 and 1 at
// epoch 0, then its own offset 2 at epoch 10, and crashed. The new primary B
// had mirrored 0 and 1 at epoch 0 (LME: epoch 0, offset 2), failed over, and
// wrote its own offset 2 at epoch 10. Both logs now read {0 0} {10 2} with
// log end offset 3, but offset 2 differs.
func TestFailbackStaleOffsetSameEpoch(t *testing.T) {
	a := mustNew(t, e(0, 0), e(10, 2))
	const aLogEndOffset = 3
	b := mustNew(t, e(0, 0), e(10, 2))
	const bLogEndOffset = 3

	// Plain divergence: A asks for its latest epoch, 10; B answers (10, 3).
	leaderEpoch, leaderEndOffset := b.EndOffsetFor(10, bLogEndOffset)
	if leaderEpoch != 10 || leaderEndOffset != 3 {
		t.Fatalf("B.EndOffsetFor(10) = (%d, %d), want (10, 3)", leaderEpoch, leaderEndOffset)
	}
	truncateTo, done := a.Divergence(leaderEpoch, leaderEndOffset, aLogEndOffset)
	if truncateTo != 3 || !done {
		t.Fatalf("Divergence(10, 3, 3) = (%d, %v), want (3, true)", truncateTo, done)
	}
	t.Logf("epoch divergence keeps A's stale offset 2: truncates to %d", truncateTo)

	// The last mirror epoch finds it.
	const lmeEpoch, lmeOffset = 0, 2
	if got := a.TruncationPointForLastMirrorEpoch(lmeEpoch, lmeOffset, aLogEndOffset); got != 2 {
		t.Fatalf("TruncationPointForLastMirrorEpoch(0, 2, 3) = %d, want 2", got)
	}
	if !a.TruncateFromEnd(2) {
		t.Fatal("TruncateFromEnd(2) left epoch 10 in place")
	}
	if got, want := a.Entries(), []epoch.Entry{e(0, 0)}; !slices.Equal(got, want) {
		t.Errorf("A after failback truncation = %v, want %v", got, want)
	}
}

// TestFailbackUncleanElection: A wrote 0..4 at epoch 3; B mirrored them and
// failed over (LME: epoch 3, offset 5). Then an unclean election on A left
// its log as 0..1 at epoch 3 and 2..4 at epoch 4: the same offsets as B's,
// other data.
func TestFailbackUncleanElection(t *testing.T) {
	a := mustNew(t, e(3, 0), e(4, 2))
	const aLogEndOffset = 5
	const lmeEpoch, lmeOffset = 3, 5

	if naive := min(lmeOffset, aLogEndOffset); naive != 5 {
		t.Fatalf("truncating to the last mirror offset gives %d, want 5", naive)
	}
	t.Log("truncating to the last mirror offset (5) would keep A's replaced offsets 2..4")
	if got := a.TruncationPointForLastMirrorEpoch(lmeEpoch, lmeOffset, aLogEndOffset); got != 2 {
		t.Fatalf("TruncationPointForLastMirrorEpoch(3, 5, 5) = %d, want 2", got)
	}
}
