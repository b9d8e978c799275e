package recordbatch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/recordbatch"
)

// Header field positions, restated from the table in doc.go so that the
// tests do not borrow the package's own constants.
const (
	atBaseOffset      = 0
	atBatchLength     = 8
	atLeaderEpoch     = 12
	atMagic           = 16
	atCRC             = 17
	atAttributes      = 21
	atLastOffsetDelta = 23
	headerBytes       = 61
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcOf is Kafka's batch checksum computed independently of the package:
// CRC-32C over attributes to the end of the batch.
func crcOf(raw []byte) uint32 { return crc32.Checksum(raw[atAttributes:], castagnoli) }

type specCase struct {
	name string
	spec recordbatch.Spec
}

func specCases() []specCase {
	big := bytes.Repeat([]byte("v"), 9000) // value length needs a 3-byte varint
	return []specCase{
		{"empty", recordbatch.Spec{BaseOffset: 0, LeaderEpoch: recordbatch.NoEpoch, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}},
		{"one null record", recordbatch.Spec{BaseOffset: 7, LeaderEpoch: 3, BaseTimestamp: 1_700_000_000_000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
			Records: []recordbatch.Record{{}}}},
		{"empty key and value", recordbatch.Spec{BaseOffset: 100, LeaderEpoch: 0, BaseTimestamp: 5,
			Records: []recordbatch.Record{{Key: []byte{}, Value: []byte{}}}}},
		{"several records", recordbatch.Spec{BaseOffset: 1 << 40, LeaderEpoch: math.MaxInt32, BaseTimestamp: 1_700_000_000_000, ProducerID: 4242, ProducerEpoch: 7, BaseSequence: 99,
			Records: []recordbatch.Record{
				{Key: []byte("k0"), Value: []byte("v0"), TimestampDelta: 0},
				{Key: nil, Value: big, TimestampDelta: 250},
				{Key: []byte("k2"), Value: nil, TimestampDelta: 90},
			}}},
		{"negative timestamp deltas", recordbatch.Spec{BaseOffset: 3, LeaderEpoch: 1, BaseTimestamp: 10_000,
			Records: []recordbatch.Record{{Value: []byte("a"), TimestampDelta: -50}, {Value: []byte("b"), TimestampDelta: -20}}}},
		{"transactional", recordbatch.Spec{BaseOffset: 12, LeaderEpoch: 2, BaseTimestamp: 1, ProducerID: 1 << 50, ProducerEpoch: math.MaxInt16, BaseSequence: math.MaxInt32, Transactional: true,
			Records: []recordbatch.Record{{Key: []byte("k"), Value: []byte("v")}}}},
		{"control", recordbatch.Spec{BaseOffset: 13, LeaderEpoch: 2, ProducerID: 8, Control: true,
			Records: []recordbatch.Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}}}},
		{"transactional control", recordbatch.Spec{BaseOffset: 14, LeaderEpoch: 2, ProducerID: 8, Transactional: true, Control: true,
			Records: []recordbatch.Record{{Key: []byte{0, 0, 0, 0}}}}},
		{"highest base offset", recordbatch.Spec{BaseOffset: math.MaxInt64 - 1, LeaderEpoch: 9,
			Records: []recordbatch.Record{{Value: []byte("x")}, {Value: []byte("y")}}}},
	}
}

// wantMaxTimestamp is the largest record timestamp, or the base timestamp
// of a batch without records.
func wantMaxTimestamp(spec recordbatch.Spec) int64 {
	if len(spec.Records) == 0 {
		return spec.BaseTimestamp
	}
	maxDelta := spec.Records[0].TimestampDelta
	for _, r := range spec.Records[1:] {
		maxDelta = max(maxDelta, r.TimestampDelta)
	}
	return spec.BaseTimestamp + maxDelta
}

func wantLastOffsetDelta(spec recordbatch.Spec) int32 {
	return int32(max(len(spec.Records)-1, 0))
}

func checkFields(t *testing.T, b recordbatch.Batch, spec recordbatch.Spec) {
	t.Helper()
	wantAttributes := int16(0)
	if spec.Transactional {
		wantAttributes |= 0x10
	}
	if spec.Control {
		wantAttributes |= 0x20
	}
	checks := []struct {
		field     string
		got, want int64
	}{
		{"BaseOffset", int64(b.BaseOffset()), int64(spec.BaseOffset)},
		{"BatchLength", int64(b.BatchLength()), int64(b.Size() - 12)},
		{"LeaderEpoch", int64(b.LeaderEpoch()), int64(spec.LeaderEpoch)},
		{"Magic", int64(b.Magic()), 2},
		{"CRC", int64(b.CRC()), int64(crcOf(b))},
		{"Attributes", int64(b.Attributes()), int64(wantAttributes)},
		{"Codec", int64(b.Codec()), int64(recordbatch.CodecNone)},
		{"LastOffsetDelta", int64(b.LastOffsetDelta()), int64(wantLastOffsetDelta(spec))},
		{"LastOffset", int64(b.LastOffset()), int64(spec.BaseOffset) + int64(wantLastOffsetDelta(spec))},
		{"NextOffset", int64(b.NextOffset()), int64(spec.BaseOffset) + int64(wantLastOffsetDelta(spec)) + 1},
		{"BaseTimestamp", b.BaseTimestamp(), spec.BaseTimestamp},
		{"MaxTimestamp", b.MaxTimestamp(), wantMaxTimestamp(spec)},
		{"ProducerID", b.ProducerID(), spec.ProducerID},
		{"ProducerEpoch", int64(b.ProducerEpoch()), int64(spec.ProducerEpoch)},
		{"BaseSequence", int64(b.BaseSequence()), int64(spec.BaseSequence)},
		{"RecordCount", int64(b.RecordCount()), int64(len(spec.Records))},
		{"len(Records)", int64(len(b.Records())), int64(b.Size() - headerBytes)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.field, c.got, c.want)
		}
	}
	flags := []struct {
		flag      string
		got, want bool
	}{
		{"Transactional", b.Transactional(), spec.Transactional},
		{"Control", b.Control(), spec.Control},
		{"LogAppendTime", b.LogAppendTime(), false},
		{"HasDeleteHorizon", b.HasDeleteHorizon(), false},
	}
	for _, f := range flags {
		if f.got != f.want {
			t.Errorf("%s = %v, want %v", f.flag, f.got, f.want)
		}
	}
	if got := binary.BigEndian.Uint32(b[atCRC:]); got != b.CRC() {
		t.Errorf("CRC() = %08x, bytes [17, 21) hold %08x", b.CRC(), got)
	}
}

func TestAppendParseVerifyIter(t *testing.T) {
	prefix := []byte("bytes already in dst")
	for _, tc := range specCases() {
		t.Run(tc.name, func(t *testing.T) {
			buf := recordbatch.Append(bytes.Clone(prefix), tc.spec)
			if !bytes.Equal(buf[:len(prefix)], prefix) {
				t.Fatalf("Append changed the bytes before it: %q", buf[:len(prefix)])
			}
			raw := buf[len(prefix):]
			b, err := recordbatch.Parse(raw)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if b.Size() != len(raw) {
				t.Fatalf("Size = %d, Append wrote %d bytes", b.Size(), len(raw))
			}
			if &b[0] != &raw[0] || cap(b) != len(b) {
				t.Fatalf("Parse copied or left capacity: cap %d, len %d", cap(b), len(b))
			}
			if err := b.Verify(); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if b.ComputeCRC() != b.CRC() {
				t.Fatalf("ComputeCRC = %08x, CRC = %08x", b.ComputeCRC(), b.CRC())
			}
			checkFields(t, b, tc.spec)
			for _, verify := range []bool{false, true} {
				it := recordbatch.NewIter(raw, verify)
				if !it.Next() {
					t.Fatalf("verify=%v: Next = false, Err = %v", verify, it.Err())
				}
				if !bytes.Equal(it.Batch(), raw) || it.Position() != 0 || it.Consumed() != len(raw) {
					t.Fatalf("verify=%v: batch of %d bytes at %d, consumed %d", verify, it.Batch().Size(), it.Position(), it.Consumed())
				}
				if it.Next() || it.Err() != nil {
					t.Fatalf("verify=%v: after the only batch: Next = true or Err = %v", verify, it.Err())
				}
			}
		})
	}
}

// concatCases appends every spec case into one buffer, each batch's base
// offset following the previous batch's next offset.
func concatCases() (buf []byte, positions []int) {
	next := recordbatch.Offset(0)
	for _, tc := range specCases() {
		spec := tc.spec
		spec.BaseOffset = next
		positions = append(positions, len(buf))
		buf = recordbatch.Append(buf, spec)
		next += recordbatch.Offset(wantLastOffsetDelta(spec)) + 1
	}
	return buf, positions
}

func TestIterMany(t *testing.T) {
	buf, positions := concatCases()
	for _, verify := range []bool{false, true} {
		it := recordbatch.NewIter(buf, verify)
		count := 0
		next := recordbatch.Offset(0)
		for it.Next() {
			if count >= len(positions) {
				t.Fatalf("verify=%v: more than %d batches", verify, len(positions))
			}
			b := it.Batch()
			if it.Position() != positions[count] || it.Consumed() != positions[count]+b.Size() {
				t.Fatalf("verify=%v: batch %d at %d (consumed %d), want at %d", verify, count, it.Position(), it.Consumed(), positions[count])
			}
			if b.BaseOffset() != next {
				t.Fatalf("verify=%v: batch %d base offset %d, want %d", verify, count, b.BaseOffset(), next)
			}
			next = b.NextOffset()
			count++
		}
		if it.Err() != nil || count != len(positions) || it.Consumed() != len(buf) {
			t.Fatalf("verify=%v: %d batches, consumed %d of %d, Err %v", verify, count, it.Consumed(), len(buf), it.Err())
		}
	}
	empty := recordbatch.NewIter(nil, true)
	if empty.Next() || empty.Err() != nil || empty.Consumed() != 0 {
		t.Fatalf("empty buffer: Err %v, consumed %d", empty.Err(), empty.Consumed())
	}
}

func mustParse(t *testing.T, raw []byte) recordbatch.Batch {
	t.Helper()
	b, err := recordbatch.Parse(raw)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return b
}

func TestCodecBits(t *testing.T) {
	names := []string{"none", "gzip", "snappy", "lz4", "zstd", "codec(5)", "codec(6)", "codec(7)"}
	spec := specCases()[3].spec
	for c := range recordbatch.Codec(8) {
		t.Run(names[c], func(t *testing.T) {
			raw := recordbatch.Append(nil, spec)
			b := mustParse(t, raw)
			raw[atAttributes+1] = raw[atAttributes+1]&^0x07 | byte(c)
			if err := b.Verify(); c != recordbatch.CodecNone && !errors.Is(err, recordbatch.ErrCorrupt) {
				t.Fatalf("Verify after changing attributes without the CRC: %v, want ErrCorrupt", err)
			}
			b.SetCRC(b.ComputeCRC())
			b = mustParse(t, raw)
			if err := b.Verify(); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if b.Codec() != c || b.Attributes()&0x07 != int16(c) || c.String() != names[c] {
				t.Fatalf("Codec = %v (attributes %#x), want %v", b.Codec(), b.Attributes(), c)
			}
			checkFields(t, withCodec(b, recordbatch.CodecNone), spec) // other fields untouched
		})
	}
}

// withCodec returns a copy of b with codec bits c and a fixed CRC.
func withCodec(b recordbatch.Batch, c recordbatch.Codec) recordbatch.Batch {
	out := recordbatch.Batch(bytes.Clone(b))
	out[atAttributes+1] = out[atAttributes+1]&^0x07 | byte(c)
	out.SetCRC(out.ComputeCRC())
	return out
}

func TestAttributeFlags(t *testing.T) {
	cases := []struct {
		bit                                                  byte
		logAppendTime, transactional, control, deleteHorizon bool
	}{
		{0x08, true, false, false, false},
		{0x10, false, true, false, false},
		{0x20, false, false, true, false},
		{0x40, false, false, false, true},
		{0x7f, true, true, true, true},
	}
	for _, tc := range cases {
		raw := recordbatch.Append(nil, specCases()[1].spec)
		raw[atAttributes+1] = tc.bit
		b := mustParse(t, raw)
		b.SetCRC(b.ComputeCRC())
		if err := b.Verify(); err != nil {
			t.Fatalf("bits %#x: Verify: %v", tc.bit, err)
		}
		if b.LogAppendTime() != tc.logAppendTime || b.Transactional() != tc.transactional ||
			b.Control() != tc.control || b.HasDeleteHorizon() != tc.deleteHorizon {
			t.Errorf("bits %#x: logAppendTime %v transactional %v control %v deleteHorizon %v", tc.bit,
				b.LogAppendTime(), b.Transactional(), b.Control(), b.HasDeleteHorizon())
		}
		if b.Codec() != recordbatch.Codec(tc.bit&0x07) {
			t.Errorf("bits %#x: codec %v", tc.bit, b.Codec())
		}
	}
}

// twoBatches returns a buffer of two valid batches and the size of the first.
func twoBatches(t testing.TB) (buf []byte, first int) {
	cases := specCases()
	buf = recordbatch.Append(nil, cases[3].spec)
	first = len(buf)
	second := cases[4].spec // two records: lastOffsetDelta 1
	second.BaseOffset = 4242
	return recordbatch.Append(buf, second), first
}

func TestTruncatedAtEveryCut(t *testing.T) {
	buf, first := twoBatches(t)
	for cut := 0; cut <= len(buf); cut++ {
		wantConsumed, wantCount := 0, 0
		if cut >= first {
			wantConsumed, wantCount = first, 1
		}
		if cut == len(buf) {
			wantConsumed, wantCount = len(buf), 2
		}
		clean := cut == wantConsumed
		for _, verify := range []bool{false, true} {
			it := recordbatch.NewIter(buf[:cut], verify)
			count := 0
			for it.Next() {
				count++
			}
			err := it.Err()
			if count != wantCount || it.Consumed() != wantConsumed {
				t.Fatalf("cut %d verify=%v: %d batches, consumed %d, want %d and %d", cut, verify, count, it.Consumed(), wantCount, wantConsumed)
			}
			if clean {
				if err != nil {
					t.Fatalf("cut %d verify=%v: Err %v at a batch boundary", cut, verify, err)
				}
				continue
			}
			if !errors.Is(err, recordbatch.ErrTruncated) || errors.Is(err, recordbatch.ErrCorrupt) {
				t.Fatalf("cut %d verify=%v: Err %v, want ErrTruncated", cut, verify, err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("at byte %d", wantConsumed)) {
				t.Fatalf("cut %d: %q does not name byte %d", cut, err, wantConsumed)
			}
		}
		if _, err := recordbatch.Parse(buf[wantConsumed:cut]); !clean && !errors.Is(err, recordbatch.ErrTruncated) {
			t.Fatalf("cut %d: Parse: %v, want ErrTruncated", cut, err)
		}
	}
}

func putUint32(raw []byte, at int, v uint32) { binary.BigEndian.PutUint32(raw[at:], v) }
func putUint64(raw []byte, at int, v uint64) { binary.BigEndian.PutUint64(raw[at:], v) }

func TestCorruptFraming(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(raw []byte)
		want   error
	}{
		{"magic 0", func(raw []byte) { raw[atMagic] = 0 }, recordbatch.ErrCorrupt},
		{"magic 1", func(raw []byte) { raw[atMagic] = 1 }, recordbatch.ErrCorrupt},
		{"magic 3", func(raw []byte) { raw[atMagic] = 3 }, recordbatch.ErrCorrupt},
		{"magic -1", func(raw []byte) { raw[atMagic] = 0xff }, recordbatch.ErrCorrupt},
		{"length 0", func(raw []byte) { putUint32(raw, atBatchLength, 0) }, recordbatch.ErrCorrupt},
		{"length one below header", func(raw []byte) { putUint32(raw, atBatchLength, headerBytes-12-1) }, recordbatch.ErrCorrupt},
		{"length -1", func(raw []byte) { putUint32(raw, atBatchLength, math.MaxUint32) }, recordbatch.ErrCorrupt},
		{"length min int32", func(raw []byte) { putUint32(raw, atBatchLength, 1<<31) }, recordbatch.ErrCorrupt},
		{"length one above max", func(raw []byte) { putUint32(raw, atBatchLength, recordbatch.MaxBatchSize-12+1) }, recordbatch.ErrCorrupt},
		{"length max int32", func(raw []byte) { putUint32(raw, atBatchLength, math.MaxInt32) }, recordbatch.ErrCorrupt},
		{"length at max is only truncated", func(raw []byte) { putUint32(raw, atBatchLength, recordbatch.MaxBatchSize-12) }, recordbatch.ErrTruncated},
		{"length one past the end", func(raw []byte) { putUint32(raw, atBatchLength, uint32(len(raw)-12+1)) }, recordbatch.ErrTruncated},
		{"last offset delta -1", func(raw []byte) { putUint32(raw, atLastOffsetDelta, math.MaxUint32) }, recordbatch.ErrCorrupt},
		{"last offset delta min int32", func(raw []byte) { putUint32(raw, atLastOffsetDelta, 1<<31) }, recordbatch.ErrCorrupt},
		{"base offset -1", func(raw []byte) { putUint64(raw, atBaseOffset, math.MaxUint64) }, recordbatch.ErrCorrupt},
		{"last offset past max int64", func(raw []byte) { putUint64(raw, atBaseOffset, math.MaxInt64) }, recordbatch.ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			buf, first := twoBatches(t)
			second := buf[first:]
			tc.mutate(second)
			// Fix the CRC so that only the framing is wrong.
			if size := 12 + int64(int32(binary.BigEndian.Uint32(second[atBatchLength:]))); size == int64(len(second)) {
				putUint32(second, atCRC, crcOf(second))
			}
			baseOffset := fmt.Sprintf("base offset %d", int64(binary.BigEndian.Uint64(second)))
			b, err := recordbatch.Parse(second)
			if !errors.Is(err, tc.want) || b != nil {
				t.Fatalf("Parse: batch of %d bytes, Err %v, want %v", len(b), err, tc.want)
			}
			if !strings.Contains(err.Error(), baseOffset) {
				t.Fatalf("Parse: %q does not name %s", err, baseOffset)
			}
			for _, verify := range []bool{false, true} {
				it := recordbatch.NewIter(buf, verify)
				count := 0
				for it.Next() {
					count++
				}
				err := it.Err()
				if count != 1 || it.Consumed() != first || !errors.Is(err, tc.want) {
					t.Fatalf("verify=%v: %d batches, consumed %d, Err %v; want 1, %d, %v", verify, count, it.Consumed(), err, first, tc.want)
				}
				if at := fmt.Sprintf("at byte %d", first); !strings.Contains(err.Error(), at) || !strings.Contains(err.Error(), baseOffset) {
					t.Fatalf("verify=%v: %q does not name %q and %q", verify, err, at, baseOffset)
				}
			}
		})
	}
}

// TestBitFlips flips every bit of the second of two batches. The CRC covers
// [attributes, end); the CRC field itself must also disagree when flipped.
// baseOffset and leaderEpoch lie outside it.
func TestBitFlips(t *testing.T) {
	clean, first := twoBatches(t)
	size := len(clean) - first
	baseOffset := fmt.Sprintf("base offset %d", mustParse(t, clean[first:]).BaseOffset())
	at := fmt.Sprintf("at byte %d", first)
	for pos := range size {
		for bit := range 8 {
			buf := bytes.Clone(clean)
			buf[first+pos] ^= 1 << bit
			second := recordbatch.Batch(buf[first:])
			it := recordbatch.NewIter(buf, true)
			count := 0
			for it.Next() {
				count++
			}
			switch {
			case pos >= atCRC:
				err := second.Verify()
				if !errors.Is(err, recordbatch.ErrCorrupt) || !strings.Contains(err.Error(), baseOffset) {
					t.Fatalf("byte %d bit %d: Verify: %v, want ErrCorrupt naming %s", pos, bit, err, baseOffset)
				}
				err = it.Err()
				if count != 1 || it.Consumed() != first || !errors.Is(err, recordbatch.ErrCorrupt) {
					t.Fatalf("byte %d bit %d: Iter: %d batches, consumed %d, Err %v", pos, bit, count, it.Consumed(), err)
				}
				if !strings.Contains(err.Error(), at) || !strings.Contains(err.Error(), baseOffset) {
					t.Fatalf("byte %d bit %d: %q does not name %q and %q", pos, bit, err, at, baseOffset)
				}
			case pos < atBatchLength || (pos >= atLeaderEpoch && pos < atMagic):
				if err := second.Verify(); err != nil {
					t.Fatalf("byte %d bit %d: Verify: %v; the CRC must not cover it", pos, bit, err)
				}
				signBit := pos == atBaseOffset && bit == 7
				if signBit {
					if !errors.Is(it.Err(), recordbatch.ErrCorrupt) || count != 1 {
						t.Fatalf("byte %d bit %d: negative base offset: %d batches, Err %v", pos, bit, count, it.Err())
					}
				} else if count != 2 || it.Err() != nil {
					t.Fatalf("byte %d bit %d: Iter: %d batches, Err %v; want 2, nil", pos, bit, count, it.Err())
				}
			default: // batchLength or magic: framing breaks one way or another.
				err := it.Err()
				if count != 1 || !(errors.Is(err, recordbatch.ErrCorrupt) || errors.Is(err, recordbatch.ErrTruncated)) {
					t.Fatalf("byte %d bit %d: Iter: %d batches, Err %v", pos, bit, count, err)
				}
			}
		}
	}
}

func TestMutatorsKeepCRC(t *testing.T) {
	spec := specCases()[3].spec
	offsets := []recordbatch.Offset{0, 1, 1 << 40, math.MaxInt64 - recordbatch.Offset(wantLastOffsetDelta(spec))}
	epochs := []recordbatch.Epoch{recordbatch.NoEpoch, 0, 1, math.MaxInt32}
	for _, offset := range offsets {
		for _, epoch := range epochs {
			raw := recordbatch.Append(nil, spec)
			crcRange := bytes.Clone(raw[atCRC:])
			b := mustParse(t, raw)
			b.SetBaseOffset(offset)
			b.SetLeaderEpoch(epoch)
			if !bytes.Equal(raw[atCRC:], crcRange) {
				t.Fatalf("offset %d epoch %d: mutators wrote past the leader epoch", offset, epoch)
			}
			b = mustParse(t, raw)
			if err := b.Verify(); err != nil {
				t.Fatalf("offset %d epoch %d: Verify: %v", offset, epoch, err)
			}
			if b.BaseOffset() != offset || b.LeaderEpoch() != epoch {
				t.Fatalf("read back offset %d epoch %d, want %d %d", b.BaseOffset(), b.LeaderEpoch(), offset, epoch)
			}
			if want := offset + recordbatch.Offset(wantLastOffsetDelta(spec)); b.LastOffset() != want {
				t.Fatalf("LastOffset %d, want %d", b.LastOffset(), want)
			}
			it := recordbatch.NewIter(raw, true)
			if !it.Next() || it.Next() || it.Err() != nil {
				t.Fatalf("offset %d epoch %d: Iter: %v", offset, epoch, it.Err())
			}
		}
	}
}

// splitRecords cuts a records section into single encoded records using the
// varint length that starts each one.
func splitRecords(t *testing.T, records []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(records) > 0 {
		length, n := binary.Varint(records)
		if n <= 0 || length < 0 || int64(len(records)-n) < length {
			t.Fatalf("record %d: bad varint length %d (%d bytes) with %d bytes left", len(out), length, n, len(records))
		}
		end := n + int(length)
		out = append(out, records[:end])
		records = records[end:]
	}
	return out
}

func sameNullable(got, want []byte) bool {
	return (got == nil) == (want == nil) && bytes.Equal(got, want)
}

// TestKmsgDecodesAppend reads batches made by Append with franz-go's kmsg.
func TestKmsgDecodesAppend(t *testing.T) {
	for _, tc := range specCases() {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			raw := recordbatch.Append(nil, spec)
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(raw); err != nil {
				t.Fatalf("kmsg ReadFrom: %v", err)
			}
			if got := kb.AppendTo(nil); !bytes.Equal(got, raw) {
				t.Fatalf("kmsg re-encodes %d bytes differently from Append's %d", len(got), len(raw))
			}
			header := []struct {
				field     string
				got, want int64
			}{
				{"FirstOffset", kb.FirstOffset, int64(spec.BaseOffset)},
				{"Length", int64(kb.Length), int64(len(raw) - 12)},
				{"PartitionLeaderEpoch", int64(kb.PartitionLeaderEpoch), int64(spec.LeaderEpoch)},
				{"Magic", int64(kb.Magic), 2},
				{"CRC", int64(uint32(kb.CRC)), int64(crcOf(raw))},
				{"LastOffsetDelta", int64(kb.LastOffsetDelta), int64(wantLastOffsetDelta(spec))},
				{"FirstTimestamp", kb.FirstTimestamp, spec.BaseTimestamp},
				{"MaxTimestamp", kb.MaxTimestamp, wantMaxTimestamp(spec)},
				{"ProducerID", kb.ProducerID, spec.ProducerID},
				{"ProducerEpoch", int64(kb.ProducerEpoch), int64(spec.ProducerEpoch)},
				{"FirstSequence", int64(kb.FirstSequence), int64(spec.BaseSequence)},
				{"NumRecords", int64(kb.NumRecords), int64(len(spec.Records))},
			}
			for _, h := range header {
				if h.got != h.want {
					t.Errorf("kmsg %s = %d, want %d", h.field, h.got, h.want)
				}
			}
			encoded := splitRecords(t, kb.Records)
			if len(encoded) != len(spec.Records) {
				t.Fatalf("%d records, want %d", len(encoded), len(spec.Records))
			}
			for i, one := range encoded {
				var kr kmsg.Record
				if err := kr.ReadFrom(one); err != nil {
					t.Fatalf("record %d: kmsg ReadFrom: %v", i, err)
				}
				want := spec.Records[i]
				if kr.OffsetDelta != int32(i) || kr.TimestampDelta64 != want.TimestampDelta || kr.Attributes != 0 || len(kr.Headers) != 0 {
					t.Errorf("record %d: offset delta %d timestamp delta %d attributes %d headers %d",
						i, kr.OffsetDelta, kr.TimestampDelta64, kr.Attributes, len(kr.Headers))
				}
				if !sameNullable(kr.Key, want.Key) || !sameNullable(kr.Value, want.Value) {
					t.Errorf("record %d: key %q value of %d bytes (nil %v), want %q and %d bytes (nil %v)",
						i, kr.Key, len(kr.Value), kr.Value == nil, want.Key, len(want.Value), want.Value == nil)
				}
				if again := kr.AppendTo(nil); !bytes.Equal(again, one) {
					t.Errorf("record %d: kmsg re-encodes %x, Append wrote %x", i, again, one)
				}
			}
		})
	}
}

// kmsgBatch encodes spec with kmsg, computing the CRC as Kafka does.
func kmsgBatch(spec recordbatch.Spec, attributes int16, headers []kmsg.Header) []byte {
	var records []byte
	for i, r := range spec.Records {
		kr := kmsg.Record{TimestampDelta64: r.TimestampDelta, OffsetDelta: int32(i), Key: r.Key, Value: r.Value, Headers: headers}
		body := kr.AppendTo(nil)[1:] // drop the placeholder length 0
		kr.Length = int32(len(body))
		records = kr.AppendTo(records)
	}
	kb := kmsg.RecordBatch{
		FirstOffset:          int64(spec.BaseOffset),
		Length:               int32(headerBytes - 12 + len(records)),
		PartitionLeaderEpoch: int32(spec.LeaderEpoch),
		Magic:                2,
		Attributes:           attributes,
		LastOffsetDelta:      wantLastOffsetDelta(spec),
		FirstTimestamp:       spec.BaseTimestamp,
		MaxTimestamp:         wantMaxTimestamp(spec),
		ProducerID:           spec.ProducerID,
		ProducerEpoch:        spec.ProducerEpoch,
		FirstSequence:        spec.BaseSequence,
		NumRecords:           int32(len(spec.Records)),
		Records:              records,
	}
	kb.CRC = int32(crcOf(kb.AppendTo(nil)))
	return kb.AppendTo(nil)
}

// TestKmsgBatchParses parses and verifies batches encoded by kmsg, including
// ones this package cannot write (record headers, a codec bit).
func TestKmsgBatchParses(t *testing.T) {
	for _, tc := range specCases() {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			var attributes int16
			if spec.Transactional {
				attributes |= 0x10
			}
			if spec.Control {
				attributes |= 0x20
			}
			raw := kmsgBatch(spec, attributes, nil)
			if appended := recordbatch.Append(nil, spec); !bytes.Equal(raw, appended) {
				t.Fatalf("kmsg encoding (%d bytes) differs from Append (%d bytes)", len(raw), len(appended))
			}
			b := mustParse(t, raw)
			if err := b.Verify(); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			checkFields(t, b, spec)

			withHeaders := kmsgBatch(spec, attributes|int16(recordbatch.CodecZstd), []kmsg.Header{{Key: "h", Value: []byte("hv")}})
			b = mustParse(t, withHeaders)
			if err := b.Verify(); err != nil {
				t.Fatalf("with headers: Verify: %v", err)
			}
			if b.Size() != len(withHeaders) || b.Codec() != recordbatch.CodecZstd || b.RecordCount() != int32(len(spec.Records)) {
				t.Fatalf("with headers: size %d of %d, codec %v, %d records", b.Size(), len(withHeaders), b.Codec(), b.RecordCount())
			}
		})
	}
}
