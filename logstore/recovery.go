package logstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// TruncatedDir is the data directory's folder of removed bytes kept for
// the operator: recovery writes
// truncated/<topic>-<partition>/recovery-<segment base offset>-<position>.bytes,
// the raw bytes it cut from that segment at that position (a whole
// segment dropped after a corrupt one is kept from position 0). Failback
// keeps what it truncates in the same folder (engine/mirror_align.go).
const TruncatedDir = "truncated"

// keptNamesMax bounds the names tried for one kept file: recovery-B-P.bytes,
// then recovery-B-P.1.bytes and on, when an earlier recovery kept other
// bytes from the same segment and position (a crash between keeping and
// cutting keeps the same bytes twice, which loses nothing).
const keptNamesMax = 1000

// Truncation is one cut recovery made at open: bytes removed from a
// segment from Position to its end, or a whole segment (Position 0,
// WholeSegment) dropped after a corrupt one. Before anything is removed,
// the bytes are copied, synced, to Kept (a dropped segment's file is
// moved there); if that fails nothing is removed and the open fails.
type Truncation struct {
	// Partition is parsed from the log directory's name; zero when the
	// directory is not named <topic>-<partition>.
	Partition    TopicPartition
	Dir          string // the log directory
	Segment      string // the segment's .log file
	Position     int64  // where the removed bytes started in it
	Bytes        int64
	WholeSegment bool
	// FirstOffset and LastOffset span the removed batches whose headers
	// still frame (the walk stops at the first that does not: the bad
	// batch's own header may be the damaged part); -1 when none does.
	FirstOffset, LastOffset rb.Offset
	Kept                    string // the file holding the removed bytes
	Cause                   error  // why: the check the first removed batch failed
}

// Warn logs t as Kafka's LogSegment.recover does, at WARN, with every
// field.
func (t Truncation) Warn(logger *slog.Logger) {
	what := "log recovery truncated a segment: the removed bytes are kept"
	if t.WholeSegment {
		what = "log recovery dropped a segment after a corrupt one: its bytes are kept"
	}
	var partition []any // none for a log outside a topic's directory
	if t.Partition.Topic != "" {
		partition = []any{"topic", t.Partition.Topic, "partition", t.Partition.Partition}
	}
	logger.Warn(what, append(partition, "dir", t.Dir, "segment", t.Segment, "position", t.Position,
		"bytes", t.Bytes, "first_offset", int64(t.FirstOffset), "last_offset", int64(t.LastOffset), "kept", t.Kept, "cause", t.Cause)...)
}

// report hands l's completed truncations to Config.RecoveryTruncated, or
// logs them through slog.Default when it is nil.
func (l *Log) report() {
	for _, t := range l.truncations {
		if l.cfg.RecoveryTruncated != nil {
			l.cfg.RecoveryTruncated(t)
		} else {
			t.Warn(slog.Default())
		}
	}
	l.truncations = l.truncations[:0]
}

// keepRemoved copies [position, size) of the segment file at base to the
// truncated folder (keptDir), synced, or moves the file there when whole,
// and records the truncation it is for (l.report announces it once the
// cut is done).
//
// A failed copy (a full disk) fails the open: the bytes past a bad batch
// may hold acknowledged records (issue 19: 889 of them after one flipped
// byte), the file is their only copy, and cutting it cannot be undone,
// whereas a partition that does not open can be opened again once the
// disk has room. Kafka cuts without keeping; it has replicas to refetch
// from, and a mirror's only copy may be this one.
func (l *Log) keepRemoved(base rb.Offset, file vfs.File, position, size int64, whole bool, cause error) error {
	t := Truncation{Dir: l.dir, Segment: segmentPath(l.dir, base, extLog), Position: position, Bytes: size - position,
		WholeSegment: whole, FirstOffset: -1, LastOffset: -1, Cause: cause}
	t.Partition, _ = parsePartitionDirName(path.Base(l.dir))
	// As far as the headers frame: the walk stops at the first that does not.
	removed := &segment{fs: l.fs, dir: l.dir, base: base, log: file}
	w := removed.walk(position, size, false)
	for w.next() {
		if t.FirstOffset < 0 {
			t.FirstOffset = w.batch.BaseOffset()
		}
		t.LastOffset = w.batch.LastOffset()
	}
	w.close()

	dir, err := l.keptDir()
	if err != nil {
		return err
	}
	name, err := l.freeKeptName(dir, base, position)
	if err != nil {
		return err
	}
	t.Kept = path.Join(dir, name)
	if whole {
		// A whole segment moves: no copy, no space needed. Its old name
		// goes when the caller syncs the log directory; a crash before
		// that leaves both names, which loses nothing.
		if err := l.fs.Rename(t.Segment, t.Kept); err == nil {
			if err := l.fs.SyncDir(dir); err != nil {
				return fmt.Errorf("logstore: keep the segment recovery drops in %s: %w", t.Kept, err)
			}
			l.truncations = append(l.truncations, t)
			return nil
		}
		// Another file system (the log directory is a mount): copy.
	}
	copyRange := func(out io.Writer) error {
		_, err := io.Copy(out, io.NewSectionReader(file, position, size-position))
		return err
	}
	if err := WriteFileAtomicFrom(l.fs, dir, name, copyRange); err != nil {
		// Nothing is cut. A partial copy is not left to look like one.
		tmp := t.Kept + tmpSuffix
		if exists, _ := l.fs.Exists(tmp); exists {
			err = errors.Join(err, l.fs.Remove(tmp))
		}
		return fmt.Errorf("logstore: keep the bytes recovery removes in %s: %w", t.Kept, err)
	}
	l.truncations = append(l.truncations, t)
	return nil
}

// keptDir makes (durably) and returns the folder of l's kept bytes: the
// log directory's name under its parent's truncated/, which for a Dir is
// the data directory's.
func (l *Log) keptDir() (string, error) {
	parent := path.Join(path.Dir(l.dir), TruncatedDir)
	dir := path.Join(parent, path.Base(l.dir))
	if err := l.fs.MkdirAll(dir); err != nil {
		return "", fmt.Errorf("logstore: keep the bytes recovery removes: %w", err)
	}
	// New directories' entries are durable once their parents are synced.
	for _, d := range []string{path.Dir(l.dir), parent} {
		if err := l.fs.SyncDir(d); err != nil {
			return "", fmt.Errorf("logstore: keep the bytes recovery removes: %w", err)
		}
	}
	return dir, nil
}

// freeKeptName returns the first name of the kept file that is not taken.
func (l *Log) freeKeptName(dir string, base rb.Offset, position int64) (string, error) {
	for i := range keptNamesMax {
		name := fmt.Sprintf("recovery-%d-%d.bytes", base, position)
		if i > 0 {
			name = fmt.Sprintf("recovery-%d-%d.%d.bytes", base, position, i)
		}
		exists, err := l.fs.Exists(path.Join(dir, name))
		if err != nil || !exists {
			return name, err
		}
	}
	return "", fmt.Errorf("logstore: %s holds %d kept files for segment %d at %d", dir, keptNamesMax, base, position)
}

// errHeader marks a header field the CRC does not cover that contradicts
// the batch before it or the segment (it wraps recordbatch.ErrCorrupt, so
// recovery cuts there).
var errHeader = fmt.Errorf("%w: header", rb.ErrCorrupt)

// checkHeader checks what the CRC-32C does not cover in batch b of the
// segment at base, whose next segment starts at limit, after prev (nil
// for the segment's first batch); its errors wrap recordbatch.ErrCorrupt. The CRC covers attributes onward; base
// offset, batch length, partition leader epoch and magic are outside it.
// Magic and the batch length's bounds are recordbatch.Parse's; this adds:
//
//   - offsets strictly increase: b's base offset is at least prev's last
//     offset + 1, and at least the segment's base;
//   - b's last offset is below the next segment's base (its file name);
//   - the partition leader epoch does not go backwards within a segment
//     (Kafka's leader-epoch cache rule; the checkpoint check is
//     checkRecovered's);
//   - the record count is in [0, lastOffsetDelta + 1] (covered by the
//     CRC, but an append's CRC was computed by the writer).
//
// Gaps are allowed. A compacted log has them inside segments (the cleaner
// keeps only some batches of each segment), and a mirror copies its
// source's batches with the source's gaps. Kafka checks no more: its
// follower append (UnifiedLog.analyzeAndValidateRecords) requires
// offsets to be monotonic, not contiguous; LogValidator's count == last
// offset delta + 1 applies to client produce only; LogSegment.recover
// checks the CRC and the offset's range. A rule of last + 1 would hold
// only where the log knows it was never compacted nor mirrored, which a
// log opened with the node's default configuration does not know: the
// topic's cleanup.policy and role are set later, and a policy may have
// changed since the batches were written. So a base offset raised into a
// gap (or in the last batch of the active segment) cannot be told from a
// compaction gap; one raised past the next batch's base is caught (see
// anchored for where recovery then cuts).
func checkHeader(b, prev rb.Batch, base, limit rb.Offset) error {
	switch count := b.RecordCount(); {
	case count < 0 || int64(count) > int64(b.LastOffsetDelta())+1:
		return fmt.Errorf("%w: batch at offset %d holds %d records, its offsets span %d", errHeader, b.BaseOffset(), count, int64(b.LastOffsetDelta())+1)
	case b.BaseOffset() < base:
		return fmt.Errorf("%w: batch at offset %d below its segment's base %d", errHeader, b.BaseOffset(), base)
	case b.LastOffset() >= limit:
		return fmt.Errorf("%w: batch at offset %d ends at %d, at or past the next segment's base %d", errHeader, b.BaseOffset(), b.LastOffset(), limit)
	case b.LastOffset()-base > math.MaxInt32:
		return fmt.Errorf("%w: batch at offset %d ends more than 2^31-1 offsets past its segment's base %d", errHeader, b.BaseOffset(), base)
	case prev == nil:
		return nil
	case b.BaseOffset() <= prev.LastOffset():
		return fmt.Errorf("%w: batch at offset %d follows a batch ending at %d", errOutOfOrder, b.BaseOffset(), prev.LastOffset())
	case b.LeaderEpoch() < prev.LeaderEpoch():
		return fmt.Errorf("%w: batch at offset %d has leader epoch %d, below the previous batch's %d", errHeader, b.BaseOffset(), b.LeaderEpoch(), prev.LeaderEpoch())
	}
	return nil
}

// errOutOfOrder is checkHeader's error for a base offset at or below the
// previous batch's last offset: either batch may be the changed one.
var errOutOfOrder = fmt.Errorf("%w: offsets out of order", errHeader)

// anchored reports whether b's base offset is confirmed by something
// outside it: it is its segment's base (the file name), or it continues
// prev, itself anchored, at prev's last offset + 1. When a
// batch's base offset is at or below the previous batch's last offset,
// recovery cuts before the previous batch unless that one is anchored: a
// base offset raised by 5 in a log without gaps is no longer anchored,
// and the next batch contradicts it, so the cut goes at the raised batch,
// not after it (keeping it, with offsets it never had). The cost is one
// batch cut too many when a batch after a gap is lowered into its
// predecessor; recovery keeps what it cuts.
func anchored(b, prev rb.Batch, prevAnchored bool, base rb.Offset) bool {
	return b.BaseOffset() == base || prev != nil && prevAnchored && b.BaseOffset() == prev.LastOffset()+1
}

// errorsCorrupt reports whether err says the bytes are bad (rather than
// that they could not be read).
func errorsCorrupt(err error) bool {
	return errors.Is(err, rb.ErrCorrupt) || errors.Is(err, rb.ErrTruncated) || errors.Is(err, ErrCorrupt)
}
