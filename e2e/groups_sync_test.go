package e2e

// Consumer group offset sync between mirrord nodes (KIP-1279, issue 15):
// after a failover the groups' offsets flow back from the new primary to
// the old one, and a kill -9 of the mirror in the middle of sync rounds
// loses no offset it had synced.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	groupSyncRecords        = 400 // per partition, on the primary before the failover
	groupSyncAfterFailover  = 50  // per partition, written to the new primary
	groupSyncKillGroups     = 40
	groupSyncKillInterval   = 100 * time.Millisecond
	groupSyncKillRounds     = 5
	groupSyncKillDelayMin   = 200 * time.Millisecond // syncing time before a kill
	groupSyncKillDelayMax   = 1200 * time.Millisecond
	groupSyncKillRecords    = 3000 // per partition: the committed offsets stay inside the log
	groupSyncCommitEvery    = 20 * time.Millisecond
	groupSyncCommitRoundMax = 5000
)

// TestGroupOffsetsFailback: B mirrors A and syncs its groups. Group app
// consumes A's topic with a franz-go group consumer and commits; group
// simple commits offsets of its own (a simple consumer). Once B holds
// both, A dies (SIGKILL), the topic is stopped on B, and app, moved to
// B, resumes at the synced offsets, consumes what is written to B and
// commits; simple commits again on B. A restarts and mirrors the topic
// back from B (b-to-a, with group sync): both groups' offsets on A become
// B's, and B's stay what its consumers committed (the stopped topic is
// not synced from A any more).
func TestGroupOffsetsFailback(t *testing.T) {
	// Not parallel: beside another test, its --stop right after A's kill
	// once took more than mirrorCLIWait (20 s) to answer.
	ctx, cancel := context.WithTimeout(context.Background(), failoverDeadline)
	defer cancel()
	started := time.Now()
	a, b := startServer(t), startServer(t)
	createTopics(ctx, t, a.addr, failoverTopics)
	tps := topicPartitions(failoverTopics)
	maker := newRecordMaker(newSeed(t))
	for _, tp := range tps {
		produceTo(ctx, t, newClient(t, a.addr), maker, tp, groupSyncRecords, newLedger())
	}
	startGroupSyncMirror(ctx, t, b, "a-to-b", a.addr, failoverTopic, groupSyncInterval)
	waitMirrorCaughtUp(ctx, t, a.addr, b.addr, tps)

	aEnds, err := endOffsets(ctx, a.addr, tps)
	if err != nil {
		t.Fatal(err)
	}
	resumed := consumeGroupToEnd(ctx, t, a.addr, "app", aEnds)
	simple := map[topicPartition]int64{tps[0]: 100, tps[1]: 250}
	commitSimple(ctx, t, a.addr, "simple", simple)
	onA := map[string]map[topicPartition]int64{"app": aEnds, "simple": simple}
	waitGroupOffsets(ctx, t, b.addr, onA, "B synced A's groups")
	t.Logf("B synced A's groups after %v", time.Since(started).Round(time.Millisecond))
	for _, tp := range tps {
		if resumed[tp] != 0 {
			t.Fatalf("%s: app started at %d on A, want 0", tp, resumed[tp])
		}
	}

	a.kill()
	stopMirror(ctx, t, b, "a-to-b")
	for _, tp := range tps {
		produceTo(ctx, t, newClient(t, b.addr), maker, tp, groupSyncAfterFailover, newLedger())
	}
	bEnds, err := endOffsets(ctx, b.addr, tps)
	if err != nil {
		t.Fatal(err)
	}
	resumed = consumeGroupToEnd(ctx, t, b.addr, "app", bEnds)
	for _, tp := range tps {
		// The stop's marker (a control record) took the synced offset:
		// the first record after it is the next one.
		if resumed[tp] != aEnds[tp]+1 {
			t.Errorf("%s: app resumed at %d on B, want the first record after the synced %d and the stop's marker", tp, resumed[tp], aEnds[tp])
		}
	}
	simple = map[topicPartition]int64{tps[0]: bEnds[tps[0]] - 10, tps[1]: 300}
	commitSimple(ctx, t, b.addr, "simple", simple)
	onB := map[string]map[topicPartition]int64{"app": bEnds, "simple": simple}

	a.start()
	startGroupSyncMirror(ctx, t, a, "b-to-a", b.addr, failoverTopic, groupSyncInterval)
	waitDescribed(ctx, t, a, "b-to-a", func(p describedRow) bool { return p.State == "MIRRORING" })
	waitMirrorCaughtUp(ctx, t, b.addr, a.addr, tps)
	waitGroupOffsets(ctx, t, a.addr, onB, "A synced B's groups after failback")
	if got := readGroupOffsets(ctx, t, b.addr, onB); !sameGroupOffsets(got, onB) {
		t.Errorf("B's offsets %v after failback, want what its consumers committed %v", got, onB)
	}
	t.Logf("the groups' offsets flowed back to A after %v: %v", time.Since(started).Round(time.Millisecond), onB)
}

// TestGroupSyncClampsAndSkipsActive: B mirrors A and syncs its groups.
// Group ahead commits on A past A's end (Kafka and mirrord take any
// offset): B gives it its own high watermark, never more, and follows A's
// next records up to the commit. Group busy has a live member on B (a
// franz-go group consumer) when it commits on A: its offsets on B are
// never written while ahead is synced around it.
func TestGroupSyncClampsAndSkipsActive(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), failoverDeadline)
	defer cancel()
	a, b := startServer(t), startServer(t)
	createTopics(ctx, t, a.addr, failoverTopics)
	tps := topicPartitions(failoverTopics)
	maker := newRecordMaker(newSeed(t))
	for _, tp := range tps {
		produceTo(ctx, t, newClient(t, a.addr), maker, tp, groupSyncRecords, newLedger())
	}
	startGroupSyncMirror(ctx, t, b, "a-to-b", a.addr, failoverTopic, groupSyncInterval)
	ends := waitMirrorCaughtUp(ctx, t, a.addr, b.addr, tps)

	member := newClient(t, b.addr, kgo.ConsumerGroup("busy"), kgo.ConsumeTopics(failoverTopic), kgo.DisableAutoCommit())
	pollCtx, cancelPoll := context.WithTimeout(ctx, time.Second)
	member.PollFetches(pollCtx) // joins the group
	cancelPoll()
	waitGroupState(ctx, t, kadm.NewClient(newClient(t, b.addr)), "busy", "Stable", 1)

	past := int64(groupSyncRecords + groupSyncAfterFailover)
	commitSimple(ctx, t, a.addr, "busy", map[topicPartition]int64{tps[0]: 50, tps[1]: 60})
	commitSimple(ctx, t, a.addr, "ahead", map[topicPartition]int64{tps[0]: past, tps[1]: past})
	waitGroupOffsets(ctx, t, b.addr, map[string]map[topicPartition]int64{"ahead": ends}, "ahead clamped to B's high watermark")
	for _, tp := range tps {
		produceTo(ctx, t, newClient(t, a.addr), maker, tp, groupSyncAfterFailover, newLedger())
	}
	ends = waitMirrorCaughtUp(ctx, t, a.addr, b.addr, tps)
	if ends[tps[0]] != past {
		t.Fatalf("A ends at %d, want %d", ends[tps[0]], past)
	}
	// Two rounds at least ran after busy's commit on A: ahead moved twice.
	want := map[string]map[topicPartition]int64{"ahead": ends, "busy": {}}
	waitGroupOffsets(ctx, t, b.addr, want, "ahead follows A's records; busy, active on B, is not written")
}

// TestGroupSyncSurvivesKill: B mirrors A and syncs groupSyncKillGroups
// groups every groupSyncKillInterval while a committer moves their offsets on A every
// groupSyncCommitEvery. B is killed (SIGKILL) at seeded moments, right
// after its offsets were read: after each restart every group's offset
// on B is at least what was read (nothing synced is lost), and the sync
// goes on by itself. Once the committer stops, B ends with A's offsets.
func TestGroupSyncSurvivesKill(t *testing.T) {
	t.Parallel()
	seed := newSeed(t)
	random := rand.New(rand.NewPCG(seed, 0x67726f7570))
	ctx, cancel := context.WithTimeout(context.Background(), failoverDeadline)
	defer cancel()
	started := time.Now()
	a, b := startServer(t), startServer(t)
	createTopics(ctx, t, a.addr, failoverTopics)
	tps := topicPartitions(failoverTopics)
	maker := newRecordMaker(seed)
	for _, tp := range tps {
		produceTo(ctx, t, newClient(t, a.addr, kgo.ProducerLinger(5*time.Millisecond)), maker, tp, groupSyncKillRecords, newLedger())
	}
	startGroupSyncMirror(ctx, t, b, "a-to-b", a.addr, failoverTopic, groupSyncKillInterval)
	waitMirrorCaughtUp(ctx, t, a.addr, b.addr, tps)

	groups := make([]string, groupSyncKillGroups)
	for i := range groups {
		groups[i] = fmt.Sprintf("g-%02d", i)
	}
	committer := startGroupCommitter(ctx, t, a.addr, groups, tps)
	defer committer.halt()
	empty := map[string]map[topicPartition]int64{}
	for _, g := range groups {
		empty[g] = map[topicPartition]int64{}
	}
	admin := kadm.NewClient(newClient(t, b.addr, kgo.RetryTimeout(20*time.Second)))
	for round := range groupSyncKillRounds {
		delay := groupSyncKillDelayMin + time.Duration(random.Int64N(int64(groupSyncKillDelayMax-groupSyncKillDelayMin)))
		select {
		case <-ctx.Done():
			t.Fatalf("kill round %d: %v", round, ctx.Err())
		case <-time.After(delay):
		}
		before := readGroupOffsets(ctx, t, b.addr, empty)
		b.kill()
		b.start()
		after := fetchManyOffsets(ctx, t, admin, groups)
		synced := 0
		for _, g := range groups {
			for tp, offset := range before[g] {
				if after[g][tp] < offset {
					t.Errorf("kill round %d: group %s %s: %d after the restart, %d synced before the kill", round, g, tp, after[g][tp], offset)
				}
				synced++
			}
		}
		// The sync goes on: some group moves past what it had.
		reason := pollUntil(ctx, mirrorProgressWait, func(ctx context.Context) string {
			now, err := tryFetchManyOffsets(ctx, admin, groups)
			if err != nil {
				return err.Error()
			}
			for _, g := range groups {
				for tp, offset := range now[g] {
					if offset > after[g][tp] {
						return ""
					}
				}
			}
			return "no group's offset moved"
		})
		if reason != "" {
			failWithDescribe(ctx, t, b.addr, "kill round %d: the sync does not go on after the restart: %s", round, reason)
		}
		t.Logf("kill round %d after %v: %d synced offsets read before the kill, none lost", round, delay.Round(time.Millisecond), synced)
	}
	committed := committer.finish(t)
	waitGroupOffsets(ctx, t, b.addr, committed, "B synced A's last commits")
	t.Logf("%d commit rounds of %d groups on A; B ends with A's offsets after %v", committer.rounds, len(groups), time.Since(started).Round(time.Millisecond))
}

// groupCommitter commits, every groupSyncCommitEvery, a higher offset of
// each partition for every group on A (a simple consumer's commit).
type groupCommitter struct {
	stop   chan struct{}
	done   chan error
	rounds int
	last   map[string]map[topicPartition]int64 // valid after finish
}

func startGroupCommitter(ctx context.Context, t *testing.T, addr string, groups []string, tps []topicPartition) *groupCommitter {
	admin := kadm.NewClient(newClient(t, addr))
	c := &groupCommitter{stop: make(chan struct{}), done: make(chan error, 1), last: map[string]map[topicPartition]int64{}}
	go func() {
		tick := time.NewTicker(groupSyncCommitEvery)
		defer tick.Stop()
		for round := 1; round <= groupSyncCommitRoundMax; round++ {
			for i, g := range groups {
				offsets := make(kadm.Offsets)
				committed := map[topicPartition]int64{}
				for j, tp := range tps {
					at := min(int64(round*(1+(i+j)%3)), groupSyncKillRecords)
					offsets.Add(kadm.Offset{Topic: tp.topic, Partition: tp.partition, At: at, LeaderEpoch: -1})
					committed[tp] = at
				}
				resp, err := admin.CommitOffsets(ctx, g, offsets)
				if err == nil {
					err = resp.Error()
				}
				if err != nil {
					c.done <- fmt.Errorf("round %d: commit group %s: %w", round, g, err)
					return
				}
				c.last[g] = committed
			}
			c.rounds = round
			select {
			case <-c.stop:
				c.done <- nil
				return
			case <-ctx.Done():
				c.done <- ctx.Err()
				return
			case <-tick.C:
			}
		}
		c.done <- nil
	}()
	return c
}

func (c *groupCommitter) halt() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
}

// finish stops the committer and returns the offsets it committed last.
func (c *groupCommitter) finish(t *testing.T) map[string]map[topicPartition]int64 {
	t.Helper()
	c.halt()
	if err := <-c.done; err != nil {
		t.Fatalf("committer: %v", err)
	}
	return c.last
}

// consumeGroupToEnd consumes with a franz-go group consumer in group
// until every partition reached ends, commits, leaves, and returns the
// first offset it consumed of each partition.
func consumeGroupToEnd(ctx context.Context, t *testing.T, addr, group string, ends map[topicPartition]int64) map[topicPartition]int64 {
	t.Helper()
	client, err := kgo.NewClient(seeds(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(failoverTopic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	first, next := map[topicPartition]int64{}, map[topicPartition]int64{}
	reached := func() bool {
		for tp, end := range ends {
			if next[tp] < end-1 { // the last offset may be a control record (a stop's marker)
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(time.Minute); !reached(); { // bounded by the deadline
		if time.Now().After(deadline) {
			t.Fatalf("group %s on %s: consumed to %v in a minute, want %v", group, addr, next, ends)
		}
		pollCtx, cancelPoll := context.WithTimeout(ctx, time.Second)
		fetches := client.PollFetches(pollCtx)
		cancelPoll()
		fetches.EachRecord(func(r *kgo.Record) {
			tp := topicPartition{r.Topic, r.Partition}
			if _, ok := first[tp]; !ok {
				first[tp] = r.Offset
			}
			next[tp] = r.Offset + 1
		})
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for tp, end := range ends {
		if offsets[tp.topic] == nil {
			offsets[tp.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[tp.topic][tp.partition] = kgo.EpochOffset{Epoch: -1, Offset: end}
	}
	// The end, past a trailing control record, as Kafka's consumers commit it.
	var commitErr error
	client.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					commitErr = errors.Join(commitErr, kerr.ErrorForCode(p.ErrorCode))
				}
			}
		}
	})
	if err := commitErr; err != nil {
		t.Fatalf("group %s on %s: commit: %v", group, addr, err)
	}
	return first
}

func commitSimple(ctx context.Context, t *testing.T, addr, group string, committed map[topicPartition]int64) {
	t.Helper()
	offsets := make(kadm.Offsets)
	for tp, at := range committed {
		offsets.Add(kadm.Offset{Topic: tp.topic, Partition: tp.partition, At: at, LeaderEpoch: -1})
	}
	resp, err := kadm.NewClient(newClient(t, addr)).CommitOffsets(ctx, group, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit group %s on %s: %v", group, addr, err)
	}
}

// readGroupOffsets fetches, from addr, the offsets of the groups of want.
func readGroupOffsets(ctx context.Context, t *testing.T, addr string, want map[string]map[topicPartition]int64) map[string]map[topicPartition]int64 {
	t.Helper()
	var groups []string
	for g := range want {
		groups = append(groups, g)
	}
	return fetchManyOffsets(ctx, t, kadm.NewClient(newClient(t, addr)), groups)
}

func fetchManyOffsets(ctx context.Context, t *testing.T, admin *kadm.Client, groups []string) map[string]map[topicPartition]int64 {
	t.Helper()
	out, err := tryFetchManyOffsets(ctx, admin, groups)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryFetchManyOffsets is the groups' committed offsets (OffsetFetch).
func tryFetchManyOffsets(ctx context.Context, admin *kadm.Client, groups []string) (map[string]map[topicPartition]int64, error) {
	out := map[string]map[topicPartition]int64{}
	for group, resp := range admin.FetchManyOffsets(ctx, groups...) {
		if resp.Err != nil {
			return nil, fmt.Errorf("fetch the offsets of group %s: %w", group, resp.Err)
		}
		offsets := map[topicPartition]int64{}
		resp.Fetched.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At >= 0 {
				offsets[topicPartition{o.Topic, o.Partition}] = o.At
			}
		})
		out[group] = offsets
	}
	return out, nil
}

func sameGroupOffsets(got, want map[string]map[topicPartition]int64) bool {
	for g, offsets := range want {
		if len(got[g]) != len(offsets) {
			return false
		}
		for tp, at := range offsets {
			if got[g][tp] != at {
				return false
			}
		}
	}
	return true
}

// waitGroupOffsets polls addr until the groups' offsets are want.
func waitGroupOffsets(ctx context.Context, t *testing.T, addr string, want map[string]map[topicPartition]int64, what string) {
	t.Helper()
	admin := kadm.NewClient(newClient(t, addr))
	var groups []string
	for g := range want {
		groups = append(groups, g)
	}
	reason := pollUntil(ctx, mirrorCatchUpWait, func(ctx context.Context) string {
		got, err := tryFetchManyOffsets(ctx, admin, groups)
		if err != nil {
			return err.Error()
		}
		if !sameGroupOffsets(got, want) {
			return fmt.Sprintf("%v", got)
		}
		return ""
	})
	if reason != "" {
		failWithDescribe(ctx, t, addr, "%s: not within %v: offsets %s, want %v", what, mirrorCatchUpWait, reason, want)
	}
}
