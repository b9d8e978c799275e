package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// metricSample is one series of a gathered metric: its labels and its
// value (a histogram's sample count).
type metricSample struct {
	labels map[string]string
	value  float64
}

// scrapeMetric gathers one metric from the node's registry.
func scrapeMetric(t *testing.T, n *Node, name string) []metricSample {
	t.Helper()
	families, err := n.Metrics().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var out []metricSample
	for _, family := range families {
		if family.GetName() != name {
			continue
		}
		for _, m := range family.GetMetric() {
			s := metricSample{labels: map[string]string{}}
			for _, pair := range m.GetLabel() {
				s.labels[pair.GetName()] = pair.GetValue()
			}
			// A metric is of one kind; the getters of the others return zero.
			s.value = m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			out = append(out, s)
		}
	}
	return out
}

// metricByPartition is a per-partition metric of mirror m's topic, by partition.
func metricByPartition(t *testing.T, n *Node, name, topic string) map[int32]float64 {
	t.Helper()
	out := map[int32]float64{}
	for _, s := range scrapeMetric(t, n, name) {
		if s.labels["mirror"] != "m" || s.labels["topic"] != topic {
			continue
		}
		p, err := strconv.Atoi(s.labels["partition"])
		if err != nil {
			t.Fatalf("%s: partition label %q", name, s.labels["partition"])
		}
		out[int32(p)] = s.value
	}
	return out
}

// metricByLabel is a metric of mirror m, by the value of one label.
func metricByLabel(t *testing.T, n *Node, name, label string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range scrapeMetric(t, n, name) {
		if s.labels["mirror"] == "m" {
			out[s.labels[label]] = s.value
		}
	}
	return out
}

// waitMetrics polls check until it answers "" or the deadline passes; check
// answers what is still missing.
func waitMetrics(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		missing := check()
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, missing)
		}
		<-poll.C
	}
}

// mirrorLocalLog is the mirror node's log of a partition.
func mirrorLocalLog(t *testing.T, n *Node, topic string, index int32) *logstore.Log {
	t.Helper()
	p, err := n.LocalPartition(topic, index)
	if err != nil {
		t.Fatal(err)
	}
	return p.Log()
}

func logBatchCount(t *testing.T, log *logstore.Log) int {
	t.Helper()
	count := 0
	if err := log.WalkBatches(0, func(rb.Batch) bool { count++; return true }); err != nil {
		t.Fatal(err)
	}
	return count
}

// metricsCaughtUp checks that every partition of the topic shows no lag and
// bytes and batches equal to what its local log holds.
func metricsCaughtUp(t *testing.T, n *Node, topic string, partitions int32) string {
	lagRecords := metricByPartition(t, n, "mirrord_mirror_lag_records", topic)
	lagSeconds := metricByPartition(t, n, "mirrord_mirror_lag_seconds", topic)
	bytes := metricByPartition(t, n, "mirrord_mirror_bytes_total", topic)
	batches := metricByPartition(t, n, "mirrord_mirror_batches_total", topic)
	for p := range partitions {
		log := mirrorLocalLog(t, n, topic, p)
		size, count := log.Size(), logBatchCount(t, log)
		if v, ok := lagRecords[p]; !ok || v != 0 || lagSeconds[p] != 0 {
			return fmt.Sprintf("partition %d: lag %v records (reported %v), %v s", p, v, ok, lagSeconds[p])
		}
		if bytes[p] != float64(size) || batches[p] != float64(count) {
			return fmt.Sprintf("partition %d: %v bytes in %v batches counted, the log holds %d in %d", p, bytes[p], batches[p], size, count)
		}
	}
	return ""
}

// metricStatesAre checks the partitions-per-state gauge of mirror m: want's
// states at their counts, every other state listed at 0.
func metricStatesAre(t *testing.T, n *Node, want map[string]float64) string {
	got := metricByLabel(t, n, "mirrord_mirror_partitions", "state")
	if len(got) != int(mirrorstate.NumStates) {
		return fmt.Sprintf("%d states listed, want all %d: %v", len(got), mirrorstate.NumStates, got)
	}
	for s := range mirrorstate.NumStates {
		if state := s.String(); got[state] != want[state] {
			return fmt.Sprintf("partitions per state %v, want %v", got, want)
		}
	}
	return ""
}

func fetchLatencyCount(t *testing.T, n *Node) float64 {
	var count float64
	for _, v := range metricByLabel(t, n, "mirrord_mirror_fetch_latency_seconds", "source_broker") {
		count += v
	}
	return count
}

// A mirror between two nodes, scraped: bytes and batches equal the local
// logs, lag 0 once caught up, partitions per state, fetch latency; lag in
// records and in time grows while the mirror is paused and the source
// gets data, and returns to 0 after resume; a partition that leaves the
// mirror leaves /metrics.
func TestMirrorMetrics(t *testing.T) {
	sourceNode, sourceAddr := startNode(t, filepath.Join(t.TempDir(), "source"))
	target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
	source, targetClient := newClient(t, sourceAddr), newClient(t, targetAddr)
	const partitions = 3
	createTopic(t, sourceNode, "orders", partitions)
	produceMixed(t, sourceAddr, "orders", partitions, 2)
	startMirroring(t, target, sourceAddr, "orders")
	waitMetrics(t, "the mirror topic", func() string {
		if _, ok := target.Topic("orders"); !ok {
			return "not created yet" // waitMirrored's Metadata would find no leader
		}
		return ""
	})
	waitMirrored(t, source, targetClient, "orders", partitions)

	waitMetrics(t, "caught up", func() string { return metricsCaughtUp(t, target, "orders", partitions) })
	waitMetrics(t, "states", func() string { return metricStatesAre(t, target, map[string]float64{"MIRRORING": partitions}) })
	if fetchLatencyCount(t, target) == 0 {
		t.Fatal("no fetch latency observed")
	}
	var sum float64
	for _, v := range metricByPartition(t, target, "mirrord_mirror_bytes_total", "orders") {
		sum += v
	}
	if sum != float64(target.MirroredBytes()) {
		t.Fatalf("bytes_total sums to %v, MirroredBytes %d", sum, target.MirroredBytes())
	}
	families, err := target.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if problems, err := promlint.NewWithMetricFamilies(families).Lint(); err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	if n := len(scrapeMetric(t, sourceNode, "mirrord_mirror_partitions")); n != 0 {
		t.Fatalf("the source node, which mirrors nothing, reports %d partition-state series", n)
	}

	// Paused: the fetcher stops (its latency series goes); data produced at
	// the source shows as lag, which grows in time while paused.
	ctx := context.Background()
	if _, err := target.Mirrors().SetTopicsDesiredState(ctx, "m", netio.PauseMirroring, netio.TopicSelection{Names: []string{"orders"}}); err != nil {
		t.Fatal(err)
	}
	waitMetrics(t, "paused", func() string {
		if missing := metricStatesAre(t, target, map[string]float64{"PAUSED": partitions}); missing != "" {
			return missing
		}
		if n := len(metricByLabel(t, target, "mirrord_mirror_fetch_latency_seconds", "source_broker")); n != 0 {
			return fmt.Sprintf("%d fetchers still running", n)
		}
		return ""
	})
	pausedEnd := map[int32]rb.Offset{}
	for p := range int32(partitions) {
		pausedEnd[p] = mirrorLocalLog(t, target, "orders", p).LogEndOffset()
	}
	produceMixed(t, sourceAddr, "orders", partitions, 1)
	var behind map[int32]float64
	waitMetrics(t, "lag while paused", func() string {
		lagRecords := metricByPartition(t, target, "mirrord_mirror_lag_records", "orders")
		behind = metricByPartition(t, target, "mirrord_mirror_lag_seconds", "orders")
		for p := range int32(partitions) {
			sp, err := sourceNode.Partition("orders", p)
			if err != nil {
				t.Fatal(err)
			}
			want := sp.Offsets().HighWatermark - pausedEnd[p]
			if want <= 0 || lagRecords[p] != float64(want) || behind[p] <= 0 {
				return fmt.Sprintf("partition %d: lag %v records (source high watermark %d, log end %d), %v s",
					p, lagRecords[p], sp.Offsets().HighWatermark, pausedEnd[p], behind[p])
			}
		}
		return ""
	})
	waitMetrics(t, "lag in time grows while paused", func() string {
		now := metricByPartition(t, target, "mirrord_mirror_lag_seconds", "orders")
		for p := range int32(partitions) {
			if now[p] <= behind[p] {
				return fmt.Sprintf("partition %d: %v s, before %v s", p, now[p], behind[p])
			}
		}
		return ""
	})
	for p := range int32(partitions) {
		if end := mirrorLocalLog(t, target, "orders", p).LogEndOffset(); end != pausedEnd[p] {
			t.Fatalf("partition %d mirrored while paused: log end %d, was %d", p, end, pausedEnd[p])
		}
	}

	// Resumed: it catches up and the lag returns to 0.
	if _, err := target.Mirrors().SetTopicsDesiredState(ctx, "m", netio.ResumeMirroring, netio.TopicSelection{Names: []string{"orders"}}); err != nil {
		t.Fatal(err)
	}
	waitMirrored(t, source, targetClient, "orders", partitions)
	waitMetrics(t, "caught up after resume", func() string { return metricsCaughtUp(t, target, "orders", partitions) })
	waitMetrics(t, "states after resume", func() string { return metricStatesAre(t, target, map[string]float64{"MIRRORING": partitions}) })
	waitMetrics(t, "fetching after resume", func() string {
		if fetchLatencyCount(t, target) == 0 {
			return "no fetch latency observed"
		}
		return ""
	})

	// A partition that leaves the mirror (as a finished stop will make it)
	// leaves /metrics; the topic is deselected so that no refresh brings
	// it back.
	target.mirrorsMu.Lock()
	m := target.mirrors["m"]
	target.mirrorsMu.Unlock()
	m.mu.Lock()
	delete(m.names, "orders")
	delete(m.partitions, logstore.TopicPartition{Topic: "orders", Partition: 2})
	m.mu.Unlock()
	for _, name := range []string{"mirrord_mirror_lag_records", "mirrord_mirror_lag_seconds", "mirrord_mirror_bytes_total", "mirrord_mirror_batches_total"} {
		got := metricByPartition(t, target, name, "orders")
		if _, ok := got[2]; ok || len(got) != 2 {
			t.Fatalf("%s after partition 2 left: %v", name, got)
		}
	}
	if missing := metricStatesAre(t, target, map[string]float64{"MIRRORING": 2}); missing != "" {
		t.Fatal(missing)
	}
}

// The status report behind /metrics and the status page: a mirror that
// mirrors nothing yet lists every state at 0, its source reachable, and
// no partition series.
func TestMirrorMetricsEmptyMirror(t *testing.T) {
	_, sourceAddr := startNode(t, filepath.Join(t.TempDir(), "source")) // reachable, no topics
	target, _ := startNode(t, filepath.Join(t.TempDir(), "target"))
	if err := target.Mirrors().CreateMirror(context.Background(), "m", mirrorConfig(sourceAddr)); err != nil {
		t.Fatal(err)
	}
	if missing := metricStatesAre(t, target, map[string]float64{}); missing != "" {
		t.Fatal(missing)
	}
	reports := target.MirrorReports()
	if len(reports) != 1 || reports[0].Name != "m" || len(reports[0].Partitions) != 0 {
		t.Fatalf("reports %+v", reports)
	}
	families, err := target.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	perMirror := map[string]bool{"mirrord_mirror_partitions": true, "mirrord_mirror_source_reachable": true, "mirrord_mirror_source_unreachable_seconds": true,
		"mirrord_mirror_group_sync_groups": true, "mirrord_mirror_group_sync_errors_total": true,
		"mirrord_mirror_transaction_sync_ids": true, "mirrord_mirror_transaction_sync_errors_total": true,
		"mirrord_mirror_config_sync_topics": true, "mirrord_mirror_config_sync_errors_total": true,
		"mirrord_mirror_acl_sync_acls": true, "mirrord_mirror_acl_sync_errors_total": true,
		// a sync round may have run (a source without groups)
		"mirrord_mirror_group_sync_timestamp_seconds": true, "mirrord_mirror_group_sync_duration_seconds": true,
		"mirrord_mirror_transaction_sync_timestamp_seconds": true, "mirrord_mirror_config_sync_timestamp_seconds": true}
	for _, family := range families {
		if name := family.GetName(); !perMirror[name] && strings.HasPrefix(name, "mirrord_mirror_") {
			t.Fatalf("%s reported for a mirror without partitions", name)
		}
	}
	if got := metricByLabel(t, target, "mirrord_mirror_source_reachable", "mirror"); got["m"] != 1 {
		t.Fatalf("source reachable %v, want 1", got)
	}
}
