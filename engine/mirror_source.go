package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What a mirror knows of its source, and how old that knowledge is.
//
// The source high watermark of each partition is learned from two places:
// every Fetch answer (for the partitions of the fetch session, at the time
// the Fetch was sent: the answer is at least that fresh), and the high
// watermark prober, which asks each source leader, with one ListOffsets
// (latest, READ_UNCOMMITTED) per broker per round, for the partitions no
// fetch answered lately: paused topics, FAILED partitions waiting for
// their retry, and every partition of a fetcher that backs off after a
// network error. The prober runs on its own (every
// highWatermarkProbeTick), apart from the fetch path and the metadata
// refresh, so a fetcher that cannot fetch does not freeze the lag.
//
// Each partition's high watermark carries the time it was learned. Once
// its age passes the mirror's staleness bound (staleAfter) the lag
// computed from it is only a lower bound: the source may have grown since
// it last answered. Reports say so rather than show a lag that looks
// better than what is known.
//
// Reachability: every request path to the source (the metadata refresh,
// each fetcher, each broker's probe) reports its outcome; a path whose
// last request failed at the network level (or whose Fetch failed as a
// whole) is failing, since the first failure of its current run. The
// mirror is unreachable while any path fails, since the earliest of
// those, with the latest error.

// highWatermarkProbeTick is how often the prober looks for partitions
// whose source high watermark is older than highWatermarkProbeAfter.
const highWatermarkProbeTick = 500 * time.Millisecond

// staleAfterMin is the least staleness bound, whatever the fetch wait.
const staleAfterMin = 2 * time.Second

// highWatermarkProbeAfter is the age at which the prober asks for a
// partition's source high watermark: past two fetch long polls (a fetch
// answer dates its high watermarks at the send time, so a healthy idle
// fetcher's partitions age up to two fetch.wait.max.ms between answers)
// and one tick, so that a healthy fetcher's partitions are not probed.
func (c MirrorConfig) highWatermarkProbeAfter() time.Duration {
	return 2*c.FetchWaitMax + highWatermarkProbeTick
}

// staleAfter is the staleness bound: a source high watermark older than
// this makes the lag a lower bound. Twice the probe age, so that one
// probe round may be late or fail before the lag is flagged, and at
// least staleAfterMin: 5 s with fetch.wait.max.ms=1000, 2 s at 100.
func (c MirrorConfig) staleAfter() time.Duration {
	return max(2*c.highWatermarkProbeAfter(), staleAfterMin)
}

// reconnectBackoff is how a fetcher, and the metadata refresh, wait after
// a failed request before the next: 100 ms doubling to 5 s, with the
// jitter of mirrorstate.RetryPolicy. It is not the FAILED retry policy
// (mirror.failed.retry.*, up to minutes): a network blip must not keep a
// mirror away from its source for long.
var reconnectBackoff = mirrorstate.RetryPolicy{InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second}

// reconnectAttemptsMax caps the attempt count given to
// reconnectBackoff.backoff: by then the delay is long at its maximum.
const reconnectAttemptsMax = 32

// processJitter is retry jitter from the process's random source.
type processJitter struct{}

func (processJitter) Float64() float64 { return rand.Float64() }

// sourceHealth is what the mirror knows of its source's reachability: the
// request paths whose last request failed (bounded: the metadata refresh,
// and a fetcher and a probe per source broker).
type sourceHealth struct {
	mu      sync.Mutex
	failing map[string]sourceFailure
}

type sourceFailure struct {
	since, last time.Time // the first failure of the current run, and the latest
	err         string    // the latest error, as clients may see it (publicSourceError)
}

// observe records a request's outcome on path: nil is an answer.
func (h *sourceHealth) observe(path string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		delete(h.failing, path)
		return
	}
	if h.failing == nil {
		h.failing = map[string]sourceFailure{}
	}
	now := time.Now()
	f, ok := h.failing[path]
	if !ok {
		f.since = now
	}
	f.last, f.err = now, path+": "+publicSourceError(err) // the detail is in the log of the path's owner
	h.failing[path] = f
}

// forget drops a path that no longer exists (a fetcher that stopped).
func (h *sourceHealth) forget(path string) { h.observe(path, nil) }

// status is the time since which a path has been failing, zero when none
// fails, and the latest error of the failing paths.
func (h *sourceHealth) status() (since time.Time, lastError string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var last time.Time
	for _, f := range h.failing {
		if since.IsZero() || f.since.Before(since) {
			since = f.since
		}
		if f.last.After(last) {
			last, lastError = f.last, f.err
		}
	}
	return since, lastError
}

func fetchPath(broker int32) string   { return "fetch from broker " + strconv.Itoa(int(broker)) }
func probePath(broker int32) string   { return "list offsets at broker " + strconv.Itoa(int(broker)) }
func metadataPath() string            { return "metadata" }
func brokerLabel(broker int32) string { return strconv.Itoa(int(broker)) }

// learnHighWatermark records the source high watermark of the partition
// as known at time at (the send time of the request that learned it).
func (mp *mirrorPartition) learnHighWatermark(hw int64, at time.Time) {
	mp.sourceHighWatermark.Store(hw) // before its time: a reader that sees the time sees this value
	mp.confirmHighWatermark(at)
}

// confirmHighWatermark records that the source high watermark is
// unchanged as of at (an incremental fetch answer that left the
// partition out: nothing changed for it).
func (mp *mirrorPartition) confirmHighWatermark(at time.Time) {
	mp.metrics.highWatermarkAt.Store(max(int64(at.Sub(mp.metrics.joined)), 1))
	mp.observeCaughtUp()
}

// highWatermarkAge is how old the source high watermark is at now, -1
// when none was learned.
func (mp *mirrorPartition) highWatermarkAge(now time.Time) time.Duration {
	at := mp.metrics.highWatermarkAt.Load()
	if at == 0 {
		return -1
	}
	return max(now.Sub(mp.metrics.joined)-time.Duration(at), 0)
}

// probeHighWatermarks runs the prober until ctx is done.
func (m *mirror) probeHighWatermarks(ctx context.Context) {
	runEvery(ctx, highWatermarkProbeTick, m.probeRound)
}

// runEvery calls round every interval until ctx is done.
func runEvery(ctx context.Context, interval time.Duration, round func(context.Context)) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		round(ctx)
	}
}

// probeRound asks each source leader, at once, for the high watermark of
// its partitions that no answer refreshed for highWatermarkProbeAfter.
func (m *mirror) probeRound(ctx context.Context) {
	now := time.Now()
	probeAfter := m.config.highWatermarkProbeAfter()
	byLeader := map[int32][]*mirrorPartition{} // bounded by the mirror's partitions
	m.mu.Lock()
	for _, mp := range m.partitions {
		leader := mp.sourceLeader.Load()
		if age := mp.highWatermarkAge(now); leader >= 0 && (age < 0 || age >= probeAfter) {
			byLeader[leader] = append(byLeader[leader], mp)
		}
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, m.config.RequestTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for leader, set := range byLeader {
		sort.Slice(set, func(i, j int) bool {
			return set[i].topic < set[j].topic || set[i].topic == set[j].topic && set[i].partition < set[j].partition
		})
		wg.Go(func() {
			answered, err := m.listHighWatermarks(ctx, leader, set)
			if ctx.Err() != nil {
				return
			}
			m.health.observe(probePath(leader), answered)
			if answered != nil {
				m.log.Debug("the source high watermark probe failed", "source_broker", leader, "error", answered)
			}
			if err != nil {
				m.log.Debug("cannot read the source high watermark", "source_broker", leader, "error", err)
			}
		})
	}
	wg.Wait()
}

// listHighWatermarks sends one ListOffsets (latest) to leader for set.
// requestErr is the request's failure (no answer); err joins the
// partitions' errors.
func (m *mirror) listHighWatermarks(ctx context.Context, leader int32, set []*mirrorPartition) (requestErr, err error) {
	sent := time.Now()
	kresp, requestErr := m.client.Broker(int(leader)).Request(ctx, listOffsetsRequest(set, -1))
	if requestErr != nil {
		return requestErr, nil
	}
	byPartition := map[string]map[int32]*mirrorPartition{}
	for _, mp := range set {
		if byPartition[mp.topic] == nil {
			byPartition[mp.topic] = map[int32]*mirrorPartition{}
		}
		byPartition[mp.topic][mp.partition] = mp
	}
	var errs []error
	for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			mp := byPartition[t.Topic][p.Partition]
			if mp == nil {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("%s-%d: %w", t.Topic, p.Partition, err))
				continue
			}
			if p.Offset >= 0 {
				mp.learnHighWatermark(p.Offset, sent)
			}
		}
	}
	return nil, errors.Join(errs...)
}
