package logstore

import (
	"fmt"
	"sort"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// Slice is a range of one segment file holding whole batches, except that
// the last one may be cut by the byte limit, as in a Kafka fetch. The
// caller sends it (sendfile from File.Fd, or ReadAt) and then calls
// Release; until then the segment's files stay open even if the segment
// is deleted. A truncation may still shorten the file under a reader: a
// short read is an error for that fetch, never wrong bytes.
type Slice struct {
	File     vfs.File
	Position int64
	Length   int64
	seg      *segment
}

// Release lets the segment close once deleted. Safe on an empty Slice.
func (s Slice) Release() error {
	if s.seg == nil {
		return nil
	}
	s.seg.unpin()
	return s.seg.release()
}

// Read finds the batches from offset on: it returns a Slice starting at the
// batch that holds offset (or the first after it, across compaction gaps
// and segment ends), stopping before the first batch that holds maxOffset
// (pass LogEndOffset, HighWatermark or a last stable offset) and after at
// most maxBytes bytes. With minOneBatch a first batch larger than maxBytes
// is returned whole, so a reader always makes progress (KIP-74). An empty
// Slice means nothing is there yet.
func (l *Log) Read(offset rb.Offset, maxBytes int64, maxOffset rb.Offset, minOneBatch bool) (Slice, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return Slice{}, ErrClosed
	}
	leo := l.logEndOffset()
	if offset < l.logStartOffset || offset > leo {
		return Slice{}, fmt.Errorf("%w: offset %d outside [%d, %d]", ErrOffsetOutOfRange, offset, l.logStartOffset, leo)
	}
	return l.read(offset, maxBytes, min(maxOffset, leo), minOneBatch)
}

// read is Read without the log start check (l.mu held, maxOffset <= the
// log end offset).
func (l *Log) read(offset rb.Offset, maxBytes int64, maxOffset rb.Offset, minOneBatch bool) (Slice, error) {
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].base > offset }) - 1
	for ; i >= 0 && i < len(l.segments) && offset < maxOffset; i++ {
		s := l.segments[i]
		if err := s.pin(); err != nil {
			return Slice{}, err
		}
		slice, next, err := l.readSegment(s, offset, maxBytes, maxOffset, minOneBatch)
		if err != nil || !next {
			return slice, err
		}
	}
	return Slice{}, nil
}

// readSegment is read from the pinned segment s: it returns the Slice,
// which keeps the pin until Release, or unpins s (next: the offset falls
// in a gap after s's last batch).
func (l *Log) readSegment(s *segment, offset rb.Offset, maxBytes int64, maxOffset rb.Offset, minOneBatch bool) (slice Slice, next bool, err error) {
	defer func() {
		if slice.seg == nil {
			s.unpin()
		}
	}()
	start, first, err := l.findBatch(s, offset)
	if err != nil {
		return Slice{}, false, err
	}
	if start == s.size {
		return Slice{}, true, nil
	}
	end := s.size
	if maxOffset < s.next {
		if end, err = s.findPosition(maxOffset); err != nil {
			return Slice{}, false, err
		}
	}
	if end == start {
		return Slice{}, false, nil
	}
	length := min(end-start, maxBytes)
	if minOneBatch && length < end-start {
		length = max(length, first)
	}
	if length <= 0 {
		return Slice{}, false, nil
	}
	s.acquire()
	return Slice{File: s.log, Position: start, Length: length, seg: s}, false, nil
}

// findBatch is segment.findBatch, answered from lastAppend when a reader
// asks for where the last append began.
func (l *Log) findBatch(s *segment, offset rb.Offset) (int64, int64, error) {
	if last := l.lastAppend; last.valid && last.offset == offset && last.segmentBase == s.base && last.position+last.size <= s.size {
		return last.position, last.size, nil
	}
	return s.findBatch(offset)
}

// ReadBytes is Read into memory, for tests and for callers without
// sendfile. It appends to dst.
func (l *Log) ReadBytes(dst []byte, offset rb.Offset, maxBytes int64, maxOffset rb.Offset, minOneBatch bool) ([]byte, error) {
	slice, err := l.Read(offset, maxBytes, maxOffset, minOneBatch)
	if err != nil {
		return dst, err
	}
	return readSlice(dst, slice)
}

// readSlice reads slice into dst and releases it.
func readSlice(dst []byte, slice Slice) ([]byte, error) {
	defer slice.Release()
	if slice.Length == 0 {
		return dst, nil // an empty Slice has no File
	}
	start := len(dst)
	dst = append(dst, make([]byte, slice.Length)...)
	n, err := slice.File.ReadAt(dst[start:], slice.Position)
	if int64(n) < slice.Length {
		return dst[:start], fmt.Errorf("logstore: read %d of %d bytes at position %d (truncated while reading?): %w", n, slice.Length, slice.Position, err)
	}
	return dst, nil
}

// BatchBytes appends the whole batch holding offset (or the first after
// it) to dst, even below the log start offset while a segment still holds
// it: Kafka answers ListOffsets MAX_TIMESTAMP from the segments, below the
// log start too.
func (l *Log) BatchBytes(dst []byte, offset rb.Offset) ([]byte, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return dst, ErrClosed
	}
	leo := l.logEndOffset()
	if len(l.segments) == 0 || offset < l.segments[0].base || offset >= leo {
		l.mu.RUnlock()
		return dst, fmt.Errorf("%w: offset %d is in no segment", ErrOffsetOutOfRange, offset)
	}
	slice, err := l.read(offset, 1, leo, true)
	l.mu.RUnlock()
	if err != nil {
		return dst, err
	}
	return readSlice(dst, slice)
}

// OffsetForTimestamp returns the base offset of the first batch whose max
// timestamp is >= timestamp (ListOffsets by time; the caller narrows it to
// a record inside the batch), or ok=false when there is none.
func (l *Log) OffsetForTimestamp(timestamp int64) (offset rb.Offset, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, false, ErrClosed
	}
	for _, s := range l.segments {
		if err := s.pin(); err != nil {
			return 0, false, err
		}
		offset, _, ok, err = s.findTimestamp(timestamp)
		s.unpin()
		if err != nil || ok {
			return max(offset, l.logStartOffset), ok, err
		}
	}
	return 0, false, nil
}

// MaxTimestamp returns the largest batch max timestamp in the log and an
// offset of its batch, the last one (as Kafka's time index keeps it; an
// index of the previous release may give the first), for ListOffsets
// MAX_TIMESTAMP, or ok=false when the log is empty. BatchBytes finds the
// batch from either.
func (l *Log) MaxTimestamp() (timestamp int64, offset rb.Offset, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	timestamp = -1
	for _, s := range l.segments {
		if s.maxTimestamp > timestamp {
			timestamp, offset, ok = s.maxTimestamp, s.base+rb.Offset(s.maxTimestampRel), true
		}
	}
	return timestamp, offset, ok
}
