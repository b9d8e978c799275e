package logstore

import (
	"errors"
	"fmt"
	"math"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// AppendInfo describes what an append wrote.
type AppendInfo struct {
	FirstOffset  rb.Offset // base offset of the first batch
	LastOffset   rb.Offset // last offset of the last batch
	MaxTimestamp int64
	Batches      int
	Bytes        int
	newEpoch     bool // a batch carries an epoch above the cache's latest
}

// Append appends whole batches that carry their own offsets, as a mirror
// does with what its source assigned. Offsets must be strictly increasing
// and the first base offset >= LogEndOffset (gaps are allowed: compaction
// leaves them; see checkHeader for why no stricter rule holds); leader
// epochs must not decrease; a batch holds no more records than its
// offsets span. Every batch's framing and CRC are checked first; on an
// invalid batch nothing of batches is written.
//
// Batches larger together than segment.bytes (a mirror's fetch.max.bytes
// above its topic's segment.bytes) are written in pieces that each fit a
// segment, cut between batches, after all of them were checked; a write
// that fails part way leaves the pieces before it (whole batches, a
// prefix the mirror fetches on from). Only a single batch larger than a
// segment is ErrTooLarge, as Kafka refuses it.
func (l *Log) Append(batches []byte) (AppendInfo, error) {
	l.mu.Lock()
	defer l.unlockWritingBehind()
	defer l.publishEnds()
	if err := l.beginWrite(); err != nil {
		return AppendInfo{}, err
	}
	if int64(len(batches)) <= l.cfg.SegmentBytes {
		info, err := l.validate(batches)
		if err != nil {
			return AppendInfo{}, err
		}
		return info, l.write(batches, info)
	}
	pieces, err := l.segmentPieces(batches)
	if err != nil {
		return AppendInfo{}, err
	}
	total := AppendInfo{MaxTimestamp: -1}
	for _, piece := range pieces {
		info, err := l.validate(piece) // against the log as the pieces before left it
		if err == nil {
			err = l.write(piece, info)
		}
		if err != nil {
			return total, err
		}
		if total.Batches == 0 {
			total.FirstOffset = info.FirstOffset
		}
		total.LastOffset, total.MaxTimestamp = info.LastOffset, max(total.MaxTimestamp, info.MaxTimestamp)
		total.Batches += info.Batches
		total.Bytes += info.Bytes
	}
	return total, nil
}

// segmentPieces checks batches as validate does, then cuts them between
// batches into pieces of at most segment.bytes.
func (l *Log) segmentPieces(batches []byte) ([][]byte, error) {
	var pieces [][]byte
	start, end := 0, 0
	it := rb.NewIter(batches, false)
	for it.Next() {
		size := len(it.Batch())
		if int64(size) > l.cfg.SegmentBytes {
			return nil, fmt.Errorf("%w: batch %d of %d bytes, segment.bytes %d", ErrTooLarge, len(pieces), size, l.cfg.SegmentBytes)
		}
		if int64(end+size-start) > l.cfg.SegmentBytes {
			pieces = append(pieces, batches[start:end])
			start = end
		}
		end += size
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidAppend, err)
	}
	pieces = append(pieces, batches[start:end])
	// Every piece is checked before any is written: offsets, epochs and
	// CRCs across the whole of batches, as one append would.
	if _, err := l.check(batches); err != nil {
		return nil, err
	}
	return pieces, nil
}

// AppendAssign appends batches of a writable topic: it stamps each batch,
// in place in batches, with the next offsets from LogEndOffset and with
// leaderEpoch (neither is covered by the CRC), then appends them like
// Append.
func (l *Log) AppendAssign(batches []byte, leaderEpoch rb.Epoch) (AppendInfo, error) {
	l.mu.Lock()
	defer l.unlockWritingBehind()
	defer l.publishEnds()
	if err := l.beginWrite(); err != nil {
		return AppendInfo{}, err
	}
	if latest, ok := l.epochs.Latest(); leaderEpoch < 0 || ok && leaderEpoch < latest.Epoch {
		return AppendInfo{}, fmt.Errorf("%w: leader epoch %d below the log's latest", ErrInvalidAppend, leaderEpoch)
	}
	next := l.logEndOffset()
	it := rb.NewIter(batches, false)
	for it.Next() {
		b := it.Batch()
		b.SetBaseOffset(next)
		b.SetLeaderEpoch(leaderEpoch)
		next = b.NextOffset()
	}
	if err := it.Err(); err != nil {
		return AppendInfo{}, fmt.Errorf("%w: %w", ErrInvalidAppend, err)
	}
	info, err := l.validate(batches)
	if err != nil {
		return AppendInfo{}, err
	}
	return info, l.write(batches, info)
}

// unlockWritingBehind releases the log's lock, then starts the write-back
// an append made due (segment.writeBehind). sync_file_range takes a
// millisecond, 20 ms at worst on a loaded machine, and readers (every
// Fetch of the log) must not wait for it behind the lock; only this
// appender does.
func (l *Log) unlockWritingBehind() {
	var file vfs.File
	var due [2]int64
	if !l.closed && len(l.segments) > 0 {
		file, due = l.active().takeWriteBehind()
	}
	l.mu.Unlock()
	startWriteBehind(file, due)
}

// validate checks batches, to be written at once into one segment,
// against the log without changing anything.
func (l *Log) validate(batches []byte) (AppendInfo, error) {
	if int64(len(batches)) > l.cfg.SegmentBytes {
		return AppendInfo{}, fmt.Errorf("%w: %d bytes, segment.bytes %d", ErrTooLarge, len(batches), l.cfg.SegmentBytes)
	}
	return l.check(batches)
}

// check checks batches' framing, CRCs, offsets and epochs against the log.
func (l *Log) check(batches []byte) (AppendInfo, error) {
	if len(batches) == 0 {
		return AppendInfo{}, fmt.Errorf("%w: no batches", ErrInvalidAppend)
	}
	info := AppendInfo{MaxTimestamp: -1, Bytes: len(batches)}
	next := l.logEndOffset()
	latest := rb.NoEpoch
	if e, ok := l.epochs.Latest(); ok {
		latest = e.Epoch
	}
	it := rb.NewIter(batches, true)
	for it.Next() {
		b := it.Batch()
		if b.BaseOffset() < next {
			return AppendInfo{}, fmt.Errorf("%w: batch %d: base offset %d below the next offset %d", ErrInvalidAppend, info.Batches, b.BaseOffset(), next)
		}
		if count := b.RecordCount(); count < 0 || int64(count) > int64(b.LastOffsetDelta())+1 {
			return AppendInfo{}, fmt.Errorf("%w: batch %d at offset %d: %d records in a span of %d offsets", ErrInvalidAppend, info.Batches, b.BaseOffset(), count, int64(b.LastOffsetDelta())+1)
		}
		if e := b.LeaderEpoch(); e < latest {
			return AppendInfo{}, fmt.Errorf("%w: batch %d at offset %d: leader epoch %d below %d", ErrInvalidAppend, info.Batches, b.BaseOffset(), e, latest)
		} else if e > latest {
			info.newEpoch, latest = true, e
		}
		if info.Batches == 0 {
			info.FirstOffset = b.BaseOffset()
		}
		info.LastOffset, next = b.LastOffset(), b.NextOffset()
		info.MaxTimestamp = max(info.MaxTimestamp, b.MaxTimestamp())
		info.Batches++
	}
	if err := it.Err(); err != nil {
		return AppendInfo{}, fmt.Errorf("%w: %w", ErrInvalidAppend, err)
	}
	if info.LastOffset-info.FirstOffset > math.MaxInt32 {
		return AppendInfo{}, fmt.Errorf("%w: offsets %d to %d span more than a segment can index", ErrInvalidAppend, info.FirstOffset, info.LastOffset)
	}
	return info, nil
}

// write appends validated batches: new epochs are checkpointed first (so a
// durable batch never has an epoch the checkpoint lacks), the segment is
// rolled if needed, then the bytes go out in one write.
func (l *Log) write(batches []byte, info AppendInfo) error {
	if info.newEpoch {
		first := l.logEndOffset() == l.logStartOffset // the first batch goes into an empty log
		for it := rb.NewIter(batches, false); it.Next(); first = false {
			l.assignEpoch(it.Batch(), first)
		}
		if err := l.writeEpochs(); err != nil {
			if !errors.Is(err, errReplaced) {
				// The old checkpoint stands (a full disk fails here):
				// undo the cache only, the log stays writable.
				l.epochs.TruncateFromEnd(l.logEndOffset())
				return fmt.Errorf("logstore: %s: append: %w", l.dir, err)
			}
			return l.undoEpochs(err)
		}
	}
	// The active segment's indexes grow to their full size now, after
	// beginWrite removed any clean-shutdown marker (see openSegment).
	if err := l.active().unseal(); err != nil {
		return l.undoEpochs(err)
	}
	if l.shouldRoll(info) {
		if err := l.roll(info.FirstOffset); err != nil {
			return l.undoEpochs(err)
		}
	}
	s := l.active()
	if s.size == 0 {
		s.opened = l.cfg.now() // segment.ms counts from the first append
	}
	at := s.size
	if uncertain, err := s.appendBatches(batches); uncertain {
		return l.fail(err)
	} else if err != nil {
		return l.undoEpochs(err)
	}
	l.lastAppend = lastAppend{offset: info.FirstOffset, segmentBase: s.base, position: at, size: rb.Batch(batches).SizeOnDisk(), valid: true}
	if l.cfg.Flush == FlushEveryAppend {
		if err := s.log.Sync(); err != nil {
			return l.fail(err)
		}
		return nil
	}
	l.unflushed = true
	return nil
}

// undoEpochs drops epoch entries past the log end after a failed append.
func (l *Log) undoEpochs(cause error) error {
	if l.epochs.TruncateFromEnd(l.logEndOffset()) {
		if err := l.writeEpochs(); err != nil {
			return l.fail(fmt.Errorf("%w (and restoring the epoch checkpoint failed: %v)", cause, err))
		}
	}
	return fmt.Errorf("logstore: %s: append: %w", l.dir, cause)
}

func (l *Log) shouldRoll(info AppendInfo) bool {
	s := l.active()
	entries := info.Bytes/int(max(l.cfg.IndexIntervalBytes, rb.HeaderSize)) + 2
	switch {
	case info.LastOffset-s.base > math.MaxInt32:
		return true
	case s.size == 0:
		return false
	case s.size+int64(info.Bytes) > l.cfg.SegmentBytes:
		return true
	case l.cfg.SegmentAge > 0 && l.cfg.now().Sub(s.opened) >= l.cfg.SegmentAge:
		return true
	}
	return (s.offsets.entries+entries)*offsetEntrySize > len(s.offsets.mapped) ||
		(s.times.entries+entries)*timeEntrySize > len(s.times.mapped)
}

// roll makes a new active segment starting at base, after sealing the
// old one (synced, indexes trimmed). An empty old segment stays: reads
// skip it, and it keeps the log start offset covered.
func (l *Log) roll(base rb.Offset) error {
	old := l.active()
	if err := old.seal(); err != nil {
		return l.fail(err)
	}
	old.idle()
	s, err := createSegment(l.fs, l.dir, base, l.cfg)
	if err == nil {
		err = l.fs.SyncDir(l.dir)
		if err != nil {
			s.release()
		}
	}
	if err != nil {
		// Leave no trace of the new segment and keep appending to the old.
		if rerr := removeSegmentFiles(l.fs, l.dir, base); rerr != nil {
			return l.fail(fmt.Errorf("%w (and removing the new segment failed: %v)", err, rerr))
		}
		if uerr := old.unseal(); uerr != nil {
			return l.fail(uerr)
		}
		return err
	}
	l.segments = append(l.segments, s)
	l.unflushed = false
	return nil
}
