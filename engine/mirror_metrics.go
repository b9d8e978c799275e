package engine

import (
	"sync/atomic"
	"time"

	"github.com/mirrord/mirrord/logstore"
)

// mirrorMetrics counts what every mirror of the node did.
type mirrorMetrics struct {
	bytes, batches, fetches atomic.Int64
	fetchNanos              atomic.Int64
}

func (m *mirrorMetrics) observeFetch(d time.Duration) {
	m.fetches.Add(1)
	m.fetchNanos.Add(int64(d))
}

func (m *mirrorMetrics) observeAppend(_ *mirrorPartition, info logstore.AppendInfo) {
	m.bytes.Add(int64(info.Bytes))
	m.batches.Add(int64(info.Batches))
}

// MirroredBytes is the number of record bytes every mirror of the node
// has appended.
func (n *Node) MirroredBytes() int64 { return n.metrics.bytes.Load() }
