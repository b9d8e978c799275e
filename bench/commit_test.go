package bench

// The group-commit scenario: offset commits per second and commit latency
// against a `mirrord serve` process and a 1-node Kafka 4.4 broker in the
// same run (issue 14).
//
// Committers are separate kgo clients (one connection each, as separate
// application instances) committing, in one group, one partition each of
// a topic of as many partitions: OffsetCommit with generation -1 and no
// member ID, what a consumer that assign()s its partitions and keeps its
// position in a group sends (Flink's and Spark's Kafka sources, kgo's
// ConsumePartitions with a group). The coordinator does the same work
// per commit as for a group member's (validate, append the offset record
// to __consumer_offsets, answer), without a rebalance that could fence a
// member midway and make the count depend on timing. All committers in
// one group is the case of one application: one coordinator shard, one
// __consumer_offsets partition, every commit of the run through it.
//
// Each committer commits offset 1, 2, ... of its partition, one request
// in flight, and times each request; after the run OffsetFetch must
// return every committer's last offset. Samples alternate between the two
// servers, so both see the same load on the machine.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

const (
	commitServerMirrord = "mirrord"
	commitServerKafka   = "kafka"
	commitTopic         = "bench-commits"
	// commitVersion is the OffsetCommit version both servers are sent:
	// the newest mirrord serves (v10 names topics by ID).
	commitVersion = 9
	commitWait    = 5 * time.Minute // one sample, at most
	commitRetry   = 50 * time.Millisecond
)

// commitSizes are the committer counts of a mode and the commits of one
// sample, shared among its committers.
func commitSizes(mode benchMode) (committers []int, commits int) {
	switch {
	case mode.Full:
		return []int{1, 16, 64}, 20000
	case mode.Name == "smoke":
		return []int{1, 4}, 40
	}
	return []int{1, 16}, 4000
}

// commitServer is one server under test: where it listens and the process
// whose CPU the sample counts.
type commitServer struct {
	name string
	addr string
	pid  func() int
}

// groupCommitScenario measures mode's committer counts mode.Repeats times
// against a fresh `mirrord serve` process and, when libs is not empty, a
// 1-node Kafka cluster from those jars; the results come mirrord first,
// by committer count.
func groupCommitScenario(tb testing.TB, mode benchMode, libs string) ([]CommitResult, error) {
	tb.Helper()
	committerCounts, commits := commitSizes(mode)
	partitions := int32(slices.Max(committerCounts))
	ctx, cancel := context.WithTimeout(context.Background(), kafkaStartWait)
	defer cancel()

	dir := filepath.Join(tb.TempDir(), "commits")
	process := startMirrord(tb, dir)
	defer os.RemoveAll(dir)
	defer process.kill()
	admin := process.client()
	createTopicOn(tb, ctx, admin, commitTopic, partitions)
	admin.Close()
	servers := []commitServer{{commitServerMirrord, process.addr, process.proc.Pid}}
	if libs != "" {
		cluster, err := startKafkaCluster(ctx, libs, filepath.Join(tb.TempDir(), "commits-kafka"), 1)
		if err != nil {
			return nil, err
		}
		defer cluster.Close()
		broker := cluster.Nodes[0]
		if err := createKafkaTopic(ctx, broker.Addr, commitTopic, partitions, []int32{broker.ID}); err != nil {
			return nil, fmt.Errorf("kafka: %w\n%s", err, cluster.Logs())
		}
		servers = append(servers, commitServer{commitServerKafka, broker.Addr, broker.Pid})
	}

	var results []CommitResult
	for _, server := range servers {
		for _, n := range committerCounts {
			results = append(results, CommitResult{Server: server.name, Committers: n, Note: commitNote(server.name)})
		}
	}
	for ci, n := range committerCounts {
		for repeat := range mode.Repeats {
			group := fmt.Sprintf("bench-commit-%d-%d", n, repeat)
			for si, server := range servers {
				sample, err := commitSample(server, group, n, commits/n)
				if err != nil {
					return nil, fmt.Errorf("group-commit %s, %d committers: %w", server.name, n, err)
				}
				r := &results[si*len(committerCounts)+ci]
				r.Samples = append(r.Samples, sample)
			}
		}
	}
	process.stop()
	return results, nil
}

func commitNote(server string) string {
	if server == commitServerKafka {
		return "1-node Kafka " + kafkatest.Version + " (offsets.topic.num.partitions=3; the broker's default flush: the commit's record is in the page cache, not synced, when answered)"
	}
	return "mirrord serve: each commit's record appended to __consumer_offsets and synced before the answer"
}

// commitSample runs committers clients, each committing its partition
// perCommitter times in group, and measures the run: wall from the start
// of all to the end of the last, the server's CPU over it, and the
// latency of every commit.
func commitSample(server commitServer, group string, committers, perCommitter int) (CommitSample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commitWait)
	defer cancel()
	clients := make([]*kgo.Client, committers)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.OffsetCommit.Int16(), commitVersion)
	for i := range clients {
		client, err := kgo.NewClient(kgo.SeedBrokers(server.addr), kgo.MaxVersions(versions))
		if err != nil {
			return CommitSample{}, err
		}
		clients[i] = client
		// Offset 0, not timed: the connection, the coordinator lookup and
		// (on Kafka) the __consumer_offsets partition's load are set up.
		if err := commitUntilAccepted(ctx, client, group, int32(i), 0); err != nil {
			return CommitSample{}, fmt.Errorf("committer %d: first commit: %w", i, err)
		}
	}
	cpuStart, err := processCPUOf(server.pid())
	if err != nil {
		return CommitSample{}, err
	}
	latencies := make([][]time.Duration, committers)
	errs := make([]error, committers)
	var wg sync.WaitGroup
	started := time.Now()
	for i, client := range clients {
		wg.Add(1)
		go func() { // owned: waited for below
			defer wg.Done()
			latencies[i], errs[i] = commitLoop(ctx, client, group, int32(i), perCommitter)
		}()
	}
	wg.Wait()
	wall := time.Since(started)
	cpuEnd, err := processCPUOf(server.pid())
	if err != nil {
		return CommitSample{}, err
	}
	if err := errors.Join(errs...); err != nil {
		return CommitSample{}, err
	}
	if err := checkCommitted(ctx, clients[0], group, committers, int64(perCommitter)); err != nil {
		return CommitSample{}, err
	}
	all := slices.Concat(latencies...)
	slices.Sort(all)
	return CommitSample{Commits: int64(len(all)), Wall: wall, ServerCPU: cpuEnd - cpuStart,
		P50: percentile(all, 50), P99: percentile(all, 99), Max: all[len(all)-1]}, nil
}

// commitLoop commits offsets 1..count of partition, one at a time, and
// returns each commit's latency; any error ends it.
func commitLoop(ctx context.Context, client *kgo.Client, group string, partition int32, count int) ([]time.Duration, error) {
	latencies := make([]time.Duration, 0, count)
	for offset := int64(1); offset <= int64(count); offset++ {
		sent := time.Now()
		err := commitOffset(ctx, client, group, partition, offset)
		latencies = append(latencies, time.Since(sent))
		if err != nil {
			return nil, fmt.Errorf("commit %s-%d offset %d: %w", commitTopic, partition, offset, err)
		}
	}
	return latencies, nil
}

// commitOffset sends one OffsetCommit of offset for partition in group,
// as a non-member (generation -1), and returns its error.
func commitOffset(ctx context.Context, client *kgo.Client, group string, partition int32, offset int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, -1, ""
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = commitTopic
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = partition, offset, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("%d topics in the answer", len(resp.Topics))
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// commitUntilAccepted retries a commit while the server answers a
// retriable error (a coordinator still loading), until ctx ends.
func commitUntilAccepted(ctx context.Context, client *kgo.Client, group string, partition int32, offset int64) error {
	var last error
	err := pollUntil(ctx, commitRetry, func() (bool, error) {
		last = commitOffset(ctx, client, group, partition, offset)
		if last != nil && !kerr.IsRetriable(last) {
			return false, last
		}
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last answer: %v)", err, last)
	}
	return err
}

// checkCommitted fetches the group's offsets of partitions 0..committers-1
// and requires want in each.
func checkCommitted(ctx context.Context, client *kgo.Client, group string, committers int, want int64) error {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	t := kmsg.NewOffsetFetchRequestTopic()
	t.Topic = commitTopic
	for p := range int32(committers) {
		t.Partitions = append(t.Partitions, p)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return fmt.Errorf("offset fetch: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("offset fetch: %w", err)
	}
	found := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("offset fetch %s-%d: %w", t.Topic, p.Partition, err)
			}
			if t.Topic != commitTopic || p.Offset != want {
				return fmt.Errorf("offset fetch: %s-%d at %d, want %d", t.Topic, p.Partition, p.Offset, want)
			}
			found++
		}
	}
	if found != committers {
		return fmt.Errorf("offset fetch: %d partitions in the answer, want %d", found, committers)
	}
	return nil
}

// TestGroupCommitSmoke runs the group-commit scenario on tiny sizes
// against mirrord and, where the Kafka jars are installed, Kafka (under
// CI=true they must be); it asserts no timing. MIRRORD_BENCH_SCENARIO_MODE=quick
// runs `make bench`'s sizes, to read the numbers without the report:
//
//	MIRRORD_BENCH_SCENARIO_MODE=quick go test -count=1 -timeout 30m -run TestGroupCommitSmoke -v ./bench/
func TestGroupCommitSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mirrord and a Kafka broker")
	}
	mode := scenarioMode(t)
	libs, err := kafkatest.Libs(".")
	if err != nil {
		if !errors.Is(err, kafkatest.ErrNotInstalled) || os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Logf("Kafka side not run: %v", err)
	}
	results, err := groupCommitScenario(t, mode, libs)
	if err != nil {
		t.Fatal(err)
	}
	servers := 1 + boolCount(libs != "")
	checkCommitResults(t, mode, results, servers)
	for _, r := range aggregateCommits(results) {
		t.Logf("%-7s %2d committers: %s commits/s, p50 %s ms, p99 %s ms, server %s µs CPU/commit, x kafka %s",
			r.Server, r.Committers, formatNumber(r.CommitsPerSecond.Median), formatNumber(r.P50Milliseconds),
			formatNumber(r.P99Milliseconds), formatNumber(r.CPUMicrosecondsPerCommit), formatRatio(r.TimesKafka))
	}
}

// checkCommitResults requires one result per server and committer count,
// each with mode.Repeats samples of every commit, sane percentiles.
func checkCommitResults(t *testing.T, mode benchMode, results []CommitResult, servers int) {
	t.Helper()
	counts, commits := commitSizes(mode)
	if want := servers * len(counts); len(results) != want {
		t.Fatalf("%d results, want %d", len(results), want)
	}
	for i, r := range results {
		if wantServer := []string{commitServerMirrord, commitServerKafka}[i/len(counts)]; r.Server != wantServer || r.Committers != counts[i%len(counts)] {
			t.Errorf("result %d: %s with %d committers, want %s with %d", i, r.Server, r.Committers, wantServer, counts[i%len(counts)])
		}
		if len(r.Samples) != mode.Repeats {
			t.Errorf("%s, %d committers: %d samples, want %d", r.Server, r.Committers, len(r.Samples), mode.Repeats)
		}
		for _, s := range r.Samples {
			if want := int64(commits / r.Committers * r.Committers); s.Commits != want || s.Wall <= 0 ||
				!(0 < s.P50 && s.P50 <= s.P99 && s.P99 <= s.Max && s.Max <= s.Wall) {
				t.Errorf("%s, %d committers: sample %+v (want %d commits)", r.Server, r.Committers, s, want)
			}
		}
	}
}
