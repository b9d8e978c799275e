package records_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
)

// levels are the levels each codec is tried at: Kafka's default (0 here),
// its bounds and one between.
var levels = map[rb.Codec][]int{
	rb.CodecNone:   {0},
	rb.CodecGzip:   {0, records.GzipLevelDefault, records.GzipLevelMin, 5, records.GzipLevelMax},
	rb.CodecSnappy: {0},
	rb.CodecLZ4:    {0, records.LZ4LevelMin, 4, records.LZ4LevelDefault, 12, records.LZ4LevelMax},
	rb.CodecZstd:   {0, -7, 1, records.ZstdLevelDefault, 9, 19},
}

// TestCompressRoundTrip: every codec at every level compresses each shape
// of records so that our Decompress and franz-go's decompressor both give
// the section back.
func TestCompressRoundTrip(t *testing.T) {
	for shape, plain := range sections(t) {
		for codec, codecLevels := range levels {
			for _, level := range codecLevels {
				t.Run(fmt.Sprintf("%s/%s/%d", shape, codec, level), func(t *testing.T) {
					section := plain.Records()
					out, err := records.Compress([]byte("prefix"), section, records.Compression{Codec: codec, Level: level})
					if err != nil || !bytes.HasPrefix(out, []byte("prefix")) {
						t.Fatalf("Compress: err %v, or the prefix is lost", err)
					}
					b := withSection(plain, codec, out[len("prefix"):])
					ours, err := records.Decompress(nil, b, 0)
					if err != nil || !bytes.Equal(ours, section) {
						t.Fatalf("Decompress: %d bytes of %d, err %v", len(ours), len(section), err)
					}
					if codec == rb.CodecNone {
						return
					}
					theirs, err := kgo.DefaultDecompressor().Decompress(b.Records(), kgo.CompressionCodecType(codec))
					if err != nil || !bytes.Equal(theirs, section) {
						t.Fatalf("franz-go: %d bytes of %d, err %v", len(theirs), len(section), err)
					}
				})
			}
		}
	}
}

// TestCompressLevels: Kafka's bounds of each codec's level.
func TestCompressLevels(t *testing.T) {
	for _, c := range []struct {
		codec rb.Codec
		level int
		ok    bool
	}{
		{rb.CodecGzip, -1, true}, {rb.CodecGzip, 9, true}, {rb.CodecGzip, -2, false}, {rb.CodecGzip, 10, false},
		{rb.CodecLZ4, 1, true}, {rb.CodecLZ4, 17, true}, {rb.CodecLZ4, -1, false}, {rb.CodecLZ4, 18, false},
		{rb.CodecZstd, -131072, true}, {rb.CodecZstd, 22, true}, {rb.CodecZstd, -131073, false}, {rb.CodecZstd, 23, false},
	} {
		err := records.ValidLevel(c.codec, c.level)
		_, compressErr := records.Compress(nil, []byte("x"), records.Compression{Codec: c.codec, Level: c.level})
		if (err == nil) != c.ok || (compressErr == nil) != c.ok {
			t.Errorf("%s level %d: ValidLevel %v, Compress %v, want ok %v", c.codec, c.level, err, compressErr, c.ok)
		}
	}
}

// fetchedRecords reads b as franz-go's consumer does.
func fetchedRecords(t *testing.T, b rb.Batch) []*kgo.Record {
	t.Helper()
	partition := kmsg.NewFetchResponseTopicPartition()
	partition.HighWatermark = 1 << 40
	partition.RecordBatches = b
	fetched, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t"}, &partition, kgo.DefaultDecompressor(), nil)
	if fetched.Err != nil {
		t.Fatalf("franz-go: %v", fetched.Err)
	}
	return fetched.Records
}

// producerBatch is an idempotent, transactional batch of sample records.
func producerBatch() rb.Batch {
	spec := sampleSpec(4, 20, 200)
	spec.BaseOffset, spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = 0, 4242, 7, 31, true
	return rb.Append(nil, spec)
}

// TestRecompress rebuilds every shape of records, sent in every codec,
// into every codec, and checks the new batch as Kafka's LogValidator
// builds it: the producer fields and the transactional bit kept, offset
// deltas from 0, the records a consumer reads the same (keys, values,
// headers, timestamps), baseTimestamp the first record's and
// maxTimestamp the largest.
func TestRecompress(t *testing.T) {
	shapes := sections(t)
	shapes["producer"] = producerBatch()
	for shape, plain := range shapes {
		for _, from := range compressions() {
			source := compressed(t, plain, from)
			want := fetchedRecords(t, source)
			for to := range levels {
				t.Run(shape+"/"+from.name+"/"+to.String(), func(t *testing.T) {
					out, _, err := records.Recompress([]byte("prefix"), nil, source, records.Compression{Codec: to}, -1, 0)
					if err != nil || !bytes.HasPrefix(out, []byte("prefix")) {
						t.Fatalf("Recompress: err %v, or the prefix is lost", err)
					}
					b, err := rb.Parse(out[len("prefix"):])
					if err != nil || b.Verify() != nil || len(b) != len(out)-len("prefix") {
						t.Fatalf("the new batch: parse %v, or bad CRC, or bytes after it", err)
					}
					if err := records.Validate(b, 0); err != nil {
						t.Fatalf("Validate: %v", err)
					}
					checkRebuilt(t, source, b, to, false)
					got := fetchedRecords(t, b)
					sameRecords(t, want, got, false)
				})
			}
		}
	}
}

// checkRebuilt compares the header of the rebuilt batch b with source's.
func checkRebuilt(t *testing.T, source, b rb.Batch, to rb.Codec, logAppendTime bool) {
	t.Helper()
	switch {
	case b.Codec() != to || b.LogAppendTime() != logAppendTime || b.Control():
		t.Fatalf("attributes %#x, want codec %s, LogAppendTime %v, not control", b.Attributes(), to, logAppendTime)
	case b.ProducerID() != source.ProducerID() || b.ProducerEpoch() != source.ProducerEpoch() ||
		b.BaseSequence() != source.BaseSequence() || b.Transactional() != source.Transactional():
		t.Fatalf("producer %d/%d/%d transactional %v, want %d/%d/%d %v", b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(),
			b.Transactional(), source.ProducerID(), source.ProducerEpoch(), source.BaseSequence(), source.Transactional())
	case b.BaseOffset() != 0 || b.LeaderEpoch() != source.LeaderEpoch() || b.RecordCount() != source.RecordCount() ||
		b.LastOffsetDelta() != source.LastOffsetDelta():
		t.Fatalf("base offset %d epoch %d count %d last delta %d, want 0 %d %d %d", b.BaseOffset(), b.LeaderEpoch(),
			b.RecordCount(), b.LastOffsetDelta(), source.LeaderEpoch(), source.RecordCount(), source.LastOffsetDelta())
	}
}

// sameRecords compares what a consumer reads; with logAppendTime the
// timestamps are the batch's and are not compared here.
func sameRecords(t *testing.T, want, got []*kgo.Record, logAppendTime bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if !bytes.Equal(g.Key, w.Key) || (g.Key == nil) != (w.Key == nil) || !bytes.Equal(g.Value, w.Value) ||
			(g.Value == nil) != (w.Value == nil) || fmt.Sprint(g.Headers) != fmt.Sprint(w.Headers) ||
			g.Offset-got[0].Offset != int64(i) || g.ProducerID != w.ProducerID || g.ProducerEpoch != w.ProducerEpoch ||
			!logAppendTime && !g.Timestamp.Equal(w.Timestamp) {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
	}
}

// TestRecompressLogAppendTime: with an append time the new batch is
// marked LogAppendTime and its maxTimestamp is that time, its
// baseTimestamp still the first record's create time (Kafka's
// MemoryRecordsBuilder); a LogAppendTime batch's records take its
// maxTimestamp as their timestamp.
func TestRecompressLogAppendTime(t *testing.T) {
	source := compressed(t, producerBatch(), compressions()[1])
	out, _, err := records.Recompress(nil, nil, source, records.Compression{Codec: rb.CodecZstd}, 1_800_000_000_000, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := rb.Batch(out)
	checkRebuilt(t, source, b, rb.CodecZstd, true)
	first := fetchedRecords(t, source)[0].Timestamp.UnixMilli()
	if b.MaxTimestamp() != 1_800_000_000_000 || b.BaseTimestamp() != first {
		t.Fatalf("timestamps base %d max %d, want %d (the first record's) and the append time", b.BaseTimestamp(), b.MaxTimestamp(), first)
	}
	got := fetchedRecords(t, b)
	sameRecords(t, fetchedRecords(t, source), got, true)
	for _, r := range got {
		if r.Timestamp.UnixMilli() != 1_800_000_000_000 || r.Attrs.TimestampType() != 1 {
			t.Fatalf("a consumer reads timestamp %v type %v, want the append time", r.Timestamp.UnixMilli(), r.Attrs.TimestampType())
		}
	}

	// A LogAppendTime batch sent to a CreateTime topic: every record
	// takes the batch's maxTimestamp.
	stamped := withLogAppendTime(compressed(t, producerBatch(), compressions()[0]), 1_750_000_000_000)
	out, _, err = records.Recompress(nil, nil, stamped, records.Compression{Codec: rb.CodecGzip}, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	b = rb.Batch(out)
	if b.LogAppendTime() || b.BaseTimestamp() != 1_750_000_000_000 || b.MaxTimestamp() != 1_750_000_000_000 {
		t.Fatalf("type LogAppendTime %v, base %d, max %d; want CreateTime with the sent maxTimestamp", b.LogAppendTime(), b.BaseTimestamp(), b.MaxTimestamp())
	}
}

// TestRecompressRefuses: a negative timestamp other than -1 (Kafka's
// builder refuses to write it), and records that are not what the header
// says.
func TestRecompressRefuses(t *testing.T) {
	negative := rb.Batch(rb.Append(nil, rb.Spec{BaseTimestamp: -5, ProducerID: -1, Records: []rb.Record{{Value: []byte("v")}}}))
	if _, _, err := records.Recompress(nil, nil, negative, records.Compression{Codec: rb.CodecGzip}, -1, 0); !errors.Is(err, records.ErrNegativeTimestamp) {
		t.Fatalf("timestamp -5: %v, want ErrNegativeTimestamp", err)
	}
	none := rb.Batch(rb.Append(nil, rb.Spec{BaseTimestamp: -1, ProducerID: -1, Records: []rb.Record{{Value: []byte("v")}, {TimestampDelta: 3}}}))
	out, _, err := records.Recompress(nil, nil, none, records.Compression{Codec: rb.CodecLZ4}, -1, 0)
	if err != nil || rb.Batch(out).BaseTimestamp() != -1 || rb.Batch(out).MaxTimestamp() != 2 {
		t.Fatalf("no timestamp: err %v, or timestamps not kept", err)
	}
	cut := withSection(sections(t)["one record"], rb.CodecNone, []byte{2, 0})
	if _, _, err := records.Recompress(nil, nil, cut, records.Compression{Codec: rb.CodecZstd}, -1, 0); !errors.Is(err, rb.ErrCorrupt) {
		t.Fatalf("malformed records: %v, want ErrCorrupt", err)
	}
}
