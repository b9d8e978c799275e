package engine

import (
	"fmt"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrReadOnlyTopic is the Kafka error a call that would change a mirror
// topic gets: Produce, DeleteRecords, CreatePartitions, DeleteTopics.
// KIP-1279 plans a READ_ONLY_TOPIC code, but upstream has not assigned it,
// and a private code is "unknown server error" to every client (the Java
// console producer retries it). POLICY_VIOLATION is a code Java, franz-go
// and librdkafka already know and never retry; the message (Produce v8+,
// the admin answers) says why. When the KIP's code is assigned, it goes
// here and nowhere else.
var ErrReadOnlyTopic = kerr.PolicyViolation

// errMirrorTopic refuses action on topic, which mirror writes.
func errMirrorTopic(topic, mirror, action string) error {
	return netio.Errorf(ErrReadOnlyTopic, "topic %s is a mirror topic of mirror %s: it is read-only until `mirrord mirrors --stop --mirror %s --topics %s` (%s refused)",
		topic, mirror, mirror, topic, action)
}

// The mirror side of a partition: appends of the source's bytes, as the
// source wrote them, and the truncations and start moves that follow the
// source.

// setMirroredBy makes the partition read-only, written by mirror, or
// writable again ("").
func (p *partition) setMirroredBy(mirror string) {
	if mirror == "" {
		p.mirroredBy.Store(nil)
		return
	}
	p.mirroredBy.Store(&mirror)
}

// mirrored reports whether a mirror writes the partition.
func (p *partition) mirrored() bool { return p.mirroredBy.Load() != nil }

// refuseIfMirrored returns errMirrorTopic for action while a mirror writes
// the partition, else nil.
func (p *partition) refuseIfMirrored(action string) error {
	if mirror := p.mirroredBy.Load(); mirror != nil {
		return errMirrorTopic(p.tp.Topic, *mirror, action)
	}
	return nil
}

// appendMirrored appends batches exactly as the source sent them (the log
// checks framing, CRC and increasing offsets first and writes nothing of
// a bad set), then brings the producer state, open transactions and
// aborted index along from the batches, as when the log is loaded. The
// high watermark follows the log end: the source served only what was
// below its own high watermark. (The local leader epoch is kept ahead of
// the source's epochs by the partition's mirror state machine:
// EPOCH_FENCING.)
func (p *partition) appendMirrored(batches []byte) (logstore.AppendInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start, err := p.startAtFirstBatch(batches)
	if err != nil {
		return logstore.AppendInfo{}, fmt.Errorf("engine: %s: mirror append: %w", p.tp, err)
	}
	info, err := p.log.Append(batches)
	if err != nil {
		return info, fmt.Errorf("engine: %s: mirror append: %w", p.tp, err)
	}
	for it := rb.NewIter(batches, false); it.Next(); {
		p.applySourceBatch(it.Batch())
	}
	if start >= 0 {
		if err := p.log.AdvanceLogStart(start); err != nil {
			return info, fmt.Errorf("engine: %s: mirror append: back to log start %d: %w", p.tp, start, err)
		}
		p.logStartAdvanced()
	}
	p.log.SetHighWatermark(p.log.LogEndOffset())
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
func (p *partition) startAtFirstBatch(batches []byte) (rb.Offset, error) {
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
func (p *partition) applySourceBatch(b rb.Batch) {
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

// divergence returns the offset to truncate to for a DivergingEpoch
// answer from the source, and whether the search is done.
func (p *partition) divergence(leaderEpoch int32, leaderEndOffset int64) (rb.Offset, bool) {
	return p.log.Divergence(rb.Epoch(leaderEpoch), rb.Offset(leaderEndOffset))
}

// followSourceStart moves the log start up to the source's, as the
// source's retention or DeleteRecords moved it.
func (p *partition) followSourceStart(sourceStart int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rb.Offset(sourceStart) <= p.log.LogStartOffset() || rb.Offset(sourceStart) > p.log.LogEndOffset() {
		return nil
	}
	if err := p.log.AdvanceLogStart(rb.Offset(sourceStart)); err != nil {
		return err
	}
	p.logStartAdvanced()
	p.notify()
	return nil
}

// restartAt empties the log and starts it at offset: the source's log
// start moved past everything this partition holds.
func (p *partition) restartAt(offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.log.TruncateFullyAndStartAt(rb.Offset(offset)); err != nil {
		return err
	}
	p.producers.reset()
	p.notify()
	return nil
}
