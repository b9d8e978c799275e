package logstore

import (
	"math"
	"sort"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
)

// abortedRange is one aborted transaction as the cleaner needs it: its
// producer, its first offset and the offset of its ABORT marker (Kafka's
// AbortedTxn from the transaction index).
type abortedRange struct {
	producerID  int64
	first, last rb.Offset
}

// lastRecord is what the cleaner keeps of an active producer (Kafka's
// LastRecord): the last offset of its last data batch (-1 when its state
// holds only markers) and its epoch. The batch holding lastDataOffset is
// kept, emptied if need be, so that the producer's sequence survives; with
// no data batch, its markers of that epoch are kept instead (fencing).
type lastRecord struct {
	lastDataOffset rb.Offset
	epoch          int16
	timestamp      int64 // max timestamp of its last batch, for expiry
}

// txnScan is what scanTransactions finds: the aborted transactions, by
// first offset, and the producers still active.
type txnScan struct {
	aborted   []abortedRange
	producers map[int64]lastRecord
}

// scanTransactions walks every batch header of the log (control batches
// whole) and rebuilds what Kafka keeps in its transaction indexes and
// producer state: aborted transactions and active producers. Producers
// whose last batch is older than expireBefore (milliseconds; Kafka's
// producer.id.expiration.ms) and that have no open transaction are not
// active. A MIRROR_PID_RESET batch drops the producers before it, as the
// broker's producer state does.
func (l *Log) scanTransactions(expireBefore int64) (txnScan, error) {
	producers := map[int64]lastRecord{}
	open := map[int64]rb.Offset{}
	var aborted []abortedRange
	err := l.WalkBatches(0, func(b rb.Batch) bool {
		pid := b.ProducerID()
		if pid < 0 {
			if b.Control() && records.IsMirrorPIDReset(b) {
				clear(producers)
				clear(open)
			}
			return true
		}
		e, ok := producers[pid]
		if !ok || e.epoch != b.ProducerEpoch() {
			e = lastRecord{lastDataOffset: -1, epoch: b.ProducerEpoch()} // a new epoch clears the batches kept
		}
		e.timestamp = b.MaxTimestamp()
		if !b.Control() {
			e.lastDataOffset = b.LastOffset()
			producers[pid] = e
			if _, isOpen := open[pid]; b.Transactional() && !isOpen {
				open[pid] = b.BaseOffset()
			}
			return true
		}
		kind, err := records.ControlType(b)
		if err != nil {
			return true // not a transaction marker (or one already emptied)
		}
		producers[pid] = e
		first, isOpen := open[pid]
		if !isOpen {
			first = b.BaseOffset()
		}
		delete(open, pid)
		if kind == records.ControlAbort {
			aborted = append(aborted, abortedRange{producerID: pid, first: first, last: b.LastOffset()})
		}
		return true
	})
	if err != nil {
		return txnScan{}, err
	}
	for pid, e := range producers {
		if _, isOpen := open[pid]; !isOpen && e.timestamp < expireBefore {
			delete(producers, pid)
		}
	}
	sort.SliceStable(aborted, func(i, j int) bool { return aborted[i].first < aborted[j].first })
	return txnScan{aborted: aborted, producers: producers}, nil
}

// cleanTxns is Kafka's CleanedTransactionMetadata: while batches are read
// in offset order it knows which transactional batches belong to an
// aborted transaction (dropped) and which markers may go: an ABORT marker
// once no batch of its transaction is left, a COMMIT marker once the
// cleaning met no batch of its transaction.
type cleanTxns struct {
	pending          []abortedRange // by first offset, not yet reached
	ongoingAborted   map[int64]*abortedState
	ongoingCommitted map[int64]bool
}

type abortedState struct {
	txn      abortedRange
	observed bool // a batch of the transaction was read (and dropped)
}

// newCleanTxns tracks the aborted transactions that end at or after from.
func newCleanTxns(aborted []abortedRange, from rb.Offset) *cleanTxns {
	t := &cleanTxns{ongoingAborted: map[int64]*abortedState{}, ongoingCommitted: map[int64]bool{}}
	for _, a := range aborted {
		if a.last >= from {
			t.pending = append(t.pending, a)
		}
	}
	return t
}

func (t *cleanTxns) reach(offset rb.Offset) {
	for len(t.pending) > 0 && t.pending[0].first <= offset {
		a := t.pending[0]
		t.pending = t.pending[1:]
		if _, ok := t.ongoingAborted[a.producerID]; !ok {
			t.ongoingAborted[a.producerID] = &abortedState{txn: a}
		}
	}
}

// onBatch reads a data batch; it reports whether it belongs to an aborted
// transaction.
func (t *cleanTxns) onBatch(b rb.Batch) bool {
	t.reach(b.LastOffset())
	if !b.Transactional() {
		return false
	}
	if a, ok := t.ongoingAborted[b.ProducerID()]; ok {
		a.observed = true
		return true
	}
	t.ongoingCommitted[b.ProducerID()] = true
	return false
}

// onControl reads a control batch; it reports whether the marker may be
// discarded (once its delete horizon passed).
func (t *cleanTxns) onControl(b rb.Batch) bool {
	t.reach(b.LastOffset())
	if b.RecordCount() == 0 {
		return true // emptied by an earlier cleaning
	}
	kind, err := records.ControlType(b)
	if err != nil {
		return false // another control type: kept
	}
	pid := b.ProducerID()
	if kind == records.ControlAbort {
		a, ok := t.ongoingAborted[pid]
		delete(t.ongoingAborted, pid)
		return !(ok && a.observed) // kept until its batches are gone
	}
	committed := t.ongoingCommitted[pid]
	delete(t.ongoingCommitted, pid)
	return !committed
}

// noExpiry is an expireBefore that expires no producer.
const noExpiry = math.MinInt64
