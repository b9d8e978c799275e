package e2e

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKgoRecompressed: an idempotent franz-go producer writes snappy
// batches to topics whose compression.type is another codec (and one
// with LogAppendTime); a franz-go consumer reads back the same keys,
// values and headers at dense offsets, stored in the topic's codec, with
// the producer's timestamps or, on the LogAppendTime topic, the node's.
func TestKgoRecompressed(t *testing.T) {
	t.Parallel()
	const recordsPerTopic = 300
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topics := []struct {
		name      string
		configs   map[string]*string
		codec     int8 // the stored batches' compression bits
		logAppend bool
	}{
		{"recompressed-gzip", map[string]*string{"compression.type": kadm.StringPtr("gzip")}, 1, false},
		{"recompressed-lz4", map[string]*string{"compression.type": kadm.StringPtr("lz4"), "compression.lz4.level": kadm.StringPtr("4")}, 3, false},
		{"recompressed-none", map[string]*string{"compression.type": kadm.StringPtr("uncompressed")}, 0, false},
		{"recompressed-zstd-append", map[string]*string{"compression.type": kadm.StringPtr("zstd"), "message.timestamp.type": kadm.StringPtr("LogAppendTime")}, 4, true},
	}
	admin := kadm.NewClient(newClient(t, s.addr))
	for _, topic := range topics {
		if _, err := admin.CreateTopic(ctx, 1, 1, topic.configs, topic.name); err != nil {
			t.Fatalf("create %s: %v", topic.name, err)
		}
	}
	producer := newClient(t, s.addr, kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.ProducerLinger(5*time.Millisecond))
	before := time.Now()
	want := map[topicPartition][]*kgo.Record{}
	for _, topic := range topics {
		tp := topicPartition{topic.name, 0}
		for i := range recordsPerTopic {
			r := &kgo.Record{Topic: topic.name, Key: fmt.Appendf(nil, "key-%d", i), Value: bytes.Repeat(fmt.Appendf(nil, "value %d ", i), 20),
				Headers: []kgo.RecordHeader{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}, {Key: "empty"}}, Timestamp: before.Add(-time.Duration(i) * time.Millisecond)}
			want[tp] = append(want[tp], r)
			producer.Produce(ctx, r, nil)
		}
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	counts := map[topicPartition]int{}
	for tp, records := range want {
		counts[tp] = len(records)
	}
	got := consume(ctx, t, s.addr, kgo.ReadUncommitted(), counts)
	for _, topic := range topics {
		tp := topicPartition{topic.name, 0}
		if len(got[tp]) != recordsPerTopic {
			t.Fatalf("%s: %d records, want %d", topic.name, len(got[tp]), recordsPerTopic)
		}
		for i, r := range got[tp] {
			w := want[tp][i]
			if r.Offset != int64(i) || !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || fmt.Sprint(r.Headers) != fmt.Sprint(w.Headers) {
				t.Fatalf("%s record %d: offset %d key %q headers %v, want %d %q %v", topic.name, i, r.Offset, r.Key, r.Headers, i, w.Key, w.Headers)
			}
			if r.Attrs.CompressionType() != uint8(topic.codec) {
				t.Fatalf("%s record %d: stored in codec %d, want %d", topic.name, i, r.Attrs.CompressionType(), topic.codec)
			}
			logAppend := r.Attrs.TimestampType() == 1
			switch {
			case logAppend != topic.logAppend:
				t.Fatalf("%s record %d: LogAppendTime %v, want %v", topic.name, i, logAppend, topic.logAppend)
			case logAppend && (r.Timestamp.Before(before.Truncate(time.Millisecond)) || r.Timestamp.After(after)):
				t.Fatalf("%s record %d: append time %v outside the produce [%v, %v]", topic.name, i, r.Timestamp, before, after)
			case !logAppend && r.Timestamp.UnixMilli() != w.Timestamp.UnixMilli():
				t.Fatalf("%s record %d: timestamp %v, produced %v", topic.name, i, r.Timestamp, w.Timestamp)
			}
		}
	}
}
