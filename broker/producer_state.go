package broker

import (
	"fmt"
	"math"
	"sync/atomic"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Producer state of one partition, as Kafka's ProducerStateManager keeps
// it: per producer ID the epoch, the sequence and offset ranges of its
// last retainedBatches batches (for duplicate detection and the sequence
// check), and the first offset of its open transaction. It is derived
// from the log (rebuilt at open by walking the batch headers, see
// partition.loadProducerState) and changed only under partition.mu; this
// file does no I/O.
//
// Invariants:
//
//	ongoing[id] == producers[id].txnFirstOffset for every producer with an
//	  open transaction, and no other ID is in ongoing
//	firstUnstable == min(ongoing) or -1 when ongoing is empty
//	an entry's batches all carry the entry's epoch, oldest first

// retainedBatches is Kafka's NUM_BATCHES_TO_RETAIN: a producer has at most
// five requests in flight (max.in.flight.requests.per.connection), so a
// retry of any of them is found.
const retainedBatches = 5

const (
	noProducerEpoch int16 = -1
	noSequence      int32 = -1
)

// batchMetadata is one retained batch of a producer.
type batchMetadata struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset rb.Offset
	timestamp               int64 // the batch's max timestamp, which a retry of it answers as its append time
}

// producerEntry is one producer's state in one partition.
type producerEntry struct {
	epoch          int16
	batches        [retainedBatches]batchMetadata // ring: batches[head] is the oldest
	head, count    int
	txnFirstOffset rb.Offset // first offset of the open transaction; -1 when none
	lastTimestamp  int64     // max timestamp of the last batch or marker, for expiration
}

func newProducerEntry() producerEntry {
	return producerEntry{epoch: noProducerEpoch, txnFirstOffset: -1, lastTimestamp: -1}
}

func (e *producerEntry) last() (batchMetadata, bool) {
	if e.count == 0 {
		return batchMetadata{}, false
	}
	return e.batches[(e.head+e.count-1)%retainedBatches], true
}

func (e *producerEntry) lastSeq() int32 {
	if b, ok := e.last(); ok {
		return b.lastSeq
	}
	return noSequence
}

// setEpoch moves to epoch, forgetting the batches of the old one.
func (e *producerEntry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.epoch, e.head, e.count = epoch, 0, 0
	}
}

func (e *producerEntry) addBatch(epoch int16, m batchMetadata, timestamp int64) {
	e.setEpoch(epoch)
	if e.count == retainedBatches {
		e.head = (e.head + 1) % retainedBatches
		e.count--
	}
	e.batches[(e.head+e.count)%retainedBatches] = m
	e.count++
	e.lastTimestamp = timestamp
}

// duplicateOf returns the retained batch with b's epoch and sequence range.
func (e *producerEntry) duplicateOf(b batchInfo) (batchMetadata, bool) {
	if e.epoch != b.epoch {
		return batchMetadata{}, false
	}
	for i := range e.count {
		m := e.batches[(e.head+i)%retainedBatches]
		if m.firstSeq == b.firstSeq && m.lastSeq == b.lastSeq {
			return m, true
		}
	}
	return batchMetadata{}, false
}

// batchInfo is what producer state takes from one batch header.
type batchInfo struct {
	producerID              int64
	epoch                   int16
	firstSeq, lastSeq       int32
	firstOffset, lastOffset rb.Offset
	maxTimestamp            int64
	transactional           bool
}

func batchInfoOf(b rb.Batch) batchInfo {
	return batchInfo{
		producerID: b.ProducerID(), epoch: b.ProducerEpoch(),
		firstSeq: b.BaseSequence(), lastSeq: sequenceAdd(b.BaseSequence(), b.LastOffsetDelta()),
		firstOffset: b.BaseOffset(), lastOffset: b.LastOffset(),
		maxTimestamp: b.MaxTimestamp(), transactional: b.Transactional(),
	}
}

// sequenceAdd is Kafka's DefaultRecordBatch.incrementSequence: sequences
// wrap from MaxInt32 to 0.
func sequenceAdd(sequence, increment int32) int32 {
	if sequence > math.MaxInt32-increment {
		return increment - (math.MaxInt32 - sequence) - 1
	}
	return sequence + increment
}

// inSequence is Kafka's ProducerAppendInfo.inSequence.
func inSequence(lastSeq, nextSeq int32) bool {
	return int64(nextSeq) == int64(lastSeq)+1 || nextSeq == 0 && lastSeq == math.MaxInt32
}

// txnVerification records that a producer added this partition to its
// ongoing transaction (Kafka's verification guard, KIP-890): transactional
// batches are accepted only from that producer, epoch and transactional
// ID, and the transaction's marker removes it.
type txnVerification struct {
	epoch           int16
	transactionalID string
}

// producerStates is one partition's producer state (see the file comment).
type producerStates struct {
	// producers is bounded by the producers seen within the producer ID
	// expiration (expire drops idle ones without an open transaction).
	producers map[int64]*producerEntry
	// ongoing maps producers with an open transaction to its first
	// offset; bounded by producers.
	ongoing map[int64]rb.Offset
	// verified is bounded by the ongoing transactions that added this
	// partition: a marker removes the entry.
	verified map[int64]txnVerification
	aborted  abortedIndex
	// firstUnstable is min(ongoing), or -1: read without the partition
	// lock for the last stable offset.
	firstUnstable atomic.Int64
}

func newProducerStates() *producerStates {
	s := &producerStates{}
	s.reset()
	return s
}

// reset forgets everything, for a rebuild.
func (s *producerStates) reset() {
	s.producers = map[int64]*producerEntry{}
	s.ongoing = map[int64]rb.Offset{}
	s.verified = map[int64]txnVerification{}
	s.aborted.reset()
	s.firstUnstable.Store(-1)
}

// dropProducers forgets every producer (MIRROR_PID_RESET): their IDs,
// epochs and sequences came from the source. Open transactions were
// aborted before; the aborted index stays for read_committed readers.
func (s *producerStates) dropProducers() {
	s.producers = map[int64]*producerEntry{}
	s.ongoing = map[int64]rb.Offset{}
	s.verified = map[int64]txnVerification{}
	s.updateFirstUnstable()
}

func (s *producerStates) updateFirstUnstable() {
	first := rb.Offset(-1)
	for _, offset := range s.ongoing {
		if first < 0 || offset < first {
			first = offset
		}
	}
	s.firstUnstable.Store(int64(first))
}

// setEntry stores e for id and keeps ongoing in step; it reports whether
// the set of open transactions changed.
func (s *producerStates) setEntry(id int64, e producerEntry) bool {
	stored := s.producers[id]
	if stored == nil {
		stored = new(producerEntry)
		s.producers[id] = stored
	}
	*stored = e
	before, was := s.ongoing[id]
	switch {
	case e.txnFirstOffset >= 0 && (!was || before != e.txnFirstOffset):
		s.ongoing[id] = e.txnFirstOffset
		return true
	case e.txnFirstOffset < 0 && was:
		delete(s.ongoing, id)
		return true
	}
	return false
}

func (s *producerStates) entry(id int64) producerEntry {
	if e := s.producers[id]; e != nil {
		return *e
	}
	return newProducerEntry()
}

// producerAppend stages the producer-state changes of one client append:
// each batch is checked against the state as the earlier batches of the
// same append left it, and nothing changes until commit (after the log
// append succeeded). Kafka's ProducerAppendInfo.
type producerAppend struct {
	states *producerStates
	staged []stagedEntry // one per producer ID in the append; bounded by its batches
}

type stagedEntry struct {
	id        int64
	entry     producerEntry
	committed producerEntry // as it was before the append
}

func (a *producerAppend) stagedFor(id int64) *stagedEntry {
	for i := range a.staged {
		if a.staged[i].id == id {
			return &a.staged[i]
		}
	}
	e := a.states.entry(id)
	a.staged = append(a.staged, stagedEntry{id: id, entry: e, committed: e})
	return &a.staged[len(a.staged)-1]
}

// duplicate reports whether b repeats one of the producer's retained
// batches (Kafka's findDuplicateBatch, against the state before this
// append), with the offsets it was written at.
func (s *producerStates) duplicate(b batchInfo) (batchMetadata, bool) {
	e := s.producers[b.producerID]
	if e == nil {
		return batchMetadata{}, false
	}
	return e.duplicateOf(b)
}

// addClientBatch checks a client's data batch, whose offsets are those
// the append will assign, and stages it (Kafka's checkProducerEpoch,
// checkSequence and appendDataBatch). Errors are kerr codes.
func (a *producerAppend) addClientBatch(b batchInfo) error {
	staged := a.stagedFor(b.producerID)
	e := &staged.entry
	switch {
	case b.epoch < e.epoch:
		return fmt.Errorf("%w: producer %d epoch %d is below the current %d", kerr.InvalidProducerEpoch, b.producerID, b.epoch, e.epoch)
	case b.epoch != e.epoch:
		if b.firstSeq != 0 && e.epoch != noProducerEpoch {
			return fmt.Errorf("%w: producer %d starts epoch %d at sequence %d, want 0", kerr.OutOfOrderSequenceNumber, b.producerID, b.epoch, b.firstSeq)
		}
	case staged.committed.epoch != noProducerEpoch && !inSequence(e.lastSeq(), b.firstSeq):
		// An unknown producer (its state expired, or its records were
		// deleted) may start at any sequence, as in Kafka since KIP-360.
		return fmt.Errorf("%w: producer %d epoch %d sent sequence %d after %d", kerr.OutOfOrderSequenceNumber, b.producerID, b.epoch, b.firstSeq, e.lastSeq())
	}
	return e.applyData(b)
}

// applyData records a data batch; it fails only for a non-transactional
// batch inside an open transaction.
func (e *producerEntry) applyData(b batchInfo) error {
	e.addBatch(b.epoch, batchMetadata{firstSeq: b.firstSeq, lastSeq: b.lastSeq, firstOffset: b.firstOffset, lastOffset: b.lastOffset, timestamp: b.maxTimestamp}, b.maxTimestamp)
	switch {
	case e.txnFirstOffset >= 0 && !b.transactional:
		return fmt.Errorf("%w: producer %d wrote a non-transactional batch inside its open transaction", kerr.InvalidTxnState, b.producerID)
	case e.txnFirstOffset < 0 && b.transactional:
		e.txnFirstOffset = b.firstOffset
	}
	return nil
}

// commit applies the staged entries after the log append succeeded.
func (a *producerAppend) commit() {
	changed := false
	for i := range a.staged {
		changed = a.states.setEntry(a.staged[i].id, a.staged[i].entry) || changed
	}
	if changed {
		a.states.updateFirstUnstable()
	}
}

// applyReplicated records a data batch read back from the log (at open,
// or appended by a mirror) without the sequence checks, as Kafka's
// replication origin. The batch is recorded even when it is inconsistent
// (a non-transactional batch inside an open transaction): the error says
// so, for the caller to report.
func (s *producerStates) applyReplicated(b batchInfo) error {
	e := s.entry(b.producerID)
	err := e.applyData(b)
	if s.setEntry(b.producerID, e) {
		s.updateFirstUnstable()
	}
	return err
}

// completedTxn is a transaction a marker ended.
type completedTxn struct {
	producerID              int64
	firstOffset, lastOffset rb.Offset // lastOffset is the marker's offset
	aborted                 bool
}

// applyMarker records a transaction marker at offset (Kafka's
// appendEndTxnMarker): the producer moves to the marker's epoch and its
// open transaction, if any, ends. It returns that transaction. (The
// coordinator epoch in the marker is not kept: this node is the only
// coordinator, at epoch 0.)
func (s *producerStates) applyMarker(producerID int64, epoch int16, aborted bool, offset rb.Offset, timestamp int64) (completedTxn, bool) {
	e := s.entry(producerID)
	done := completedTxn{producerID: producerID, firstOffset: e.txnFirstOffset, lastOffset: offset, aborted: aborted}
	e.setEpoch(epoch)
	e.txnFirstOffset, e.lastTimestamp = -1, timestamp
	if s.setEntry(producerID, e) {
		s.updateFirstUnstable()
	}
	delete(s.verified, producerID)
	if done.firstOffset < 0 {
		return completedTxn{}, false
	}
	if aborted {
		s.aborted.add(abortedTxn{producerID: producerID, firstOffset: done.firstOffset, lastOffset: offset})
	}
	return done, true
}

// needsMarker reports whether a marker for producerID at epoch must be
// written: the producer has an open transaction here, or this partition
// has not seen the epoch yet (the marker fences older ones). A marker
// already written, found again when a commit or abort is retried or
// completed after a restart, is skipped.
func (s *producerStates) needsMarker(producerID int64, epoch int16) bool {
	e := s.producers[producerID]
	return e == nil || e.txnFirstOffset >= 0 || e.epoch < epoch
}

// expire drops producers last seen at or before cutoff (a timestamp in
// milliseconds) that have no open transaction, as Kafka does after
// producer.id.expiration.ms. It returns how many it dropped.
func (s *producerStates) expire(cutoff int64) int {
	n := 0
	for id, e := range s.producers {
		if e.txnFirstOffset < 0 && e.lastTimestamp <= cutoff {
			if _, pending := s.verified[id]; pending {
				continue
			}
			delete(s.producers, id)
			n++
		}
	}
	return n
}

// verify checks a transactional batch against the verification its
// producer got from the coordinator at its epoch (the coordinator checked
// the transactional ID then, as Kafka's verification guard does not
// again). The errors are those Kafka's log append answers.
func (s *producerStates) verify(b batchInfo) error {
	v, ok := s.verified[b.producerID]
	switch {
	case ok && v.epoch == b.epoch:
		return nil
	case ok && b.epoch < v.epoch, !ok && b.epoch < s.entry(b.producerID).epoch:
		return fmt.Errorf("%w: producer %d epoch %d is fenced", kerr.InvalidProducerEpoch, b.producerID, b.epoch)
	}
	return fmt.Errorf("%w: producer %d epoch %d has not added the partition to a transaction", kerr.InvalidTxnState, b.producerID, b.epoch)
}

// inTransaction reports whether producerID has an open transaction here
// at epoch: Kafka's hasOngoingTransaction, which spares a write the
// coordinator's verification.
func (s *producerStates) inTransaction(producerID int64, epoch int16) bool {
	e := s.producers[producerID]
	return e != nil && e.txnFirstOffset >= 0 && e.epoch == epoch
}

// adopt takes the state rebuilt in next, keeping the verifications (they
// come from the coordinator, not the log). Readers of the last stable
// offset and the aborted index see the old state or the new, never an
// empty one.
func (s *producerStates) adopt(next *producerStates) {
	s.producers, s.ongoing = next.producers, next.ongoing
	s.aborted.replace(next.aborted.snapshot())
	s.firstUnstable.Store(next.firstUnstable.Load())
}
