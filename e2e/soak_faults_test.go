package e2e

// The other kills of issue 19's soak: the source node killed under a
// streaming mirror, and the far node of a failback (the new primary the
// failing-back node aligns against) killed in the middle of the
// alignment. (A kill of the failing-back node itself:
// failover_crash_test.go, TestAlignmentResumesAfterCrash.)

import (
	"context"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

const (
	soakSourceKillsShort = 3
	soakSourceKillsLong  = 15
)

// TestSoakSourceKill: the source of a streaming mirror is killed with
// SIGKILL at seeded moments and restarted on its data directory and
// address, its idempotent producer writing the compacted topic through
// the kill (transactions wait for the restart: a transaction cut by its
// coordinator's crash is not this test's). The mirror goes on by itself:
// it never serves less than before, ends byte for byte the source's,
// read_committed shows every committed record once and no aborted one,
// and --describe shows every partition MIRRORING at the source's end
// with no error (no FAILED partition left).
func TestSoakSourceKill(t *testing.T) {
	t.Parallel()
	kills, deadline := soakSourceKillsShort, soakDeadlineShort
	if soakLong() {
		kills, deadline = soakSourceKillsLong, soakDeadlineLong
	}
	seed := newSeed(t)
	random := rand.New(rand.NewPCG(seed, seed^0x736f75726365))
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	started := time.Now()
	source := startServer(t, "--log-cleaner-backoff-ms", soakCleanerBackoffMs)
	workload := startSoakWorkload(ctx, t, source.addr, seed)
	defer workload.halt()
	txnTps := topicPartitions(soakTopics)
	allTps := append(append([]topicPartition(nil), txnTps...), topicPartition{soakCompactTopic, 0})
	target := startServer(t, "--log-cleaner-backoff-ms", soakCleanerBackoffMs)
	runMirrorsOK(ctx, t, target.addr, "--create", "--mirror", "m", "--mirror-config", writeMirrorConfig(t, source.addr))
	runMirrorsOK(ctx, t, target.addr, "--start", "--mirror", "m", "--topics", soakTxnTopic+","+soakCompactTopic)
	waitMirrorAdvances(ctx, t, target, allTps, nil)

	count := soakCount{kills: map[string]int{}}
	address := source.addr
	for round := range kills {
		delay := soakKillDelayMin + time.Duration(random.Int64N(int64(soakKillDelayMax-soakKillDelayMin)))
		select {
		case <-ctx.Done():
			t.Fatalf("round %d: %v", round, ctx.Err())
		case <-time.After(delay):
		}
		beforeKill, err := endOffsets(ctx, target.addr, allTps)
		if err != nil {
			t.Fatalf("round %d: mirror end offsets: %v", round, err)
		}
		workload.gate.Lock() // bounded: a transaction holds it for a few ticks
		source.kill()
		source.start()
		workload.gate.Unlock()
		if source.addr != address {
			t.Fatalf("round %d: the source restarted on %s, not on its address %s", round, source.addr, address)
		}
		count.kills["timed"]++
		count.rounds++
		waitMirrorAdvances(ctx, t, target, allTps, beforeKill)
		checkMirrorPrefix(ctx, t, source.addr, target.addr, txnTps)
		if t.Failed() {
			t.Fatalf("round %d of seed %d failed", round, seed)
		}
	}

	workload.finish(t)
	sourceEnds := waitMirrorCaughtUp(ctx, t, source.addr, target.addr, allTps)
	compareMirrored(t, readAll(ctx, t, source.addr, txnTps), readAll(ctx, t, target.addr, txnTps))
	checkCommitted(ctx, t, source.addr, workload.ended(), &soakCount{})
	checkCommitted(ctx, t, target.addr, workload.ended(), &count)
	checkDescribedCaughtUp(ctx, t, target.addr, source.addr, sourceEnds)
	checkCompactedConverges(ctx, t, workload, source.addr, target.addr, source.dataDir, target.dataDir, &count)
	count.report(t, "soak source kill -9", time.Since(started))
}

// TestSoakFailbackFarNodeKill: after a failover to B, A fails back
// (mirror b-to-a): it learns B's partitions, then its log alignment asks
// B where the logs diverge. B is frozen (SIGSTOP) before the start and
// let run an instant at a time until A lists the partitions in
// LOG_ALIGNMENT (none past it): the alignment's requests to B are in
// flight. Then B is killed with SIGKILL and restarted on its data
// directory and address. A's alignment completes against the restarted
// B: A ends B's byte for byte, the records it wrote past the mirror kept
// in truncated/.
func TestSoakFailbackFarNodeKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), failoverDeadline)
	defer cancel()
	pair := divergedPair(ctx, t)

	if err := syscall.Kill(pair.b.proc.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	address := pair.b.addr
	runMirrorsOK(ctx, t, pair.a.addr, "--start", "--mirror", "b-to-a", "--topics", failoverTopic)
	aligning := thawUntilAligning(ctx, t, pair.a, pair.b)
	t.Logf("B killed with %d of A's %d partitions in LOG_ALIGNMENT", aligning, len(pair.tps))
	pair.b.kill() // SIGKILL ends a stopped process too
	pair.b.start()
	if pair.b.addr != address {
		t.Fatalf("B restarted on %s, not on its address %s", pair.b.addr, address)
	}
	waitDescribed(ctx, t, pair.a, "b-to-a", func(p describedRow) bool { return p.State == "MIRRORING" })
	waitMirrorCaughtUp(ctx, t, pair.b.addr, pair.a.addr, pair.tps)
	compareMirrored(t, readAll(ctx, t, pair.b.addr, pair.tps), readAll(ctx, t, pair.a.addr, pair.tps))
	checkTruncatedKept(t, pair.a, pair.tps, 30)
}

const soakThawsMax = 200 // SIGCONT-SIGSTOP steps of the frozen far node

// thawUntilAligning lets the frozen B run for an instant at a time
// (SIGCONT then SIGSTOP at once) until A's --describe lists b-to-a's
// partitions in LOG_ALIGNMENT: A learned B's partitions and its
// alignment's requests to B are in flight. It requires that no partition
// got past LOG_ALIGNMENT (then the kill would not be mid-alignment) and
// returns how many are in it.
func thawUntilAligning(ctx context.Context, t *testing.T, a, b *server) int {
	t.Helper()
	for range soakThawsMax {
		described, out := describeMirror(ctx, t, a.addr, "b-to-a")
		aligning := 0
		for _, p := range described.Partitions {
			if p.State != "LOG_ALIGNMENT" {
				t.Fatalf("with B frozen, A's failback shows %+v, want nothing past LOG_ALIGNMENT\n%s", p, out)
			}
			aligning++
		}
		if aligning > 0 {
			return aligning
		}
		if err := syscall.Kill(b.proc.Pid(), syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(b.proc.Pid(), syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("A's failback never listed b-to-a's partitions in LOG_ALIGNMENT in %d steps of B", soakThawsMax)
	return 0
}
