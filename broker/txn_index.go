package broker

import (
	"slices"
	"sort"
	"sync"

	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
)

// abortedTxn is one aborted transaction of a partition: its producer, its
// first offset, and the offset of its ABORT marker (Kafka's AbortedTxn,
// without the last stable offset Kafka also stores).
type abortedTxn struct {
	producerID  int64
	firstOffset rb.Offset
	lastOffset  rb.Offset
}

// abortedIndex is a partition's aborted-transaction index, in memory
// (Kafka keeps one .txnindex file per segment). read_committed fetches ask
// it which aborted transactions overlap the range they return, so that
// consumers drop those batches.
//
// Entries are added as markers are written, so they are sorted by
// lastOffset. It is rebuilt from the log at open, loses the entries below
// the log start when that moves, and is rebuilt after a truncation.
// Memory: 24 bytes per aborted transaction in the retained log.
//
// Invariants: entries sorted by lastOffset, strictly increasing;
// firstOffset <= lastOffset; spanMax >= lastOffset - firstOffset of every
// entry.
type abortedIndex struct {
	mu      sync.RWMutex // adds happen under the partition lock; reads do not take it
	entries []abortedTxn
	spanMax rb.Offset
}

func (x *abortedIndex) reset() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.entries, x.spanMax = nil, 0
}

func (x *abortedIndex) add(e abortedTxn) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e.firstOffset > e.lastOffset {
		panic("broker: aborted transaction ends before it starts")
	}
	if n := len(x.entries); n > 0 && x.entries[n-1].lastOffset >= e.lastOffset {
		panic("broker: aborted transaction index out of order")
	}
	x.entries = append(x.entries, e)
	x.spanMax = max(x.spanMax, e.lastOffset-e.firstOffset)
}

// overlapping appends to dst the transactions that overlap [from, to):
// lastOffset >= from and firstOffset < to. Since an entry spans at most
// spanMax offsets, only entries whose marker lies in [from, to+spanMax)
// are looked at.
func (x *abortedIndex) overlapping(from, to rb.Offset, dst []netio.AbortedTransaction) []netio.AbortedTransaction {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].lastOffset >= from })
	for ; i < len(x.entries) && x.entries[i].lastOffset < to+x.spanMax; i++ {
		if e := x.entries[i]; e.firstOffset < to {
			dst = append(dst, netio.AbortedTransaction{ProducerID: e.producerID, FirstOffset: e.firstOffset})
		}
	}
	return dst
}

// dropBelow forgets the transactions whose marker is below logStart: no
// read can reach them.
func (x *abortedIndex) dropBelow(logStart rb.Offset) {
	x.mu.Lock()
	defer x.mu.Unlock()
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].lastOffset >= logStart })
	x.entries = slices.Delete(x.entries, 0, i)
}

// replace sets the entries (sorted by lastOffset, as add keeps them).
func (x *abortedIndex) replace(entries []abortedTxn) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.entries, x.spanMax = entries, 0
	for i, e := range entries {
		if e.firstOffset > e.lastOffset || i > 0 && entries[i-1].lastOffset >= e.lastOffset {
			panic("broker: aborted transaction index out of order")
		}
		x.spanMax = max(x.spanMax, e.lastOffset-e.firstOffset)
	}
}

// len is the number of entries.
func (x *abortedIndex) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.entries)
}

// snapshot returns a copy of the entries, for tests and comparisons.
func (x *abortedIndex) snapshot() []abortedTxn {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return slices.Clone(x.entries)
}
