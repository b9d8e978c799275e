package bench

// The open scenario (issue 20): how long a node takes, from its process
// start, to serve a data directory of many partitions, after a clean stop
// and after kill -9, beside a Kafka 4.4 broker holding the same.
//
// One filler writes both nodes through the Kafka protocol: openSizeOf(mode)
// names the partitions (topics of scaleTopicPartitions: 10,000 in full
// mode, 500 in quick mode, where Kafka alone would take 15 minutes to
// create 10,000), each given SmallBytes in prebuilt batches of
// openBatchBytes, and the first Big partitions of the first topic
// (segment.bytes = SegmentBytes) BigBytes each, several segments apiece. The node is then stopped cleanly
// (SIGTERM) and started again, timed; then, while a producer writes one
// small batch to every partition round after round, killed with SIGKILL
// once a round is done and the next is in flight, and started again,
// timed. Two times each start: from the process start until a Metadata
// lists every topic and a Fetch of the first big partition answers its
// first batch ("serves"), and until a ListOffsets of every partition
// answers without an error ("all readable"). The page cache is warm: what
// is measured is the nodes' own work, not the disk's.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	openBatchBytes    = 16 << 10 // a fill batch
	openRecordBytes   = 1 << 10  // its records' values
	openKillBatch     = 1 << 10  // a batch of the in-flight load before the kill
	openProducers     = 4        // produce requests in flight while filling
	openPollInterval  = 10 * time.Millisecond
	openAllInterval   = 100 * time.Millisecond
	openWait          = 30 * time.Minute // a fill, or a start until all readable, at most (Kafka creating and recovering 10,000 partitions)
	openRequestWait   = 10 * time.Minute // one request, at most (kgo allows up to 15)
	openTopicsAtOnce  = 10               // topics per CreateTopics
	openKillRoundsMax = 1000             // in-flight rounds before the kill, at most

	// openKafkaEnv set makes TestOpenSmoke measure Kafka too (the report
	// run always does), e.g.
	//
	//	MIRRORD_BENCH_SCENARIO_MODE=quick MIRRORD_BENCH_OPEN_KAFKA=1 go test -run TestOpenSmoke -v -timeout 30m ./bench/
	openKafkaEnv = "MIRRORD_BENCH_OPEN_KAFKA"
)

// openSize is the data of a mode.
type openSize struct {
	Partitions   int   // a multiple of scaleTopicPartitions
	SmallBytes   int64 // written to every partition
	Big          int   // partitions of the first topic given BigBytes more
	BigBytes     int64
	SegmentBytes int64 // the first topic's segment.bytes
}

func openSizeOf(mode benchMode) openSize {
	switch mode.Name {
	case "smoke":
		return openSize{Partitions: 200, SmallBytes: 32 << 10, Big: 2, BigBytes: 4 << 20, SegmentBytes: 1 << 20}
	case "quick":
		// Kafka 4.4 creates about 10 partitions a second on a busy 2-core
		// machine (10,000, full mode, take 15 minutes before any data), and
		// after kill -9 it loaded 548 of 1,000 partitions in 90 s.
		return openSize{Partitions: 500, SmallBytes: 32 << 10, Big: 16, BigBytes: 16 << 20, SegmentBytes: 4 << 20}
	}
	return openSize{Partitions: 10_000, SmallBytes: 128 << 10, Big: 32, BigBytes: 48 << 20, SegmentBytes: 16 << 20}
}

// OpenResult is one start of a node.
type OpenResult struct {
	Node       string // "mirrord" or "kafka"
	Stop       string // "clean" or "kill -9"
	Serve      time.Duration
	All        time.Duration
	Partitions int
	Bytes      int64 // of the *.log files in the data directory
}

// openScenario measures mirrord and, with libs, Kafka; the Table of both.
func openScenario(tb testing.TB, mode benchMode, libs string) (Table, error) {
	tb.Helper()
	partitions, err := scaleFit(tb, openSizeOf(mode).Partitions)
	if err != nil {
		return Table{}, err
	}
	size := openSizeOf(mode)
	size.Partitions = partitions
	results, err := openMirrord(tb, size)
	if err != nil {
		return Table{}, err
	}
	var kafkaErr error
	if libs != "" {
		kafka, err := openKafka(tb, libs, size)
		if err != nil {
			return Table{}, fmt.Errorf("kafka: %w", err)
		}
		results = append(results, kafka...)
	} else {
		kafkaErr = errors.New("the Kafka jars are not installed")
	}
	return openTable(results, kafkaErr), nil
}

// openMirrord fills a mirrord node and times its two restarts.
func openMirrord(tb testing.TB, size openSize) ([]OpenResult, error) {
	dir := filepath.Join(tb.TempDir(), "mirrord")
	node := startMirrord(tb, dir)
	layout := newScaleLayout(size.Partitions)
	filled := time.Now()
	if err := openFill(node.addr, layout, size); err != nil {
		return nil, err
	}
	tb.Logf("open: filled mirrord with %d partitions in %v", size.Partitions, time.Since(filled).Round(time.Millisecond))
	var results []OpenResult
	for _, kill := range []bool{false, true} {
		if kill {
			if err := openKillUnderLoad(node.addr, layout, func() error { return node.proc.Kill() }); err != nil {
				return nil, err
			}
		} else {
			took, err := stopMirrordWithin(node, openWait)
			if err != nil {
				return nil, err
			}
			tb.Logf("open: mirrord's clean stop of %d partitions took %v", size.Partitions, took.Round(time.Millisecond))
		}
		started := time.Now()
		if err := node.proc.Start(); err != nil {
			return nil, err
		}
		r, err := openTimes(node.proc.Addr(), layout, started)
		if err != nil {
			return nil, err
		}
		r.Node, r.Stop = "mirrord", openStopName(kill)
		if r.Bytes, err = logBytes(dir); err != nil {
			return nil, err
		}
		tb.Logf("open: %+v", r)
		results = append(results, r)
	}
	_, err := stopMirrordWithin(node, openWait)
	return results, err
}

// stopMirrordWithin sends SIGTERM and waits up to wait for a clean exit
// (mirrordtest's Stop allows less than a node of many partitions needs to
// close its logs); it returns how long the stop took.
func stopMirrordWithin(node *mirrordProcess, wait time.Duration) (time.Duration, error) {
	started := time.Now()
	if err := syscall.Kill(node.proc.Pid(), syscall.SIGTERM); err != nil {
		return 0, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-node.proc.Exited():
	case <-timer.C:
		node.kill()
		return 0, fmt.Errorf("mirrord: still running %v after SIGTERM", wait)
	}
	if err := node.proc.ExitErr(); err != nil {
		return 0, fmt.Errorf("mirrord: exit after SIGTERM: %w", err)
	}
	return time.Since(started), nil
}

// openKafka fills a one-node Kafka cluster and times its two restarts.
func openKafka(tb testing.TB, libs string, size openSize) ([]OpenResult, error) {
	dir := filepath.Join(tb.TempDir(), "kafka")
	cluster, err := startKafkaCluster(context.Background(), libs, dir, 1)
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	node := cluster.Nodes[0]
	layout := newScaleLayout(size.Partitions)
	filled := time.Now()
	if err := openFill(node.Addr, layout, size); err != nil {
		return nil, err
	}
	tb.Logf("open: filled Kafka with %d partitions in %v", size.Partitions, time.Since(filled).Round(time.Millisecond))
	var results []OpenResult
	for _, kill := range []bool{false, true} {
		if kill {
			if err := openKillUnderLoad(node.Addr, layout, func() error { return cluster.Kill(node) }); err != nil {
				return nil, err
			}
		} else {
			cluster.Close() // SIGTERM: Kafka's controlled shutdown
			if clean, err := kafkaStoppedCleanly(dir); err != nil || !clean {
				return nil, fmt.Errorf("kafka: no clean-shutdown marker after SIGTERM (%v)", err)
			}
		}
		started := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), openWait)
		err := cluster.Restart(ctx, node)
		cancel()
		if err != nil && !node.Running() {
			return nil, err
		}
		// Restart gives up after kafkatest's 90 s while Kafka may still be
		// recovering its logs (after kill -9, 1,000 partitions took longer
		// on a busy 2-core machine): openTimes polls on, within openWait.
		r, err := openTimes(node.Addr, layout, started)
		if err != nil {
			return nil, err
		}
		r.Node, r.Stop = "kafka", openStopName(kill)
		if r.Bytes, err = logBytes(dir); err != nil {
			return nil, err
		}
		tb.Logf("open: %+v", r)
		results = append(results, r)
	}
	return results, nil
}

// kafkaStoppedCleanly reports whether a log directory under dir holds
// the marker Kafka writes at the end of a clean shutdown (and removes once
// it has loaded its logs at the next start).
func kafkaStoppedCleanly(dir string) (bool, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*", "data", ".kafka_cleanshutdown"))
	if len(names) == 0 {
		names, err = filepath.Glob(filepath.Join(dir, "*", "*", "data", ".kafka_cleanshutdown"))
	}
	return len(names) > 0, err
}

func openStopName(kill bool) string {
	if kill {
		return "kill -9"
	}
	return "clean"
}

// openFill creates layout's topics on the node at addr (the first with
// size.SegmentBytes) and writes size's data to them.
func openFill(addr string, layout scaleLayout, size openSize) error {
	ctx, cancel := context.WithTimeout(context.Background(), openWait)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestTimeoutOverhead(openRequestWait))
	if err != nil {
		return err
	}
	defer client.Close()
	for i := 0; i < len(layout.topics); i += openTopicsAtOnce {
		if err := openCreateTopics(ctx, client, layout.topics[i:min(i+openTopicsAtOnce, len(layout.topics))], layout.partitions, size.SegmentBytes); err != nil {
			return err
		}
	}
	if err := pollUntil(ctx, openAllInterval, func() (bool, error) { return openAllReadable(ctx, client, layout), nil }); err != nil {
		return fmt.Errorf("open: created topics not readable: %w", err)
	}
	ids, err := topicIDs(ctx, client, layout.topics)
	if err != nil {
		return err
	}
	batch := openBatch(openBatchBytes)
	// Rounds of one batch to every partition, then the big partitions'.
	rounds := int(size.SmallBytes / int64(len(batch)))
	var requests []*kmsg.ProduceRequest
	for range rounds {
		for _, topic := range layout.topics {
			requests = append(requests, openProduce(topic, ids[topic], allPartitions(layout.partitions), batch))
		}
	}
	big := make([]int32, size.Big)
	for i := range big {
		big[i] = int32(i)
	}
	bigBatch := openBatch(4 * openBatchBytes)
	for range size.BigBytes / int64(len(bigBatch)) {
		requests = append(requests, openProduce(layout.topics[0], ids[layout.topics[0]], big, bigBatch))
	}
	return sendAll(ctx, client, requests)
}

func allPartitions(n int32) []int32 {
	all := make([]int32, n)
	for i := range all {
		all[i] = int32(i)
	}
	return all
}

// openCreateTopics creates topics of partitions each in one request, the
// first of layout's (open-000) with segmentBytes.
func openCreateTopics(ctx context.Context, client *kgo.Client, topics []string, partitions int32, segmentBytes int64) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(time.Minute / time.Millisecond)
	for _, name := range topics {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, 1
		if name == scaleTopicPrefix+"000" {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = "segment.bytes", kmsg.StringPtr(fmt.Sprint(segmentBytes))
			t.Configs = append(t.Configs, c)
		}
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("create topic %s: %w", t.Topic, err)
		}
	}
	return nil
}

// topicIDs asks a Metadata for the IDs of topics.
func topicIDs(ctx context.Context, client *kgo.Client, topics []string) (map[string][16]byte, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return nil, err
	}
	ids := map[string][16]byte{}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil || t.Topic == nil {
			return nil, fmt.Errorf("metadata of %v: %w", t.Topic, err)
		}
		ids[*t.Topic] = t.TopicID
	}
	if len(ids) != len(topics) {
		return nil, fmt.Errorf("metadata: %d of %d topics", len(ids), len(topics))
	}
	return ids, nil
}

// openBatch is a batch of about size bytes of openRecordBytes records of
// random bytes (nothing to compress), at offset 0: the node assigns them.
func openBatch(size int) []byte {
	r := rand.New(rand.NewPCG(20, 20))
	records := make([]rb.Record, max(1, size/openRecordBytes))
	for i := range records {
		value := make([]byte, min(size, openRecordBytes)-40) // about the record's framing
		for j := range value {
			value[j] = byte(r.Uint32())
		}
		records[i] = rb.Record{Value: value}
	}
	return rb.Append(nil, rb.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, Records: records})
}

// openProduce is a produce (acks=1) of batch to each of partitions of
// topic.
func openProduce(topic string, id [16]byte, partitions []int32, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = 1, 30_000
	t := kmsg.NewProduceRequestTopic()
	t.Topic, t.TopicID = topic, id // Produce 13 names topics by ID
	for _, partition := range partitions {
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition, p.Records = partition, batch
		t.Partitions = append(t.Partitions, p)
	}
	req.Topics = append(req.Topics, t)
	return req
}

// sendAll sends requests, openProducers at a time, each answered without
// an error.
func sendAll(ctx context.Context, client *kgo.Client, requests []*kmsg.ProduceRequest) error {
	var next atomic.Int64
	errs := make([]error, openProducers)
	var wg sync.WaitGroup
	for w := range openProducers {
		wg.Go(func() {
			for { // bounded by len(requests)
				i := int(next.Add(1) - 1)
				if i >= len(requests) || ctx.Err() != nil {
					errs[w] = ctx.Err()
					return
				}
				if err := produceOnce(ctx, client, requests[i]); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func produceOnce(ctx context.Context, client *kgo.Client, req *kmsg.ProduceRequest) error {
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("produce %s-%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// openKillUnderLoad writes one small batch to every partition of layout,
// round after round, and calls kill once a whole round was answered and
// the next one is in flight.
func openKillUnderLoad(addr string, layout scaleLayout, kill func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), openWait)
	defer cancel()
	// A node's first write to a partition after a clean open can wait for
	// the disk (mirrord removes its clean-shutdown marker durably):
	// 10,000 partitions' first round takes long on a busy machine.
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RequestTimeoutOverhead(openRequestWait))
	if err != nil {
		return err
	}
	defer client.Close()
	ids, err := topicIDs(ctx, client, layout.topics)
	if err != nil {
		return err
	}
	batch := openBatch(openKillBatch)
	round := func() []*kmsg.ProduceRequest {
		var requests []*kmsg.ProduceRequest
		for _, topic := range layout.topics {
			requests = append(requests, openProduce(topic, ids[topic], allPartitions(layout.partitions), batch))
		}
		return requests
	}
	if err := sendAll(ctx, client, round()); err != nil {
		return fmt.Errorf("open: a round before the kill: %w", err)
	}
	// The next rounds, until the kill ends them: answers after it are
	// errors, as they should be.
	loadCtx, stopLoad := context.WithCancel(ctx)
	done := make(chan struct{})
	var sent atomic.Int64
	go func() {
		defer close(done)
		for range openKillRoundsMax {
			var wg sync.WaitGroup
			for _, req := range round() { // each its own: the client sets a request's version
				wg.Go(func() {
					sent.Add(1)
					produceOnce(loadCtx, client, req)
				})
			}
			wg.Wait()
			if loadCtx.Err() != nil {
				return
			}
		}
	}()
	// In flight: the first requests of the next round went out.
	err = pollUntil(ctx, time.Millisecond, func() (bool, error) { return sent.Load() >= int64(len(layout.topics)/2), nil })
	if err == nil {
		err = kill()
	}
	stopLoad()
	<-done
	return err
}

// openTimes polls the node at addr until it serves and then until every
// partition of layout is readable; both times since started.
func openTimes(addr string, layout scaleLayout, started time.Time) (OpenResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), openWait)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return OpenResult{}, err
	}
	defer client.Close()
	r := OpenResult{Partitions: layout.total()}
	if err := pollUntil(ctx, openPollInterval, func() (bool, error) { return openServes(ctx, client, layout), nil }); err != nil {
		return r, fmt.Errorf("open: %s not serving: %w", addr, err)
	}
	r.Serve = time.Since(started)
	if err := pollUntil(ctx, openAllInterval, func() (bool, error) { return openAllReadable(ctx, client, layout), nil }); err != nil {
		return r, fmt.Errorf("open: %s: partitions not readable: %w", addr, err)
	}
	r.All = time.Since(started)
	return r, nil
}

// openServes reports whether a Metadata lists every topic of layout and a
// Fetch of partition 0 of the first answers a batch.
func openServes(ctx context.Context, client *kgo.Client, layout scaleLayout) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	meta := kmsg.NewPtrMetadataRequest()
	for _, name := range layout.topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		meta.Topics = append(meta.Topics, t)
	}
	resp, err := meta.RequestWith(ctx, client)
	if err != nil || len(resp.Brokers) != 1 {
		return false
	}
	var id [16]byte
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 || len(t.Partitions) != int(layout.partitions) {
			return false
		}
		if t.Topic != nil && *t.Topic == layout.topics[0] {
			id = t.TopicID
		}
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.MaxBytes, fetch.SessionEpoch = -1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = layout.topics[0], id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 0, 0, 1<<20, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	kresp, err := client.Broker(int(resp.Brokers[0].NodeID)).Request(ctx, fetch)
	if err != nil {
		return false
	}
	fresp := kresp.(*kmsg.FetchResponse)
	return fresp.ErrorCode == 0 && len(fresp.Topics) == 1 && len(fresp.Topics[0].Partitions) == 1 &&
		fresp.Topics[0].Partitions[0].ErrorCode == 0 && len(fresp.Topics[0].Partitions[0].RecordBatches) > 0
}

// openAllReadable reports whether a ListOffsets of every partition of
// layout answers each without an error.
func openAllReadable(ctx context.Context, client *kgo.Client, layout scaleLayout) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	id, err := nodeID(ctx, client)
	if err != nil {
		return false
	}
	_, err = listOffsetsOf(ctx, client, id, layout.topics, layout.partitions)
	return err == nil
}

// logBytes sums the sizes of the *.log files under dir.
func logBytes(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") || !strings.HasPrefix(filepath.Base(filepath.Dir(path)), scaleTopicPrefix) {
			return err
		}
		info, err := d.Info()
		if err == nil {
			total += info.Size()
		}
		return err
	})
	return total, err
}

// openTable is the "Open time" section: a row per start, and the goal.
func openTable(results []OpenResult, kafkaErr error) Table {
	t := Table{Title: "Open time",
		Intro: "From the process start of a node on a data directory of many partitions (most small, a few of several segments; " +
			"warm page cache) until it serves (a Metadata of every topic and a Fetch answer) and until every partition answers " +
			"ListOffsets, after a clean stop (SIGTERM) and after kill -9 with a produce to every partition in flight.",
		Columns: []string{"node", "stop", "s to serve", "s to all readable", "partitions", "GiB"},
		Numbers: map[string]float64{}}
	all := map[string]time.Duration{}
	for _, r := range results {
		t.Rows = append(t.Rows, []string{r.Node, r.Stop, fmt.Sprintf("%.2f", r.Serve.Seconds()), fmt.Sprintf("%.2f", r.All.Seconds()),
			fmt.Sprint(r.Partitions), fmt.Sprintf("%.2f", float64(r.Bytes)/(1<<30))})
		key := r.Node + "_" + strings.ReplaceAll(strings.ReplaceAll(r.Stop, " ", ""), "-", "")
		t.Numbers[key+"_serve_s"], t.Numbers[key+"_all_s"] = r.Serve.Seconds(), r.All.Seconds()
		all[r.Node+" "+r.Stop] = r.All
	}
	name := "mirrord's open after kill -9 (until all readable) over Kafka's"
	mirrord, kafka := all["mirrord kill -9"], all["kafka kill -9"]
	switch {
	case kafkaErr != nil:
		t.Goals = append(t.Goals, unmeasuredGoal(name, 0.2, true, "Kafka not measured: "+kafkaErr.Error()))
	case mirrord <= 0 || kafka <= 0:
		t.Goals = append(t.Goals, unmeasuredGoal(name, 0.2, true, "a kill -9 row is missing"))
	default:
		ratio := mirrord.Seconds() / kafka.Seconds()
		t.Numbers["kill9_all_ratio"] = ratio
		t.Goals = append(t.Goals, measuredGoal(name, ratio, 0.2, true,
			fmt.Sprintf("mirrord %.2f s, Kafka %.2f s", mirrord.Seconds(), kafka.Seconds())))
	}
	return t
}

// openScenarioOf runs the open scenario, against Kafka too when its jars
// are installed (required under CI=true).
func openScenarioOf(t *testing.T, mode benchMode, withKafka bool) Table {
	t.Helper()
	libs := ""
	if withKafka {
		var err error
		libs, err = kafkatest.Libs(".")
		if err != nil && (!errors.Is(err, kafkatest.ErrNotInstalled) || os.Getenv("CI") == "true") {
			t.Fatalf("open: %v", err)
		}
	}
	table, err := openScenario(t, mode, libs)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return table
}

func TestOpenSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("the open scenario starts processes")
	}
	mode := scenarioMode(t) // smoke unless scenarioModeEnv says otherwise
	withKafka := os.Getenv(openKafkaEnv) != ""
	if !withKafka {
		skipForReportSmoke(t, mode, "checkOpen")
	}
	checkOpen(t, mode, openScenarioOf(t, mode, withKafka))
}

// checkOpen checks the table of openScenarioOf(mode): mirrord's rows
// first.
func checkOpen(t *testing.T, mode benchMode, table Table) {
	t.Helper()
	if len(table.Rows) < 2 {
		t.Fatalf("rows %v, want mirrord's clean and kill -9", table.Rows)
	}
	for _, row := range table.Rows[:2] {
		if row[0] != "mirrord" || row[4] != fmt.Sprint(openSizeOf(mode).Partitions) || row[3] == "0.00" {
			t.Errorf("row %v", row)
		}
	}
	for _, key := range []string{"mirrord_clean_serve_s", "mirrord_kill9_all_s"} {
		if table.Numbers[key] <= 0 {
			t.Errorf("%s = %v", key, table.Numbers[key])
		}
	}
	for _, row := range table.Rows {
		t.Log(row)
	}
	if len(table.Goals) != 1 {
		t.Errorf("goals %+v", table.Goals)
	}
}
