package main

// Tests of mirrord.Client against a real node: the remote administration
// answers as the engine's own does (a differential test), and the node's
// error codes come back as errors wrapping kerr's.

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// mirroredNodes starts a source node with topics orders (2 partitions)
// and done (1), a record in each partition, and a target node mirroring
// both as mirror m, and waits until the target's own describe shows every
// partition caught up.
func mirroredNodes(t *testing.T) (source, target demoNode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := t.TempDir()
	var err error
	// The nodes serve until the test ends, past this function's ctx.
	if source, err = startDemoNode(context.Background(), filepath.Join(base, "source"), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { source.stop() })
	if target, err = startDemoNode(context.Background(), filepath.Join(base, "target"), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.stop() })
	topics := map[string]int32{"orders": 2, "done": 1}
	for name, partitions := range topics {
		if err := source.node.CreateTopic(ctx, name, partitions, nil); err != nil {
			t.Fatal(err)
		}
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(source.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for name, partitions := range topics {
		for p := range partitions {
			if err := producer.ProduceSync(ctx, &kgo.Record{Topic: name, Partition: p, Value: []byte("hello")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	config := map[string]string{"bootstrap.servers": source.addr, "mirror.metadata.refresh.interval.ms": "200", "fetch.wait.max.ms": "100"}
	if err := target.node.Admin().CreateMirror(ctx, "m", config); err != nil {
		t.Fatal(err)
	}
	if _, err := target.node.Admin().SetTopicsDesiredState(ctx, "m", mirrord.StartMirroring, mirrord.TopicSelection{Names: []string{"orders", "done"}}); err != nil {
		t.Fatal(err)
	}
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		described, err := target.node.Admin().DescribeMirrors(ctx, []string{"m"}, false)
		if err != nil {
			t.Fatal(err)
		}
		caughtUp := 0
		for _, p := range described[0].Partitions {
			if p.State == "MIRRORING" && p.LogEndOffset == 1 && p.Lag() == 0 && p.SourceLeaderEpoch >= 0 {
				caughtUp++
			}
		}
		if caughtUp == 3 {
			return source, target
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the mirror never caught up: %+v", described)
		case <-poll.C:
		}
	}
}

// comparableDescriptions is ds as the wire carries them: times and
// durations to the millisecond, errors compared apart (nil here), and
// the source high watermark's age, which moves between two calls,
// checked apart (0 here when known).
func comparableDescriptions(ds []mirrord.MirrorDescription) []mirrord.MirrorDescription {
	toMillis := func(at time.Time) time.Time {
		if at.IsZero() {
			return at
		}
		return time.UnixMilli(at.UnixMilli())
	}
	out := make([]mirrord.MirrorDescription, 0, len(ds))
	for _, d := range ds {
		d.Err = nil
		d.SourceUnreachableSince = toMillis(d.SourceUnreachableSince)
		if d.GroupSync != nil {
			g := *d.GroupSync
			g.At, g.Duration = toMillis(g.At), g.Duration.Truncate(time.Millisecond)
			d.GroupSync = &g
		}
		if d.ACLSync != nil {
			s := *d.ACLSync
			s.At, s.Duration = toMillis(s.At), s.Duration.Truncate(time.Millisecond)
			d.ACLSync = &s
		}
		partitions := make([]mirrord.MirrorPartitionStatus, 0, len(d.Partitions))
		for _, p := range d.Partitions {
			if p.SourceHighWatermarkAge >= 0 {
				p.SourceHighWatermarkAge = 0
			}
			if p.LagTime >= 0 {
				p.LagTime = p.LagTime.Truncate(time.Millisecond)
			}
			partitions = append(partitions, p)
		}
		d.Partitions = partitions
		out = append(out, d)
	}
	return out
}

// The same describe through the remote client and through the engine's
// own administration of one node gives the same descriptions, and the
// same listing.
func TestAdminClientDescribesAsTheEngine(t *testing.T) {
	_, target := mirroredNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	remote, err := mirrord.Dial(ctx, target.addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	// Stop done (failover) and write to it here: its row is STOPPED with
	// a last mirror epoch and offset, and a leader epoch of its own.
	results, err := remote.SetTopicsDesiredState(ctx, "m", mirrord.StopMirroring, mirrord.TopicSelection{Names: []string{"done"}})
	if err != nil || len(results) != 1 || results[0].Err != nil {
		t.Fatalf("stop done: %+v, %v", results, err)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(target.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "done", Value: []byte("here")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	admins := map[string]mirrord.Admin{"remote": remote, "local": target.node.Admin()}
	for _, c := range []struct {
		names      []string
		failedOnly bool
	}{{nil, false}, {[]string{"m", "nope"}, false}, {[]string{"m"}, true}, {[]string{}, false}} {
		got := map[string][]mirrord.MirrorDescription{}
		for side, admin := range admins {
			if got[side], err = admin.DescribeMirrors(ctx, c.names, c.failedOnly); err != nil {
				t.Fatalf("%s describe %q: %v", side, c.names, err)
			}
		}
		remoteDescriptions, localDescriptions := got["remote"], got["local"]
		if len(remoteDescriptions) != len(localDescriptions) {
			t.Fatalf("describe %q %v: remote %d mirrors, local %d", c.names, c.failedOnly, len(remoteDescriptions), len(localDescriptions))
		}
		for i := range remoteDescriptions {
			r, l := remoteDescriptions[i], localDescriptions[i]
			if (r.Err == nil) != (l.Err == nil) || r.Err != nil && (!errors.Is(r.Err, kerr.ResourceNotFound) || !strings.Contains(r.Err.Error(), l.Err.Error())) {
				t.Errorf("describe %q: mirror %s: remote error %v, local %v", c.names, r.Name, r.Err, l.Err)
			}
			for j := range r.Partitions {
				if j < len(l.Partitions) && (r.Partitions[j].SourceHighWatermarkAge < 0) != (l.Partitions[j].SourceHighWatermarkAge < 0) {
					t.Errorf("partition %d: source high watermark age remote %v, local %v", j, r.Partitions[j].SourceHighWatermarkAge, l.Partitions[j].SourceHighWatermarkAge)
				}
			}
		}
		if r, l := comparableDescriptions(remoteDescriptions), comparableDescriptions(localDescriptions); !reflect.DeepEqual(r, l) {
			t.Errorf("describe %q %v:\nremote %+v\nlocal  %+v", c.names, c.failedOnly, r, l)
		}
	}
	described, err := remote.DescribeMirrors(ctx, []string{"m"}, false)
	if err != nil || len(described) != 1 || len(described[0].Partitions) != 3 {
		t.Fatalf("describe m: %v %+v", err, described)
	}
	for _, p := range described[0].Partitions {
		switch p.Topic {
		case "orders":
			// Caught up: no lag in time; the mirrored batch keeps the
			// source's leader epoch, so the local log's latest is the
			// source leader's.
			if p.State != "MIRRORING" || p.LagTime != 0 || p.LeaderEpoch < 0 || p.LeaderEpoch != p.SourceLeaderEpoch {
				t.Errorf("orders-%d: %s, lag time %v, leader epoch %d, source leader epoch %d", p.Partition, p.State, p.LagTime, p.LeaderEpoch, p.SourceLeaderEpoch)
			}
		case "done":
			// Written here after the stop: past the last mirror epoch.
			if p.State != "STOPPED" || p.LastMirrorOffset != 1 || p.LeaderEpoch <= p.LastMirrorEpoch || p.LogEndOffset < 2 {
				t.Errorf("done-0: %+v", p)
			}
		}
	}
	remoteList, err := remote.ListMirrors(ctx)
	if err != nil {
		t.Fatal(err)
	}
	localList, err := target.node.Admin().ListMirrors(ctx)
	if err != nil || !reflect.DeepEqual(remoteList, localList) || len(remoteList) != 1 || !reflect.DeepEqual(remoteList[0].Topics, []string{"done", "orders"}) {
		t.Errorf("list: remote %+v, local %+v (%v)", remoteList, localList, err)
	}
}

// The node's error codes come back as errors wrapping kerr's, with the
// node's message; a topic's failure is its result's error.
func TestAdminClientErrors(t *testing.T) {
	_, target := mirroredNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	remote, err := mirrord.Dial(ctx, target.addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	err = remote.CreateMirror(ctx, "m", map[string]string{"bootstrap.servers": "127.0.0.1:1"})
	if !errors.Is(err, kerr.DuplicateResource) || !strings.Contains(err.Error(), `mirror "m" exists`) {
		t.Errorf("create a second m: %v", err)
	}
	if err := remote.DeleteMirror(ctx, "nope"); !errors.Is(err, kerr.ResourceNotFound) || !strings.HasPrefix(err.Error(), "RESOURCE_NOT_FOUND") {
		t.Errorf("delete nope: %v", err)
	}
	if _, err := remote.SetTopicsDesiredState(ctx, "nope", mirrord.PauseMirroring, mirrord.TopicSelection{Names: []string{"orders"}}); !errors.Is(err, kerr.ResourceNotFound) {
		t.Errorf("pause on nope: %v", err)
	}
	results, err := remote.SetTopicsDesiredState(ctx, "m", mirrord.StopMirroring, mirrord.TopicSelection{Names: []string{"absent"}})
	if err != nil || len(results) != 1 || results[0].Topic != "absent" || !errors.Is(results[0].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("stop absent: %+v, %v", results, err)
	}
	offline, err := remote.OfflinePartitions(ctx)
	if err != nil || len(offline) != 0 {
		t.Errorf("offline partitions: %+v, %v", offline, err)
	}
	if _, err := mirrord.Dial(ctx, target.addr, map[string]string{"bootstrap.servers": "x:1"}); err == nil || !strings.Contains(err.Error(), "not a security config") {
		t.Errorf("a command config with a non-security key: %v", err)
	}
}

// --describe against a real node shows the lag in time and the leader
// epochs, in the table and the JSON.
func TestMirrorsDescribeLiveNode(t *testing.T) {
	_, target := mirroredNodes(t)
	run := func(args ...string) string {
		t.Helper()
		var out strings.Builder
		if err := mirrorsCommand(context.Background(), append([]string{"--bootstrap-server", target.addr}, args...), &out); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	var described describeOutput
	if err := json.Unmarshal([]byte(run("--describe", "--mirror", "m", "--json")), &described); err != nil {
		t.Fatal(err)
	}
	if len(described.Partitions) != 3 {
		t.Fatalf("partitions %+v", described.Partitions)
	}
	epochs := map[int32]int32{}
	for _, p := range described.Partitions[1:] { // done-0, then orders-0 and -1
		if p.LagMillis != 0 || p.LeaderEpoch < 0 || p.SourceLeaderEpoch != p.LeaderEpoch {
			t.Errorf("partition %d: lagMillis %d, leaderEpoch %d, sourceLeaderEpoch %d", p.Partition, p.LagMillis, p.LeaderEpoch, p.SourceLeaderEpoch)
		}
		epochs[p.Partition] = p.LeaderEpoch
	}
	text := run("--describe", "--mirror", "m")
	lines := strings.Split(text, "\n")
	if len(lines) < 4 || strings.Join(strings.Fields(lines[0]), " ") != "MIRROR TOPIC PARTITION STATE SOURCE-HW LOCAL-LEO LAG LAG-TIME EPOCH SOURCE-EPOCH ERROR" {
		t.Fatalf("describe:\n%s", text)
	}
	for i, line := range lines[2:4] { // done-0, then orders-0 and -1
		epoch := offsetText(int64(epochs[int32(i)]))
		if want := []string{"m", "orders", offsetText(int64(i)), "MIRRORING", "1", "1", "0", "0s", epoch, epoch}; !reflect.DeepEqual(strings.Fields(line), want) {
			t.Errorf("row %q, want %q", line, want)
		}
	}
}

// everyFieldSet is a description whose every field (but Err) holds a
// value other than its zero, times and durations to the millisecond, so
// that a field the client drops or misplaces shows.
func everyFieldSet() mirrord.MirrorDescription {
	at := time.UnixMilli(1_780_000_000_123)
	return mirrord.MirrorDescription{Name: "east", SourceBootstrap: "east-1:9092", SourceClusterID: "Ab3xQ",
		SourceUnreachableSince: at, SourceError: "fetch from broker 1: connection refused",
		Partitions: []mirrord.MirrorPartitionStatus{{Topic: "orders", Partition: 3, State: "FAILED", Error: "source topic deleted", RetryCount: 2,
			SourceHighWatermark: 1200, SourceHighWatermarkAge: 3 * time.Minute, Stale: true, LogEndOffset: 1150, LastMirrorEpoch: 4, LastMirrorOffset: 77,
			LagTime: 200 * time.Second, LeaderEpoch: 9, SourceLeaderEpoch: 11, Leader: 2, ISR: []int32{2, 3}}},
		GroupSync: &mirrord.MirrorGroupSync{At: at.Add(time.Second), Duration: 12 * time.Millisecond, Synced: 2, Skipped: 1, FailedRounds: 4, Error: "NOT_COORDINATOR",
			Groups: []mirrord.MirrorGroupSyncGroup{{Group: "app", OffsetLag: 500, Skipped: true}}},
		ACLSync: &mirrord.MirrorACLSync{At: at.Add(2 * time.Second), Duration: 7 * time.Millisecond, Synced: 3, FailedRounds: 1, Error: "SECURITY_DISABLED"},
	}
}

// requireNoZeroField fails when a field of v (a struct, followed through
// pointers, slices and structs other than time.Time) is its zero value,
// but for the names skipped.
func requireNoZeroField(t *testing.T, path string, v reflect.Value, skipped ...string) {
	t.Helper()
	switch {
	case v.Kind() == reflect.Pointer || v.Kind() == reflect.Slice && v.Len() > 0:
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		} else {
			v = v.Index(0)
		}
		requireNoZeroField(t, path, v, skipped...)
	case v.Kind() == reflect.Struct && v.Type() != reflect.TypeFor[time.Time]():
		for i := range v.NumField() {
			field := v.Type().Field(i)
			if field.IsExported() && !slices.Contains(skipped, field.Name) {
				if v.Field(i).IsZero() {
					t.Errorf("%s.%s is zero: the round trip would not show it dropped", path, field.Name)
				}
				requireNoZeroField(t, path+"."+field.Name, v.Field(i), skipped...)
			}
		}
	}
}

// Every field of a description crosses the wire: netio's server encodes
// what the engine answers, the client decodes it back to the same.
func TestAdminClientRoundTrip(t *testing.T) {
	want := everyFieldSet()
	requireNoZeroField(t, "MirrorDescription", reflect.ValueOf(want), "Err")
	admin, _ := newCLI(t)
	admin.descriptions = []mirrord.MirrorDescription{want}
	addr := serveCLI(t, cliBackend{admin: admin})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	remote, err := mirrord.Dial(ctx, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	got, err := remote.DescribeMirrors(ctx, nil, false)
	if err != nil || len(got) != 1 {
		t.Fatalf("describe: %+v, %v", got, err)
	}
	// The wire carries Unix milliseconds: compare the instants.
	for _, at := range []*time.Time{&got[0].SourceUnreachableSince, &got[0].GroupSync.At, &got[0].ACLSync.At} {
		*at = time.UnixMilli(at.UnixMilli())
	}
	for _, at := range []*time.Time{&want.SourceUnreachableSince, &want.GroupSync.At, &want.ACLSync.At} {
		*at = time.UnixMilli(at.UnixMilli())
	}
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("remote\n%+v\nwant\n%+v", got[0], want)
	}
}
