package bench

// The recovery time objective scenario: a failover (`mirrors --stop`) of
// 10,000 mirrored partitions, and the failback's log alignment of them.
//
// The source data directory is filled as the scale scenario's (scaleFill:
// 100 topics of 100 partitions, 200 partitions in smoke mode), a source
// and a mirror `mirrord serve` process start, and the mirror mirrors
// every topic (scaleMirror) until it holds every record. Then:
//
//   - Stop: StopMirrorTopics of every topic (by pattern) is sent to the
//     mirror; the stop's time runs from the send until both its answer
//     came (every topic without error) and a DescribeClusterMirrors
//     shows every partition STOPPED (polled every rtoPollInterval after
//     the answer). Meanwhile, from the send on, two other connections ask
//     the mirror, one request after the other until the stop is over, a
//     DescribeClusterMirrors and a Metadata: their slowest answer is the
//     admin latency during a stop (the first of each is sent with the
//     stop, so at least one of each overlaps it). A Produce to a stopped
//     partition then checks it is writable.
//   - Alignment: the old source creates a mirror of the stopped side and
//     starts every topic (failback); the alignment's time runs from the
//     StartMirrorTopics until DescribeClusterMirrors on the old source
//     shows every partition MIRRORING (LOG_ALIGNMENT done: one lookup of
//     last mirror epochs, a truncation point per partition).
//
// One sample of each per run: the set-up (filling and mirroring 10,000
// partitions) is most of the scenario's time.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/mirrorwire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	rtoTitle          = "Stop and alignment of 10,000 partitions"
	rtoBackMirrorName = "scale-back"
	rtoWait           = 2 * time.Minute // a stop or an alignment, at most
	rtoPollInterval   = 20 * time.Millisecond

	rtoStopGoalSeconds  = 1
	rtoAlignGoalSeconds = 10
	rtoAdminGoalSeconds = 1
)

// rtoResult is what one run of the scenario measured.
type rtoResult struct {
	Partitions int
	StopAnswer time.Duration // StopMirrorTopics sent to answered
	Stop       time.Duration // sent to answered and every partition STOPPED
	// Describe and Metadata are the slowest answers to the requests sent
	// while the stop ran; DescribeCount and MetadataCount how many were.
	Describe, Metadata           time.Duration
	DescribeCount, MetadataCount int
	Align                        time.Duration // StartMirrorTopics to every partition MIRRORING
}

// rtoScenario runs the scenario once and returns its Table.
func rtoScenario(tb testing.TB, mode benchMode) (Table, error) {
	tb.Helper()
	partitions, err := scaleFit(tb, scalePartitions(mode))
	if err != nil {
		return Table{}, err
	}
	layout := newScaleLayout(partitions)
	dir := tb.TempDir()
	scaleFill(tb, filepath.Join(dir, "source"), layout)
	source := startMirrord(tb, filepath.Join(dir, "source"))
	mirror := startMirrord(tb, filepath.Join(dir, "mirror"))
	client := mirror.client()
	defer client.Close()
	setup, err := scaleMirror(client, source.addr, layout)
	if err != nil {
		return Table{}, err
	}
	tb.Logf("rto: %d partitions mirrored in %v", layout.total(), setup.Round(time.Millisecond))
	r, err := rtoStop(mirror, layout)
	if err != nil {
		return Table{}, err
	}
	if r.Align, err = rtoAlign(source, mirror.addr, layout); err != nil {
		return Table{}, err
	}
	tb.Logf("rto: %+v", r)
	return rtoTable(r), nil
}

// rtoStop stops every topic of the mirror and measures it and the admin
// calls answered meanwhile.
func rtoStop(mirror *mirrordProcess, layout scaleLayout) (rtoResult, error) {
	r := rtoResult{Partitions: layout.total()}
	ctx, cancel := context.WithTimeout(context.Background(), rtoWait)
	defer cancel()
	stopper, describer, asker := mirror.client(), mirror.client(), mirror.client()
	defer stopper.Close()
	defer describer.Close()
	defer asker.Close()
	// Connected before the stop, so that the probes' first requests do
	// not wait for a connection.
	for _, c := range []*kgo.Client{stopper, describer, asker} {
		if err := c.Ping(ctx); err != nil {
			return r, err
		}
	}
	stopping := make(chan struct{})
	var wg sync.WaitGroup
	var describeErr, metadataErr error
	probe := func(send func() error, slowest *time.Duration, count *int, failed *error) {
		defer wg.Done()
		for { // bounded by the stop (rtoWait)
			sent := time.Now()
			if err := send(); err != nil {
				*failed = err
				return
			}
			*slowest, *count = max(*slowest, time.Since(sent)), *count+1
			select {
			case <-stopping:
				return
			default:
			}
		}
	}
	wg.Add(2)
	started := time.Now()
	go probe(func() error { _, err := describeStates(ctx, describer); return err }, &r.Describe, &r.DescribeCount, &describeErr)
	go probe(func() error { return metadataOf(ctx, asker) }, &r.Metadata, &r.MetadataCount, &metadataErr)
	err := changeTopics(ctx, stopper, mirrorwire.StopMirroring, scaleMirrorName, scaleTopicPrefix+".*")
	r.StopAnswer = time.Since(started)
	if err == nil {
		err = waitStates(ctx, stopper, scaleMirrorName, layout.total(), "STOPPED")
	}
	r.Stop = time.Since(started)
	close(stopping)
	wg.Wait()
	if err = errors.Join(err, describeErr, metadataErr); err != nil {
		return r, fmt.Errorf("rto: stop: %w", err)
	}
	return r, produceOne(ctx, stopper, layout.topics[0])
}

// rtoAlign starts, on the old source, a mirror of every topic from the
// stopped side and returns the time until every partition is MIRRORING.
func rtoAlign(source *mirrordProcess, stoppedAddr string, layout scaleLayout) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rtoWait)
	defer cancel()
	client := source.client()
	defer client.Close()
	if err := createMirrorWith(ctx, client, rtoBackMirrorName, stoppedAddr, nil); err != nil {
		return 0, err
	}
	started := time.Now()
	if err := changeTopics(ctx, client, mirrorwire.StartMirroring, rtoBackMirrorName, scaleTopicPrefix+".*"); err != nil {
		return 0, err
	}
	if err := waitStates(ctx, client, rtoBackMirrorName, layout.total(), "MIRRORING"); err != nil {
		return 0, fmt.Errorf("rto: alignment: %w", err)
	}
	return time.Since(started), nil
}

// changeTopics sends a topic-state change of the topics matching pattern
// in mirror name and requires every topic's success.
func changeTopics(ctx context.Context, client *kgo.Client, change mirrorwire.TopicsChange, name, pattern string) error {
	req := &mirrorwire.MirrorTopicsRequest{Change: change, MirrorName: name, IncludePatterns: []string{pattern}}
	kresp, err := client.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("%v %s: %w", change, name, err)
	}
	resp := kresp.(*mirrorwire.MirrorTopicsResponse)
	if resp.ErrorCode != 0 {
		return fmt.Errorf("%v %s: %w", change, name, kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			return fmt.Errorf("%v %s: topic %s: %w", change, name, t.TopicName, kerr.ErrorForCode(t.ErrorCode))
		}
	}
	return nil
}

// describeStates counts the partitions of each mirror by state.
func describeStates(ctx context.Context, client *kgo.Client) (map[string]map[string]int, error) {
	kresp, err := client.Request(ctx, &mirrorwire.DescribeClusterMirrorsRequest{})
	if err != nil {
		return nil, fmt.Errorf("describe: %w", err)
	}
	resp := kresp.(*mirrorwire.DescribeClusterMirrorsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("describe: %w", err)
	}
	out := map[string]map[string]int{}
	for _, m := range resp.Mirrors {
		states := map[string]int{}
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				states[p.StateValue]++
			}
		}
		out[m.MirrorName] = states
	}
	return out, nil
}

// waitStates polls describe until mirror name has partitions partitions,
// all in state.
func waitStates(ctx context.Context, client *kgo.Client, name string, partitions int, state string) error {
	var last map[string]int
	err := pollUntil(ctx, rtoPollInterval, func() (bool, error) {
		described, err := describeStates(ctx, client)
		if err != nil {
			return false, err
		}
		last = described[name]
		return last[state] == partitions, nil
	})
	if err != nil {
		return fmt.Errorf("%d partitions of mirror %s not all %s: %v: %w", partitions, name, state, last, err)
	}
	return nil
}

// metadataOf asks for every topic's metadata.
func metadataOf(ctx context.Context, client *kgo.Client) error {
	_, err := client.Request(ctx, kmsg.NewPtrMetadataRequest())
	return err
}

// produceOne writes a record to partition 0 of topic (acks all).
func produceOne(ctx context.Context, client *kgo.Client, topic string) error {
	record := &kgo.Record{Topic: topic, Partition: 0, Value: []byte("written after the stop")}
	if err := client.ProduceSync(ctx, record).FirstErr(); err != nil {
		return fmt.Errorf("rto: produce to %s-0 after the stop: %w", topic, err)
	}
	return nil
}

// rtoTable is the report's section of a run.
func rtoTable(r rtoResult) Table {
	seconds := func(d time.Duration) float64 { return d.Seconds() }
	admin := max(r.Describe, r.Metadata)
	n := strconv.Itoa(r.Partitions)
	return Table{
		Title: rtoTitle,
		Intro: "A failover (`mirrors --stop`) of every topic of a caught-up mirror, and the failback's log alignment " +
			"of the same partitions mirrored back, between two mirrord processes (bench/rto_test.go). " +
			"Stop: StopMirrorTopics sent until answered and every partition STOPPED in DescribeClusterMirrors; " +
			"admin calls: the slowest DescribeClusterMirrors and Metadata answered on other connections while the stop ran. " +
			"Alignment: StartMirrorTopics on the old source until every partition is MIRRORING.",
		Columns: []string{"Step", "Partitions", "Time (ms)", "Requests"},
		Rows: [][]string{
			{"stop: answered", n, formatMilliseconds(r.StopAnswer), "1"},
			{"stop: every partition STOPPED", n, formatMilliseconds(r.Stop), "1"},
			{"DescribeClusterMirrors during the stop (slowest)", n, formatMilliseconds(r.Describe), strconv.Itoa(r.DescribeCount)},
			{"Metadata during the stop (slowest)", n, formatMilliseconds(r.Metadata), strconv.Itoa(r.MetadataCount)},
			{"failback alignment: every partition MIRRORING", n, formatMilliseconds(r.Align), "1"},
		},
		Numbers: map[string]float64{
			"partitions":        float64(r.Partitions),
			"stopAnswerSeconds": seconds(r.StopAnswer),
			"stopSeconds":       seconds(r.Stop),
			"describeSeconds":   seconds(r.Describe),
			"metadataSeconds":   seconds(r.Metadata),
			"describeCount":     float64(r.DescribeCount),
			"metadataCount":     float64(r.MetadataCount),
			"alignSeconds":      seconds(r.Align),
		},
		Goals: []goal{
			measuredGoal(fmt.Sprintf("stop of %d partitions, end to end (s)", r.Partitions), seconds(r.Stop), rtoStopGoalSeconds, true,
				fmt.Sprintf("answered in %v, every partition STOPPED in %v", r.StopAnswer.Round(time.Millisecond), r.Stop.Round(time.Millisecond))),
			measuredGoal(fmt.Sprintf("failback alignment of %d partitions (s)", r.Partitions), seconds(r.Align), rtoAlignGoalSeconds, true, ""),
			measuredGoal("admin calls answered during a stop, slowest (s)", seconds(admin), rtoAdminGoalSeconds, true,
				fmt.Sprintf("DescribeClusterMirrors %v (%d sent), Metadata %v (%d sent)", r.Describe.Round(time.Millisecond), r.DescribeCount,
					r.Metadata.Round(time.Millisecond), r.MetadataCount)),
		},
	}
}

func TestRTOScenarioSmoke(t *testing.T) {
	mode := scenarioMode(t)
	skipForReportSmoke(t, mode, "checkRTO")
	table, err := rtoScenario(t, mode)
	if err != nil {
		t.Fatal(err)
	}
	checkRTO(t, mode, table)
}

// checkRTO checks the table of rtoScenario(mode).
func checkRTO(t *testing.T, mode benchMode, table Table) {
	t.Helper()
	if table.Title != rtoTitle || len(table.Rows) != 5 || len(table.Goals) != 3 {
		t.Fatalf("not sane: %+v", table)
	}
	for _, row := range table.Rows {
		if len(row) != len(table.Columns) {
			t.Errorf("row %v: %d cells, want %d", row, len(row), len(table.Columns))
		}
	}
	n := table.Numbers
	if n["partitions"] <= 0 || n["partitions"] > float64(scalePartitions(mode)) || n["describeCount"] < 1 || n["metadataCount"] < 1 {
		t.Errorf("not sane: %v", n)
	}
	// The stop is over when both its answer came and describe showed it.
	if n["stopAnswerSeconds"] <= 0 || n["stopSeconds"] < n["stopAnswerSeconds"] || n["alignSeconds"] <= 0 || n["describeSeconds"] <= 0 || n["metadataSeconds"] <= 0 {
		t.Errorf("not sane: %v", n)
	}
}
