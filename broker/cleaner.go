package broker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/mirrord/mirrord/logstore"
	rb "github.com/mirrord/mirrord/recordbatch"
)

// CleanerConfig is the log cleaner's node settings, with Kafka's broker
// config names; a zero field takes Kafka's default (DefaultCleanerConfig).
type CleanerConfig struct {
	// Disabled is log.cleaner.enable=false.
	Disabled bool
	// Threads is log.cleaner.threads (1).
	Threads int
	// DedupeBufferBytes is log.cleaner.dedupe.buffer.size (128 MiB), the
	// memory of the offset maps, shared out among the threads.
	DedupeBufferBytes int64
	// LoadFactor is log.cleaner.io.buffer.load.factor (0.9).
	LoadFactor float64
	// IOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second: the
	// cleaners' reads and writes together (0: unlimited, Kafka's
	// Double.MAX_VALUE).
	IOMaxBytesPerSecond float64
	// Backoff is log.cleaner.backoff.ms (15 s): how long a cleaner that
	// found no log to clean waits before it looks again.
	Backoff time.Duration
}

// DefaultCleanerConfig is Kafka 4.4's defaults.
var DefaultCleanerConfig = CleanerConfig{
	Threads:           1,
	DedupeBufferBytes: 128 << 20,
	LoadFactor:        0.9,
	Backoff:           15 * time.Second,
}

func (c CleanerConfig) withDefaults() CleanerConfig {
	d := DefaultCleanerConfig
	if c.Threads <= 0 {
		c.Threads = d.Threads
	}
	if c.DedupeBufferBytes <= 0 {
		c.DedupeBufferBytes = d.DedupeBufferBytes
	}
	if c.LoadFactor <= 0 || c.LoadFactor > 1 {
		c.LoadFactor = d.LoadFactor
	}
	if c.Backoff <= 0 {
		c.Backoff = d.Backoff
	}
	return c
}

// cleaner is Kafka's LogCleaner and LogCleanerManager for this node: each
// of Threads goroutines takes the dirtiest compacted partition nobody is
// cleaning (dirty ratio above min.cleanable.dirty.ratio, or dirty records
// past max.compaction.lag.ms), cleans it (logstore.Log.Clean: sealed
// segments below the last stable offset, swapped in under the log's lock,
// so produce, fetch and mirror appends go on), and when none is eligible
// waits Backoff. Mirror partitions are cleaned like any other, as a Kafka
// follower cleans its replica: the read-only mark refuses clients only.
type cleaner struct {
	node     *Node
	cfg      CleanerConfig
	throttle *throttler
	stop     chan struct{}
	done     sync.WaitGroup

	mu         sync.Mutex
	inProgress map[*Partition]bool

	// Cleanings counts the cleanings done; BytesRead and BytesWritten
	// their bytes (metrics and tests).
	cleanings, bytesRead, bytesWritten atomic.Int64
}

func startCleaner(n *Node, cfg CleanerConfig) *cleaner {
	cfg = cfg.withDefaults()
	c := &cleaner{node: n, cfg: cfg, stop: make(chan struct{}), inProgress: map[*Partition]bool{}}
	if cfg.IOMaxBytesPerSecond > 0 {
		c.throttle = newThrottler(cfg.IOMaxBytesPerSecond, c.stop)
	}
	if cfg.Disabled {
		return c
	}
	for range cfg.Threads {
		c.done.Add(1)
		go c.run()
	}
	return c
}

func (c *cleaner) close() {
	close(c.stop)
	c.done.Wait()
}

// run is one cleaner thread. Its offset map is made at its first
// cleaning: a node without compacted topics never holds one.
func (c *cleaner) run() {
	defer c.done.Done()
	var m *logstore.OffsetMap
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-timer.C:
		}
		for c.cleanDirtiest(&m) {
			select {
			case <-c.stop:
				return
			default:
			}
		}
		timer.Reset(c.cfg.Backoff)
	}
}

// cleanDirtiest cleans the dirtiest eligible partition; it reports
// whether it found one.
func (c *cleaner) cleanDirtiest(m **logstore.OffsetMap) bool {
	p := c.grabDirtiest()
	if p == nil {
		return false
	}
	if *m == nil {
		*m = logstore.NewOffsetMap(c.cfg.DedupeBufferBytes/int64(c.cfg.Threads), c.cfg.LoadFactor)
	}
	defer func() {
		c.mu.Lock()
		delete(c.inProgress, p)
		c.mu.Unlock()
	}()
	c.clean(p, *m)
	return true
}

// grabDirtiest picks the partition to clean and marks it in progress.
func (c *cleaner) grabDirtiest() *Partition {
	var best *Partition
	bestRatio := -1.0
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range partitionsOf(c.node) {
		cfg := p.log.Config()
		if !cfg.Cleanup.Compact() || c.inProgress[p] {
			continue
		}
		cleanable := p.log.Cleanable(p.Offsets().LastStableOffset)
		if cleanable.Eligible(cfg.MinCleanableDirtyRatio) && cleanable.Ratio() > bestRatio {
			best, bestRatio = p, cleanable.Ratio()
		}
	}
	if best != nil {
		c.inProgress[best] = true
	}
	return best
}

// clean cleans p once, then rebuilds its aborted-transaction index below
// the cleaned end (the cleaning may have dropped markers; Kafka rewrites
// the cleaned segments' transaction indexes).
func (c *cleaner) clean(p *Partition, m *logstore.OffsetMap) {
	now := time.Now
	if c.node.cfg.Log.Now != nil {
		now = c.node.cfg.Log.Now
	}
	expireBefore := now().Add(-c.node.cfg.Transactions.withDefaults().ProducerIDExpiration).UnixMilli()
	opts := logstore.CleanOptions{Map: m, LastStableOffset: p.Offsets().LastStableOffset, ProducerExpireBefore: expireBefore}
	if c.throttle != nil {
		opts.Throttle = c.throttle.wait
	}
	stats, err := p.log.Clean(opts)
	c.bytesRead.Add(stats.BytesRead)
	c.bytesWritten.Add(stats.BytesWritten)
	if err != nil {
		c.node.log.Error("log cleaning failed", "topic", p.tp.Topic, "partition", p.tp.Partition, "error", err)
		return
	}
	c.cleanings.Add(1)
	if stats.Groups == 0 {
		return
	}
	c.node.log.Info("cleaned log", "topic", p.tp.Topic, "partition", p.tp.Partition, "stats", stats.String())
	if err := p.cleaned(stats.End, expireBefore); err != nil {
		c.node.log.Error("rebuilding the aborted transactions after a cleaning failed", "topic", p.tp.Topic, "partition", p.tp.Partition, "error", err)
	}
}

// cleaned takes the aborted transactions below end from a replay of the
// cleaned log; those at or past end (the cleaning did not touch them, and
// markers written meanwhile) stay. p.mu is held only to merge.
func (p *Partition) cleaned(end rb.Offset, expireBefore int64) error {
	next, _, err := p.replayProducerState(expireBefore)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var merged []abortedTxn
	for _, e := range next.aborted.snapshot() {
		if e.lastOffset < end {
			merged = append(merged, e)
		}
	}
	for _, e := range p.producers.aborted.snapshot() {
		if e.lastOffset >= end {
			merged = append(merged, e)
		}
	}
	p.producers.aborted.replace(merged)
	return nil
}

// CleanerStats are the node's cleaning counters: cleanings done, bytes
// read and written.
func (n *Node) CleanerStats() (cleanings, bytesRead, bytesWritten int64) {
	if n.cleaner == nil {
		return 0, 0, 0
	}
	return n.cleaner.cleanings.Load(), n.cleaner.bytesRead.Load(), n.cleaner.bytesWritten.Load()
}

// throttler is Kafka's Throttler: the cleaners' I/O, measured over
// periods of throttleCheckInterval, sleeps whenever it ran ahead of the
// rate. The sleep is the throttle itself (it waits for no condition); it
// ends early when the node stops.
type throttler struct {
	rate float64 // bytes per second
	stop <-chan struct{}

	mu          sync.Mutex
	periodStart time.Time
	observed    float64
}

const throttleCheckInterval = 300 * time.Millisecond

func newThrottler(rate float64, stop <-chan struct{}) *throttler {
	return &throttler{rate: rate, stop: stop, periodStart: time.Now()}
}

func (t *throttler) wait(bytes int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.observed += float64(bytes)
	elapsed := time.Since(t.periodStart)
	if elapsed < throttleCheckInterval {
		return
	}
	if ahead := time.Duration(t.observed/t.rate*float64(time.Second)) - elapsed; ahead > 0 {
		timer := time.NewTimer(ahead)
		select {
		case <-timer.C:
		case <-t.stop:
			timer.Stop()
		}
	}
	t.periodStart, t.observed = time.Now(), 0
}
