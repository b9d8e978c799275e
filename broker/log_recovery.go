package broker

import (
	"log/slog"
	"maps"
	"sync"

	"github.com/mirrord/mirrord/logstore"
)

// RecoveryTruncations is what log recovery cut from one partition since
// the node opened (mirrord_log_recovery_truncations_total and
// mirrord_log_recovery_truncated_bytes_total): the cuts, and their bytes,
// each kept under the data directory's truncated folder.
type RecoveryTruncations struct {
	Truncations int64
	Bytes       int64
}

// logRecovery logs and counts the cuts log recovery makes at open
// (logstore.Config.RecoveryTruncated). Its map is bounded by the
// partitions on disk.
type logRecovery struct {
	log  *slog.Logger
	next func(logstore.Truncation) // the caller's own, if it set one

	mu     sync.Mutex
	counts map[logstore.TopicPartition]RecoveryTruncations
}

func newLogRecovery(log *slog.Logger, next func(logstore.Truncation)) *logRecovery {
	return &logRecovery{log: log, next: next, counts: map[logstore.TopicPartition]RecoveryTruncations{}}
}

// truncated is the logstore.Config.RecoveryTruncated of the node's logs.
func (r *logRecovery) truncated(t logstore.Truncation) {
	t.Warn(r.log)
	r.mu.Lock()
	c := r.counts[t.Partition]
	c.Truncations++
	c.Bytes += t.Bytes
	r.counts[t.Partition] = c
	r.mu.Unlock()
	if r.next != nil {
		r.next(t)
	}
}

// RecoveryTruncations returns, per partition, what log recovery cut from
// it since the node opened (partitions it cut nothing from are absent).
func (n *Node) RecoveryTruncations() map[logstore.TopicPartition]RecoveryTruncations {
	if n.recovery == nil {
		return nil
	}
	n.recovery.mu.Lock()
	defer n.recovery.mu.Unlock()
	return maps.Clone(n.recovery.counts)
}
