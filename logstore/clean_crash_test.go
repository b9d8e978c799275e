package logstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// buildCrashLog writes a keyed log with tombstones, an aborted and a
// committed transaction, over three sealed segments and an active one.
func buildCrashLog(t *testing.T, mem *vfs.Mem) *cleanLog {
	t.Helper()
	c := newCleanLog(t, mem)
	for i := range 12 {
		c.write(rb.Spec{}, i%3, kv{fmt.Sprintf("k%d", i%4), fmt.Sprintf("v%d", i)}, kv{fmt.Sprintf("j%d", i%5), ""})
		if i == 5 {
			c.write(rb.Spec{ProducerID: 5, Transactional: true}, 0, kv{"k1", "aborted"})
			c.write(rb.Spec{ProducerID: 6, Transactional: true}, 0, kv{"k2", "committed"})
			c.marker(5, true)
			c.marker(6, false)
		}
		if i%4 == 3 {
			c.roll()
		}
	}
	c.write(rb.Spec{}, 0, kv{"k0", "active"}) // an active segment with data: reopening keeps the three sealed ones
	return c
}

// TestCleanCrash fails each file-system operation of a cleaning in turn
// (the cleaning stops there), then crashes (seeded: unsynced tails are
// kept in part or torn) and reopens: the log holds exactly the records of
// the old log or of the cleaned one, never a mix, and a cleaning after
// the crash ends at the cleaned log.
func TestCleanCrash(t *testing.T) {
	reference := buildCrashLog(t, vfs.NewMem())
	before := contents(t, reference.log)
	reference.clean(NewOffsetMap(1<<20, 0.9))
	after := contents(t, reference.log)
	if slices.Equal(before, after) {
		t.Fatal("the cleaning changes nothing: the test would prove nothing")
	}
	runs, outcomes := 0, map[string]int{}
	for seed := uint64(1); seed <= 3; seed++ {
		for n := 0; n < 500; n++ {
			runs++
			fired, outcome := cleanCrashRun(t, seed, n, before, after)
			outcomes[outcome]++
			if !fired {
				break
			}
		}
	}
	if outcomes["old"] == 0 || outcomes["cleaned"] == 0 {
		t.Fatalf("outcomes %v: a crash should leave each", outcomes)
	}
	t.Logf("%d crash runs: %v", runs, outcomes)
}

func cleanCrashRun(t *testing.T, seed uint64, n int, before, after []string) (fired bool, outcome string) {
	t.Helper()
	mem := vfs.NewMem()
	c := buildCrashLog(t, mem)
	seen := 0
	mem.SetFault(func(vfs.Op, string) error {
		seen++
		if seen-1 == n {
			fired = true
			return vfs.ErrInjected
		}
		return nil
	})
	_, err := c.log.Clean(CleanOptions{Map: NewOffsetMap(1<<20, 0.9), LastStableOffset: c.log.LogEndOffset()})
	mem.SetFault(nil)
	where := fmt.Sprintf("seed %d, operation %d fails (fired %v), clean: %v", seed, n, fired, err)
	if err != nil && !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("%s: error does not wrap the injected fault", where)
	}
	mem.Crash(rand.New(rand.NewPCG(seed, uint64(n))))
	log, err := Open(mem, "/p", c.cfg)
	if err != nil {
		t.Fatalf("%s: open after crash: %v", where, err)
	}
	got := contents(t, log)
	switch {
	case slices.Equal(got, before):
		outcome = "old"
	case slices.Equal(got, after):
		outcome = "cleaned"
	default:
		t.Fatalf("%s: after the crash the log holds\n  %v\nneither the old\n  %v\nnor the cleaned\n  %v", where, got, before, after)
	}
	if names, _ := mem.List("/p"); slices.ContainsFunc(names, func(name string) bool { return name == cleanerSwapName }) {
		t.Fatalf("%s: swap file left after open: %v", where, names)
	}
	if _, err := log.Clean(CleanOptions{Map: NewOffsetMap(1<<20, 0.9), LastStableOffset: log.LogEndOffset()}); err != nil {
		t.Fatalf("%s: clean after crash: %v", where, err)
	}
	if again := contents(t, log); !slices.Equal(again, after) {
		t.Fatalf("%s: cleaned after the crash the log holds\n  %v\nwant\n  %v", where, again, after)
	}
	if err := log.Close(); err != nil {
		t.Fatalf("%s: close: %v", where, err)
	}
	return fired, outcome
}
