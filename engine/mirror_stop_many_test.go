package engine

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kfake"
)

// countStates counts the described partitions of mirror m by state.
func countStates(t *testing.T, n *Node) map[string]int {
	t.Helper()
	states := map[string]int{}
	for _, p := range describeMirror(t, n).Partitions {
		states[p.State]++
	}
	return states
}

// TestStopManyPartitionsAnswersDescribe: a stop of 2,000 partitions does
// not hold what describe needs while it writes. The file system holds
// the stop's second __mirror_state write (its BUMP_LEADER_EPOCH step) in
// its sync until the test lets it go; meanwhile a describe must answer,
// every partition STOPPING, and the stop must not have answered. Let go,
// the stop ends with every partition STOPPED.
func TestStopManyPartitionsAnswersDescribe(t *testing.T) {
	const topic, partitions = "many", 2000
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	mem := vfs.NewMem()
	cfg := logstore.DefaultConfig()
	cfg.IndexBytesMax = 4096 // Mem holds every index whole: 2,000 of 10 MiB would not fit
	n, err := OpenNode(NodeConfig{FS: mem, DataDir: "/data", Log: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	startMirroring(t, n, cluster.ListenAddrs()[0], topic)
	// 2,000 partitions under -race on a loaded machine: more than a minute.
	waitUntilWithin(t, "every partition MIRRORING", 2*time.Minute, func() bool { return countStates(t, n)["MIRRORING"] == partitions })

	release := make(chan struct{})
	var stateSyncs atomic.Int32
	var holding atomic.Bool
	mem.SetFault(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.Contains(name, mirrorStateTopic+"-0/") && stateSyncs.Add(1) == 2 {
			holding.Store(true)
			<-release // Mem's lock is held: the node's file system stands still
		}
		return nil
	})
	released := false
	letGo := func() {
		if !released {
			released = true
			close(release)
		}
	}
	defer letGo()

	stopped := make(chan error, 1)
	go func() {
		results, err := n.Mirrors().SetTopicsDesiredState(context.Background(), "m", netio.StopMirroring, netio.TopicSelection{Names: []string{topic}})
		for _, r := range results {
			if err == nil {
				err = r.Err
			}
		}
		stopped <- err
	}()
	waitUntilWithin(t, "the stop's second __mirror_state sync", time.Minute, holding.Load)
	// Answered while the stop is held in a sync, or the test fails (not
	// hangs) at the deadline.
	described := make(chan []netio.MirrorDescription, 1)
	go func() {
		d, _ := n.Mirrors().DescribeMirrors(context.Background(), []string{"m"}, false)
		described <- d
	}()
	states := map[string]int{}
	select {
	case d := <-described:
		if len(d) != 1 || d[0].Err != nil {
			t.Fatalf("describe during the stop: %+v", d)
		}
		for _, p := range d[0].Partitions {
			states[p.State]++
		}
	case <-time.After(30 * time.Second):
		t.Fatal("describe did not answer within 30 s while the stop was held in a __mirror_state sync")
	}
	select {
	case err := <-stopped:
		t.Fatalf("the stop answered (%v) while its __mirror_state write was held", err)
	default:
	}
	if states["STOPPING"] != partitions {
		t.Fatalf("described during the stop: %v, want %d STOPPING", states, partitions)
	}

	letGo()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the stop did not end within a minute of its sync being let go")
	}
	if states := countStates(t, n); states["STOPPED"] != partitions {
		t.Fatalf("after the stop: %v, want %d STOPPED", states, partitions)
	}
}

// TestStateLogPutAllOneSync: the group commit of a stop of many
// partitions (three batches of records here) is one append and one
// sync, so a crash at that sync leaves all of it or none; without the
// crash all of it is durable.
func TestStateLogPutAllOneSync(t *testing.T) {
	const count = stateLogBatchRecords*2 + 7 // three batches
	entries := func(epoch mirrorstate.StateEpoch) []stateEntry {
		var out []stateEntry
		for i := range int32(count) {
			out = append(out, stateEntry{testStateKey("many", i), mirroringValue(epoch)})
		}
		return out
	}
	for _, crash := range []bool{false, true} {
		mem := vfs.NewMem()
		n := openStateTestNode(t, mem, "/data")
		if err := n.states.(*stateLog).putAll(entries(1)); err != nil {
			t.Fatal(err)
		}
		var syncs atomic.Int32
		mem.SetFault(func(op vfs.Op, name string) error {
			if (op == vfs.OpSync || op == vfs.OpSyncDir) && strings.Contains(name, mirrorStateTopic+"-0") {
				if syncs.Add(1) == 1 && crash {
					return errDied
				}
			}
			return nil
		})
		err := n.states.(*stateLog).putAll(entries(2))
		if crash != (err != nil) {
			t.Fatalf("crash %v: putAll: %v", crash, err)
		}
		if got := syncs.Load(); got != 1 {
			t.Fatalf("crash %v: the putAll of %d records synced %s %d times, want once", crash, count, mirrorStateTopic, got)
		}
		mem.SetFault(nil)
		mem.Crash(nil)
		closeDead(t, n)
		n2 := openStateTestNode(t, mem, "/data")
		want := mirrorstate.StateEpoch(2)
		if crash {
			want = 1 // none of the second putAll
		}
		for _, e := range entries(want) {
			wantState(t, n2, e.key, e.value)
		}
		if err := n2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
