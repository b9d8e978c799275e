package e2e

// Crashes (SIGKILL, from MIRRORD_CRASH_POINT) at each step of a stop and
// of failback's log alignment: the restarted node resumes by itself and
// ends in the state an uninterrupted run reaches.

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// stopCrashPoints are the engine's crash points of a stop, in order.
var stopCrashPoints = []string{
	"stop:REMOVE_FROM_FETCHER", "stop:BUMP_LEADER_EPOCH", "stop:ABORT_TRANSACTIONS",
	"stop:ABORT_TRANSACTIONS:written", "stop:RESET_PRODUCERS", "stop:RESET_PRODUCERS:written", "stop:STOPPED",
}

// alignCrashPoints are the crash points of log alignment.
var alignCrashPoints = []string{"align:TRUNCATE", "align:PERSIST"}

// crashAt restarts node with the crash point set.
func crashAt(t *testing.T, node *server, point string) {
	t.Helper()
	node.stop()
	node.env = []string{"MIRRORD_CRASH_POINT=" + point}
	node.start()
}

// waitKilled waits for node to die by SIGKILL (its crash point), then
// starts it again without one.
func waitKilled(t *testing.T, node *server, point string) {
	t.Helper()
	select {
	case <-node.proc.Exited():
	case <-time.After(mirrorCatchUpWait):
		t.Fatalf("the node did not reach crash point %s within %v", point, mirrorCatchUpWait)
	}
	if !node.proc.KilledBySignal(syscall.SIGKILL) {
		t.Fatalf("crash point %s: exit %v, want SIGKILL", point, node.proc.ExitErr())
	}
	node.env = nil
	node.start()
}

// TestStopResumesAfterCrash: a kill -9 at each step of a stop (with a
// transaction left open on the source) and a restart end in the state an
// uninterrupted stop reaches: STOPPED at the same last mirror offsets,
// A's batches, then exactly one ABORT marker per open transaction and one
// MIRROR_PID_RESET, all at one leader epoch above the mirrored ones; the
// topic writable; read_committed never shows the open transaction.
func TestStopResumesAfterCrash(t *testing.T) {
	for _, point := range append([]string{""}, stopCrashPoints...) {
		name := point
		if name == "" {
			name = "no crash"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), failoverDeadline)
			defer cancel()
			pair := startMirrorPair(ctx, t)
			hidden := leaveTransactionOpen(ctx, t, pair)
			waitMirrorCaughtUp(ctx, t, pair.a.addr, pair.b.addr, pair.tps)
			if point != "" {
				crashAt(t, pair.b, point)
				result := runMirrors(ctx, t, pair.b.addr, "--stop", "--mirror", "a-to-b", "--topics", failoverTopic)
				waitKilled(t, pair.b, point)
				t.Logf("--stop while crashing: exit %d, %s", result.exit, result.stderr)
				waitDescribed(ctx, t, pair.b, "a-to-b", func(p describedRow) bool { return p.State == "STOPPED" })
			} else {
				stopMirror(ctx, t, pair.b, "a-to-b")
			}
			checkStoppedState(ctx, t, pair, stoppedPartitions(ctx, t, pair.b, "a-to-b"))
			written := newLedger()
			for _, tp := range pair.tps {
				produceTo(ctx, t, newClient(t, pair.b.addr), pair.maker, tp, 10, written)
			}
			counts := map[topicPartition]int{}
			for _, tp := range pair.tps {
				counts[tp] = failoverRecords + 10
			}
			for tp, records := range consume(ctx, t, pair.b.addr, kgo.ReadCommitted(), counts) {
				for _, r := range records {
					if hidden[string(r.Value)] {
						t.Errorf("%s: read_committed shows the open transaction's record at %d", tp, r.Offset)
					}
				}
			}
		})
	}
}

// leaveTransactionOpen writes one record per partition to A in a
// transaction it never ends, and returns their values.
func leaveTransactionOpen(ctx context.Context, t *testing.T, pair *mirrorPair) map[string]bool {
	t.Helper()
	open := newClient(t, pair.a.addr, kgo.TransactionalID("left-open"), kgo.TransactionTimeout(time.Minute))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	hidden := map[string]bool{}
	for _, tp := range pair.tps {
		r := pair.maker.record(tp.topic, tp.partition, 1_000_000)
		r.Value = fmt.Appendf(nil, "open transaction %s", tp)
		hidden[string(r.Value)] = true
		if err := produceAll(ctx, open, []*kgo.Record{r}, newLedger()); err != nil {
			t.Fatal(err)
		}
	}
	return hidden
}

// checkStoppedState: per partition, B holds A's batches up to the last
// mirror offset, then one ABORT marker and one MIRROR_PID_RESET, at one
// epoch above every mirrored one, and nothing else.
func checkStoppedState(ctx context.Context, t *testing.T, pair *mirrorPair, lme map[topicPartition]int64) {
	t.Helper()
	fromA, fromB := readAll(ctx, t, pair.a.addr, pair.tps), readAll(ctx, t, pair.b.addr, pair.tps)
	for _, tp := range pair.tps {
		a, b := fromA[tp], fromB[tp]
		if lme[tp] != a.highWatermark {
			t.Errorf("%s: last mirror offset %d, A's high watermark %d", tp, lme[tp], a.highWatermark)
		}
		if len(b.batches) < len(a.batches) || string(b.batches[:len(a.batches)]) != string(a.batches) {
			t.Errorf("%s: B does not hold A's batches first", tp)
			continue
		}
		var kinds []string
		var epochs []int32
		for rest := b.batches[len(a.batches):]; len(rest) >= batchHeaderBytes; {
			size := 12 + int(int32(beUint32(rest[batchLengthAt:])))
			kinds = append(kinds, controlType(rest[:size]))
			epochs = append(epochs, int32(beUint32(rest[12:])))
			rest = rest[size:]
		}
		mirrored := batchEpochs(a.batches)
		if fmt.Sprint(kinds) != "[abort other]" || len(epochs) != 2 || epochs[0] != epochs[1] || epochs[0] <= mirrored[len(mirrored)-1] {
			t.Errorf("%s: after A's batches B holds %v at epochs %v; want [abort other] (the open transaction's ABORT, MIRROR_PID_RESET) at one epoch above %v", tp, kinds, epochs, mirrored)
		}
		if b.highWatermark != lme[tp]+2 || b.lastStableOffset != b.highWatermark {
			t.Errorf("%s: high watermark %d, last stable offset %d; want both %d", tp, b.highWatermark, b.lastStableOffset, lme[tp]+2)
		}
	}
}

// TestAlignmentResumesAfterCrash: a kill -9 of the old primary at each
// step of failback's log alignment, and a restart, end with A equal to B
// byte for byte, the truncated records kept.
func TestAlignmentResumesAfterCrash(t *testing.T) {
	for _, point := range alignCrashPoints {
		t.Run(point, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), failoverDeadline)
			defer cancel()
			pair := startMirrorPair(ctx, t)
			runMirrorsOK(ctx, t, pair.b.addr, "--pause", "--mirror", "a-to-b", "--topics", failoverTopic)
			for _, tp := range pair.tps {
				produceTo(ctx, t, newClient(t, pair.a.addr), pair.maker, tp, 30, newLedger())
			}
			stopMirror(ctx, t, pair.b, "a-to-b")
			for _, tp := range pair.tps {
				produceTo(ctx, t, newClient(t, pair.b.addr), pair.maker, tp, 10, newLedger())
			}
			crashAt(t, pair.a, point)
			startMirror(ctx, t, pair.a, "b-to-a", pair.b.addr)
			waitKilled(t, pair.a, point)
			waitDescribed(ctx, t, pair.a, "b-to-a", func(p describedRow) bool { return p.State == "MIRRORING" })
			waitMirrorCaughtUp(ctx, t, pair.b.addr, pair.a.addr, pair.tps)
			compareMirrored(t, readAll(ctx, t, pair.b.addr, pair.tps), readAll(ctx, t, pair.a.addr, pair.tps))
			checkTruncatedKept(t, pair.a, pair.tps, 30)
		})
	}
}
