package e2e

// The mirror's link to its source through a fault proxy of our own
// (mirrordtest/faultproxy): connections cut between frames and in the
// middle of one, frames delayed, one direction stalled with the socket
// open. The source advertises the proxy's address, so the mirror's
// metadata-driven reconnects go through it too; producers write to the
// source on a second listener the proxy does not see. The mirror must end
// byte for byte equal to the source, never report a lag smaller than the
// truth the proxy saw the source tell it, never fail a partition for a
// transient fault, and catch up once the faults end.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/mirrordtest/faultproxy"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	faultTestDeadline   = 4 * time.Minute
	faultRunShort       = 15 * time.Second // faults injected in `make test`
	faultRunSoak        = 3 * time.Minute  // with MIRRORD_SOAK=1
	faultCatchUpWait    = 60 * time.Second // after the last fault, loaded
	faultAnswersMax     = 1 << 20          // answers kept per partition
	faultViolationsMax  = 10               // violations reported in full
	faultRequestTimeout = 2500             // the mirror's request.timeout.ms: some stalls outlast it
)

// faultTopics are the source topics (the mirror producer writes every
// codec, idempotent and transactional, to all of them).
var faultTopics = map[string]int32{"fault-a": 3, "fault-b": 2}

// faultPlan: a fault every 15 to 60 frames (a few a second while the
// mirror fetches), of every kind; stalls from half a second to beyond
// the mirror's request timeout.
var faultPlan = faultproxy.Plan{EveryMin: 15, EveryMax: 60, Weights: [4]int{3, 3, 3, 2},
	DelayMax: 300 * time.Millisecond, StallMin: 500 * time.Millisecond, StallMax: 3500 * time.Millisecond}

// TestFaultProxyMirror: see the file comment. Seed: MIRRORD_FAULT_SEED
// (else the clock); length: MIRRORD_SOAK=1 runs faultRunSoak.
func TestFaultProxyMirror(t *testing.T) {
	t.Parallel()
	seed := newSeed(t)
	if s := os.Getenv("MIRRORD_FAULT_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("MIRRORD_FAULT_SEED: %v", err)
		}
		t.Logf("seed %d from MIRRORD_FAULT_SEED", seed)
	}
	run := faultRunShort
	if os.Getenv("MIRRORD_SOAK") == "1" {
		run = faultRunSoak
	}
	ctx, cancel := context.WithTimeout(context.Background(), faultTestDeadline+run)
	defer cancel()
	started := time.Now()

	truth := newSourceTruth()
	proxy, err := faultproxy.Listen(faultproxy.Config{Seed: seed, Plan: faultPlan, Observe: truth.observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	internal := freeAddress(t) // the producers' listener, beside the proxied one
	listeners := writeProperties(t, fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:0,INTERNAL://%s\n"+
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT\n"+
		"advertised.listeners=PLAINTEXT://%s\n", internal, proxy.Addr()))
	source := startServer(t, "--config", listeners)
	proxy.SetTarget(source.addr)
	createTopics(ctx, t, internal, faultTopics)
	tps := topicPartitions(faultTopics)
	truth.setTopicIDs(topicIDs(ctx, t, internal, faultTopics))
	producer := startMirrorProducer(ctx, t, internal, seed, tps)
	defer producer.halt()

	mirror := startServer(t)
	config := writeProperties(t, fmt.Sprintf("bootstrap.servers=%s\nmirror.metadata.refresh.interval.ms=500\nfetch.wait.max.ms=100\n"+
		"request.timeout.ms=%d\nmirror.failed.retry.initial.backoff.ms=20\nmirror.failed.retry.max.backoff.ms=500\n", proxy.Addr(), faultRequestTimeout))
	runMirrorsOK(ctx, t, mirror.addr, "--create", "--mirror", "m", "--mirror-config", config)
	runMirrorsOK(ctx, t, mirror.addr, "--start", "--mirror", "m", "--topics", "fault-.*")
	waitMirrorAdvances(ctx, t, mirror, tps, nil)
	t.Logf("mirroring after %v; faults on for %v", time.Since(started).Round(time.Millisecond), run)

	proxy.SetFaults(true)
	faultsFrom := time.Now()
	samples := sampleLag(ctx, t, mirror.addr, truth, tps, faultsFrom.Add(run))
	proxy.SetFaults(false)
	// A delay or stall under way outlasts SetFaults(false): the last
	// fault ends when it does.
	if reason := pollUntil(ctx, faultproxy.ConnsMax*faultPlan.StallMax, func(context.Context) string {
		if held := proxy.Stats().Holding; held > 0 {
			return fmt.Sprintf("%d delays or stalls under way", held)
		}
		return ""
	}); reason != "" {
		t.Fatalf("faults off: %s", reason)
	}
	producer.finish(t)
	producerStopped := time.Now()
	sourceEnds := waitMirrorCaughtUp(ctx, t, internal, mirror.addr, tps)
	caughtUp := time.Now()
	stats := proxy.Stats()
	lastFault := stats.LastFaultEnded
	if lastFault.Before(faultsFrom) {
		t.Errorf("no fault ended in %v: the proxy injected nothing (faults %v)", run, stats.Faults)
	}
	t.Logf("faults %v (stalls and delays %v in all) in %v over %d connections; frames forwarded: %d requests, %d responses; bytes: %d to the source, %d to the mirror",
		stats.Faults, stats.StalledFor.Round(time.Millisecond), run, stats.Conns, stats.Frames[faultproxy.ToTarget], stats.Frames[faultproxy.ToClient],
		stats.Bytes[faultproxy.ToTarget], stats.Bytes[faultproxy.ToClient])
	t.Logf("lag: %s", samples)
	t.Logf("caught up %v after the last fault ended, %v after the producer stopped (source: %d committed, %d aborted, %d other records in %d rounds; ends %v)",
		caughtUp.Sub(lastFault).Round(time.Millisecond), caughtUp.Sub(producerStopped).Round(time.Millisecond),
		producer.committed.count(), producer.aborted.count(), producer.plain.count(), producer.rounds, sourceEnds)

	want, got := readAll(ctx, t, internal, tps), readAll(ctx, t, mirror.addr, tps)
	checkMirrorWorkload(t, want)
	compareMirrored(t, want, got)
	bytes := 0
	for _, p := range want {
		bytes += len(p.batches)
	}
	t.Logf("compared %d bytes of batches in %d partitions; done after %v", bytes, len(tps), time.Since(started).Round(time.Millisecond))
	// The report catches up within a fetch round of the log (its source
	// high watermark fresh again, the lag exact and 0).
	if reason := pollUntil(ctx, faultCatchUpWait, func(ctx context.Context) string {
		described, _ := describeMirror(ctx, t, mirror.addr, "m")
		for _, p := range described.Partitions {
			if p.Lag != 0 {
				return fmt.Sprintf("%+v", p)
			}
		}
		return ""
	}); reason != "" {
		t.Errorf("the mirror does not report itself caught up within %v: %s", faultCatchUpWait, reason)
	}
	t.Logf("reported caught up %v after the last fault ended", time.Since(lastFault).Round(time.Millisecond))
	checkDescribedCaughtUp(ctx, t, mirror.addr, proxy.Addr(), sourceEnds)
}

// faultDescribed is the part of a --describe --json row the lag check
// reads.
type faultDescribed struct {
	Topic               string `json:"topic"`
	Partition           int32  `json:"partition"`
	State               string `json:"state"`
	Error               string `json:"error"`
	SourceHighWatermark int64  `json:"sourceHighWatermark"`
	AgeMillis           int64  `json:"sourceHighWatermarkAgeMillis"`
	LogEndOffset        int64  `json:"logEndOffset"`
	Lag                 int64  `json:"lag"`
	LagAtLeast          int64  `json:"lagAtLeast"`
}

// lagSamples sums up the samples of sampleLag.
type lagSamples struct {
	samples, exact, lowerBound int
	maxLag                     int64
	checked                    int // rows with a proven source high watermark to check against
	violations                 int
}

func (s lagSamples) String() string {
	return fmt.Sprintf("%d samples; rows: %d exact, %d lower bounds, %d checked against the proxy's truth, max lag %d, %d violations",
		s.samples, s.exact, s.lowerBound, s.checked, s.maxLag, s.violations)
}

// sampleLag describes the mirror until `until` and checks each partition's
// reported lag against what the proxy saw the source answer. The sampling
// order makes each check sound:
//
//  1. the mirror's log end offsets, L0 (ListOffsets to the mirror);
//  2. sent := now, then --describe --json (the report);
//  3. the mirror's log end offsets again, L1; the proxy's last answer
//     time per partition.
//
// The source high watermark the mirror must know: L0 says the mirror has
// appended offset L0-1, from an answer containing it; every answer
// containing an offset below the lowest first offset of those answers was
// applied whole before (a partition's answers are applied in order), so
// the mirror has learned at least the smallest high watermark among the
// answers holding that offset (provenHighWatermark). The report comes
// after: its source high watermark must be at least that, and its lag
// (exact or "at least") at least that minus L1 (the mirror's log end
// offset only grows, so the report's is at most L1).
//
// Freshness: a row whose lag is exact claims the source told its high
// watermark SourceHighWatermarkAge ago. The mirror cannot have learned one
// after the proxy last forwarded an answer for the partition (ListOffsets,
// or any Fetch answer of its session: an incremental one leaves out the
// partitions that did not change), read after the report (later answers only weaken the
// check), nor after its own request of it: so the age must be at least
// sent minus that time.
func sampleLag(ctx context.Context, t *testing.T, mirrorAddr string, truth *sourceTruth, tps []topicPartition, until time.Time) lagSamples {
	t.Helper()
	var s lagSamples
	for round := 0; round < 100000 && time.Now().Before(until); round++ {
		l0, err := endOffsets(ctx, mirrorAddr, tps)
		if err != nil {
			continue // the mirror node answers; a timeout under load is retried next round
		}
		proven := map[topicPartition]int64{}
		for _, tp := range tps {
			proven[tp] = truth.provenHighWatermark(tp, l0[tp])
		}
		sent := time.Now()
		out := runMirrorsOK(ctx, t, mirrorAddr, "--describe", "--mirror", "m", "--json")
		var report struct {
			Partitions []faultDescribed `json:"partitions"`
		}
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatalf("--describe --json: %v\n%s", err, out)
		}
		l1, err := endOffsets(ctx, mirrorAddr, tps)
		if err != nil {
			continue
		}
		s.samples++
		for _, row := range report.Partitions {
			tp := topicPartition{row.Topic, row.Partition}
			answered := truth.lastAnswered(tp)
			var problems []string
			if row.State == "FAILED" {
				problems = append(problems, "FAILED: "+row.Error)
			}
			if row.Lag >= 0 {
				s.exact++
			} else if row.LagAtLeast >= 0 {
				s.lowerBound++
			}
			s.maxLag = max(s.maxLag, row.LagAtLeast)
			if p := proven[tp]; p >= 0 && row.SourceHighWatermark >= 0 {
				s.checked++
				if row.SourceHighWatermark < p {
					problems = append(problems, fmt.Sprintf("source high watermark %d, the source told it %d before (mirror log end %d)", row.SourceHighWatermark, p, l0[tp]))
				}
				if truthLag := p - l1[tp]; row.LagAtLeast < truthLag {
					problems = append(problems, fmt.Sprintf("lag at least %d, true lag at least %d (%d - %d)", row.LagAtLeast, truthLag, p, l1[tp]))
				}
			}
			if row.Lag >= 0 && !answered.IsZero() {
				if since := sent.Sub(answered).Milliseconds(); row.AgeMillis < since-1 {
					problems = append(problems, fmt.Sprintf("exact lag with a high watermark %d ms old, but the source last answered %d ms before the report", row.AgeMillis, since))
				}
			}
			if len(problems) > 0 {
				s.violations++
				if s.violations <= faultViolationsMax {
					t.Errorf("sample %d, %s: %v; row %+v", s.samples, tp, problems, row)
				}
			}
		}
	}
	return s
}

// sourceTruth is what the proxy saw the source answer the mirror: per
// partition, each Fetch answer with whole batches (their offsets and the
// high watermark), and when the source last answered for it.
type sourceTruth struct {
	mu       sync.Mutex
	names    map[[16]byte]string
	answers  map[topicPartition][]sourceAnswer // forwarding order; at most faultAnswersMax each
	answered map[topicPartition]time.Time      // ListOffsets and Fetch answers naming the partition
	// fetchAnswered is the last Fetch answer without a top-level error.
	fetchAnswered time.Time
	overflow      bool
}

// sourceAnswer is one Fetch answer for a partition: whole batches from
// start to end (exclusive) and the high watermark.
type sourceAnswer struct{ start, end, highWatermark int64 }

func newSourceTruth() *sourceTruth {
	return &sourceTruth{answers: map[topicPartition][]sourceAnswer{}, answered: map[topicPartition]time.Time{}}
}

func (s *sourceTruth) setTopicIDs(ids map[string]kadm.TopicID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names = map[[16]byte]string{}
	for name, id := range ids {
		s.names[id] = name
	}
}

// observe is the proxy's Observe: it records Fetch and ListOffsets
// answers.
func (s *sourceTruth) observe(e faultproxy.Exchange) {
	if e.APIKey != 1 && e.APIKey != 2 {
		return
	}
	resp, err := e.Decode()
	if err != nil {
		return // not a partition's answer we can read: it counts for nothing
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r := resp.(type) {
	case *kmsg.FetchResponse:
		if r.ErrorCode == 0 {
			// An incremental fetch (KIP-227) leaves out the partitions
			// that did not change: an answer confirms the high
			// watermark of every partition of its session. The mirror
			// fetches them all from the one source node in one session.
			s.fetchAnswered = e.Forwarded
		}
		for _, rt := range r.Topics {
			name := rt.Topic
			if name == "" {
				name = s.names[rt.TopicID]
			}
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 || rp.HighWatermark < 0 {
					continue
				}
				tp := topicPartition{name, rp.Partition}
				s.answered[tp] = e.Forwarded
				if start, end, ok := wholeBatches(rp.RecordBatches); ok {
					if len(s.answers[tp]) >= faultAnswersMax {
						s.overflow = true
						continue
					}
					s.answers[tp] = append(s.answers[tp], sourceAnswer{start, end, rp.HighWatermark})
				}
			}
		}
	case *kmsg.ListOffsetsResponse:
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode == 0 {
					s.answered[topicPartition{rt.Topic, rp.Partition}] = e.Forwarded
				}
			}
		}
	}
}

// wholeBatches returns the first offset of the first whole batch and the
// offset after the last; false without a whole batch.
func wholeBatches(data []byte) (start, end int64, ok bool) {
	for len(data) >= batchHeaderBytes {
		length := int(binary.BigEndian.Uint32(data[batchLengthAt:]))
		if 12+length > len(data) {
			break // a batch cut at the fetch size: the mirror does not append it
		}
		base := int64(binary.BigEndian.Uint64(data))
		if !ok {
			start, ok = base, true
		}
		end = base + int64(binary.BigEndian.Uint32(data[batchLastDeltaAt:])) + 1
		data = data[12+length:]
	}
	return start, end, ok
}

// provenHighWatermark is the source high watermark the mirror has learned
// once its log ends at logEnd (see sampleLag); -1 when nothing proves one.
func (s *sourceTruth) provenHighWatermark(tp topicPartition, logEnd int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overflow {
		return -1
	}
	answers := s.answers[tp]
	first := int64(-1) // the lowest start among answers holding logEnd-1
	for _, a := range answers {
		if a.start <= logEnd-1 && logEnd-1 < a.end && (first < 0 || a.start < first) {
			first = a.start
		}
	}
	if first <= 0 {
		return -1
	}
	proven := int64(-1)
	for _, a := range answers {
		if a.start <= first-1 && first-1 < a.end && (proven < 0 || a.highWatermark < proven) {
			proven = a.highWatermark
		}
	}
	return proven
}

// lastAnswered is when the proxy last forwarded an answer of the source
// for tp, or a Fetch answer of its session; zero if never.
func (s *sourceTruth) lastAnswered(tp topicPartition) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if at := s.answered[tp]; at.After(s.fetchAnswered) {
		return at
	}
	return s.fetchAnswered
}
