package records_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
)

// fuzzLimit keeps each fuzz input's decompressed records small.
const fuzzLimit = 1 << 20

// fuzzSeeds are small valid batches of every codec, control batches and
// a few broken ones.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	plain := rb.Batch(rb.Append(nil, sampleSpec(4, 3, 20)))
	for _, c := range compressions() {
		seeds = append(seeds, compressed(f, plain, c))
	}
	seeds = append(seeds,
		controlBatch(controlKey(0, 1), 1),
		controlBatch(controlKey(0, 5), 1),
		batchOf(sectionOf(good(0), good(1), good(2)), 3),
		batchOf(sectionOf(rawRecord{body: bodyWith(0, 2, 'k', 2, 'v', 2, 2, 'h', 0)}), 1),
		batchOf(sectionOf(good(0), good(2)), 2),
		nil, make([]byte, rb.HeaderSize),
	)
	return seeds
}

// checkValidated asserts what Validate's success promises: the section
// decompresses within the limit and holds exactly recordCount records
// with offset deltas 0, 1, 2, ..., which FirstAtOrAfter and ControlType
// agree with.
func checkValidated(t *testing.T, b rb.Batch) {
	section, err := records.Decompress(nil, b, fuzzLimit)
	if err != nil || len(section) > fuzzLimit {
		t.Fatalf("validated, but Decompress: %d bytes, %v", len(section), err)
	}
	it := records.NewIter(section)
	for it.Next() {
		if int(it.Record().OffsetDelta) != it.Index()-1 || it.Position() > len(section) {
			t.Fatalf("validated, but record %d has offset delta %d", it.Index()-1, it.Record().OffsetDelta)
		}
	}
	if it.Err() != nil || it.Index() != int(b.RecordCount()) || it.Position() != len(section) {
		t.Fatalf("validated, but iterating: %d of %d records, %d of %d bytes, %v", it.Index(), b.RecordCount(), it.Position(), len(section), it.Err())
	}
	if b.Control() {
		if _, err := records.ControlType(b); err != nil {
			t.Fatalf("validated control batch, but ControlType: %v", err)
		}
	}
	offset, _, found, err := records.FirstAtOrAfter(b, math.MinInt64, math.MinInt64, fuzzLimit)
	if err != nil || !found || offset != b.BaseOffset() {
		t.Fatalf("validated, but FirstAtOrAfter(min) = %d, %v, %v", offset, found, err)
	}
}

func checkError(t *testing.T, what string, err error) {
	if err != nil && !errors.Is(err, rb.ErrCorrupt) && !errors.Is(err, records.ErrTooLarge) {
		t.Fatalf("%s: %v wraps neither ErrCorrupt nor ErrTooLarge", what, err)
	}
}

// FuzzValidate wraps any bytes as a batch, as they are and with their
// length and magic repaired so that the fuzzer reaches the records. No
// input may panic, exceed the limit or fail with an unnamed error.
func FuzzValidate(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		batches := []rb.Batch{input}
		if len(input) >= rb.HeaderSize {
			repaired := slices.Clone(input)
			binary.BigEndian.PutUint32(repaired[atBatchLength:], uint32(len(input)-rb.LengthPrefixSize))
			repaired[16] = rb.Magic
			batches = append(batches, repaired)
		}
		for _, b := range batches {
			err := records.Validate(b, fuzzLimit)
			checkError(t, "Validate", err)
			if err == nil {
				checkValidated(t, b)
			}
			_, err = records.ControlType(b)
			checkError(t, "ControlType", err)
			_, _, _, err = records.FirstAtOrAfter(b, 0, math.MinInt64, fuzzLimit)
			checkError(t, "FirstAtOrAfter", err)
		}
	})
}

// FuzzRecordsRoundTrip builds a batch with rb.Append from records cut out
// of the input, compresses it with the codec chosen, and checks that it
// validates and iterates back to the same records.
func FuzzRecordsRoundTrip(f *testing.F) {
	f.Add([]byte("key\x00value\x00\x01k2\x00\x00"), uint8(0), int64(5))
	f.Add(bytes.Repeat([]byte("abc\x00"), 50), uint8(4), int64(-1))
	f.Add([]byte{}, uint8(2), int64(0))
	f.Add([]byte("\x01\x01\x01"), uint8(9), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, input []byte, codec uint8, timestampStep int64) {
		var spec rb.Spec
		spec.BaseOffset, spec.BaseTimestamp, spec.ProducerID = 42, 1_000, -1
		// Fields are separated by 0; a field of one byte 1 is null.
		fields := bytes.Split(input, []byte{0})
		for i := 0; i+1 < len(fields) && len(spec.Records) < 1000; i += 2 {
			field := func(b []byte) []byte {
				if len(b) == 1 && b[0] == 1 {
					return nil
				}
				return b
			}
			spec.Records = append(spec.Records, rb.Record{Key: field(fields[i]), Value: field(fields[i+1]), TimestampDelta: int64(len(spec.Records)) * timestampStep})
		}
		if len(spec.Records) == 0 {
			spec.Records = []rb.Record{{Value: input}}
		}
		all := compressions()
		c := all[int(codec)%len(all)]
		b := compressed(t, rb.Append(nil, spec), c)
		if err := records.Validate(b, 0); err != nil {
			t.Fatalf("%s: Validate: %v", c.name, err)
		}
		section, err := records.Decompress(nil, b, 0)
		if err != nil {
			t.Fatalf("%s: Decompress: %v", c.name, err)
		}
		it := records.NewIter(section)
		for i, want := range spec.Records {
			if !it.Next() {
				t.Fatalf("record %d: %v", i, it.Err())
			}
			got := it.Record()
			if int(got.OffsetDelta) != i || got.TimestampDelta != want.TimestampDelta || got.HeaderCount != 0 ||
				!bytes.Equal(got.Key, want.Key) || (got.Key == nil) != (want.Key == nil) ||
				!bytes.Equal(got.Value, want.Value) || (got.Value == nil) != (want.Value == nil) {
				t.Fatalf("record %d: got %+v, want %+v", i, got, want)
			}
		}
		if it.Next() || it.Err() != nil {
			t.Fatalf("after %d records: another, or %v", len(spec.Records), it.Err())
		}
	})
}
