package netio

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/mirrord/mirrord/recordbatch"
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
