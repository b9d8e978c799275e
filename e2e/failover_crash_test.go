package e2e

// A kill -9 of a node right after it received a stop, or failback's
// start, and a restart: the node resumes by itself and ends in the state
// an uninterrupted run reaches. Every step of both is crashed in process
// over vfs.Mem by engine/mirror_crash_test.go; here the real process dies
// at whatever moment the kill lands.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// killWhenSaved sends `mirrord mirrors args...` to node without waiting
// for its answer, and kills node with SIGKILL the moment its mirror file
// (mirror-<name>.json, the selection a restart reads) lists the topic
// under field: the request was received and saved, its steps are in
// flight or done. It returns the CLI's exit status once the CLI has ended.
func killWhenSaved(ctx context.Context, t *testing.T, node *server, name, field string, args ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, mirrorCLIWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, mirrordBinary, append([]string{"mirrors", "--bootstrap-server", node.addr}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(node.dataDir, "mirror-"+name+".json")
	saved := func() bool {
		data, err := os.ReadFile(file)
		if err != nil {
			return false // not created yet, or between the rename's steps
		}
		var selection map[string]json.RawMessage
		var topics []string
		if json.Unmarshal(data, &selection) != nil || json.Unmarshal(selection[field], &topics) != nil {
			return false
		}
		return slices.Contains(topics, failoverTopic)
	}
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for !saved() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s never listed %s under %q", file, failoverTopic, field)
		case <-poll.C:
		}
	}
	node.kill()
	exit := 0
	if err := cmd.Wait(); err != nil {
		exit = -1
		if e, ok := err.(*exec.ExitError); ok {
			exit = e.ExitCode()
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("mirrord mirrors %v did not end after the kill", args)
	}
	return exit
}

// TestStopResumesAfterCrash: a stop (with a transaction left open on the
// source), uninterrupted or with a kill -9 of the node right after it
// received it and a restart, ends in the same state: STOPPED at the same
// last mirror offsets, A's batches, then exactly one ABORT marker per open
// transaction and one MIRROR_PID_RESET, all at one leader epoch above the
// mirrored ones; the topic writable; read_committed never shows the open
// transaction.
func TestStopResumesAfterCrash(t *testing.T) {
	t.Parallel()
	for _, kill := range []bool{false, true} {
		name := "no crash"
		if kill {
			name = "kill -9 after --stop"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), failoverDeadline)
			defer cancel()
			pair := startMirrorPair(ctx, t)
			hidden := leaveTransactionOpen(ctx, t, pair)
			waitMirrorCaughtUp(ctx, t, pair.a.addr, pair.b.addr, pair.tps)
			if kill {
				exit := killWhenSaved(ctx, t, pair.b, "a-to-b", "stopped", "--stop", "--mirror", "a-to-b", "--topics", failoverTopic)
				t.Logf("--stop answered with exit %d before the kill landed", exit)
				pair.b.start()
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

// divergedPair is a mirror pair ready for failback: A wrote 30 records a
// partition that B's paused mirror never fetched, B was stopped and wrote
// 10 of its own, and A has the mirror b-to-a created, not started. A's
// alignment truncates its 30 (kept in truncated/, checkTruncatedKept).
func divergedPair(ctx context.Context, t *testing.T) *mirrorPair {
	t.Helper()
	pair := startMirrorPair(ctx, t)
	runMirrorsOK(ctx, t, pair.b.addr, "--pause", "--mirror", "a-to-b", "--topics", failoverTopic)
	for _, tp := range pair.tps {
		produceTo(ctx, t, newClient(t, pair.a.addr), pair.maker, tp, 30, newLedger())
	}
	stopMirror(ctx, t, pair.b, "a-to-b")
	for _, tp := range pair.tps {
		produceTo(ctx, t, newClient(t, pair.b.addr), pair.maker, tp, 10, newLedger())
	}
	runMirrorsOK(ctx, t, pair.a.addr, "--create", "--mirror", "b-to-a", "--mirror-config", writeMirrorConfig(t, pair.b.addr))
	return pair
}

// TestAlignmentResumesAfterCrash: a kill -9 of the old primary right
// after it received failback's start (its log alignment in flight or
// done), and a restart, end with A equal to B byte for byte, the
// truncated records kept.
func TestAlignmentResumesAfterCrash(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), failoverDeadline)
	defer cancel()
	pair := divergedPair(ctx, t)
	exit := killWhenSaved(ctx, t, pair.a, "b-to-a", "names", "--start", "--mirror", "b-to-a", "--topics", failoverTopic)
	t.Logf("--start answered with exit %d before the kill landed", exit)
	pair.a.start()
	waitDescribed(ctx, t, pair.a, "b-to-a", func(p describedRow) bool { return p.State == "MIRRORING" })
	waitMirrorCaughtUp(ctx, t, pair.b.addr, pair.a.addr, pair.tps)
	compareMirrored(t, readAll(ctx, t, pair.b.addr, pair.tps), readAll(ctx, t, pair.a.addr, pair.tps))
	checkTruncatedKept(t, pair.a, pair.tps, 30)
}
