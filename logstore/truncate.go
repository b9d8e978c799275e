package logstore

import (
	"slices"

	rb "github.com/mirrord/mirrord/recordbatch"
)

// TruncateTo removes every batch that holds an offset >= offset (a batch
// holding offset is removed whole), so that afterwards LogEndOffset <=
// offset. It is durable when it returns. Below the log start offset it
// empties the log and starts it at offset.
func (l *Log) TruncateTo(offset rb.Offset) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.publishEnds()
	if err := l.beginWrite(); err != nil {
		return err
	}
	if offset >= l.logEndOffset() {
		return nil
	}
	l.cuts++
	if offset < l.logStartOffset {
		return l.truncateFullyAndStartAt(offset)
	}
	l.lastAppend = lastAppend{}
	// Whole segments past offset go first, newest first.
	removed := false
	for len(l.segments) > 1 && l.active().base >= offset {
		if err := l.dropSegment(len(l.segments) - 1); err != nil {
			return err
		}
		removed = true
	}
	if removed {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail(err)
		}
	}
	s := l.active()
	if err := s.unseal(); err != nil {
		return l.fail(err)
	}
	position, err := s.findPosition(offset)
	if err != nil {
		return l.fail(err)
	}
	if err := s.truncateTo(position); err != nil {
		return l.fail(err)
	}
	l.unflushed = false
	if err := l.dropTrailingEmpty(); err != nil {
		return err
	}
	if l.logEndOffset() <= l.logStartOffset {
		// Nothing a reader could see is left.
		return l.truncateFullyAndStartAt(l.logStartOffset)
	}
	if l.cleanerOffset > l.logEndOffset() {
		// Kafka's maybeTruncateCheckpoint: what comes next is dirty.
		if err := l.writeCleanerOffset(l.logEndOffset()); err != nil {
			return l.fail(err)
		}
	}
	return l.afterTruncation()
}

// dropTrailingEmpty removes empty segments at the end of the log (left
// by a truncation, or by a roll whose appends a crash lost), so the log
// end offset is always the end of the last batch, or the base of the only
// segment.
func (l *Log) dropTrailingEmpty() error {
	removed := false
	for len(l.segments) > 1 && l.active().size == 0 {
		if err := l.dropSegment(len(l.segments) - 1); err != nil {
			return err
		}
		removed = true
	}
	if !removed {
		return nil
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(err)
	}
	if err := l.active().unseal(); err != nil {
		return l.fail(err)
	}
	return nil
}

// dropSegment deletes the files of segment i, the first or the last, and
// takes it out of the log. Once its files are gone it is out, even if
// closing them fails: that error fails the log, but no segment with
// closed files stays to be read.
func (l *Log) dropSegment(i int) error {
	s := l.segments[i]
	if err := s.removeFiles(); err != nil {
		return l.fail(err)
	}
	l.segments = slices.Delete(l.segments, i, i+1)
	if err := s.release(); err != nil {
		return l.fail(err)
	}
	return nil
}

// afterTruncation brings the high watermark and epoch cache in line with
// a log end offset that moved back.
func (l *Log) afterTruncation() error {
	leo := l.logEndOffset()
	l.highWatermark = min(l.highWatermark, leo)
	if l.epochs.TruncateFromEnd(leo) {
		if err := l.writeEpochs(); err != nil {
			return l.fail(err)
		}
	}
	return nil
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log
// at offset: a mirror does this when its source's log start moved past
// everything it holds.
func (l *Log) TruncateFullyAndStartAt(offset rb.Offset) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.publishEnds()
	if err := l.beginWrite(); err != nil {
		return err
	}
	return l.truncateFullyAndStartAt(offset)
}

// A start moving forward is checkpointed before anything is deleted, as
// in advanceLogStart, so that a failure or crash midway cannot reopen as
// an empty log at the old start (its end moved back). The old segments
// stay in the log (their files unlinked but open) until the new one
// exists: a failure leaves a failed log that still answers reads, never
// one without segments.
func (l *Log) truncateFullyAndStartAt(offset rb.Offset) error {
	l.lastAppend = lastAppend{}
	l.cuts++
	if offset > l.logStartOffset {
		c := offsetsCheckpoint{logStartOffset: offset, highWatermark: offset}
		if err := WriteFileAtomic(l.fs, l.dir, offsetsCheckpointName, c.encode()); err != nil {
			return l.fail(err)
		}
	}
	for i := len(l.segments) - 1; i >= 0; i-- {
		if err := l.segments[i].removeFiles(); err != nil {
			return l.fail(err)
		}
	}
	s, err := createSegment(l.fs, l.dir, offset, l.cfg)
	if err != nil {
		return l.fail(err)
	}
	var released error
	for _, old := range l.segments {
		if err := old.release(); released == nil {
			released = err
		}
	}
	l.segments = append(l.segments[:0], s)
	if released != nil {
		return l.fail(released)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(err)
	}
	l.logStartOffset, l.highWatermark, l.unflushed = offset, offset, false
	l.epochs.TruncateFromEnd(0)
	if err := l.writeOffsets(); err != nil {
		return l.fail(err)
	}
	if err := l.writeEpochs(); err != nil {
		return l.fail(err)
	}
	return nil
}

// AdvanceLogStart moves the log start offset to offset (DeleteRecords, or
// a mirror following its source's log start), exactly: it is persisted
// before it returns. Segments wholly below it are deleted. Past the log
// end offset it empties the log and starts it at offset.
func (l *Log) AdvanceLogStart(offset rb.Offset) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.publishEnds()
	if err := l.beginWrite(); err != nil {
		return err
	}
	return l.advanceLogStart(offset)
}

func (l *Log) advanceLogStart(offset rb.Offset) error {
	if offset <= l.logStartOffset {
		return nil
	}
	if offset > l.logEndOffset() {
		return l.truncateFullyAndStartAt(offset)
	}
	l.logStartOffset = offset
	l.highWatermark = max(l.highWatermark, offset)
	if err := l.writeOffsets(); err != nil {
		return l.fail(err)
	}
	removed := false
	for len(l.segments) > 1 && l.segments[1].base <= offset {
		if err := l.dropSegment(0); err != nil {
			return err
		}
		removed = true
	}
	if removed {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail(err)
		}
	}
	// An entry left starting at the log end (the start moved to the end)
	// goes too, as it would when the log is reopened.
	changed := l.epochs.TruncateFromStart(offset)
	if l.epochs.TruncateFromEnd(l.logEndOffset()) || changed {
		if err := l.writeEpochs(); err != nil {
			return l.fail(err)
		}
	}
	return nil
}

// ApplyRetention deletes the oldest whole segments of a writable topic
// whose cleanup.policy includes delete
// while the log is larger than RetentionBytes or a segment's newest batch
// is older than RetentionAge. The active segment is never deleted. It
// returns the number of segments deleted.
func (l *Log) ApplyRetention() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.publishEnds()
	if l.cfg.RetentionAge == 0 && l.cfg.RetentionBytes == 0 || !l.cfg.Cleanup.Delete() {
		return 0, nil
	}
	var size int64
	for _, s := range l.segments {
		size += s.size
	}
	cutoff := l.cfg.now().Add(-l.cfg.RetentionAge).UnixMilli()
	n := 0
	for ; n < len(l.segments)-1; n++ {
		s := l.segments[n]
		tooOld := l.cfg.RetentionAge > 0 && s.maxTimestamp < cutoff
		tooBig := l.cfg.RetentionBytes > 0 && size-s.size >= l.cfg.RetentionBytes
		if !tooOld && !tooBig {
			break
		}
		size -= s.size
	}
	if n == 0 {
		return 0, nil
	}
	if err := l.beginWrite(); err != nil {
		return 0, err
	}
	return n, l.advanceLogStart(l.segments[n].base)
}
