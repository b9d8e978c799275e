package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/mirrord/mirrord/vfs"
)

const (
	offsetEntrySize = 8  // relative last offset of the batch uint32, position uint32
	timeEntrySize   = 12 // max timestamp so far int64, relative last offset of its batch uint32

	// noTimestamp is Kafka's RecordBatch.NO_TIMESTAMP: the time index only
	// takes timestamps above it.
	noTimestamp = -1
)

// index is a memory-mapped file of fixed-size entries sorted by their first
// key. While a segment is active its index file is mapped at IndexBytesMax
// bytes (zero filled past the last entry); trim cuts it to the entries at
// roll and close. Invariant: entries are strictly increasing in relative
// offset (and, for the time index, in timestamp).
//
// The index holds no file descriptor, only its mapping: a partition costs
// one descriptor (its active log file), not three. Resizing reopens the
// file by name. A sealed segment's index is not mapped until a lookup
// needs it (as Kafka's LazyIndex), so the mappings a process holds (at
// most vm.max_map_count) grow with the segments read, not with all.
type index struct {
	fs        vfs.FS
	name      string
	entrySize int
	mapping   vfs.Mapping
	mapped    []byte // mapping.Bytes()
	entries   int    // entries in use: mapped[:entries*entrySize]

	// lazy is set while the entries of a sealed index are known but its
	// file is not mapped; readable maps it. Lookups run under the log's
	// read lock, so several may race to map it: lazyMu serializes them,
	// and mapped is written before lazy is cleared.
	lazy   atomic.Bool
	lazyMu sync.Mutex
	// absent: the file is not made yet (a new partition's first segment,
	// until its first append or its seal); withFile makes it.
	absent bool

	files *fileCache // counts the mapping (nil: no count)
	// idle is set while the segment is in the file cache's care: its
	// mapped bytes count against log.index.cache.max.bytes. It changes
	// under lazyMu and the segment's hmu (setIdle).
	idle atomic.Bool
}

// setIdle moves the index's mapped bytes in or out of the cache's bound.
func (x *index) setIdle(idle bool) {
	x.lazyMu.Lock()
	defer x.lazyMu.Unlock()
	if x.idle.Load() != idle {
		x.idle.Store(idle)
		x.files.idleMapped(len(x.mapped), idle)
	}
}

// openIndex maps the index file name (creating it if missing) with room
// for capacity bytes. The entries in use are the first size/entrySize;
// the caller validates them.
func openIndex(fs vfs.FS, name string, entrySize, capacity int, create bool) (*index, error) {
	x := &index{fs: fs, name: name, entrySize: entrySize}
	var size int64
	err := x.withFile(create, func(file vfs.File) error {
		var err error
		if size, err = file.Size(); err != nil {
			return err
		}
		x.entries = int(size) / entrySize
		return x.mapFile(file, max(capacity-capacity%entrySize, x.entries*entrySize))
	})
	if err != nil {
		return nil, errors.Join(err, x.unmap()) // mapped, then Close failed
	}
	return x, nil
}

// withFile runs fn on the index file, opened (or created) for it alone.
func (x *index) withFile(create bool, fn func(vfs.File) error) error {
	var (
		file vfs.File
		err  error
	)
	if create || x.absent {
		file, err = x.fs.Create(x.name)
	} else {
		file, err = x.fs.Open(x.name)
	}
	if err != nil {
		return err
	}
	x.absent = false
	return errors.Join(fn(file), file.Close())
}

// mapFile maps size bytes of file; the index must be unmapped.
func (x *index) mapFile(file vfs.File, size int) error {
	mapping, err := file.Map(size)
	if err != nil {
		return err
	}
	x.mapping, x.mapped = mapping, mapping.Bytes()
	x.files.mapped(len(x.mapped), 1, x.idle.Load())
	x.lazy.Store(false)
	return nil
}

// unmapUntilRead unmaps a sealed index until a lookup needs it; when
// unmapping fails it stays mapped.
func (x *index) unmapUntilRead() {
	if x.entries == 0 || x.unmap() != nil {
		return // nothing to look up, or still mapped and readable
	}
	x.lazy.Store(true)
}

// readable maps a lazy index and returns how many entries lookups may
// use: all of them, or none when mapping failed (a lookup then walks the
// segment from its start, and the next one tries again).
func (x *index) readable() int {
	if !x.lazy.Load() {
		return x.entries
	}
	x.lazyMu.Lock()
	defer x.lazyMu.Unlock()
	if x.lazy.Load() {
		x.withFile(false, func(file vfs.File) error { return x.mapFile(file, x.entries*x.entrySize) })
		if x.lazy.Load() {
			return 0
		}
	}
	return x.entries
}

func (x *index) full() bool { return (x.entries+1)*x.entrySize > len(x.mapped) }

func (x *index) entry(i int) []byte { return x.mapped[i*x.entrySize : (i+1)*x.entrySize] }

// reset empties the index and maps it again with room for capacity
// bytes. It cuts the file instead of zeroing the entries in place: after
// a crash an index holds as many entries as its preallocated file (10 MiB
// by default), and zeroing them faults in and dirties every page, which
// made recovering 10,000 partitions write 200 GB.
func (x *index) reset(capacity int) error {
	if err := x.unmap(); err != nil {
		return err
	}
	x.entries = 0
	err := x.withFile(false, func(file vfs.File) error {
		if err := file.Truncate(0); err != nil {
			return err
		}
		return x.mapFile(file, capacity-capacity%x.entrySize)
	})
	x.emptyIfUnmapped()
	return err
}

// unmap releases the mapping. Until it is mapped again the index must not
// be read (a slice of an unmapped file is a segfault to read); the callers
// that map it again make it empty when that fails.
func (x *index) unmap() error {
	if x.mapping == nil {
		return nil
	}
	if err := x.mapping.Unmap(); err != nil {
		return err // still mapped, still readable
	}
	x.files.mapped(len(x.mapped), -1, x.idle.Load())
	x.mapping, x.mapped = nil, nil
	return nil
}

// trim unmaps the index, cuts the file to the entries in use and syncs it.
// The index stays readable: it is mapped again at its trimmed size, also
// when cutting or syncing failed.
func (x *index) trim() error {
	// The file's Sync below also writes what went through the mapping.
	if err := x.unmap(); err != nil {
		return err
	}
	size := x.entries * x.entrySize
	err := x.withFile(false, func(file vfs.File) error {
		err := file.Truncate(int64(size))
		if err == nil {
			err = file.Sync()
		}
		return errors.Join(err, x.mapFile(file, size))
	})
	x.emptyIfUnmapped()
	return err
}

// emptyIfUnmapped leaves the index empty when mapping it again failed,
// which is valid: lookups walk from the start.
func (x *index) emptyIfUnmapped() {
	if x.mapping == nil {
		x.entries = 0
		x.lazy.Store(false)
	}
}

func (x *index) sync() error {
	if x.mapping == nil {
		return nil
	}
	return x.mapping.Sync()
}

func (x *index) close() error { return x.unmap() }

// Offset index (Kafka's OffsetIndex): entry i says that the batch at file
// position Position ends at offset segmentBase + RelativeOffset, its last
// offset. The key is the batch's last offset, not its first, so that
// Kafka's tools and brokers read the file as their own.

func (x *index) offsetAt(i int) (relative uint32, position uint32) {
	e := x.entry(i)
	return binary.BigEndian.Uint32(e), binary.BigEndian.Uint32(e[4:])
}

// appendOffset adds an entry for the batch at position whose last offset
// is segmentBase + relative.
func (x *index) appendOffset(relative, position uint32) {
	e := x.mapped[x.entries*offsetEntrySize:]
	binary.BigEndian.PutUint32(e, relative)
	binary.BigEndian.PutUint32(e[4:], position)
	x.entries++
}

// lookupOffset returns the position of the last indexed batch whose key
// is <= relative, or 0 when there is none. The batch holding relative (or,
// across a compaction gap, the first after it) is there or later: a key
// <= relative is the last offset of a batch that ends at or before it.
// The same holds for an index of the previous release, whose keys were
// first offsets (a batch's first offset <= relative means the batch
// holding it is that one or a later one), so such an index stays correct
// for lookups until it is rebuilt.
func (x *index) lookupOffset(relative uint32) uint32 {
	i := sort.Search(x.readable(), func(i int) bool {
		r, _ := x.offsetAt(i)
		return r > relative
	})
	if i == 0 {
		return 0
	}
	_, position := x.offsetAt(i - 1)
	return position
}

// validateOffsets checks the invariants of an offset index against a log
// of logSize bytes.
func (x *index) validateOffsets(logSize int64) error {
	var lastRelative, lastPosition uint32
	for i := range x.entries {
		relative, position := x.offsetAt(i)
		if i > 0 && (relative <= lastRelative || position <= lastPosition) {
			return fmt.Errorf("%w: %s: entry %d (%d, %d) not after (%d, %d)", ErrCorrupt, x.name, i, relative, position, lastRelative, lastPosition)
		}
		if int64(position) >= logSize {
			return fmt.Errorf("%w: %s: entry %d position %d beyond log size %d", ErrCorrupt, x.name, i, position, logSize)
		}
		lastRelative, lastPosition = relative, position
	}
	return nil
}

// Time index (Kafka's TimeIndex): entry i says that Timestamp is the
// largest batch max timestamp of the segment up to some batch, and that
// the batch holding it ends at segmentBase + RelativeOffset (its last
// offset). Timestamps and offsets strictly increase from entry to entry.

func (x *index) timeAt(i int) (timestamp int64, relative uint32) {
	e := x.entry(i)
	return int64(binary.BigEndian.Uint64(e)), binary.BigEndian.Uint32(e[8:])
}

// appendTime adds an entry if timestamp grows the maximum so far, as
// Kafka's TimeIndex.maybeAppend: above the last entry's timestamp, or above
// noTimestamp when there is none.
func (x *index) appendTime(timestamp int64, relative uint32) {
	last, lastRelative := int64(noTimestamp), uint32(0)
	if x.entries > 0 {
		last, lastRelative = x.timeAt(x.entries - 1)
	}
	if timestamp <= last || x.entries > 0 && relative <= lastRelative {
		return
	}
	e := x.mapped[x.entries*timeEntrySize:]
	binary.BigEndian.PutUint64(e, uint64(timestamp))
	binary.BigEndian.PutUint32(e[8:], relative)
	x.entries++
}

// lookupTime returns the relative offset of the last entry whose timestamp
// is < timestamp: the batches up to the one holding it cannot hold a
// timestamp >= timestamp.
func (x *index) lookupTime(timestamp int64) (relative uint32, ok bool) {
	i := sort.Search(x.readable(), func(i int) bool {
		t, _ := x.timeAt(i)
		return t >= timestamp
	})
	if i == 0 {
		return 0, false
	}
	_, relative = x.timeAt(i - 1)
	return relative, true
}

func (x *index) validateTimes() error {
	var lastTimestamp int64
	var lastRelative uint32
	for i := range x.entries {
		timestamp, relative := x.timeAt(i)
		if i > 0 && (timestamp <= lastTimestamp || relative <= lastRelative) {
			return fmt.Errorf("%w: %s: entry %d (%d, %d) not after (%d, %d)", ErrCorrupt, x.name, i, timestamp, relative, lastTimestamp, lastRelative)
		}
		lastTimestamp, lastRelative = timestamp, relative
	}
	return nil
}

// grow maps the index again with room for capacity bytes.
func (x *index) grow(capacity int) error {
	capacity -= capacity % x.entrySize
	if capacity <= len(x.mapped) {
		return nil
	}
	if err := x.unmap(); err != nil {
		return err
	}
	err := x.withFile(false, func(file vfs.File) error {
		if err := x.mapFile(file, capacity); err != nil {
			return errors.Join(err, x.mapFile(file, x.entries*x.entrySize))
		}
		return nil
	})
	x.emptyIfUnmapped()
	return err
}
