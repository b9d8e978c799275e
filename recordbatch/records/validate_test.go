package records_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
)

// record encodes one record with kmsg; body, when set, replaces everything
// after the length, which is then its length plus lengthAdjust.
type rawRecord struct {
	record       kmsg.Record
	body         []byte
	lengthAdjust int
}

func (r rawRecord) encode() []byte {
	body := r.body
	if body == nil {
		body = encodeRecords([]kmsg.Record{r.record})
		_, n := binary.Varint(body)
		body = body[n:]
	}
	return append(binary.AppendVarint(nil, int64(len(body)+r.lengthAdjust)), body...)
}

func sectionOf(rs ...rawRecord) []byte {
	var out []byte
	for _, r := range rs {
		out = append(out, r.encode()...)
	}
	return out
}

func good(i int) rawRecord { return rawRecord{record: kafkaRecord(i, "k", "v")} }

// bodyWith is a record body: attributes, timestamp delta 0, offset delta i,
// then tail in place of key, value and headers.
func bodyWith(i int, tail ...byte) []byte {
	return append(binary.AppendVarint([]byte{0, 0}, int64(i)), tail...)
}

func controlBatch(key []byte, count int) rb.Batch {
	var section []byte
	for i := range count {
		section = append(section, rawRecord{record: kmsg.Record{OffsetDelta: int32(i), Key: key, Value: []byte{0, 0, 0, 0, 0, 9}}}.encode()...)
	}
	b := batchOf(section, count)
	b[atAttributes+1] |= 0x20 | 0x10 // control, transactional
	b.SetCRC(b.ComputeCRC())
	return b
}

func controlKey(version, kind int16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, uint16(version)), uint16(kind))
}

func validBatch() rb.Batch { return batchOf(sectionOf(good(0), good(1), good(2)), 3) }

// TestValidateFailures: one thing wrong per case, each a corrupt batch.
func TestValidateFailures(t *testing.T) {
	three := validBatch()
	if err := records.Validate(three, 0); err != nil {
		t.Fatalf("the unbroken batch: %v", err)
	}
	withCodec := func(codec byte, section []byte) rb.Batch {
		return withSection(three, rb.Codec(codec), section)
	}
	gzipped := compressed(t, three, compressions()[1])
	badGzipCRC := slices.Clone(gzipped.Records())
	badGzipCRC[len(badGzipCRC)-8] ^= 1 // the CRC-32 in the gzip trailer
	xerialCut := xerial(three.Records(), 32<<10)
	for _, tc := range []struct {
		name  string
		batch rb.Batch
	}{
		{"shorter than a header", three[:rb.HeaderSize-1]},
		{"batch length beyond the bytes", three[:len(three)-1]},
		{"magic 1", func() rb.Batch { b := slices.Clone(three); b[16] = 1; return b }()},
		{"record count 0", setUint32(setUint32(three, atRecordCount, 0), atLastOffsetDelta, 0)},
		{"record count negative", setUint32(three, atRecordCount, math.MaxUint32)},
		{"record count above the records", setUint32(setUint32(three, atRecordCount, 4), atLastOffsetDelta, 3)},
		{"record count below the records", setUint32(setUint32(three, atRecordCount, 2), atLastOffsetDelta, 1)},
		{"last offset delta past the count", setUint32(three, atLastOffsetDelta, 3)},
		{"offset deltas skip", batchOf(sectionOf(good(0), good(2), good(3)), 3)},
		{"offset deltas from 1", batchOf(sectionOf(good(1), good(2), good(3)), 3)},
		{"offset delta repeated", batchOf(sectionOf(good(0), good(0), good(1)), 3)},
		{"trailing byte", batchOf(append(sectionOf(good(0), good(1), good(2)), 0), 3)},
		{"truncated record", batchOf(sectionOf(good(0), good(1), good(2))[:len(three.Records())-1], 3)},
		{"truncated length varint", batchOf(append(sectionOf(good(0), good(1)), 0x80), 3)},
		{"truncated timestamp varint", batchOf(sectionOf(good(0), rawRecord{body: []byte{0, 0x80}}), 2)},
		{"varint over 32 bits", batchOf(sectionOf(good(0), rawRecord{body: []byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0x1f, 0, 0, 0}}), 2)},
		{"varlong over 10 bytes", batchOf(sectionOf(good(0), rawRecord{body: append([]byte{0}, bytes.Repeat([]byte{0xff}, 11)...)}), 2)},
		{"negative record length", batchOf(append(sectionOf(good(0)), binary.AppendVarint(nil, -2)...), 2)},
		{"record length past the section", batchOf(sectionOf(good(0), rawRecord{record: kafkaRecord(1, "k", "v"), lengthAdjust: 1}), 2)},
		{"record length past its fields", batchOf(sectionOf(good(0), rawRecord{body: bodyWith(1, 2, 'k', 2, 'v', 0, 0)}), 2)},
		{"record length short of its fields", batchOf(sectionOf(good(0), rawRecord{body: bodyWith(1, 2, 'k')}, rawRecord{body: []byte{2, 'v', 0}}), 2)},
		{"key past the record", batchOf(sectionOf(good(0), rawRecord{body: bodyWith(1, 40, 'k', 2, 'v', 0)}), 2)},
		{"value past the record", batchOf(sectionOf(good(0), rawRecord{body: bodyWith(1, 2, 'k', 40, 'v', 0)}), 2)},
		{"negative header count", batchOf(sectionOf(good(0), rawRecord{body: bodyWith(1, 2, 'k', 2, 'v', 1)}), 2)},
		{"header count past the record", batchOf(sectionOf(good(0), rawRecord{body: bodyWith(1, 2, 'k', 2, 'v', 4, 0, 0)}), 2)},
		{"null header key", batchOf(sectionOf(good(0), rawRecord{body: bodyWith(1, 2, 'k', 2, 'v', 2, 1, 0)}), 2)},
		{"truncated header", batchOf(sectionOf(good(0), rawRecord{body: bodyWith(1, 2, 'k', 2, 'v', 2, 2, 'h', 0x80)}), 2)},
		{"codec 5", withCodec(5, three.Records())},
		{"codec 6", withCodec(6, three.Records())},
		{"codec 7", withCodec(7, three.Records())},
		{"gzip garbage", withCodec(1, three.Records())},
		{"gzip bad checksum", withCodec(1, badGzipCRC)},
		{"gzip truncated", withCodec(1, gzipped.Records()[:len(gzipped.Records())-4])},
		{"snappy garbage", withCodec(2, []byte{5, 0xfe, 1, 2})},
		{"snappy raw truncated", withCodec(2, compressed(t, three, compressions()[3]).Records()[:10])},
		{"xerial block past the end", withCodec(2, xerialCut[:len(xerialCut)-1])},
		{"xerial partial length", withCodec(2, append(slices.Clone(xerialCut), 0, 0))},
		{"lz4 garbage", withCodec(3, three.Records())},
		{"lz4 truncated", withCodec(3, compressed(t, three, compressions()[5]).Records()[:20])},
		{"zstd garbage", withCodec(4, three.Records())},
		{"zstd truncated", withCodec(4, compressed(t, three, compressions()[7]).Records()[:12])},
		{"compressed, count off", setUint32(setUint32(gzipped, atRecordCount, 4), atLastOffsetDelta, 3)},
		{"control with two records", controlBatch(controlKey(0, 1), 2)},
		{"control key of 3 bytes", controlBatch([]byte{0, 0, 1}, 1)},
		{"control key of 5 bytes", controlBatch([]byte{0, 0, 0, 1, 0}, 1)},
		{"control key null", controlBatch(nil, 1)},
		{"control key version 1", controlBatch(controlKey(1, 1), 1)},
		{"control key version -1", controlBatch(controlKey(-1, 0), 1)},
		{"control type 2", controlBatch(controlKey(0, 2), 1)},
		{"control type -1", controlBatch(controlKey(0, -1), 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := records.Validate(tc.batch, 0)
			if !errors.Is(err, rb.ErrCorrupt) || errors.Is(err, records.ErrTooLarge) {
				t.Fatalf("Validate: %v, want ErrCorrupt", err)
			}
			t.Log(err)
		})
	}
}

func TestControlType(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch rb.Batch
		want  int16 // -1: an error
	}{
		{"commit", controlBatch(controlKey(0, 1), 1), records.ControlCommit},
		{"abort", controlBatch(controlKey(0, 0), 1), records.ControlAbort},
		{"gzipped commit", compressed(t, controlBatch(controlKey(0, 1), 1), compressions()[1]), records.ControlCommit},
		{"data batch", validBatch(), -1},
		{"two records", controlBatch(controlKey(0, 1), 2), -1},
		{"type 3", controlBatch(controlKey(0, 3), 1), -1},
		{"version 2", controlBatch(controlKey(2, 0), 1), -1},
		{"short key", controlBatch([]byte{0, 0}, 1), -1},
		{"trailing bytes", func() rb.Batch {
			b := controlBatch(controlKey(0, 1), 1)
			return withSection(b, rb.CodecNone, append(slices.Clone(b.Records()), 0))
		}(), -1},
		{"truncated header", controlBatch(controlKey(0, 1), 1)[:40], -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := records.ControlType(tc.batch)
			if tc.want < 0 {
				if !errors.Is(err, rb.ErrCorrupt) {
					t.Fatalf("ControlType = %d, %v; want ErrCorrupt", got, err)
				}
				t.Log(err)
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ControlType = %d, %v; want %d", got, err, tc.want)
			}
			if err := records.Validate(tc.batch, 0); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestFirstAtOrAfter(t *testing.T) {
	// Base offset 100, base timestamp 1000; records at 1000, 1010, 1005, 1030.
	spec := rb.Spec{BaseOffset: 100, BaseTimestamp: 1_000, ProducerID: -1, Records: []rb.Record{
		{Value: []byte("a"), TimestampDelta: 0},
		{Value: []byte("b"), TimestampDelta: 10},
		{Value: []byte("c"), TimestampDelta: 5},
		{Value: []byte("d"), TimestampDelta: 30},
	}}
	plain := rb.Batch(rb.Append(nil, spec))
	zstd := compressed(t, plain, compressions()[7])
	appendTime := withLogAppendTime(plain, 5_000)
	// After compaction: offset deltas 0 and 3 remain, lastOffsetDelta 3.
	thinned := setUint32(batchOf(sectionOf(
		rawRecord{record: kmsg.Record{OffsetDelta: 0, TimestampDelta64: 0, Value: []byte("a")}},
		rawRecord{record: kmsg.Record{OffsetDelta: 3, TimestampDelta64: 30, Value: []byte("d")}},
	), 2), atLastOffsetDelta, 3)
	thinned = rb.Batch(slices.Clone(thinned))
	binary.BigEndian.PutUint64(thinned[atMaxTimestamp:], 1_030)
	thinned.SetCRC(thinned.ComputeCRC())
	// A batch whose header understates its max timestamp: Kafka skips it.
	understated := setUint32(plain, atMaxTimestamp+4, 1_010)

	type want struct {
		offset    rb.Offset
		timestamp int64
		found     bool
	}
	for _, tc := range []struct {
		name   string
		batch  rb.Batch
		target int64
		from   rb.Offset // the log start offset
		want   want
	}{
		{"before all", plain, 0, 0, want{100, 1_000, true}},
		{"min int64", plain, math.MinInt64, 0, want{100, 1_000, true}},
		{"at the first", plain, 1_000, 0, want{100, 1_000, true}},
		{"just after the first", plain, 1_001, 0, want{101, 1_010, true}},
		{"first in order, not the least above", plain, 1_004, 0, want{101, 1_010, true}},
		{"at the last", plain, 1_030, 0, want{103, 1_030, true}},
		{"after the max", plain, 1_031, 0, want{}},
		{"max int64", plain, math.MaxInt64, 0, want{}},
		{"zstd", zstd, 1_011, 0, want{103, 1_030, true}},
		{"log append time, before", appendTime, 4_000, 0, want{100, 5_000, true}},
		{"log append time, at", appendTime, 5_000, 0, want{100, 5_000, true}},
		{"log append time, after", appendTime, 5_001, 0, want{}},
		{"log append time below the record times", withLogAppendTime(plain, 900), 1_000, 0, want{}},
		{"compacted", thinned, 1_001, 0, want{103, 1_030, true}},
		{"understated max timestamp", understated, 1_030, 0, want{}},
		{"log start inside the batch", plain, 0, 102, want{102, 1_005, true}},
		{"log start past the match", plain, 1_010, 102, want{103, 1_030, true}},
		{"log start past every match", plain, 1_030, 104, want{}},
		{"log start in a compaction gap", thinned, 0, 101, want{103, 1_030, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			offset, timestamp, found, err := records.FirstAtOrAfter(tc.batch, tc.target, tc.from, 0)
			if got := (want{offset, timestamp, found}); err != nil || got != tc.want {
				t.Fatalf("FirstAtOrAfter(%d) = %+v, %v; want %+v", tc.target, got, err, tc.want)
			}
		})
	}

	broken := batchOf(sectionOf(good(0), rawRecord{body: []byte{0, 0x80}}), 2)
	binary.BigEndian.PutUint64(broken[atMaxTimestamp:], math.MaxInt64)
	if _, _, found, err := records.FirstAtOrAfter(broken, 1_000_000, 0, 0); !errors.Is(err, rb.ErrCorrupt) || found {
		t.Fatalf("broken second record: found %v, err %v; want ErrCorrupt", found, err)
	}
	if _, _, found, err := records.FirstAtOrAfter(broken, 0, 0, 0); err != nil || !found {
		t.Fatalf("broken second record, first matches: found %v, err %v", found, err)
	}
}

func TestIsMirrorPIDReset(t *testing.T) {
	reset := func(producerID int64, kind int16, control bool) rb.Batch {
		key := []byte{0, 0, byte(uint16(kind) >> 8), byte(kind)}
		return rb.Batch(rb.Append(nil, rb.Spec{ProducerID: producerID, ProducerEpoch: -1, BaseSequence: -1, Control: control,
			Records: []rb.Record{{Key: key, Value: []byte{0, 0, 0, 0, 0, 0}}}}))
	}
	for _, tc := range []struct {
		name  string
		batch rb.Batch
		want  bool
	}{
		{"reset", reset(-1, records.ControlMirrorPIDReset, true), true},
		{"abort marker", reset(-1, records.ControlAbort, true), false},
		{"with a producer ID", reset(7, records.ControlMirrorPIDReset, true), false},
		{"not a control batch", reset(-1, records.ControlMirrorPIDReset, false), false},
		{"short", reset(-1, records.ControlMirrorPIDReset, true)[:20], false},
	} {
		if got := records.IsMirrorPIDReset(tc.batch); got != tc.want {
			t.Errorf("%s: IsMirrorPIDReset = %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := records.ControlType(reset(-1, records.ControlMirrorPIDReset, true)); !errors.Is(err, rb.ErrCorrupt) {
		t.Errorf("ControlType of a MIRROR_PID_RESET batch: %v, want ErrCorrupt (not a transaction marker)", err)
	}
}
