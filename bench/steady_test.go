package bench

// The steady-state scenarios (issue 20): what mirroring costs once the
// partitions exist and the mirror has caught up once, apart from what
// creating them costs.
//
// Each case (partitions, codec) starts a source and a mirror `mirrord
// serve` process on empty data directories, creates the topic on the
// source and writes one batch to each partition (the prime). The mirror
// then gets its mirror (default config but bootstrap.servers) and starts
// the topic: StartMirrorTopics to the mirror answering the source's log
// end offsets in every partition is the creation cost (the "Partition
// creation" table: wall time and the CPU time of both processes, per
// partition). Then each sample:
//
//  1. pauses the topic on the mirror (PauseMirrorTopics);
//  2. fills the source with the bulk over the network (raw Produce
//     requests of prebuilt batches, one batch per partition per request,
//     steadyFillInflight requests in flight), and checks that the mirror
//     still holds the prime only: the pause held;
//  3. resumes the topic (ResumeMirrorTopics) and polls ListOffsets on the
//     mirror until it answers the source's log end offsets.
//
// The sample is step 3: the bulk's batch bytes over the time from the
// resume to caught up, and the CPU time of the mirror and the source
// processes over it (as the "mirrord" rows count it). The producer's work
// (step 2) is outside it. The bulk is mode.Bytes spread over the
// partitions, at least steadyBatchesMin batches (of 16 records of 1 KiB,
// benchBatch) per partition: 10,000 partitions take 2 batches each, about
// 338 MB uncompressed.
//
// kgo-copier-steady (steady_copier_test.go) measures the franz-go copier
// the same way: its consumer and producer running and caught up on the
// prime, its consumer paused while the source is filled, then resumed.
//
// TestSteadyProfile (steadyProfileEnv) runs the mirror in this process and
// writes a CPU profile of each sample's step 3.

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/mirrorwire"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	scenarioMirrordSteady = "mirrord-steady"
	scenarioCopierSteady  = "kgo-copier-steady"
	// scenarioKafkaReplicationSteady is Kafka's follower replication in
	// the steady state: not measured yet (kafkaReplicationSteady).
	scenarioKafkaReplicationSteady = "kafka-replication-steady"
	creationTitle                  = "Partition creation"

	steadyBatchesMin     = 2                // bulk batches per partition, at least
	steadyRequestBytes   = 1 << 20          // batch bytes per fill request, at most
	steadyFillInflight   = 4                // fill requests awaiting their answer, at most
	steadyWait           = 10 * time.Minute // any one wait of the scenario, at most
	steadyPollPerPartion = 25 * time.Microsecond
	steadyPollMin        = 5 * time.Millisecond
	steadyPollMax        = 250 * time.Millisecond
	steadyLargeCase      = 10_000 // partitions from which a mode takes one sample

	// steadyProfileEnv names a directory: TestSteadyProfile writes the CPU
	// profiles of the mirror there, for the partition counts
	// steadyProfilePartitionsEnv lists (64,1000 when unset), e.g.
	//
	//	MIRRORD_BENCH_STEADY_PROFILE=/tmp/steady go test -run TestSteadyProfile -v -timeout 30m ./bench/
	steadyProfileEnv           = "MIRRORD_BENCH_STEADY_PROFILE"
	steadyProfilePartitionsEnv = "MIRRORD_BENCH_STEADY_PROFILE_PARTITIONS"
)

// steadyCases are the cases of a mode: 1, 64, 1,000 and 10,000
// partitions uncompressed and 1 and 64 lz4; 1 and 100 uncompressed in
// smoke. totalBytes is the bulk of a sample.
func steadyCases(mode benchMode) []mirrorCase {
	type variant struct {
		partitions int32
		codec      rb.Codec
	}
	variants := []variant{{1, rb.CodecNone}, {64, rb.CodecNone}, {1000, rb.CodecNone}, {steadyLargeCase, rb.CodecNone},
		{1, rb.CodecLZ4}, {64, rb.CodecLZ4}}
	if mode.Name == "smoke" {
		variants = []variant{{1, rb.CodecNone}, {100, rb.CodecNone}}
	}
	cases := make([]mirrorCase, len(variants))
	for i, v := range variants {
		cases[i] = mirrorCase{partitions: v.partitions, codec: v.codec, totalBytes: int(mode.Bytes)}
	}
	return cases
}

// steadySamples is how many samples a case takes: one at 10,000
// partitions unless the mode is full.
func steadySamples(mode benchMode, c mirrorCase) int {
	if c.partitions >= steadyLargeCase && !mode.Full {
		return 1
	}
	return mode.Repeats
}

// steadyPoll is the interval of the caught-up polls: a ListOffsets of
// every partition costs the polled node about as much as it has
// partitions, so the interval grows with them.
func steadyPoll(partitions int32) time.Duration {
	return min(steadyPollMax, max(steadyPollMin, time.Duration(partitions)*steadyPollPerPartion))
}

// creationResult is one case's creation: StartMirrorTopics to caught up
// on the prime.
type creationResult struct {
	partitions          int32
	wall                time.Duration
	cpu, mirrorCPU      time.Duration // both processes; the mirror's alone
	primeBytesPerSecond float64
}

// steadyScenarios measures the mirrord-steady and kgo-copier-steady rows
// of mode and the creation table of the mirrord cases.
func steadyScenarios(tb testing.TB, mode benchMode) ([]Measurement, Table) {
	tb.Helper()
	var rows []Measurement
	var creations []creationResult
	for _, c := range steadyCases(mode) {
		row, creation := mirrordSteady(tb, mode, c)
		rows = append(rows, row)
		if c.codec == rb.CodecNone {
			creations = append(creations, creation)
		}
	}
	for _, c := range steadyCases(mode) {
		rows = append(rows, copierSteady(tb, mode, c))
	}
	return rows, creationTable(creations)
}

// kafkaReplicationSteady are the kafka-replication-steady rows of issue
// 20, at 64 and 1,000 partitions: not built yet, so the report says so
// (with withKafka false, the smoke run, there are none).
func kafkaReplicationSteady(withKafka bool) []Measurement {
	if !withKafka {
		return nil
	}
	var rows []Measurement
	for _, partitions := range []int32{64, 1000} {
		rows = append(rows, Measurement{Scenario: scenarioKafkaReplicationSteady, Variant: variantName(partitions, rb.CodecNone),
			Note: "not measured: the steady-state follower replication (a replica added and caught up once, then the bulk) is not built yet"})
	}
	return rows
}

// steadyNodes are the two nodes of a case: the source, always a process,
// and the mirror, a process or (profiling) a node in this process.
type steadyNodes struct {
	source     *mirrordProcess
	mirrorAddr string
	mirrorCPU  func() time.Duration
	mirrorRSS  func() int64 // peak resident set; 0 when not a process
	stop       func()       // stops the processes and removes their data
}

func processNodes(tb testing.TB, dir string, partitions int32) steadyNodes {
	tb.Helper()
	source := startMirrord(tb, filepath.Join(dir, "source"))
	mirror := startMirrord(tb, filepath.Join(dir, "mirror"))
	return steadyNodes{source: source, mirrorAddr: mirror.addr, mirrorCPU: mirror.cpu,
		mirrorRSS: func() int64 { return processPeakRSS(tb, mirror.proc.Pid()) },
		stop:      func() { stopAndRemove(tb, partitions, mirror, source) }}
}

// stopAndRemove stops processes in order (SIGTERM, a clean exit) and
// removes their data directories (not their logs), so that the next case
// shares the machine with nothing of this one. A node of steadyLargeCase
// partitions or more may take longer than mirrordtest.StopWait to close
// (a flush per partition): it is killed then, and the log says so.
func stopAndRemove(tb testing.TB, partitions int32, processes ...*mirrordProcess) {
	tb.Helper()
	for _, p := range processes {
		if partitions < steadyLargeCase {
			p.stop()
		} else if err := p.proc.Stop(); err != nil {
			tb.Logf("steady: %d partitions: %v (killed)", partitions, err)
		}
		if err := os.RemoveAll(p.proc.DataDir); err != nil {
			tb.Fatal(err)
		}
	}
}

// mirrordSteady measures one case with a mirror process.
func mirrordSteady(tb testing.TB, mode benchMode, c mirrorCase) (Measurement, creationResult) {
	tb.Helper()
	if c.partitions > 1000 {
		if _, err := scaleFit(tb, int(c.partitions)); err != nil {
			tb.Fatal(err)
		}
	}
	started := time.Now()
	nodes := processNodes(tb, tb.TempDir(), c.partitions)
	defer nodes.stop()
	run := newSteadyRun(tb, c, nodes)
	defer run.close()
	tb.Logf("mirrord-steady %s: topic created and primed in %v", c, time.Since(started).Round(time.Millisecond))
	creation := run.create()
	tb.Logf("mirrord-steady %s: mirror caught up on the prime in %v", c, creation.wall.Round(time.Millisecond))
	row := Measurement{Scenario: scenarioMirrordSteady, Variant: variantName(c.partitions, c.codec),
		Note: fmt.Sprintf("ResumeMirrorTopics to caught up on %s of batches per partition, mirror caught up once before; source and mirror CPU",
			formatBytes(run.bulkBytes()/int64(c.partitions)))}
	for range steadySamples(mode, c) {
		row.Samples = append(row.Samples, run.sample(nil))
	}
	tb.Logf("mirrord-steady %s: %v in all", c, time.Since(started).Round(time.Millisecond))
	return row, creation
}

// steadyRun is one case on its two nodes.
type steadyRun struct {
	tb      testing.TB
	c       mirrorCase
	nodes   steadyNodes
	source  lagEndpoint // producing to the source
	mirror  *kgo.Client // the mirror's admin client
	broker  int32       // the mirror's node ID
	batch   rb.Batch
	batches int     // bulk batches per partition
	want    []int64 // the source's log end offsets
	ctx     context.Context
	cancel  context.CancelFunc
}

// newSteadyRun creates the topic on the source and primes it: one batch
// per partition.
func newSteadyRun(tb testing.TB, c mirrorCase, nodes steadyNodes) *steadyRun {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), steadyWait)
	r := &steadyRun{tb: tb, c: c, nodes: nodes, ctx: ctx, cancel: cancel, batch: benchBatch(tb, c.codec), want: make([]int64, c.partitions)}
	createSteadyTopic(tb, ctx, nodes.source.addr, c.partitions)
	var err error
	if r.source, err = dialLagEndpoint(ctx, nodes.source.addr, mirrorTopic); err != nil {
		tb.Fatal(err)
	}
	r.mirror, err = kgo.NewClient(kgo.SeedBrokers(nodes.mirrorAddr), kgo.MaxVersions(netio.MirrorClientVersions()),
		kgo.RequestTimeoutOverhead(steadyWait)) // StartMirrorTopics creates 10,000 partitions before it answers
	if err != nil {
		tb.Fatal(err)
	}
	if r.broker, err = nodeID(ctx, r.mirror); err != nil {
		tb.Fatal(err)
	}
	r.batches = max(steadyBatchesMin, (c.totalBytes/int(c.partitions)+len(r.batch)-1)/len(r.batch))
	r.fill(1)
	return r
}

// createSteadyTopic creates the topic on the node at addr, waiting as
// long as a node takes to create 10,000 partitions on a busy machine.
func createSteadyTopic(tb testing.TB, ctx context.Context, addr string, partitions int32) {
	tb.Helper()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestTimeoutOverhead(steadyWait))
	if err != nil {
		tb.Fatal(err)
	}
	defer admin.Close()
	createTopicOn(tb, ctx, admin, mirrorTopic, partitions)
}

func (r *steadyRun) close() {
	r.mirror.Close()
	r.source.client.Close()
	r.cancel()
}

// bulkBytes is the batch bytes of one sample's bulk.
func (r *steadyRun) bulkBytes() int64 {
	return int64(r.batches) * int64(len(r.batch)) * int64(r.c.partitions)
}

// cpu is the CPU time of both nodes so far.
func (r *steadyRun) cpu() (source, mirror time.Duration) {
	return r.nodes.source.cpu(), r.nodes.mirrorCPU()
}

// create creates the mirror and starts the topic, and returns the cost
// until the mirror holds the prime.
func (r *steadyRun) create() creationResult {
	r.tb.Helper()
	if err := createMirror(r.ctx, r.mirror, r.nodes.source.addr); err != nil {
		r.tb.Fatal(err)
	}
	source, mirror := r.cpu()
	started := time.Now()
	if err := startMirrorTopic(r.ctx, r.mirror); err != nil {
		r.tb.Fatal(err)
	}
	r.waitMirrored()
	wall := time.Since(started)
	sourceAfter, mirrorAfter := r.cpu()
	primeBytes := float64(len(r.batch)) * float64(r.c.partitions)
	return creationResult{partitions: r.c.partitions, wall: wall, cpu: sourceAfter - source + mirrorAfter - mirror,
		mirrorCPU: mirrorAfter - mirror, primeBytesPerSecond: primeBytes / wall.Seconds()}
}

// sample pauses the topic, fills the source with the bulk, resumes it and
// measures until the mirror has caught up; profile, when not nil, runs
// around the measured part.
func (r *steadyRun) sample(profile func(work func() error) error) Sample {
	r.tb.Helper()
	if err := changeMirroring(r.ctx, r.mirror, mirrorwire.PauseMirroring, mirrorName, []string{mirrorTopic}, nil); err != nil {
		r.tb.Fatal(err)
	}
	held := slices.Clone(r.want)
	r.fill(r.batches)
	if got, err := listEndOffsets(r.ctx, r.mirror, r.broker, r.c.partitions); err != nil || !slices.Equal(got, held) {
		r.tb.Fatalf("steady %s: the paused mirror moved while the source was filled: end offsets %v, held %v (%v)",
			r.c, steadyOffsets(got), steadyOffsets(held), err)
	}
	var s Sample
	measured := func() error {
		source, mirror := r.cpu()
		started := time.Now()
		if err := changeMirroring(r.ctx, r.mirror, mirrorwire.ResumeMirroring, mirrorName, []string{mirrorTopic}, nil); err != nil {
			return err
		}
		r.waitMirrored()
		wall := time.Since(started)
		sourceAfter, mirrorAfter := r.cpu()
		s = Sample{Wall: wall, Bytes: r.bulkBytes(), Records: int64(r.batches) * mirrorBatchRecords * int64(r.c.partitions),
			CPU: sourceAfter - source + mirrorAfter - mirror, PeakRSS: r.nodes.mirrorRSS()}
		return nil
	}
	var err error
	if profile == nil {
		err = measured()
	} else {
		err = profile(measured)
	}
	if err != nil {
		r.tb.Fatal(err)
	}
	return s
}

// waitMirrored polls the mirror until it answers r.want in every
// partition. A partition that has caught up stays so: each poll asks only
// for those behind at the last, so that the polls cost the mirror little
// beside the mirroring they time.
func (r *steadyRun) waitMirrored() {
	r.tb.Helper()
	behind := make([]int32, r.c.partitions)
	for p := range behind {
		behind[p] = int32(p)
	}
	var last map[int32]int64
	var lastErr error
	err := pollUntil(r.ctx, steadyPoll(r.c.partitions), func() (bool, error) {
		last, lastErr = r.endOffsetsOf(behind)
		behind = slices.DeleteFunc(behind, func(p int32) bool { o, ok := last[p]; return ok && o == r.want[p] })
		return len(behind) == 0, nil
	})
	if err != nil {
		r.tb.Fatalf("steady %s: the mirror did not catch up: %v; %d partitions behind, e.g. %d at %d of %d (%v)", r.c, err,
			len(behind), behind[0], last[behind[0]], r.want[behind[0]], lastErr)
	}
}

// endOffsetsOf asks the mirror for the log end offsets of partitions
// (ListOffsets, latest); a partition that answers an error is left out
// of the answer, and the first such error returned with it.
func (r *steadyRun) endOffsetsOf(partitions []int32) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	topic := kmsg.NewListOffsetsRequestTopic()
	topic.Topic = mirrorTopic
	for _, partition := range partitions {
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp, p.CurrentLeaderEpoch = partition, -1, -1
		topic.Partitions = append(topic.Partitions, p)
	}
	req.Topics = append(req.Topics, topic)
	kresp, err := r.mirror.Broker(int(r.broker)).Request(r.ctx, req)
	if err != nil {
		return nil, err
	}
	offsets := make(map[int32]int64, len(partitions))
	var first error
	for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				first = cmp.Or(first, fmt.Errorf("list offsets %s-%d: %w", t.Topic, p.Partition, err))
				continue
			}
			offsets[p.Partition] = p.Offset
		}
	}
	return offsets, first
}

// steadyOffsets shortens a list of offsets for a message.
func steadyOffsets(offsets []int64) string {
	if len(offsets) <= 8 {
		return fmt.Sprint(offsets)
	}
	return fmt.Sprintf("%v ... (%d partitions, %d records)", offsets[:8], len(offsets), sum(offsets))
}

// fill writes batches batches to every partition of the source: Produce
// requests (acks -1) of one batch per partition, each at most
// steadyRequestBytes, steadyFillInflight in flight; then it checks the
// source's log end offsets.
func (r *steadyRun) fill(batches int) {
	r.tb.Helper()
	perRequest := max(1, steadyRequestBytes/len(r.batch))
	requests := make(chan *kmsg.ProduceRequest)
	var (
		workers sync.WaitGroup
		mu      sync.Mutex
		failed  error
	)
	for range steadyFillInflight {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for req := range requests { // bounded: the requests sent below
				if err := r.produce(req); err != nil {
					mu.Lock()
					if failed == nil {
						failed = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for range batches {
		for first := int32(0); first < r.c.partitions; first += int32(perRequest) {
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = -1, 30_000
			topic := kmsg.NewProduceRequestTopic()
			topic.Topic, topic.TopicID = mirrorTopic, r.source.topicID
			for p := first; p < min(r.c.partitions, first+int32(perRequest)); p++ {
				partition := kmsg.NewProduceRequestTopicPartition()
				partition.Partition, partition.Records = p, r.batch
				topic.Partitions = append(topic.Partitions, partition)
			}
			req.Topics = append(req.Topics, topic)
			requests <- req
		}
	}
	close(requests)
	workers.Wait()
	if failed != nil {
		r.tb.Fatalf("steady %s: fill: %v", r.c, failed)
	}
	for p := range r.want {
		r.want[p] += int64(batches) * mirrorBatchRecords
	}
	got, err := listLatestOffsets(r.ctx, r.source.broker, -1, []string{mirrorTopic}, r.c.partitions)
	if err != nil || !slices.Equal(got[0], r.want) {
		r.tb.Fatalf("steady %s: the source's end offsets after the fill: %v (%v), want %v", r.c, got, err, steadyOffsets(r.want))
	}
}

// produce sends one fill request; a partition's error is an error.
func (r *steadyRun) produce(req *kmsg.ProduceRequest) error {
	kresp, err := r.source.broker.Request(r.ctx, req)
	if err != nil {
		return err
	}
	for _, t := range kresp.(*kmsg.ProduceResponse).Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("produce to %s-%d: %w", mirrorTopic, p.Partition, err)
			}
		}
	}
	return nil
}

// creationTable is the "Partition creation" table of the creations.
func creationTable(creations []creationResult) Table {
	t := Table{Title: creationTitle,
		Intro: "The one-time cost of a new partition: the topic created on the source with one batch (16 records of 1 KiB) per partition, " +
			"then StartMirrorTopics on a fresh mirror until it holds every partition's batch. CPU is the source's and the mirror's processes.",
		Columns: []string{"Partitions", "ms", "ms/partition", "CPU-ms/partition", "mirror CPU-ms/partition"},
		Numbers: map[string]float64{}}
	for _, c := range creations {
		n := float64(c.partitions)
		ms := durationMilliseconds(c.wall)
		perPartition, cpuPerPartition, mirrorPerPartition := ms/n, durationMilliseconds(c.cpu)/n, durationMilliseconds(c.mirrorCPU)/n
		t.Rows = append(t.Rows, []string{strconv.Itoa(int(c.partitions)), formatNumber(ms), formatPrecise(perPartition),
			formatPrecise(cpuPerPartition), formatPrecise(mirrorPerPartition)})
		prefix := fmt.Sprintf("partitions%d.", c.partitions)
		t.Numbers[prefix+"ms"] = ms
		t.Numbers[prefix+"msPerPartition"] = perPartition
		t.Numbers[prefix+"cpuMsPerPartition"] = cpuPerPartition
		t.Numbers[prefix+"mirrorCpuMsPerPartition"] = mirrorPerPartition
	}
	return t
}

// formatBytes is a byte count in KiB or MiB.
func formatBytes(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%s MiB", formatNumber(float64(n)/(1<<20)))
	}
	return fmt.Sprintf("%s KiB", formatNumber(float64(n)/(1<<10)))
}

// TestSteadySmoke runs the steady scenarios in smoke mode (or the mode
// scenarioModeEnv names) and checks that every row and the creation
// table are filled and sane. It asserts no cost.
func TestSteadySmoke(t *testing.T) {
	mode := scenarioMode(t)
	skipForReportSmoke(t, mode, "checkSteady")
	rows, table := steadyScenarios(t, mode)
	checkSteady(t, mode, rows, table)
}

// checkSteady checks the rows and the creation table of
// steadyScenarios(mode).
func checkSteady(t *testing.T, mode benchMode, rows []Measurement, table Table) {
	t.Helper()
	cases := steadyCases(mode)
	if len(rows) != 2*len(cases) {
		t.Fatalf("%d rows, want %d", len(rows), 2*len(cases))
	}
	for _, m := range rows {
		t.Log(formatMeasurement(m))
		if len(m.Samples) == 0 {
			t.Errorf("%s / %s: no samples", m.Scenario, m.Variant)
		}
		for _, s := range m.Samples {
			if s.Wall <= 0 || s.Bytes < mode.Bytes || s.Records <= 0 || s.CPU < 0 {
				t.Errorf("%s / %s: sample %+v", m.Scenario, m.Variant, s)
			}
		}
	}
	uncompressed := 0
	for _, c := range cases {
		uncompressed += boolCount(c.codec == rb.CodecNone)
	}
	if table.Title != creationTitle || len(table.Rows) != uncompressed || len(table.Numbers) != 4*uncompressed {
		t.Errorf("creation table %+v", table)
	}
	for name, value := range table.Numbers {
		if !(value > 0) && !strings.Contains(name, "pu") { // CPU may round to 0 ticks on a tiny case
			t.Errorf("creation table: %s = %v", name, value)
		}
	}
	t.Logf("%+v", table)
}

// TestSteadyProfile profiles the mirror of the steady scenario: the
// mirror is a node in this process (the source a process), and each
// sample's measured part (resume to caught up) is written as
// <dir>/mirror-<partitions>-<sample>-cpu.pprof. Skipped unless
// steadyProfileEnv names the directory; the mode is scenarioModeEnv's.
func TestSteadyProfile(t *testing.T) {
	out := os.Getenv(steadyProfileEnv)
	if out == "" {
		t.Skipf("%s is not set", steadyProfileEnv)
	}
	mode := scenarioMode(t)
	counts := []int32{64, 1000}
	if list := os.Getenv(steadyProfilePartitionsEnv); list != "" {
		counts = nil
		for _, field := range strings.Split(list, ",") {
			n, err := strconv.Atoi(field)
			if err != nil || n <= 0 {
				t.Fatalf("%s=%q: want partition counts", steadyProfilePartitionsEnv, list)
			}
			counts = append(counts, int32(n))
		}
	}
	for _, partitions := range counts {
		c := mirrorCase{partitions: partitions, codec: rb.CodecNone, totalBytes: int(mode.Bytes)}
		if _, err := scaleFit(t, int(max(partitions, scaleTopicPartitions))); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		mirror := serveQuietNode(t, filepath.Join(dir, "mirror"))
		source := startMirrord(t, filepath.Join(dir, "source"))
		nodes := steadyNodes{source: source, mirrorAddr: mirror.addr, mirrorCPU: processCPU, mirrorRSS: func() int64 { return 0 }}
		run := newSteadyRun(t, c, nodes)
		creation := run.create()
		t.Logf("%s: created in %v", c, creation.wall.Round(time.Millisecond))
		for i := range mode.Repeats {
			path := filepath.Join(out, fmt.Sprintf("mirror-%d-%d-cpu.pprof", partitions, i))
			s := run.sample(func(work func() error) error { return profileWindow(t, path, work) })
			t.Logf("%s sample %d: %.0f MB/s, %.3g CPU-s/GB (source and this process)", c, i,
				float64(s.Bytes)/bytesPerMegabyte/s.Wall.Seconds(), s.CPU.Seconds()/(float64(s.Bytes)/bytesPerGigabyte))
		}
		run.close()
		mirror.stop()
		source.kill() // the profiles are the mirror's; its stop is the scenarios' to check
		if err := os.RemoveAll(source.proc.DataDir); err != nil {
			t.Fatal(err)
		}
	}
}

// steadyGoals are issue 20's goals on the steady-state rows.
func steadyGoals(rows []row) []goal {
	throughput := func(r row) float64 { return r.MegabytesPerSecond.Median }
	cpu := func(r row) float64 { return r.CPUSecondsPerGigabyte.Median }
	copier := unmeasuredGoal("steady state: mirrord CPU/GB <= 1/3 of the kgo copier's at every partition count", 1.0/3, true,
		"no mirrord-steady and kgo-copier-steady rows of the same variant")
	if g, ok := worstPair(rows, copier.Name, scenarioMirrordSteady, scenarioCopierSteady, cpu, "CPU-s/GB", copier.Target, true); ok {
		copier = withFraction(g)
	}
	return []goal{
		steadyScalingGoal(rows, "steady state: 64 and 1,000 partitions throughput >= 0.8x one partition's", throughput, "MB/s", 0.8, false),
		steadyScalingGoal(rows, "steady state: 64 and 1,000 partitions CPU/GB <= 1.25x one partition's", cpu, "CPU-s/GB", 1.25, true),
		copier,
		steadyFloorGoal(rows),
	}
}

// steadyScalingGoal judges figure of the 64- and 1,000-partition
// mirrord-steady rows over the one-partition row of the same codec; the
// worst ratio counts.
func steadyScalingGoal(rows []row, name string, figure func(row) float64, unit string, target float64, atMost bool) goal {
	var worst *float64
	detail := ""
	for _, codec := range []rb.Codec{rb.CodecNone, rb.CodecLZ4, rb.CodecZstd} {
		one, ok := findRow(rows, scenarioMirrordSteady, variantName(1, codec))
		if !ok {
			continue
		}
		for _, partitions := range []int32{64, 1000} {
			many, ok := findRow(rows, scenarioMirrordSteady, variantName(partitions, codec))
			if !ok {
				continue
			}
			value := ratioOf(figure(many), figure(one))
			if value != nil && (worst == nil || (atMost && *value > *worst) || (!atMost && *value < *worst)) {
				worst = value
				detail = fmt.Sprintf("%s: %s %s, %s: %s %s (the worst ratio counts)", many.Variant, formatNumber(figure(many)), unit,
					one.Variant, formatNumber(figure(one)), unit)
			}
		}
	}
	if worst == nil {
		return unmeasuredGoal(name, target, atMost, "no mirrord-steady rows of 64 or 1,000 partitions and of one partition with the same codec")
	}
	return measuredGoal(name, *worst, target, atMost, detail)
}

// steadyFloorGoal: the one-partition uncompressed steady row's CPU/GB
// over the kernel-copy floor (the loopback copy's and the file write's
// CPU/GB together).
func steadyFloorGoal(rows []row) goal {
	const name, target = "steady state: one partition CPU/GB <= 1.5x the kernel-copy floor (loopback copy + file write)", 1.5
	cpu := func(r row) float64 { return r.CPUSecondsPerGigabyte.Median }
	one, hasOne := findRow(rows, scenarioMirrordSteady, variantName(1, rb.CodecNone))
	loopback, hasLoopback := findRow(rows, scenarioLimit, variantLimit)
	write, hasWrite := findRow(rows, scenarioLimit, variantFileWrite)
	if !hasOne || !hasLoopback || !hasWrite {
		return unmeasuredGoal(name, target, true, missingRows(hasOne, scenarioMirrordSteady+" / "+variantName(1, rb.CodecNone),
			hasLoopback && hasWrite, "limit / loopback copy and file write"))
	}
	floor := cpu(loopback) + cpu(write)
	detail := fmt.Sprintf("%s: %s CPU-s/GB; floor: %s CPU-s/GB (loopback copy %s + file write %s)", one.Variant, formatPrecise(cpu(one)),
		formatPrecise(floor), formatPrecise(cpu(loopback)), formatPrecise(cpu(write)))
	value := ratioOf(cpu(one), floor)
	if value == nil {
		return unmeasuredGoal(name, target, true, detail+": no floor")
	}
	return measuredGoal(name, *value, target, true, detail)
}
