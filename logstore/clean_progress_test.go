package logstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

const (
	progressSegments     = 600  // sealed segments of progressBatches batches
	progressBatches      = 3    // one record each
	progressKeys         = 40   // keys the records rewrite
	progressSegmentBytes = 2048 // about 8 of the small segments to a group
	progressRoundsMax    = 300  // interrupted cleanings before the test gives up
)

// buildProgressLog writes a compacted log of many small sealed segments,
// as a log with segment.ms=100 rolls, grouped by segment.bytes into
// groups of a few segments each, and an active segment.
func buildProgressLog(t *testing.T, mem *vfs.Mem) *cleanLog {
	t.Helper()
	c := newCleanLog(t, mem)
	if err := c.log.Close(); err != nil {
		t.Fatal(err)
	}
	c.cfg.SegmentBytes = progressSegmentBytes
	var err error
	if c.log, err = Open(mem, "/p", c.cfg); err != nil {
		t.Fatal(err)
	}
	for s := range progressSegments {
		for b := range progressBatches {
			n := s*progressBatches + b
			c.write(rb.Spec{}, 0, kv{fmt.Sprintf("k%d", n*7%progressKeys), fmt.Sprintf("v%d", n)})
		}
		c.roll()
	}
	c.write(rb.Spec{}, 0, kv{"k0", "active"})
	return c
}

// TestCleanInterruptedKeepsProgress: cleanings of a log of many small
// segments, each cut short by a crash while it writes a seeded group (1 to
// 4 groups swapped before it), over and over, as a node killed every few
// seconds cuts its cleaner short. Each interrupted cleaning must leave the
// cleaner checkpoint past the groups it swapped, so the next one maps
// only the rest; and once a cleaning completes, the log holds what one
// uninterrupted cleaning leaves. (When the checkpoint moved only after the
// last group, every interrupted cleaning started from the same first
// dirty offset: no progress, however many.)
func TestCleanInterruptedKeepsProgress(t *testing.T) {
	reference := buildProgressLog(t, vfs.NewMem())
	reference.clean(NewOffsetMap(1<<20, 0.9))
	want := contents(t, reference.log)
	for seed := uint64(1); seed <= 3; seed++ {
		random := rand.New(rand.NewPCG(seed, 19))
		mem := vfs.NewMem()
		c := buildProgressLog(t, mem)
		log := c.log
		before := len(log.segments)
		checkpoint, completed := log.CleanerOffset(), false
		for round := 0; round < progressRoundsMax && !completed; round++ {
			failAt := 2 + random.IntN(4) // the cleaned segment of this group is not written
			created, fired := 0, false
			mem.SetFault(func(op vfs.Op, name string) error {
				if op != vfs.OpCreate || !strings.HasSuffix(name, extLog+cleanedSuffix) {
					return nil
				}
				created++
				if created == failAt {
					fired = true
					return vfs.ErrInjected
				}
				return nil
			})
			stats, err := log.Clean(CleanOptions{Map: NewOffsetMap(1<<20, 0.9), LastStableOffset: log.LogEndOffset()})
			mem.SetFault(nil)
			where := fmt.Sprintf("seed %d, round %d (group %d fails)", seed, round, failAt)
			if err != nil && !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("%s: clean: %v", where, err)
			}
			completed = !fired
			if completed && err != nil {
				t.Fatalf("%s: completed with %v", where, err)
			}
			mem.Crash(rand.New(rand.NewPCG(seed, uint64(round))))
			if log, err = Open(mem, "/p", c.cfg); err != nil {
				t.Fatalf("%s: open after crash: %v", where, err)
			}
			next := log.CleanerOffset()
			if next <= checkpoint {
				t.Fatalf("%s: the cleaning mapped [%d, %d) and swapped %d groups before the crash, but the cleaner checkpoint is %d after it, %d before: the next cleaning redoes them (%d segments left of %d)",
					where, stats.FirstDirty, stats.End, stats.Groups-1, next, checkpoint, len(log.segments), before)
			}
			checkpoint = next
			if round%20 == 0 || completed {
				t.Logf("%s: checkpoint %d, %d segments (of %d), %d bytes read", where, checkpoint, len(log.segments), before, stats.BytesRead)
			}
		}
		if !completed {
			t.Fatalf("seed %d: no cleaning completed in %d interrupted ones", seed, progressRoundsMax)
		}
		if got := contents(t, log); !slices.Equal(got, want) {
			t.Fatalf("seed %d: after the interrupted cleanings the log holds\n  %v\nwant (one cleaning)\n  %v", seed, got, want)
		}
		if err := log.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCleanTruncatedMidwayKeepsKeys truncates the log while a cleaning
// writes its third group, below the end of the range it mapped (a mirror
// aligning to its source can cut below its high watermark): the groups
// after the cut must not be swapped, since the offset map holds offsets
// of removed records and would drop each key's last record left. Then
// the latest record below the cut of every key is still there, after
// that cleaning and after the next.
func TestCleanTruncatedMidwayKeepsKeys(t *testing.T) {
	const cut = 1500 // below the mapped end, progressSegments*progressBatches
	c := buildProgressLog(t, vfs.NewMem())
	calls, mapped := 0, progressSegments*progressBatches
	var truncated error
	throttle := func(int64) { // told of each batch mapped, then of each batch and write of the groups
		calls++
		if calls == mapped+2*progressSegmentBytes/100 {
			truncated = c.log.TruncateTo(cut)
		}
	}
	stats, err := c.log.Clean(CleanOptions{Map: NewOffsetMap(1<<20, 0.9), LastStableOffset: c.log.LogEndOffset(), Throttle: throttle})
	if err != nil || truncated != nil {
		t.Fatalf("clean: %v; truncate: %v", err, truncated)
	}
	if c.log.LogEndOffset() != cut || calls <= mapped {
		t.Fatalf("log end %d, %d throttle calls: the truncation did not happen mid-cleaning", c.log.LogEndOffset(), calls)
	}
	for pass := range 2 {
		got := contents(t, c.log)
		for key := range progressKeys {
			last := -1
			for n := range cut {
				if n*7%progressKeys == key {
					last = n
				}
			}
			if !slices.Contains(got, fmt.Sprintf("%d:k%d=v%d", last, key, last)) {
				t.Fatalf("pass %d (first cleaning mapped [%d, %d), %d groups): key k%d lost its last record, offset %d; the log holds %v",
					pass, stats.FirstDirty, stats.End, stats.Groups, key, last, got)
			}
		}
		c.clean(NewOffsetMap(1<<20, 0.9))
	}
}
