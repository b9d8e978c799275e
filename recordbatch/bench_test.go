package recordbatch_test

import (
	"bytes"
	"testing"

	"github.com/mirrord/mirrord/recordbatch"
)

const (
	benchBatchBytes  = 16 << 10
	benchBufferBytes = 1 << 20
	benchBatches     = benchBufferBytes / benchBatchBytes
	benchValueBytes  = 1 << 10
)

// appendSized appends a batch of exactly size bytes: 1 KiB records, the
// last one shortened to fit.
func appendSized(tb testing.TB, dst []byte, base recordbatch.Offset, size int) []byte {
	tb.Helper()
	value := bytes.Repeat([]byte{'v'}, size)
	spec := recordbatch.Spec{BaseOffset: base, LeaderEpoch: 1, BaseTimestamp: 1_700_000_000_000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	for len(recordbatch.Append(nil, spec)) < size-2*benchValueBytes {
		spec.Records = append(spec.Records, recordbatch.Record{Key: []byte("key"), Value: value[:benchValueBytes], TimestampDelta: int64(len(spec.Records))})
	}
	spec.Records = append(spec.Records, recordbatch.Record{})
	last := &spec.Records[len(spec.Records)-1]
	for n := 2 * benchValueBytes; n >= 0; n-- {
		last.Value = value[:n]
		if got := len(recordbatch.Append(nil, spec)); got == size {
			return recordbatch.Append(dst, spec)
		}
	}
	tb.Fatalf("no batch of exactly %d bytes", size)
	return nil
}

// benchBuffer is 1 MiB of valid 16 KiB batches with consecutive offsets.
func benchBuffer(tb testing.TB) []byte {
	tb.Helper()
	buf := make([]byte, 0, benchBufferBytes)
	next := recordbatch.Offset(0)
	for range benchBatches {
		start := len(buf)
		buf = appendSized(tb, buf, next, benchBatchBytes)
		next = recordbatch.Batch(buf[start:]).NextOffset()
	}
	if len(buf) != benchBufferBytes {
		tb.Fatalf("buffer of %d bytes, want %d", len(buf), benchBufferBytes)
	}
	return buf
}

// iterate walks buf and returns the number of batches; it must not allocate.
func iterate(buf []byte, verify bool) (int, error) {
	it := recordbatch.NewIter(buf, verify)
	count := 0
	for it.Next() {
		count++
	}
	return count, it.Err()
}

func TestIterZeroAllocs(t *testing.T) {
	buf := benchBuffer(t)
	for _, verify := range []bool{false, true} {
		allocs := testing.AllocsPerRun(20, func() {
			if count, err := iterate(buf, verify); err != nil || count != benchBatches {
				t.Fatalf("verify=%v: %d batches, Err %v", verify, count, err)
			}
		})
		if allocs != 0 {
			t.Fatalf("verify=%v: %v allocations per iteration of a valid buffer, want 0", verify, allocs)
		}
	}
	parseAllocs := testing.AllocsPerRun(100, func() {
		b, err := recordbatch.Parse(buf)
		if err != nil || b.Verify() != nil {
			t.Fatalf("Parse/Verify: %v", err)
		}
	})
	if parseAllocs != 0 {
		t.Fatalf("%v allocations per Parse+Verify, want 0", parseAllocs)
	}
}

func benchmarkIter(b *testing.B, verify bool) {
	buf := benchBuffer(b)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if count, err := iterate(buf, verify); err != nil || count != benchBatches {
			b.Fatalf("%d batches, Err %v", count, err)
		}
	}
}

func BenchmarkIterVerify(b *testing.B)   { benchmarkIter(b, true) }
func BenchmarkIterNoVerify(b *testing.B) { benchmarkIter(b, false) }

func BenchmarkParse(b *testing.B) {
	buf := benchBuffer(b)
	b.SetBytes(benchBatchBytes)
	b.ReportAllocs()
	for b.Loop() {
		if batch, err := recordbatch.Parse(buf); err != nil || batch.Size() != benchBatchBytes {
			b.Fatalf("Parse: %v", err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	batch, err := recordbatch.Parse(benchBuffer(b))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(batch.Size()))
	b.ReportAllocs()
	for b.Loop() {
		if err := batch.Verify(); err != nil {
			b.Fatal(err)
		}
	}
}
