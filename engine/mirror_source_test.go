package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirrord/mirrord/netio"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errCut is what the cut source answers: kfake closes the connection.
var errCut = errors.New("test: connection cut")

// cutSource makes kfake close the connection of every request of key
// while cut is set, as a network that drops the mirror's traffic would;
// other requests (the test's producer) go through.
func cutSource(cluster *kfake.Cluster, key kmsg.Key, cut *atomic.Bool) {
	cluster.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if cut.Load() {
			return nil, errCut, true
		}
		return nil, nil, false
	})
}

// describeMirror is mirror m's description.
func describeMirror(t *testing.T, n *Node) netio.MirrorDescription {
	t.Helper()
	descriptions, err := n.Mirrors().DescribeMirrors(context.Background(), []string{"m"}, false)
	if err != nil || len(descriptions) != 1 || descriptions[0].Err != nil {
		t.Fatalf("describe: %v %+v", err, descriptions)
	}
	return descriptions[0]
}

// produceEach writes count records to each partition of topic.
func produceEach(t *testing.T, producer *kgo.Client, topic string, partitions int32, count int) {
	t.Helper()
	for p := range partitions {
		produceRecords(context.Background(), t, producer, topic, p, count, "unreachable")
	}
}

// A source the mirror cannot reach while it grows: describe and /metrics
// never call the lag 0 and exact, they say since when and why the source
// does not answer and how old the high watermark is; with only the fetch
// path cut the prober keeps the lag exact; once the source answers again
// the mirror catches up within the reconnect backoff (seconds, not the
// FAILED retry's minutes) and the figures are exact again.
func TestMirrorSourceUnreachable(t *testing.T) {
	const partitions = 2
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	var cutFetch, cutListOffsets atomic.Bool
	cutSource(cluster, kmsg.Fetch, &cutFetch)
	cutSource(cluster, kmsg.ListOffsets, &cutListOffsets)
	sourceAddr := cluster.ListenAddrs()[0]
	target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
	producer := newClient(t, sourceAddr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceEach(t, producer, "events", partitions, 5)
	ctx := context.Background()
	config := mirrorConfig(sourceAddr)
	// The FAILED retry policy at its defaults (up to 5 minutes): a
	// fetcher that backed off on it would not be back in this test's time.
	config["mirror.failed.retry.initial.backoff.ms"], config["mirror.failed.retry.max.backoff.ms"] = "100", "300000"
	if err := target.Mirrors().CreateMirror(ctx, "m", config); err != nil {
		t.Fatal(err)
	}
	if _, err := target.Mirrors().SetTopicsDesiredState(ctx, "m", netio.StartMirroring, netio.TopicSelection{Names: []string{"events"}}); err != nil {
		t.Fatal(err)
	}
	source, targetClient := newClient(t, sourceAddr), newClient(t, targetAddr)
	waitMirrored(t, source, targetClient, "events", partitions)
	waitMetrics(t, "exact and reachable", func() string { return describedExact(t, target, partitions) })

	// Cut: no Fetch and no ListOffsets answers while the source grows.
	cutFetch.Store(true)
	cutListOffsets.Store(true)
	produceEach(t, producer, "events", partitions, 7)
	target.mirrorsMu.Lock()
	staleAfter := target.mirrors["m"].config.staleAfter()
	target.mirrorsMu.Unlock()
	waitMetrics(t, "stale and unreachable", func() string {
		d := describeMirror(t, target)
		if d.SourceUnreachableSince.IsZero() || !strings.Contains(d.SourceError, "broker 0") {
			return fmt.Sprintf("source unreachable since %v: %q", d.SourceUnreachableSince, d.SourceError)
		}
		for _, p := range d.Partitions {
			if !p.Stale || p.Lag() != -1 || p.LagAtLeast() < 0 || p.SourceHighWatermarkAge <= staleAfter || p.LagTime <= 0 {
				return fmt.Sprintf("partition %d: stale %v, lag %d, at least %d, source high watermark %v old (bound %v), lag %v",
					p.Partition, p.Stale, p.Lag(), p.LagAtLeast(), p.SourceHighWatermarkAge, staleAfter, p.LagTime)
			}
		}
		if got := metricByLabel(t, target, "mirrord_mirror_source_reachable", "mirror"); got["m"] != 0 {
			return fmt.Sprintf("source reachable %v", got)
		}
		if got := metricByLabel(t, target, "mirrord_mirror_source_unreachable_seconds", "mirror"); got["m"] <= 0 {
			return fmt.Sprintf("source unreachable for %v s", got)
		}
		age := metricByPartition(t, target, "mirrord_mirror_source_high_watermark_age_seconds", "events")
		lagSeconds := metricByPartition(t, target, "mirrord_mirror_lag_seconds", "events")
		for p := range int32(partitions) {
			if age[p] <= staleAfter.Seconds() || lagSeconds[p] <= 0 {
				return fmt.Sprintf("partition %d: source high watermark %v s old, lag %v s", p, age[p], lagSeconds[p])
			}
		}
		for _, r := range target.MirrorReports()[0].Partitions {
			if !r.LagLowerBound {
				return fmt.Sprintf("report of partition %d: lag %d exact", r.Partition, r.LagRecords)
			}
		}
		return ""
	})

	// Only Fetch cut: the prober learns the source high watermark (12), so
	// the lag is exact while the fetcher fails. (A long poll already at
	// the source when the cut came may have brought some of the 7 new
	// records.)
	cutListOffsets.Store(false)
	waitMetrics(t, "exact lag from the prober", func() string {
		d := describeMirror(t, target)
		if d.SourceUnreachableSince.IsZero() || !strings.Contains(d.SourceError, "fetch from broker 0") {
			return fmt.Sprintf("source unreachable since %v: %q", d.SourceUnreachableSince, d.SourceError)
		}
		lagRecords := metricByPartition(t, target, "mirrord_mirror_lag_records", "events")
		for _, p := range d.Partitions {
			if lag := p.Lag(); p.Stale || p.SourceHighWatermark != 12 || lag != 12-p.LogEndOffset || lag <= 0 || lagRecords[p.Partition] != float64(lag) {
				return fmt.Sprintf("partition %d: stale %v, lag %d (metric %v), source high watermark %d, log end %d",
					p.Partition, p.Stale, p.Lag(), lagRecords[p.Partition], p.SourceHighWatermark, p.LogEndOffset)
			}
		}
		return ""
	})

	// The source answers again: caught up within the reconnect backoff.
	cutFetch.Store(false)
	back := time.Now()
	waitMirrored(t, source, targetClient, "events", partitions)
	waitMetrics(t, "exact and reachable again", func() string { return describedExact(t, target, partitions) })
	caughtUp := time.Since(back)
	t.Logf("caught up %v after the source answered again", caughtUp)
	if limit := reconnectBackoff.MaxBackoff*2 + 5*time.Second; caughtUp > limit {
		t.Fatalf("caught up %v after the source answered again, want within %v", caughtUp, limit)
	}
}

// describedExact checks that describe shows every partition caught up
// with an exact lag of 0, and the source reachable.
func describedExact(t *testing.T, n *Node, partitions int) string {
	d := describeMirror(t, n)
	if !d.SourceUnreachableSince.IsZero() || d.SourceError != "" {
		return fmt.Sprintf("source unreachable since %v: %q", d.SourceUnreachableSince, d.SourceError)
	}
	if len(d.Partitions) != partitions {
		return fmt.Sprintf("%d partitions described", len(d.Partitions))
	}
	for _, p := range d.Partitions {
		if p.Stale || p.Lag() != 0 || p.LagTime != 0 || p.SourceHighWatermarkAge < 0 {
			return fmt.Sprintf("partition %d: stale %v, lag %d, %v, source high watermark %v old", p.Partition, p.Stale, p.Lag(), p.LagTime, p.SourceHighWatermarkAge)
		}
	}
	if got := metricByLabel(t, n, "mirrord_mirror_source_reachable", "mirror"); got["m"] != 1 {
		return fmt.Sprintf("source reachable %v", got)
	}
	return ""
}

// A source that died (its port closed) after it grew: the lag it last
// told becomes a lower bound, never 0 and exact, and the source shows
// unreachable with the neutral error (not "connection refused"); the dry run's figure reads as
// a lower bound on the wire too (Lag -1, LagLowerBound beside it).
func TestMirrorSourceDied(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	sourceAddr := cluster.ListenAddrs()[0]
	target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
	produceEach(t, newClient(t, sourceAddr), "events", 1, 3)
	startMirroring(t, target, sourceAddr, "events")
	waitMirrored(t, newClient(t, sourceAddr), newClient(t, targetAddr), "events", 1)
	waitMetrics(t, "exact and reachable", func() string { return describedExact(t, target, 1) })

	cluster.Close()
	waitMetrics(t, "stale and unreachable", func() string {
		d := describeMirror(t, target)
		if d.SourceUnreachableSince.IsZero() || !strings.Contains(d.SourceError, errSourceUnreachable.Error()) {
			return fmt.Sprintf("source unreachable since %v: %q", d.SourceUnreachableSince, d.SourceError)
		}
		p := d.Partitions[0]
		if !p.Stale || p.Lag() != -1 || p.LagAtLeast() != 0 || p.LagTime <= 0 {
			return fmt.Sprintf("stale %v, lag %d, at least %d, %v", p.Stale, p.Lag(), p.LagAtLeast(), p.LagTime)
		}
		if got := metricByPartition(t, target, "mirrord_mirror_lag_records", "events"); got[0] != 0 {
			return fmt.Sprintf("lag records %v: the lower bound is 0", got)
		}
		return ""
	})
}
