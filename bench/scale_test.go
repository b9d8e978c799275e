package bench

// The scale scenario: what a mirror of many mostly idle partitions costs
// while nothing happens.
//
// A source data directory is filled in this process through the node's
// produce path: scalePartitions(mode) partitions (10,000 as 100 topics of
// 100; 200 in smoke mode), each holding one batch of
// scaleRecordsPerPartition small records; then a source `mirrord serve`
// process serves it. A mirror process gets one mirror (default config
// but bootstrap.servers) and starts every topic by pattern (scale-.*).
// SetupTime runs from StartMirrorTopics until ListOffsets on the mirror
// answers the source's log end offset in every partition (polled every
// scalePollInterval). Then, with no writes anywhere, the mirror's CPU
// time per second of wall time over an idle window (smoke 2 s, quick
// 20 s, full 60 s), from /proc/<pid>/stat (10 ms ticks), and its VmRSS
// at the end: the ScaleResult. Then a window as long during which a
// producer in this process writes one record every scaleWriteInterval to
// 1% of the partitions (one per topic), after which the mirror must hold
// them all; its cost is logged, not returned: a ScaleResult cannot say
// that it was not idle, and the report takes every row of 10,000
// partitions for an idle one.
//
// Every partition keeps one file open (its active .log; the indexes stay
// mapped without a descriptor), in the source, the mirror and this
// process while it fills: 10,000 partitions need 10,000 descriptors, more
// than a common soft limit of 1,024. scaleFit raises this process's
// RLIMIT_NOFILE (the children inherit it); above the hard limit that needs
// CAP_SYS_RESOURCE, and without it the scenario measures as many
// partitions as fit (the result says how many).
//
// TestScaleProfile (scaleProfileEnv) runs the same with the mirror, or
// the source, in this process instead, for CPU profiles of both windows
// and a heap profile after them.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	scaleMirrorName          = "scale"
	scaleTopicPrefix         = "scale-"
	scaleTopicPartitions     = 100 // partitions per topic
	scaleRecordsPerPartition = 4
	scaleValueBytes          = 100
	scaleSetupWait           = 10 * time.Minute // StartMirrorTopics to caught up, at most
	scalePollInterval        = 250 * time.Millisecond
	scaleWriteInterval       = 100 * time.Millisecond // per written partition
	scaleCatchUpWait         = time.Minute            // end of the write window to the mirror holding every write
	scaleFilesPerPartition   = 1                      // descriptors a partition keeps open
	scaleFilesSpare          = 1024                   // descriptors besides the partitions'

	// scalePartitionsEnv overrides the partition count of every mode (a
	// multiple of 100, at least 100), to see how the costs grow.
	scalePartitionsEnv = "MIRRORD_BENCH_SCALE_PARTITIONS"
	// scaleProfileEnv names a directory: TestScaleProfile writes its
	// profiles there, for the mode scenarioModeEnv names, e.g.
	//
	//	MIRRORD_BENCH_SCENARIO_MODE=quick MIRRORD_BENCH_SCALE_PROFILE=/tmp/scale go test -run TestScaleProfile -v -timeout 30m ./bench/
	scaleProfileEnv = "MIRRORD_BENCH_SCALE_PROFILE"
	// scaleProfileSideEnv says which node TestScaleProfile runs in this
	// process: mirror (unset) or source.
	scaleProfileSideEnv = "MIRRORD_BENCH_SCALE_PROFILE_SIDE"
)

// scalePartitions is the partition count of a mode, or the one
// scalePartitionsEnv sets.
func scalePartitions(mode benchMode) int {
	if n, err := strconv.Atoi(os.Getenv(scalePartitionsEnv)); err == nil && n >= scaleTopicPartitions {
		return n - n%scaleTopicPartitions
	}
	if mode.Name == "smoke" {
		return 200
	}
	return 10_000
}

// scaleWindow is how long each measuring window lasts.
func scaleWindow(mode benchMode) time.Duration {
	switch mode.Name {
	case "smoke":
		return 2 * time.Second
	case "quick":
		return 20 * time.Second
	}
	return time.Minute
}

// scaleLayout is the source's topics: partitions each.
type scaleLayout struct {
	topics     []string
	partitions int32 // per topic
}

func newScaleLayout(total int) scaleLayout {
	layout := scaleLayout{partitions: scaleTopicPartitions}
	for i := range total / scaleTopicPartitions {
		layout.topics = append(layout.topics, fmt.Sprintf("%s%03d", scaleTopicPrefix, i))
	}
	return layout
}

func (l scaleLayout) total() int { return len(l.topics) * int(l.partitions) }

// scaleScenario measures an idle mirror of scalePartitions(mode)
// partitions, or as many as the open-file limit allows, and logs the cost
// of writing to 1% of them.
func scaleScenario(tb testing.TB, mode benchMode) ([]ScaleResult, error) {
	tb.Helper()
	partitions, err := scaleFit(tb, scalePartitions(mode))
	if err != nil {
		return nil, err
	}
	layout := newScaleLayout(partitions)
	dir := tb.TempDir()
	filled := time.Now()
	scaleFill(tb, filepath.Join(dir, "source"), layout)
	tb.Logf("filled %d partitions in %v", layout.total(), time.Since(filled).Round(time.Millisecond))
	source := startMirrord(tb, filepath.Join(dir, "source"))
	mirror := startMirrord(tb, filepath.Join(dir, "mirror"))
	client := mirror.client()
	defer client.Close()
	setup, err := scaleMirror(client, source.addr, layout)
	if err != nil {
		return nil, err
	}
	window := scaleWindow(mode)
	idle, err := scaleIdle(tb, source, mirror, window)
	if err != nil {
		return nil, err
	}
	idle.Partitions, idle.SetupTime = layout.total(), setup
	if _, err := scaleWritten(tb, source, mirror, client, layout, window); err != nil {
		return []ScaleResult{idle}, err
	}
	return []ScaleResult{idle}, nil
}

// scaleFit returns how many of want partitions fit this process's
// RLIMIT_NOFILE (scaleFilesPerPartition each, and scaleFilesSpare
// besides), after raising the limit as far as this process may; children
// started later inherit it. The count is a multiple of
// scaleTopicPartitions.
func scaleFit(tb testing.TB, want int) (int, error) {
	tb.Helper()
	need := uint64(want*scaleFilesPerPartition + scaleFilesSpare)
	var limit syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &limit); err != nil {
		return 0, err
	}
	previous := limit
	raised := syscall.Rlimit{Cur: need, Max: max(limit.Max, need)}
	if limit.Cur < need && syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) != nil {
		// Raising the hard limit needs CAP_SYS_RESOURCE: up to it, then.
		raised = syscall.Rlimit{Cur: limit.Max, Max: limit.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			return 0, err
		}
	}
	if limit.Cur < need {
		limit = raised
		tb.Cleanup(func() {
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &previous); err != nil {
				tb.Errorf("restore RLIMIT_NOFILE: %v", err)
			}
		})
	}
	fit := want
	if limit.Cur < need {
		fit = int(max(limit.Cur, scaleFilesSpare)-scaleFilesSpare) / scaleFilesPerPartition
		fit -= fit % scaleTopicPartitions
		tb.Logf("scale: %d partitions need %d open files, RLIMIT_NOFILE is %d and cannot be raised: measuring %d partitions",
			want, need, limit.Cur, fit)
	}
	if fit < scaleTopicPartitions {
		return 0, fmt.Errorf("scale: RLIMIT_NOFILE %d leaves room for %d partitions", limit.Cur, fit)
	}
	return fit, nil
}

// scaleFill creates layout's topics in a node on dir and writes one batch
// of scaleRecordsPerPartition records to each partition, then closes it.
func scaleFill(tb testing.TB, dir string, layout scaleLayout) {
	tb.Helper()
	ctx := context.Background()
	node, err := engine.OpenNode(engine.NodeConfig{FS: vfs.OS, DataDir: dir, Log: logstore.DefaultConfig(), Host: "127.0.0.1", Port: 9092,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	records := make([]rb.Record, scaleRecordsPerPartition)
	for i := range records {
		records[i] = rb.Record{Value: bytes.Repeat([]byte{byte('a' + i)}, scaleValueBytes)}
	}
	batch := rb.Append(nil, rb.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, Records: records})
	for _, topic := range layout.topics {
		if _, err := node.CreateTopic(ctx, topic, layout.partitions, nil, false); err != nil {
			tb.Fatal(err)
		}
		for partition := range layout.partitions {
			p, err := node.Partition(topic, partition)
			if err != nil {
				tb.Fatal(err)
			}
			// Produce assigns offsets in place: each call gets its own copy.
			if _, err := p.Produce(ctx, bytes.Clone(batch), netio.ProduceRequest{Acks: -1}); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := node.Close(); err != nil {
		tb.Fatal(err)
	}
}

// scaleMirror creates the mirror through client (of the mirror node),
// starts layout's topics by pattern and waits until the mirror holds
// every partition's records; it returns the time from the start to then.
func scaleMirror(client *kgo.Client, sourceAddr string, layout scaleLayout) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scaleSetupWait)
	defer cancel()
	broker, err := nodeID(ctx, client)
	if err != nil {
		return 0, err
	}
	if err := createMirrorWith(ctx, client, scaleMirrorName, sourceAddr, nil); err != nil {
		return 0, err
	}
	started := time.Now()
	if err := startMirroring(ctx, client, scaleMirrorName, nil, []string{scaleTopicPrefix + ".*"}); err != nil {
		return 0, err
	}
	want := func(topic, partition int) int64 { return scaleRecordsPerPartition }
	if err := waitMirrored(ctx, client, broker, layout, want); err != nil {
		return 0, fmt.Errorf("scale: the mirror did not catch up in %v: %w", scaleSetupWait, err)
	}
	return time.Since(started), nil
}

// waitMirrored polls ListOffsets on the mirror until every partition's
// log end offset is want's.
func waitMirrored(ctx context.Context, client *kgo.Client, broker int32, layout scaleLayout, want func(topic, partition int) int64) error {
	var last error
	err := pollUntil(ctx, scalePollInterval, func() (bool, error) {
		offsets, err := listOffsetsOf(ctx, client, broker, layout.topics, layout.partitions)
		if last = err; err != nil {
			return false, nil // not every topic is there yet
		}
		for t, partitions := range offsets {
			for p, offset := range partitions {
				if offset != want(t, p) {
					last = fmt.Errorf("%s-%d at %d, want %d", layout.topics[t], p, offset, want(t, p))
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last: %v)", err, last)
	}
	return nil
}

// scaleIdle measures the mirror over window with no writes.
func scaleIdle(tb testing.TB, source, mirror *mirrordProcess, window time.Duration) (ScaleResult, error) {
	sourceCPU, mirrorCPU, started := source.cpu(), mirror.cpu(), time.Now()
	timer := time.NewTimer(window) // a measuring window, not a wait for something
	<-timer.C
	return scaleMeasured(tb, "idle", source, mirror, sourceCPU, mirrorCPU, started)
}

// scaleWritten measures the mirror over window while a producer writes a
// record every scaleWriteInterval to one partition of each topic, and then
// checks the mirror holds every write.
func scaleWritten(tb testing.TB, source, mirror *mirrordProcess, client *kgo.Client, layout scaleLayout, window time.Duration) (ScaleResult, error) {
	sourceCPU, mirrorCPU, started := source.cpu(), mirror.cpu(), time.Now()
	writes, err := scaleWrite(source.addr, layout, window)
	if err != nil {
		return ScaleResult{}, err
	}
	result, err := scaleMeasured(tb, "1% written", source, mirror, sourceCPU, mirrorCPU, started)
	if err != nil {
		return result, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), scaleCatchUpWait)
	defer cancel()
	broker, err := nodeID(ctx, client)
	if err != nil {
		return result, err
	}
	want := func(topic, partition int) int64 {
		if partition == scaleWrittenPartition(topic, layout) {
			return scaleRecordsPerPartition + writes
		}
		return scaleRecordsPerPartition
	}
	if err := waitMirrored(ctx, client, broker, layout, want); err != nil {
		return result, fmt.Errorf("scale: the mirror does not hold the writes: %w", err)
	}
	return result, nil
}

// scaleWrittenPartition is the partition of topic i that the write window
// writes to.
func scaleWrittenPartition(i int, layout scaleLayout) int { return i % int(layout.partitions) }

// scaleWrite writes one record to the written partition of every topic
// every scaleWriteInterval for window, and returns the records each got.
func scaleWrite(sourceAddr string, layout scaleLayout, window time.Duration) (int64, error) {
	producer, err := kgo.NewClient(kgo.SeedBrokers(sourceAddr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		return 0, err
	}
	defer producer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), window+scaleCatchUpWait)
	defer cancel()
	value := bytes.Repeat([]byte{'w'}, scaleValueBytes)
	ticker := time.NewTicker(scaleWriteInterval)
	defer ticker.Stop()
	var (
		writes   int64
		mu       sync.Mutex
		firstErr error // of the promises
	)
	promise := func(_ *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil && err != nil {
			firstErr = fmt.Errorf("scale: produce: %w", err)
		}
	}
	for started := time.Now(); time.Since(started) < window && ctx.Err() == nil; writes++ { // bounded by window
		for i, topic := range layout.topics {
			record := &kgo.Record{Topic: topic, Partition: int32(scaleWrittenPartition(i, layout)), Value: value}
			producer.Produce(ctx, record, promise)
		}
		select {
		case <-ctx.Done():
		case <-ticker.C:
		}
	}
	if err := producer.Flush(ctx); err != nil {
		return 0, err
	}
	mu.Lock()
	defer mu.Unlock()
	return writes, firstErr
}

// scaleMeasured is the mirror's CPU per second since mirrorCPU at
// started, and its resident set now; it logs the details.
func scaleMeasured(tb testing.TB, window string, source, mirror *mirrordProcess, sourceCPU, mirrorCPU time.Duration, started time.Time) (ScaleResult, error) {
	wall := time.Since(started)
	result := ScaleResult{CPUPerSecond: (mirror.cpu() - mirrorCPU).Seconds() / wall.Seconds()}
	status, err := procStatus(mirror.proc.Pid())
	if err != nil {
		return result, err
	}
	result.RSS = status["VmRSS"]
	files, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", mirror.proc.Pid()))
	if err != nil {
		return result, err
	}
	tb.Logf("%s window of %v: mirror CPU %.2f%% of a core, source %.2f%%; mirror VmRSS %d MB (anon %d MB, file %d MB), VmHWM %d MB, "+
		"VmSize %d GB, %d threads, %d open files",
		window, wall.Round(time.Millisecond), 100*result.CPUPerSecond, 100*(source.cpu()-sourceCPU).Seconds()/wall.Seconds(),
		status["VmRSS"]>>20, status["RssAnon"]>>20, status["RssFile"]>>20, status["VmHWM"]>>20, status["VmSize"]>>30,
		status["Threads"], len(files))
	return result, nil
}

// procStatus reads /proc/<pid>/status: the sizes (kB there) in bytes,
// the counts as they are; lines that are not one number are left out.
func procStatus(pid int) (map[string]int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	status := map[string]int64{}
	for line := range strings.Lines(string(data)) {
		name, value, ok := strings.Cut(line, ":")
		fields := strings.Fields(value)
		if !ok || len(fields) == 0 || len(fields) > 2 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) == 2 && fields[1] == "kB" {
			n <<= 10
		}
		status[name] = n
	}
	if status["VmRSS"] <= 0 {
		return nil, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return status, nil
}

// TestScaleScenarioSmoke runs the scale scenario (in smoke mode unless
// scenarioModeEnv says otherwise) and checks its results are sane. It
// asserts no cost.
func TestScaleScenarioSmoke(t *testing.T) {
	mode := scenarioMode(t)
	skipForReportSmoke(t, mode, "checkScale")
	results, err := scaleScenario(t, mode)
	if err != nil {
		t.Fatal(err)
	}
	checkScale(t, mode, results)
}

// checkScale checks the results of scaleScenario(mode).
func checkScale(t *testing.T, mode benchMode, results []ScaleResult) {
	t.Helper()
	if len(results) != 1 {
		t.Fatalf("%d results, want 1", len(results))
	}
	r := results[0]
	t.Logf("%d partitions: setup %v, idle CPU %.2f%% of a core, RSS %d MB", r.Partitions, r.SetupTime.Round(time.Millisecond),
		100*r.CPUPerSecond, r.RSS>>20)
	if r.Partitions <= 0 || r.Partitions > scalePartitions(mode) || r.CPUPerSecond < 0 || r.RSS <= 0 || r.SetupTime <= 0 {
		t.Errorf("not sane: %+v", r)
	}
}

// TestScaleProfile profiles one side of the scale scenario: that side
// (scaleProfileSideEnv: the mirror unless it says source) is a node
// served in this process, the other a `mirrord serve` process, so that
// the CPU profiles of the idle window (<side>-idle-cpu.pprof) and of the
// 1%-written window (<side>-written-cpu.pprof), and the heap profile
// after them (<side>-heap.pprof), are that node's (and this process's
// test code: the producer of the written window). Skipped unless
// scaleProfileEnv names the directory for the profiles.
func TestScaleProfile(t *testing.T) {
	out := os.Getenv(scaleProfileEnv)
	if out == "" {
		t.Skipf("%s is not set", scaleProfileEnv)
	}
	side := os.Getenv(scaleProfileSideEnv)
	if side == "" {
		side = "mirror"
	}
	if side != "mirror" && side != "source" {
		t.Fatalf("%s=%q: want mirror or source", scaleProfileSideEnv, side)
	}
	mode := scenarioMode(t)
	partitions, err := scaleFit(t, scalePartitions(mode))
	if err != nil {
		t.Fatal(err)
	}
	layout := newScaleLayout(partitions)
	dir := t.TempDir()
	scaleFill(t, filepath.Join(dir, "source"), layout)
	var sourceAddr, mirrorAddr string
	rounds := func() uint64 { return 0 } // fetches the mirror sent, when it runs here
	if side == "source" {
		source := serveQuietNode(t, filepath.Join(dir, "source"))
		defer source.stop()
		sourceAddr, mirrorAddr = source.addr, startMirrord(t, filepath.Join(dir, "mirror")).addr
	} else {
		mirror := serveQuietNode(t, filepath.Join(dir, "mirror"))
		defer mirror.stop()
		sourceAddr, mirrorAddr = startMirrord(t, filepath.Join(dir, "source")).addr, mirror.addr
		rounds = func() uint64 { return fetchesSent(t, mirror.node) }
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(mirrorAddr), kgo.MaxVersions(netio.MirrorClientVersions()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	setup, err := scaleMirror(client, sourceAddr, layout)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d partitions mirrored in %v; %d goroutines", layout.total(), setup.Round(time.Millisecond), runtime.NumGoroutine())
	window := scaleWindow(mode)
	idle := func() error {
		timer := time.NewTimer(window) // a measuring window, not a wait for something
		<-timer.C
		return nil
	}
	written := func() error { _, err := scaleWrite(sourceAddr, layout, window); return err }
	for _, w := range []struct {
		name string
		work func() error
	}{{"idle", idle}, {"written", written}} {
		before := rounds()
		if err := profileWindow(t, filepath.Join(out, side+"-"+w.name+"-cpu.pprof"), w.work); err != nil {
			t.Fatal(err)
		}
		if side == "mirror" {
			t.Logf("%s window: the mirror sent %d fetches", w.name, rounds()-before)
		}
	}
	if err := writeHeapProfile(filepath.Join(out, side+"-heap.pprof")); err != nil {
		t.Fatal(err)
	}
}

// fetchesSent is the number of fetches node's mirrors sent that were
// answered (the count of mirrord_mirror_fetch_latency_seconds).
func fetchesSent(tb testing.TB, node *engine.Node) uint64 {
	families, err := node.Metrics().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var count uint64
	for _, family := range families {
		if family.GetName() != "mirrord_mirror_fetch_latency_seconds" {
			continue
		}
		for _, metric := range family.GetMetric() {
			count += metric.GetHistogram().GetSampleCount()
		}
	}
	return count
}

// serveQuietNode is serveNode without the node's log lines.
func serveQuietNode(tb testing.TB, dir string) servedNode {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	quiet := slog.New(slog.DiscardHandler)
	node, err := engine.OpenNode(engine.NodeConfig{FS: vfs.OS, DataDir: dir, Log: logstore.DefaultConfig(), Host: addr.IP.String(), Port: int32(addr.Port), Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- netio.NewServer(netio.Config{Backend: node, Logger: quiet}).Serve(ctx, ln) }()
	return servedNode{node: node, addr: ln.Addr().String(), stop: func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("serve: %v", err)
		}
		if err := node.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	}}
}

// profileWindow writes a CPU profile of work to path and logs this
// process's CPU and memory over it.
func profileWindow(tb testing.TB, path string, work func() error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	defer file.Close()
	if err := pprof.StartCPUProfile(file); err != nil {
		return err
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu, started := processCPU(), time.Now()
	err = work()
	pprof.StopCPUProfile()
	cpu, wall := processCPU()-cpu, time.Since(started)
	if err != nil {
		return err
	}
	var stats runtime.MemStats
	runtime.ReadMemStats(&stats)
	status, err := procStatus(os.Getpid())
	if err != nil {
		return err
	}
	tb.Logf("%s: %v, %.2f%% of a core; allocated %d MB, heap in use %d MB, runtime total %d MB, VmRSS %d MB (anon %d MB, file %d MB); %d goroutines, %d GCs",
		filepath.Base(path), wall.Round(time.Millisecond), 100*cpu.Seconds()/wall.Seconds(), (stats.TotalAlloc-before.TotalAlloc)>>20,
		stats.HeapInuse>>20, stats.Sys>>20, status["VmRSS"]>>20, status["RssAnon"]>>20, status["RssFile"]>>20,
		runtime.NumGoroutine(), stats.NumGC-before.NumGC)
	return file.Close()
}

// writeHeapProfile writes the heap profile (live objects as of the last
// GC) to path.
func writeHeapProfile(path string) error {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	return errors.Join(pprof.Lookup("heap").WriteTo(file, 0), file.Close())
}
