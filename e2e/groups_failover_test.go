package e2e

// An application fails over to mirrord (KIP-1279, issue 15): consumers in
// groups on a Kafka 4.4 source, mirrord mirroring the topic and syncing
// the groups' committed offsets; the source dies, the topic is stopped on
// mirrord, and the same applications, pointed at mirrord with the same
// group.id, resume at the synced offsets.

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

const (
	groupSyncInterval = 500 * time.Millisecond // mirror.group.offsets.sync.interval.ms in these tests
	// groupSyncRoundSlack is what a sync round may take beyond its tick:
	// its ListGroups, OffsetFetch and commits on a loaded machine. The
	// synced offset at the source's death is at least the source's commit
	// of groupSyncInterval+groupSyncRoundSlack before it.
	groupSyncRoundSlack   = 2 * time.Second
	groupFailoverDeadline = 6 * time.Minute
	groupFailoverConsumed = 9000 // records each application consumes from Kafka before the disaster
	groupFailoverWait     = 2 * time.Minute
	groupFailoverMirror   = "k"
)

// appRun is an application's story in the failover test.
type appRun struct {
	app      failoverApp
	instance appInstance
	before   *vcSeen // consumed from Kafka
	after    *vcSeen // consumed from mirrord after the failover
	// commits is Kafka's committed offsets of the group, sampled.
	commits []commitSample
	synced  map[int32]int64 // mirrord's offsets of the group, last read
}

type commitSample struct {
	at      time.Time
	offsets map[int32]int64
}

// syncAge bounds how old the source's commits that mirrord synced were
// at the source's death: every partition's synced offset was committed
// after the last sample that shows a lower commit of some partition
// (0: the synced offsets are the source's last commits).
func (r *appRun) syncAge(synced map[int32]int64, died time.Time) time.Duration {
	var after time.Time
	last, caughtUp := r.commits[len(r.commits)-1].offsets, true
	for p, offset := range synced {
		caughtUp = caughtUp && last[p] == offset
	}
	if caughtUp {
		return 0
	}
	for _, s := range r.commits {
		for p, offset := range synced {
			if s.offsets[p] < offset {
				after = s.at
			}
		}
	}
	if after.IsZero() {
		return died.Sub(r.commits[0].at)
	}
	return died.Sub(after)
}

// committedAt is the last sample taken at or before at (nil: none).
func (r *appRun) committedAt(at time.Time) map[int32]int64 {
	var out map[int32]int64
	for _, s := range r.commits {
		if s.at.After(at) {
			break
		}
		out = s.offsets
	}
	return out
}

// TestInteropGroupFailover: four applications consume a topic of 6
// partitions from Kafka, each in its own group, while franz-go produces:
// VerifiableConsumer auto-committing, VerifiableConsumer committing after
// each poll, kcat -G and a franz-go group consumer. mirrord mirrors the
// topic and syncs the groups' offsets every groupSyncInterval. Once every
// group has synced offsets on every partition, the producer stops; once
// every application consumed all of it, the applications and then the
// Kafka broker are killed (SIGKILL), the topic is stopped on mirrord, and
// each application is started again against mirrord. Each must resume at
// exactly the offsets mirrord synced, skip nothing mirrord holds (every
// offset below the last mirror offset is consumed before or after), and
// consume again exactly what it had consumed past the synced offsets; the
// synced offsets are at most the source's last commits and at least its
// commits of groupSyncInterval+groupSyncRoundSlack before its death.
func TestInteropGroupFailover(t *testing.T) {
	t.Parallel()
	libs := kafkaLibs(t)
	kcat := findKcat(t)
	started := time.Now()
	cluster := startKafka(t, 1, nil)
	kafka := cluster.Bootstrap()
	ctx, cancel := context.WithTimeout(context.Background(), groupFailoverDeadline)
	defer cancel()
	createKafkaTopic(ctx, t, kafka, verifiableTopic, verifiablePartitions, 1, nil)
	tps := topicPartitions(map[string]int32{verifiableTopic: verifiablePartitions})
	mirror := startServer(t)
	startGroupSyncMirror(ctx, t, mirror, groupFailoverMirror, kafka, verifiableTopic, groupSyncInterval)
	waitDescribed(ctx, t, mirror, groupFailoverMirror, func(p describedRow) bool { return p.State == "MIRRORING" })

	dir := t.TempDir()
	apps := []failoverApp{
		verifiableApp(libs, dir, "vc-auto", true),
		verifiableApp(libs, dir, "vc-manual", false),
		kcatApp(kcat, dir, "kcat"),
		kgoApp("kgo"),
	}
	runs := make([]*appRun, len(apps))
	for i, app := range apps {
		runs[i] = &appRun{app: app, instance: app.start(t, kafka, 0), before: &vcSeen{counts: map[int32][]int{}}, after: &vcSeen{counts: map[int32][]int{}}}
	}
	kafkaAdmin := kadm.NewClient(newClient(t, kafka))
	mirrorAdmin := kadm.NewClient(newClient(t, mirror.addr))
	kafkaAlive := true
	var status string // what the last check found missing, for the failure message
	// step polls the applications into seen and the groups' offsets
	// (Kafka's while it lives, mirrord's), and reports whether done holds.
	step := func(after bool, done func() bool) bool {
		for _, r := range runs {
			seen := r.before
			if after {
				seen = r.after
			}
			r.instance.poll(t, seen)
			if kafkaAlive {
				if offsets, ok := groupOffsetsOf(ctx, t, kafkaAdmin, r.app.group); ok {
					r.commits = append(r.commits, commitSample{time.Now(), offsets})
				}
			}
			if offsets, ok := groupOffsetsOf(ctx, t, mirrorAdmin, r.app.group); ok {
				r.synced = offsets
			}
		}
		return done()
	}
	waitFor := func(what string, after bool, done func() bool) {
		t.Helper()
		tick := time.NewTicker(verifiablePollEvery)
		defer tick.Stop()
		deadline := time.Now().Add(groupFailoverWait)
		for !step(after, done) { // bounded by the deadline
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v: %s", what, groupFailoverWait, status)
			}
			<-tick.C
		}
	}

	producer := startVerifiableProducer(ctx, newClient(t, kafka))
	defer func() {
		producer.halt()
		<-producer.done
	}()
	waitFor("every application consumes and every group is synced on every partition", false, func() bool {
		for _, r := range runs {
			if consumed := r.before.total(); consumed < groupFailoverConsumed || len(r.synced) != int(verifiablePartitions) {
				status = fmt.Sprintf("%s: consumed %d, synced %v", r.app.name, consumed, r.synced)
				return false
			}
		}
		return true
	})
	producer.halt()
	<-producer.done
	if producer.err != nil {
		t.Fatalf("produce: %v", producer.err)
	}
	kafkaEnds, err := endOffsets(ctx, kafka, tps)
	if err != nil {
		t.Fatal(err)
	}
	// Every application is idle at Kafka's end before it dies: what it
	// printed is what it polled (librdkafka stores an offset when it hands
	// the record over, before kcat prints it).
	waitFor("every application consumed what Kafka holds", false, func() bool {
		for _, r := range runs {
			for _, tp := range tps {
				if missing := r.before.missing(tp.partition, kafkaEnds[tp]); missing >= 0 {
					status = fmt.Sprintf("%s: %s offset %d not consumed (end %d)", r.app.name, tp, missing, kafkaEnds[tp])
					return false
				}
			}
		}
		return true
	})

	// The disaster.
	for _, r := range runs {
		r.instance.kill(t)
		r.instance.poll(t, r.before)
	}
	step(false, func() bool { return true }) // Kafka's last commits
	if err := cluster.Kill(cluster.Nodes[0]); err != nil {
		t.Fatal(err)
	}
	kafkaAlive = false
	kafkaKilled := time.Now()
	t.Logf("Kafka killed after %v, %d records produced, ends %v", time.Since(started).Round(time.Millisecond), producer.acked.Load(), kafkaEnds)

	out := runMirrorsOK(ctx, t, mirror.addr, "--stop", "--mirror", groupFailoverMirror, "--topics", verifiableTopic)
	if !strings.Contains(out, "stopped: writable") {
		t.Fatalf("--stop: %q", out)
	}
	lastMirror := lastMirrorOffsets(ctx, t, mirror, groupFailoverMirror, tps)
	step(false, func() bool { return true })
	synced := map[string]map[int32]int64{}
	for _, r := range runs {
		synced[r.app.group] = r.synced
	}

	for _, r := range runs {
		r.instance = r.app.start(t, mirror.addr, 1)
	}
	waitFor("every application resumed on mirrord and consumed to the last mirror offset", true, func() bool {
		for _, r := range runs {
			for _, tp := range tps {
				if s := synced[r.app.group][tp.partition]; s < lastMirror[tp] && r.after.end(tp.partition) < lastMirror[tp] {
					status = fmt.Sprintf("%s: %s consumed to %d on mirrord, last mirror offset %d, synced %d", r.app.name, tp, r.after.end(tp.partition), lastMirror[tp], s)
					return false
				}
			}
		}
		return true
	})
	for _, r := range runs {
		checkResumed(t, r, synced[r.app.group], lastMirror, kafkaKilled, tps)
	}
	t.Logf("done in %v", time.Since(started).Round(time.Millisecond))
}

// checkResumed checks one application's failover: it resumed at the
// synced offsets, consumed again exactly what it had consumed past them,
// and the synced offsets trailed the source's commits by at most a sync
// interval (and the slack of a round).
func checkResumed(t *testing.T, r *appRun, synced map[int32]int64, lastMirror map[topicPartition]int64, kafkaKilled time.Time, tps []topicPartition) {
	t.Helper()
	last := r.commits[len(r.commits)-1].offsets
	floor := r.committedAt(kafkaKilled.Add(-groupSyncInterval - groupSyncRoundSlack))
	var duplicates, expected, behind, bound int64
	for _, tp := range tps {
		p, end := tp.partition, lastMirror[tp]
		s, ok := synced[p]
		if !ok {
			t.Errorf("%s: %s: no offset synced", r.app.name, tp)
			continue
		}
		if missing := r.before.union(r.after).missing(p, end); missing >= 0 {
			t.Errorf("%s: %s: offset %d skipped: consumed neither from Kafka nor from mirrord (last mirror offset %d, synced %d)", r.app.name, tp, missing, end, s)
		}
		if want := min(last[p], end); s > want {
			t.Errorf("%s: %s: synced %d, past the source's last commit %d or the last mirror offset %d", r.app.name, tp, s, last[p], end)
		}
		if low := min(floor[p], end); s < low {
			t.Errorf("%s: %s: synced %d, below the source's commit %d of %v before its death", r.app.name, tp, s, low, groupSyncInterval+groupSyncRoundSlack)
		}
		if first := r.after.first(p); s < end && first != s {
			t.Errorf("%s: %s: resumed at %d on mirrord, synced %d", r.app.name, tp, first, s)
		}
		consumedBefore := r.before.end(p)
		expected += max(min(consumedBefore, end)-s, 0)
		bound += max(min(consumedBefore, end)-min(floor[p], end), 0)
		behind += max(last[p]-s, 0)
		for o, n := range r.before.union(r.after).counts[p] {
			if int64(o) < end {
				duplicates += int64(max(n-1, 0))
			}
		}
	}
	t.Logf("%s: %d duplicates after the failover, bound %d (synced offsets %v: the source's commits of at most %v before its death; source's last commits %v, %d records ahead of them; consumed to %v)",
		r.app.name, duplicates, bound, synced, r.syncAge(synced, kafkaKilled).Round(time.Millisecond), last, behind, r.before.ends())
	if duplicates != expected {
		t.Errorf("%s: %d records consumed twice, want %d: what was consumed past the synced offsets", r.app.name, duplicates, expected)
	}
}

// startGroupSyncMirror creates mirror name on target from source, with
// group offset sync every interval, and starts topic.
func startGroupSyncMirror(ctx context.Context, t *testing.T, target *server, name, source, topic string, interval time.Duration) {
	t.Helper()
	config := writeMirrorConfig(t, source)
	appendProperties(t, config, fmt.Sprintf("mirror.group.offsets.sync.interval.ms=%d\n", interval.Milliseconds()))
	runMirrorsOK(ctx, t, target.addr, "--create", "--mirror", name, "--mirror-config", config)
	runMirrorsOK(ctx, t, target.addr, "--start", "--mirror", name, "--topics", topic)
}

// appendProperties adds text to the properties file at path.
func appendProperties(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(text)
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// lastMirrorOffsets reads --describe --json and requires every partition
// of tps STOPPED with a last mirror offset; it returns those.
func lastMirrorOffsets(ctx context.Context, t *testing.T, node *server, name string, tps []topicPartition) map[topicPartition]int64 {
	t.Helper()
	described, out := describeMirror(ctx, t, node.addr, name)
	lme := map[topicPartition]int64{}
	for _, p := range described.Partitions {
		if p.State != "STOPPED" || p.LastMirrorOffset < 0 {
			t.Fatalf("after --stop: %+v, want STOPPED with a last mirror offset\n%s", p, out)
		}
		lme[topicPartition{p.Topic, p.Partition}] = p.LastMirrorOffset
	}
	if len(lme) != len(tps) {
		t.Fatalf("after --stop: %d partitions described, want %d\n%s", len(lme), len(tps), out)
	}
	return lme
}

// groupOffsetsOf is group's committed offsets of verifiableTopic at
// the admin's cluster (OffsetFetch); false when the coordinator is not
// ready yet (a retriable error: Kafka loading __consumer_offsets).
func groupOffsetsOf(ctx context.Context, t *testing.T, admin *kadm.Client, group string) (map[int32]int64, bool) {
	t.Helper()
	fetched, err := admin.FetchOffsets(ctx, group)
	if kerr.IsRetriable(err) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("fetch the offsets of group %s: %v", group, err)
	}
	out := map[int32]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Fatalf("fetch the offsets of group %s, %s-%d: %v", group, o.Topic, o.Partition, o.Err)
		}
		if o.Topic == verifiableTopic && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out, true
}

// total is the number of offsets consumed, once or more.
func (s *vcSeen) total() int64 {
	var n int64
	for _, c := range s.counts {
		for _, k := range c {
			if k > 0 {
				n++
			}
		}
	}
	return n
}

// first is the lowest offset of partition consumed, or -1.
func (s *vcSeen) first(partition int32) int64 {
	for o, n := range s.counts[partition] {
		if n > 0 {
			return int64(o)
		}
	}
	return -1
}

// end is one past the highest offset of partition consumed (0: none).
func (s *vcSeen) end(partition int32) int64 {
	c := s.counts[partition]
	for o := len(c) - 1; o >= 0; o-- {
		if c[o] > 0 {
			return int64(o) + 1
		}
	}
	return 0
}

// ends is end of every partition, sorted, for messages.
func (s *vcSeen) ends() string {
	var partitions []int
	for p := range s.counts {
		partitions = append(partitions, int(p))
	}
	sort.Ints(partitions)
	var parts []string
	for _, p := range partitions {
		parts = append(parts, fmt.Sprintf("%d:%d", p, s.end(int32(p))))
	}
	return strings.Join(parts, " ")
}

// union is a new vcSeen with the counts of both.
func (s *vcSeen) union(other *vcSeen) *vcSeen {
	out := &vcSeen{counts: map[int32][]int{}}
	for _, from := range []*vcSeen{s, other} {
		for p, c := range from.counts {
			sum := out.counts[p]
			for len(sum) < len(c) {
				sum = append(sum, 0)
			}
			for o, n := range c {
				sum[o] += n
			}
			out.counts[p] = sum
		}
	}
	return out
}
