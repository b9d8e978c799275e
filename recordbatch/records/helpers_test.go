package records_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	rb "github.com/mirrord/mirrord/recordbatch"
)

// Header positions the tests rewrite (see recordbatch's doc.go).
const (
	atBatchLength     = 8
	atAttributes      = 21
	atLastOffsetDelta = 23
	atMaxTimestamp    = 35
	atRecordCount     = 57
	attrLogAppendTime = 0x08
)

// compression is one way a Kafka client compresses a records section.
type compression struct {
	name     string
	codec    rb.Codec
	compress func(t testing.TB, section []byte) []byte
}

// kgoCompress compresses with franz-go's own producer compressor.
func kgoCompress(codec kgo.CompressionCodec) func(testing.TB, []byte) []byte {
	return func(t testing.TB, section []byte) []byte {
		c, err := kgo.DefaultCompressor(codec)
		if err != nil {
			t.Fatalf("kgo compressor: %v", err)
		}
		out, _ := c.Compress(new(bytes.Buffer), section)
		return slices.Clone(out)
	}
}

// compressions lists every codec, some several ways: franz-go's producer
// (raw snappy, zstd with the content size), snappy-java's xerial framing
// (the Java producer), gzip in several members, lz4 frames as the Java
// producer writes them (64 KiB independent blocks with block checksums),
// and streamed zstd frames without a content size.
func compressions() []compression {
	return []compression{
		{"none", rb.CodecNone, func(_ testing.TB, s []byte) []byte { return s }},
		{"gzip kgo", rb.CodecGzip, kgoCompress(kgo.GzipCompression())},
		{"gzip two members", rb.CodecGzip, gzipMembers},
		{"snappy kgo raw", rb.CodecSnappy, kgoCompress(kgo.SnappyCompression())},
		{"snappy xerial", rb.CodecSnappy, func(_ testing.TB, s []byte) []byte { return xerial(s, 32<<10) }},
		{"lz4 kgo", rb.CodecLZ4, kgoCompress(kgo.Lz4Compression())},
		{"lz4 java", rb.CodecLZ4, lz4Java},
		{"zstd kgo", rb.CodecZstd, kgoCompress(kgo.ZstdCompression())},
		{"zstd stream", rb.CodecZstd, zstdStream},
	}
}

func gzipMembers(t testing.TB, section []byte) []byte {
	var out bytes.Buffer
	half := len(section) / 2
	for _, part := range [][]byte{section[:half], section[half:]} {
		w := gzip.NewWriter(&out)
		if _, err := w.Write(part); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// xerial frames section as snappy-java's SnappyOutputStream does.
func xerial(section []byte, blockSize int) []byte {
	out := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	for len(section) > 0 {
		n := min(blockSize, len(section))
		block := s2.EncodeSnappy(nil, section[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		section = section[n:]
	}
	return out
}

func lz4Java(t testing.TB, section []byte) []byte {
	var out bytes.Buffer
	w := lz4.NewWriter(&out)
	if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.BlockChecksumOption(true), lz4.ChecksumOption(false)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(section); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func zstdStream(t testing.TB, section []byte) []byte {
	var out bytes.Buffer
	w, err := zstd.NewWriter(&out, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(section); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// withSection returns a copy of b's header followed by section, with
// codec, batch length and CRC set to match.
func withSection(b rb.Batch, codec rb.Codec, section []byte) rb.Batch {
	out := rb.Batch(append(slices.Clone(b[:rb.HeaderSize]), section...))
	out[atAttributes+1] = out[atAttributes+1]&^0x07 | byte(codec)
	binary.BigEndian.PutUint32(out[atBatchLength:], uint32(len(out)-rb.LengthPrefixSize))
	out.SetCRC(out.ComputeCRC())
	return out
}

// compressed rebuilds the uncompressed batch b with its records compressed.
func compressed(t testing.TB, b rb.Batch, c compression) rb.Batch {
	return withSection(b, c.codec, c.compress(t, b.Records()))
}

// setUint32 rewrites a header field and the CRC.
func setUint32(b rb.Batch, at int, v uint32) rb.Batch {
	b = slices.Clone(b)
	binary.BigEndian.PutUint32(b[at:], v)
	b.SetCRC(b.ComputeCRC())
	return b
}

func withLogAppendTime(b rb.Batch, maxTimestamp int64) rb.Batch {
	b = slices.Clone(b)
	b[atAttributes+1] |= attrLogAppendTime
	binary.BigEndian.PutUint64(b[atMaxTimestamp:], uint64(maxTimestamp))
	b.SetCRC(b.ComputeCRC())
	return b
}

// encodeRecords encodes records with franz-go's kmsg, an encoder
// independent of recordbatch.Append that also writes headers.
func encodeRecords(records []kmsg.Record) []byte {
	var out []byte
	for _, r := range records {
		r.Length = 0
		body := r.AppendTo(nil)[1:] // a zero length is one byte
		r.Length = int32(len(body))
		out = r.AppendTo(out)
	}
	return out
}

// kafkaRecord is a kmsg record with offsetDelta i.
func kafkaRecord(i int, key, value string, headers ...string) kmsg.Record {
	r := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i) * 10, Key: []byte(key), Value: []byte(value)}
	for j := 0; j+1 < len(headers); j += 2 {
		r.Headers = append(r.Headers, kmsg.Header{Key: headers[j], Value: []byte(headers[j+1])})
	}
	return r
}

// batchOf is an uncompressed batch holding section, its header counting
// count records.
func batchOf(section []byte, count int) rb.Batch {
	b := rb.Batch(rb.Append(nil, rb.Spec{BaseOffset: 100, BaseTimestamp: 1_000, ProducerID: -1, Records: make([]rb.Record, max(count, 1))}))
	b = withSection(b, rb.CodecNone, section)
	b = setUint32(b, atRecordCount, uint32(count))
	return setUint32(b, atLastOffsetDelta, uint32(max(count-1, 0)))
}

// sampleSpec is a batch of n records with values of about valueBytes
// bytes of log-like text, compressible as real payloads are (3x to 6x).
func sampleSpec(seed uint64, n, valueBytes int) rb.Spec {
	random := rand.New(rand.NewPCG(seed, seed))
	words := []string{"user", "order", "created", "updated", "id", "status", "ok", "error", "latency_ms", "region", "eu-west-1", "us-east-2", "payment", "cart", "session"}
	spec := rb.Spec{BaseOffset: 1 << 20, LeaderEpoch: 3, BaseTimestamp: 1_700_000_000_000, ProducerID: -1, BaseSequence: -1}
	for i := range n {
		var value []byte
		for len(value) < valueBytes {
			value = fmt.Appendf(value, `{"%s":%d,"%s":"%s"} `, words[random.IntN(len(words))], random.IntN(1_000_000), words[random.IntN(len(words))], words[random.IntN(len(words))])
		}
		spec.Records = append(spec.Records, rb.Record{
			Key:            fmt.Appendf(nil, "key-%d", random.IntN(10_000)),
			Value:          value,
			TimestampDelta: int64(i) + int64(random.IntN(3)),
		})
	}
	return spec
}
