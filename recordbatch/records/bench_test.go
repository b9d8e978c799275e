package records_test

import (
	"math"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
)

// benchBatches are 1 MiB of records (about 1000 of 1 KiB) in each way a
// client compresses them.
func benchBatches(tb testing.TB) (plainBytes int, batches []rb.Batch, names []string) {
	plain := rb.Batch(rb.Append(nil, sampleSpec(5, 1000, 1000)))
	for _, c := range compressions() {
		batches = append(batches, compressed(tb, plain, c))
		names = append(names, c.name)
	}
	return len(plain.Records()), batches, names
}

// BenchmarkValidate reports throughput in decompressed record bytes.
func BenchmarkValidate(b *testing.B) {
	size, batches, names := benchBatches(b)
	for i, batch := range batches {
		b.Run(names[i], func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := records.Validate(batch, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size)/float64(len(batch.Records())), "ratio")
		})
	}
}

func BenchmarkFirstAtOrAfter(b *testing.B) {
	size, batches, names := benchBatches(b)
	for i, batch := range batches {
		b.Run(names[i], func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, found, err := records.FirstAtOrAfter(batch, batch.MaxTimestamp(), 0, 0); err != nil || !found {
					b.Fatal(found, err)
				}
			}
		})
	}
}

// TestValidateAllocs pins Validate's allocations on the hot path at zero
// for every codec once the pools are warm. The race detector drops pooled
// items on purpose, so the test does not run under it.
func TestValidateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	_, batches, names := benchBatches(t)
	for i, batch := range batches {
		if err := records.Validate(batch, 0); err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		allocs := testing.AllocsPerRun(20, func() {
			if err := records.Validate(batch, 0); err != nil {
				t.Fatalf("%s: %v", names[i], err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per Validate, want 0", names[i], allocs)
		}
		// Produce's path: with timestamps checked, a valid batch allocates
		// nothing either.
		check := records.TimestampCheck{Now: time.Now().UnixMilli(), BeforeMax: math.MaxInt64, AfterMax: math.MaxInt64}
		allocs = testing.AllocsPerRun(20, func() {
			if refused, err := records.ValidateProduce(batch, 0, &check, nil); err != nil || len(refused) > 0 {
				t.Fatalf("%s: %v %v", names[i], refused, err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per ValidateProduce, want 0", names[i], allocs)
		}
	}
	control := controlBatch(controlKey(0, 1), 1)
	if allocs := testing.AllocsPerRun(20, func() { _, _ = records.ControlType(control) }); allocs != 0 {
		t.Errorf("ControlType: %.1f allocations, want 0", allocs)
	}
}
