package epoch_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mirrord/mirrord/epoch"
	"github.com/mirrord/mirrord/recordbatch"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests; 0 picks one from the clock")

// testSeed returns the seed for a randomized test and logs it, so that a
// failure can be replayed with go test ./epoch -run Name -args -seed=N.
func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: -args -seed=%d)", seed, seed)
	return seed
}

// batch is one appended record batch: offsets [baseOffset, lastOffset] at
// leaderEpoch.
type batch struct {
	baseOffset, lastOffset recordbatch.Offset
	leaderEpoch            recordbatch.Epoch
}

// logModel is a partition log reduced to its batches' offsets and epochs.
// Every answer it gives is computed by scanning offsets one by one, without
// any notion of entries, so that it checks the cache rather than restating
// it.
type logModel struct {
	batches        []batch
	logStartOffset recordbatch.Offset
	logEndOffset   recordbatch.Offset
	// leaderEpoch is an epoch assigned at logEndOffset before any batch was
	// written in it (a new leader's, or the one that covered the log start
	// offset when retention removed every batch); NoEpoch if none.
	leaderEpoch recordbatch.Epoch
}

// epochAt returns the epoch of the batch holding offset, which must lie in
// [logStartOffset, logEndOffset).
func (m *logModel) epochAt(offset recordbatch.Offset) recordbatch.Epoch {
	for _, b := range m.batches {
		if b.baseOffset <= offset && offset <= b.lastOffset {
			return b.leaderEpoch
		}
	}
	panic(fmt.Sprintf("model: no batch holds offset %d", offset))
}

// epochAtOrEnd is epochAt extended to logEndOffset, where the pending
// leader epoch lives. ok is false where no epoch is known.
func (m *logModel) epochAtOrEnd(offset recordbatch.Offset) (recordbatch.Epoch, bool) {
	if offset == m.logEndOffset {
		return m.leaderEpoch, m.leaderEpoch != recordbatch.NoEpoch
	}
	return m.epochAt(offset), true
}

func (m *logModel) latestEpoch() (recordbatch.Epoch, bool) {
	if m.leaderEpoch != recordbatch.NoEpoch {
		return m.leaderEpoch, true
	}
	if m.logEndOffset == m.logStartOffset {
		return recordbatch.NoEpoch, false
	}
	return m.epochAt(m.logEndOffset - 1), true
}

// entries lists where each epoch starts, offset by offset.
func (m *logModel) entries() []epoch.Entry {
	var out []epoch.Entry
	for offset := m.logStartOffset; offset <= m.logEndOffset; offset++ {
		ep, ok := m.epochAtOrEnd(offset)
		if ok && (len(out) == 0 || out[len(out)-1].Epoch != ep) {
			out = append(out, epoch.Entry{Epoch: ep, StartOffset: offset})
		}
	}
	return out
}

func (m *logModel) epochForOffset(offset recordbatch.Offset) (recordbatch.Epoch, bool) {
	switch {
	case offset >= m.logEndOffset:
		return m.latestEpoch()
	case offset < m.logStartOffset:
		return recordbatch.NoEpoch, false
	}
	return m.epochAt(offset), true
}

func (m *logModel) endOffsetFor(requested recordbatch.Epoch) (recordbatch.Epoch, recordbatch.Offset) {
	if requested == recordbatch.NoEpoch {
		return recordbatch.NoEpoch, epoch.UndefinedOffset
	}
	if latest, ok := m.latestEpoch(); ok && latest == requested {
		return requested, m.logEndOffset
	}
	for offset := m.logStartOffset; offset <= m.logEndOffset; offset++ {
		ep, ok := m.epochAtOrEnd(offset)
		if !ok || ep <= requested {
			continue
		}
		if offset == m.logStartOffset {
			return requested, offset
		}
		return m.epochAt(offset - 1), offset
	}
	return recordbatch.NoEpoch, epoch.UndefinedOffset
}

// nextEpoch returns an epoch that may be appended now: the latest or later.
func (m *logModel) nextEpoch(rng *rand.Rand, later int) recordbatch.Epoch {
	latest, ok := m.latestEpoch()
	if !ok {
		return recordbatch.Epoch(rng.IntN(3))
	}
	return latest + recordbatch.Epoch(later+rng.IntN(3))
}

func (m *logModel) append(ep recordbatch.Epoch, count int) {
	b := batch{baseOffset: m.logEndOffset, lastOffset: m.logEndOffset + recordbatch.Offset(count-1), leaderEpoch: ep}
	m.batches = append(m.batches, b)
	m.logEndOffset = b.lastOffset + 1
	m.leaderEpoch = recordbatch.NoEpoch
}

// truncateTo cuts the log at endOffset, a batch boundary or the log start
// offset (which may lie inside the first batch).
func (m *logModel) truncateTo(endOffset recordbatch.Offset) {
	m.batches = slices.DeleteFunc(m.batches, func(b batch) bool { return b.lastOffset >= endOffset })
	m.logEndOffset = endOffset
	m.leaderEpoch = recordbatch.NoEpoch
}

// moveLogStart moves the log start offset up to startOffset (retention or
// DeleteRecords, so anywhere, even inside a batch).
func (m *logModel) moveLogStart(startOffset recordbatch.Offset) {
	if startOffset == m.logEndOffset {
		if latest, ok := m.latestEpoch(); ok {
			m.leaderEpoch = latest
		}
	}
	m.batches = slices.DeleteFunc(m.batches, func(b batch) bool { return b.lastOffset < startOffset })
	m.logStartOffset = startOffset
}

// randomBoundary returns the base offset of a random batch, or the log end
// offset.
func (m *logModel) randomBoundary(rng *rand.Rand) recordbatch.Offset {
	i := rng.IntN(len(m.batches) + 1)
	if i == len(m.batches) {
		return m.logEndOffset
	}
	return max(m.batches[i].baseOffset, m.logStartOffset)
}

// TestCacheAgainstModel applies seeded random appends, leader changes,
// truncations and log start moves to a cache and to a logModel, and
// compares every answer after each step.
func TestCacheAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 1))
	for sequence := range 300 {
		m := &logModel{leaderEpoch: recordbatch.NoEpoch}
		c := &epoch.Cache{}
		var history []string
		for range 80 {
			before := c.Entries()
			step, changed := randomStep(rng, m, c)
			history = append(history, step)
			if want := !slices.Equal(before, c.Entries()); changed != want {
				t.Fatalf("sequence %d, after %v: reported change %v, entries went from %v to %v",
					sequence, history, changed, before, c.Entries())
			}
			if err := compare(m, c); err != nil {
				t.Fatalf("sequence %d, after %v: %v", sequence, history, err)
			}
		}
	}
}

// randomStep applies one random operation to both and describes it.
func randomStep(rng *rand.Rand, m *logModel, c *epoch.Cache) (string, bool) {
	switch op := rng.IntN(10); {
	case op < 5:
		ep, count := m.nextEpoch(rng, 0), 1+rng.IntN(5)
		changed := c.Assign(ep, m.logEndOffset)
		m.append(ep, count)
		return fmt.Sprintf("append %d@%d", count, ep), changed
	case op < 6:
		ep := m.nextEpoch(rng, 1)
		changed := c.Assign(ep, m.logEndOffset)
		m.leaderEpoch = ep
		return fmt.Sprintf("lead %d@%d", ep, m.logEndOffset), changed
	case op < 8:
		endOffset := m.randomBoundary(rng)
		changed := c.TruncateFromEnd(endOffset)
		m.truncateTo(endOffset)
		return fmt.Sprintf("truncate to %d", endOffset), changed
	default:
		startOffset := m.logStartOffset + recordbatch.Offset(rng.Int64N(int64(m.logEndOffset-m.logStartOffset)+1))
		changed := c.TruncateFromStart(startOffset)
		m.moveLogStart(startOffset)
		return fmt.Sprintf("log start %d", startOffset), changed
	}
}

// compare checks every read of c against m, and the checkpoint round trip.
func compare(m *logModel, c *epoch.Cache) error {
	if got, want := c.Entries(), m.entries(); !slices.Equal(got, want) {
		return fmt.Errorf("entries %v, model %v", got, want)
	}
	for offset := m.logStartOffset - 2; offset <= m.logEndOffset+2; offset++ {
		gotEpoch, gotOK := c.EpochForOffset(offset)
		wantEpoch, wantOK := m.epochForOffset(offset)
		if gotEpoch != wantEpoch || gotOK != wantOK {
			return fmt.Errorf("EpochForOffset(%d) = %d, %v; model %d, %v", offset, gotEpoch, gotOK, wantEpoch, wantOK)
		}
	}
	latest, _ := m.latestEpoch()
	for requested := recordbatch.NoEpoch; requested <= latest+2; requested++ {
		gotEpoch, gotOffset := c.EndOffsetFor(requested, m.logEndOffset)
		wantEpoch, wantOffset := m.endOffsetFor(requested)
		if gotEpoch != wantEpoch || gotOffset != wantOffset {
			return fmt.Errorf("EndOffsetFor(%d, %d) = (%d, %d), model (%d, %d)",
				requested, m.logEndOffset, gotEpoch, gotOffset, wantEpoch, wantOffset)
		}
	}
	decoded, err := epoch.Decode(epoch.Encode(c.Entries()))
	if err != nil || !slices.Equal(decoded, c.Entries()) {
		return fmt.Errorf("checkpoint round trip of %v: %v, %v", c.Entries(), decoded, err)
	}
	if clone := c.Clone(); !slices.Equal(clone.Entries(), c.Entries()) {
		return fmt.Errorf("Clone() = %v, want %v", clone.Entries(), c.Entries())
	}
	return nil
}
