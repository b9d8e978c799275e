package e2e

// Differential cases of the topic configs that change what a Produce
// stores (Kafka's LogValidator): compression.type, whose codec a batch
// sent in another is rebuilt in, and message.timestamp.type=LogAppendTime,
// which stamps the batch. Each topic gets a Produce, then a Fetch of what
// was stored; the fetched batches are compared field by field, their
// records as franz-go's consumer reads them, because the compressed
// bytes of Kafka's Java encoders and ours legitimately differ, and so do
// the two clocks' append times. Topic names: diff-format-*.

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	registerDiffCases("ProduceFormat", formatDiffCases())
}

// formatSentAt is the create time of every record sent: one clock for
// both servers, so that create timestamps compare.
var formatSentAt = time.Now().UnixMilli()

// formatBatch is an idempotent producer's batch (producerID, epoch 0,
// sequence 0) of three records with keys, values, headers and a null
// value, compressed in codec with mirrord's encoder (so Kafka's decoders
// read our encoders' bytes).
func formatBatch(producerID int64, codec rb.Codec) func() []byte {
	return func() []byte {
		var section []byte
		for i, r := range []kmsg.Record{
			{Key: []byte("k0"), Value: []byte(strings.Repeat("value zero ", 20)), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}},
			{TimestampDelta64: 5, Key: []byte("k1"), Value: nil, Headers: []kmsg.Header{{Key: "a", Value: nil}, {Key: "b", Value: []byte{}}}},
			{TimestampDelta64: 2, Key: nil, Value: []byte("v2")},
		} {
			r.OffsetDelta = int32(i)
			body := r.AppendTo(nil)[1:] // length 0 takes one byte
			r.Length = int32(len(body))
			section = r.AppendTo(section)
		}
		b := rb.Batch(make([]byte, rb.HeaderSize+len(section)))
		copy(b[rb.HeaderSize:], section)
		rb.PutHeader(b, rb.Header{LastOffsetDelta: 2, BaseTimestamp: formatSentAt, MaxTimestamp: formatSentAt + 5,
			ProducerID: producerID, BaseSequence: 0, RecordCount: 3})
		if codec == rb.CodecNone {
			return b
		}
		out, _, err := records.Recompress(nil, nil, b, records.Compression{Codec: codec}, -1, 0)
		if err != nil {
			panic(err)
		}
		return out
	}
}

// formatFetch is a Fetch v12 of partition 0 of topic from offset 0.
func formatFetch(topic string) func(diffServer) kmsg.Request {
	return func(diffServer) kmsg.Request {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, 1<<20
		req.SessionID, req.SessionEpoch = 0, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, 0, 1<<20
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
}

// sameAppendTimes replaces a Produce answer's append time, after checking
// it is the server's clock at the append (not before the records were
// made, not in the future).
func sameAppendTimes(t *testing.T, fromKafka, fromMirrord kmsg.Response) {
	sameProduceAnswers(t, fromKafka, fromMirrord)
	for _, resp := range []kmsg.Response{fromKafka, fromMirrord} {
		for i := range resp.(*kmsg.ProduceResponse).Topics {
			for j := range resp.(*kmsg.ProduceResponse).Topics[i].Partitions {
				p := &resp.(*kmsg.ProduceResponse).Topics[i].Partitions[j]
				p.LogAppendTime = normaliseAppendTime(t, p.LogAppendTime)
			}
		}
	}
}

// normaliseAppendTime is -2 for a time between formatSentAt and now,
// else the time itself (which then differs, or is -1 on both).
func normaliseAppendTime(t *testing.T, at int64) int64 {
	if at >= formatSentAt && at <= time.Now().UnixMilli() {
		return -2
	}
	if at != -1 {
		t.Logf("append time %d outside [%d, now]", at, formatSentAt)
	}
	return at
}

// sameStoredBatches replaces each fetched partition's records with a
// description of its batches and of the records franz-go reads from
// them: every header field but the CRC and length (which cover the
// compressed bytes), append times normalised as above.
func sameStoredBatches(t *testing.T, fromKafka, fromMirrord kmsg.Response) {
	for _, resp := range []kmsg.Response{fromKafka, fromMirrord} {
		fetch := resp.(*kmsg.FetchResponse)
		for i := range fetch.Topics {
			for j := range fetch.Topics[i].Partitions {
				p := &fetch.Topics[i].Partitions[j]
				p.RecordBatches = []byte(describeStored(t, fetch.Topics[i].Topic, p))
			}
		}
	}
}

func describeStored(t *testing.T, topic string, p *kmsg.FetchResponseTopicPartition) string {
	var out strings.Builder
	for data := p.RecordBatches; len(data) >= rb.HeaderSize; {
		size := 12 + int(int32(binary.BigEndian.Uint32(data[8:])))
		if size > len(data) {
			break
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(data[:size]); err != nil {
			fmt.Fprintf(&out, "batch: %v\n", err)
			break
		}
		data = data[size:]
		maxTimestamp := b.MaxTimestamp - formatSentAt
		if b.Attributes&0x08 != 0 {
			maxTimestamp = normaliseAppendTime(t, b.MaxTimestamp)
		}
		fmt.Fprintf(&out, "batch offset %d last delta %d epoch %d codec %d logAppendTime %v transactional %v control %v producer %d/%d/%d records %d timestamps %d..%d\n",
			b.FirstOffset, b.LastOffsetDelta, b.PartitionLeaderEpoch, b.Attributes&0x07, b.Attributes&0x08 != 0, b.Attributes&0x10 != 0,
			b.Attributes&0x20 != 0, b.ProducerID, b.ProducerEpoch, b.FirstSequence, b.NumRecords, b.FirstTimestamp-formatSentAt, maxTimestamp)
	}
	partition := *p
	fetched, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: p.Partition}, &partition, kgo.DefaultDecompressor(), nil)
	if fetched.Err != nil {
		fmt.Fprintf(&out, "franz-go: %v\n", fetched.Err)
	}
	for _, r := range fetched.Records {
		timestamp := r.Timestamp.UnixMilli() - formatSentAt
		if r.Attrs.TimestampType() == 1 {
			timestamp = normaliseAppendTime(t, r.Timestamp.UnixMilli())
		}
		fmt.Fprintf(&out, "record %d key %q (null %v) value %q (null %v) headers %v timestamp %d type %d\n", r.Offset, r.Key, r.Key == nil,
			r.Value, r.Value == nil, r.Headers, timestamp, r.Attrs.TimestampType())
	}
	return out.String()
}

// formatDiffCases: for each compression.type a topic, a batch sent in
// another codec, and the stored batch fetched; LogAppendTime in place,
// compressed in place and rebuilt; a CreateTopics refusal of each bad
// value. Kafka 4.4 no longer refuses a Fetch below v10 of a zstd topic
// (UNSUPPORTED_COMPRESSION_TYPE before 4.0): the case pins that.
func formatDiffCases() []diffCase {
	var cases []diffCase
	add := func(name string, configs map[string]string, producerID int64, sent rb.Codec) {
		topic := "diff-format-" + name
		cases = append(cases,
			diffCase{name: "v12 " + sent.String() + " to " + name, version: 12, setup: produceTopic(topic, configs),
				request: produceRawTo(topic, -1, formatBatch(producerID, sent)), normalise: sameAppendTimes},
			diffCase{name: "Fetch v12 of " + name, version: 12, request: formatFetch(topic), normalise: sameStoredBatches})
	}
	add("uncompressed", map[string]string{"compression.type": "uncompressed"}, 9001, rb.CodecZstd)
	add("gzip", map[string]string{"compression.type": "gzip", "compression.gzip.level": "9"}, 9002, rb.CodecNone)
	add("snappy", map[string]string{"compression.type": "snappy"}, 9003, rb.CodecLZ4)
	add("lz4", map[string]string{"compression.type": "lz4", "compression.lz4.level": "1"}, 9004, rb.CodecSnappy)
	add("zstd", map[string]string{"compression.type": "zstd", "compression.zstd.level": "-3"}, 9005, rb.CodecGzip)
	add("producer", map[string]string{"compression.type": "producer"}, 9006, rb.CodecSnappy)
	add("gzip-kept", map[string]string{"compression.type": "gzip"}, -1, rb.CodecGzip)
	add("append-time", map[string]string{"message.timestamp.type": "LogAppendTime"}, 9007, rb.CodecNone)
	add("append-time-lz4", map[string]string{"message.timestamp.type": "LogAppendTime"}, -1, rb.CodecLZ4)
	add("append-time-zstd", map[string]string{"message.timestamp.type": "LogAppendTime", "compression.type": "zstd"}, 9008, rb.CodecNone)
	cases = append(cases,
		diffCase{name: "v12 a negative timestamp to gzip", version: 12, setup: produceTopic("diff-format-negative", map[string]string{"compression.type": "gzip"}),
			request: produceRawTo("diff-format-negative", -1, func() []byte { return produceBatch(-5, []int64{0, 1}, nil) }), normalise: sameProduceAnswers},
		diffCase{name: "v12 a LogAppendTime batch to append-time", version: 12,
			request: produceRawTo("diff-format-append-time", -1, func() []byte {
				return produceBatch(formatSentAt, []int64{0, 1}, func(b []byte) []byte { b[22] |= 0x08; return b })
			}), normalise: sameAppendTimes},
		diffCase{name: "v12 far future to append-time", version: 12,
			request: produceRawTo("diff-format-append-time", -1, func() []byte { return produceBatch(formatSentAt+1e9, []int64{0}, nil) }), normalise: sameAppendTimes},
		diffCase{name: "v6 uncompressed to a zstd topic", version: 6,
			request: produceRawTo("diff-format-zstd", -1, func() []byte { return produceBatch(formatSentAt, []int64{0}, nil) }), normalise: sameProduceAnswers},
		// A compacted topic refuses records without a key (LogValidator.validateKey).
		diffCase{name: "v12 records without a key to a compacted topic", version: 12,
			setup:   produceTopic("diff-format-compact", map[string]string{"cleanup.policy": "compact"}),
			request: produceRawTo("diff-format-compact", -1, func() []byte { return produceBatch(formatSentAt, []int64{0, 1}, nil) }), normalise: sameProduceAnswers},
		diffCase{name: "Fetch v9 of a zstd topic", version: 9, request: formatFetch("diff-format-zstd"), normalise: sameStoredBatches},
		diffCase{name: "Fetch v10 of a zstd topic", version: 10, request: formatFetch("diff-format-zstd"), normalise: sameStoredBatches},
	)
	for _, bad := range []map[string]string{
		{"compression.type": "GZIP"}, {"compression.type": "brotli"}, {"compression.gzip.level": "0"}, {"compression.gzip.level": "10"},
		{"compression.lz4.level": "0"}, {"compression.lz4.level": "18"}, {"compression.zstd.level": "23"}, {"compression.zstd.level": "-131073"},
		{"message.timestamp.type": "logappendtime"},
	} {
		for key, value := range bad {
			cases = append(cases, diffCase{name: fmt.Sprintf("CreateTopics v4 %s=%s", key, value), version: 4,
				request: func(server diffServer) kmsg.Request { return produceTopic("diff-format-bad", bad)(server)[0] }})
		}
	}
	return cases
}
