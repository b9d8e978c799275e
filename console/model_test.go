package console

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/netio"
)

// fakeSource is a node whose reports the test sets.
type fakeSource struct {
	mu      sync.Mutex
	reports []engine.MirrorReport
	offline []netio.OfflineLog
	space   broker.LogDirSpace
	calls   int // MirrorReports calls
}

func (f *fakeSource) Cluster() netio.ClusterInfo {
	return netio.ClusterInfo{NodeID: 1, ClusterID: "c1", Host: "127.0.0.1", Port: 9092}
}

func (f *fakeSource) MirrorReports() []engine.MirrorReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.reports
}

func (f *fakeSource) OfflineLogs() []netio.OfflineLog { return f.offline }
func (f *fakeSource) LogDirSpace() broker.LogDirSpace { return f.space }

func (f *fakeSource) set(reports ...engine.MirrorReport) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports = reports
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newFake(samples int) (*fakeSource, *fakeClock, *Console) {
	source := &fakeSource{}
	clock := &fakeClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	return source, clock, New(source, Options{SampleInterval: 10 * time.Second, Samples: samples, Now: clock.Now})
}

func mirroring(topic string, partition int32, bytes, lag int64) engine.MirrorPartitionReport {
	return engine.MirrorPartitionReport{Topic: topic, Partition: partition, State: mirrorstate.Mirroring, Previous: mirrorstate.LogAlignment,
		SourceHighWatermark: 100, SourceHighWatermarkAge: time.Second, LogEndOffset: 100 - lag, LagRecords: lag,
		Lag: time.Duration(lag) * time.Second, Bytes: bytes}
}

// FAILED partitions come first: in the node's list (with their error,
// attempts and previous state) and in their mirror's partitions.
func TestStatusFailedFirst(t *testing.T) {
	source, _, c := newFake(4)
	failed := engine.MirrorPartitionReport{Topic: "pay", Partition: 0, State: mirrorstate.Failed, Previous: mirrorstate.Mirroring,
		Error: "mirror loop: the source mirrors pay from this node", RetryCount: 3, SourceHighWatermark: -1, SourceHighWatermarkAge: -1, LagRecords: -1}
	waiting := engine.MirrorPartitionReport{Topic: "audit", Partition: 2, State: mirrorstate.Failed, Previous: mirrorstate.ULERecovery,
		Error: "unclean leader election", RetryCount: -1, SourceHighWatermark: -1, SourceHighWatermarkAge: -1, LagRecords: -1}
	source.set(
		engine.MirrorReport{Name: "west", Partitions: []engine.MirrorPartitionReport{waiting}},
		engine.MirrorReport{Name: "east", Partitions: []engine.MirrorPartitionReport{mirroring("orders", 0, 0, 0), failed, mirroring("zeta", 0, 0, 0)}},
	)
	s := c.Status()
	want := []FailedPartition{
		{Mirror: "east", Topic: "pay", Partition: 0, Error: failed.Error, Previous: "MIRRORING", Attempts: 3},
		{Mirror: "west", Topic: "audit", Partition: 2, Error: waiting.Error, Previous: "ULE_RECOVERY", WaitsForRecover: true},
	}
	if !reflect.DeepEqual(s.Failed, want) {
		t.Errorf("failed:\n%+v\nwant\n%+v", s.Failed, want)
	}
	if len(s.Mirrors) != 2 || s.Mirrors[0].Name != "east" || s.Mirrors[1].Name != "west" {
		t.Fatalf("mirrors %+v, want east then west", s.Mirrors)
	}
	var order []string
	for _, p := range s.Mirrors[0].Partitions {
		order = append(order, p.State+" "+p.Topic)
	}
	if want := []string{"FAILED pay", "MIRRORING orders", "MIRRORING zeta"}; !reflect.DeepEqual(order, want) {
		t.Errorf("east's partitions %v, want %v", order, want)
	}
	if p := s.Mirrors[0].Partitions[1]; p.Error != "" || p.Previous != "LOG_ALIGNMENT" {
		t.Errorf("a MIRRORING partition: %+v, want no error and its previous state", p)
	}
	if got, want := s.Mirrors[0].States, []StateCount{{"FAILED", 1}, {"MIRRORING", 2}}; !reflect.DeepEqual(got, want) {
		t.Errorf("states %+v, want %+v", got, want)
	}
}

// Throughput is the difference of the partitions' byte counters between
// the last two samples over the time between them; nothing before two
// samples, nothing for a counter that went back (the partition rejoined).
func TestThroughputFromHistory(t *testing.T) {
	source, clock, c := newFake(8)
	report := func(a, b int64) engine.MirrorReport {
		return engine.MirrorReport{Name: "m", Partitions: []engine.MirrorPartitionReport{mirroring("orders", 0, a, 5), mirroring("orders", 1, b, 7)}}
	}
	source.set(report(1000, 500))
	c.Sample()
	m := c.Status().Mirrors[0]
	if m.BytesPerSecond != -1 || m.Partitions[0].BytesPerSecond != -1 || len(m.History) != 1 || m.History[0].BytesPerSecond != -1 {
		t.Errorf("after one sample: %+v, want no throughput yet", m)
	}
	clock.advance(10 * time.Second)
	source.set(report(3000, 200)) // partition 1's counter went back
	c.Sample()
	m = c.Status().Mirrors[0]
	if m.Partitions[0].BytesPerSecond != 200 || m.Partitions[1].BytesPerSecond != -1 || m.BytesPerSecond != 200 {
		t.Errorf("after 2000 bytes in 10s: partitions %+v, mirror %v; want 200 B/s and - for the reset counter", m.Partitions, m.BytesPerSecond)
	}
	clock.advance(5 * time.Second)
	source.set(report(3000, 1200))
	c.Sample()
	m = c.Status().Mirrors[0]
	if m.Partitions[0].BytesPerSecond != 0 || m.Partitions[1].BytesPerSecond != 200 || m.BytesPerSecond != 200 {
		t.Errorf("after 0 and 1000 bytes in 5s: partitions %+v, mirror %v", m.Partitions, m.BytesPerSecond)
	}
	var rates []float64
	for _, s := range m.History {
		rates = append(rates, s.BytesPerSecond)
		if s.LagRecords != 12 || s.LagSeconds != 7 {
			t.Errorf("sample %+v: want lag 12 records (5+7), 7 s (the largest)", s)
		}
	}
	if want := []float64{-1, 200, 200}; !reflect.DeepEqual(rates, want) {
		t.Errorf("history's throughput %v, want %v", rates, want)
	}
}

// The ring holds the last Samples samples, oldest first, however many
// were taken.
func TestHistoryRingWraps(t *testing.T) {
	source, clock, c := newFake(3)
	start := clock.Now()
	for i := range 7 {
		source.set(engine.MirrorReport{Name: "m", Partitions: []engine.MirrorPartitionReport{mirroring("orders", 0, 0, int64(i))}})
		c.Sample()
		clock.advance(10 * time.Second)
		if got := len(c.Status().Mirrors[0].History); got != min(i+1, 3) {
			t.Fatalf("after %d samples: %d held, want %d", i+1, got, min(i+1, 3))
		}
	}
	var lags []int64
	for i, s := range c.Status().Mirrors[0].History {
		lags = append(lags, s.LagRecords)
		if want := start.Add(time.Duration(4+i) * 10 * time.Second); !s.At.Equal(want) {
			t.Errorf("sample %d at %v, want %v", i, s.At, want)
		}
	}
	if want := []int64{4, 5, 6}; !reflect.DeepEqual(lags, want) {
		t.Errorf("held lags %v, want the last three %v", lags, want)
	}
	if got := len(c.history.mirrors["m"].ring); got != 3 {
		t.Errorf("ring of %d, want 3 (fixed)", got)
	}
}

// A mirror gone from the node is dropped from the history at the next
// sample; one that comes back starts afresh.
func TestHistoryDropsMirrors(t *testing.T) {
	source, clock, c := newFake(4)
	a, b := engine.MirrorReport{Name: "a"}, engine.MirrorReport{Name: "b"}
	source.set(a, b)
	c.Sample()
	clock.advance(10 * time.Second)
	source.set(b)
	c.Sample()
	if _, ok := c.history.mirrors["a"]; ok || len(c.history.mirrors) != 1 {
		t.Errorf("history holds %d mirrors after a was deleted, want only b", len(c.history.mirrors))
	}
	clock.advance(10 * time.Second)
	source.set(a, b)
	s := c.Status()
	if len(s.Mirrors[0].History) != 0 || len(s.Mirrors[1].History) != 2 {
		t.Errorf("history lengths a %d, b %d; want 0 and 2", len(s.Mirrors[0].History), len(s.Mirrors[1].History))
	}
	if s.Mirrors[1].History[1].BytesPerSecond != 0 {
		t.Errorf("a mirror without partitions: throughput %v, want 0", s.Mirrors[1].History[1].BytesPerSecond)
	}
}

// The dry run sums the lag of the partitions a stop would affect (not the
// STOPPED ones), says when a lag is only a lower bound or unknown, and
// carries the groups' offset lag and the commands.
func TestDryRun(t *testing.T) {
	source, clock, c := newFake(4)
	stale := mirroring("orders", 1, 0, 40)
	stale.LagLowerBound = true
	unknown := engine.MirrorPartitionReport{Topic: "orders", Partition: 2, State: mirrorstate.Paused, SourceHighWatermark: -1, LagRecords: -1}
	stopped := mirroring("old", 0, 0, 900)
	stopped.State = mirrorstate.Stopped
	source.set(engine.MirrorReport{Name: "east", Partitions: []engine.MirrorPartitionReport{mirroring("orders", 0, 0, 3), stale, unknown, stopped},
		GroupSync: engine.GroupSyncStatus{At: clock.Now(), Lag: map[string]int64{"app": 4, "billing": 6}}})
	d := c.Status().Mirrors[0].DryRun
	want := DryRun{Records: 43, AtLeast: true, Unknown: 1, LagSeconds: 40, GroupOffsetLag: 10,
		DryRunCommand: "mirrord mirrors --bootstrap-server 127.0.0.1:9092 --stop --dry-run --mirror east --topics '.*'",
		Command:       "mirrord mirrors --bootstrap-server 127.0.0.1:9092 --stop --mirror east --topics '.*'"}
	if d != want {
		t.Errorf("dry run\n%+v\nwant\n%+v", d, want)
	}
	source.set(engine.MirrorReport{Name: "east"})
	if d := c.Status().Mirrors[0].DryRun; d.GroupOffsetLag != -1 || d.Records != 0 {
		t.Errorf("no group sync round yet: %+v, want group offset lag -1", d)
	}
}

// Run samples at once and then every interval, until its context ends.
func TestRun(t *testing.T) {
	source := &fakeSource{reports: []engine.MirrorReport{{Name: "m"}}}
	c := New(source, Options{SampleInterval: time.Millisecond, Samples: 4})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for len(c.Status().Mirrors[0].History) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("Run took %d samples in 10s at 1ms", len(c.Status().Mirrors[0].History))
		}
		<-poll.C
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	source.mu.Lock()
	calls := source.calls
	source.mu.Unlock()
	c.Status() // one more call, by Status itself
	source.mu.Lock()
	defer source.mu.Unlock()
	if source.calls != calls+1 {
		t.Errorf("the source was read %d times after Run returned, want only Status's", source.calls-calls)
	}
}
