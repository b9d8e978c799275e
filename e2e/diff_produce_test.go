package e2e

// Differential cases of Produce, and of the epochs a topic nothing was
// written to answers (ListOffsets, OffsetForLeaderEpoch); see
// diff_test.go. Topic names: diff-produce-*. Each case writes to a topic
// of its own, so that base offsets compare.

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	registerDiffCases("Produce", produceDiffCases)
}

// produceBatch is a v2 batch of records with the given timestamp
// deltas and one-byte values, base offset 0, no producer ID, as a client
// sends it; edit changes it before its CRC is computed.
func produceBatch(timestamp int64, deltas []int64, edit func([]byte) []byte) []byte {
	b := make([]byte, 61)
	for i, delta := range deltas {
		body := []byte{0}
		body = binary.AppendVarint(body, delta)
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, -1) // null key
		body = binary.AppendVarint(body, 1)
		body = append(body, 'v', 0) // the value, no headers
		b = append(binary.AppendVarint(b, int64(len(body))), body...)
	}
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(len(deltas)-1))
	binary.BigEndian.PutUint64(b[27:], uint64(timestamp))
	binary.BigEndian.PutUint64(b[35:], uint64(timestamp+deltas[len(deltas)-1]))
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer ID -1
	binary.BigEndian.PutUint16(b[51:], ^uint16(0))
	binary.BigEndian.PutUint32(b[53:], ^uint32(0))
	binary.BigEndian.PutUint32(b[57:], uint32(len(deltas)))
	if edit != nil {
		b = edit(b)
	}
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// produceRawTo is a Produce of records to partition 0 of topic.
func produceRawTo(topic string, acks int16, records func() []byte) func(diffServer) kmsg.Request {
	return func(diffServer) kmsg.Request {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = acks, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = records()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
}

func nowMillis() int64 { return time.Now().UnixMilli() }

func recent(deltas ...int64) func() []byte {
	return func() []byte { return produceBatch(nowMillis(), deltas, nil) }
}

func edited(edit func([]byte) []byte) func() []byte {
	return func() []byte { return produceBatch(nowMillis(), []int64{0, 1, 2}, edit) }
}

// produceTopic creates one topic of one partition before a case.
func produceTopic(name string, configs map[string]string) func(diffServer) []kmsg.Request {
	topic := createTopic{name: name, partitions: 1, replicas: 1, configs: map[string]*string{}}
	for k, v := range configs {
		topic.configs[k] = &v
	}
	build := createTopicsRequest(false, topic)
	return func(server diffServer) []kmsg.Request {
		req := build(server)
		req.SetVersion(4) // v5+ answers the configs, which are CreateTopics' own cases
		return []kmsg.Request{req}
	}
}

// sameProduceAnswers makes the texts that name the servers' clocks
// equal: the message of a record refused for its timestamp names the
// window around each server's clock.
func sameProduceAnswers(_ *testing.T, fromKafka, fromMirrord kmsg.Response) {
	for _, resp := range []kmsg.Response{fromKafka, fromMirrord} {
		for i := range resp.(*kmsg.ProduceResponse).Topics {
			topic := &resp.(*kmsg.ProduceResponse).Topics[i]
			for j := range topic.Partitions {
				p := &topic.Partitions[j]
				normaliseString(p.ErrorMessage, diffMessage)
				for k := range p.ErrorRecords {
					normaliseString(p.ErrorRecords[k].ErrorMessage, diffMessage)
				}
			}
		}
	}
}

var produceDiffCases = []diffCase{
	{name: "v12 one batch", version: 12, setup: produceTopic("diff-produce-ok", nil),
		request: produceRawTo("diff-produce-ok", -1, recent(0, 1)), normalise: sameProduceAnswers},
	{name: "v12 over max.message.bytes", version: 12, setup: produceTopic("diff-produce-small", map[string]string{"max.message.bytes": "80"}),
		request: produceRawTo("diff-produce-small", -1, recent(0, 1, 2, 3, 4, 5)), normalise: sameProduceAnswers},
	{name: "v12 over message.max.bytes", version: 12, setup: produceTopic("diff-produce-big", nil),
		request: produceRawTo("diff-produce-big", 1, edited(func(b []byte) []byte {
			value := make([]byte, 1048588)
			body := append(binary.AppendVarint([]byte{0, 0, 0, 1}, int64(len(value))), value...)
			body = append(body, 0)
			b = append(binary.AppendVarint(b[:61], int64(len(body))), body...)
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
			binary.BigEndian.PutUint32(b[23:], 0)
			binary.BigEndian.PutUint32(b[57:], 1)
			return b
		})), normalise: sameProduceAnswers},
	{name: "v12 timestamps out of the topic's window", version: 12,
		setup:   produceTopic("diff-produce-ts", map[string]string{"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"}),
		request: produceRawTo("diff-produce-ts", -1, recent(0, -600000, 600000, 1000)), normalise: sameProduceAnswers},
	{name: "v12 a timestamp past the default after.max.ms", version: 12, setup: produceTopic("diff-produce-future", nil),
		request: produceRawTo("diff-produce-future", -1, recent(0, 2*3600000)), normalise: sameProduceAnswers},
	{name: "v7 timestamps out of the topic's window", version: 7,
		setup:   produceTopic("diff-produce-ts7", map[string]string{"message.timestamp.after.max.ms": "60000"}),
		request: produceRawTo("diff-produce-ts7", -1, recent(0, 600000)), normalise: sameProduceAnswers},
	{name: "v12 magic 1", version: 12, setup: produceTopic("diff-produce-magic", nil),
		request: produceRawTo("diff-produce-magic", -1, edited(func(b []byte) []byte { b[16] = 1; return b })), normalise: sameProduceAnswers},
	{name: "v12 no records", version: 12, setup: produceTopic("diff-produce-empty", nil),
		request: produceRawTo("diff-produce-empty", -1, func() []byte { return []byte{} }), normalise: sameProduceAnswers},
	{name: "v12 truncated batch", version: 12, setup: produceTopic("diff-produce-cut", nil),
		request: produceRawTo("diff-produce-cut", -1, func() []byte { b := produceBatch(nowMillis(), []int64{0, 1}, nil); return b[:len(b)-3] }), normalise: sameProduceAnswers},
	{name: "v12 records truncated inside", version: 12, setup: produceTopic("diff-produce-inner", nil),
		request: produceRawTo("diff-produce-inner", -1, edited(func(b []byte) []byte {
			b = b[:len(b)-2]
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
			return b
		})), normalise: sameProduceAnswers},
	{name: "v12 record count above the records", version: 12, setup: produceTopic("diff-produce-count", nil),
		request: produceRawTo("diff-produce-count", -1, edited(func(b []byte) []byte { binary.BigEndian.PutUint32(b[57:], 4); return b })), normalise: sameProduceAnswers},
	{name: "v12 base offset 5", version: 12, setup: produceTopic("diff-produce-base", nil),
		request: produceRawTo("diff-produce-base", -1, edited(func(b []byte) []byte { binary.BigEndian.PutUint64(b, 5); return b })), normalise: sameProduceAnswers},
	{name: "v12 bad CRC", version: 12, setup: produceTopic("diff-produce-crc", nil),
		request: produceRawTo("diff-produce-crc", -1, func() []byte { b := produceBatch(nowMillis(), []int64{0}, nil); b[len(b)-1] ^= 1; return b }), normalise: sameProduceAnswers},
	{name: "v12 two batches", version: 12, setup: produceTopic("diff-produce-two", nil),
		request: produceRawTo("diff-produce-two", -1, func() []byte { b := produceBatch(nowMillis(), []int64{0}, nil); return append(b, b...) }), normalise: sameProduceAnswers},
	{name: "v12 acks 2", version: 12, setup: produceTopic("diff-produce-acks", nil),
		request: produceRawTo("diff-produce-acks", 2, recent(0)), normalise: sameProduceAnswers},
	{name: "v12 unknown topic", version: 12, request: produceRawTo("diff-produce-unknown", -1, recent(0)), normalise: sameProduceAnswers},
	{name: "ListOffsets v9 earliest of a new topic", version: 9, setup: produceTopic("diff-produce-fresh", nil),
		request: listOffsetsOf("diff-produce-fresh", -2)},
	{name: "ListOffsets v9 latest of a new topic", version: 9, request: listOffsetsOf("diff-produce-fresh", -1)},
	{name: "OffsetForLeaderEpoch v4 epoch 0 of a new topic", version: 4, request: offsetForLeaderEpochOf("diff-produce-fresh", 0)},
	{name: "OffsetForLeaderEpoch v4 epoch 1 of a new topic", version: 4, request: offsetForLeaderEpochOf("diff-produce-fresh", 1)},
}

func listOffsetsOf(topic string, timestamp int64) func(diffServer) kmsg.Request {
	return func(diffServer) kmsg.Request {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = timestamp, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
}

func offsetForLeaderEpochOf(topic string, epoch int32) func(diffServer) kmsg.Request {
	return func(diffServer) kmsg.Request {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.LeaderEpoch, rp.CurrentLeaderEpoch = epoch, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
}
