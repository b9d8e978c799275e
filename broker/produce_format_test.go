package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// formatNow is the partition's clock in these tests: the dataBatch
// timestamps are within the default window around it.
const formatNow = 1_700_000_001_000

// formatPartition is a partition of a topic with configs.
func formatPartition(t testing.TB, configs map[string]string) *Partition {
	t.Helper()
	p := testPartition(t)
	_, settings, err := (&Node{cfg: Config{Log: logstore.DefaultConfig()}}).parseTopicConfigs(configs)
	if err != nil {
		t.Fatal(err)
	}
	p.limits.Store(&settings.limits)
	p.now = func() time.Time { return time.UnixMilli(formatNow) }
	return p
}

// inCodec is batch with its records compressed in codec.
func inCodec(t testing.TB, batch []byte, codec rb.Codec) []byte {
	t.Helper()
	if codec == rb.CodecNone {
		return batch
	}
	out, _, err := records.Recompress(nil, nil, batch, records.Compression{Codec: codec}, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// stored is the batch the log holds at offset.
func stored(t *testing.T, p *Partition, offset rb.Offset) rb.Batch {
	t.Helper()
	data, err := p.log.BatchBytes(nil, offset)
	if err != nil {
		t.Fatal(err)
	}
	b, err := rb.Parse(data)
	if err != nil || b.Verify() != nil || b.BaseOffset() != offset {
		t.Fatalf("stored batch at %d: %v, or bad CRC, or base offset %d", offset, err, b.BaseOffset())
	}
	return b
}

// valuesOf reads the values of b's records.
func valuesOf(t *testing.T, b rb.Batch) [][]byte {
	t.Helper()
	section, err := records.Decompress(nil, b, 0)
	if err != nil {
		t.Fatal(err)
	}
	var values [][]byte
	for it := records.NewIter(section); it.Next(); {
		values = append(values, it.Record().Value)
	}
	return values
}

// TestProduceCompressionType sends an idempotent producer's batches in
// every codec to a topic of every compression.type and checks what the
// log stores: the topic's codec (the batch's for producer), the offsets
// the log assigned, the producer fields, the records; and that a retry of
// a recompressed batch is still recognised by its sequence.
func TestProduceCompressionType(t *testing.T) {
	codecs := []rb.Codec{rb.CodecNone, rb.CodecGzip, rb.CodecSnappy, rb.CodecLZ4, rb.CodecZstd}
	for _, topicType := range []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"} {
		for _, sent := range codecs {
			t.Run(topicType+"/"+sent.String(), func(t *testing.T) {
				p := formatPartition(t, map[string]string{"compression.type": topicType})
				want := sent
				if topicType != "producer" {
					want = compressionTypes[topicType]
				}
				first, second := inCodec(t, dataBatch(7, 2, 0, 3, false), sent), inCodec(t, dataBatch(7, 2, 3, 4, false), sent)
				for i, batch := range [][]byte{first, second} {
					result, err := produceTo(p, bytes.Clone(batch), "")
					if err != nil || result.BaseOffset != rb.Offset(3*i) || result.LogAppendTime != -1 {
						t.Fatalf("batch %d: %+v, %v; want base offset %d, no append time", i, result, err, 3*i)
					}
					b := stored(t, p, result.BaseOffset)
					sentBatch := rb.Batch(batch)
					if b.Codec() != want || b.ProducerID() != 7 || b.ProducerEpoch() != 2 || b.BaseSequence() != sentBatch.BaseSequence() ||
						b.RecordCount() != sentBatch.RecordCount() || b.LogAppendTime() || b.LeaderEpoch() != p.LeaderEpoch() {
						t.Fatalf("batch %d stored codec %s producer %d/%d/%d count %d, want %s 7/2/%d %d", i, b.Codec(), b.ProducerID(),
							b.ProducerEpoch(), b.BaseSequence(), b.RecordCount(), want, sentBatch.BaseSequence(), sentBatch.RecordCount())
					}
					if got, sentValues := valuesOf(t, b), valuesOf(t, sentBatch); fmt.Sprint(got) != fmt.Sprint(sentValues) {
						t.Fatalf("batch %d stored values %v, sent %v", i, got, sentValues)
					}
					if b.BaseTimestamp() != 1_700_000_000_000 || b.MaxTimestamp() != sentBatch.MaxTimestamp() {
						t.Fatalf("batch %d timestamps %d..%d, sent %d..%d", i, b.BaseTimestamp(), b.MaxTimestamp(), sentBatch.BaseTimestamp(), sentBatch.MaxTimestamp())
					}
				}
				retry, err := produceTo(p, bytes.Clone(second), "")
				if err != nil || retry.BaseOffset != 3 || p.log.LogEndOffset() != 7 {
					t.Fatalf("retry: %+v, %v, log end %d; want the first answer again and nothing appended", retry, err, p.log.LogEndOffset())
				}
			})
		}
	}
}

// TestProduceLogAppendTime: a LogAppendTime topic stamps each batch with
// the node's clock (attributes bit 3, maxTimestamp now, the producer's
// baseTimestamp and records), rebuilt or in place, answers that time,
// has no timestamp window, and refuses batches a producer marked
// LogAppendTime; a CreateTime topic answers -1.
func TestProduceLogAppendTime(t *testing.T) {
	const hour = 3_600_000
	farFuture := timedBatch(formatNow+10*hour, formatNow+11*hour)
	for _, tc := range []struct {
		name    string
		configs map[string]string
		batch   []byte
		codec   rb.Codec
	}{
		{"in place", map[string]string{"message.timestamp.type": "LogAppendTime"}, dataBatch(-1, -1, -1, 3, false), rb.CodecNone},
		{"in place compressed", map[string]string{"message.timestamp.type": "LogAppendTime"}, inCodec(t, dataBatch(-1, -1, -1, 3, false), rb.CodecLZ4), rb.CodecLZ4},
		{"rebuilt", map[string]string{"message.timestamp.type": "LogAppendTime", "compression.type": "zstd"}, dataBatch(5, 0, 0, 3, false), rb.CodecZstd},
		{"no window", map[string]string{"message.timestamp.type": "LogAppendTime", "message.timestamp.after.max.ms": "0"}, farFuture, rb.CodecNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := formatPartition(t, tc.configs)
			result, err := produceTo(p, bytes.Clone(tc.batch), "")
			if err != nil || result.LogAppendTime != formatNow {
				t.Fatalf("%+v, %v; want the append time %d", result, err, formatNow)
			}
			b := stored(t, p, 0)
			if !b.LogAppendTime() || b.MaxTimestamp() != formatNow || b.BaseTimestamp() != rb.Batch(tc.batch).BaseTimestamp() || b.Codec() != tc.codec {
				t.Fatalf("stored LogAppendTime %v max %d base %d codec %s; want true %d %d %s", b.LogAppendTime(), b.MaxTimestamp(),
					b.BaseTimestamp(), b.Codec(), formatNow, rb.Batch(tc.batch).BaseTimestamp(), tc.codec)
			}
			if fmt.Sprint(valuesOf(t, b)) != fmt.Sprint(valuesOf(t, tc.batch)) {
				t.Fatal("the records changed")
			}
			at, timestamp, _, err := p.ListOffset(formatNow, netio.ReadUncommitted)
			if err != nil || at != 0 || timestamp != formatNow {
				t.Fatalf("ListOffsets by the append time: offset %d timestamp %d, %v", at, timestamp, err)
			}
		})
	}

	marked := timedBatch(formatNow, formatNow+1)
	rb.Batch(marked).SetMaxTimestamp(true, formatNow)
	p := formatPartition(t, map[string]string{"message.timestamp.type": "LogAppendTime"})
	_, err := produceTo(p, marked, "")
	var refused *netio.RecordsError
	if !errors.Is(err, kerr.InvalidTimestamp) || !errors.As(err, &refused) || len(refused.Records) != 2 {
		t.Fatalf("a batch marked LogAppendTime: %v, want INVALID_TIMESTAMP for both records", err)
	}

	p = formatPartition(t, nil)
	if result, err := produceTo(p, dataBatch(-1, -1, -1, 1, false), ""); err != nil || result.LogAppendTime != -1 || stored(t, p, 0).LogAppendTime() {
		t.Fatalf("CreateTime: %+v, %v; want no append time, the batch unstamped", result, err)
	}
}

// TestProduceRecompressRefusals: a batch that grows past max.message.bytes
// when recompressed, and a record timestamp Kafka's builder refuses.
func TestProduceRecompressRefusals(t *testing.T) {
	big := rb.Append(nil, rb.Spec{BaseTimestamp: formatNow, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		Records: []rb.Record{{Value: make([]byte, 2000)}}})
	p := formatPartition(t, map[string]string{"compression.type": "uncompressed", "max.message.bytes": "500"})
	_, err := produceTo(p, inCodec(t, big, rb.CodecGzip), "")
	var refused *netio.RecordsError
	if !errors.Is(err, kerr.MessageTooLarge) || errors.As(err, &refused) || p.log.LogEndOffset() != 0 {
		t.Fatalf("grown past max.message.bytes: %v, want MESSAGE_TOO_LARGE without the log start offset", err)
	}

	negative := rb.Append(nil, rb.Spec{BaseTimestamp: -5, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: []rb.Record{{Value: []byte("v")}}})
	p = formatPartition(t, map[string]string{"compression.type": "gzip"})
	if _, err := produceTo(p, negative, ""); !errors.Is(err, kerr.UnknownServerError) || !errors.As(err, &refused) {
		t.Fatalf("negative timestamp recompressed: %v, want UNKNOWN_SERVER_ERROR with the log start offset", err)
	}
	p = formatPartition(t, nil)
	if _, err := produceTo(p, negative, ""); err != nil {
		t.Fatalf("negative timestamp kept as sent: %v", err)
	}
}

// A compacted topic refuses a batch with records without a key, as
// Kafka's LogValidator.validateKey: INVALID_RECORD, each record listed,
// the log start offset in the answer; keyed records are taken.
func TestProduceCompactedNeedsKeys(t *testing.T) {
	n := openTestNode(t, vfs.NewMem(), newTestClock())
	defer n.Close()
	if _, err := n.CreateTopic(context.Background(), "table", 1, map[string]string{"cleanup.policy": "compact,delete"}, false); err != nil {
		t.Fatal(err)
	}
	p := nodePartition(t, n, "table", 0)
	_, err := produceTo(p, dataBatch(-1, 0, 0, 2, false), "")
	var refused *netio.RecordsError
	if !errors.Is(err, kerr.InvalidRecord) || !errors.As(err, &refused) || len(refused.Records) != 2 ||
		refused.Records[1].Message != "Compacted topic cannot accept message without key in topic partition table-0." {
		t.Fatalf("records without keys: %v (%+v), want INVALID_RECORD listing both", err, refused)
	}
	if _, err := produceTo(p, keyedBatch("k", "v"), ""); err != nil {
		t.Fatalf("a keyed record: %v", err)
	}
}
