package bench

// "Reading 100,000 partitions" (issue 20): a mirrord node whose data
// directory holds 100,000 partitions of one small batch each, read by one
// client round-robin, a Fetch naming 1,000 partitions at a time. The
// node's mappings (/proc/PID/maps lines) and descriptors (/proc/PID/fd)
// must stay below the process's vm.max_map_count and RLIMIT_NOFILE: a
// partition log that holds its segment file open and its indexes mapped
// passes both long before 100,000 (logstore/files.go bounds them).
//
// The directory is written directly, as a node writes it (a template
// partition made by logstore, hard-linked), which takes a minute where
// creating 100,000 partitions through a node takes many.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/mirrordtest"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	manyPartitionsTitle = "Reading 100,000 partitions"
	// manyTopicPartitions is the partitions of each topic, and of each
	// Fetch: one topic per request.
	manyTopicPartitions = 1000
	manyRecordBytes     = 100
	manyRecords         = 5
	// manyReadWait bounds the reads (quick mode: about 2 passes over the
	// partitions on a quiet 2-core machine).
	manyReadWait = 90 * time.Second
	// manySampleEvery is how often the node's mappings and descriptors
	// are counted while it is read.
	manySampleEvery = 250 * time.Millisecond
	// manyOpenWait bounds the node's start, the open of every partition.
	manyOpenWait = 3 * time.Minute
)

// ManyPartitionsResult is one run: the node's resources after it opened
// and at their peak while read, against the process's bounds.
type ManyPartitionsResult struct {
	Partitions     int
	Passes         int     // reads of every partition
	OpenSeconds    float64 // start to answering ApiVersions
	OpenMappings   int64   // after the open
	OpenFiles      int64
	PeakMappings   int64 // while read
	PeakFiles      int64
	RSSBytes       int64 // after the reads
	MaxMapCount    int64 // vm.max_map_count
	FileLimit      int64 // the process's soft RLIMIT_NOFILE
	ReadsPerSecond float64
	ReadErrors     int    // partitions answered with an error or without their batch
	Failure        string // why the node was not measured ("": it was)
}

// manyPartitionsScenario measures a node of partitions partitions read
// passes times; args go to mirrord serve.
func manyPartitionsScenario(tb testing.TB, partitions, passes int, args ...string) ManyPartitionsResult {
	tb.Helper()
	r := ManyPartitionsResult{Partitions: partitions, Passes: passes}
	var err error
	if r.MaxMapCount, err = readIntFile("/proc/sys/vm/max_map_count"); err != nil {
		tb.Fatal(err)
	}
	dataDir := filepath.Join(manyPartitionsRoot(tb), "data")
	filling := time.Now()
	topics := manyPartitionsFill(tb, dataDir, partitions)
	tb.Logf("%d partitions written in %v", partitions, time.Since(filling).Round(time.Millisecond))
	proc := &mirrordtest.Server{Binary: mirrordBinary(tb), DataDir: dataDir, LogPath: dataDir + ".log", Args: args, ReadyWait: manyOpenWait}
	p := &mirrordProcess{tb: tb, proc: proc}
	tb.Cleanup(p.checkLog)
	tb.Cleanup(p.kill)
	started := time.Now()
	if err := proc.Start(); err != nil {
		r.Failure = fmt.Sprintf("the node did not start: %v", err)
		if tail, terr := proc.LogTail(processLogTailSize); terr == nil {
			lines := strings.Split(strings.TrimSpace(tail), "\n")
			r.Failure += "; its log ends: " + strings.Join(lines[max(len(lines)-3, 0):], " | ")
		}
		return r
	}
	r.OpenSeconds = time.Since(started).Seconds()
	tb.Logf("%d partitions opened in %.1f s", partitions, r.OpenSeconds)
	p.addr = proc.Addr()
	pid := proc.Pid()
	if r.FileLimit, err = processFileLimit(pid); err != nil {
		tb.Fatal(err)
	}
	if r.OpenMappings, r.OpenFiles, err = processMapsAndFiles(pid); err != nil {
		tb.Fatal(err)
	}
	r.PeakMappings, r.PeakFiles = r.OpenMappings, r.OpenFiles

	stop := make(chan struct{})
	var sampler sync.WaitGroup
	var sampleErr error
	sampler.Go(func() {
		ticker := time.NewTicker(manySampleEvery)
		defer ticker.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ticker.C:
			}
			maps, files, err := processMapsAndFiles(pid)
			if err != nil {
				sampleErr = err
				return
			}
			r.PeakMappings, r.PeakFiles = max(r.PeakMappings, maps), max(r.PeakFiles, files)
		}
	})
	reads, readErrors, elapsed, err := manyPartitionsRead(p, topics, passes)
	close(stop)
	sampler.Wait()
	if err != nil {
		r.Failure = fmt.Sprintf("reading: %v", err)
	}
	if sampleErr != nil {
		tb.Fatal(sampleErr)
	}
	r.ReadErrors = readErrors
	if elapsed > 0 {
		r.ReadsPerSecond = float64(reads) / elapsed.Seconds()
	}
	status, err := procStatus(pid)
	if err != nil {
		tb.Fatal(err)
	}
	r.RSSBytes = status["VmRSS"]
	return r
}

// manyPartitionsRoot is a directory for the node's data, removed when
// the test ends: on tmpfs (/dev/shm) when the machine has one, since
// 100,000 partition directories take minutes to write and to remove on
// this machine's disk and seconds in memory (the files are hard links of
// one template: a few pages in all).
func manyPartitionsRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "mirrord-many-")
	if err != nil {
		return tb.TempDir()
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// manyTopic is one topic of the filled directory.
type manyTopic struct {
	name string
	id   rb.TopicID
}

// manyPartitionsFill writes a data directory of partitions partitions,
// manyTopicPartitions per topic, each holding one batch of manyRecords
// records, shut down cleanly: a partition made and closed by logstore,
// hard-linked (100,000 directories of copies take minutes to write and
// to remove on this machine's disk).
func manyPartitionsFill(tb testing.TB, dataDir string, partitions int) []manyTopic {
	tb.Helper()
	template := filepath.Join(filepath.Dir(dataDir), "template") // links do not cross file systems
	d, err := logstore.OpenDir(vfs.OS, template, logstore.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	tp := logstore.TopicPartition{Topic: "template", Partition: 0}
	log, err := d.Create(tp, rb.NewTopicID(), logstore.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	records := make([]rb.Record, manyRecords)
	for i := range records {
		records[i] = rb.Record{Value: bytes.Repeat([]byte{byte('a' + i)}, manyRecordBytes)}
	}
	if _, err := log.Append(rb.Append(nil, rb.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, Records: records})); err != nil {
		tb.Fatal(err)
	}
	if err := d.Close(); err != nil {
		tb.Fatal(err)
	}
	source := filepath.Join(template, tp.String())
	entries, err := os.ReadDir(source)
	if err != nil {
		tb.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if e.Name() != "partition.metadata" { // the topic's own
			files = append(files, e.Name())
		}
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		tb.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(template, "meta.properties"))
	if err == nil {
		err = os.WriteFile(filepath.Join(dataDir, "meta.properties"), meta, 0o644)
	}
	if err != nil {
		tb.Fatal(err)
	}
	topics := make([]manyTopic, (partitions+manyTopicPartitions-1)/manyTopicPartitions)
	for i := range topics {
		topics[i] = manyTopic{name: fmt.Sprintf("many-%03d", i), id: rb.NewTopicID()}
		metadata := fmt.Appendf(nil, "version: 0\ntopic_id: %s\n", topics[i].id)
		if err := os.WriteFile(filepath.Join(template, topics[i].name+".metadata"), metadata, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	next := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 8 { // the syscalls of several directories overlap
		wg.Go(func() {
			for i := range next {
				topic := topics[i/manyTopicPartitions]
				dir := filepath.Join(dataDir, fmt.Sprintf("%s-%d", topic.name, i%manyTopicPartitions))
				if err := linkPartitionDir(dir, filepath.Join(template, topic.name+".metadata"), source, files); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range partitions {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		tb.Fatal(err)
	default:
	}
	return topics
}

// linkPartitionDir makes the partition directory dir of hard links to
// the template's files: a cleanly shut down log is not written until its
// first append (checkpoints are replaced by a rename, not written in
// place), and these are only read.
func linkPartitionDir(dir, metadata, template string, files []string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := os.Link(metadata, filepath.Join(dir, "partition.metadata")); err != nil {
		return err
	}
	for _, name := range files {
		if err := os.Link(filepath.Join(template, name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// manyPartitionsRead fetches every partition from offset 0, passes times,
// a topic (manyTopicPartitions partitions) per request, round-robin. It
// returns the partition reads, the partitions answered with an error or
// without their batch, and the time it took.
func manyPartitionsRead(p *mirrordProcess, topics []manyTopic, passes int) (reads, readErrors int, elapsed time.Duration, err error) {
	// A Fetch of one topic's 1,000 partitions, opened under the smoke's
	// descriptor bound, outlasted kgo's 10 s request overhead (i/o
	// timeout) beside other tests on a loaded 2-core machine: the reads
	// are bounded by manyReadWait alone.
	client := p.client(kgo.RequestTimeoutOverhead(manyReadWait))
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), manyReadWait)
	defer cancel()
	id, err := nodeID(ctx, client)
	if err != nil {
		return 0, 0, 0, err
	}
	broker := client.Broker(int(id))
	started := time.Now()
	failed := map[string]bool{}
	for pass := range passes {
		for _, topic := range topics {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, 64<<20
			req.SessionID, req.SessionEpoch = 0, -1
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = topic.name, topic.id
			for partition := range int32(manyTopicPartitions) {
				fp := kmsg.NewFetchRequestTopicPartition()
				fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = partition, 0, 1<<20
				t.Partitions = append(t.Partitions, fp)
			}
			req.Topics = append(req.Topics, t)
			resp, err := req.RequestWith(ctx, broker)
			if err != nil {
				return reads, len(failed), time.Since(started), fmt.Errorf("pass %d, topic %s: %w", pass, topic.name, err)
			}
			if resp.ErrorCode != 0 {
				return reads, len(failed), time.Since(started), fmt.Errorf("pass %d, topic %s: fetch error code %d", pass, topic.name, resp.ErrorCode)
			}
			answered := 0
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					answered++
					if rp.ErrorCode != 0 || len(rp.RecordBatches) < rb.HeaderSize {
						failed[fmt.Sprintf("%s-%d", topic.name, rp.Partition)] = true
					}
				}
			}
			reads += answered
		}
	}
	return reads, len(failed), time.Since(started), nil
}

// processMapsAndFiles counts a process's mappings and descriptors.
func processMapsAndFiles(pid int) (mappings, files int64, err error) {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, 0, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, err
	}
	return int64(bytes.Count(maps, []byte("\n"))), int64(len(fds)), nil
}

// processFileLimit is a process's soft RLIMIT_NOFILE (/proc/PID/limits).
func processFileLimit(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				return strconv.ParseInt(fields[0], 10, 64)
			}
		}
	}
	return 0, errors.New("no Max open files in /proc/" + strconv.Itoa(pid) + "/limits")
}

func readIntFile(name string) (int64, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

// manyPartitionsTable is the report's section of r, with its goals.
func manyPartitionsTable(r ManyPartitionsResult) Table {
	t := Table{
		Title: manyPartitionsTitle,
		Intro: fmt.Sprintf("A node whose data directory holds %d partitions of one %d-record batch each (a clean shutdown), "+
			"read %d times over from offset 0 by one client, a Fetch naming %d partitions of one topic at a time. "+
			"Mappings are /proc/PID/maps lines, descriptors /proc/PID/fd entries: after the open, and their peak while read "+
			"(sampled every %v). Defaults of log.open.files.max and log.index.cache.max.bytes. The data directory is on tmpfs when the machine has one (its files hard links of one template partition).",
			r.Partitions, manyRecords, r.Passes, manyTopicPartitions, manySampleEvery),
		Columns: []string{"Partitions", "open s", "mappings open / peak", "vm.max_map_count", "descriptors open / peak", "RLIMIT_NOFILE",
			"RSS MiB", "partition reads/s", "partitions not read"},
		Numbers: map[string]float64{"partitions": float64(r.Partitions), "openSeconds": r.OpenSeconds, "openMappings": float64(r.OpenMappings),
			"peakMappings": float64(r.PeakMappings), "maxMapCount": float64(r.MaxMapCount), "openFiles": float64(r.OpenFiles),
			"peakFiles": float64(r.PeakFiles), "fileLimit": float64(r.FileLimit), "rssBytes": float64(r.RSSBytes),
			"readsPerSecond": r.ReadsPerSecond, "readErrors": float64(r.ReadErrors)},
	}
	row := []string{strconv.Itoa(r.Partitions), fmt.Sprintf("%.1f", r.OpenSeconds), fmt.Sprintf("%d / %d", r.OpenMappings, r.PeakMappings),
		strconv.FormatInt(r.MaxMapCount, 10), fmt.Sprintf("%d / %d", r.OpenFiles, r.PeakFiles), strconv.FormatInt(r.FileLimit, 10),
		fmt.Sprintf("%.0f", float64(r.RSSBytes)/(1<<20)), fmt.Sprintf("%.0f", r.ReadsPerSecond), strconv.Itoa(r.ReadErrors)}
	if r.Failure != "" {
		row = append(row[:1], "not measured: "+r.Failure)
		for len(row) < len(t.Columns) {
			row = append(row, "-")
		}
	}
	t.Rows = [][]string{row}
	mapsName := fmt.Sprintf("Reading %d partitions: peak mappings below vm.max_map_count", r.Partitions)
	filesName := fmt.Sprintf("Reading %d partitions: peak descriptors below RLIMIT_NOFILE, every partition read", r.Partitions)
	if r.Failure != "" {
		t.Goals = []goal{unmeasuredGoal(mapsName, float64(r.MaxMapCount), true, r.Failure), unmeasuredGoal(filesName, float64(r.FileLimit), true, r.Failure)}
		return t
	}
	t.Goals = []goal{
		measuredGoal(mapsName, float64(r.PeakMappings), float64(r.MaxMapCount-1), true, fmt.Sprintf("%d mappings at the peak", r.PeakMappings)),
	}
	files := measuredGoal(filesName, float64(r.PeakFiles), float64(r.FileLimit-1), true,
		fmt.Sprintf("%d descriptors at the peak, %d partitions not read", r.PeakFiles, r.ReadErrors))
	if r.ReadErrors > 0 {
		files.Status = goalNotMet
	}
	t.Goals = append(t.Goals, files)
	return t
}

// manyPartitionsReport is runReport's step: 100,000 partitions read
// twice (quick) or three times (full); in smoke mode one topic's
// partitions once, enough for the report's table (TestManyPartitionsSmoke
// reads 3,000 under a descriptor bound).
func manyPartitionsReport(tb testing.TB, mode benchMode) Table {
	tb.Helper()
	switch {
	case mode.Name == "smoke":
		return manyPartitionsTable(manyPartitionsScenario(tb, manyTopicPartitions, 1))
	case mode.Full:
		return manyPartitionsTable(manyPartitionsScenario(tb, 100_000, 3))
	}
	return manyPartitionsTable(manyPartitionsScenario(tb, 100_000, 2))
}

// TestManyPartitions runs the scenario alone (scenarioModeEnv=quick or
// full) and prints its table and goals.
func TestManyPartitions(t *testing.T) {
	if os.Getenv(scenarioModeEnv) == "" {
		t.Skip("set " + scenarioModeEnv + "=quick or full; TestManyPartitionsSmoke is the smoke test")
	}
	mode := scenarioMode(t)
	table := manyPartitionsReport(t, mode)
	t.Logf("%s\n%v\n%v", table.Title, table.Columns, table.Rows)
	for _, g := range table.Goals {
		value := "-"
		if g.Value != nil {
			value = fmt.Sprint(*g.Value)
		}
		t.Logf("goal %s: %s (%s; target %v): %s", g.Name, g.Status, value, g.Target, g.Detail)
	}
}

// TestManyPartitionsSmoke runs the scenario on 3,000 partitions with a
// bound far below them (log.open.files.max=500), so that the node closes
// and opens segments while read, and checks the table is filled and the
// bound held.
func TestManyPartitionsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a mirrord process")
	}
	parallelInSmoke(t, benchModes["smoke"])
	config := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(config, []byte("log.open.files.max=500\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := manyPartitionsScenario(t, 3000, 2, "--config", config)
	if r.Failure != "" || r.ReadErrors != 0 {
		t.Fatalf("%+v", r)
	}
	// 500 segment files, the segments of the Fetch response being sent
	// (a Slice pins its segment open until sent: one topic's 1,000), and
	// the process's own (listener, connections, logs): far below the
	// 3,000 partitions' files.
	if r.PeakFiles > 500+manyTopicPartitions+100 || r.PeakMappings > r.MaxMapCount || r.ReadsPerSecond <= 0 || r.RSSBytes <= 0 || r.FileLimit <= 0 {
		t.Fatalf("%+v", r)
	}
	table := manyPartitionsTable(r)
	if len(table.Rows) != 1 || len(table.Rows[0]) != len(table.Columns) || len(table.Goals) != 2 {
		t.Fatalf("table %+v", table)
	}
	for _, g := range table.Goals {
		if g.Status != goalMet {
			t.Errorf("goal %+v", g)
		}
	}
}
