package console

import (
	"time"

	"github.com/mirrord/mirrord/engine"
)

// partitionKey names a partition of a mirror.
type partitionKey struct {
	topic     string
	partition int32
}

// history is the console's memory: per mirror, a fixed-size ring of
// samples and the partitions' byte counters at the last sample. Its size
// is bounded: samplesMax samples per mirror, one counter per partition of
// the mirror's last report, and the mirrors of the node's last report (a
// mirror gone from it is dropped at the next sample). The Console's lock
// guards it.
type history struct {
	interval   time.Duration
	samplesMax int
	mirrors    map[string]*mirrorHistory
}

// mirrorHistory is one mirror's ring and counters.
type mirrorHistory struct {
	ring  []Sample // len samplesMax, allocated once
	next  int      // where the next sample goes
	count int      // samples held, <= len(ring)
	at    time.Time
	bytes map[partitionKey]int64   // each partition's Bytes at the last sample
	rates map[partitionKey]float64 // bytes/s between the last two samples
}

func newHistory(interval time.Duration, samplesMax int) *history {
	return &history{interval: interval, samplesMax: samplesMax, mirrors: map[string]*mirrorHistory{}}
}

// add takes one sample of every mirror reported at now and drops the
// mirrors not reported.
func (h *history) add(reports []engine.MirrorReport, now time.Time) {
	seen := make(map[string]bool, len(reports))
	for _, r := range reports {
		seen[r.Name] = true
		mh := h.mirrors[r.Name]
		if mh == nil {
			mh = &mirrorHistory{ring: make([]Sample, h.samplesMax)}
			h.mirrors[r.Name] = mh
		}
		mh.add(r, now)
	}
	for name := range h.mirrors {
		if !seen[name] {
			delete(h.mirrors, name)
		}
	}
}

// add computes each partition's bytes/s since the last sample (none for a
// partition new since then, or whose counter went back: it rejoined the
// mirror) and pushes the mirror's sample, overwriting the oldest when the
// ring is full.
func (mh *mirrorHistory) add(r engine.MirrorReport, now time.Time) {
	elapsed := now.Sub(mh.at).Seconds()
	bytes := make(map[partitionKey]int64, len(r.Partitions))
	rates := make(map[partitionKey]float64, len(r.Partitions))
	sample := Sample{At: now, BytesPerSecond: -1}
	for _, p := range r.Partitions {
		key := partitionKey{p.Topic, p.Partition}
		bytes[key] = p.Bytes
		if before, ok := mh.bytes[key]; ok && elapsed > 0 && p.Bytes >= before {
			rates[key] = float64(p.Bytes-before) / elapsed
			sample.BytesPerSecond = max(sample.BytesPerSecond, 0) + rates[key]
		}
	}
	if mh.count > 0 && elapsed > 0 && sample.BytesPerSecond < 0 {
		sample.BytesPerSecond = 0 // a mirror without partitions moves nothing
	}
	sample.LagRecords, _, sample.LagSeconds = lagTotals(r.Partitions)
	mh.at, mh.bytes, mh.rates = now, bytes, rates
	mh.ring[mh.next] = sample
	mh.next = (mh.next + 1) % len(mh.ring)
	mh.count = min(mh.count+1, len(mh.ring))
}

// samples is the mirror's ring, oldest first (empty for a mirror not
// sampled yet).
func (h *history) samples(mirror string) []Sample {
	mh := h.mirrors[mirror]
	if mh == nil {
		return []Sample{}
	}
	out := make([]Sample, 0, mh.count)
	start := (mh.next - mh.count + len(mh.ring)) % len(mh.ring)
	for i := range mh.count {
		out = append(out, mh.ring[(start+i)%len(mh.ring)])
	}
	return out
}

// partitionRates is the mirror's partitions' bytes/s between the last two
// samples (nil before two).
func (h *history) partitionRates(mirror string) map[partitionKey]float64 {
	if mh := h.mirrors[mirror]; mh != nil {
		return mh.rates
	}
	return nil
}
