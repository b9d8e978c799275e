package bench

// The lag scenario: how long after a record's produce is acknowledged by
// the source is it visible on the mirror, at a steady produce rate.
//
// A source `mirrord serve` process holds a writable topic per run (1
// partition; in full mode also 64), a mirror process mirrors them
// (lagNodes; lag_sustain_test.go chooses the rates). This process only
// sends bytes and reads headers, so that the two mirrord processes have
// the machine's cores to themselves:
//
//   - The producer sends prebuilt batches. Before the clock starts it
//     builds lagPoolBatches lz4 batches of lagBatchRecords 1 KiB records
//     (values half pseudo-random, half text: lz4 stores them in about
//     half; non-idempotent, producer ID -1), as BenchmarkMirror's batches,
//     which the half load is measured with. Paced by a 1 ms ticker it
//     sends raw Produce requests (acks -1) through a kgo client's broker
//     handle: each holds the batches owed by then (at most
//     lagRequestBytesMax, and one per partition, as Kafka requires), as
//     consecutive batches of the pool, round-robin over the partitions,
//     without copying them. Up to
//     lagInflightMax requests await their answer; when all do, the bytes
//     owed wait for a later tick. A request's answer gives each
//     partition's base offset: every record in it is acknowledged when
//     the answer arrives.
//   - The watcher long-polls the mirror with raw Fetch requests (no
//     session, read_uncommitted, MaxWait lagWatchWaitMax, MaxBytes 1),
//     each partition from the high watermark it last saw. The mirror
//     answers when a partition's log grows past that offset, with its
//     high watermark and, as KIP-74 wants, one whole batch, whose header
//     alone is checked (its base offset is the fetch offset, lz4,
//     lagBatchRecords records); nothing is decompressed. A record is
//     visible from the first answer whose high watermark is past its
//     offset: a read_uncommitted consumer of the mirror could read it
//     then. A consumer reading the bytes too would add the mirror's cost
//     of serving them (the serve-mirrord row measures that).
//
// One batch per partition goes first, untimed, and is seen on the mirror
// before the timing starts (the mirror's fetcher is long-polling by
// then). The producer stops after a bounded time (lagProduceTime, or
// lagSearchTime for a search run) or lagRecordsMax records; the run ends when the watcher has
// seen every partition's last acknowledged offset. A record's lag is seen
// minus acknowledged, both on this process's monotonic clock; every
// acknowledged offset must be seen, every acknowledged run must follow the
// one before it. A lag can be slightly negative: the source wakes the
// mirror's long poll as it appends, so the mirrored copy may be seen
// before the produce answer reaches this process.
//
// Rates are record batch bytes as stored at the source (lz4-compressed,
// the batch header included), as Sample.Bytes and so mirrord's throughput
// are: the values are about twice as many bytes. The variant names the
// rate asked; RateBytes is the rate reached (the bytes of the timed
// batches over the time from the first timed Produce to the last answer),
// lower when the source answers slower than the pace asks.
//
// The mirror long-polls the source with fetch.wait.max.ms = 500: the
// source answers a waiting Fetch as soon as a partition it names is
// appended to (netio's Watchers), so the wait bounds only how
// often an idle mirror asks, not the lag. A low lag here comes from that
// wake-up, not from polling fast; 500 ms keeps an idle mirror at two
// requests a second while staying well below request.timeout.ms.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	lagMirrorName   = "lag"
	lagRecordBytes  = 1024 // value bytes per record
	lagBatchRecords = 16   // records per batch, as BenchmarkMirror's (Kafka's default batch.size holds 16)
	// lagPoolBatches distinct batches (4 MiB of values, about 2 MiB as
	// stored) are produced in turn: more than a request's worth.
	lagPoolBatches     = 256
	lagRequestBytesMax = 1 << 20 // batch bytes of one Produce request, at most
	lagInflightMax     = 16      // Produce requests awaiting their answer, at most
	lagRecordsMax      = 1 << 24 // timed records per variant, at most (8 bytes of lag each: 128 MiB)
	lagPaceInterval    = time.Millisecond
	lagProduceTimeout  = 30 * time.Second       // a Produce request's TimeoutMillis
	lagFetchWaitMax    = 500 * time.Millisecond // the mirror's fetch.wait.max.ms
	lagWatchWaitMax    = 50 * time.Millisecond  // the watcher's Fetch MaxWaitMillis
	lagSetupWait       = time.Minute            // topic creation and the warm-up batches, at most
	lagDrainWait       = time.Minute            // last acknowledgement to every record seen, at most
	lagPollInterval    = 5 * time.Millisecond

	// scenarioModeEnv selects the mode of TestLagSustainSmoke and
	// TestScaleScenarioSmoke: smoke (unset), quick or full, e.g.
	//
	//	MIRRORD_BENCH_SCENARIO_MODE=quick go test -run 'TestLagSustainSmoke|TestScaleScenarioSmoke' -v -timeout 30m ./bench/
	scenarioModeEnv = "MIRRORD_BENCH_SCENARIO_MODE"
)

// lagProduceTime is how long a measured run produces.
func lagProduceTime(mode benchMode) time.Duration {
	switch mode.Name {
	case "smoke":
		return 2 * time.Second
	case "quick":
		return 15 * time.Second
	}
	return time.Minute
}

// lagNodes are a source process and a mirror process mirroring it, and
// the batches to produce: every lag run of a report shares them, each
// on a topic of its own.
type lagNodes struct {
	source, mirror *mirrordProcess
	pool           *lagPool
	topics         int // topics created so far
}

// startLagNodes starts the source and the mirror and creates the mirror.
func startLagNodes(tb testing.TB) (*lagNodes, error) {
	tb.Helper()
	dir := tb.TempDir()
	nodes := &lagNodes{source: startMirrord(tb, filepath.Join(dir, "source")), mirror: startMirrord(tb, filepath.Join(dir, "mirror"))}
	ctx, cancel := context.WithTimeout(context.Background(), lagSetupWait)
	defer cancel()
	admin := nodes.mirror.client()
	defer admin.Close()
	configs := map[string]string{"fetch.wait.max.ms": strconv.FormatInt(lagFetchWaitMax.Milliseconds(), 10)}
	if err := createMirrorWith(ctx, admin, lagMirrorName, nodes.source.addr, configs); err != nil {
		return nil, err
	}
	pool, err := newLagPool(tb)
	if err != nil {
		return nil, err
	}
	nodes.pool = pool
	return nodes, nil
}

// lagMeasured is one lag run: its result, and the p99 of its last third
// of records in acknowledgement order (a mirror falling behind shows
// there first).
type lagMeasured struct {
	LagResult
	tailP99 time.Duration
	// queued is the time the source's and the mirror's threads spent
	// ready to run but waiting for a core, per second of the run
	// (/proc/<pid>/task/*/schedstat): the machine's share of the lag.
	queued float64
}

// run creates a topic of partitions on the source, mirrors it and times
// rateBytes per second of batches through it for duration.
func (n *lagNodes) run(tb testing.TB, duration time.Duration, partitions int32, rateBytes float64) (lagMeasured, error) {
	if !(rateBytes > 0) || math.IsInf(rateBytes, 0) {
		return lagMeasured{}, fmt.Errorf("lag: rate %v bytes/s: want a positive rate", rateBytes)
	}
	n.topics++
	topic := fmt.Sprintf("lag-%d-%d", n.topics, partitions)
	source, mirror := n.source, n.mirror
	if err := lagSetUp(source, mirror, topic, partitions); err != nil {
		return lagMeasured{}, err
	}
	run := newLagRun(topic, partitions, n.pool)
	queuedBefore := runQueueWait(source.proc.Pid()) + runQueueWait(mirror.proc.Pid())
	cpuBefore, started := [3]time.Duration{source.cpu(), mirror.cpu(), processCPU()}, time.Now()
	if err := run.execute(source.addr, mirror.addr, rateBytes, duration); err != nil {
		return lagMeasured{}, fmt.Errorf("lag, %d partitions at %.0f MB/s: %w", partitions, rateBytes/1e6, err)
	}
	cpuAfter := [3]time.Duration{source.cpu(), mirror.cpu(), processCPU()}
	queued := runQueueWait(source.proc.Pid()) + runQueueWait(mirror.proc.Pid()) - queuedBefore
	lags, err := run.lags()
	if err != nil {
		return lagMeasured{}, err
	}
	tail := slices.Clone(lags[len(lags)*2/3:]) // lags are in offset order: for one partition, acknowledgement order
	slices.Sort(tail)
	reached := float64(run.sentBytes) / run.produceTime.Seconds()
	result := lagMeasured{LagResult: lagResultOf(lags, rateBytes, reached, partitions), tailP99: percentile(tail, 99)}
	var cpu [3]float64
	for i := range cpu {
		cpu[i] = (cpuAfter[i] - cpuBefore[i]).Seconds()
	}
	// The three processes share this machine's cores: near all of them
	// busy, the lag measures the queueing of a saturated machine.
	wall := time.Since(started).Seconds()
	busy := (cpu[0] + cpu[1] + cpu[2]) / wall
	result.NodesBusy, result.Cores = (cpu[0]+cpu[1])/wall, runtime.NumCPU()
	result.queued = queued.Seconds() / wall
	tb.Logf("%s: %d records in %v (%.1f MB/s reached; values %.1f MB/s, stored in %.2f of their bytes); "+
		"p50 %v, p99 %v (last third %v), max %v; %s; %d high watermark rises seen on the mirror; "+
		"CPU s: source %.2f, mirror %.2f, this process %.2f: %.2f of %d cores busy; "+
		"the nodes' threads waited %.2f s for a core per second; load average %s",
		result.Variant, len(lags), run.produceTime.Round(time.Millisecond), reached/1e6,
		float64(len(lags))*lagRecordBytes/run.produceTime.Seconds()/1e6, n.pool.storedRatio(),
		result.P50, result.P99, result.tailP99, result.Max,
		run.answerSummary(), run.rises(), cpu[0], cpu[1], cpu[2], busy, runtime.NumCPU(), result.queued, loadAverage())
	return result, nil
}

// runQueueWait is the time the threads of process pid spent ready to run
// but waiting for a core (the second field of each
// /proc/<pid>/task/<tid>/schedstat); 0 where the kernel does not say.
// Threads that exited are no longer counted.
func runQueueWait(pid int) time.Duration {
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total time.Duration
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the thread exited
		}
		if fields := strings.Fields(string(data)); len(fields) >= 2 {
			waited, _ := strconv.ParseInt(fields[1], 10, 64)
			total += time.Duration(waited)
		}
	}
	return total
}

// loadAverage is the machine's 1-minute load average, "?" if unknown.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if fields := strings.Fields(string(data)); err == nil && len(fields) > 0 {
		return fields[0]
	}
	return "?"
}

// lagSetUp creates topic on the source and starts mirroring it, and
// waits until every partition answers on the mirror.
func lagSetUp(source, mirror *mirrordProcess, topic string, partitions int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), lagSetupWait)
	defer cancel()
	sourceClient := source.client()
	defer sourceClient.Close()
	created, err := kadm.NewClient(sourceClient).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = created.Err
	}
	if err != nil {
		return fmt.Errorf("create %s on the source: %w", topic, err)
	}
	mirrorClient := mirror.client()
	defer mirrorClient.Close()
	if err := startMirroring(ctx, mirrorClient, lagMirrorName, []string{topic}, nil); err != nil {
		return err
	}
	broker, err := nodeID(ctx, mirrorClient)
	if err != nil {
		return err
	}
	return pollUntil(ctx, lagPollInterval, func() (bool, error) {
		_, err := listOffsetsOf(ctx, mirrorClient, broker, []string{topic}, partitions)
		return err == nil, nil
	})
}

// lagEndpoint is how the run talks to one node: a client, its broker
// handle, and the topic's ID there (Produce v13 and Fetch v13 name
// topics by ID).
type lagEndpoint struct {
	client  *kgo.Client
	broker  *kgo.Broker
	topicID [16]byte
}

// dialLagEndpoint connects to the node at addr and looks up its broker
// ID and topic's ID (Metadata); the caller closes the client.
func dialLagEndpoint(ctx context.Context, addr, topic string) (lagEndpoint, error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return lagEndpoint{}, err
	}
	req := kmsg.NewPtrMetadataRequest()
	requested := kmsg.NewMetadataRequestTopic()
	requested.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, requested)
	kresp, err := client.Request(ctx, req)
	if err != nil {
		client.Close()
		return lagEndpoint{}, fmt.Errorf("metadata of %s: %w", addr, err)
	}
	resp := kresp.(*kmsg.MetadataResponse)
	if len(resp.Brokers) != 1 || len(resp.Topics) != 1 {
		client.Close()
		return lagEndpoint{}, fmt.Errorf("metadata of %s: %d brokers and %d topics, want 1 and 1", addr, len(resp.Brokers), len(resp.Topics))
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil || t.TopicID == [16]byte{} {
		client.Close()
		return lagEndpoint{}, fmt.Errorf("metadata of %s: topic %s, ID %x: %v", addr, topic, t.TopicID, err)
	}
	return lagEndpoint{client: client, broker: client.Broker(int(resp.Brokers[0].NodeID)), topicID: t.TopicID}, nil
}

// lagRun is one timed run of one topic. Times are since start on the
// monotonic clock, at least 1 ns.
type lagRun struct {
	topic      string
	partitions int32
	pool       *lagPool
	start      time.Time // set before the watcher starts

	// Owned by the goroutine of execute (the pacer).
	cursor      int     // the pool batch the next request starts at, < lagPoolBatches
	partition   int32   // the partition the next request's first batch goes to
	warmEnds    []int64 // by partition: the log end offset after the warm-up, the first timed offset
	sentBatches int64   // timed batches sent
	sentBytes   int64   // their bytes as stored
	produceTime time.Duration

	// Written by the Produce goroutines, under acksMu.
	acksMu     sync.Mutex
	acks       []lagAck        // one per partition of each answered timed request; at most lagRecordsMax/lagBatchRecords
	answers    []time.Duration // each timed request's time to its answer
	produceErr error           // the first failed request's error
	failed     atomic.Bool

	// Written by the watch goroutine; steps read once it has ended.
	visible  []atomic.Int64 // by partition: the highest high watermark seen on the mirror
	steps    [][]lagStep    // by partition: each rise of the high watermark, in order
	checked  int64          // batches whose header the watcher checked
	watched  chan struct{}  // closed when the watch goroutine ends
	watchErr error          // its result, valid once watched is closed
}

// lagAck is a run of records of one partition acknowledged together:
// [baseOffset, baseOffset+records), answered at at.
type lagAck struct {
	partition  int32
	baseOffset int64
	records    int64
	at         time.Duration
}

// lagStep is a rise of a partition's high watermark on the mirror to
// highWatermark, seen at at: the offsets below it are visible.
type lagStep struct {
	highWatermark int64
	at            time.Duration
}

func newLagRun(topic string, partitions int32, pool *lagPool) *lagRun {
	return &lagRun{topic: topic, partitions: partitions, pool: pool,
		visible: make([]atomic.Int64, partitions), steps: make([][]lagStep, partitions), watched: make(chan struct{})}
}

// since is the time since r.start, at least 1 ns.
func (r *lagRun) since() time.Duration { return max(1, time.Since(r.start)) }

// execute warms the pipeline up, produces the timed batches at rateBytes
// per second for at most duration, and waits until the watcher has seen
// every acknowledged offset on the mirror.
func (r *lagRun) execute(sourceAddr, mirrorAddr string, rateBytes float64, duration time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), lagSetupWait+duration+lagDrainWait)
	defer cancel()
	source, err := dialLagEndpoint(ctx, sourceAddr, r.topic)
	if err != nil {
		return err
	}
	defer source.client.Close()
	mirror, err := dialLagEndpoint(ctx, mirrorAddr, r.topic)
	if err != nil {
		return err
	}
	defer mirror.client.Close()
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	r.start = time.Now()
	go func() {
		defer close(r.watched)
		r.watchErr = r.watch(watchCtx, mirror)
	}()
	err = r.warmUp(ctx, source)
	if err == nil {
		err = r.produce(ctx, source, rateBytes, duration)
	}
	if err == nil {
		err = r.drain(ctx)
	}
	stopWatching()
	<-r.watched
	if err != nil {
		return err
	}
	if r.watchErr != nil {
		return r.watchErr
	}
	if r.checked == 0 {
		return errors.New("the watcher saw no batch on the mirror")
	}
	return nil
}

// warmUp produces one untimed batch to each partition and waits until
// the watcher has seen them all on the mirror.
func (r *lagRun) warmUp(ctx context.Context, source lagEndpoint) error {
	ctx, cancel := context.WithTimeout(ctx, lagSetupWait)
	defer cancel()
	req, records := r.request(source.topicID, int(r.partitions))
	acks, err := r.send(ctx, source, req, records)
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	r.warmEnds = make([]int64, r.partitions)
	for _, a := range acks {
		r.warmEnds[a.partition] = a.baseOffset + a.records
	}
	if err := r.waitVisible(ctx, r.warmEnds); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// drain waits until the watcher has seen every acknowledged offset on the
// mirror.
func (r *lagRun) drain(ctx context.Context) error {
	ends := slices.Clone(r.warmEnds)
	for _, a := range r.acks { // every answer is in: no Produce goroutine is left
		ends[a.partition] = max(ends[a.partition], a.baseOffset+a.records)
	}
	ctx, cancel := context.WithTimeout(ctx, lagDrainWait)
	defer cancel()
	if err := r.waitVisible(ctx, ends); err != nil {
		return fmt.Errorf("the mirror did not show every acknowledged record %v after the last acknowledgement: %w", lagDrainWait, err)
	}
	return nil
}

// waitVisible polls until the watcher has seen each partition's high
// watermark on the mirror reach its end offset in ends; past it, or the
// watcher ending first, is an error.
func (r *lagRun) waitVisible(ctx context.Context, ends []int64) error {
	seen := make([]int64, len(ends))
	err := pollUntil(ctx, lagPollInterval, func() (bool, error) {
		select {
		case <-r.watched:
			return false, fmt.Errorf("the watcher stopped (%v)", r.watchErr)
		default:
		}
		done := true
		for p, end := range ends {
			seen[p] = r.visible[p].Load()
			if seen[p] > end {
				return false, fmt.Errorf("%s-%d: high watermark %d on the mirror, past the %d records produced", r.topic, p, seen[p], end)
			}
			done = done && seen[p] == end
		}
		return done, nil
	})
	if err != nil {
		return fmt.Errorf("high watermarks on the mirror %v, want %v: %w", seen, ends, err)
	}
	return nil
}

// watch long-polls the mirror with Fetch requests from each partition's
// high watermark last seen (see the file comment), and notes each rise,
// until ctx ends (nil) or an error.
func (r *lagRun) watch(ctx context.Context, mirror lagEndpoint) error {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, int32(lagWatchWaitMax.Milliseconds()), 1, 1
	req.IsolationLevel, req.SessionID, req.SessionEpoch = 0, 0, -1 // read_uncommitted, no session
	topic := kmsg.NewFetchRequestTopic()
	topic.Topic, topic.TopicID = r.topic, mirror.topicID
	for p := range r.partitions {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = p, -1, -1, -1, 1
		topic.Partitions = append(topic.Partitions, rp)
	}
	req.Topics = append(req.Topics, topic)
	for ctx.Err() == nil { // bounded by ctx: each pass sees a rise or waits lagWatchWaitMax
		kresp, err := mirror.broker.Request(ctx, req)
		at := r.since()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("watch the mirror: %w", err)
		}
		if err := r.noteVisible(kresp.(*kmsg.FetchResponse), req.Topics[0].Partitions, at); err != nil {
			return fmt.Errorf("watch the mirror: %w", err)
		}
	}
	return nil
}

// noteVisible takes a watch Fetch's answer: each partition's high
// watermark, a rise of it noted as a step and made the partition's next
// fetch offset in asked (by partition), and the header of the one batch
// the answer may carry checked.
func (r *lagRun) noteVisible(resp *kmsg.FetchResponse, asked []kmsg.FetchRequestTopicPartition, at time.Duration) error {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s-%d: %w", r.topic, p.Partition, err)
			}
			if p.Partition < 0 || p.Partition >= r.partitions {
				return fmt.Errorf("%s-%d answered: not asked", r.topic, p.Partition)
			}
			from := &asked[p.Partition].FetchOffset
			if err := lagCheckBatch(p.RecordBatches, *from, p.HighWatermark); err != nil {
				return fmt.Errorf("%s-%d: %w", r.topic, p.Partition, err)
			}
			if len(p.RecordBatches) > 0 {
				r.checked++
			}
			switch {
			case p.HighWatermark < *from:
				return fmt.Errorf("%s-%d: high watermark %d, below %d seen before", r.topic, p.Partition, p.HighWatermark, *from)
			case p.HighWatermark > *from:
				r.steps[p.Partition] = append(r.steps[p.Partition], lagStep{highWatermark: p.HighWatermark, at: at})
				*from = p.HighWatermark
				r.visible[p.Partition].Store(p.HighWatermark)
			}
		}
	}
	return nil
}

// lagCheckBatch checks, by its header alone, the batch a watch Fetch from
// offset from answers: it starts there, ends below the high watermark and
// is one of the pool's (lz4, lagBatchRecords records).
func lagCheckBatch(records []byte, from, highWatermark int64) error {
	if len(records) == 0 {
		return nil
	}
	b, err := rb.ParseHeader(records)
	if err != nil {
		return err
	}
	switch {
	case int64(b.BaseOffset()) != from || int64(b.NextOffset()) > highWatermark:
		return fmt.Errorf("a batch of offsets [%d, %d] answers a fetch from %d (high watermark %d)", b.BaseOffset(), b.LastOffset(), from, highWatermark)
	case b.Codec() != rb.CodecLZ4 || b.RecordCount() != lagBatchRecords:
		return fmt.Errorf("a batch of %d records (%s) at %d: not one of those produced", b.RecordCount(), b.Codec(), from)
	}
	return nil
}

// lags returns the lag of every timed record, by partition and offset:
// when the watcher first saw the mirror's high watermark past its offset
// minus when its Produce was answered. The acknowledged runs of a
// partition must follow each other from its first timed offset, and every
// acknowledged offset must have been seen.
func (r *lagRun) lags() ([]time.Duration, error) {
	byPartition := make([][]lagAck, r.partitions)
	total := int64(0)
	for _, a := range r.acks {
		byPartition[a.partition] = append(byPartition[a.partition], a)
		total += a.records
	}
	if total == 0 {
		return nil, errors.New("no record was timed")
	}
	if total > lagRecordsMax {
		return nil, fmt.Errorf("%d records timed, more than %d", total, lagRecordsMax)
	}
	lags := make([]time.Duration, 0, total)
	for partition, acks := range byPartition {
		slices.SortFunc(acks, func(a, b lagAck) int { return cmp.Compare(a.baseOffset, b.baseOffset) })
		steps, step, next := r.steps[partition], 0, r.warmEnds[partition]
		for _, a := range acks { // bounded: total records in all
			if a.baseOffset != next {
				return nil, fmt.Errorf("%s-%d: records acknowledged from offset %d, want %d", r.topic, partition, a.baseOffset, next)
			}
			for offset := a.baseOffset; offset < a.baseOffset+a.records; offset++ {
				for step < len(steps) && steps[step].highWatermark <= offset {
					step++
				}
				if step == len(steps) {
					return nil, fmt.Errorf("%s-%d: offset %d was acknowledged but never seen on the mirror", r.topic, partition, offset)
				}
				lags = append(lags, steps[step].at-a.at)
			}
			next = a.baseOffset + a.records
		}
	}
	return lags, nil
}

// answerSummary describes how long the timed Produce requests took to be
// answered, once the run has ended.
func (r *lagRun) answerSummary() string {
	if len(r.answers) == 0 {
		return "no Produce request answered"
	}
	slices.Sort(r.answers)
	return fmt.Sprintf("%d Produce requests, answered in p50 %v, p99 %v, max %v",
		len(r.answers), percentile(r.answers, 50), percentile(r.answers, 99), r.answers[len(r.answers)-1])
}

// rises is how many rises of a high watermark the watcher saw, once it
// has ended.
func (r *lagRun) rises() (n int) {
	for _, steps := range r.steps {
		n += len(steps)
	}
	return n
}

// lagResultOf sorts lags and summarizes them.
func lagResultOf(lags []time.Duration, rateBytes, reached float64, partitions int32) LagResult {
	slices.Sort(lags)
	noun := "partitions"
	if partitions == 1 {
		noun = "partition"
	}
	return LagResult{
		Variant:   fmt.Sprintf("%d %s, lz4, %.0f MB/s", partitions, noun, rateBytes/1e6),
		RateBytes: reached,
		Count:     len(lags),
		P50:       percentile(lags, 50),
		P99:       percentile(lags, 99),
		Max:       lags[len(lags)-1],
	}
}

// percentile is the nearest-rank percentile of sorted, which is not empty.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (len(sorted)*p + 99) / 100 // ceil(n p / 100), 1-based
	return sorted[max(rank, 1)-1]
}
