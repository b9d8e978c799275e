package bench

// The lag scenario: how long after a record's produce is acknowledged by
// the source does a consumer of the mirror see it, at a steady produce
// rate.
//
// A source `mirrord serve` process holds a writable topic (1 partition;
// in full mode also 64), a mirror process mirrors it. A kgo producer in
// this process writes 1 KiB records (lz4, linger 1 ms, idempotent, acks
// all) to the source at rateBytes per second, paced by a 1 ms ticker, for
// a bounded time (smoke 2 s, quick 15 s, full 60 s) and count
// (lagRecordsMax). Each value starts with its sequence number;
// the produce promise notes when the record was acknowledged. A kgo
// consumer in this process reads the mirror's topic from the start
// (assigned partitions, no group, FetchMaxWait 50 ms) and notes when it
// first sees each sequence. One warm-up record per partition goes first,
// and is seen on the mirror before the timing starts (the mirror's
// fetcher is long-polling by then); one end marker per partition goes
// last, so the consumer knows when it has seen every timed record. A
// record's lag is seen minus acknowledged, both on this process's
// monotonic clock. It can be slightly negative:
// the source wakes the mirror's long poll as it appends, so the mirrored
// copy may reach the consumer before the produce response reaches the
// producer.
//
// Rates are record batch bytes as stored at the source (lz4-compressed),
// as Sample.Bytes and so mirrord's throughput are: the values are about
// twice as many bytes. The pacer turns the rate into records with the
// ratio of stored to value bytes of the batches written so far (a
// producer hook; lagRatioGuess until a MiB is written). The variant
// names the rate asked; RateBytes is the rate reached (stored bytes of
// the timed batches over the producing time), lower when this machine
// cannot produce, mirror and consume that fast at once.
//
// The mirror long-polls the source with fetch.wait.max.ms = 500: the
// source answers a waiting Fetch as soon as a partition it names is
// appended to (netio's Changed channels), so the wait bounds only how
// often an idle mirror asks, not the lag. A low lag here comes from that
// wake-up, not from polling fast; 500 ms keeps an idle mirror at two
// requests a second while staying well below request.timeout.ms.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
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

	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	lagMirrorName  = "lag"
	lagRecordBytes = 1024    // value bytes per record, the sequence number included
	lagRecordsMax  = 1 << 24 // timed records per variant, at most (16 bytes of times each: 256 MiB)
	lagRandomBytes = 4 << 20 // pseudo-random bytes the values take their first half from
	// lagRatioGuess is how much of its values' bytes a batch takes as
	// stored (lz4 of half random bytes, half text), until measured;
	// lagRatioMin bounds the measured ratio from below, and with it the
	// records a run may need.
	lagRatioGuess      = 0.5
	lagRatioMin        = 0.25
	lagLinger          = time.Millisecond
	lagPaceInterval    = time.Millisecond
	lagFetchWaitMax    = 500 * time.Millisecond // the mirror's fetch.wait.max.ms
	lagConsumerWaitMax = 50 * time.Millisecond  // the mirror consumer's FetchMaxWait
	lagSetupWait       = time.Minute            // topic creation and the warm-up record, at most
	lagDrainWait       = time.Minute            // last acknowledgement to every record seen, at most
	lagPollInterval    = 5 * time.Millisecond
	// lagWarmUpFlag marks a warm-up record's sequence: one per partition,
	// seen on the mirror before the timed records start, so that the
	// mirror's fetcher is long-polling when they do. lagEndFlag marks an
	// end marker: one per partition after the timed records, so that the
	// consumer knows it has seen them all.
	lagWarmUpFlag = uint64(1) << 63
	lagEndFlag    = uint64(1) << 62

	// scenarioModeEnv selects the mode of TestLagScenarioSmoke and
	// TestScaleScenarioSmoke: smoke (unset), quick or full, e.g.
	//
	//	MIRRORD_BENCH_SCENARIO_MODE=quick go test -run 'TestLagScenarioSmoke|TestScaleScenarioSmoke' -v -timeout 30m ./bench/
	scenarioModeEnv = "MIRRORD_BENCH_SCENARIO_MODE"
	// lagRatesEnv lists the produce rates of TestLagScenarioSmoke, bytes
	// per second, comma separated (default lagSmokeRate), e.g.
	// MIRRORD_BENCH_LAG_RATES=50e6,200e6.
	lagRatesEnv  = "MIRRORD_BENCH_LAG_RATES"
	lagSmokeRate = 10e6
)

// lagProduceTime is how long a variant produces.
func lagProduceTime(mode benchMode) time.Duration {
	switch mode.Name {
	case "smoke":
		return 2 * time.Second
	case "quick":
		return 15 * time.Second
	}
	return time.Minute
}

// lagScenario measures the lag of a mirror process behind a source
// process at rateBytes per second of record batches as stored: one
// LagResult per variant (1 partition; in full mode also 64 partitions).
func lagScenario(tb testing.TB, mode benchMode, rateBytes float64) ([]LagResult, error) {
	tb.Helper()
	if !(rateBytes > 0) || math.IsInf(rateBytes, 0) {
		return nil, fmt.Errorf("lag: rate %v bytes/s: want a positive rate", rateBytes)
	}
	dir := tb.TempDir()
	source := startMirrord(tb, filepath.Join(dir, "source"))
	mirror := startMirrord(tb, filepath.Join(dir, "mirror"))
	ctx, cancel := context.WithTimeout(context.Background(), lagSetupWait)
	defer cancel()
	admin := mirror.client()
	defer admin.Close()
	configs := map[string]string{"fetch.wait.max.ms": strconv.FormatInt(lagFetchWaitMax.Milliseconds(), 10)}
	if err := createMirrorWith(ctx, admin, lagMirrorName, source.addr, configs); err != nil {
		return nil, err
	}
	variants := []int32{1}
	if mode.Full {
		variants = append(variants, 64)
	}
	var results []LagResult
	for _, partitions := range variants {
		result, err := lagVariant(tb, mode, source, mirror, partitions, rateBytes)
		if err != nil {
			return results, fmt.Errorf("lag, %d partitions: %w", partitions, err)
		}
		results = append(results, result)
	}
	return results, nil
}

// lagVariant creates a topic of partitions on the source, mirrors it and
// times rateBytes per second of records through it.
func lagVariant(tb testing.TB, mode benchMode, source, mirror *mirrordProcess, partitions int32, rateBytes float64) (LagResult, error) {
	topic := fmt.Sprintf("lag-%d", partitions)
	if err := lagSetUp(source, mirror, topic, partitions); err != nil {
		return LagResult{}, err
	}
	duration := lagProduceTime(mode)
	records := int64(min(float64(lagRecordsMax), math.Ceil(rateBytes*duration.Seconds()/(lagRatioMin*lagRecordBytes))))
	run := newLagRun(topic, partitions, records)
	cpuBefore, started := [3]time.Duration{source.cpu(), mirror.cpu(), processCPU()}, time.Now()
	if err := run.execute(source.addr, mirror.addr, rateBytes, duration); err != nil {
		return LagResult{}, err
	}
	cpuAfter := [3]time.Duration{source.cpu(), mirror.cpu(), processCPU()}
	lags, err := run.lags()
	if err != nil {
		return LagResult{}, err
	}
	reached := float64(run.timedStoredBytes) / run.produceTime.Seconds()
	result := lagResultOf(lags, rateBytes, reached, partitions)
	var cpu [3]float64
	for i := range cpu {
		cpu[i] = (cpuAfter[i] - cpuBefore[i]).Seconds()
	}
	// The three processes share this machine's cores: near all of them
	// busy, the lag measures the queueing of a saturated machine.
	busy := (cpu[0] + cpu[1] + cpu[2]) / time.Since(started).Seconds()
	tb.Logf("%s: %d records in %v (%.1f MB/s reached; values %.1f MB/s, stored in %.2f of their bytes); "+
		"CPU s: source %.2f, mirror %.2f, producer+consumer %.2f: %.2f of %d cores busy",
		result.Variant, len(lags), run.produceTime.Round(time.Millisecond), reached/1e6,
		float64(len(lags))*lagRecordBytes/run.produceTime.Seconds()/1e6, run.storedRatio(),
		cpu[0], cpu[1], cpu[2], busy, runtime.NumCPU())
	return result, nil
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

// lagRun is one timed run: times are since start on the monotonic clock,
// 0 while not yet observed.
type lagRun struct {
	topic      string
	partitions int32
	records    int64     // timed records to produce, at most
	random     []byte    // lagRandomBytes of pseudo-random bytes for the values
	start      time.Time // set before the consumer starts

	produceTime time.Duration   // first timed produce to the last acknowledgement
	sent        int64           // timed records produced
	acked       []atomic.Int64  // by sequence, nanoseconds; written by promises
	seen        []time.Duration // by sequence; written by the consumer goroutine only
	warmUps     atomic.Int64    // warm-up records seen

	consumed   chan struct{} // closed when the consumer goroutine ends
	consumeErr error         // its result, valid once consumed is closed

	storedBytes      atomic.Int64 // record batch bytes as stored at the source, batches written since produce began
	valueBytes       atomic.Int64 // the record value bytes in them
	timedStoredBytes int64        // storedBytes once the timed records are acknowledged

	errMu    sync.Mutex
	firstErr error // the first produce error
}

func newLagRun(topic string, partitions int32, records int64) *lagRun {
	return &lagRun{topic: topic, partitions: partitions, records: records, random: lagRandom(),
		acked: make([]atomic.Int64, records), seen: make([]time.Duration, records), consumed: make(chan struct{})}
}

// lagRandom is lagRandomBytes of seeded pseudo-random bytes.
func lagRandom() []byte {
	random := rand.New(rand.NewPCG(3, 4))
	out := make([]byte, lagRandomBytes)
	for i := range out {
		out[i] = byte(random.Uint32())
	}
	return out
}

// lagText is the second half of every value.
var lagText = func() []byte {
	phrase := []byte("mirrord mirrors topics byte for byte. ")
	return bytes.Repeat(phrase, lagRecordBytes/2/len(phrase)+1)[:lagRecordBytes/2]
}()

// valueOf is the value of the record of sequence: the sequence, then
// pseudo-random bytes up to the middle, then text, so that lz4 stores it
// in about half (as benchBatch's records). The random part of each
// record is its own stretch of r.random, repeating only every
// lagRandomBytes/2 records, far past a batch and lz4's 64 KiB window:
// records with the same bytes would compress to nothing.
func (r *lagRun) valueOf(sequence uint64) []byte {
	const randomBytes = lagRecordBytes/2 - 8
	value := make([]byte, lagRecordBytes)
	binary.BigEndian.PutUint64(value, sequence)
	at := sequence % (lagRandomBytes / randomBytes) * randomBytes
	copy(value[8:lagRecordBytes/2], r.random[at:at+randomBytes])
	copy(value[lagRecordBytes/2:], lagText)
	return value
}

// execute warms the pipeline up, produces the timed records, then an end
// marker to each partition, and waits until the mirror's consumer has
// seen every end marker (and so every record before it).
func (r *lagRun) execute(sourceAddr, mirrorAddr string, rateBytes float64, duration time.Duration) error {
	producer, err := kgo.NewClient(kgo.SeedBrokers(sourceAddr), kgo.DefaultProduceTopic(r.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(lagLinger),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.WithHooks(lagBatchHook{r}))
	if err != nil {
		return err
	}
	defer producer.Close()
	offsets := map[int32]kgo.Offset{}
	for p := range r.partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(mirrorAddr), kgo.FetchMaxWait(lagConsumerWaitMax),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.topic: offsets}))
	if err != nil {
		return err
	}
	defer consumer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), lagSetupWait+duration+lagDrainWait)
	defer cancel()
	r.start = time.Now()
	go func() {
		defer close(r.consumed)
		r.consumeErr = r.consume(ctx, consumer)
	}()
	err = r.warmUp(ctx, producer)
	if err == nil {
		err = r.produce(ctx, producer, rateBytes, duration)
	}
	if err == nil {
		err = r.markEnds(ctx, producer, lagEndFlag)
	}
	if err != nil {
		cancel()
		<-r.consumed
		return err
	}
	drain := time.NewTimer(lagDrainWait)
	defer drain.Stop()
	select {
	case <-r.consumed:
		return r.consumeErr
	case <-drain.C:
		cancel()
		<-r.consumed
		return fmt.Errorf("the mirror did not show every record %v after the last acknowledgement: %w", lagDrainWait, r.consumeErr)
	}
}

// storedRatio is stored bytes over value bytes of the batches written
// since produce began, lagRatioGuess before the first MiB.
func (r *lagRun) storedRatio() float64 {
	stored, values := r.storedBytes.Load(), r.valueBytes.Load()
	if values < 1<<20 {
		return lagRatioGuess
	}
	return max(float64(stored)/float64(values), lagRatioMin)
}

// lagBatchHook counts the bytes of the batches the producer wrote.
type lagBatchHook struct{ run *lagRun }

func (h lagBatchHook) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, metrics kgo.ProduceBatchMetrics) {
	h.run.storedBytes.Add(int64(metrics.CompressedBytes + rb.HeaderSize))
	h.run.valueBytes.Add(int64(metrics.NumRecords * lagRecordBytes))
}

// warmUp produces one untimed record to each partition and waits until
// the consumer has seen them all.
func (r *lagRun) warmUp(ctx context.Context, producer *kgo.Client) error {
	ctx, cancel := context.WithTimeout(ctx, lagSetupWait)
	defer cancel()
	if err := r.markEnds(ctx, producer, lagWarmUpFlag); err != nil {
		return err
	}
	return pollUntil(ctx, lagPollInterval, func() (bool, error) {
		select {
		case <-r.consumed:
			return false, fmt.Errorf("the consumer stopped during the warm-up: %w", r.consumeErr)
		default:
		}
		return r.warmUps.Load() >= int64(r.partitions), nil
	})
}

// markEnds produces one record to each partition whose sequence is flag
// and the partition.
func (r *lagRun) markEnds(ctx context.Context, producer *kgo.Client, flag uint64) error {
	for p := range r.partitions {
		if err := producer.ProduceSync(ctx, &kgo.Record{Partition: p, Value: r.valueOf(flag | uint64(p))}).FirstErr(); err != nil {
			return fmt.Errorf("marker record: %w", err)
		}
	}
	return nil
}

// produce writes up to r.records records at rateBytes of stored batches
// per second, paced by a ticker, for at most duration, then flushes.
func (r *lagRun) produce(ctx context.Context, producer *kgo.Client, rateBytes float64, duration time.Duration) error {
	ticker := time.NewTicker(lagPaceInterval)
	defer ticker.Stop()
	r.storedBytes.Store(0) // the warm-up's batches are acknowledged: count the timed ones
	r.valueBytes.Store(0)
	start := time.Now()
	promise := r.promise()
	for r.sent < r.records && ctx.Err() == nil { // bounded: r.records, and duration below
		elapsed := time.Since(start)
		if elapsed >= duration {
			break
		}
		owed := min(r.records, int64(rateBytes*elapsed.Seconds()/(r.storedRatio()*lagRecordBytes))+1)
		for ; r.sent < owed; r.sent++ {
			record := &kgo.Record{Partition: int32(r.sent % int64(r.partitions)), Value: r.valueOf(uint64(r.sent))}
			producer.Produce(ctx, record, promise)
		}
		select {
		case <-ctx.Done():
		case <-ticker.C:
		}
	}
	if err := producer.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	r.produceTime = time.Since(start)
	r.timedStoredBytes = r.storedBytes.Load()
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.firstErr
}

// promise notes each timed record's acknowledgement, or the first error.
func (r *lagRun) promise() func(*kgo.Record, error) {
	return func(record *kgo.Record, err error) {
		if err != nil {
			r.errMu.Lock()
			defer r.errMu.Unlock()
			if r.firstErr == nil {
				r.firstErr = fmt.Errorf("produce: %w", err)
			}
			return
		}
		r.acked[binary.BigEndian.Uint64(record.Value)].Store(int64(r.since()))
	}
}

// since is the time since r.start, at least 1 ns (0 means not observed).
func (r *lagRun) since() time.Duration { return max(1, time.Since(r.start)) }

// consume reads the mirror's topic and notes when each sequence is first
// seen, until it has seen an end marker from every partition or ctx ends.
func (r *lagRun) consume(ctx context.Context, consumer *kgo.Client) error {
	ends := 0
	for ends < int(r.partitions) { // bounded: each pass sees records or ends with ctx
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("mirror consumer: %d of %d end markers seen: %w", ends, r.partitions, err)
		}
		if err := fetches.Err(); err != nil {
			return fmt.Errorf("mirror consumer: %w", err)
		}
		var bad error
		fetches.EachRecord(func(record *kgo.Record) {
			if len(record.Value) != lagRecordBytes {
				bad = fmt.Errorf("mirror consumer: a value of %d bytes at %s-%d@%d", len(record.Value), record.Topic, record.Partition, record.Offset)
				return
			}
			switch sequence := binary.BigEndian.Uint64(record.Value); {
			case sequence&lagWarmUpFlag != 0:
				r.warmUps.Add(1)
			case sequence&lagEndFlag != 0:
				ends++
			case sequence >= uint64(len(r.seen)):
				bad = fmt.Errorf("mirror consumer: sequence %d past %d", sequence, len(r.seen))
			case r.seen[sequence] == 0:
				r.seen[sequence] = r.since()
			}
		})
		if bad != nil {
			return bad
		}
	}
	return nil
}

// lags returns the lag of every timed record, in place of r.seen (once
// the consumer has ended); every acknowledged record must have been seen.
func (r *lagRun) lags() ([]time.Duration, error) {
	lags := r.seen[:r.sent]
	for sequence := range lags {
		acked, seen := time.Duration(r.acked[sequence].Load()), lags[sequence]
		switch {
		case acked == 0:
			return nil, fmt.Errorf("record %d was never acknowledged", sequence)
		case seen == 0:
			return nil, fmt.Errorf("record %d was acknowledged but never seen on the mirror", sequence)
		}
		lags[sequence] = seen - acked
	}
	if len(lags) == 0 {
		return nil, errors.New("no record was timed")
	}
	return lags, nil
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

// pollUntil calls done every interval until it reports true or an error,
// or ctx ends.
func pollUntil(ctx context.Context, interval time.Duration, done func() (bool, error)) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for { // bounded by ctx
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

// createMirrorWith creates mirror name of the source at sourceAddr with
// configs besides bootstrap.servers.
func createMirrorWith(ctx context.Context, client *kgo.Client, name, sourceAddr string, configs map[string]string) error {
	req := &netio.CreateClusterMirrorRequest{MirrorName: name,
		Configs: []netio.CreateClusterMirrorConfig{{Name: "bootstrap.servers", Value: &sourceAddr}}}
	for _, key := range slices.Sorted(maps.Keys(configs)) {
		value := configs[key]
		req.Configs = append(req.Configs, netio.CreateClusterMirrorConfig{Name: key, Value: &value})
	}
	kresp, err := client.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("create mirror %s: %w", name, err)
	}
	if code := kresp.(*netio.CreateClusterMirrorResponse).ErrorCode; code != 0 {
		return fmt.Errorf("create mirror %s: %w", name, kerr.ErrorForCode(code))
	}
	return nil
}

// startMirroring starts the topics named and those matching include in
// mirror name.
func startMirroring(ctx context.Context, client *kgo.Client, name string, topics, include []string) error {
	req := &netio.MirrorTopicsRequest{Change: netio.StartMirroring, MirrorName: name, IncludePatterns: include}
	for _, topic := range topics {
		req.Topics = append(req.Topics, netio.MirrorTopicsRequestTopic{TopicName: topic})
	}
	kresp, err := client.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("start mirroring %v %v: %w", topics, include, err)
	}
	resp := kresp.(*netio.MirrorTopicsResponse)
	if resp.ErrorCode != 0 {
		return fmt.Errorf("start mirroring %v %v: %w", topics, include, kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			return fmt.Errorf("start mirroring %s: %w", t.TopicName, kerr.ErrorForCode(t.ErrorCode))
		}
	}
	return nil
}

// listOffsetsOf asks broker for the log end offset of partitions
// partitions of each topic, in one ListOffsets; a partition error is an
// error. The answer is by topic, then partition.
func listOffsetsOf(ctx context.Context, client *kgo.Client, broker int32, topics []string, partitions int32) ([][]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	index := make(map[string]int, len(topics))
	for i, name := range topics {
		index[name] = i
		topic := kmsg.NewListOffsetsRequestTopic()
		topic.Topic = name
		for partition := range partitions {
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Partition, p.Timestamp, p.CurrentLeaderEpoch = partition, -1, -1
			topic.Partitions = append(topic.Partitions, p)
		}
		req.Topics = append(req.Topics, topic)
	}
	kresp, err := client.Broker(int(broker)).Request(ctx, req)
	if err != nil {
		return nil, err
	}
	offsets := make([][]int64, len(topics))
	for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
		i, ok := index[t.Topic]
		if !ok || offsets[i] != nil || len(t.Partitions) != int(partitions) {
			return nil, fmt.Errorf("list offsets: topic %s with %d partitions in the answer", t.Topic, len(t.Partitions))
		}
		offsets[i] = make([]int64, partitions)
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("list offsets %s-%d: %w", t.Topic, p.Partition, err)
			}
			if p.Partition < 0 || p.Partition >= partitions {
				return nil, fmt.Errorf("list offsets: partition %s-%d in the answer", t.Topic, p.Partition)
			}
			offsets[i][p.Partition] = p.Offset
		}
	}
	for i, o := range offsets {
		if o == nil {
			return nil, fmt.Errorf("list offsets: no answer for %s", topics[i])
		}
	}
	return offsets, nil
}

// scenarioMode is the mode scenarioModeEnv names, smoke when unset.
func scenarioMode(tb testing.TB) benchMode {
	tb.Helper()
	name := os.Getenv(scenarioModeEnv)
	if name == "" {
		name = "smoke"
	}
	mode, ok := benchModes[name]
	if !ok {
		tb.Fatalf("%s=%q: want smoke, quick or full", scenarioModeEnv, name)
	}
	return mode
}

// lagRates are the rates lagRatesEnv lists, lagSmokeRate when unset.
func lagRates(tb testing.TB) []float64 {
	tb.Helper()
	list := os.Getenv(lagRatesEnv)
	if list == "" {
		return []float64{lagSmokeRate}
	}
	var rates []float64
	for item := range strings.SplitSeq(list, ",") {
		rate, err := strconv.ParseFloat(strings.TrimSpace(item), 64)
		if err != nil || !(rate > 0) {
			tb.Fatalf("%s=%q: %q is not a positive rate", lagRatesEnv, list, item)
		}
		rates = append(rates, rate)
	}
	return rates
}

// TestLagScenarioSmoke runs the lag scenario (in smoke mode unless
// scenarioModeEnv says otherwise) and checks its results are sane. It
// asserts no timing.
func TestLagScenarioSmoke(t *testing.T) {
	mode := scenarioMode(t)
	for _, rate := range lagRates(t) {
		results, err := lagScenario(t, mode, rate)
		if err != nil {
			t.Fatal(err)
		}
		if want := 1 + boolCount(mode.Full); len(results) != want {
			t.Fatalf("%d results, want %d", len(results), want)
		}
		for _, r := range results {
			t.Logf("%s: %d records, p50 %v, p99 %v, max %v, reached %.1f MB/s", r.Variant, r.Count, r.P50, r.P99, r.Max, r.RateBytes/1e6)
			if r.Count <= 0 || !(r.P50 <= r.P99 && r.P99 <= r.Max) || !(r.RateBytes > 0) {
				t.Errorf("%s: not sane: %+v", r.Variant, r)
			}
		}
	}
}

func boolCount(b bool) int {
	if b {
		return 1
	}
	return 0
}
