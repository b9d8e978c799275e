package records_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
)

// sections are uncompressed batches of several shapes: rb.Append's, and
// kmsg-encoded ones with headers and null keys and values.
func sections(t testing.TB) map[string]rb.Batch {
	headers := encodeRecords([]kmsg.Record{
		kafkaRecord(0, "k0", "v0", "h1", "x", "h2", ""),
		{OffsetDelta: 1, TimestampDelta64: -5, Key: nil, Value: []byte{}},
		{OffsetDelta: 2, TimestampDelta64: 1 << 40, Key: []byte{}, Value: nil, Headers: []kmsg.Header{{Key: "", Value: nil}}},
	})
	large := sampleSpec(1, 300, 1000)
	large.Records = append(large.Records, rb.Record{Key: []byte("big"), Value: bytes.Repeat([]byte("0123456789abcdef"), 200<<10/16)})
	return map[string]rb.Batch{
		"one record":        rb.Append(nil, rb.Spec{BaseOffset: 7, BaseTimestamp: 5, ProducerID: -1, Records: []rb.Record{{Value: []byte("v")}}}),
		"headers and nulls": batchOf(headers, 3),
		"large":             rb.Append(nil, large),
	}
}

// TestCodecRoundTrip compresses each shape of records every way a client
// does, then checks that Validate accepts the batch, that Decompress gives
// the section back, and that our Iter and franz-go's consumer (its
// decompressor and ProcessFetchPartition) read the same records.
func TestCodecRoundTrip(t *testing.T) {
	for shape, plain := range sections(t) {
		for _, c := range compressions() {
			t.Run(shape+"/"+c.name, func(t *testing.T) {
				b := compressed(t, plain, c)
				if b.Codec() != c.codec {
					t.Fatalf("codec %v, want %v", b.Codec(), c.codec)
				}
				if err := records.Validate(b, 0); err != nil {
					t.Fatalf("Validate: %v", err)
				}
				section, err := records.Decompress(nil, b, 0)
				if err != nil || !bytes.Equal(section, plain.Records()) {
					t.Fatalf("Decompress: %d bytes, want %d; err %v", len(section), len(plain.Records()), err)
				}
				if c.codec != rb.CodecNone {
					theirs, err := kgo.DefaultDecompressor().Decompress(b.Records(), kgo.CompressionCodecType(c.codec))
					if err != nil || !bytes.Equal(theirs, section) {
						t.Fatalf("franz-go decompresses to %d bytes (err %v), we to %d", len(theirs), err, len(section))
					}
				}
				compareWithFranz(t, b, section)
			})
		}
	}
}

func compareWithFranz(t *testing.T, b rb.Batch, section []byte) {
	t.Helper()
	partition := kmsg.NewFetchResponseTopicPartition()
	partition.HighWatermark = 1 << 40
	partition.RecordBatches = b
	fetched, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{KeepControlRecords: true, Topic: "t"}, &partition, kgo.DefaultDecompressor(), nil)
	if fetched.Err != nil {
		t.Fatalf("franz-go: %v", fetched.Err)
	}
	it := records.NewIter(section)
	for i, theirs := range fetched.Records {
		if !it.Next() {
			t.Fatalf("franz-go read %d records, we stopped at %d: %v", len(fetched.Records), i, it.Err())
		}
		ours := it.Record()
		offset := int64(b.BaseOffset()) + int64(ours.OffsetDelta)
		timestamp := b.BaseTimestamp() + ours.TimestampDelta
		if theirs.Offset != offset || theirs.Timestamp.UnixMilli() != timestamp ||
			!bytes.Equal(theirs.Key, ours.Key) || (theirs.Key == nil) != (ours.Key == nil) ||
			!bytes.Equal(theirs.Value, ours.Value) || (theirs.Value == nil) != (ours.Value == nil) ||
			len(theirs.Headers) != int(ours.HeaderCount) {
			t.Fatalf("record %d: franz-go offset %d timestamp %d key %q value %d bytes %d headers; ours %d %d %q %d %d",
				i, theirs.Offset, theirs.Timestamp.UnixMilli(), theirs.Key, len(theirs.Value), len(theirs.Headers),
				offset, timestamp, ours.Key, len(ours.Value), ours.HeaderCount)
		}
		var headers []byte
		for _, h := range theirs.Headers {
			headers = binary.AppendVarint(headers, int64(len(h.Key)))
			headers = append(headers, h.Key...)
			if h.Value == nil {
				headers = binary.AppendVarint(headers, -1)
				continue
			}
			headers = binary.AppendVarint(headers, int64(len(h.Value)))
			headers = append(headers, h.Value...)
		}
		if !bytes.Equal(headers, ours.Headers) {
			t.Fatalf("record %d: headers %x, franz-go's re-encoded %x", i, ours.Headers, headers)
		}
	}
	if it.Next() || it.Err() != nil || it.Position() != len(section) {
		t.Fatalf("after franz-go's %d records: more records or error %v, at byte %d of %d", len(fetched.Records), it.Err(), it.Position(), len(section))
	}
}

// TestDecompressLimit checks the bound at its edge for every codec: a
// section of exactly limit bytes passes, one byte less of limit fails
// with ErrTooLarge, naming the batch, and never as corruption.
func TestDecompressLimit(t *testing.T) {
	plain := rb.Batch(rb.Append(nil, sampleSpec(2, 100, 500)))
	size := len(plain.Records())
	for _, c := range compressions()[1:] {
		t.Run(c.name, func(t *testing.T) {
			b := compressed(t, plain, c)
			if out, err := records.Decompress(nil, b, size); err != nil || len(out) != size {
				t.Fatalf("limit %d: %d bytes, err %v", size, len(out), err)
			}
			_, err := records.Decompress(nil, b, size-1)
			if !errors.Is(err, records.ErrTooLarge) || errors.Is(err, rb.ErrCorrupt) {
				t.Fatalf("limit %d: err %v, want ErrTooLarge alone", size-1, err)
			}
			if err := records.Validate(b, size-1); !errors.Is(err, records.ErrTooLarge) {
				t.Fatalf("Validate at limit %d: %v", size-1, err)
			}
			t.Log(err)
		})
	}
}

// TestDecompressionBomb: 64 MiB of zeros compress to kilobytes. At a
// limit of 1 MiB every codec must refuse them having allocated no more
// than a small multiple of the limit, plus an LZ4 decoder's block buffers
// (a frame may declare 4 MiB blocks; a decoder made afresh, after a GC
// emptied its pool, allocates them whatever the limit), and at the
// default limit (64 MiB) one byte more than it is refused too.
func TestDecompressionBomb(t *testing.T) {
	const limit = 1 << 20
	zeros := make([]byte, records.DefaultLimit+1)
	for _, c := range compressions()[1:] {
		t.Run(c.name, func(t *testing.T) {
			b := withSection(batchOf(nil, 1), c.codec, c.compress(t, zeros))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := records.Validate(b, limit)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, records.ErrTooLarge) {
				t.Fatalf("%d compressed bytes: Validate %v, want ErrTooLarge", len(b), err)
			}
			t.Logf("%d compressed bytes: refused after allocating %d bytes", len(b), after.TotalAlloc-before.TotalAlloc)
			bound := uint64(8 * limit)
			if c.codec == rb.CodecLZ4 {
				bound += 3 * 4 << 20
			}
			if allocated := after.TotalAlloc - before.TotalAlloc; allocated > bound {
				t.Errorf("refusing %d compressed bytes allocated %d bytes, limit %d", len(b), allocated, limit)
			}
			if _, err := records.Decompress(nil, b, 0); !errors.Is(err, records.ErrTooLarge) {
				t.Fatalf("Decompress at the default limit: %v, want ErrTooLarge", err)
			}
		})
	}
}

// TestDecompressBuffers: an uncompressed section aliases the batch; a
// compressed one is written into dst when it has the room.
func TestDecompressBuffers(t *testing.T) {
	plain := rb.Batch(rb.Append(nil, sampleSpec(3, 10, 100)))
	section, err := records.Decompress(make([]byte, 5), plain, 0)
	if err != nil || &section[0] != &plain[rb.HeaderSize] {
		t.Fatalf("uncompressed: err %v, or the section does not alias the batch", err)
	}
	for _, c := range compressions()[1:] {
		b := compressed(t, plain, c)
		dst := make([]byte, 3, 1<<20)
		out, err := records.Decompress(dst, b, 0)
		if err != nil || !bytes.Equal(out, plain.Records()) || &out[0] != &dst[0] {
			t.Fatalf("%s: err %v, equal %v, or not decoded into dst", c.name, err, bytes.Equal(out, plain.Records()))
		}
	}
}
