package logstore

import (
	"sort"

	rb "github.com/mirrord/mirrord/recordbatch"
)

// WalkBatches calls fn with each batch that holds an offset >= from (from
// below the log start offset means the log start offset), in offset
// order, up to the log end offset as of the call, until fn returns false.
//
// fn gets a header view (see recordbatch.ParseHeader: offsets, attributes,
// producer fields and SizeOnDisk, but not Records or Verify), except for
// control batches, which are read whole so that their record (a
// transaction marker) can be decoded. The view is valid only during the
// call. The batches were checked when they were written (or recovered);
// the walk checks their framing only.
//
// It is a scan for rebuilding derived state at open: it reads the log in
// 64 KiB windows, so it costs about one read of the log from from, or one
// window per batch when batches are larger than that. The log's lock is
// not held while reading (the segments are referenced, as by Read), so
// appends go on; a concurrent truncation may make it fail.
func (l *Log) WalkBatches(from rb.Offset, fn func(rb.Batch) bool) error {
	type span struct {
		s          *segment
		start, end int64
	}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	from = max(from, l.logStartOffset)
	first := max(sort.Search(len(l.segments), func(i int) bool { return l.segments[i].base > from })-1, 0)
	spans := make([]span, 0, len(l.segments)-first)
	defer func() {
		for _, sp := range spans {
			sp.s.unpin()
			sp.s.release()
		}
	}()
	for i, s := range l.segments[first:] {
		if err := s.pin(); err != nil {
			l.mu.RUnlock()
			return err
		}
		s.acquire()
		spans = append(spans, span{s: s, end: s.size})
		if i == 0 {
			var err error
			if spans[0].start, err = s.findPosition(from); err != nil {
				l.mu.RUnlock()
				return err
			}
		}
	}
	l.mu.RUnlock()
	for _, sp := range spans {
		more, err := walkSegment(sp.s, sp.start, sp.end, fn)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// walkSegment is WalkBatches over [start, end) of one segment; it reports
// whether fn wants more.
func walkSegment(s *segment, start, end int64, fn func(rb.Batch) bool) (bool, error) {
	w := s.walk(start, end, false)
	w.r.chunk = windowSize
	defer w.close()
	for w.next() {
		b := w.batch
		if b.Control() {
			whole, err := w.r.peek(w.position, int(b.SizeOnDisk()), w.to)
			if err != nil {
				return false, err
			}
			if b, err = rb.Parse(whole); err != nil {
				return false, err
			}
		}
		if !fn(b) {
			return false, nil
		}
	}
	return true, w.err
}
