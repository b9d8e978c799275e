package records

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/mirrord/mirrord/recordbatch"
)

// validateWhole is Validate as it was before it streamed: decompress the
// section whole, then walk it with Iter. The streaming reader must give
// the same answer, error text included.
func validateWhole(b recordbatch.Batch, limit int, check *TimestampCheck) ([]RecordError, error) {
	if err := checkFraming(b); err != nil {
		return nil, err
	}
	count := b.RecordCount()
	section, err := Decompress(nil, b, limit)
	if err != nil {
		return nil, err
	}
	var refused []RecordError
	it := NewIter(section)
	for i := range count {
		if !it.Next() {
			if err := it.Err(); err != nil {
				return nil, fmt.Errorf("records: base offset %d: %w", b.BaseOffset(), err)
			}
			return nil, corrupt(b, "%d records, header counts %d", i, count)
		}
		record := it.Record()
		if record.OffsetDelta != i {
			return nil, corrupt(b, "record %d at byte %d has offset delta %d, want %d", i, it.Position(), record.OffsetDelta, i)
		}
		if b.Control() {
			if _, err := controlType(b, len(record.Key), record.Key, false); err != nil {
				return nil, err
			}
		}
		if check.CompactedPartition != "" && record.Key == nil {
			refused = append(refused, RecordError{Index: i, Message: "no key"})
		} else if message := check.refuse(b, record.TimestampDelta, record.OffsetDelta, len(record.Key), len(record.Value)); message != "" {
			refused = append(refused, RecordError{Index: i, Message: message, Timestamp: true})
		}
	}
	if it.Position() != len(section) {
		return nil, corrupt(b, "%d bytes after the %d records the header counts", len(section)-it.Position(), count)
	}
	return refused, nil
}

// FuzzStreamingMatchesWhole gives arbitrary records sections, plain and
// gzipped, to the streaming validator with buffers of 16 bytes to 64 KiB
// (so that records run past the buffer, the path large records take) and
// to validateWhole: the answers must be the same.
func FuzzStreamingMatchesWhole(f *testing.F) {
	f.Add([]byte{}, int32(1), uint8(0), false)
	good := recordbatch.Append(nil, recordbatch.Spec{BaseTimestamp: 5, ProducerID: -1, BaseSequence: -1, Records: []recordbatch.Record{
		{Key: []byte("key"), Value: bytes.Repeat([]byte("v"), 40)}, {Value: []byte("w")}, {Key: bytes.Repeat([]byte("k"), 30)}}})
	section := recordbatch.Batch(good).Records()
	f.Add(section, int32(3), uint8(0), true)
	f.Add(section, int32(2), uint8(1), false)
	f.Add(section[:len(section)-3], int32(3), uint8(2), true)
	f.Add(append(slices.Clone(section), 0, 1), int32(3), uint8(3), false)
	f.Fuzz(func(t *testing.T, section []byte, count int32, bufferLog uint8, gzipped bool) {
		b := recordbatch.Batch(recordbatch.Append(nil, recordbatch.Spec{BaseOffset: 7, BaseTimestamp: 1000, ProducerID: -1, BaseSequence: -1,
			Records: []recordbatch.Record{{}}}))
		b = b[:recordbatch.HeaderSize]
		codec := recordbatch.CodecNone
		if gzipped {
			var out bytes.Buffer
			w := gzip.NewWriter(&out)
			_, _ = w.Write(section)
			_ = w.Close()
			section, codec = out.Bytes(), recordbatch.CodecGzip
		}
		b = append(b, section...)
		b[22] = b[22]&^0x07 | byte(codec)
		binary.BigEndian.PutUint32(b[8:], uint32(len(b)-recordbatch.LengthPrefixSize))
		binary.BigEndian.PutUint32(b[57:], uint32(count))
		binary.BigEndian.PutUint32(b[23:], uint32(count-1))
		if count <= 0 {
			return
		}
		const limit = 1 << 20
		check := TimestampCheck{Now: 2000, BeforeMax: 500, AfterMax: math.MaxInt64}
		wantRefused, wantErr := validateWhole(b, limit, &check)
		r := &sectionReader{own: make([]byte, 16<<(bufferLog%13))}
		r.open(b, limit)
		defer r.close()
		gotRefused, gotErr := validateRecords(r, count, &check, nil)
		if gotErr != nil {
			gotRefused = nil
		}
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || len(gotRefused) != len(wantRefused) {
			t.Fatalf("buffer %d: streaming %v, %d refused; whole %v, %d refused", len(r.own), gotErr, len(gotRefused), wantErr, len(wantRefused))
		}
	})
}
