package netio

// A Fetch that waits (MaxWaitMillis, MinBytes) is Kafka's DelayedFetch in
// its purgatory: it registers once with the Watchers of each partition it
// reads, an append (any change a Fetch answers) signals only the waiters
// of its partition, and a woken fetch reads again only the partitions
// that signalled. A wake-up so costs the same whatever the size of the
// fetch (or its session); reading every partition is done once per
// request and once more when the response goes.
//
// Watchers are one-shot, as Kafka's are completed and removed: a signal
// removes every registration of the partition, and a woken fetch
// registers again with the partitions it re-read. A fetch that ends
// leaves its registrations with partitions that did not change; a
// partition drops those of ended fetches before its list of watchers
// grows, so the list stays within twice the fetches waiting on it (Kafka
// purges completed operations the same way, every purge interval).

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Watchers are the fetches waiting on one partition, and the token of
// its current state. A Partition embeds one (its zero value is ready) and
// calls Notify at every change of anything a Fetch of it answers: its
// offsets (an append, a high watermark, last stable offset or log start
// move, a truncation), its leader epoch, or its deletion.
type Watchers struct {
	mu sync.Mutex
	// changed is closed by the next Notify; nil until Changed asks for
	// it, so an append nobody reads allocates nothing.
	changed chan struct{}
	waiting []fetchWatch
}

// fetchWatch is one registration: slot is the partition's index in the
// waiting fetch.
type fetchWatch struct {
	fetch *fetchWaiter
	slot  int
}

// Changed returns a channel closed at the next Notify: the token a fetch
// session keeps for a quiet partition, and that a fetch registers with.
func (w *Watchers) Changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return w.changed
}

// Notify signals every fetch waiting on the partition, and closes the
// channel Changed returned.
func (w *Watchers) Notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
	for i, watch := range w.waiting {
		watch.fetch.signal(watch.slot)
		w.waiting[i] = fetchWatch{}
	}
	w.waiting = w.waiting[:0]
}

// watch registers fetch to be signalled with slot at the next Notify, or
// now if the partition changed since since was its Changed channel.
func (w *Watchers) watch(fetch *fetchWaiter, slot int, since <-chan struct{}) {
	w.mu.Lock()
	if since == nil || w.changed == nil || since != (<-chan struct{})(w.changed) {
		w.mu.Unlock()
		fetch.signal(slot)
		return
	}
	if len(w.waiting) == cap(w.waiting) { // drop ended fetches before growing
		kept := w.waiting[:0]
		for _, watch := range w.waiting {
			if !watch.fetch.ended.Load() {
				kept = append(kept, watch)
			}
		}
		clear(w.waiting[len(kept):])
		w.waiting = kept
	}
	w.waiting = append(w.waiting, fetchWatch{fetch: fetch, slot: slot})
	w.mu.Unlock()
}

// watching is how many registrations the partition holds, ended fetches'
// included (for tests).
func (w *Watchers) watching() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waiting)
}

// fetchWaiter is one waiting fetch as its partitions see it: the slots
// (partition indexes) signalled and not yet taken, and a wake-up.
type fetchWaiter struct {
	mu       sync.Mutex
	signaled []int
	wake     chan struct{} // capacity 1: a signal since the last take
	ended    atomic.Bool   // the fetch is answered: its registrations are dropped
}

func newFetchWaiter() *fetchWaiter {
	return &fetchWaiter{wake: make(chan struct{}, 1)}
}

// signal marks slot changed and wakes the fetch; a signal after end is
// dropped.
func (w *fetchWaiter) signal(slot int) {
	w.mu.Lock()
	if w.ended.Load() {
		w.mu.Unlock()
		return
	}
	w.signaled = append(w.signaled, slot)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default: // already woken
	}
}

// take returns the slots signalled since the last take, in into.
func (w *fetchWaiter) take(into []int) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	into = append(into[:0], w.signaled...)
	w.signaled = w.signaled[:0]
	return into
}

// end drops the signals to come and lets the partitions drop the
// registrations.
func (w *fetchWaiter) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended.Store(true)
	w.signaled = nil
}

// watchAll registers w with every partition read (each with the Changed
// channel of its read), remembers what each read, and returns how many
// partitions it registered with.
func (f *fetchReply) watchAll(w *fetchWaiter) int {
	watched := 0
	for i := range f.partitions {
		p := &f.partitions[i]
		p.waitBytes = p.records.Length
		if p.watchers == nil {
			continue // no such partition: it answers an error, nothing to wait for
		}
		p.watchers.watch(w, i, p.changed)
		watched++
	}
	return watched
}

// waitForBytes waits until the partitions that signal w have changed
// enough for the response to go (bytes, what the last full read pass
// read, reaches minBytes, or a partition must answer an error or a
// diverging epoch), expired fires or ctx is done. Each wake-up re-reads
// only the partitions that signalled, and registers them again.
func (f *fetchReply) waitForBytes(ctx context.Context, w *fetchWaiter, expired <-chan time.Time, isolation Isolation, maxBytes int32, bytes, minBytes int64) error {
	stats := &f.server.sessions.stats
	var slots []int
	for {
		stats.waits.Add(1)
		stats.waiting.Add(1)
		select {
		case <-w.wake:
		case <-expired:
			stats.waiting.Add(-1)
			return nil
		case <-ctx.Done():
			stats.waiting.Add(-1)
			return fmt.Errorf("netio: fetch: %w", ctx.Err())
		}
		stats.waiting.Add(-1)
		slots = w.take(slots)
		respondNow := false
		for _, slot := range slots {
			p := &f.partitions[slot]
			read, now := f.readChanged(p, isolation, maxBytes)
			bytes += read - p.waitBytes
			p.waitBytes = read
			respondNow = respondNow || now
		}
		if respondNow || bytes >= minBytes {
			return nil
		}
		for _, slot := range slots {
			if p := &f.partitions[slot]; p.watchers != nil {
				p.watchers.watch(w, slot, p.changed)
			}
		}
	}
}

// readChanged reads a partition that signalled a change, to count its
// bytes, and releases what it read. It returns the bytes and whether the
// partition must be answered now (an error or a diverging epoch).
func (f *fetchReply) readChanged(p *fetchPartition, isolation Isolation, maxBytes int32) (int64, bool) {
	p.quiet = false // it changed since the session last read it
	f.readPartition(p, isolation, min(maxBytes, max(p.partitionMaxBytes, 0)), true)
	read := p.records.Length
	releaseRange(f.server.log, p.records)
	p.records = FileRange{}
	return read, p.errorCode != 0 || p.divergingEpoch.set()
}
