package epoch_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mirrord/mirrord/epoch"
	"github.com/mirrord/mirrord/recordbatch"
)

// e builds an entry: e(3, 40) is epoch 3 starting at offset 40.
func e(ep recordbatch.Epoch, start recordbatch.Offset) epoch.Entry {
	return epoch.Entry{Epoch: ep, StartOffset: start}
}

// mustNew builds a cache from entries the test knows to be valid.
func mustNew(t testing.TB, entries ...epoch.Entry) *epoch.Cache {
	t.Helper()
	c, err := epoch.New(entries)
	if err != nil {
		t.Fatalf("New(%v): %v", entries, err)
	}
	return c
}

// threeEpochs is the cache of the package documentation: epoch 3 from 0,
// epoch 5 from 40, epoch 9 from 70.
func threeEpochs(t testing.TB) *epoch.Cache {
	return mustNew(t, e(3, 0), e(5, 40), e(9, 70))
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: did not panic", what)
		}
	}()
	f()
}

func TestNew(t *testing.T) {
	cases := []struct {
		name      string
		entries   []epoch.Entry
		wantEntry int // index named in the error; -1 when New succeeds
	}{
		{"nil", nil, -1},
		{"empty", []epoch.Entry{}, -1},
		{"one", []epoch.Entry{e(0, 0)}, -1},
		{"gaps in epochs and offsets", []epoch.Entry{e(0, 0), e(4, 1), e(100, 1<<40)}, -1},
		{"negative epoch", []epoch.Entry{e(-1, 0)}, 0},
		{"negative start offset", []epoch.Entry{e(0, 5), e(1, -1)}, 1},
		{"equal epochs", []epoch.Entry{e(1, 0), e(1, 5)}, 1},
		{"decreasing epochs", []epoch.Entry{e(2, 0), e(3, 5), e(1, 9)}, 2},
		{"equal start offsets", []epoch.Entry{e(1, 5), e(2, 5)}, 1},
		{"decreasing start offsets", []epoch.Entry{e(1, 5), e(2, 4)}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := epoch.New(tc.entries)
			if tc.wantEntry < 0 {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if got := c.Entries(); !slices.Equal(got, tc.entries) {
					t.Errorf("Entries() = %v, want %v", got, tc.entries)
				}
				return
			}
			if !errors.Is(err, epoch.ErrInvalidEntries) {
				t.Fatalf("New: error %v, want ErrInvalidEntries", err)
			}
			if want := fmt.Sprintf("entry %d ", tc.wantEntry); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
			if !strings.HasPrefix(err.Error(), "epoch: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestNewCopiesAndEntriesCopies(t *testing.T) {
	in := []epoch.Entry{e(1, 0), e(2, 10)}
	c := mustNew(t, in...)
	in[0] = e(7, 7)
	out := c.Entries()
	out[1] = e(9, 9)
	if got, want := c.Entries(), []epoch.Entry{e(1, 0), e(2, 10)}; !slices.Equal(got, want) {
		t.Errorf("Entries() = %v after changing the slices passed in and out, want %v", got, want)
	}
}

func TestZeroCacheIsEmpty(t *testing.T) {
	var c epoch.Cache
	if c.Len() != 0 || c.Entries() != nil {
		t.Errorf("zero cache: Len %d, Entries %v", c.Len(), c.Entries())
	}
	if !c.Assign(2, 5) {
		t.Fatal("Assign on the zero cache reported no change")
	}
	if got, want := c.Entries(), []epoch.Entry{e(2, 5)}; !slices.Equal(got, want) {
		t.Errorf("Entries() = %v, want %v", got, want)
	}
}

func TestLatestEarliestLen(t *testing.T) {
	cases := []struct {
		name             string
		entries          []epoch.Entry
		earliest, latest epoch.Entry
		wantOK           bool
		wantLen          int
	}{
		{"empty", nil, epoch.Entry{}, epoch.Entry{}, false, 0},
		{"one", []epoch.Entry{e(4, 7)}, e(4, 7), e(4, 7), true, 1},
		{"three", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, e(3, 0), e(9, 70), true, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustNew(t, tc.entries...)
			if got, ok := c.Earliest(); got != tc.earliest || ok != tc.wantOK {
				t.Errorf("Earliest() = %v, %v; want %v, %v", got, ok, tc.earliest, tc.wantOK)
			}
			if got, ok := c.Latest(); got != tc.latest || ok != tc.wantOK {
				t.Errorf("Latest() = %v, %v; want %v, %v", got, ok, tc.latest, tc.wantOK)
			}
			if got := c.Len(); got != tc.wantLen {
				t.Errorf("Len() = %d, want %d", got, tc.wantLen)
			}
		})
	}
}

func TestAssign(t *testing.T) {
	cases := []struct {
		name        string
		before      []epoch.Entry
		epoch       recordbatch.Epoch
		startOffset recordbatch.Offset
		wantChanged bool
		want        []epoch.Entry
	}{
		{"first entry", nil, 0, 0, true, []epoch.Entry{e(0, 0)}},
		{"first entry past zero", nil, 7, 100, true, []epoch.Entry{e(7, 100)}},
		{"next epoch", []epoch.Entry{e(1, 0)}, 2, 10, true, []epoch.Entry{e(1, 0), e(2, 10)}},
		{"epoch gap", []epoch.Entry{e(1, 0)}, 9, 10, true, []epoch.Entry{e(1, 0), e(9, 10)}},
		{"latest epoch, later batch", []epoch.Entry{e(1, 0), e(2, 10)}, 2, 15, false, []epoch.Entry{e(1, 0), e(2, 10)}},
		{"latest epoch, same offset", []epoch.Entry{e(1, 0), e(2, 10)}, 2, 10, false, []epoch.Entry{e(1, 0), e(2, 10)}},
		// Kafka: the latest epoch at a lower offset is not a no-op; the
		// entry moves down (and anything starting at or after it goes).
		{"latest epoch, lower offset", []epoch.Entry{e(1, 0), e(2, 10)}, 2, 5, true, []epoch.Entry{e(1, 0), e(2, 5)}},
		{"latest epoch, below the previous entry", []epoch.Entry{e(1, 0), e(2, 10)}, 2, 0, true, []epoch.Entry{e(2, 0)}},
		// Kafka: an epoch below the latest is not ignored either: the later
		// epochs are removed.
		{"older epoch, later offset", []epoch.Entry{e(1, 0), e(5, 10)}, 3, 20, true, []epoch.Entry{e(1, 0), e(3, 20)}},
		{"older existing epoch, same offset", []epoch.Entry{e(1, 0), e(2, 10), e(3, 20)}, 2, 10, true, []epoch.Entry{e(1, 0), e(2, 10)}},
		{"older epoch, earliest", []epoch.Entry{e(4, 10), e(6, 20)}, 2, 30, true, []epoch.Entry{e(2, 30)}},
		{"newer epoch at the latest start", []epoch.Entry{e(1, 0), e(2, 10)}, 3, 10, true, []epoch.Entry{e(1, 0), e(3, 10)}},
		{"newer epoch below later starts", []epoch.Entry{e(1, 0), e(2, 10), e(3, 20)}, 4, 5, true, []epoch.Entry{e(1, 0), e(4, 5)}},
		{"newer epoch at offset zero", []epoch.Entry{e(1, 0), e(2, 10)}, 4, 0, true, []epoch.Entry{e(4, 0)}},
		{"epoch zero", []epoch.Entry{e(3, 4)}, 0, 9, true, []epoch.Entry{e(0, 9)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustNew(t, tc.before...)
			if got := c.Assign(tc.epoch, tc.startOffset); got != tc.wantChanged {
				t.Errorf("Assign(%d, %d) = %v, want %v", tc.epoch, tc.startOffset, got, tc.wantChanged)
			}
			if got := c.Entries(); !slices.Equal(got, tc.want) {
				t.Errorf("entries after Assign(%d, %d) = %v, want %v", tc.epoch, tc.startOffset, got, tc.want)
			}
			if again := c.Assign(tc.epoch, tc.startOffset); again {
				t.Errorf("repeating Assign(%d, %d) reported a change", tc.epoch, tc.startOffset)
			}
		})
	}
}

func TestAssignPanicsOnNegative(t *testing.T) {
	c := threeEpochs(t)
	mustPanic(t, "Assign(NoEpoch, 80)", func() { c.Assign(recordbatch.NoEpoch, 80) })
	mustPanic(t, "Assign(10, -1)", func() { c.Assign(10, -1) })
	if got, want := c.Entries(), threeEpochs(t).Entries(); !slices.Equal(got, want) {
		t.Errorf("entries after refused Assign = %v, want %v", got, want)
	}
}

func TestEndOffsetFor(t *testing.T) {
	const logEndOffset = 100
	cases := []struct {
		name       string
		entries    []epoch.Entry
		requested  recordbatch.Epoch
		wantEpoch  recordbatch.Epoch
		wantOffset recordbatch.Offset
	}{
		{"empty cache", nil, 3, recordbatch.NoEpoch, epoch.UndefinedOffset},
		{"empty cache, NoEpoch", nil, recordbatch.NoEpoch, recordbatch.NoEpoch, epoch.UndefinedOffset},
		{"NoEpoch", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, recordbatch.NoEpoch, recordbatch.NoEpoch, epoch.UndefinedOffset},
		{"lower than all", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 2, 2, 0},
		{"lower than all, zero", []epoch.Entry{e(3, 10), e(5, 40)}, 0, 0, 10},
		{"below NoEpoch is lower than all", []epoch.Entry{e(3, 10), e(5, 40)}, -5, -5, 10},
		{"earliest", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 3, 3, 40},
		{"between first and second", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 4, 3, 40},
		{"middle", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 5, 5, 70},
		{"between second and latest", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 8, 5, 70},
		{"latest", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 9, 9, logEndOffset},
		{"higher than all", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 10, recordbatch.NoEpoch, epoch.UndefinedOffset},
		{"single, latest", []epoch.Entry{e(0, 0)}, 0, 0, logEndOffset},
		{"single, lower", []epoch.Entry{e(6, 50)}, 1, 1, 50},
		{"single, higher", []epoch.Entry{e(6, 50)}, 7, recordbatch.NoEpoch, epoch.UndefinedOffset},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustNew(t, tc.entries...)
			gotEpoch, gotOffset := c.EndOffsetFor(tc.requested, logEndOffset)
			if gotEpoch != tc.wantEpoch || gotOffset != tc.wantOffset {
				t.Errorf("EndOffsetFor(%d, %d) = (%d, %d), want (%d, %d)",
					tc.requested, logEndOffset, gotEpoch, gotOffset, tc.wantEpoch, tc.wantOffset)
			}
		})
	}
}

func TestEpochForOffset(t *testing.T) {
	cases := []struct {
		name    string
		entries []epoch.Entry
		offset  recordbatch.Offset
		want    recordbatch.Epoch
		wantOK  bool
	}{
		{"empty", nil, 0, recordbatch.NoEpoch, false},
		{"negative", []epoch.Entry{e(3, 0)}, -1, recordbatch.NoEpoch, false},
		{"below earliest", []epoch.Entry{e(3, 10), e(5, 40)}, 9, recordbatch.NoEpoch, false},
		{"earliest start", []epoch.Entry{e(3, 10), e(5, 40)}, 10, 3, true},
		{"inside earliest", []epoch.Entry{e(3, 10), e(5, 40)}, 39, 3, true},
		{"latest start", []epoch.Entry{e(3, 10), e(5, 40)}, 40, 5, true},
		{"past latest start", []epoch.Entry{e(3, 10), e(5, 40)}, 1 << 50, 5, true},
		{"middle", []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}, 69, 5, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustNew(t, tc.entries...)
			got, ok := c.EpochForOffset(tc.offset)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("EpochForOffset(%d) = %d, %v; want %d, %v", tc.offset, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestTruncateFromEnd(t *testing.T) {
	cases := []struct {
		name        string
		endOffset   recordbatch.Offset
		wantChanged bool
		want        []epoch.Entry
	}{
		{"past the latest start", 71, false, []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}},
		{"at the latest start", 70, true, []epoch.Entry{e(3, 0), e(5, 40)}},
		{"inside the middle epoch", 41, true, []epoch.Entry{e(3, 0), e(5, 40)}},
		{"at the middle start", 40, true, []epoch.Entry{e(3, 0)}},
		{"at zero", 0, true, nil},
		{"negative is ignored", -1, false, []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := threeEpochs(t)
			if got := c.TruncateFromEnd(tc.endOffset); got != tc.wantChanged {
				t.Errorf("TruncateFromEnd(%d) = %v, want %v", tc.endOffset, got, tc.wantChanged)
			}
			if got := c.Entries(); !slices.Equal(got, tc.want) {
				t.Errorf("entries after TruncateFromEnd(%d) = %v, want %v", tc.endOffset, got, tc.want)
			}
		})
	}
	var empty epoch.Cache
	if empty.TruncateFromEnd(0) {
		t.Error("TruncateFromEnd on an empty cache reported a change")
	}
}

func TestTruncateFromStart(t *testing.T) {
	cases := []struct {
		name        string
		startOffset recordbatch.Offset
		wantChanged bool
		want        []epoch.Entry
	}{
		{"negative", -1, false, []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}},
		{"at the earliest start", 0, false, []epoch.Entry{e(3, 0), e(5, 40), e(9, 70)}},
		{"inside the earliest epoch", 10, true, []epoch.Entry{e(3, 10), e(5, 40), e(9, 70)}},
		{"at the middle start", 40, true, []epoch.Entry{e(5, 40), e(9, 70)}},
		{"inside the middle epoch", 55, true, []epoch.Entry{e(5, 55), e(9, 70)}},
		{"at the latest start", 70, true, []epoch.Entry{e(9, 70)}},
		{"past every start", 500, true, []epoch.Entry{e(9, 500)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := threeEpochs(t)
			if got := c.TruncateFromStart(tc.startOffset); got != tc.wantChanged {
				t.Errorf("TruncateFromStart(%d) = %v, want %v", tc.startOffset, got, tc.wantChanged)
			}
			if got := c.Entries(); !slices.Equal(got, tc.want) {
				t.Errorf("entries after TruncateFromStart(%d) = %v, want %v", tc.startOffset, got, tc.want)
			}
		})
	}
	below := mustNew(t, e(3, 10))
	if below.TruncateFromStart(5) {
		t.Error("TruncateFromStart below the earliest start reported a change")
	}
	var empty epoch.Cache
	if empty.TruncateFromStart(5) {
		t.Error("TruncateFromStart on an empty cache reported a change")
	}
}

func TestClone(t *testing.T) {
	c := threeEpochs(t)
	clone := c.Clone()
	clone.Assign(12, 90)
	c.TruncateFromEnd(40)
	if got, want := clone.Entries(), []epoch.Entry{e(3, 0), e(5, 40), e(9, 70), e(12, 90)}; !slices.Equal(got, want) {
		t.Errorf("clone entries = %v, want %v", got, want)
	}
	if got, want := c.Entries(), []epoch.Entry{e(3, 0)}; !slices.Equal(got, want) {
		t.Errorf("original entries = %v, want %v", got, want)
	}
}

func TestEntryString(t *testing.T) {
	if got, want := e(3, 40).String(), "epoch 3 at offset 40"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
