package e2e

// Unclean leader election on a real Kafka 4.4 source: the source elects
// an out-of-sync replica whose log lacks records the mirror already
// copied, and the mirror's next fetch meets a DivergingEpoch below what it
// mirrored. The mirror config mirror.support.unclean.leader.election
// decides what follows: on, the partition truncates to the new source
// leader's log (keeping what it removed under truncated/) and mirrors on;
// off (the default), it goes FAILED, non-retryable, with an error naming
// the setting.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	uleSetting = "mirror.support.unclean.leader.election"
	// Records per topic: with all three replicas in sync, then with C
	// out of the ISR (what the unclean election loses), then written to
	// C after it was elected.
	uleRecordsInSync        = 300
	uleRecordsOutOfSync     = 200
	uleRecordsAfterElection = 120
	uleElectionWait         = 90 * time.Second // fencing of A and B, C's restart, the controller's periodic unclean election
	uleFailedHold           = 2 * time.Second  // a FAILED partition stays FAILED over this many retry backoffs (max 500 ms)
	uleFailedHoldPolls      = 40
)

// uleKafkaConfig: brokers fenced soon after a kill, and the controller's
// periodic unclean election (KRaft: unclean.leader.election.interval.ms,
// default 5 minutes) often.
var uleKafkaConfig = map[string]string{
	"broker.session.timeout.ms":           "6000",
	"broker.heartbeat.interval.ms":        "500",
	"unclean.leader.election.interval.ms": "500",
}

// TestInteropUncleanLeaderElection runs three Kafka 4.4 brokers beside a
// dedicated KRaft controller (so that killing two brokers keeps the
// quorum). Two topics, RF 3 on brokers A, B, C (A leads),
// min.insync.replicas=1 and unclean.leader.election.enable=true, are
// mirrored into one mirrord node by two mirrors: "on" (ule-on, with
// mirror.support.unclean.leader.election=true) and "off" (ule-off, the
// default). Records are written with all three in sync; C is killed;
// more records are written (ISR {A,B}) and mirrored; A and B are killed;
// C comes back and the controller elects it uncleanly; records are
// written to C. Kafka's side is checked first: C leads in a new epoch
// with a log that ends where C stopped, below what the mirrors hold.
// Then "on" must end holding exactly C's batches, the removed ones kept
// in truncated/, and "off" must be FAILED (and stay so) with an error
// naming the setting and its log untouched.
func TestInteropUncleanLeaderElection(t *testing.T) {
	t.Parallel()
	cluster := startKafkaCluster(t, kafkatest.Options{Brokers: 3, Controllers: 1, Config: uleKafkaConfig})
	ctx, cancel := context.WithTimeout(context.Background(), interopDeadline)
	defer cancel()
	started := time.Now()
	kafka := cluster.Bootstrap()
	a, b, c := cluster.Nodes[0], cluster.Nodes[1], cluster.Nodes[2]
	on, off := topicPartition{"ule-on", 0}, topicPartition{"ule-off", 0}
	tps := []topicPartition{off, on}
	for _, tp := range tps {
		createAssignedTopic(ctx, t, kafka, tp.topic, []int32{a.ID, b.ID, c.ID},
			map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
	}
	waitPartitions(ctx, t, kafka, tps, "A leads, ISR {A,B,C}", func(p kadm.PartitionDetail) bool {
		return p.Leader == a.ID && len(p.ISR) == 3
	})

	mirror := startServer(t)
	createULEMirror(ctx, t, mirror.addr, kafka)
	runMirrorsOK(ctx, t, mirror.addr, "--create", "--mirror", "off", "--mirror-config", writeMirrorConfig(t, kafka))
	runMirrorsOK(ctx, t, mirror.addr, "--start", "--mirror", "on", "--topics", on.topic)
	runMirrorsOK(ctx, t, mirror.addr, "--start", "--mirror", "off", "--topics", off.topic)

	maker := newRecordMaker(newSeed(t))
	produceULE(ctx, t, kafka, maker, tps, 0, uleRecordsInSync)
	inSync := waitMirrorCaughtUp(ctx, t, kafka, mirror.addr, tps)

	// C leaves: what is written now is on A and B only.
	if err := cluster.Kill(c); err != nil {
		t.Fatal(err)
	}
	waitPartitions(ctx, t, kafka, tps, "ISR {A,B} after C's kill", func(p kadm.PartitionDetail) bool {
		return p.Leader == a.ID && len(p.ISR) == 2 && !slices.Contains(p.ISR, c.ID)
	})
	epochBefore := map[topicPartition]int32{}
	for _, tp := range tps {
		_, epochBefore[tp] = partitionLeader(ctx, t, kafka, tp)
	}
	produceULE(ctx, t, kafka, maker, tps, uleRecordsInSync, uleRecordsOutOfSync)
	mirrored := waitMirrorCaughtUp(ctx, t, kafka, mirror.addr, tps)
	before := readAll(ctx, t, mirror.addr, tps)
	t.Logf("mirrored %v (C stopped at %v) in epochs %v after %v", mirrored, inSync, epochBefore, time.Since(started).Round(time.Millisecond))

	// A and B die; C comes back and is elected out of sync: by the
	// controller when it fences the last of A and B if C is back by then,
	// else when C unfences or by its periodic unclean election.
	for _, n := range []*kafkatest.Node{a, b} {
		if err := cluster.Kill(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := cluster.Restart(ctx, c); err != nil {
		t.Fatal(err)
	}
	epochAfter := map[string]int32{}
	waitPartitions(ctx, t, c.Addr, tps, "C elected uncleanly", func(p kadm.PartitionDetail) bool {
		epochAfter[p.Topic] = p.LeaderEpoch
		return p.Leader == c.ID && p.LeaderEpoch > epochBefore[topicPartition{p.Topic, p.Partition}] && slices.Equal(p.ISR, []int32{c.ID})
	})
	checkSourceDiverged(ctx, t, c.Addr, tps, inSync, mirrored, epochBefore)
	t.Logf("C leads in epochs %v, its log ending at %v, after %v", epochAfter, inSync, time.Since(started).Round(time.Millisecond))
	produceULE(ctx, t, c.Addr, maker, tps, uleRecordsInSync+uleRecordsOutOfSync, uleRecordsAfterElection)
	source := readAll(ctx, t, c.Addr, tps)
	for _, tp := range tps {
		if want := inSync[tp] + uleRecordsAfterElection; source[tp].highWatermark != want {
			t.Fatalf("Kafka: %s on C ends at %d after the writes to it, want %d", tp, source[tp].highWatermark, want)
		}
	}

	t.Run("on", func(t *testing.T) {
		checkULERecovered(ctx, t, mirror, on, source[on], before[on], inSync[on], mirrored[on])
	})
	t.Run("off", func(t *testing.T) {
		checkULEFailed(ctx, t, mirror, off, before[off], inSync[off])
	})
	t.Logf("done after %v", time.Since(started).Round(time.Millisecond))
}

// createULEMirror creates the mirror "on" with the setting on. A mirrord
// that does not know the setting refuses it: that is reported, and the
// mirror is created without it so that the rest still runs and says what
// mirrord does.
func createULEMirror(ctx context.Context, t *testing.T, addr, kafka string) {
	t.Helper()
	config := writeMirrorConfig(t, kafka)
	text, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	withSetting := writeProperties(t, string(text)+uleSetting+"=true\n")
	result := runMirrors(ctx, t, addr, "--create", "--mirror", "on", "--mirror-config", withSetting)
	if result.exit == 0 {
		return
	}
	t.Errorf("mirrord refuses %s=true: %s: exit %d: %s(product change needed: the mirror config key; the \"on\" checks below run without it)",
		uleSetting, result.command(), result.exit, result.stderr)
	runMirrorsOK(ctx, t, addr, "--create", "--mirror", "on", "--mirror-config", config)
}

// createAssignedTopic creates a one-partition topic on Kafka with its
// replicas (the first leads) and configs.
func createAssignedTopic(ctx context.Context, t *testing.T, addr, name string, replicas []int32, configs map[string]string) {
	t.Helper()
	client := newClient(t, addr)
	defer client.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	assignment := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	assignment.Partition, assignment.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, assignment)
	for k, v := range configs {
		config := kmsg.NewCreateTopicsRequestTopicConfig()
		config.Name, config.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, config)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, client)
	if err == nil && len(resp.Topics) == 1 {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create topic %s on Kafka with replicas %v: %v", name, replicas, err)
	}
}

// waitPartitions polls Kafka's metadata (from addr) until every partition
// of tps satisfies ok.
func waitPartitions(ctx context.Context, t *testing.T, addr string, tps []topicPartition, what string, ok func(kadm.PartitionDetail) bool) {
	t.Helper()
	client, err := kgo.NewClient(seeds(addr), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	reason := pollUntil(ctx, uleElectionWait, func(ctx context.Context) string {
		for _, tp := range tps {
			details, err := admin.ListTopics(ctx, tp.topic)
			if err != nil {
				return err.Error()
			}
			p, found := details[tp.topic].Partitions[tp.partition]
			if !found || p.Err != nil || !ok(p) {
				return fmt.Sprintf("%s: %+v", tp, p)
			}
		}
		return ""
	})
	if reason != "" {
		t.Fatalf("Kafka: not %s within %v: %s", what, uleElectionWait, reason)
	}
}

// produceULE writes count records to each partition, numbered from first,
// acknowledged by all in-sync replicas.
func produceULE(ctx context.Context, t *testing.T, addr string, maker *recordMaker, tps []topicPartition, first, count int) {
	t.Helper()
	client := newClient(t, addr, kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerLinger(2*time.Millisecond))
	defer client.Close()
	var records []*kgo.Record
	for _, tp := range tps {
		for i := range count {
			records = append(records, maker.record(tp.topic, tp.partition, first+i))
		}
	}
	if err := produceAll(ctx, client, records, newLedger()); err != nil {
		t.Fatalf("produce to Kafka at %s: %v", addr, err)
	}
}

// checkSourceDiverged: Kafka's side of the scenario. C's log ends where C
// stopped (inSync), below what the mirrors hold (mirrored), and C answers
// OffsetForLeaderEpoch for the epoch the mirrors last fetched with that
// end: the DivergingEpoch a mirror's next fetch will meet.
func checkSourceDiverged(ctx context.Context, t *testing.T, cAddr string, tps []topicPartition, inSync, mirrored map[topicPartition]int64, epochBefore map[topicPartition]int32) {
	t.Helper()
	for _, tp := range tps {
		if inSync[tp] >= mirrored[tp] {
			t.Fatalf("Kafka: %s: C stopped at %d, the mirror holds up to %d: nothing to lose", tp, inSync[tp], mirrored[tp])
		}
	}
	reason := pollUntil(ctx, mirrorCatchUpWait, func(ctx context.Context) string { // C may still be recovering
		ends, err := endOffsets(ctx, cAddr, tps)
		if err != nil {
			return err.Error()
		}
		for _, tp := range tps {
			if ends[tp] != inSync[tp] {
				return fmt.Sprintf("%s: C's log ends at %d, want %d where C stopped", tp, ends[tp], inSync[tp])
			}
			answer, err := offsetForLeaderEpoch(ctx, cAddr, tp, epochBefore[tp])
			if err != nil {
				return err.Error()
			}
			if want := (offsetForLeaderEpochAnswer{0, epochBefore[tp], inSync[tp]}); answer != want {
				return fmt.Sprintf("%s: C's OffsetForLeaderEpoch(%d) %+v, want %+v", tp, epochBefore[tp], answer, want)
			}
		}
		return ""
	})
	if reason != "" {
		t.Fatalf("Kafka: the elected C does not show the divergence within %v: %s", mirrorCatchUpWait, reason)
	}
}

// checkULERecovered: the mirror with the setting on ends MIRRORING and
// holds exactly the source's batches (the new leader C's, those written
// after the election included); the batches it removed, [inSync,
// mirrored), are kept byte for byte under truncated/.
func checkULERecovered(ctx context.Context, t *testing.T, mirror *server, tp topicPartition, source, before storedPartition, inSync, mirrored int64) {
	t.Helper()
	states := map[string]bool{}
	var last describedRow
	reason := pollUntil(ctx, mirrorCatchUpWait, func(context.Context) string {
		row, err := describedPartition(ctx, t, mirror.addr, "on", tp)
		if err != nil {
			return err.Error()
		}
		last, states[row.State] = row, true
		if row.State != "MIRRORING" || row.LogEndOffset != source.highWatermark {
			return fmt.Sprintf("%+v", row)
		}
		return ""
	})
	t.Logf("%s: states seen by --describe: %v", tp, slices.Sorted(maps.Keys(states)))
	if reason != "" {
		failWithDescribe(ctx, t, mirror.addr, "%s: not MIRRORING at the source's end %d within %v: %s", tp, source.highWatermark, mirrorCatchUpWait, reason)
	}
	if last.Error != "" {
		t.Errorf("%s: MIRRORING with error %q", tp, last.Error)
	}
	got := readAll(ctx, t, mirror.addr, []topicPartition{tp})
	compareMirrored(t, map[topicPartition]storedPartition{tp: source}, got)
	checkULETruncatedKept(t, mirror, tp, batchesFrom(before.batches, inSync), inSync, mirrored)
}

// checkULETruncatedKept: truncated/<topic>-<partition>/ holds files
// <from>-<to>.batches that, in order of from, cover [inSync, mirrored) and
// together are the batches the mirror held there before the election.
func checkULETruncatedKept(t *testing.T, mirror *server, tp topicPartition, removed []byte, inSync, mirrored int64) {
	t.Helper()
	dir := filepath.Join(mirror.dataDir, "truncated", fmt.Sprintf("%s-%d", tp.topic, tp.partition))
	files, _ := filepath.Glob(filepath.Join(dir, "*.batches"))
	type kept struct{ from, to int64 }
	var ranges []kept
	byRange := map[kept][]byte{}
	for _, file := range files {
		var r kept
		if _, err := fmt.Sscanf(filepath.Base(file), "%d-%d.batches", &r.from, &r.to); err != nil {
			t.Errorf("%s: %s: not named <from>-<to>.batches", tp, file)
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		ranges, byRange[r] = append(ranges, r), data
	}
	if len(ranges) == 0 {
		t.Errorf("%s: no truncated batches kept in %s; want the %d records [%d, %d) the unclean election lost", tp, dir, mirrored-inSync, inSync, mirrored)
		return
	}
	slices.SortFunc(ranges, func(x, y kept) int { return int(x.from - y.from) })
	var all []byte
	next := inSync
	for _, r := range ranges {
		if r.from != next {
			t.Errorf("%s: kept ranges %v do not cover [%d, %d) in a row", tp, ranges, inSync, mirrored)
			return
		}
		all, next = append(all, byRange[r]...), r.to
	}
	if next != mirrored || !bytes.Equal(all, removed) {
		t.Errorf("%s: kept ranges %v hold %d bytes; want [%d, %d): the %d bytes the mirror held there (first difference at byte %d)",
			tp, ranges, len(all), inSync, mirrored, len(removed), firstDifference(all, removed))
	}
}

// checkULEFailed: the mirror with the setting off fails the partition
// with an error naming the setting (in --describe and --describe --json),
// keeps it FAILED (non-retryable: it waits for --recover) and leaves its
// log as it was.
func checkULEFailed(ctx context.Context, t *testing.T, mirror *server, tp topicPartition, before storedPartition, inSync int64) {
	t.Helper()
	failed := func(row describedRow) bool { return row.State == "FAILED" && strings.Contains(row.Error, uleSetting) }
	var last describedRow
	reason := pollUntil(ctx, mirrorCatchUpWait, func(context.Context) string {
		row, err := describedPartition(ctx, t, mirror.addr, "off", tp)
		if err != nil {
			return err.Error()
		}
		if last = row; !failed(row) {
			return fmt.Sprintf("%+v", row)
		}
		return ""
	})
	if reason != "" {
		t.Errorf("%s: not FAILED with an error naming %s within %v: last described %+v (log end %d; C's log ended at %d when elected, the mirror held %d): %s",
			tp, uleSetting, mirrorCatchUpWait, last, last.LogEndOffset, inSync, before.highWatermark, describeSilentTruncation(last, before, inSync))
	} else {
		checkStaysFailed(ctx, t, mirror.addr, tp, failed)
		if text := runMirrorsOK(ctx, t, mirror.addr, "--describe", "--mirror", "off"); !strings.Contains(text, uleSetting) {
			t.Errorf("--describe does not name %s:\n%s", uleSetting, text)
		}
	}
	after := readAll(ctx, t, mirror.addr, []topicPartition{tp})
	compareStored(t, "the mirror's log after a refused unclean election", map[topicPartition]storedPartition{tp: before}, after)
}

// checkStaysFailed: over uleFailedHold (several retry backoffs of the test
// mirror config) the partition stays failed: nothing retries it.
func checkStaysFailed(ctx context.Context, t *testing.T, addr string, tp topicPartition, failed func(describedRow) bool) {
	t.Helper()
	ticker := time.NewTicker(uleFailedHold / uleFailedHoldPolls)
	defer ticker.Stop()
	until := time.Now().Add(uleFailedHold)
	for poll := 0; poll < uleFailedHoldPolls && time.Now().Before(until); poll++ { // bounded in count and time
		row, err := describedPartition(ctx, t, addr, "off", tp)
		if err != nil {
			t.Fatal(err)
		}
		if !failed(row) {
			t.Errorf("%s: left FAILED within %v (retried?): %+v", tp, uleFailedHold, row)
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-ticker.C:
		}
	}
}

// describeSilentTruncation says what the row shows when the mirror went on
// instead of failing.
func describeSilentTruncation(row describedRow, before storedPartition, inSync int64) string {
	if row.State == "MIRRORING" && row.LogEndOffset != before.highWatermark {
		return fmt.Sprintf("mirrord truncated its log below the %d it held (C's log ended at %d) and mirrors on: a silent truncation", before.highWatermark, inSync)
	}
	return "neither failed nor mirroring C's log"
}

// describedPartition is tp's row in --describe --mirror name --json.
func describedPartition(ctx context.Context, t *testing.T, addr, name string, tp topicPartition) (describedRow, error) {
	t.Helper()
	result := runMirrors(ctx, t, addr, "--describe", "--mirror", name, "--json")
	if result.exit != 0 {
		return describedRow{}, fmt.Errorf("%s: exit %d: %s", result.command(), result.exit, result.stderr)
	}
	var described describeJSON
	if err := json.Unmarshal([]byte(result.stdout), &described); err != nil {
		return describedRow{}, err
	}
	for _, row := range described.Partitions {
		if row.Topic == tp.topic && row.Partition == tp.partition {
			return row, nil
		}
	}
	return describedRow{}, fmt.Errorf("mirror %s does not list %s", name, tp)
}

// batchesFrom returns the batches from the one whose base offset is
// offset (nil if none starts there).
func batchesFrom(batches []byte, offset int64) []byte {
	for rest := batches; len(rest) >= batchHeaderBytes; {
		base := int64(beUint32(rest))<<32 | int64(beUint32(rest[4:]))
		if base == offset {
			return rest
		}
		size := 12 + int(int32(beUint32(rest[batchLengthAt:])))
		if size < batchHeaderBytes || size > len(rest) {
			return nil
		}
		rest = rest[size:]
	}
	return nil
}
