package logstore

import (
	"errors"
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mirrord/mirrord/epoch"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

var (
	// ErrCorrupt marks data on disk that fails its checks.
	ErrCorrupt = errors.New("logstore: corrupt")
	// ErrInvalidAppend marks an append rejected before anything was
	// written: overlapping or out-of-order offsets, a decreasing leader
	// epoch, or a batch that is truncated or corrupt (then it also wraps
	// recordbatch.ErrCorrupt or recordbatch.ErrTruncated).
	ErrInvalidAppend = errors.New("logstore: invalid append")
	// ErrTooLarge: an append larger than a segment.
	ErrTooLarge = errors.New("logstore: append larger than segment.bytes")
	// ErrOffsetOutOfRange: a read outside [logStartOffset, logEndOffset].
	ErrOffsetOutOfRange = errors.New("logstore: offset out of range")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("logstore: log closed")
	// ErrFailed: an earlier write failed in a way that could not be undone;
	// the log refuses writes until it is reopened (which recovers it).
	ErrFailed = errors.New("logstore: log failed")
)

// Log is one partition's log: a directory of segments plus checkpoints.
//
// Concurrency: one mutex. Writers (append, truncate, roll, retention,
// flush) hold it exclusively; Read holds it shared while it looks up a
// position and takes a reference on the segment, then does no I/O under
// it. LogEndOffset and LatestEpoch take no lock: they read what the last
// writer published (publishEnds), so they never wait for a writer's syncs. Invariants, checked by checkInvariants in tests:
//
//	segments is non-empty and sorted by base; only the last is active
//	logStartOffset >= segments[0].base
//	logStartOffset <= highWatermark <= logEndOffset
//	every epoch entry starts in [logStartOffset, logEndOffset)
type Log struct {
	fs  vfs.FS
	dir string

	mu sync.RWMutex
	// endOffset and latestEpoch are what LogEndOffset and LatestEpoch
	// read, without mu (publishEnds).
	endOffset      atomic.Int64
	latestEpoch    atomic.Int32
	cfg            Config // SetConfig changes it
	lastAppend     lastAppend
	segments       []*segment
	logStartOffset rb.Offset
	highWatermark  rb.Offset
	epochs         *epoch.Cache
	cleanMarker    bool  // the clean-shutdown marker is on disk; remove before writing
	unflushed      bool  // bytes appended since the last sync
	failed         error // set once a write could not be undone
	closed         bool
	// cleanerOffset is the cleaner checkpoint, the first dirty offset (-1
	// before the first cleaning); cleaning serializes cleanings (Clean).
	cleanerOffset rb.Offset
	cleaning      sync.Mutex
	// cuts counts the truncations (TruncateTo, TruncateFullyAndStartAt)
	// since the open: a cleaning under way when one happens swaps nothing
	// more, as Kafka aborts it, since its offset map may hold the keys of
	// removed records (a record kept only because its key's later record
	// was, would be dropped with nothing left after it).
	cuts uint64
	// truncations are the cuts of the open under way, kept and not yet
	// reported (report).
	truncations []Truncation
}

// Open opens (creating if needed) the log in dir. After an unclean
// shutdown it recovers the active segment: every batch's framing and CRC
// is checked and a torn or corrupt tail is cut.
func Open(fs vfs.FS, dir string, cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := fs.MkdirAll(dir); err != nil {
		return nil, err
	}
	l := &Log{fs: fs, dir: dir, cfg: cfg}
	if err := l.load(); err != nil {
		for _, s := range l.segments {
			s.release()
		}
		return nil, fmt.Errorf("logstore: open %s: %w", dir, err)
	}
	l.publishEnds()
	return l, nil
}

// publishEnds stores the log end offset and latest epoch, as this write
// leaves them, for LogEndOffset and LatestEpoch (mu held exclusively, or
// l not yet shared); every writer that can move either defers it.
// Readers of these two (a Metadata answer, a mirror's describe) so never
// wait on mu behind a writer's syncs: they read what a reader holding mu
// shared just before the writer took it would have read.
func (l *Log) publishEnds() {
	l.endOffset.Store(int64(l.logEndOffset()))
	latest := rb.NoEpoch
	if e, ok := l.epochs.Latest(); ok {
		latest = e.Epoch
	}
	l.latestEpoch.Store(int32(latest))
}

func (l *Log) load() error {
	if err := l.recoverCleaning(); err != nil {
		return err
	}
	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	var offsets offsetsCheckpoint
	data, ok, err := ReadFile(l.fs, path.Join(l.dir, offsetsCheckpointName))
	if err != nil {
		return err
	}
	if ok {
		if offsets, err = decodeOffsetsCheckpoint(offsetsCheckpointName, data); err != nil {
			return err
		}
	}
	if l.epochs, err = l.readEpochs(); err != nil {
		return err
	}
	clean, err := l.fs.Exists(path.Join(l.dir, cleanShutdownName))
	if err != nil {
		return err
	}
	l.cleanMarker = clean
	// A crash during AdvanceLogStart may leave segments wholly below the
	// checkpointed start: finish deleting them.
	for len(bases) > 1 && bases[1] <= offsets.logStartOffset {
		if err := removeSegmentFiles(l.fs, l.dir, bases[0]); err != nil {
			return err
		}
		bases = bases[1:]
	}
	if err := l.openSegments(bases, clean, offsets.logStartOffset); err != nil {
		return err
	}
	if len(l.segments) == 0 {
		s, err := createSegment(l.fs, l.dir, offsets.logStartOffset, l.cfg)
		if err != nil {
			return err
		}
		l.segments = append(l.segments, s)
		if err := l.fs.SyncDir(l.dir); err != nil {
			return err
		}
	}
	if !clean {
		if err := l.dropTrailingEmpty(); err != nil {
			return err
		}
	}
	l.logStartOffset = max(offsets.logStartOffset, l.segments[0].base)
	leo := l.logEndOffset()
	if !clean && leo <= l.logStartOffset && (len(l.segments) > 1 || l.segments[0].base != l.logStartOffset) {
		// A crash lost everything a reader could see (perhaps the start
		// had moved past data that was not yet durable).
		return l.truncateFullyAndStartAt(l.logStartOffset)
	}
	l.highWatermark = min(max(offsets.highWatermark, l.logStartOffset), leo)
	changed := l.epochs.TruncateFromEnd(leo)
	changed = l.epochs.TruncateFromStart(l.logStartOffset) || changed
	if changed {
		return l.writeEpochs()
	}
	return nil
}

// openSegments opens the segments at bases. The last one is recovered
// unless the log was shut down cleanly; any other that fails its checks is
// recovered too, and the segments after a cut one are deleted.
//
// Every cut is kept first (keepRemoved) and reported once done (report).
func (l *Log) openSegments(bases []rb.Offset, clean bool, logStartOffset rb.Offset) error {
	check := func(b rb.Batch) error { return l.checkRecovered(b, logStartOffset) }
	for i, base := range bases {
		active := i == len(bases)-1
		limit := rb.Offset(math.MaxInt64) // the next segment's base: its batches end below it
		if !active {
			limit = bases[i+1]
		}
		s, err := openSegment(l.fs, l.dir, base, l.cfg)
		if err != nil {
			return err
		}
		l.segments = append(l.segments, s)
		keep := func(position int64, cause error) error {
			if !active {
				// The segments after go first: a crash before the cut
				// finds this one still corrupt and goes on.
				if err := l.dropSegmentsAfter(i, bases); err != nil {
					return err
				}
			}
			return l.keepRemoved(s.base, s.log, position, s.size, false, cause)
		}
		if active && !clean {
			_, err = s.recover(check, limit, keep)
		} else if err = s.load(active, limit); errorsCorrupt(err) {
			var cut int64
			if cut, err = s.recover(check, limit, keep); err == nil && cut > 0 && !active {
				l.report()
				return nil // it is the active segment now (recover unsealed it)
			}
		}
		if err != nil {
			return err
		}
		l.report()
		if s.unsealed && (!active || clean) {
			// Its indexes were rebuilt: make them durable at their size
			// now, so what a crash leaves matches what the marker claims.
			if err := s.seal(); err != nil {
				return err
			}
		}
		if !active || !s.unsealed {
			s.idle()
		} else if !clean {
			s.idleUntrimmed() // recovered: not written until an append
		}
	}
	return nil
}

// dropSegmentsAfter deletes the segments after bases[i], newest first,
// before segment i is cut (as Kafka's recoverLog deletes the segments
// after one it truncated). Each one's log file is kept first, whole, as a
// cut from position 0.
func (l *Log) dropSegmentsAfter(i int, bases []rb.Offset) error {
	cause := fmt.Errorf("%w: segment %d before it is cut", ErrCorrupt, bases[i])
	for j := len(bases) - 1; j > i; j-- {
		if err := l.keepSegment(bases[j], cause); err != nil {
			return err
		}
		if err := removeSegmentFiles(l.fs, l.dir, bases[j]); err != nil {
			return err
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			return err
		}
	}
	return nil
}

// keepSegment keeps the whole log file of the segment at base (nothing
// when it is empty).
func (l *Log) keepSegment(base rb.Offset, cause error) error {
	file, err := l.fs.Open(segmentPath(l.dir, base, extLog))
	if err != nil {
		return err
	}
	defer file.Close()
	size, err := file.Size()
	if err != nil || size == 0 {
		return err
	}
	return l.keepRemoved(base, file, 0, size, true, cause)
}

// checkRecovered is the plausibility check of a recovered batch beyond its
// CRC, which does not cover baseOffset and partitionLeaderEpoch: since a
// new epoch is checkpointed before its first batch is written, the cache
// must already say that the batch's offsets belong to the batch's epoch.
// Batches wholly below the log start offset are not checked (their cache
// entries may be gone).
func (l *Log) checkRecovered(b rb.Batch, logStartOffset rb.Offset) error {
	if b.LastOffset() < logStartOffset {
		return nil
	}
	// Offsets below the earliest entry belong to batches without an epoch
	// (NoEpoch), which may precede the first epoch.
	e, ok := l.epochs.EpochForOffset(max(b.BaseOffset(), logStartOffset))
	if !ok {
		e = rb.NoEpoch
	}
	if e != b.LeaderEpoch() {
		return fmt.Errorf("%w: batch at offset %d has leader epoch %d, the epoch checkpoint says %d", rb.ErrCorrupt, b.BaseOffset(), b.LeaderEpoch(), e)
	}
	return nil
}

// assignEpoch starts a new cache entry when b's epoch is above the latest
// (as Kafka's LogSegment.recover does; lower epochs were checked away).
// The first entry of an empty log starts at the log end (its log start),
// not at b: a leader's epoch starts at its log end when it is elected, so
// a source whose head was compacted away (its first batch past its log
// start) holds the epoch from its log start, and so does its mirror.
// first says b is the first batch of the log.
func (l *Log) assignEpoch(b rb.Batch, first bool) {
	latest, ok := l.epochs.Latest()
	if e := b.LeaderEpoch(); e != rb.NoEpoch && (!ok || e > latest.Epoch) {
		start := b.BaseOffset()
		if first && !ok {
			start = min(start, l.logStartOffset)
		}
		l.epochs.Assign(e, start)
	}
}

// listSegments returns the base offsets of the *.log files, sorted, and
// removes leftovers: temporary files and indexes without a log.
func (l *Log) listSegments() ([]rb.Offset, error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return nil, err
	}
	logs := map[rb.Offset]bool{}
	var bases []rb.Offset
	for _, name := range names {
		if base, ok := parseSegmentName(name, extLog); ok {
			logs[base] = true
			bases = append(bases, base)
		}
	}
	for _, name := range names {
		orphan := strings.HasSuffix(name, tmpSuffix)
		for _, ext := range []string{extIndex, extTimeIndex} {
			if base, ok := parseSegmentName(name, ext); ok && !logs[base] {
				orphan = true
			}
		}
		if orphan {
			if err := l.fs.Remove(path.Join(l.dir, name)); err != nil {
				return nil, err
			}
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

func parseSegmentName(name, ext string) (rb.Offset, bool) {
	digits, ok := strings.CutSuffix(name, ext)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return rb.Offset(n), err == nil && n >= 0
}

func removeSegmentFiles(fs vfs.FS, dir string, base rb.Offset) error {
	for _, ext := range []string{extLog, extIndex, extTimeIndex} {
		name := segmentPath(dir, base, ext)
		if exists, err := fs.Exists(name); err != nil {
			return err
		} else if exists {
			if err := fs.Remove(name); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *Log) readEpochs() (*epoch.Cache, error) {
	data, ok, err := ReadFile(l.fs, path.Join(l.dir, epochCheckpointName))
	if err != nil || !ok {
		c, _ := epoch.New(nil)
		return c, err
	}
	entries, err := epoch.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, epochCheckpointName, err)
	}
	return epoch.New(entries)
}

func (l *Log) writeEpochs() error {
	return WriteFileAtomic(l.fs, l.dir, epochCheckpointName, epoch.Encode(l.epochs.Entries()))
}

func (l *Log) writeOffsets() error {
	c := offsetsCheckpoint{logStartOffset: l.logStartOffset, highWatermark: l.highWatermark}
	return WriteFileAtomic(l.fs, l.dir, offsetsCheckpointName, c.encode())
}

func (l *Log) active() *segment { return l.segments[len(l.segments)-1] }

func (l *Log) logEndOffset() rb.Offset { return l.active().next }

// LogEndOffset is the offset the next appended record gets.
func (l *Log) LogEndOffset() rb.Offset { return rb.Offset(l.endOffset.Load()) }

// LogStartOffset is the first offset a reader may ask for.
func (l *Log) LogStartOffset() rb.Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStartOffset
}

// HighWatermark is the end of what consumers may read.
func (l *Log) HighWatermark() rb.Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.highWatermark
}

// SetHighWatermark moves the high watermark, clamped to [logStartOffset,
// logEndOffset], and returns the value set. It is persisted by Checkpoint
// and Close, as Kafka checkpoints it periodically.
func (l *Log) SetHighWatermark(o rb.Offset) rb.Offset {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.highWatermark = min(max(o, l.logStartOffset), l.logEndOffset())
	return l.highWatermark
}

// Size is the number of bytes in all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var size int64
	for _, s := range l.segments {
		size += s.size
	}
	return size
}

// Config is the log's configuration.
func (l *Log) Config() Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// Segments is the number of segments.
func (l *Log) Segments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segments)
}

// Epochs returns a copy of the leader-epoch cache entries.
func (l *Log) Epochs() []epoch.Entry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.Entries()
}

// LatestEpoch is the leader epoch of the last batch, or NoEpoch.
func (l *Log) LatestEpoch() rb.Epoch { return rb.Epoch(l.latestEpoch.Load()) }

// EpochForOffset is the leader epoch of the batch holding offset (as the
// epoch cache covers it), or false when offset lies below every epoch.
func (l *Log) EpochForOffset(offset rb.Offset) (rb.Epoch, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.EpochForOffset(offset)
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch from this log.
func (l *Log) EndOffsetForEpoch(requested rb.Epoch) (rb.Epoch, rb.Offset) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.EndOffsetFor(requested, l.logEndOffset())
}

// TruncationPointForLastMirrorEpoch is where failback truncates this log
// for the last mirror epoch the new primary stored (see
// epoch.Cache.TruncationPointForLastMirrorEpoch).
func (l *Log) TruncationPointForLastMirrorEpoch(lmeEpoch rb.Epoch, lmeOffset rb.Offset) rb.Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.TruncationPointForLastMirrorEpoch(lmeEpoch, lmeOffset, l.logEndOffset())
}

// Divergence is the follower's step after a leader answered DivergingEpoch
// (or OffsetForLeaderEpoch) with leaderEpoch ending at leaderEndOffset:
// the offset to truncate to, and whether the search is done (see
// epoch.Cache.Divergence).
func (l *Log) Divergence(leaderEpoch rb.Epoch, leaderEndOffset rb.Offset) (rb.Offset, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.Divergence(leaderEpoch, leaderEndOffset, l.logEndOffset())
}

// Checkpoint persists the log start offset and high watermark.
func (l *Log) Checkpoint() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.writeOffsets()
}

// Close syncs and seals the active segment, writes the checkpoints and the
// clean-shutdown marker, and releases the segments (open reads keep them
// until they release).
// SetConfig replaces the log's configuration (a topic's configs
// changed). Segments made from now on take its index settings; the
// active segment keeps those it was made with, as Kafka's does.
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cfg.files = l.cfg.files // the Dir's
	l.cfg = cfg
	return nil
}

func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.closed = true
	var err error
	if l.failed == nil {
		err = l.active().seal()
		if err == nil {
			err = l.writeOffsets()
		}
		if err == nil && !l.cleanMarker {
			err = l.writeCleanMarker()
		}
	}
	// The segments stay listed (their files close when the last read
	// releases them) so the offset accessors keep answering after Close.
	for _, s := range l.segments {
		if rerr := s.release(); err == nil {
			err = rerr
		}
	}
	if err != nil {
		return fmt.Errorf("logstore: close %s: %w", l.dir, err)
	}
	return nil
}

// writeCleanMarker creates the empty clean-shutdown marker. Its name is
// all it says, so it needs no temporary file and no data sync: once the
// directory is synced it exists, and only then.
func (l *Log) writeCleanMarker() error {
	f, err := l.fs.Create(path.Join(l.dir, cleanShutdownName))
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return l.fs.SyncDir(l.dir)
}

// beginWrite is called, holding mu, before anything changes on disk: the
// clean-shutdown marker goes first so that a crash from here on is
// recovered.
func (l *Log) beginWrite() error {
	switch {
	case l.closed:
		return ErrClosed
	case l.failed != nil:
		return fmt.Errorf("%w: %w", ErrFailed, l.failed)
	case !l.cleanMarker:
		return nil
	}
	if err := l.fs.Remove(path.Join(l.dir, cleanShutdownName)); err != nil {
		return err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(err)
	}
	l.cleanMarker = false
	return nil
}

// fail marks the log failed after a write error that left it uncertain.
func (l *Log) fail(err error) error {
	if l.failed == nil {
		l.failed = err
	}
	return fmt.Errorf("logstore: %s: %w", l.dir, err)
}

// Roll seals the active segment and starts a new one at the log end
// offset, unless the active segment is empty.
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.publishEnds()
	if err := l.beginWrite(); err != nil {
		return err
	}
	if l.active().size == 0 {
		return nil
	}
	return l.roll(l.logEndOffset())
}

// Flush syncs appended bytes that are not yet durable.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || !l.unflushed {
		return nil
	}
	if err := l.active().log.Sync(); err != nil {
		return l.fail(err)
	}
	l.unflushed = false
	return nil
}
