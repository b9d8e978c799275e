package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	codecRecordsPerTopic = 18000 // x 5 codecs, + plainRecords = 100k
	plainRecords         = 10000
	codecPartitions      = 4
	survivorRecords      = 100 // produced by one idempotent client on each side of the kill
	testDeadline         = 5 * time.Minute
)

var codecs = []struct {
	name      string
	codec     kgo.CompressionCodec
	attribute int8 // the batch attribute's compression bits
}{
	{"none", kgo.NoCompression(), 0},
	{"gzip", kgo.GzipCompression(), 1},
	{"snappy", kgo.SnappyCompression(), 2},
	{"lz4", kgo.Lz4Compression(), 3},
	{"zstd", kgo.ZstdCompression(), 4},
}

// newClient is a kgo client of the server at addr that partitions by
// Record.Partition and gives up on a record or request in bounded time.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		seeds(addr),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(30 * time.Second),
		kgo.RetryTimeout(10 * time.Second),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // kgo's default is snappy; a later option overrides
	}
	client, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	t.Cleanup(client.Close)
	return client
}

func newSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return seed
}

// TestKgoCodecsSurviveKill: 100k records in 6 topics of 4 partitions, one
// topic per codec from idempotent producers plus one from a plain
// (non-idempotent, acks=all) producer; everything acknowledged is consumed
// back with its offsets, is stored with the producer's codec, and is
// identical byte for byte after kill -9 and a restart, and after SIGTERM
// and a restart. Offsets continue where they were.
func TestKgoCodecsSurviveKill(t *testing.T) {
	t.Parallel()
	seed := newSeed(t)
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	topics := map[string]int32{"plain": codecPartitions}
	for _, c := range codecs {
		topics["codec-"+c.name] = codecPartitions
	}
	createTopics(ctx, t, s.addr, topics)
	var tps []topicPartition
	for topic, partitions := range topics {
		for p := range partitions {
			tps = append(tps, topicPartition{topic, p})
		}
	}
	acked := newLedger()
	maker := newRecordMaker(seed)
	for _, c := range codecs {
		t.Run("produce/"+c.name, func(t *testing.T) {
			client := newClient(t, s.addr, kgo.ProducerBatchCompression(c.codec))
			produceRoundRobin(ctx, t, client, maker, "codec-"+c.name, codecRecordsPerTopic, acked)
		})
	}
	t.Run("produce/non-idempotent", func(t *testing.T) {
		client := newClient(t, s.addr, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()))
		produceRoundRobin(ctx, t, client, maker, "plain", plainRecords, acked)
	})
	// One idempotent producer lives across the kill (same address after
	// the restart): its sequence numbers go on where they were.
	survivor, survivorAddress := newClient(t, s.addr), s.addr
	survivorTopic := topicPartition{"codec-none", 0}
	t.Run("produce/survivor-before-kill", func(t *testing.T) {
		produceTo(ctx, t, survivor, maker, survivorTopic, survivorRecords, acked)
	})
	t.Logf("%d records acknowledged", acked.count())
	checkDenseOffsets(t, acked.sorted())

	t.Run("consume", func(t *testing.T) { consumeExactly(ctx, t, s.addr, kgo.ReadUncommitted(), acked.sorted()) })
	before := readAll(ctx, t, s.addr, tps)
	t.Run("stored", func(t *testing.T) { checkStored(t, before, acked.sorted()) })

	s.kill()
	s.start()
	t.Run("after-kill/stored", func(t *testing.T) { compareStored(t, "after kill -9", before, readAll(ctx, t, s.addr, tps)) })
	t.Run("after-kill/consume", func(t *testing.T) { consumeExactly(ctx, t, s.addr, kgo.ReadUncommitted(), acked.sorted()) })
	t.Run("after-kill/produce", func(t *testing.T) {
		client := newClient(t, s.addr)
		next := newLedger()
		for _, tp := range sortedPartitions(before) {
			produceTo(ctx, t, client, maker, tp, 1, next)
		}
		for tp, records := range next.sorted() {
			if got, want := records[0].Offset, before[tp].highWatermark; got != want {
				t.Errorf("%s: first offset after restart %d, want the high watermark before the kill, %d", tp, got, want)
			}
			acked.add(records[0])
		}
	})
	t.Run("after-kill/survivor", func(t *testing.T) {
		if s.addr != survivorAddress {
			t.Skipf("restarted on %s, not the survivor's %s", s.addr, survivorAddress)
		}
		produceTo(ctx, t, survivor, maker, survivorTopic, survivorRecords, acked)
	})
	checkDenseOffsets(t, acked.sorted())
	t.Run("after-kill/consume-all", func(t *testing.T) { consumeExactly(ctx, t, s.addr, kgo.ReadUncommitted(), acked.sorted()) })

	beforeStop := readAll(ctx, t, s.addr, tps)
	s.stop()
	s.start()
	t.Run("after-stop/stored", func(t *testing.T) { compareStored(t, "after SIGTERM", beforeStop, readAll(ctx, t, s.addr, tps)) })
	s.stop()
}

// produceRoundRobin produces count records to topic's partitions in turn.
func produceRoundRobin(ctx context.Context, t *testing.T, client *kgo.Client, maker *recordMaker, topic string, count int, acked *ledger) {
	t.Helper()
	records := make([]*kgo.Record, count)
	for i := range records {
		records[i] = maker.record(topic, int32(i%codecPartitions), i)
	}
	if err := produceAll(ctx, client, records, acked); err != nil {
		t.Fatal(err)
	}
}

func produceTo(ctx context.Context, t *testing.T, client *kgo.Client, maker *recordMaker, tp topicPartition, count int, acked *ledger) {
	t.Helper()
	records := make([]*kgo.Record, count)
	for i := range records {
		records[i] = maker.record(tp.topic, tp.partition, i)
	}
	if err := produceAll(ctx, client, records, acked); err != nil {
		t.Fatal(err)
	}
}

// checkDenseOffsets requires offsets 0, 1, 2, ... in each partition (no
// transactions: no control batches).
func checkDenseOffsets(t *testing.T, byPartition map[topicPartition][]*kgo.Record) {
	t.Helper()
	for _, tp := range sortedPartitions(byPartition) {
		for i, r := range byPartition[tp] {
			if r.Offset != int64(i) {
				t.Errorf("%s: acknowledged record %d has offset %d (duplicate or gap)", tp, i, r.Offset)
				break
			}
		}
	}
}

// checkStored checks the raw partitions against the acknowledged records:
// the high watermark is right after the last one (so nothing else is
// there), and every data batch of topic codec-X is compressed with X or
// not at all (kgo sends a batch uncompressed when compressing does not
// shrink it), most of them with X.
func checkStored(t *testing.T, stored map[topicPartition]storedPartition, acked map[topicPartition][]*kgo.Record) {
	t.Helper()
	for _, tp := range sortedPartitions(stored) {
		p, records := stored[tp], acked[tp]
		if want := int64(len(records)); p.highWatermark != want || p.lastStableOffset != want || p.logStartOffset != 0 {
			t.Errorf("%s: logStart %d, highWatermark %d, lastStable %d; want 0, %d, %d", tp, p.logStartOffset, p.highWatermark, p.lastStableOffset, want, want)
		}
		want := int8(0)
		for _, c := range codecs {
			if tp.topic == "codec-"+c.name {
				want = c.attribute
			}
		}
		for codec, batches := range p.codecs {
			if codec != want && codec != 0 {
				t.Errorf("%s: %d batches with codec %d, want %d", tp, batches, codec, want)
			}
		}
		if p.codecs[want]*2 < p.batchCount {
			t.Errorf("%s: %d of %d batches with codec %d (%v)", tp, p.codecs[want], p.batchCount, want, p.codecs)
		}
		if len(p.markers) != 0 || p.transactional != 0 {
			t.Errorf("%s: control batches %v, %d transactional batches: none were produced", tp, p.markers, p.transactional)
		}
	}
}
