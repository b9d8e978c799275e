package broker

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/mirrord/mirrord/epoch"

	"github.com/mirrord/mirrord/logstore"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
)

// The partition API the replication engine writes a mirror through: a
// read-only mark, appends of the source's bytes as the source wrote them,
// the truncations and start moves that follow the source, and the steps
// of a failover (raise the leader epoch, abort the source's open
// transactions, drop its producer state). The node knows nothing of
// mirrors beyond "this partition is read-only".

// SetReadOnly makes the partition read-only: Produce, DeleteRecords, and
// the topic's CreatePartitions and DeleteTopics answer refuse(action),
// the error of whoever writes it. nil makes it writable again.
func (p *Partition) SetReadOnly(refuse func(action string) error) {
	// Under mu: a retention pass checks the mark under it, so one that saw
	// the partition writable has finished before the mark is set (and
	// before the configs a mirror then sets take effect).
	p.mu.Lock()
	defer p.mu.Unlock()
	if refuse == nil {
		p.readOnly.Store(nil)
		return
	}
	p.readOnly.Store(&refuse)
}

// isReadOnly reports whether the partition refuses client writes.
func (p *Partition) isReadOnly() bool { return p.readOnly.Load() != nil }

// refuseIfReadOnly returns the refusal of action while the partition is
// read-only, else nil.
func (p *Partition) refuseIfReadOnly(action string) error {
	if refuse := p.readOnly.Load(); refuse != nil {
		return (*refuse)(action)
	}
	return nil
}

// Log is the partition's log, for inspection by tests and tools; every
// write goes through the partition's methods (the replication engine
// uses none but those).
func (p *Partition) Log() *logstore.Log { return p.log }

// Flush makes everything appended to the partition durable.
func (p *Partition) Flush() error {
	if err := p.log.Flush(); err != nil {
		return fmt.Errorf("broker: %s: flush: %w", p.tp, err)
	}
	return nil
}

// Topic is the partition's topic and index.
func (p *Partition) Topic() logstore.TopicPartition { return p.tp }

// The log, read; -1 while the partition is offline (offline.go).
func (p *Partition) LogStartOffset() rb.Offset { return offlineOr(p, -1, p.logStartOffset) }
func (p *Partition) LogEndOffset() rb.Offset   { return offlineOr(p, -1, p.logEndOffset) }

func (p *Partition) logStartOffset() rb.Offset { return p.log.LogStartOffset() }
func (p *Partition) logEndOffset() rb.Offset   { return p.log.LogEndOffset() }

// LatestEpoch is the latest epoch of the log's epoch cache (rb.NoEpoch
// for none, or offline).
func (p *Partition) LatestEpoch() rb.Epoch {
	return offlineOr(p, rb.NoEpoch, func() rb.Epoch { return p.log.LatestEpoch() })
}

// HighWatermark is the partition's high watermark.
func (p *Partition) HighWatermark() rb.Offset {
	return offlineOr(p, -1, func() rb.Offset { return p.log.HighWatermark() })
}

// CommittedLeaderEpoch is the leader epoch a consumer positioned at
// offset commits: that of the record before it (rb.NoEpoch at the log's
// first offset, or when the log holds no epoch for it).
func (p *Partition) CommittedLeaderEpoch(offset rb.Offset) rb.Epoch {
	if p.Offline() != nil || offset <= p.log.LogStartOffset() {
		return rb.NoEpoch
	}
	if e, ok := p.log.EpochForOffset(offset - 1); ok {
		return e
	}
	return rb.NoEpoch
}

// Epochs is the log's epoch cache.
func (p *Partition) Epochs() []epoch.Entry { return p.log.Epochs() }

// TruncationPointForLastMirrorEpoch is where the log agrees with a log
// whose last mirror epoch is (epoch, offset) (failback's alignment).
func (p *Partition) TruncationPointForLastMirrorEpoch(e rb.Epoch, offset rb.Offset) rb.Offset {
	return p.log.TruncationPointForLastMirrorEpoch(e, offset)
}

// ReadBatches appends to dst the whole batches from offset below to, at
// most maxBytes (at least one batch).
func (p *Partition) ReadBatches(dst []byte, offset rb.Offset, maxBytes int64, to rb.Offset) ([]byte, error) {
	return p.log.ReadBytes(dst, offset, maxBytes, to, true)
}

// AppendMirrored appends batches exactly as the source sent them (the log
// checks framing, CRC and increasing offsets first and writes nothing of
// a bad set), then brings the producer state, open transactions and
// aborted index along from the batches, as when the log is loaded. The
// high watermark follows the log end: the source served only what was
// below its own high watermark; on a cluster's leader it follows the ISR
// (replica.go). (The local leader epoch is kept ahead of the source's
// epochs by the partition's mirror state machine: EPOCH_FENCING.) On a
// cluster only the leader appends the source's batches (a follower
// copies its leader's: AppendReplica): NOT_LEADER_OR_FOLLOWER otherwise.
func (p *Partition) AppendMirrored(batches []byte) (logstore.AppendInfo, error) {
	if err := p.refuseUnlessLeader(); err != nil {
		return logstore.AppendInfo{}, fmt.Errorf("broker: %s: mirror append: %w", p.tp, err)
	}
	return p.appendAsSent(batches, "mirror append", p.advanceHighWatermark)
}

// appendAsSent is the append of batches as another log wrote them (a
// mirror's source, a follower's leader): AppendMirrored's body, with
// moveHighWatermark (called with p.mu held) after the append.
func (p *Partition) appendAsSent(batches []byte, what string, moveHighWatermark func()) (logstore.AppendInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start, err := p.startAtFirstBatch(batches)
	if err != nil {
		return logstore.AppendInfo{}, fmt.Errorf("broker: %s: %s: %w", p.tp, what, err)
	}
	if err := p.space().admit(len(batches)); err != nil {
		return logstore.AppendInfo{}, fmt.Errorf("broker: %s: %s: %w", p.tp, what, err)
	}
	info, err := p.log.Append(batches)
	p.space().wrote(len(batches), err)
	if err != nil {
		return info, fmt.Errorf("broker: %s: %s: %w", p.tp, what, err)
	}
	maxProducerID := int64(-1)
	for it := rb.NewIter(batches, false); it.Next(); {
		b := it.Batch()
		p.applySourceBatch(b)
		maxProducerID = max(maxProducerID, b.ProducerID())
	}
	if maxProducerID >= 0 && p.node != nil && p.node.txns != nil {
		// The source's producers may write here after a failover: IDs
		// this node hands out stay above theirs.
		if err := p.node.txns.ids.reserveAbove(maxProducerID); err != nil {
			return info, fmt.Errorf("broker: %s: %s: %w", p.tp, what, err)
		}
	}
	if start >= 0 {
		if err := p.log.AdvanceLogStart(start); err != nil {
			return info, fmt.Errorf("broker: %s: %s: back to log start %d: %w", p.tp, what, start, err)
		}
		p.logStartAdvanced()
	}
	moveHighWatermark()
	p.notify()
	return info, nil
}

// startAtFirstBatch lets an empty log take a first batch that holds its
// log start offset but begins below it: the source's log start is inside
// that batch (DeleteRecords), and this log was restarted there. Like
// Kafka's follower (UnexpectedAppendOffsetException in
// Partition.appendRecordsToFollowerOrFutureReplica) it restarts the log at
// the batch's base offset and returns the log start to restore once the
// batch is in, or -1 when nothing was done; p.mu is held.
func (p *Partition) startAtFirstBatch(batches []byte) (rb.Offset, error) {
	first, err := rb.ParseHeader(batches)
	start, end := p.log.LogStartOffset(), p.log.LogEndOffset()
	if err != nil || end != start || first.BaseOffset() >= end || first.LastOffset() < end {
		return -1, nil // the append checks the batches
	}
	if err := p.log.TruncateFullyAndStartAt(first.BaseOffset()); err != nil {
		return -1, err
	}
	return start, nil
}

// applySourceBatch records what a source batch means for producers and
// transactions; p.mu is held.
func (p *Partition) applySourceBatch(b rb.Batch) {
	if b.ProducerID() < 0 {
		if b.Control() && records.IsMirrorPIDReset(b) {
			p.producers.dropProducers() // the source failed over here
		}
		return
	}
	if !b.Control() {
		p.producers.applyReplicated(batchInfoOf(b)) // inconsistencies are the source's; its bytes are kept
		return
	}
	if kind, err := records.ControlType(b); err == nil {
		p.producers.applyMarker(b.ProducerID(), b.ProducerEpoch(), kind == records.ControlAbort, b.BaseOffset(), b.MaxTimestamp())
	}
}

// Divergence returns the offset to truncate to for a DivergingEpoch
// answer from the source, and whether the search is done.
func (p *Partition) Divergence(leaderEpoch rb.Epoch, leaderEndOffset rb.Offset) (rb.Offset, bool) {
	return p.log.Divergence(leaderEpoch, leaderEndOffset)
}

// FollowSourceStart moves the log start up to the source's, as the
// source's retention or DeleteRecords moved it.
func (p *Partition) FollowSourceStart(sourceStart rb.Offset) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sourceStart <= p.log.LogStartOffset() || sourceStart > p.log.LogEndOffset() {
		return nil
	}
	if err := p.log.AdvanceLogStart(sourceStart); err != nil {
		return err
	}
	p.logStartAdvanced()
	p.notify()
	return nil
}

// RestartAt empties the log and starts it at offset: the source's log
// start moved past everything this partition holds.
func (p *Partition) RestartAt(offset rb.Offset) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	p.producers.reset()
	p.notify()
	return nil
}

// RaiseLeaderEpoch raises the leader epoch this node claims to at least
// epoch (a mirror keeps it ahead of the source's; a failover bumps it).
func (p *Partition) RaiseLeaderEpoch(e rb.Epoch) {
	epoch := int32(e)
	for {
		current := p.localEpoch.Load()
		if current >= epoch {
			return
		}
		if p.localEpoch.CompareAndSwap(current, epoch) {
			p.wake()
			return
		}
	}
}

// AbortOpenTransactions writes an ABORT marker, at the current leader
// epoch, for every transaction open in the partition (after a stop, those
// of the source's producers, which will never end them here), and flushes.
// First the transaction coordinator fences the copied transactional IDs
// of mirror whose producers these are (txn_mirror.go), so that none of
// them commits here what the markers abort.
func (p *Partition) AbortOpenTransactions(mirror string) error {
	type open struct {
		producerID int64
		epoch      int16
	}
	p.mu.Lock()
	var opens []open // bounded by the partition's producers
	epochs := map[int64]int16{}
	for id := range p.producers.ongoing {
		epoch := p.producers.entry(id).epoch
		opens, epochs[id] = append(opens, open{id, epoch}), epoch
	}
	p.mu.Unlock()
	if p.node != nil && p.node.txns != nil {
		if err := p.node.txns.fenceMirrored(mirror, epochs); err != nil {
			return fmt.Errorf("broker: %s: %w", p.tp, err)
		}
	}
	sort.Slice(opens, func(i, j int) bool { return opens[i].producerID < opens[j].producerID })
	for _, o := range opens {
		if _, err := p.writeMarker(o.producerID, o.epoch, false, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("broker: %s: abort the source's open transaction of producer %d: %w", p.tp, o.producerID, err)
		}
	}
	if err := p.log.Flush(); err != nil {
		return fmt.Errorf("broker: %s: flush the abort markers: %w", p.tp, err)
	}
	return nil
}

// WriteMirrorPIDReset appends the MIRROR_PID_RESET control batch at
// the current leader epoch (unless the log ends with one already), drops
// the producer state, and flushes.
func (p *Partition) WriteMirrorPIDReset() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.endsWithPIDReset() {
		batch := rb.Append(nil, rb.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
			Control: true, Records: []rb.Record{{Key: controlKey(records.ControlMirrorPIDReset), Value: []byte{0, 0, 0, 0, 0, 0}}}})
		if _, err := p.log.AppendAssign(batch, p.LeaderEpoch()); err != nil {
			return fmt.Errorf("broker: %s: write MIRROR_PID_RESET: %w", p.tp, err)
		}
		p.advanceHighWatermark()
	}
	p.producers.dropProducers()
	p.notify()
	if err := p.log.Flush(); err != nil {
		return fmt.Errorf("broker: %s: flush MIRROR_PID_RESET: %w", p.tp, err)
	}
	return nil
}

func controlKey(kind int16) []byte { return []byte{0, 0, byte(uint16(kind) >> 8), byte(kind)} }

// endsWithPIDReset: the log's last batch is a MIRROR_PID_RESET (p.mu held).
func (p *Partition) endsWithPIDReset() bool {
	end := p.log.LogEndOffset()
	if end == 0 || end <= p.log.LogStartOffset() {
		return false
	}
	data, err := p.log.BatchBytes(nil, end-1)
	if err != nil {
		return false
	}
	b, err := rb.Parse(data)
	return err == nil && b.LastOffset() == end-1 && records.IsMirrorPIDReset(b)
}

// TruncateTo truncates the log to offset (failback's alignment, a
// source's unclean leader election), rebuilds the producer state, and
// flushes; a point below the log start empties the log there.
func (p *Partition) TruncateTo(offset rb.Offset) error {
	if offset < p.log.LogStartOffset() {
		return p.RestartAt(offset)
	}
	_, err := p.truncateTo(offset, 0)
	return errors.Join(err, p.log.Flush())
}
