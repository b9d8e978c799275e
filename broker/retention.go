package broker

// Retention by time and size, as Kafka's log manager runs it: every
// log.retention.check.interval.ms (Config.RetentionCheckInterval, Kafka's
// default 5 minutes) each writable partition of a topic whose
// cleanup.policy holds delete drops its oldest whole segments past
// retention.ms or retention.bytes (logstore.Log.ApplyRetention). Mirror
// partitions (read-only) are skipped: their log start follows the
// source's. Internal topics are the node's own and keep what they hold.

import (
	"errors"
	"time"

	"github.com/mirrord/mirrord/logstore"
)

// DefaultRetentionCheckInterval is log.retention.check.interval.ms's
// default.
const DefaultRetentionCheckInterval = 5 * time.Minute

// retention owns the goroutine that applies retention; stop ends it and
// waits.
type retention struct {
	quit chan struct{}
	done chan struct{}
}

func startRetention(n *Node) *retention {
	interval := n.cfg.RetentionCheckInterval
	if interval <= 0 {
		interval = DefaultRetentionCheckInterval
	}
	r := &retention{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-r.quit:
				return
			case <-ticker.C:
				n.applyRetention()
			}
		}
	}()
	return r
}

func (r *retention) stop() {
	if r == nil {
		return
	}
	close(r.quit)
	<-r.done
}

// applyRetention runs one retention pass and returns the segments it
// deleted. A partition's failure is logged; the others go on.
func (n *Node) applyRetention() int {
	n.mu.RLock()
	var partitions []*Partition
	for _, t := range n.topics {
		if !t.internal && t.settings.log.Cleanup.Delete() {
			partitions = append(partitions, online(t.partitions)...)
		}
	}
	n.mu.RUnlock()
	deleted := 0
	for _, p := range partitions {
		count, err := p.applyRetention()
		if err != nil && !errors.Is(err, logstore.ErrClosed) { // deleted meanwhile
			n.log.Error("retention failed", "topic", p.tp.Topic, "partition", p.tp.Partition, "error", err)
		}
		deleted += count
	}
	return deleted
}

// applyRetention deletes the partition's segments past its retention; a
// read-only (mirror) partition follows its source's log start instead.
func (p *Partition) applyRetention() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isReadOnly() {
		return 0, nil
	}
	deleted, err := p.log.ApplyRetention()
	if deleted > 0 {
		p.logStartAdvanced()
		p.notify()
	}
	return deleted, err
}
