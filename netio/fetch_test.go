package netio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startFetchServer serves backend (mem when nil) like startServer and
// also returns the server, whose fetch counters tests read. tune, when
// set, runs before the server starts.
func startFetchServer(t testing.TB, mem *memBackend, backend Backend, tune func(*Server)) (string, *Server) {
	t.Helper()
	if backend == nil {
		backend = mem
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	mem.cluster.Host, mem.cluster.Port = addr.IP.String(), int32(addr.Port)
	server := NewServer(Config{Backend: backend})
	if tune != nil {
		tune(server)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String(), server
}

// fetchTestEventually polls cond until it holds or the deadline passes.
func fetchTestEventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after %v", what, within)
		}
		<-tick.C
	}
}

// fetchTestClient speaks kmsg requests over one connection.
type fetchTestClient struct {
	t             testing.TB
	nc            net.Conn
	formatter     *kmsg.RequestFormatter
	correlationID int32
}

func dialFetchTest(t testing.TB, addr string) *fetchTestClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &fetchTestClient{t: t, nc: nc, formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID("fetch-test"))}
}

func (c *fetchTestClient) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	c.correlationID++
	c.nc.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.nc.Write(c.formatter.AppendRequest(nil, req, c.correlationID)); err != nil {
		return nil, err
	}
	frame, err := fetchTestReadFrame(c.nc)
	if err != nil {
		return nil, err
	}
	body := frame[4:]
	if got := int32(binary.BigEndian.Uint32(body)); got != c.correlationID {
		return nil, fmt.Errorf("correlation ID %d, want %d", got, c.correlationID)
	}
	body = body[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() {
		body = body[1:] // the response header's empty tag section
	}
	return resp, resp.ReadFrom(body)
}

func (c *fetchTestClient) fetch(req *kmsg.FetchRequest) *kmsg.FetchResponse {
	c.t.Helper()
	resp, err := c.roundTrip(req)
	if err != nil {
		c.t.Fatalf("fetch v%d: %v", req.Version, err)
	}
	return resp.(*kmsg.FetchResponse)
}

// fetchTestPart is one partition to ask for.
type fetchTestPart struct {
	partition          int32
	offset             int64
	currentLeaderEpoch int32
	lastFetchedEpoch   int32
	maxBytes           int32
}

func at(partition int32, offset int64) fetchTestPart {
	return fetchTestPart{partition: partition, offset: offset, currentLeaderEpoch: -1, lastFetchedEpoch: -1, maxBytes: 1 << 20}
}

// fetchTestRequest asks for partitions of one topic, by name and ID,
// sessionless, without waiting.
func fetchTestRequest(version int16, topic TopicInfo, parts ...fetchTestPart) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.MinBytes, req.MaxBytes = 1, 10<<20
	if len(parts) == 0 {
		return req
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic.Name, topic.ID
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.partition, p.offset, p.maxBytes
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = p.currentLeaderEpoch, p.lastFetchedEpoch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	return req
}

// fetchTestOnly returns the response's only partition.
func fetchTestOnly(t testing.TB, resp *kmsg.FetchResponse) kmsg.FetchResponseTopicPartition {
	t.Helper()
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("response: error %d, %d topics; want one partition", resp.ErrorCode, len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// fetchTestPartitions returns the partitions a response answers, in order.
func fetchTestPartitions(resp *kmsg.FetchResponse) []int32 {
	var out []int32
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out = append(out, rp.Partition)
		}
	}
	return out
}

// fetchTestBatches returns the whole batches of a record set (a partial
// last batch is dropped, as clients do).
func fetchTestBatches(t testing.TB, records []byte) []recordbatch.Batch {
	t.Helper()
	var out []recordbatch.Batch
	it := recordbatch.NewIter(records, true)
	for it.Next() {
		out = append(out, it.Batch())
	}
	if err := it.Err(); err != nil && !errors.Is(err, recordbatch.ErrTruncated) {
		t.Fatalf("records: %v", err)
	}
	return out
}

// fetchTestProduce appends one batch of values to p.
func fetchTestProduce(t testing.TB, p Partition, values ...string) {
	t.Helper()
	var records []recordbatch.Record
	for _, v := range values {
		records = append(records, recordbatch.Record{Value: []byte(v)})
	}
	batch := recordbatch.Append(nil, recordbatch.Spec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: records})
	if _, err := p.Produce(context.Background(), batch, ProduceRequest{Acks: -1}); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// fetchTestTopic creates a topic with batches per partition, each batch
// of the given values.
func fetchTestTopic(t testing.TB, b Backend, name string, partitions int32, batches ...[]string) TopicInfo {
	t.Helper()
	info, err := b.CreateTopic(context.Background(), name, partitions, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range partitions {
		p, err := b.Partition(name, i)
		if err != nil {
			t.Fatal(err)
		}
		for _, values := range batches {
			fetchTestProduce(t, p, values...)
		}
	}
	return info
}

func setLeaderEpoch(t testing.TB, b Backend, topic string, partition, epoch int32) {
	t.Helper()
	p, err := b.Partition(topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	mp := p.(*memPartition)
	mp.mu.Lock()
	mp.leaderEpoch = recordbatch.Epoch(epoch)
	mp.mu.Unlock()
}

// wrapBackend is a memBackend whose partitions wrap replaces.
type wrapBackend struct {
	*memBackend
	wrap func(topic string, partition int32, p Partition) Partition
}

func (b *wrapBackend) Partition(topic string, partition int32) (Partition, error) {
	p, err := b.memBackend.Partition(topic, partition)
	if err != nil {
		return nil, err
	}
	return b.wrap(topic, partition, p), nil
}

// The end to end path with a real client: every record, exact offsets
// and values, through small fetches (partial batches, many requests) in
// one fetch session; the session goes incremental.
func TestFetchKgoProduceConsume(t *testing.T) {
	mem := newMemBackend()
	addr, server := startFetchServer(t, mem, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := mem.CreateTopic(ctx, "orders", 3, nil, false); err != nil {
		t.Fatal(err)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("orders"), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	const perPartition = 100
	for chunk := range 10 {
		var records []*kgo.Record
		for i := chunk * perPartition / 10; i < (chunk+1)*perPartition/10; i++ {
			for p := range int32(3) {
				records = append(records, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)})
			}
		}
		if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: kgo.NewOffset().At(0), 1: kgo.NewOffset().At(0), 2: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxBytes(2<<10), kgo.FetchMaxPartitionBytes(700), kgo.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	next := map[int32]int64{}
	for total := 0; total < 3*perPartition; {
		fetches := consumer.PollFetches(ctx)
		if errs := fetches.Errors(); len(errs) > 0 {
			t.Fatalf("poll: %v", errs)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] || string(r.Value) != fmt.Sprintf("p%d-%d", r.Partition, r.Offset) {
				t.Fatalf("partition %d: record at %d %q, want offset %d", r.Partition, r.Offset, r.Value, next[r.Partition])
			}
			next[r.Partition]++
			total++
		})
	}
	stats := &server.sessions.stats
	if stats.full.Load() == 0 || stats.incremental.Load() == 0 || stats.sessionErrors.Load() != 0 {
		t.Fatalf("fetches: %d full, %d incremental, %d sessionless, %d session errors; want full and incremental, no errors",
			stats.full.Load(), stats.incremental.Load(), stats.sessionless.Load(), stats.sessionErrors.Load())
	}
	t.Logf("fetches: %d full, %d incremental", stats.full.Load(), stats.incremental.Load())
}

// A consumer waiting in a long poll is woken by a produce, well before
// its MaxWait.
func TestFetchKgoLongPoll(t *testing.T) {
	mem := newMemBackend()
	addr, server := startFetchServer(t, mem, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fetchTestTopic(t, mem, "events", 2, []string{"first"})
	const maxWait = 10 * time.Second
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchMaxWait(maxWait),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"events": {0: kgo.NewOffset().At(0), 1: kgo.NewOffset().At(0)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for got := 0; got < 2; {
		got += len(consumer.PollFetches(ctx).Records())
	}

	fetchTestEventually(t, 10*time.Second, "waiting in a long poll", func() bool { return server.sessions.stats.waiting.Load() > 0 })
	producedAt := time.Now()
	p, _ := mem.Partition("events", 1)
	fetchTestProduce(t, p, "second")
	records := consumer.PollFetches(ctx).Records()
	elapsed := time.Since(producedAt)
	if len(records) != 1 || string(records[0].Value) != "second" || records[0].Offset != 1 {
		t.Fatalf("records after the wake: %v", records)
	}
	if elapsed > maxWait/2 {
		t.Fatalf("the long poll returned %v after the produce, MaxWait is %v", elapsed, maxWait)
	}
}

func TestFetchLeaderEpochFencing(t *testing.T) {
	mem := newMemBackend()
	addr, _ := startFetchServer(t, mem, nil, nil)
	info := fetchTestTopic(t, mem, "fenced", 1, []string{"x"})
	setLeaderEpoch(t, mem, "fenced", 0, 5)
	client := dialFetchTest(t, addr)
	for _, version := range []int16{9, 12, 15, 16, 18} {
		for _, test := range []struct {
			epoch int32
			code  int16
		}{{-1, 0}, {5, 0}, {4, kerr.FencedLeaderEpoch.Code}, {6, kerr.UnknownLeaderEpoch.Code}} {
			part := at(0, 0)
			part.currentLeaderEpoch = test.epoch
			resp := client.fetch(fetchTestRequest(version, info, part))
			rp := fetchTestOnly(t, resp)
			if rp.ErrorCode != test.code {
				t.Fatalf("v%d epoch %d: error %d, want %d", version, test.epoch, rp.ErrorCode, test.code)
			}
			if test.code != 0 {
				if rp.HighWatermark != -1 || len(rp.RecordBatches) != 0 {
					t.Fatalf("v%d epoch %d: fenced partition answers HW %d and %d record bytes", version, test.epoch, rp.HighWatermark, len(rp.RecordBatches))
				}
			} else if len(fetchTestBatches(t, rp.RecordBatches)) != 1 {
				t.Fatalf("v%d epoch %d: no records", version, test.epoch)
			}
			namesLeader := version >= 16 && test.code == kerr.FencedLeaderEpoch.Code
			if got := rp.CurrentLeader.LeaderID == 1 && rp.CurrentLeader.LeaderEpoch == 5 && len(resp.Brokers) == 1 && resp.Brokers[0].Port == mem.cluster.Port; got != namesLeader {
				t.Fatalf("v%d epoch %d: current leader %+v, brokers %+v; want named: %v", version, test.epoch, rp.CurrentLeader, resp.Brokers, namesLeader)
			}
		}
	}
}

// epochPartition answers EndOffsetForEpoch from a scripted epoch history.
type epochPartition struct {
	Partition
	leaderEpoch recordbatch.Epoch
	starts      []fetchEpochEndOffset // epoch and its start offset, ascending
}

func (p epochPartition) LeaderEpoch() recordbatch.Epoch { return p.leaderEpoch }

func (p epochPartition) EndOffsetForEpoch(epoch recordbatch.Epoch) (recordbatch.Epoch, recordbatch.Offset) {
	i := sort.Search(len(p.starts), func(i int) bool { return p.starts[i].epoch > epoch })
	if i == 0 || epoch > p.leaderEpoch {
		return -1, -1
	}
	if i == len(p.starts) {
		return p.starts[i-1].epoch, p.Offsets().LogEndOffset
	}
	return p.starts[i-1].epoch, p.starts[i].endOffset
}

func TestFetchDivergingEpoch(t *testing.T) {
	mem := newMemBackend()
	backend := &wrapBackend{mem, func(_ string, _ int32, p Partition) Partition {
		// epoch 1 holds offsets [0, 4), epoch 3 holds [4, 10).
		return epochPartition{Partition: p, leaderEpoch: 3, starts: []fetchEpochEndOffset{{1, 0}, {3, 4}}}
	}}
	addr, _ := startFetchServer(t, mem, backend, nil)
	info := fetchTestTopic(t, mem, "diverge", 1, []string{"0", "1", "2", "3"}, []string{"4", "5", "6", "7", "8", "9"})
	client := dialFetchTest(t, addr)
	tests := []struct {
		lastFetchedEpoch int32
		offset           int64
		code             int16
		diverging        fetchEpochEndOffset // -1, -1: none, records expected
	}{
		{3, 6, 0, fetchEpochEndOffset{-1, -1}},
		{1, 3, 0, fetchEpochEndOffset{-1, -1}},
		{1, 4, 0, fetchEpochEndOffset{-1, -1}},
		{1, 6, 0, fetchEpochEndOffset{1, 4}}, // epoch 1 ended at 4, before the fetch offset
		{2, 6, 0, fetchEpochEndOffset{1, 4}}, // epoch 2 unknown here: epoch 1 is the answer
		{2, 4, 0, fetchEpochEndOffset{1, 4}}, // same end offset but another epoch
		{7, 6, kerr.OffsetOutOfRange.Code, fetchEpochEndOffset{-1, -1}},
		{0, 2, kerr.OffsetOutOfRange.Code, fetchEpochEndOffset{-1, -1}},
	}
	for _, version := range []int16{12, 13, 18} {
		for _, test := range tests {
			part := at(0, test.offset)
			part.lastFetchedEpoch = test.lastFetchedEpoch
			rp := fetchTestOnly(t, client.fetch(fetchTestRequest(version, info, part)))
			got := fetchEpochEndOffset{recordbatch.Epoch(rp.DivergingEpoch.Epoch), recordbatch.Offset(rp.DivergingEpoch.EndOffset)}
			if rp.ErrorCode != test.code || got != test.diverging {
				t.Fatalf("v%d last fetched epoch %d at %d: error %d, diverging %+v; want %d, %+v",
					version, test.lastFetchedEpoch, test.offset, rp.ErrorCode, got, test.code, test.diverging)
			}
			batches := fetchTestBatches(t, rp.RecordBatches)
			switch {
			case test.code != 0:
			case test.diverging.set() && (len(batches) != 0 || rp.HighWatermark != 10):
				t.Fatalf("v%d: diverging answer carries %d batches, HW %d; want none, 10", version, len(batches), rp.HighWatermark)
			case !test.diverging.set() && len(batches) == 0:
				t.Fatalf("v%d last fetched epoch %d at %d: no records", version, test.lastFetchedEpoch, test.offset)
			}
		}
	}
	// Before v12 there is no LastFetchedEpoch: the same request reads records.
	part := at(0, 6)
	part.lastFetchedEpoch = 2
	if rp := fetchTestOnly(t, client.fetch(fetchTestRequest(11, info, part))); rp.ErrorCode != 0 || len(rp.RecordBatches) == 0 {
		t.Fatalf("v11: error %d, %d record bytes", rp.ErrorCode, len(rp.RecordBatches))
	}
}

func TestFetchUnknownTopicsAndOffsets(t *testing.T) {
	mem := newMemBackend()
	addr, _ := startFetchServer(t, mem, nil, nil)
	info := fetchTestTopic(t, mem, "known", 2, []string{"a", "b"})
	client := dialFetchTest(t, addr)
	unknownID := TopicInfo{Name: "nope", ID: TopicID{0xde, 0xad}}
	for version := int16(4); version <= 18; version++ {
		tests := []struct {
			name  string
			topic TopicInfo
			part  fetchTestPart
			code  int16
		}{
			{"unknown topic", unknownID, at(0, 0), kerr.UnknownTopicOrPartition.Code},
			{"unknown partition", info, at(7, 0), kerr.UnknownTopicOrPartition.Code},
			{"offset past the end", info, at(0, 3), kerr.OffsetOutOfRange.Code},
			{"negative offset", info, at(0, -1), kerr.OffsetOutOfRange.Code},
			{"at the end", info, at(1, 2), 0},
		}
		if version >= 13 {
			tests[0].code = kerr.UnknownTopicID.Code
		}
		for _, test := range tests {
			resp := client.fetch(fetchTestRequest(version, test.topic, test.part))
			rp := fetchTestOnly(t, resp)
			if rp.ErrorCode != test.code {
				t.Fatalf("v%d %s: error %d, want %d", version, test.name, rp.ErrorCode, test.code)
			}
			if version >= 13 && resp.Topics[0].TopicID != test.topic.ID || version < 13 && resp.Topics[0].Topic != test.topic.Name {
				t.Fatalf("v%d %s: answered for topic %q %x", version, test.name, resp.Topics[0].Topic, resp.Topics[0].TopicID)
			}
			wantHW := int64(-1)
			if test.code == 0 {
				wantHW = 2
			}
			if rp.HighWatermark != wantHW || len(rp.RecordBatches) != 0 {
				t.Fatalf("v%d %s: HW %d and %d record bytes, want HW %d and none", version, test.name, rp.HighWatermark, len(rp.RecordBatches), wantHW)
			}
		}
	}
}

// Request MaxBytes bounds the response, partition max bytes each
// partition, and only the first partition with data may exceed them by
// one batch (KIP-74).
func TestFetchMaxBytes(t *testing.T) {
	mem := newMemBackend()
	addr, _ := startFetchServer(t, mem, nil, nil)
	big := string(bytes.Repeat([]byte("v"), 1000))
	info := fetchTestTopic(t, mem, "sized", 3, []string{big}, []string{big})
	p, _ := mem.Partition("sized", 0)
	read, _ := p.Read(0, 1, ReadUncommitted, true)
	batchBytes := int(read.Records.Length)
	client := dialFetchTest(t, addr)
	parts := func(maxBytes int32) []fetchTestPart {
		out := []fetchTestPart{at(0, 0), at(1, 0), at(2, 0)}
		for i := range out {
			out[i].maxBytes = maxBytes
		}
		return out
	}
	tests := []struct {
		name              string
		maxBytes          int
		partitionMaxBytes int
		want              []int // record bytes per partition
	}{
		{"response bound below a batch", 500, 1 << 20, []int{batchBytes, 0, 0}},
		{"partition bound below a batch", 1 << 20, 100, []int{batchBytes, 100, 100}},
		{"response bound after the first", batchBytes + 50, 1 << 20, []int{batchBytes + 50, 0, 0}},
		{"both", 2*batchBytes + 10, batchBytes + 5, []int{batchBytes + 5, batchBytes + 5, 0}},
		{"zero", 0, 0, []int{batchBytes, 0, 0}},
	}
	for _, test := range tests {
		req := fetchTestRequest(18, info, parts(int32(test.partitionMaxBytes))...)
		req.MaxBytes = int32(test.maxBytes)
		resp := client.fetch(req)
		var got []int
		for _, rp := range resp.Topics[0].Partitions {
			if rp.ErrorCode != 0 || rp.HighWatermark != 2 {
				t.Fatalf("%s: partition %d error %d, HW %d", test.name, rp.Partition, rp.ErrorCode, rp.HighWatermark)
			}
			got = append(got, len(rp.RecordBatches))
		}
		if fmt.Sprint(got) != fmt.Sprint(test.want) {
			t.Fatalf("%s: record bytes %v, want %v (a batch is %d bytes)", test.name, got, test.want, batchBytes)
		}
	}
}

// abortedPartition answers an aborted transaction to read_committed reads.
type abortedPartition struct{ Partition }

func (p abortedPartition) Read(offset recordbatch.Offset, maxBytes int32, isolation Isolation, minOneBatch bool) (ReadResult, error) {
	read, err := p.Partition.Read(offset, maxBytes, isolation, minOneBatch)
	if isolation == ReadCommitted {
		read.AbortedTransactions = []AbortedTransaction{{ProducerID: 42, FirstOffset: 1}}
	}
	return read, err
}

func TestFetchIsolation(t *testing.T) {
	mem := newMemBackend()
	backend := &wrapBackend{mem, func(_ string, _ int32, p Partition) Partition { return abortedPartition{p} }}
	addr, _ := startFetchServer(t, mem, backend, nil)
	info := fetchTestTopic(t, mem, "txn", 1, []string{"a", "b"})
	client := dialFetchTest(t, addr)
	for _, version := range []int16{4, 11, 12, 18} {
		for _, isolation := range []int8{0, 1} {
			req := fetchTestRequest(version, info, at(0, 0))
			req.IsolationLevel = isolation
			rp := fetchTestOnly(t, client.fetch(req))
			want := []kmsg.FetchResponseTopicPartitionAbortedTransaction(nil)
			if isolation == 1 {
				want = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 42, FirstOffset: 1}}
			}
			if fmt.Sprint(rp.AbortedTransactions) != fmt.Sprint(want) || (rp.AbortedTransactions == nil) != (want == nil) {
				t.Fatalf("v%d isolation %d: aborted %v, want %v", version, isolation, rp.AbortedTransactions, want)
			}
		}
	}
	// An isolation level Kafka cannot parse closes the connection.
	req := fetchTestRequest(18, info, at(0, 0))
	req.IsolationLevel = 2
	if _, err := client.roundTrip(req); err == nil {
		t.Fatal("isolation level 2 answered; want the connection closed")
	}
}

// KIP-227 end to end over the wire: full, incremental with only changed
// partitions, forgotten partitions, and the session errors.
func TestFetchSessions(t *testing.T) {
	mem := newMemBackend()
	addr, server := startFetchServer(t, mem, nil, nil)
	info := fetchTestTopic(t, mem, "s", 3, []string{"a", "b"})
	client := dialFetchTest(t, addr)
	stats := &server.sessions.stats

	full := fetchTestRequest(18, info, at(0, 0), at(1, 0), at(2, 0))
	full.SessionEpoch = 0
	resp := client.fetch(full)
	id := resp.SessionID
	if id == 0 || fmt.Sprint(fetchTestPartitions(resp)) != "[0 1 2]" {
		t.Fatalf("full fetch: session %d, partitions %v", id, fetchTestPartitions(resp))
	}
	incremental := func(epoch int32, parts ...fetchTestPart) *kmsg.FetchRequest {
		req := fetchTestRequest(18, info, parts...)
		req.SessionID, req.SessionEpoch = id, epoch
		return req
	}
	// The client moved on to offset 2: nothing new anywhere.
	resp = client.fetch(incremental(1, at(0, 2), at(1, 2), at(2, 2)))
	if resp.ErrorCode != 0 || resp.SessionID != id || len(resp.Topics) != 0 {
		t.Fatalf("incremental, nothing new: error %d, session %d, partitions %v", resp.ErrorCode, resp.SessionID, fetchTestPartitions(resp))
	}
	// A produce to partition 1 wakes a waiting incremental fetch that
	// names no partition; only partition 1 is answered.
	p1, _ := mem.Partition("s", 1)
	waiting := incremental(2)
	waiting.MaxWaitMillis = 10_000
	done := make(chan *kmsg.FetchResponse, 1)
	go func() {
		resp, _ := client.roundTrip(waiting)
		done <- resp.(*kmsg.FetchResponse)
	}()
	fetchTestEventually(t, 10*time.Second, "waiting", func() bool { return stats.waiting.Load() > 0 })
	fetchTestProduce(t, p1, "c")
	resp = <-done
	if rp := fetchTestOnly(t, resp); rp.Partition != 1 || rp.HighWatermark != 3 || len(fetchTestBatches(t, rp.RecordBatches)) != 1 {
		t.Fatalf("woken incremental: partition %d HW %d", rp.Partition, rp.HighWatermark)
	}
	// Forget partition 0; a produce there is not answered, while a new
	// offset for partition 1 is.
	forget := incremental(3, at(1, 3))
	forget.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "s", TopicID: info.ID, Partitions: []int32{0}}}
	resp = client.fetch(forget)
	if len(resp.Topics) != 0 {
		t.Fatalf("after forgetting: partitions %v, want none", fetchTestPartitions(resp))
	}
	p0, _ := mem.Partition("s", 0)
	fetchTestProduce(t, p0, "d")
	if resp = client.fetch(incremental(4)); len(resp.Topics) != 0 {
		t.Fatalf("produce to a forgotten partition: answered %v", fetchTestPartitions(resp))
	}
	// Session errors: wrong epoch (the session survives), another ID,
	// names instead of IDs.
	if resp = client.fetch(incremental(9)); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(resp.Topics) != 0 {
		t.Fatalf("wrong epoch: error %d", resp.ErrorCode)
	}
	if resp = client.fetch(incremental(5)); resp.ErrorCode != 0 || resp.SessionID != id {
		t.Fatalf("right epoch after a wrong one: error %d, session %d", resp.ErrorCode, resp.SessionID)
	}
	unknown := incremental(6)
	unknown.SessionID = id + 1
	if resp = client.fetch(unknown); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code || resp.SessionID != 0 {
		t.Fatalf("unknown session: error %d, session %d", resp.ErrorCode, resp.SessionID)
	}
	byName := incremental(6)
	byName.Version = 12
	if resp = client.fetch(byName); resp.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("v12 on a v18 session: error %d", resp.ErrorCode)
	}
	// Epoch -1 closes the session and is served sessionless.
	closing := incremental(-1, at(2, 0))
	if resp = client.fetch(closing); resp.ErrorCode != 0 || resp.SessionID != 0 || fmt.Sprint(fetchTestPartitions(resp)) != "[2]" {
		t.Fatalf("closing: error %d, session %d, partitions %v", resp.ErrorCode, resp.SessionID, fetchTestPartitions(resp))
	}
	if resp = client.fetch(incremental(6)); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("after closing: error %d", resp.ErrorCode)
	}
	if got := server.sessions.count(); got != 0 {
		t.Fatalf("%d sessions open, want 0", got)
	}
	if stats.full.Load() != 1 || stats.incremental.Load() != 5 || stats.sessionErrors.Load() != 4 {
		t.Fatalf("fetches: %d full, %d incremental, %d errors", stats.full.Load(), stats.incremental.Load(), stats.sessionErrors.Load())
	}
}

// An incremental session does not read a partition that cannot answer
// anything new: its last read found nothing at the end of what a reader
// may read, no request named it since, and its Changed channel is open.
// A partition a byte limit held back, one produced to, and one a request
// names again are read.
func TestFetchSessionSkipsQuietPartitions(t *testing.T) {
	mem := newMemBackend()
	addr, _ := startFetchServer(t, mem, nil, nil)
	info := fetchTestTopic(t, mem, "q", 4, []string{"a", "b"})
	client := dialFetchTest(t, addr)
	partitions := make([]*memPartition, 4)
	for i := range partitions {
		p, _ := mem.Partition("q", int32(i))
		partitions[i] = p.(*memPartition)
	}
	reads := func() []int {
		out := make([]int, len(partitions))
		for i, p := range partitions {
			p.mu.Lock()
			out[i], p.reads = p.reads, 0
			p.mu.Unlock()
		}
		return out
	}
	full := fetchTestRequest(18, info, at(0, 0), at(1, 2), at(2, 2), at(3, 2))
	full.SessionEpoch = 0
	full.MaxBytes = 1 // partition 0's batch only: no room left for the others (but they have nothing)
	resp := client.fetch(full)
	id := resp.SessionID
	incremental := func(epoch int32, parts ...fetchTestPart) *kmsg.FetchResponse {
		req := fetchTestRequest(18, info, parts...)
		req.SessionID, req.SessionEpoch = id, epoch
		return client.fetch(req)
	}
	if got := fmt.Sprint(reads()); got != "[1 1 1 1]" {
		t.Fatalf("full fetch read %s, want every partition once", got)
	}
	// Partition 0 sent its records: it is read again; 1-3 are quiet.
	incremental(1, at(0, 2))
	if got := fmt.Sprint(reads()); got != "[1 0 0 0]" {
		t.Fatalf("incremental naming partition 0 read %s, want only partition 0", got)
	}
	if resp = incremental(2); len(resp.Topics) != 0 || fmt.Sprint(reads()) != "[0 0 0 0]" {
		t.Fatalf("idle incremental answered %v, read %v; want nothing and no read", fetchTestPartitions(resp), reads())
	}
	fetchTestProduce(t, partitions[2], "c")
	if resp = incremental(3); fmt.Sprint(fetchTestPartitions(resp)) != "[2]" {
		t.Fatalf("after a produce to partition 2: answered %v", fetchTestPartitions(resp))
	}
	if got := fmt.Sprint(reads()); got != "[0 0 1 0]" {
		t.Fatalf("after a produce to partition 2: read %s, want only partition 2", got)
	}
	// Partition 2 sent records at offset 2: it stays awake until a request
	// moves it past them.
	incremental(4, at(2, 3))
	incremental(5)
	if got := fmt.Sprint(reads()); got != "[0 0 1 0]" {
		t.Fatalf("after moving partition 2 on: read %s, want it once, then quiet", got)
	}

	// A byte limit that holds a partition's records back leaves it awake.
	held := fetchTestTopic(t, mem, "held", 2, []string{"x"})
	other := dialFetchTest(t, addr)
	req := fetchTestRequest(18, held, at(0, 0), at(1, 0))
	req.SessionEpoch, req.MaxBytes = 0, 1
	resp = other.fetch(req)
	if fmt.Sprint(fetchTestPartitions(resp)) != "[0 1]" || len(resp.Topics[0].Partitions[1].RecordBatches) != 0 {
		t.Fatalf("full fetch with MaxBytes 1: %v", fetchTestPartitions(resp))
	}
	next := fetchTestRequest(18, held, at(0, 1))
	next.SessionID, next.SessionEpoch = resp.SessionID, 1
	resp = other.fetch(next)
	if rp := fetchTestOnly(t, resp); rp.Partition != 1 || len(fetchTestBatches(t, rp.RecordBatches)) != 1 {
		t.Fatalf("partition 1, held back by MaxBytes, answered %v", fetchTestPartitions(resp))
	}
}

// Partitions that returned records move to the end of the session, so a
// response bound by MaxBytes reaches every partition in turn.
func TestFetchSessionRotation(t *testing.T) {
	mem := newMemBackend()
	addr, _ := startFetchServer(t, mem, nil, nil)
	info := fetchTestTopic(t, mem, "r", 3, []string{"a"}, []string{"b"}, []string{"c"})
	client := dialFetchTest(t, addr)
	full := fetchTestRequest(13, info, at(0, 0), at(1, 0), at(2, 0))
	full.SessionEpoch, full.MaxBytes = 0, 1
	resp := client.fetch(full)
	offsets := map[int32]int64{}
	var order []int32
	for epoch := int32(1); epoch <= 6; epoch++ {
		withData := -1
		for _, rp := range resp.Topics[0].Partitions {
			if batches := fetchTestBatches(t, rp.RecordBatches); len(batches) > 0 {
				withData = int(rp.Partition)
				offsets[rp.Partition] = int64(batches[0].NextOffset())
			}
		}
		order = append(order, int32(withData))
		req := fetchTestRequest(13, info, at(int32(withData), offsets[int32(withData)]))
		req.SessionID, req.SessionEpoch, req.MaxBytes = resp.SessionID, epoch, 1
		resp = client.fetch(req)
	}
	if fmt.Sprint(order) != "[0 1 2 0 1 2]" {
		t.Fatalf("partitions with data, fetch by fetch: %v", order)
	}
}

// Sessions are bounded (least recently used evicted) and dropped with
// their connection.
func TestFetchSessionBounds(t *testing.T) {
	mem := newMemBackend()
	addr, server := startFetchServer(t, mem, nil, func(s *Server) { s.sessions.sessionsMax, s.sessions.partitionsMax = 2, 5 })
	info := fetchTestTopic(t, mem, "b", 3, []string{"a"})
	client := dialFetchTest(t, addr)
	open := func(parts ...fetchTestPart) int32 {
		req := fetchTestRequest(18, info, parts...)
		req.SessionEpoch = 0
		return client.fetch(req).SessionID
	}
	use := func(id, epoch int32, parts ...fetchTestPart) int16 {
		req := fetchTestRequest(18, info, parts...)
		req.SessionID, req.SessionEpoch = id, epoch
		return client.fetch(req).ErrorCode
	}
	first, second := open(at(0, 0)), open(at(1, 0))
	if code := use(first, 1); code != 0 {
		t.Fatalf("first session: error %d", code)
	}
	third := open(at(2, 0)) // evicts second, the least recently used
	if use(second, 1) != kerr.FetchSessionIDNotFound.Code || use(first, 2) != 0 || use(third, 1) != 0 {
		t.Fatal("the least recently used session was not the one evicted")
	}
	// 2 partitions in 2 sessions; a session of 5 (unknown partitions
	// count too) evicts both.
	fourth := open(at(0, 0), at(1, 0), at(2, 0), at(3, 0), at(4, 0))
	if fourth == 0 || server.sessions.count() != 1 {
		t.Fatalf("session of 5 partitions: ID %d, %d sessions", fourth, server.sessions.count())
	}
	// Too big for the budget: served sessionless, evicting nothing.
	if id := open(at(0, 0), at(1, 0), at(2, 0), at(3, 0), at(4, 0), at(5, 0)); id != 0 || server.sessions.count() != 1 {
		t.Fatalf("a session of 6 partitions (budget 5): ID %d, %d sessions", id, server.sessions.count())
	}
	// Growing past the budget closes the session.
	if code := use(fourth, 1, at(0, 1), at(1, 1)); code != 0 {
		t.Fatalf("updating 2 of 5: error %d", code)
	}
	if code := use(fourth, 2, at(5, 0)); code != kerr.FetchSessionIDNotFound.Code || server.sessions.count() != 0 {
		t.Fatalf("growing to 6: error %d, %d sessions; want FETCH_SESSION_ID_NOT_FOUND, none", code, server.sessions.count())
	}
	// A closed connection takes its sessions along.
	open(at(0, 0))
	if server.sessions.count() != 1 {
		t.Fatalf("%d sessions, want 1", server.sessions.count())
	}
	client.nc.Close()
	fetchTestEventually(t, 10*time.Second, "dropping the closed connection's sessions", func() bool { return server.sessions.count() == 0 })
}

// Long polls: MinBytes not reached waits for MaxWait; a change to any of
// many partitions (beyond the inline select) wakes the wait; the server's
// end ends it.
func TestFetchLongPoll(t *testing.T) {
	mem := newMemBackend()
	addr, server := startFetchServer(t, mem, nil, nil)
	const partitions = 20
	info := fetchTestTopic(t, mem, "lp", partitions, []string{"a"})
	client := dialFetchTest(t, addr)
	var parts []fetchTestPart
	for i := range int32(partitions) {
		parts = append(parts, at(i, 1))
	}

	req := fetchTestRequest(18, info, parts...)
	req.MaxWaitMillis, req.MinBytes = 200, 1
	start := time.Now()
	resp := client.fetch(req)
	if elapsed := time.Since(start); elapsed < 200*time.Millisecond || len(fetchTestPartitions(resp)) != partitions {
		t.Fatalf("nothing to read: answered after %v with %d partitions; want >= 200ms, all", elapsed, len(fetchTestPartitions(resp)))
	}

	req.MaxWaitMillis = 20_000
	done := make(chan *kmsg.FetchResponse, 1)
	go func() {
		resp, _ := client.roundTrip(req)
		done <- resp.(*kmsg.FetchResponse)
	}()
	fetchTestEventually(t, 10*time.Second, "waiting", func() bool { return server.sessions.stats.waiting.Load() > 0 })
	last, _ := mem.Partition("lp", partitions-1)
	start = time.Now()
	fetchTestProduce(t, last, "b")
	resp = <-done
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Fatalf("woken after %v", elapsed)
	}
	var withData []int32
	for _, rp := range resp.Topics[0].Partitions {
		if len(rp.RecordBatches) > 0 {
			withData = append(withData, rp.Partition)
		}
	}
	if fmt.Sprint(withData) != fmt.Sprint([]int32{partitions - 1}) {
		t.Fatalf("partitions with records: %v", withData)
	}
	fetchTestEventually(t, 10*time.Second, "done waiting", func() bool { return server.sessions.stats.waiting.Load() == 0 })
}

// MinBytes: a long poll answers once enough bytes arrived, not at the
// first append.
func TestFetchMinBytes(t *testing.T) {
	mem := newMemBackend()
	addr, server := startFetchServer(t, mem, nil, nil)
	info := fetchTestTopic(t, mem, "mb", 1)
	p, _ := mem.Partition("mb", 0)
	fetchTestProduce(t, p, "a")
	read, _ := p.Read(0, 1<<20, ReadUncommitted, true)
	batchBytes := int32(read.Records.Length)
	client := dialFetchTest(t, addr)
	req := fetchTestRequest(18, info, at(0, 0))
	req.MaxWaitMillis, req.MinBytes = 20_000, 3*batchBytes
	done := make(chan *kmsg.FetchResponse, 1)
	go func() {
		resp, _ := client.roundTrip(req)
		done <- resp.(*kmsg.FetchResponse)
	}()
	// Each wait that begins after a produce proves the poll re-read and
	// found too few bytes.
	waits := &server.sessions.stats.waits
	fetchTestEventually(t, 10*time.Second, "waiting with 1 batch", func() bool { return waits.Load() == 1 })
	fetchTestProduce(t, p, "b")
	fetchTestEventually(t, 10*time.Second, "waiting with 2 batches", func() bool { return waits.Load() == 2 })
	if len(done) > 0 {
		t.Fatal("answered with 2 batches, MinBytes is 3")
	}
	fetchTestProduce(t, p, "c")
	if batches := fetchTestBatches(t, fetchTestOnly(t, <-done).RecordBatches); len(batches) != 3 {
		t.Fatalf("answered with %d batches, want 3", len(batches))
	}
}
