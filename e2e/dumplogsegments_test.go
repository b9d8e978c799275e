package e2e

// Kafka's own DumpLogSegments (Kafka 4.4, from the jars of
// the interop suite) reads partition directories mirrord wrote: the
// .index and .timeindex entries must be the ones Kafka writes (an offset
// entry names the last offset of the batch at its position, a time entry
// the last offset of the batch holding its max timestamp), and the .log
// files whole, valid batches. The tool exits 0 whatever it finds and
// reports mismatches on standard error, so the test reads both streams.
// Without Java or the jars it skips, unless CI=true or MIRRORD_INTEROP=1.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	dumpDeadline        = 4 * time.Minute
	dumpRecordsPerCodec = 600
	dumpTool            = "org.apache.kafka.tools.DumpLogSegments" // kafka.tools.DumpLogSegments until Kafka 4.0
)

// dumpComplaints are the lines DumpLogSegments prints when what it reads
// is not what Kafka would have written.
var dumpComplaints = []string{
	"Mismatches in :",                                // an offset entry names another offset than its batch's last
	"Found timestamp mismatch in :",                  // a time entry's timestamp is not its batch's max
	"Found out of order timestamp in :",              // time entries not increasing
	"The following indexed offsets are not found in", // a time entry names no batch's last offset
	"Non-consecutive offsets in ",                    // a gap inside a .log (expected after compaction only)
	"invalid bytes at the end of",                    // a torn or foreign tail
	"isvalid: false",                                 // a batch whose CRC fails
	"Exception",                                      // the tool failed to read a file
}

// TestDumpLogSegmentsWritten writes a partition of a writable topic in
// several small segments, with multi-record batches of every codec, stops
// mirrord cleanly and has DumpLogSegments verify and dump it.
func TestDumpLogSegmentsWritten(t *testing.T) {
	t.Parallel()
	libs := kafkaLibs(t)
	ctx, cancel := context.WithTimeout(context.Background(), dumpDeadline)
	defer cancel()
	node := startServer(t)
	tp := topicPartition{"dump-written", 0}
	// Kafka's index.interval.bytes (4096): about every other batch gets
	// an entry, so a time entry may name a batch without an offset entry.
	// internal.segment.bytes: below segment.bytes's minimum (1 MiB), as Kafka's own tests do.
	createKafkaTopic(ctx, t, node.addr, tp.topic, 1, 1, map[string]string{"internal.segment.bytes": "32768"})
	produceCodecs(ctx, t, node.addr, newRecordMaker(newSeed(t)), tp, dumpRecordsPerCodec)
	stored, err := readPartition(ctx, node.addr, tp.topic, tp.partition)
	if err != nil {
		t.Fatalf("raw read: %v", err)
	}
	if stored.batchCount >= int(stored.highWatermark) || len(stored.codecs) != len(codecs) {
		t.Fatalf("%d batches for %d records, codecs %v: want multi-record batches of %d codecs", stored.batchCount, stored.highWatermark, stored.codecs, len(codecs))
	}
	node.stop()
	checkDumpLogSegments(ctx, t, libs, filepath.Join(node.dataDir, tp.String()), stored, 4, false)
}

// TestDumpLogSegmentsMirroredCompaction mirrors a partition Kafka's
// cleaner compacted (offset gaps inside and between batches) and has
// DumpLogSegments verify and dump mirrord's copy.
func TestDumpLogSegmentsMirroredCompaction(t *testing.T) {
	t.Parallel()
	cluster := sharedKafkaBroker(t) // its topic: dump-compacted
	libs := kafkaLibs(t)
	ctx, cancel := context.WithTimeout(context.Background(), dumpDeadline)
	defer cancel()
	kafka := cluster.Bootstrap()
	tp := topicPartition{"dump-compacted", 0}
	createKafkaTopic(ctx, t, kafka, tp.topic, 1, 1, map[string]string{"cleanup.policy": "compact", "segment.ms": "100",
		"min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0", "delete.retention.ms": "0"})
	maker := newRecordMaker(newSeed(t))
	produceCompactedUntilCleaned(ctx, t, kafka, maker, tp)
	// Then a tail of small batches of every codec after the gaps, so
	// that the mirror's segment gets many index entries.
	produceCodecs(ctx, t, kafka, maker, tp, dumpRecordsPerCodec/2)

	node := startServer(t)
	runMirrorsOK(ctx, t, node.addr, "--create", "--mirror", "dump", "--mirror-config", writeMirrorConfig(t, kafka))
	runMirrorsOK(ctx, t, node.addr, "--start", "--mirror", "dump", "--topics", tp.topic)
	waitMirrorCaughtUp(ctx, t, kafka, node.addr, []topicPartition{tp})
	stored, err := readPartition(ctx, node.addr, tp.topic, tp.partition)
	if err != nil {
		t.Fatalf("raw read: %v", err)
	}
	if !hasOffsetGap(stored.batches) {
		t.Fatalf("mirrord's copy of %s has no offset gap", tp)
	}
	node.stop()
	checkDumpLogSegments(ctx, t, libs, filepath.Join(node.dataDir, tp.String()), stored, 1, true)
}

// produceCodecs writes count keyed records to tp with each codec in turn,
// in batches of at most 3000 bytes.
func produceCodecs(ctx context.Context, t *testing.T, addr string, maker *recordMaker, tp topicPartition, count int) {
	t.Helper()
	for round, c := range codecs {
		client := newClient(t, addr, kgo.ProducerBatchCompression(c.codec), kgo.ProducerLinger(5*time.Millisecond),
			kgo.ProducerBatchMaxBytes(3000))
		var records []*kgo.Record
		for i := range count {
			r := maker.record(tp.topic, tp.partition, round*count+i)
			if r.Key == nil { // a compacted topic takes keyed records only
				r.Key = fmt.Appendf(nil, "key-%d", i)
			}
			records = append(records, r)
		}
		if err := produceAll(ctx, client, records, newLedger()); err != nil {
			t.Fatalf("produce %s with %s: %v", tp, c.name, err)
		}
		client.Close()
	}
}

// checkDumpLogSegments runs DumpLogSegments on the segments in dir (at
// least minSegments) twice: --verify-index-only on the indexes, then a
// deep dump of everything. It fails on any complaint (a gap inside a .log
// is required when gaps is set, and refused otherwise) and requires the
// dump to show every batch stored holds and every index entry.
func checkDumpLogSegments(ctx context.Context, t *testing.T, libs, dir string, stored storedPartition, minSegments int, gaps bool) {
	t.Helper()
	var logs, indexes []string
	var indexEntries, timeEntries int64
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := filepath.Join(dir, e.Name())
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(name) {
		case ".log":
			logs = append(logs, name)
		case ".index":
			indexes, indexEntries = append(indexes, name), indexEntries+info.Size()/8
		case ".timeindex":
			indexes, timeEntries = append(indexes, name), timeEntries+info.Size()/12
		}
	}
	if len(logs) < minSegments || len(indexes) != 2*len(logs) {
		t.Fatalf("%s: %d segments, %d index files: want at least %d segments with two each", dir, len(logs), len(indexes), minSegments)
	}
	if indexEntries < int64(len(logs)) || timeEntries < int64(len(logs)) {
		t.Fatalf("%s: %d offset and %d time entries in %d segments: too few to check", dir, indexEntries, timeEntries, len(logs))
	}
	t.Logf("%s: %d segments, %d offset entries, %d time entries, %d batches", filepath.Base(dir), len(logs), indexEntries, timeEntries, stored.batchCount)

	stdout, stderr := runDumpLogSegments(ctx, t, libs, "--verify-index-only", "--files", strings.Join(indexes, ","))
	checkNoComplaints(t, "--verify-index-only", stdout, stderr, false)
	if got := strings.Count(string(stdout), "Dumping "); got != len(indexes) {
		t.Errorf("--verify-index-only dumped %d files, want %d:\n%s", got, len(indexes), stdout)
	}

	files := slices.Concat(logs, indexes)
	stdout, stderr = runDumpLogSegments(ctx, t, libs, "--deep-iteration", "--print-data-log", "--files", strings.Join(files, ","))
	checkNoComplaints(t, "--deep-iteration --print-data-log", stdout, stderr, gaps)
	var batches, offsetLines, timeLines int
	for line := range strings.Lines(string(stdout)) {
		switch {
		case strings.HasPrefix(line, "baseOffset: "):
			batches++
		case strings.HasPrefix(line, "offset: "): // an .index entry; records start with "| offset: "
			offsetLines++
		case strings.HasPrefix(line, "timestamp: "):
			timeLines++
		}
	}
	if batches != stored.batchCount || int64(offsetLines) != indexEntries || int64(timeLines) != timeEntries {
		t.Errorf("the dump shows %d batches, %d offset entries, %d time entries; want %d, %d, %d",
			batches, offsetLines, timeLines, stored.batchCount, indexEntries, timeEntries)
	}
}

func runDumpLogSegments(ctx context.Context, t *testing.T, libs string, args ...string) (stdout, stderr []byte) {
	t.Helper()
	stdout, stderr, err := kafkatest.RunToolOutputs(ctx, libs, nil, dumpTool, args...)
	if err != nil {
		t.Fatalf("%s: %v", dumpTool, err)
	}
	return stdout, stderr
}

// checkNoComplaints fails on every complaint line of a DumpLogSegments
// run and on anything else on its standard error. Offset gaps inside a
// .log are listed as "A is followed by B" under "Non-consecutive offsets
// in FILE"; with gaps at least one must be listed, without none. Kafka
// 4.4's tool starts each file's check from offset -1, so "-1 is followed
// by B" only says that the file's first record is B: not a gap.
func checkNoComplaints(t *testing.T, what string, stdout, stderr []byte, gaps bool) {
	t.Helper()
	gapReported := false
	var complaints []string
	for i, stream := range [][]byte{stdout, stderr} {
		isStderr := i == 1
		scanner := bufio.NewScanner(bytes.NewReader(stream))
		scanner.Buffer(nil, 1<<20)
		inGapList := false
		for scanner.Scan() {
			line := scanner.Text()
			if strings.HasPrefix(line, "Non-consecutive offsets in ") {
				inGapList = true
				continue
			}
			if previous, _, ok := strings.Cut(strings.TrimSpace(line), " is followed by "); inGapList && ok {
				switch {
				case previous == "-1": // the file's first record
				case gaps:
					gapReported = true
				default:
					complaints = append(complaints, line)
				}
				continue
			}
			inGapList = false
			complained := false
			for _, c := range dumpComplaints {
				complained = complained || strings.Contains(line, c)
			}
			if complained || isStderr && strings.TrimSpace(line) != "" {
				complaints = append(complaints, line)
			}
		}
	}
	if len(complaints) > 0 {
		const shown = 40
		t.Errorf("DumpLogSegments %s complained (%d lines), the first:\n%s", what, len(complaints), strings.Join(complaints[:min(len(complaints), shown)], "\n"))
	}
	if gaps && !gapReported {
		t.Errorf("DumpLogSegments %s reported no offset gap in a compacted partition", what)
	}
}
