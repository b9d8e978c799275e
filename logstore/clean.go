package logstore

import (
	"errors"
	"fmt"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
)

// ErrOffsetMapTooSmall: the offset map filled before it held the keys of
// one batch, so a cleaning cannot advance (Kafka refuses such a map at
// start: raise log.cleaner.dedupe.buffer.size).
var ErrOffsetMapTooSmall = errors.New("logstore: cleaner offset map too small for one batch")

// CleanOptions are what one cleaning needs from its caller.
type CleanOptions struct {
	// Map is the cleaner's offset map (its size bounds the cleaning).
	Map *OffsetMap
	// LastStableOffset: nothing at or past it is cleaned (the partition's
	// last stable offset, at most its high watermark).
	LastStableOffset rb.Offset
	// ProducerExpireBefore (milliseconds): producers whose last batch is
	// older are not active, so their last batch need not be kept
	// (producer.id.expiration.ms). Zero keeps every producer.
	ProducerExpireBefore int64
	// Throttle, when set, is told of every byte read and written
	// (log.cleaner.io.max.bytes.per.second) and may sleep.
	Throttle func(bytes int64)
}

// CleanStats says what a cleaning did.
type CleanStats struct {
	FirstDirty, End          rb.Offset // the range mapped: [FirstDirty, End)
	Segments, Groups         int       // segments read, cleaned segments written
	BytesRead, BytesWritten  int64
	RecordsRead, RecordsKept int64
	MapKeys                  int
	Duration                 time.Duration
}

// Cleanable is Kafka's LogToClean: the dirty part of a compacted log.
type Cleanable struct {
	FirstDirty rb.Offset // the cleaner checkpoint, within the log
	// FirstUncleanable is the base of the first segment the cleaning may
	// not touch: the active one, the one holding the last stable offset,
	// or the first holding records younger than min.compaction.lag.ms.
	FirstUncleanable rb.Offset
	CleanBytes       int64 // bytes of the segments below FirstDirty
	DirtyBytes       int64 // bytes of the segments in [FirstDirty, FirstUncleanable)
	// MustClean: dirty records are older than max.compaction.lag.ms.
	MustClean bool
}

// Ratio is the dirty ratio, DirtyBytes / (CleanBytes + DirtyBytes).
func (c Cleanable) Ratio() float64 {
	total := c.CleanBytes + c.DirtyBytes
	if total == 0 {
		return 0
	}
	return float64(c.DirtyBytes) / float64(total)
}

// Eligible is Kafka's choice of the logs to clean: a dirty ratio above
// min.cleanable.dirty.ratio, or dirty bytes past max.compaction.lag.ms.
func (c Cleanable) Eligible(minRatio float64) bool {
	return c.DirtyBytes > 0 && (c.MustClean || c.Ratio() > minRatio)
}

// Cleanable measures the dirty part of the log, given the partition's
// last stable offset (Kafka's LogCleanerManager.cleanableOffsets).
func (l *Log) Cleanable(lastStableOffset rb.Offset) Cleanable {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cleanable(lastStableOffset, l.cfg.now())
}

func (l *Log) cleanable(lastStableOffset rb.Offset, now time.Time) Cleanable {
	firstDirty := l.cleanerOffset
	if firstDirty < l.logStartOffset || firstDirty > l.logEndOffset() {
		firstDirty = l.logStartOffset
	}
	uncleanable := min(lastStableOffset, l.active().base)
	firstDirtySegment := l.segmentIndex(firstDirty)
	if lag := l.cfg.MinCompactionLag; lag > 0 {
		cutoff := now.Add(-lag).UnixMilli()
		for _, s := range l.segments[firstDirtySegment : len(l.segments)-1] {
			if s.maxTimestamp > cutoff {
				uncleanable = min(uncleanable, s.base)
				break
			}
		}
	}
	uncleanable = max(uncleanable, firstDirty)
	c := Cleanable{FirstDirty: firstDirty, FirstUncleanable: l.segments[l.segmentIndex(uncleanable)].base}
	earliest := int64(-1)
	// As Kafka counts them, the segment holding FirstDirty (when it is not
	// its base) is both clean and dirty.
	for i, s := range l.segments {
		if s.base < firstDirty {
			c.CleanBytes += s.size
		}
		if i >= firstDirtySegment && s.base < c.FirstUncleanable {
			c.DirtyBytes += s.size
			if t := s.firstBatchTimestamp(); t > 0 && (earliest < 0 || t < earliest) {
				earliest = t
			}
		}
	}
	if lag := l.cfg.MaxCompactionLag; lag > 0 && earliest > 0 {
		c.MustClean = earliest < now.Add(-lag).UnixMilli()
	}
	return c
}

// segmentIndex is the index of the segment holding offset (the last whose
// base is <= offset; the first when offset is below every base).
func (l *Log) segmentIndex(offset rb.Offset) int {
	i := 0
	for i+1 < len(l.segments) && l.segments[i+1].base <= offset {
		i++
	}
	return i
}

// Clean compacts the log once, as Kafka's Cleaner.doClean: it maps the
// latest offset of each key in the dirty range (as much of it as the
// offset map holds), then rewrites the segments from the log start to the
// end of the mapped range, a group of segments at a time, into cleaned
// segments that replace them (see swapCleaned); after each group's swap
// it checkpoints how far the swapped groups reach into the mapped range
// (checkpointGroup), so after the last one the end of the mapped range is
// the next cleaning's first dirty offset. Only
// sealed segments below the last stable offset are read; appends, reads
// and truncations go on meanwhile (a group whose segments changed under
// it is dropped, not swapped). Offsets are never renumbered.
func (l *Log) Clean(opts CleanOptions) (CleanStats, error) {
	l.cleaning.Lock()
	defer l.cleaning.Unlock()
	started := time.Now()
	now := l.cfg.now()
	stats := CleanStats{}

	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return stats, ErrClosed
	}
	c := l.cleanable(opts.LastStableOffset, now)
	cuts := l.cuts
	var segments []*segment
	defer func() {
		for _, s := range segments {
			s.unpin()
			s.release()
		}
	}()
	read := map[*segment]segmentState{}
	for _, s := range l.segments {
		if s.base >= c.FirstUncleanable {
			break
		}
		if err := s.pin(); err != nil {
			l.mu.RUnlock()
			return stats, err
		}
		s.acquire()
		segments = append(segments, s)
		read[s] = segmentState{size: s.size, truncations: s.truncations}
	}
	l.mu.RUnlock()
	stats.FirstDirty, stats.End = c.FirstDirty, c.FirstDirty
	if c.DirtyBytes == 0 || len(segments) == 0 {
		return stats, nil
	}
	scan, err := l.scanTransactions(opts.ProducerExpireBefore)
	if err != nil {
		return stats, err
	}
	m := opts.Map
	if err := buildOffsetMap(m, segments, c, scan.aborted, opts.Throttle); err != nil {
		return stats, err
	}
	if m.Latest() < c.FirstDirty {
		return stats, ErrOffsetMapTooSmall
	}
	stats.End, stats.MapKeys = m.Latest()+1, m.Len()
	filter := &batchFilter{
		offsets:    m,
		txns:       newCleanTxns(scan.aborted, segments[0].base),
		producers:  scan.producers,
		upperBound: c.FirstUncleanable,
		now:        now.UnixMilli(),
		retention:  l.cfg.DeleteRetention.Milliseconds(),
		stats:      &stats,
	}
	next := 0 // the index in segments of the first segment after the group
	for _, group := range l.groupSegments(segments, stats.End, c.FirstUncleanable) {
		stats.Segments += len(group)
		stats.Groups++
		next += len(group)
		swapped, err := l.cleanGroup(group, read, cuts, filter, opts.Throttle, &stats)
		if err != nil {
			return stats, err
		}
		if !swapped {
			// A truncation or retention changed the segments, or a
			// truncation the log: what was mapped may be gone. The next
			// cleaning starts over.
			stats.End = stats.FirstDirty
			return stats, nil
		}
		groupEnd := c.FirstUncleanable
		if next < len(segments) {
			groupEnd = segments[next].base
		}
		if err := l.checkpointGroup(min(groupEnd, stats.End), c.FirstDirty, cuts); err != nil {
			return stats, err
		}
	}
	stats.Duration = time.Since(started)
	return stats, nil
}

// checkpointGroup makes a swapped group's progress durable: the cleaner
// checkpoint moves to cleanedTo, the end of the group's offsets capped at
// the end of the mapped range, when that is past the cleaning's first
// dirty offset. A cleaning cut short (a crash,
// a failed write, a group dropped later) then costs the next one only
// the groups not swapped, not the whole dirty range again, as it did
// when the checkpoint moved only after the last group: a log whose
// cleanings never outlive the kills or faults meant to stop them still
// gets clean, group by group.
//
// It is a checkpoint a whole cleaning of [firstDirty, cleanedTo) could
// have written. What a checkpoint C promises the next cleaning is that
// every record below C whose key has a later record below C is gone
// (tombstones and transaction markers by their own rules, which do not
// depend on C). For a record r below cleanedTo whose key has a later
// record at o < cleanedTo: if o < firstDirty, r was gone before this
// cleaning (the old checkpoint's promise); otherwise o lies in
// [firstDirty, End), the range the offset map holds, so the map holds
// the key at an offset >= o > r, and the filter dropped r when the
// groups below cleanedTo, all swapped (they are swapped in offset order,
// and their swaps are durable before this write), were rewritten. Keys
// met only at or past cleanedTo are in the map too, so those groups lost
// even more than the promise asks; the next cleaning maps them again
// from cleanedTo. A crash between the swap and this write leaves the old
// checkpoint: the next cleaning redoes the group, as before.
func (l *Log) checkpointGroup(cleanedTo, firstDirty rb.Offset, cuts uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cleanedTo <= firstDirty || cleanedTo == l.cleanerOffset || l.cuts != cuts {
		return nil
	}
	return l.writeCleanerOffset(cleanedTo)
}

// buildOffsetMap maps the keys of the dirty segments from c.FirstDirty on,
// skipping aborted transactions, until the map is full (Kafka's
// buildOffsetMap). The map's Latest is then the last offset of the last
// batch mapped whole, or the end of the last segment mapped whole.
func buildOffsetMap(m *OffsetMap, segments []*segment, c Cleanable, aborted []abortedRange, throttle func(int64)) error {
	m.Clear()
	txns := newCleanTxns(aborted, c.FirstDirty)
	for i, s := range segments {
		end := c.FirstUncleanable
		if i+1 < len(segments) {
			end = segments[i+1].base
		}
		if end <= c.FirstDirty {
			continue
		}
		full, err := mapSegment(m, s, c.FirstDirty, txns, throttle)
		if err != nil || full {
			return err
		}
		m.setLatest(end - 1)
	}
	return nil
}

func mapSegment(m *OffsetMap, s *segment, firstDirty rb.Offset, txns *cleanTxns, throttle func(int64)) (full bool, err error) {
	from, err := s.findPosition(firstDirty)
	if err != nil {
		return false, err
	}
	f := batchFilter{stats: &CleanStats{}}
	w := s.walk(from, s.size, true)
	defer w.close()
	for w.next() {
		b := w.batch
		if throttle != nil {
			throttle(int64(len(b)))
		}
		if b.Control() {
			txns.onControl(b)
		} else if !txns.onBatch(b) {
			full, err = f.mapKeys(m, b, firstDirty)
			if err != nil || full {
				return full, err
			}
		}
		if b.LastOffset() >= firstDirty {
			m.setLatest(b.LastOffset())
		}
	}
	return false, w.err
}

// groupSegments splits the segments to clean (those below end) into
// groups that each fit one segment: at most segment.bytes together and an
// offset span a segment can index (Kafka's groupSegmentsBySize).
func (l *Log) groupSegments(segments []*segment, end, firstUncleanable rb.Offset) [][]*segment {
	var groups [][]*segment
	for i := 0; i < len(segments) && segments[i].base < end; {
		group := []*segment{segments[i]}
		size := segments[i].size
		for i++; i < len(segments) && segments[i].base < end; i++ {
			last := firstUncleanable - 1
			if i+1 < len(segments) {
				last = segments[i+1].base - 1
			}
			if size+segments[i].size > l.cfg.SegmentBytes || last-group[0].base > 1<<31-1 {
				break
			}
			group = append(group, segments[i])
			size += segments[i].size
		}
		groups = append(groups, group)
	}
	return groups
}

// cleanGroup writes what the filter keeps of a group's batches into a
// cleaned segment and swaps it in.
func (l *Log) cleanGroup(group []*segment, read map[*segment]segmentState, cuts uint64, filter *batchFilter, throttle func(int64), stats *CleanStats) (bool, error) {
	cleaned, err := createCleanedSegment(l.fs, l.dir, group[0].base, l.cfg)
	if err != nil {
		return false, err
	}
	if err := writeCleaned(cleaned, group, filter, throttle, stats); err != nil {
		return false, errors.Join(err, discardCleaned(l.fs, l.dir, cleaned))
	}
	return l.swapCleaned(cleaned, group, read, cuts)
}

// segmentState is what a cleaning saw of a segment it read.
type segmentState struct {
	size        int64
	truncations uint64
}

const cleanedFlushBytes = 1 << 20

func writeCleaned(cleaned *segment, group []*segment, filter *batchFilter, throttle func(int64), stats *CleanStats) error {
	out := make([]byte, 0, cleanedFlushBytes+64<<10)
	flush := func() error {
		if len(out) == 0 {
			return nil
		}
		if throttle != nil {
			throttle(int64(len(out)))
		}
		stats.BytesWritten += int64(len(out))
		if _, err := cleaned.appendBatches(out); err != nil {
			return err
		}
		startWriteBehind(cleaned.takeWriteBehind())
		out = out[:0]
		return nil
	}
	for _, s := range group {
		w := s.walk(0, s.size, true)
		for w.next() {
			if throttle != nil {
				throttle(int64(len(w.batch)))
			}
			var err error
			if out, err = filter.filter(out, w.batch); err != nil {
				w.close()
				return err
			}
			if len(out) >= cleanedFlushBytes {
				if err := flush(); err != nil {
					w.close()
					return err
				}
			}
		}
		w.close()
		if w.err != nil {
			return w.err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return cleaned.seal()
}

// mapKeys puts the keys of b's records at or past firstDirty in m; full
// says it stopped because m is full (b is then not wholly mapped).
func (f *batchFilter) mapKeys(m *OffsetMap, b rb.Batch, firstDirty rb.Offset) (bool, error) {
	return mapBatchKeys(m, b, firstDirty, &f.decompressed)
}

// String names the cleaning for logs.
func (s CleanStats) String() string {
	return fmt.Sprintf("offsets [%d, %d): %d segments into %d, %d of %d records kept, %d -> %d bytes, %d keys, %v",
		s.FirstDirty, s.End, s.Segments, s.Groups, s.RecordsKept, s.RecordsRead, s.BytesRead, s.BytesWritten, s.MapKeys, s.Duration)
}
