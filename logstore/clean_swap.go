package logstore

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
	"github.com/mirrord/mirrord/vfs"
)

// The cleaner's files in a partition directory:
//
//	<base>.log.cleaned, .index.cleaned, .timeindex.cleaned
//	    a cleaned segment being written; deleted at open unless a swap
//	    names it
//	cleaner-swap       "0\n<cleaned base>\n<old base> <old base> ...\n":
//	    the commit point of a swap; at open the swap is finished
//	cleaner-offset-checkpoint   "0\n<first dirty offset>\n"
//
// A swap (swapCleaned), each step durable before the next:
//
//  1. the cleaned segment's three files are written and synced;
//  2. cleaner-swap is written atomically: from here on the swap happens;
//  3. the old segments' files are removed;
//  4. the cleaned files are renamed to the segment names;
//  5. cleaner-swap is removed.
//
// A crash before 2 leaves the old segments (the .cleaned files are
// deleted at open); from 2 on, open finishes 3-5 (finishSwap), so the log
// holds either all old segments or the cleaned one, never a mix.
const (
	cleanedSuffix          = ".cleaned"
	cleanerSwapName        = "cleaner-swap"
	cleanerCheckpointName  = "cleaner-offset-checkpoint"
	noCleanerOffset        = rb.Offset(-1)
	cleanerCheckpointStart = "0\n"
)

// createCleanedSegment makes the .cleaned files of a segment at base.
func createCleanedSegment(fs vfs.FS, dir string, base rb.Offset, cfg Config) (*segment, error) {
	for _, ext := range []string{extLog, extIndex, extTimeIndex} {
		name := segmentPath(dir, base, ext) + cleanedSuffix
		if exists, err := fs.Exists(name); err != nil {
			return nil, err
		} else if exists {
			if err := fs.Remove(name); err != nil {
				return nil, err
			}
		}
	}
	return createSegmentFiles(fs, dir, base, cfg, cleanedSuffix)
}

// discardCleaned closes and deletes a cleaned segment not swapped in.
func discardCleaned(fs vfs.FS, dir string, s *segment) error {
	err := s.release()
	for _, ext := range []string{extLog, extIndex, extTimeIndex} {
		if rerr := fs.Remove(segmentPath(dir, s.base, ext) + cleanedSuffix); err == nil {
			err = rerr
		}
	}
	return err
}

// swapCleaned replaces the group's segments with cleaned (steps 2-5
// above) under the log's lock, unless the group is no longer in the log
// as the cleaning read it (a truncation or retention changed it) or the
// log was truncated since the cleaning began (cuts: its map may hold
// keys of removed records): then cleaned is discarded and swapped is
// false.
func (l *Log) swapCleaned(cleaned *segment, group []*segment, read map[*segment]segmentState, cuts uint64) (swapped bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.publishEnds()
	at := -1
	for i, s := range l.segments {
		if s == group[0] {
			at = i
		}
	}
	if at < 0 || at+len(group) >= len(l.segments) || l.closed || l.failed != nil || l.cuts != cuts {
		return false, discardCleaned(l.fs, l.dir, cleaned)
	}
	for k, s := range group {
		if l.segments[at+k] != s || read[s] != (segmentState{size: s.size, truncations: s.truncations}) {
			return false, discardCleaned(l.fs, l.dir, cleaned)
		}
	}
	return true, l.swapInto(cleaned, group, at)
}

// swapInto is swapCleaned once the group is known to be unchanged at at.
func (l *Log) swapInto(cleaned *segment, group []*segment, at int) error {
	if err := l.beginWrite(); err != nil {
		return errorsJoin(err, discardCleaned(l.fs, l.dir, cleaned))
	}
	bases := make([]rb.Offset, len(group))
	for k, s := range group {
		bases[k] = s.base
	}
	if err := WriteFileAtomic(l.fs, l.dir, cleanerSwapName, encodeSwap(cleaned.base, bases)); err != nil {
		return l.fail(err) // the swap may be committed: the next open finishes it
	}
	for _, s := range group {
		if err := s.removeFiles(); err != nil {
			return l.fail(err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(err)
	}
	if err := renameCleaned(l.fs, l.dir, cleaned.base); err != nil {
		return l.fail(err)
	}
	cleaned.offsets.name = segmentPath(l.dir, cleaned.base, extIndex)
	cleaned.times.name = segmentPath(l.dir, cleaned.base, extTimeIndex)
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(err)
	}
	if err := l.fs.Remove(path.Join(l.dir, cleanerSwapName)); err != nil {
		return l.fail(err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(err)
	}
	cleaned.idle()
	replaced := append([]*segment{cleaned}, l.segments[at+len(group):]...)
	l.segments = append(l.segments[:at], replaced...)
	var err error
	for _, s := range group {
		if rerr := s.release(); err == nil {
			err = rerr
		}
	}
	if err != nil {
		return l.fail(err)
	}
	return nil
}

func errorsJoin(a, b error) error {
	if b == nil {
		return a
	}
	return fmt.Errorf("%w (and discarding the cleaned segment: %v)", a, b)
}

// renameCleaned renames the .cleaned files of base that exist to the
// segment's names, the log file last.
func renameCleaned(fs vfs.FS, dir string, base rb.Offset) error {
	for _, ext := range []string{extIndex, extTimeIndex, extLog} {
		final := segmentPath(dir, base, ext)
		if exists, err := fs.Exists(final + cleanedSuffix); err != nil {
			return err
		} else if exists {
			if err := fs.Rename(final+cleanedSuffix, final); err != nil {
				return err
			}
		}
	}
	return nil
}

func encodeSwap(base rb.Offset, old []rb.Offset) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", base)
	for i, o := range old {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(int64(o), 10))
	}
	b.WriteByte('\n')
	return b.Bytes()
}

func decodeSwap(data []byte) (base rb.Offset, old []rb.Offset, err error) {
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 3 || lines[0] != "0" {
		return 0, nil, fmt.Errorf("%w: %s: %q", ErrCorrupt, cleanerSwapName, data)
	}
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, cleanerSwapName, err)
	}
	for _, field := range strings.Fields(lines[2]) {
		o, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, cleanerSwapName, err)
		}
		old = append(old, rb.Offset(o))
	}
	return rb.Offset(n), old, nil
}

// recoverCleaning runs at open, before the segments are listed: it
// finishes a committed swap and deletes cleaned files of one that was not
// committed. It reads the cleaner checkpoint.
func (l *Log) recoverCleaning() error {
	data, ok, err := ReadFile(l.fs, path.Join(l.dir, cleanerSwapName))
	if err != nil {
		return err
	}
	if ok {
		if err := l.finishSwap(data); err != nil {
			return err
		}
	}
	names, err := l.fs.List(l.dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.HasSuffix(name, cleanedSuffix) {
			if err := l.fs.Remove(path.Join(l.dir, name)); err != nil {
				return err
			}
		}
	}
	l.cleanerOffset = noCleanerOffset
	data, ok, err = ReadFile(l.fs, path.Join(l.dir, cleanerCheckpointName))
	if err != nil || !ok {
		return err
	}
	value, found := strings.CutPrefix(strings.TrimSuffix(string(data), "\n"), cleanerCheckpointStart)
	n, perr := strconv.ParseInt(value, 10, 64)
	if !found || perr != nil || n < 0 {
		return fmt.Errorf("%w: %s: %q", ErrCorrupt, cleanerCheckpointName, data)
	}
	l.cleanerOffset = rb.Offset(n)
	return nil
}

// finishSwap completes steps 3-5 of a committed swap.
func (l *Log) finishSwap(data []byte) error {
	base, old, err := decodeSwap(data)
	if err != nil {
		return err
	}
	cleanedLog := segmentPath(l.dir, base, extLog) + cleanedSuffix
	pending, err := l.fs.Exists(cleanedLog)
	if err != nil {
		return err
	}
	if pending { // the log file was not renamed yet: the old files may remain
		for _, o := range old {
			if err := removeSegmentFiles(l.fs, l.dir, o); err != nil {
				return err
			}
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			return err
		}
	}
	if err := renameCleaned(l.fs, l.dir, base); err != nil {
		return err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return err
	}
	if err := l.fs.Remove(path.Join(l.dir, cleanerSwapName)); err != nil {
		return err
	}
	return l.fs.SyncDir(l.dir)
}

// writeCleanerOffset persists the next cleaning's first dirty offset; l.mu
// is held.
func (l *Log) writeCleanerOffset(offset rb.Offset) error {
	l.cleanerOffset = offset
	return WriteFileAtomic(l.fs, l.dir, cleanerCheckpointName, fmt.Appendf(nil, "%s%d\n", cleanerCheckpointStart, offset))
}

// CleanerOffset is the cleaner checkpoint: the first dirty offset (-1
// before the first cleaning).
func (l *Log) CleanerOffset() rb.Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cleanerOffset
}

// mapBatchKeys puts the keys of b's records at or past firstDirty in m;
// full says it stopped because m is full. scratch is reused for
// decompression.
func mapBatchKeys(m *OffsetMap, b rb.Batch, firstDirty rb.Offset, scratch *[]byte) (bool, error) {
	section, err := records.Decompress(*scratch, b, cleanerRecordLimit)
	if err != nil {
		return false, err
	}
	if b.Codec() != rb.CodecNone {
		*scratch = section[:0]
	}
	it := records.NewIter(section)
	for it.Next() {
		r := it.Record()
		offset := b.BaseOffset() + rb.Offset(r.OffsetDelta)
		if r.Key == nil || offset < firstDirty {
			continue
		}
		if m.Full() {
			return true, nil
		}
		m.Put(r.Key, offset)
	}
	return false, it.Err()
}

// firstBatchTimestamp is the max timestamp of the segment's first batch
// (Kafka's getFirstBatchTimestamp), or -1 when it is empty or unreadable.
func (s *segment) firstBatchTimestamp() int64 {
	if s.size == 0 || s.pin() != nil {
		return -1
	}
	defer s.unpin()
	w := s.walk(0, s.size, false)
	defer w.close()
	if !w.next() {
		return -1
	}
	return w.batch.MaxTimestamp()
}
