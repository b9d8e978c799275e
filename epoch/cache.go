package epoch

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/mirrord/mirrord/recordbatch"
)

// UndefinedOffset is the end offset EndOffsetFor returns, with
// recordbatch.NoEpoch, when it cannot answer: Kafka's UNDEFINED_EPOCH_OFFSET.
const UndefinedOffset recordbatch.Offset = -1

// ErrInvalidEntries is wrapped by New when the entries break the cache's
// invariants (see the package documentation).
var ErrInvalidEntries = errors.New("epoch: invalid entries")

// Entry says that partition leader epoch Epoch starts at StartOffset: the
// first batch written in Epoch has base offset StartOffset.
type Entry struct {
	Epoch       recordbatch.Epoch
	StartOffset recordbatch.Offset
}

func (e Entry) String() string {
	return fmt.Sprintf("epoch %d at offset %d", e.Epoch, e.StartOffset)
}

// Cache is the leader-epoch cache of one partition log. The zero Cache is
// empty and ready to use. A Cache is not safe for concurrent use: one
// goroutine (the log's owner) calls it.
type Cache struct {
	// entries: Epoch >= 0 and strictly increasing; StartOffset >= 0 and
	// strictly increasing. entries[len-1] is the latest epoch.
	entries []Entry
}

// New returns a cache holding a copy of entries, or an error wrapping
// ErrInvalidEntries that names the first entry breaking the invariants.
func New(entries []Entry) (*Cache, error) {
	if i, reason := firstInvalid(entries); i >= 0 {
		return nil, fmt.Errorf("%w: entry %d (%v): %s", ErrInvalidEntries, i, entries[i], reason)
	}
	return &Cache{entries: slices.Clone(entries)}, nil
}

// firstInvalid returns the index of the first entry that breaks the
// invariants and why, or -1 and "" when all hold.
func firstInvalid(entries []Entry) (int, string) {
	for i, e := range entries {
		if reason := invalidAfter(entries[:i], e); reason != "" {
			return i, reason
		}
	}
	return -1, ""
}

// invalidAfter says why e cannot follow previous (whose last element is the
// only one it is compared with), or "" when it can.
func invalidAfter(previous []Entry, e Entry) string {
	if e.Epoch < 0 {
		return "negative epoch"
	}
	if e.StartOffset < 0 {
		return "negative start offset"
	}
	if len(previous) == 0 {
		return ""
	}
	last := previous[len(previous)-1]
	if e.Epoch <= last.Epoch {
		return fmt.Sprintf("epoch not above the previous entry's %d", last.Epoch)
	}
	if e.StartOffset <= last.StartOffset {
		return fmt.Sprintf("start offset not above the previous entry's %d", last.StartOffset)
	}
	return ""
}

// assertInvariants panics if the entries break the invariants. Mutations
// call it after they change the entries; the cost is linear in the number of
// epochs, and mutations happen once per leader change, not per batch.
func (c *Cache) assertInvariants() {
	if i, reason := firstInvalid(c.entries); i >= 0 {
		panic(fmt.Sprintf("epoch: invariant broken at entry %d (%v): %s", i, c.entries[i], reason))
	}
}

// Entries returns a copy of the entries, oldest first.
func (c *Cache) Entries() []Entry { return slices.Clone(c.entries) }

// Len returns the number of entries.
func (c *Cache) Len() int { return len(c.entries) }

// Latest returns the entry of the latest epoch, false if the cache is empty.
func (c *Cache) Latest() (Entry, bool) {
	if len(c.entries) == 0 {
		return Entry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// Earliest returns the entry of the earliest epoch, false if the cache is
// empty.
func (c *Cache) Earliest() (Entry, bool) {
	if len(c.entries) == 0 {
		return Entry{}, false
	}
	return c.entries[0], true
}

// Clone returns an independent copy of the cache.
func (c *Cache) Clone() *Cache { return &Cache{entries: slices.Clone(c.entries)} }

// Assign records that epoch starts at startOffset, as Kafka's
// LeaderEpochFileCache.assign. The log calls it for every appended batch
// that carries an epoch, and a leader calls it with its new epoch and the log
// end offset when it takes over.
//
// It does nothing and returns false when epoch is the latest epoch and
// startOffset is not below the latest entry's start: the common case of one
// more batch in the current epoch. Otherwise it removes, newest first, every
// entry whose epoch is >= epoch or whose start offset is >= startOffset, then
// appends (epoch, startOffset), and returns true; the caller then persists
// the checkpoint. Following Kafka, an epoch below the latest one is not
// ignored: it removes the later epochs. So does the latest epoch at a lower
// start offset: its entry moves down.
//
// A negative epoch or start offset is a caller bug (batches without an epoch
// are not assigned) and panics, as Kafka throws IllegalArgumentException.
func (c *Cache) Assign(epoch recordbatch.Epoch, startOffset recordbatch.Offset) bool {
	if epoch < 0 || startOffset < 0 {
		panic(fmt.Sprintf("epoch: assign %v: negative epoch or start offset", Entry{epoch, startOffset}))
	}
	if latest, ok := c.Latest(); ok && epoch == latest.Epoch && startOffset >= latest.StartOffset {
		return false
	}
	keep := len(c.entries)
	for keep > 0 && (c.entries[keep-1].Epoch >= epoch || c.entries[keep-1].StartOffset >= startOffset) {
		keep--
	}
	c.entries = append(c.entries[:keep], Entry{Epoch: epoch, StartOffset: startOffset})
	c.assertInvariants()
	return true
}

// firstAbove returns the index of the first entry whose epoch is above
// epoch, len(entries) if there is none.
func (c *Cache) firstAbove(epoch recordbatch.Epoch) int {
	return sort.Search(len(c.entries), func(i int) bool { return c.entries[i].Epoch > epoch })
}

// firstStartingAbove returns the index of the first entry whose start offset
// is above offset, len(entries) if there is none.
func (c *Cache) firstStartingAbove(offset recordbatch.Offset) int {
	return sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset > offset })
}

// EndOffsetFor answers an OffsetForLeaderEpoch request for requested, as
// Kafka's LeaderEpochFileCache.endOffsetFor: the largest known epoch <=
// requested and the end offset of requested, which is the start offset of
// the first epoch above it.
//
//   - requested is NoEpoch: (NoEpoch, UndefinedOffset).
//   - requested is the latest epoch: (requested, logEndOffset), since the
//     latest epoch is still being written.
//   - no epoch above requested: (NoEpoch, UndefinedOffset).
//   - no epoch at or below requested (it is older than the whole cache,
//     whose early entries retention removed): (requested, start offset of
//     the earliest entry). The epoch returned is the one requested, not one
//     the cache knows.
//   - otherwise: (largest epoch <= requested, start offset of the first
//     epoch above requested).
//
// Like Kafka it does not check other negative epochs: requested -5 is older
// than the whole cache.
func (c *Cache) EndOffsetFor(requested recordbatch.Epoch, logEndOffset recordbatch.Offset) (recordbatch.Epoch, recordbatch.Offset) {
	if requested == recordbatch.NoEpoch {
		return recordbatch.NoEpoch, UndefinedOffset
	}
	if latest, ok := c.Latest(); ok && latest.Epoch == requested {
		return requested, logEndOffset
	}
	above := c.firstAbove(requested)
	if above == len(c.entries) {
		return recordbatch.NoEpoch, UndefinedOffset
	}
	if above == 0 {
		return requested, c.entries[0].StartOffset
	}
	return c.entries[above-1].Epoch, c.entries[above].StartOffset
}

// EpochForOffset returns the epoch of the entry covering offset: the last
// entry starting at or below it, as Kafka's epochForOffset. It returns false
// when offset lies below the earliest entry or the cache is empty. Offsets
// at or past the log end offset get the latest epoch: the cache does not
// know where the log ends.
func (c *Cache) EpochForOffset(offset recordbatch.Offset) (recordbatch.Epoch, bool) {
	covering := c.firstStartingAbove(offset) - 1
	if covering < 0 {
		return recordbatch.NoEpoch, false
	}
	return c.entries[covering].Epoch, true
}

// TruncateFromEnd removes the entries starting at or after endOffset, the
// new log end offset after a truncation, as Kafka's truncateFromEnd. It
// returns true if it removed any. Like Kafka it ignores a negative
// endOffset. An entry starting exactly at endOffset goes too, even when
// endOffset is the current log end offset: that is a leader's epoch assigned
// before it wrote anything. (Kafka's log does not call it when the target is
// not below the log end offset.)
func (c *Cache) TruncateFromEnd(endOffset recordbatch.Offset) bool {
	if endOffset < 0 {
		return false
	}
	keep := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset >= endOffset })
	if keep == len(c.entries) {
		return false
	}
	c.entries = c.entries[:keep]
	c.assertInvariants()
	return true
}

// TruncateFromStart moves the cache's start up to startOffset, the new log
// start offset, as Kafka's truncateFromStart: entries that start at or below
// startOffset are removed except the last of them, the one covering
// startOffset, whose start offset becomes startOffset. An entry starting
// exactly at startOffset is kept as it is. If startOffset is past every
// entry's start, the latest entry remains, moved up to startOffset.
//
// It returns true if the entries changed. (Kafka schedules a checkpoint
// flush whenever an entry starts at or below startOffset, even when that
// entry is already the earliest and starts exactly there; nothing changes
// then and this returns false.)
func (c *Cache) TruncateFromStart(startOffset recordbatch.Offset) bool {
	covering := c.firstStartingAbove(startOffset) - 1
	if covering < 0 || (covering == 0 && c.entries[0].StartOffset == startOffset) {
		return false
	}
	c.entries[covering].StartOffset = startOffset
	c.entries = slices.Delete(c.entries, 0, covering)
	c.assertInvariants()
	return true
}
