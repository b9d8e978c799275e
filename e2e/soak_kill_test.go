package e2e

// The kill -9 soak of a mirror node (issue 19): seeded rounds of killing
// the mirror while it mirrors a source with transactions and a compacted
// topic, restarting it on its data directory each time. `make test` runs
// soakRoundsShort to soakRoundsShortMax rounds; MIRRORD_SOAK=1 (`make
// soak`) soakRoundsLong.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// soakRoundsShort: a short run aims at each kill point twice, then
	// goes on aiming at those no kill landed on yet, up to
	// soakRoundsShortMax rounds (soakKillAim): 20 rounds at random aims
	// took 41 s of a loaded `make test`, and a kill mid-cleaning, which
	// lands on about one aim in three, could still land on none.
	soakRoundsShort      = 6
	soakRoundsShortMax   = 20
	soakRoundsLong       = 200
	soakDeadlineShort    = 4 * time.Minute // the whole test, beside others on a loaded machine
	soakDeadlineLong     = 30 * time.Minute
	soakKillDelayMin     = 50 * time.Millisecond // mirroring time before a timed kill
	soakKillDelayMax     = 600 * time.Millisecond
	soakKillPointWait    = 1500 * time.Millisecond // a kill waiting for an open transaction or a cleaning lands timed after this
	soakKillPointPoll    = 2 * time.Millisecond    // how often it looks
	soakConvergeWait     = 90 * time.Second        // both cleaners reach the same compacted log
	soakCleanerBackoffMs = "100"
	// soakMirrorCleanerRate: bytes a second; a cleaning of the compacted
	// partition's dirty tens of KB takes a tenth of a second or so (at
	// 24 KiB/s a cleaning outlived the rounds of a long run: restarted
	// after each kill, it never got past its offset map, and the log
	// stayed dirty).
	soakMirrorCleanerRate = "131072"
)

// soakLong reports whether MIRRORD_SOAK=1 asks for the long runs.
func soakLong() bool { return os.Getenv("MIRRORD_SOAK") == "1" }

// TestSoakMirrorKill: a mirror node mirrors a source whose transactional
// producers commit and abort (every transaction kept) and whose
// compacted topic its cleaner rewrites every 100 ms; the mirror, cleaning
// its copy too, is killed with SIGKILL at seeded moments (after a random
// while, or the moment it holds an open transaction, or the moment its
// cleaner has a cleaned segment in flight) and restarted on its data
// directory and address. Each round: the restarted mirror serves at least
// the offsets it served before the kill, fetches again, and holds a byte
// prefix of the source's transactional topic. At the end: the
// transactional topic is the source's byte for byte (offsets, last stable
// offset), read_committed with kgo shows each committed record once at
// its offset and no aborted one; the compacted topic, once both cleaners
// have run over the last rewritten key, is the source's byte for byte and
// holds the latest record of every key.
func TestSoakMirrorKill(t *testing.T) {
	t.Parallel()
	rounds, deadline := soakRoundsShort, soakDeadlineShort
	if soakLong() {
		rounds, deadline = soakRoundsLong, soakDeadlineLong
	}
	seed := newSeed(t)
	random := rand.New(rand.NewPCG(seed, seed^0x736f616b))
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	started := time.Now()
	source := startServer(t, "--log-cleaner-backoff-ms", soakCleanerBackoffMs)
	workload := startSoakWorkload(ctx, t, source.addr, seed)
	defer workload.halt()
	txnTps := topicPartitions(soakTopics)
	allTps := append(append([]topicPartition(nil), txnTps...), topicPartition{soakCompactTopic, 0})

	// The mirror's cleaner is throttled so that a cleaning lasts long
	// enough for a kill to land in it. The long run's mirror is the
	// binary `make build` builds: under the race detector an lz4 frame
	// decompresses in 13.5 ms instead of 30 us (pierrec/lz4 takes a 4 MiB
	// block buffer for each, and the race detector's sync.Pool drops a
	// quarter of those returned), so after 200 rounds its cleaner, which
	// maps the whole dirty range before it rewrites anything, needed
	// minutes for the ~2,000 segments and never got through a round
	// (seeds 1796147926402372530, 1796148599823893323,
	// 1796150933225649619); the short run stays raced.
	binary := mirrordBinary
	if soakLong() {
		binary = noRaceBinary(t)
	}
	target := startServerOf(t, binary, "--log-cleaner-backoff-ms", soakCleanerBackoffMs, "--log-cleaner-io-max-bytes-per-second", soakMirrorCleanerRate)
	runMirrorsOK(ctx, t, target.addr, "--create", "--mirror", "m", "--mirror-config", writeMirrorConfig(t, source.addr))
	runMirrorsOK(ctx, t, target.addr, "--start", "--mirror", "m", "--topics", soakTxnTopic+","+soakCompactTopic)
	waitMirrorAdvances(ctx, t, target, allTps, nil)
	admin := kadm.NewClient(newClient(t, target.addr))
	waitCompactedMirrorTopic(ctx, t, admin)

	count := soakCount{kills: map[string]int{}}
	address := target.addr
	for round := range max(rounds, soakRoundsShortMax) { // soakKillAim ends it
		aim, more := soakKillAim(round, rounds, count.kills, random)
		if !more {
			break
		}
		delay := soakKillDelayMin + time.Duration(random.Int64N(int64(soakKillDelayMax-soakKillDelayMin)))
		beforeKill, err := endOffsets(ctx, target.addr, allTps)
		if err != nil {
			t.Fatalf("round %d: mirror end offsets: %v", round, err)
		}
		landed := awaitKillPoint(ctx, t, aim, delay, target, admin)
		target.kill()
		target.start()
		if target.addr != address {
			t.Fatalf("round %d: restarted on %s, not on its address %s", round, target.addr, address)
		}
		count.kills[landed]++
		count.rounds++
		atRestart := waitMirrorAdvances(ctx, t, target, allTps, beforeKill)
		checkMirrorPrefix(ctx, t, source.addr, target.addr, txnTps)
		if testing.Verbose() || t.Failed() {
			t.Logf("round %d: killed %s (aimed %s, %v); end offsets %v at the kill, %v at the restart", round, landed, aim, delay.Round(time.Millisecond), beforeKill, atRestart)
		}
		if t.Failed() {
			t.Fatalf("round %d of seed %d failed", round, seed)
		}
	}

	workload.finish(t)
	// The last restart (one more kill) lifts the throttle: the cleaner
	// catches up with what the rounds left dirty at full speed.
	target.proc.Args = []string{"--log-cleaner-backoff-ms", soakCleanerBackoffMs}
	target.kill()
	target.start()
	sourceEnds := waitMirrorCaughtUp(ctx, t, source.addr, target.addr, allTps)
	compareMirrored(t, readAll(ctx, t, source.addr, txnTps), readAll(ctx, t, target.addr, txnTps))
	checkCommitted(ctx, t, source.addr, workload.ended(), &soakCount{})
	checkCommitted(ctx, t, target.addr, workload.ended(), &count)
	checkDescribedCaughtUp(ctx, t, target.addr, source.addr, sourceEnds)
	checkCompactedConverges(ctx, t, workload, source.addr, target.addr, source.dataDir, target.dataDir, &count)
	count.report(t, "soak mirror kill -9", time.Since(started))
}

// soakKillAims are where a kill of TestSoakMirrorKill aims
// (awaitKillPoint).
var soakKillAims = []string{"timed", "mid-transaction", "mid-cleaning"}

// soakKillAim returns the aim of round, or false when the run ends. The
// long run (MIRRORD_SOAK=1) draws rounds aims at random. The short run
// cycles through the aims for rounds rounds, then aims at the first
// that no kill landed on (landed counts kills by where they landed) until
// every one has, or soakRoundsShortMax rounds ran.
func soakKillAim(round, rounds int, landed map[string]int, random *rand.Rand) (string, bool) {
	if soakLong() {
		return soakKillAims[random.IntN(len(soakKillAims))], round < rounds
	}
	if round < rounds {
		return soakKillAims[round%len(soakKillAims)], true
	}
	for _, aim := range soakKillAims {
		if landed[aim] == 0 {
			return aim, round < soakRoundsShortMax
		}
	}
	return "", false
}

// TestSoakKillAim: the short run's aims (MIRRORD_SOAK unset).
func TestSoakKillAim(t *testing.T) {
	if soakLong() {
		t.Skip("MIRRORD_SOAK=1: the long run draws its aims at random")
	}
	all := map[string]int{"timed": 1, "mid-transaction": 1, "mid-cleaning": 1}
	noCleaning := map[string]int{"timed": 4, "mid-transaction": 2}
	for _, c := range []struct {
		name   string
		round  int
		landed map[string]int
		aim    string
		more   bool
	}{
		{"first round", 0, nil, "timed", true},
		{"second round", 1, nil, "mid-transaction", true},
		{"last cycled round", soakRoundsShort - 1, nil, "mid-cleaning", true},
		{"every aim landed", soakRoundsShort, all, "", false},
		{"none landed mid-cleaning", soakRoundsShort, noCleaning, "mid-cleaning", true},
		{"still none at the last round", soakRoundsShortMax - 1, noCleaning, "mid-cleaning", true},
		{"past the last round", soakRoundsShortMax, noCleaning, "mid-cleaning", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			aim, more := soakKillAim(c.round, soakRoundsShort, c.landed, nil)
			if more != c.more || more && aim != c.aim {
				t.Errorf("round %d, landed %v: %q %v, want %q %v", c.round, c.landed, aim, more, c.aim, c.more)
			}
		})
	}
}

// waitCompactedMirrorTopic waits until the mirror copied the compacted
// topic's configs (KIP-1279's config sync, persisted), so its cleaner
// runs from the first round on.
func waitCompactedMirrorTopic(ctx context.Context, t *testing.T, admin *kadm.Client) {
	t.Helper()
	reason := pollUntil(ctx, mirrorCatchUpWait, func(ctx context.Context) string {
		described, err := admin.DescribeTopicConfigs(ctx, soakCompactTopic)
		if err != nil {
			return err.Error()
		}
		rc, err := described.On(soakCompactTopic, nil)
		if err != nil {
			return err.Error()
		}
		configs := map[string]kadm.Config{}
		for _, c := range rc.Configs {
			configs[c.Key] = c
		}
		for key, want := range cleanerDiffConfigs {
			if !dynamic(configs, key, want) {
				return fmt.Sprintf("%s is %+v, want %s", key, configs[key], want)
			}
		}
		return ""
	})
	if reason != "" {
		t.Fatalf("the mirror's %s: not the source's configs within %v: %s", soakCompactTopic, mirrorCatchUpWait, reason)
	}
}

// awaitKillPoint waits for the moment a kill aimed at: "timed" after
// delay; "mid-transaction" when the mirror's transactional topic has an
// open transaction (last stable offset below the high watermark);
// "mid-cleaning" when the mirror's compacted partition has a cleaned
// segment or a swap in flight. It returns where the kill lands: a moment
// not found within soakKillPointWait is "timed".
func awaitKillPoint(ctx context.Context, t *testing.T, aim string, delay time.Duration, target *server, admin *kadm.Client) string {
	t.Helper()
	if aim == "timed" {
		select {
		case <-ctx.Done():
			t.Fatalf("before a kill: %v", ctx.Err())
		case <-time.After(delay):
		}
		return aim
	}
	found := func() bool { return mirrorCleaning(target.dataDir) }
	if aim == "mid-transaction" {
		found = func() bool { return mirrorHasOpenTransaction(ctx, admin) }
	}
	ctx, cancel := context.WithTimeout(ctx, soakKillPointWait)
	defer cancel()
	ticker := time.NewTicker(soakKillPointPoll)
	defer ticker.Stop()
	for !found() {
		select {
		case <-ctx.Done():
			return "timed"
		case <-ticker.C:
		}
	}
	return aim
}

// mirrorCleaning reports whether the compacted partition's directory
// holds a cleaned segment being written or a swap being committed
// (logstore/clean_swap.go's files).
func mirrorCleaning(dataDir string) bool {
	dir := filepath.Join(dataDir, soakCompactTopic+"-0")
	cleaned, _ := filepath.Glob(filepath.Join(dir, "*.cleaned"))
	if len(cleaned) > 0 {
		return true
	}
	_, err := os.Stat(filepath.Join(dir, "cleaner-swap"))
	return err == nil
}

// mirrorHasOpenTransaction reports whether a partition of the transactional topic
// has its last stable offset below its high watermark, the high
// watermark asked first (so a lower last stable offset is an open
// transaction at the second answer).
func mirrorHasOpenTransaction(ctx context.Context, admin *kadm.Client) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	ends, err := admin.ListEndOffsets(ctx, soakTxnTopic)
	if err != nil {
		return false
	}
	stable, err := admin.ListCommittedOffsets(ctx, soakTxnTopic)
	if err != nil {
		return false
	}
	open := false
	stable.Each(func(o kadm.ListedOffset) {
		end, ok := ends.Lookup(o.Topic, o.Partition)
		open = open || o.Err == nil && ok && end.Err == nil && o.Offset < end.Offset
	})
	return open
}

// checkMirrorPrefix requires each mirror partition to hold a byte prefix
// of the source's (read after it), from the same log start.
func checkMirrorPrefix(ctx context.Context, t *testing.T, sourceAddr, mirrorAddr string, tps []topicPartition) {
	t.Helper()
	mirror := readAll(ctx, t, mirrorAddr, tps)
	source := readAll(ctx, t, sourceAddr, tps)
	for _, tp := range tps {
		m, s := mirror[tp], source[tp]
		if m.logStartOffset != s.logStartOffset || m.highWatermark > s.highWatermark || !bytes.HasPrefix(s.batches, m.batches) {
			t.Errorf("%s: mirror (logStart %d, highWatermark %d, %d bytes) is not a prefix of the source (%d, %d, %d bytes); first difference at byte %d",
				tp, m.logStartOffset, m.highWatermark, len(m.batches), s.logStartOffset, s.highWatermark, len(s.batches), firstDifference(m.batches, s.batches))
		}
	}
}

// checkCompactedConverges: the writers stopped, it writes a new key to
// the source whenever the mirror has caught up but differs (each rolls
// the active segments, so both cleaners reach the last rewritten key),
// until the mirror holds the source's compacted partition byte for byte
// at the same end offset. Then every record there is one the source
// acknowledged at that offset, once, and the latest of each key is there.
// The long run found (seeds 1796147926402372530, 1796148599823893323,
// 1796150933225649619) that after 200 kills ~2 s apart a raced mirror's
// compacted partition held ~2,000 segments and never converged: a
// cleaning maps the whole dirty range before it writes, and under the race
// detector each lz4 batch costs ~6 ms to decompress, so no cleaning
// outlived a round (a copy of the partition at round ~100, 598 segments,
// took 57.7 s to clean under -race, 0.32 s without). The long run's mirror
// is therefore the unraced build (see TestSoakMirrorKill); the cleaner
// also keeps its progress per group now (logstore checkpointGroup).
func checkCompactedConverges(ctx context.Context, t *testing.T, w *soakWorkload, sourceAddr, mirrorAddr, sourceDir, mirrorDir string, count *soakCount) {
	t.Helper()
	tp := topicPartition{soakCompactTopic, 0}
	late := newClient(t, sourceAddr, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	written := 0
	var s, m storedPartition
	reason := pollUntil(ctx, soakConvergeWait, func(ctx context.Context) string {
		var err error
		if s, err = readPartition(ctx, sourceAddr, tp.topic, tp.partition); err != nil {
			return "source: " + err.Error()
		}
		if m, err = readPartition(ctx, mirrorAddr, tp.topic, tp.partition); err != nil {
			return "mirror: " + err.Error()
		}
		switch {
		case m.highWatermark != s.highWatermark:
			return fmt.Sprintf("mirror at %d, source at %d", m.highWatermark, s.highWatermark)
		case bytes.Equal(m.batches, s.batches) && m.logStartOffset == s.logStartOffset:
			return ""
		}
		written++
		r := &kgo.Record{Topic: tp.topic, Key: fmt.Appendf(nil, "late-%d", written), Value: fmt.Appendf(nil, "late value %d", written)}
		if err := late.ProduceSync(ctx, r).FirstErr(); err != nil {
			return "late write: " + err.Error()
		}
		w.compacted.add(r)
		return fmt.Sprintf("%d bytes in %d batches on the mirror, %d in %d on the source, first difference at byte %d",
			len(m.batches), m.batchCount, len(s.batches), s.batchCount, firstDifference(m.batches, s.batches))
	})
	if reason != "" {
		t.Fatalf("%s: the mirror's compacted log is not the source's within %v (%d new keys written): %s\nlast difference: %s\nsegments: source %d, mirror %d",
			tp, soakConvergeWait, written, reason, batchDifference(s.batches, m.batches), segmentCount(sourceDir, tp), segmentCount(mirrorDir, tp))
	}
	acked := w.compacted.sorted()[tp]
	count.compactedRecords = len(acked)
	byOffset, latest := map[int64]*kgo.Record{}, map[string]int64{}
	for _, r := range acked {
		byOffset[r.Offset] = r
		latest[string(r.Key)] = r.Offset
	}
	held, err := consumeFromStart(ctx, mirrorAddr, tp.topic)
	if err != nil {
		t.Fatalf("%s: read the mirror: %v", tp, err)
	}
	seen := map[int64]bool{}
	for _, line := range held {
		offsetText, rest, _ := strings.Cut(line, ":")
		key, value, _ := strings.Cut(rest, "=")
		var offset int64
		fmt.Sscanf(offsetText, "%d", &offset)
		want, ok := byOffset[offset]
		switch {
		case seen[offset]:
			count.duplicated++
			t.Errorf("%s: offset %d read twice", tp, offset)
		case !ok || string(want.Key) != key || string(want.Value) != value:
			count.foreign++
			t.Errorf("%s: offset %d holds %s=%q, not what the source acknowledged there", tp, offset, key, value)
		}
		seen[offset] = true
	}
	for key, offset := range latest {
		if !seen[offset] {
			count.lost++
			t.Errorf("%s: the latest record of %s (offset %d) is gone", tp, key, offset)
		}
	}
	t.Logf("%s: %d records held of %d acknowledged (%d keys), identical on both after %d new keys", tp, len(held), len(acked), len(latest), written)
}

// batchDifference names the first batches of two logs that differ: base
// offset, last offset and record count of each.
func batchDifference(source, mirror []byte) string {
	describe := func(rest []byte) (string, []byte) {
		if len(rest) < batchHeaderBytes {
			return "end", nil
		}
		size := 12 + int(int32(beUint32(rest[batchLengthAt:])))
		base := int64(beUint32(rest))<<32 | int64(beUint32(rest[4:]))
		return fmt.Sprintf("[%d..%d] %d records %d bytes", base, base+int64(int32(beUint32(rest[batchLastDeltaAt:]))), int32(beUint32(rest[57:])), size), rest[min(size, len(rest)):]
	}
	var shown []string
	for i := 0; i < 100000 && len(shown) < 3 && (len(source) > 0 || len(mirror) > 0); i++ {
		ds, restS := describe(source)
		dm, restM := describe(mirror)
		if ds != dm || !bytes.Equal(source[:len(source)-len(restS)], mirror[:len(mirror)-len(restM)]) {
			shown = append(shown, fmt.Sprintf("batch %d: source %s, mirror %s", i, ds, dm))
		}
		source, mirror = restS, restM
	}
	return strings.Join(shown, "; ")
}

// segmentCount counts tp's segment files in a data directory.
func segmentCount(dataDir string, tp topicPartition) int {
	logs, _ := filepath.Glob(filepath.Join(dataDir, tp.String(), "*.log"))
	return len(logs)
}
