package logstore

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"sync"
	"sync/atomic"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// segment is one <baseOffset>.log file of whole batches with its offset
// and time indexes. Invariants: the log file is exactly size bytes of
// whole, valid batches with strictly increasing offsets, all >= base;
// next is the offset after the last batch (base when empty).
type segment struct {
	fs      vfs.FS
	dir     string
	base    rb.Offset
	log     vfs.File
	offsets *index
	times   *index

	size            int64
	next            rb.Offset
	maxTimestamp    int64  // largest batch max timestamp; -1 when empty
	maxTimestampRel uint32 // the last offset of the batch holding it, relative
	bytesSinceIndex int64
	indexInterval   int64
	indexBytesMax   int
	unsealed        bool      // indexes mapped with room to grow since the last seal
	untrimmed       bool      // idle with indexes of their unsealed size on disk (idleUntrimmed)
	indexMissing    bool      // an index file was missing at open: load rebuilds both
	opened          time.Time // for roll by age: the first append, or the open
	// writeBehind is how many appended bytes start their write-back
	// (0: never; every append is synced); writtenBack is where the last
	// one ended; behind is the range (offset, length) due and not yet
	// started (startWriteBehind).
	writeBehind, writtenBack int64
	behind                   [2]int64
	// truncations counts truncateTo calls: a cleaning swaps its cleaned
	// copy in only if the segment is as it read it (size and truncations).
	truncations uint64

	// refs counts the log's own reference plus one per outstanding read.
	// The files close when it drops to zero.
	refs atomic.Int32

	// files bounds the open files of idle segments (files.go; nil: no
	// bound). hmu guards what the cache reads and changes: pins (readers
	// using the files now), held (written to: never evicted), evicted
	// (log closed, indexes unmapped) and gone (released); elem is
	// guarded by files.mu.
	files   *fileCache
	hmu     sync.Mutex
	pins    int
	held    bool
	evicted bool
	gone    bool
	elem    *list.Element
}

func segmentPath(dir string, base rb.Offset, ext string) string {
	return path.Join(dir, fmt.Sprintf("%020d%s", base, ext))
}

const (
	extLog       = ".log"
	extIndex     = ".index"
	extTimeIndex = ".timeindex"
)

// createSegment makes the three files of an empty segment. The caller
// syncs the directory.
func createSegment(fs vfs.FS, dir string, base rb.Offset, cfg Config) (*segment, error) {
	return createSegmentFiles(fs, dir, base, cfg, "")
}

// createSegmentFiles is createSegment with suffix after each file name
// (the cleaner writes <base>.log.cleaned and its indexes).
func createSegmentFiles(fs vfs.FS, dir string, base rb.Offset, cfg Config, suffix string) (*segment, error) {
	s, err := createSegmentLog(fs, dir, base, cfg, suffix)
	if err != nil {
		return nil, err
	}
	if s.offsets, err = openIndex(fs, segmentPath(dir, base, extIndex)+suffix, offsetEntrySize, cfg.IndexBytesMax, true); err != nil {
		s.log.Close()
		return nil, err
	}
	if s.times, err = openIndex(fs, segmentPath(dir, base, extTimeIndex)+suffix, timeEntrySize, cfg.IndexBytesMax, true); err != nil {
		s.offsets.close()
		s.log.Close()
		return nil, err
	}
	s.unsealed = true
	s.track(cfg.files)
	return s, nil
}

// createSegmentLog makes the log file of an empty segment; the caller
// gives it its indexes.
func createSegmentLog(fs vfs.FS, dir string, base rb.Offset, cfg Config, suffix string) (*segment, error) {
	log, err := fs.Create(segmentPath(dir, base, extLog) + suffix)
	if err != nil {
		return nil, err
	}
	s := &segment{fs: fs, dir: dir, base: base, log: log, next: base, maxTimestamp: -1, opened: cfg.now(), indexInterval: cfg.IndexIntervalBytes, indexBytesMax: cfg.IndexBytesMax,
		writeBehind: cfg.writeBehindBytes()}
	s.refs.Store(1)
	return s, nil
}

// track counts the segment's open files in c and holds it (see files.go).
func (s *segment) track(c *fileCache) {
	s.files, s.held = c, true
	s.offsets.files, s.times.files = c, c
	c.fileOpened(1)
	c.mapped(len(s.offsets.mapped), 1, false)
	c.mapped(len(s.times.mapped), 1, false)
	c.evict() // idle ones, to make room for this one
}

// openSegment opens an existing segment. Indexes that are missing or fail
// their checks are rebuilt from the log. The active segment's indexes are
// mapped with room to grow.
func openSegment(fs vfs.FS, dir string, base rb.Offset, cfg Config) (*segment, error) {
	log, err := fs.Open(segmentPath(dir, base, extLog))
	if err != nil {
		return nil, err
	}
	size, err := log.Size()
	if err != nil {
		log.Close()
		return nil, err
	}
	s := &segment{fs: fs, dir: dir, base: base, log: log, size: size, next: base, maxTimestamp: -1, opened: cfg.now(), indexInterval: cfg.IndexIntervalBytes, indexBytesMax: cfg.IndexBytesMax,
		writeBehind: cfg.writeBehindBytes(), writtenBack: size}
	s.refs.Store(1)
	// Indexes open at their file size, even the active segment's: growing
	// a file is a write, and a log opened after a clean shutdown must not
	// write before its first append removes the clean-shutdown marker
	// (a crash in between would leave a grown, unsynced index that the
	// marker says to trust). unseal grows them when writing begins.
	const capacity = 0
	var offsetsCreated, timesCreated bool
	if s.offsets, offsetsCreated, err = openOrCreateIndex(fs, segmentPath(dir, base, extIndex), offsetEntrySize, capacity); err != nil {
		log.Close()
		return nil, err
	}
	if s.times, timesCreated, err = openOrCreateIndex(fs, segmentPath(dir, base, extTimeIndex), timeEntrySize, capacity); err != nil {
		s.offsets.close()
		log.Close()
		return nil, err
	}
	s.unsealed = false
	s.indexMissing = offsetsCreated || timesCreated
	s.track(cfg.files)
	return s, nil
}

// openOrCreateIndex opens the index name, or creates it empty (created is
// true) when it is missing.
func openOrCreateIndex(fs vfs.FS, name string, entrySize, capacity int) (x *index, created bool, err error) {
	exists, err := fs.Exists(name)
	if err != nil {
		return nil, false, err
	}
	x, err = openIndex(fs, name, entrySize, capacity, !exists)
	return x, !exists, err
}

// load derives next and maxTimestamp on a segment trusted to be whole:
// it checks the indexes and walks the batches after the last index entry,
// checking their headers (checkHeader, limit the next segment's base).
// It reports ErrCorrupt when that walk fails; the caller recovers. A
// missing index is rebuilt: an empty time index would lose the segment's
// max timestamp when an earlier batch holds it.
//
// The active segment's indexes are also rebuilt when their last entries
// do not name the last offsets of their batches (an index written by the
// previous release, keyed by first offsets): the segment keeps growing,
// and it costs one header walk of one segment. Sealed segments are not
// checked: rebuilding them all would read the whole log at the first
// start, and lookups are correct with either key (see lookupOffset).
func (s *segment) load(active bool, limit rb.Offset) error {
	if s.indexMissing || s.offsets.validateOffsets(s.size) != nil || s.times.validateTimes() != nil {
		s.indexMissing = false
		return s.rebuildIndexes(s.size, limit)
	}
	var from int64
	lastKey := int64(-1)
	if n := s.offsets.entries; n > 0 {
		relative, position := s.offsets.offsetAt(n - 1)
		from, lastKey = int64(position), int64(relative)
	}
	if n := s.times.entries; n > 0 {
		s.maxTimestamp, s.maxTimestampRel = s.times.timeAt(n - 1)
	}
	keyMatches := true
	var prevHeader [rb.HeaderSize]byte
	var prev rb.Batch
	w := s.walk(from, s.size, false)
	defer w.close()
	for w.next() {
		if w.position == from && lastKey >= 0 {
			keyMatches = int64(w.batch.LastOffset()-s.base) == lastKey
		}
		if err := checkHeader(w.batch, prev, s.base, limit); err != nil {
			return fmt.Errorf("logstore: segment %s at position %d: %w", segmentPath(s.dir, s.base, extLog), w.position, err)
		}
		prev = rb.Batch(prevHeader[:copy(prevHeader[:], w.batch)])
		s.observe(w.batch)
	}
	if w.err != nil {
		return w.err
	}
	// Entries that point past the last batch cannot be this segment's.
	if s.indexesBeyond(s.next) || active && !keyMatches {
		return s.rebuildIndexes(s.size, limit)
	}
	if active {
		matches, err := s.lastTimeEntryMatches()
		if err != nil {
			return err
		}
		if !matches {
			return s.rebuildIndexes(s.size, limit)
		}
	}
	return nil
}

// lastTimeEntryMatches reports whether the time index's last entry names
// the last offset of a batch whose max timestamp is the entry's (or the
// index is empty).
func (s *segment) lastTimeEntryMatches() (bool, error) {
	n := s.times.entries
	if n == 0 {
		return true, nil
	}
	timestamp, relative := s.times.timeAt(n - 1)
	target := s.base + rb.Offset(relative)
	w := s.walk(int64(s.offsets.lookupOffset(relative)), s.size, false)
	defer w.close()
	for w.next() {
		if last := w.batch.LastOffset(); last >= target {
			return last == target && w.batch.MaxTimestamp() == timestamp, nil
		}
	}
	return false, w.err
}

// indexesBeyond reports whether an index's last entry names an offset at
// or after next.
func (s *segment) indexesBeyond(next rb.Offset) bool {
	limit := uint32(next - s.base)
	if n := s.offsets.entries; n > 0 {
		if relative, _ := s.offsets.offsetAt(n - 1); relative >= limit {
			return true
		}
	}
	if n := s.times.entries; n > 0 {
		if _, relative := s.times.timeAt(n - 1); relative >= limit {
			return true
		}
	}
	return false
}

// rebuildIndexes drops both indexes and rebuilds them from the batches
// in [0, end), reading headers only, which it checks (checkHeader, limit
// the next segment's base): a failure wraps recordbatch.ErrCorrupt.
func (s *segment) rebuildIndexes(end int64, limit rb.Offset) error {
	if err := s.resetIndexes(); err != nil {
		return err
	}
	s.next, s.maxTimestamp, s.maxTimestampRel, s.bytesSinceIndex = s.base, -1, 0, 0
	var prevHeader [rb.HeaderSize]byte
	var prev rb.Batch
	w := s.walk(0, end, false)
	defer w.close()
	for w.next() {
		if err := checkHeader(w.batch, prev, s.base, limit); err != nil {
			return fmt.Errorf("logstore: segment %s at position %d: %w", segmentPath(s.dir, s.base, extLog), w.position, err)
		}
		prev = rb.Batch(prevHeader[:copy(prevHeader[:], w.batch)])
		s.index(w.position, w.batch)
	}
	return w.err
}

// recover verifies every batch (framing, CRC, the header fields the CRC
// does not cover: checkHeader, with limit the next segment's base, and
// check, which returns an error wrapping recordbatch.ErrCorrupt to reject
// a batch), cuts the log at the first bad one and rebuilds the indexes.
// A batch whose base offset is at or below the last offset of a previous
// batch that is not anchored cuts before that previous batch (see
// anchored). Before cutting, keep(position, cause) must keep the bytes
// from position on; its error leaves the segment as it was. It returns
// the number of bytes cut.
func (s *segment) recover(check func(b rb.Batch) error, limit rb.Offset, keep func(position int64, cause error) error) (int64, error) {
	if err := s.resetIndexes(); err != nil {
		return 0, err
	}
	s.next, s.maxTimestamp, s.maxTimestampRel, s.bytesSinceIndex = s.base, -1, 0, 0
	// The previous batch is indexed once the batch after it confirms its
	// offsets (or at the end): its header is copied, as the walk's window
	// moves on.
	var prevHeader [rb.HeaderSize]byte
	var prev rb.Batch
	var prevAt, good int64
	prevAnchored := false
	var cause error
	w := s.walk(0, s.size, true)
	defer w.close()
	for w.next() {
		b := w.batch
		if cause = checkHeader(b, prev, s.base, limit); cause == nil {
			cause = check(b)
		}
		if cause != nil {
			if errors.Is(cause, errOutOfOrder) && !prevAnchored {
				good, prev = prevAt, nil
			}
			break
		}
		if prev != nil {
			s.index(prevAt, prev)
		}
		prevAnchored = anchored(b, prev, prevAnchored, s.base)
		prev, prevAt = rb.Batch(prevHeader[:copy(prevHeader[:], b[:rb.HeaderSize])]), w.position
		good = w.position + int64(len(b))
	}
	if prev != nil {
		s.index(prevAt, prev)
	}
	if err := w.err; err != nil {
		if !errors.Is(err, rb.ErrCorrupt) && !errors.Is(err, rb.ErrTruncated) {
			return 0, err
		}
		cause = err
	}
	cut := s.size - good
	if cut > 0 {
		if err := keep(good, cause); err != nil {
			return 0, err
		}
		if err := s.log.Truncate(good); err != nil {
			return 0, err
		}
		if err := s.log.Sync(); err != nil {
			return 0, err
		}
		s.size = good
	}
	return cut, nil
}

// index records batch b, which starts at position, in the indexes and in
// the segment's running state, as Kafka's LogSegment.append does: once
// more than indexInterval bytes were written since the last indexed batch
// started (so never the segment's first batch), the offset index takes
// (b's last offset, position) and the time index (the max timestamp so
// far, the last offset of its batch) if the maximum grew. When either
// index is full the entry is skipped (both, so that load's walk from the
// last offset entry still sees every batch after the last time entry):
// the index is sparse, a lookup just walks further. shouldRoll rolls
// before an index fills, except when one append into an empty segment
// needs more entries than the index holds.
func (s *segment) index(position int64, b rb.Batch) {
	s.observe(b)
	if s.bytesSinceIndex > s.indexInterval && !s.offsets.full() && !s.times.full() {
		s.offsets.appendOffset(uint32(b.LastOffset()-s.base), uint32(position))
		s.times.appendTime(s.maxTimestamp, s.maxTimestampRel)
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += b.SizeOnDisk()
}

// observe advances next and the max timestamp so far, which is kept with
// the last offset of the batch holding it (Kafka's
// maxTimestampAndOffsetSoFar). A batch without records (Kafka's cleaner
// keeps one, header only, for its producer's state) holds no timestamp:
// the cleaner's own segment takes its maximum from the records it keeps,
// and DumpLogSegments checks an entry against its batch's records.
func (s *segment) observe(b rb.Batch) {
	s.next = b.NextOffset()
	if t := b.MaxTimestamp(); t > s.maxTimestamp && b.RecordCount() > 0 {
		s.maxTimestamp, s.maxTimestampRel = t, uint32(b.LastOffset()-s.base)
	}
}

// walker iterates over the batches in [from, to) of a segment's log
// file: for w.next() { w.position, w.batch }, then w.err, then w.close().
// With verify the whole batch is read and its CRC checked; without, only
// its header (w.batch is then a header view: see recordbatch.ParseHeader).
// It stops at the first error, wrapped with the segment and position.
type walker struct {
	s        *segment
	r        windowReader
	position int64 // of batch
	nextAt   int64
	to       int64
	verify   bool
	batch    rb.Batch
	err      error
}

func (s *segment) walk(from, to int64, verify bool) walker {
	r := newWindowReader(s.log)
	if !verify {
		r.chunk = headerWindowSize
	}
	return walker{s: s, r: r, nextAt: from, to: to, verify: verify}
}

func (w *walker) close() { w.r.release() }

func (w *walker) next() bool {
	if w.err != nil || w.nextAt >= w.to {
		return false
	}
	b, err := w.read(w.nextAt)
	if err != nil {
		w.err = fmt.Errorf("logstore: segment %s at position %d: %w", segmentPath(w.s.dir, w.s.base, extLog), w.nextAt, err)
		return false
	}
	w.position, w.batch = w.nextAt, b
	w.nextAt += b.SizeOnDisk()
	return true
}

func (w *walker) read(position int64) (rb.Batch, error) {
	header, err := w.r.peek(position, rb.HeaderSize, w.to)
	if err != nil {
		return nil, err
	}
	b, err := rb.ParseHeader(header)
	if err != nil {
		return nil, err
	}
	size := b.SizeOnDisk()
	if !w.verify {
		if position+size > w.to {
			return nil, fmt.Errorf("%w: batch of %d bytes past the end", rb.ErrTruncated, size)
		}
		return b, nil
	}
	whole, err := w.r.peek(position, int(size), w.to)
	if err != nil {
		return nil, err
	}
	if b, err = rb.Parse(whole); err != nil {
		return nil, err
	}
	return b, b.Verify()
}

// findPosition returns the position of the first batch whose last offset
// is >= target, or s.size when there is none.
func (s *segment) findPosition(target rb.Offset) (int64, error) {
	position, _, err := s.findBatch(target)
	return position, err
}

// findBatch is findPosition that also returns the size of the batch found
// (0 when there is none).
func (s *segment) findBatch(target rb.Offset) (position, size int64, err error) {
	if target >= s.next {
		return s.size, 0, nil
	}
	var from int64
	if target > s.base {
		from = int64(s.offsets.lookupOffset(uint32(target - s.base)))
	}
	w := s.walk(from, s.size, false)
	defer w.close()
	for w.next() {
		if w.batch.LastOffset() >= target {
			return w.position, w.batch.SizeOnDisk(), nil
		}
	}
	return s.size, 0, w.err
}

// findTimestamp returns the base offset and position of the first batch
// whose max timestamp is >= timestamp.
func (s *segment) findTimestamp(timestamp int64) (rb.Offset, int64, bool, error) {
	if s.maxTimestamp < timestamp {
		return 0, 0, false, nil
	}
	var from int64
	if relative, ok := s.times.lookupTime(timestamp); ok {
		from = int64(s.offsets.lookupOffset(relative))
	}
	w := s.walk(from, s.size, false)
	defer w.close()
	for w.next() {
		if w.batch.MaxTimestamp() >= timestamp {
			return w.batch.BaseOffset(), w.position, true, nil
		}
	}
	return 0, 0, false, w.err
}

// appendBatches writes whole, validated batches at the end of the log file.
// On a write error the file is cut back so it holds no partial batch; when
// that fails too, uncertain is true: the file may hold a partial batch
// past size, and the write position is unknown.
func (s *segment) appendBatches(batches []byte) (uncertain bool, err error) {
	if _, err := s.log.Write(batches); err != nil {
		if terr := s.log.Truncate(s.size); terr != nil {
			return true, fmt.Errorf("%w (and cutting back the partial write failed: %v)", err, terr)
		}
		return false, err
	}
	position := s.size
	for it := rb.NewIter(batches, false); it.Next(); {
		s.index(position+int64(it.Position()), it.Batch())
	}
	s.size += int64(len(batches))
	if s.writeBehind > 0 && s.size-s.writtenBack >= s.writeBehind {
		if s.behind[1] == 0 {
			s.behind[0] = s.writtenBack
		}
		s.behind[1] = s.size - s.behind[0]
		s.writtenBack = s.size
	}
	return false, nil
}

// takeWriteBehind returns the file and the range whose write-back is due,
// and forgets the range: the caller starts it (Log.unlockWritingBehind
// does so outside the log's lock).
func (s *segment) takeWriteBehind() (vfs.File, [2]int64) {
	due := s.behind
	s.behind = [2]int64{}
	return s.log, due
}

// startWriteBehind starts the write-back of what takeWriteBehind returns.
// Its error is the next Sync's to report: the kernel keeps a write-back
// error for the file's next fdatasync. The file may have been closed
// since (a roll syncs it, a removal drops it): that error says nothing.
func startWriteBehind(file vfs.File, due [2]int64) {
	if due[1] > 0 {
		_ = file.WriteBehind(due[0], due[1])
	}
}

// truncateTo removes every batch from position on, rebuilds the indexes
// for what is left, and syncs. The segment follows the file even when the
// sync fails.
func (s *segment) truncateTo(position int64) error {
	if position >= s.size {
		return nil
	}
	if err := s.log.Truncate(position); err != nil {
		return err
	}
	s.size, s.writtenBack, s.behind = position, min(s.writtenBack, position), [2]int64{}
	s.truncations++
	if err := s.rebuildIndexes(position, math.MaxInt64); err != nil {
		return err
	}
	return s.log.Sync()
}

// seal is called when the segment stops being active: a final time index
// entry, then indexes trimmed and everything synced.
func (s *segment) seal() error {
	if !s.unsealed && !s.untrimmed && s.isIdle() {
		return nil // nothing written since it was sealed or opened
	}
	if s.untrimmed {
		// Mapped at their size again, as before idleUntrimmed, so the
		// final time entry fits as it did.
		if err := s.unseal(); err != nil {
			return err
		}
	}
	if err := s.hold(); err != nil {
		return err
	}
	if s.maxTimestamp >= 0 && !s.times.full() {
		s.times.appendTime(s.maxTimestamp, s.maxTimestampRel)
	}
	if err := s.log.Sync(); err != nil {
		return err
	}
	if err := s.offsets.trim(); err != nil {
		return err
	}
	if err := s.times.trim(); err != nil {
		return err
	}
	s.unsealed, s.untrimmed = false, false
	return nil
}

// idleUntrimmed lets the file cache close the active segment that
// recovery rebuilt after an unclean stop, without trimming its indexes:
// a trim syncs both index files, 200,000 syncs at the open of 100,000
// partitions. The files keep their unsealed size (zeros past the entries)
// until the next seal (a roll, Close) trims them; lookups map only the
// entries, and the first append maps them with room to grow again.
func (s *segment) idleUntrimmed() {
	for _, x := range []*index{s.offsets, s.times} {
		if x.entries == 0 {
			_ = x.unmap() // nothing to look up; a failed unmap stays mapped
		}
	}
	s.unsealed, s.untrimmed = false, true
	s.idle()
}

// unmapIndexes unmaps a sealed segment's indexes until a lookup needs
// them. It saves mappings and nothing else: an index that fails to unmap
// stays mapped and readable.
func (s *segment) unmapIndexes() {
	s.offsets.unmapUntilRead()
	s.times.unmapUntilRead()
}

// resetIndexes empties both indexes, mapped with room to grow (unsealed),
// for a rebuild.
func (s *segment) resetIndexes() error {
	if err := s.offsets.reset(s.indexBytesMax); err != nil {
		return err
	}
	if err := s.times.reset(s.indexBytesMax); err != nil {
		return err
	}
	s.unsealed = true
	return nil
}

// unseal maps the indexes with room to grow, for appends or a rebuild.
func (s *segment) unseal() error {
	if s.unsealed {
		return nil
	}
	if err := s.hold(); err != nil {
		return err
	}
	if err := s.offsets.grow(s.indexBytesMax); err != nil {
		return err
	}
	if err := s.times.grow(s.indexBytesMax); err != nil {
		return err
	}
	s.unsealed = true
	return nil
}

func (s *segment) acquire() { s.refs.Add(1) }

// release drops one reference; the last one closes the files.
func (s *segment) release() error {
	if s.refs.Add(-1) > 0 {
		return nil
	}
	if !s.forget() {
		return nil // evicted: closed already
	}
	s.files.fileOpened(-1)
	err := s.offsets.close()
	if terr := s.times.close(); err == nil {
		err = terr
	}
	if lerr := s.log.Close(); err == nil {
		err = lerr
	}
	return err
}

// removeFiles deletes the segment's files; open reads keep working until
// they release. The caller syncs the directory and releases the log's
// reference.
func (s *segment) removeFiles() error {
	for _, ext := range []string{extLog, extIndex, extTimeIndex} {
		if ext == extIndex && s.offsets.absent || ext == extTimeIndex && s.times.absent {
			continue // never made (see newLog)
		}
		if err := s.fs.Remove(segmentPath(s.dir, s.base, ext)); err != nil {
			return err
		}
	}
	return nil
}

// windowReader serves reads of a file from a reusable buffer.
type windowReader struct {
	chunk int // bytes to read ahead at a time: the buffer, or less
	file  vfs.File
	buf   *[]byte
	start int64 // file position of (*buf)[0]
	n     int   // valid bytes in *buf
}

const (
	windowSize = 64 << 10
	// headerWindowSize is the read-ahead of walks that read headers only:
	// a few index intervals' worth, so a lookup reads little past its batch.
	headerWindowSize = 8 << 10
)

var windowPool = sync.Pool{New: func() any { b := make([]byte, windowSize); return &b }}

func newWindowReader(file vfs.File) windowReader {
	return windowReader{file: file, buf: windowPool.Get().(*[]byte), chunk: windowSize}
}

func (r *windowReader) release() {
	if cap(*r.buf) == windowSize {
		windowPool.Put(r.buf)
	}
	r.buf = nil
}

// peek returns the size bytes at position, never reading at or past limit.
func (r *windowReader) peek(position int64, size int, limit int64) ([]byte, error) {
	if position+int64(size) > limit {
		return nil, fmt.Errorf("%w: %d bytes at %d past the end %d", rb.ErrTruncated, size, position, limit)
	}
	if position >= r.start && position+int64(size) <= r.start+int64(r.n) {
		offset := position - r.start
		return (*r.buf)[offset : offset+int64(size)], nil
	}
	if size > len(*r.buf) {
		grown := make([]byte, size)
		r.buf = &grown
	}
	want := min(int64(max(r.chunk, size)), int64(len(*r.buf)), limit-position)
	n, err := r.file.ReadAt((*r.buf)[:want], position)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == want) {
		return nil, fmt.Errorf("logstore: read at %d: %w", position, err)
	}
	r.start, r.n = position, n
	return (*r.buf)[:size], nil
}
