package records_test

import (
	"errors"
	"runtime"
	"testing"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
)

// bombAllocMax bounds the bytes one validation of a compressed batch may
// allocate, whatever its records decompress to: the largest codec state
// (a zstd decoder's window ring, records.ZstdWindowMax plus two blocks;
// an lz4 frame's two 4 MiB block buffers) made afresh, as it is when the
// race detector or a GC has emptied the pools, plus the section buffer.
const bombAllocMax = 12 << 20

// bombSpec is records of valueBytes zeros each, totalling about total
// bytes: they compress to almost nothing.
func bombSpec(total, valueBytes int) rb.Spec {
	zeros := make([]byte, valueBytes)
	spec := rb.Spec{BaseTimestamp: 1_700_000_000_000, ProducerID: -1, BaseSequence: -1}
	for range total / valueBytes {
		spec.Records = append(spec.Records, rb.Record{Key: []byte("k"), Value: zeros})
	}
	return spec
}

// allocated runs f and returns the bytes the process allocated meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestValidateBombMemory validates, at the node's limit (DefaultLimit,
// 64 MiB), batches whose records decompress to 100 MiB (one record of
// zeros, refused as too large: 11 KB as a zstd stream) and to 24 MiB
// (valid, records of 1 MiB), in every codec and
// framing whose decompression streams. Each validation must allocate
// less than bombAllocMax: records are checked as they decompress, never
// held whole. Raw snappy is one block that cannot be decoded in parts; it
// is bounded by the decompression budget instead (TestDecompressBudget).
func TestValidateBombMemory(t *testing.T) {
	shapes := []struct {
		name string
		spec rb.Spec
		want error
	}{
		{"100 MiB of zeros", rb.Spec{BaseTimestamp: 1, ProducerID: -1, BaseSequence: -1, Records: []rb.Record{{Value: make([]byte, 100<<20)}}}, records.ErrTooLarge},
		{"24 MiB of 1 MiB records", bombSpec(24<<20, 1<<20), nil},
	}
	for _, shape := range shapes {
		plain := rb.Batch(rb.Append(nil, shape.spec))
		for _, c := range compressions()[1:] {
			if c.name == "snappy kgo raw" {
				continue
			}
			t.Run(shape.name+"/"+c.name, func(t *testing.T) {
				b := compressed(t, plain, c)
				var err error
				bytes := allocated(func() { err = records.Validate(b, 0) })
				if !errors.Is(err, shape.want) || shape.want == nil && err != nil {
					t.Fatalf("Validate: %v, want %v", err, shape.want)
				}
				t.Logf("%d compressed bytes, %d decompressed: allocated %d bytes (%v)", len(b), len(plain.Records()), bytes, err)
				if bytes > bombAllocMax {
					t.Errorf("validating %d compressed bytes allocated %d bytes, want at most %d", len(b), bytes, bombAllocMax)
				}
			})
		}
	}
}
