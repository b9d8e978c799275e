package records

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/mirrord/mirrord/recordbatch"
)

// TestBudget: seeded goroutines take and return random amounts; the
// budget never holds more than its capacity, serves every one (a request
// larger than the capacity is clamped to it) and ends empty.
func TestBudget(t *testing.T) {
	const capacity, workers, rounds = 1000, 8, 200
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	b := newBudget(capacity)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			random := rand.New(rand.NewPCG(seed, uint64(w)))
			for range rounds {
				n := b.acquire(random.Int64N(capacity + 200))
				if n > capacity {
					t.Errorf("took %d of a budget of %d", n, capacity)
				}
				b.release(n)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("budget waiters not served within 30 s")
	}
	if b.used != 0 || len(b.waiters) != 0 || b.peak > capacity {
		t.Fatalf("after the rounds: used %d, %d waiters, peak %d of %d", b.used, len(b.waiters), b.peak, capacity)
	}
}

// TestDecompressBudget validates raw snappy batches (one block, decoded
// whole) of 24 MiB from eight goroutines with a budget of 48 MiB: all
// validate, the budget never holds more than 48 MiB, and it ends empty.
// Without the budget the eight would hold 192 MiB at once.
func TestDecompressBudget(t *testing.T) {
	const capacity, workers = 48 << 20, 8
	saved := decompressed
	decompressed = newBudget(capacity)
	defer func() { decompressed = saved }()

	value := make([]byte, 1<<20)
	spec := recordbatch.Spec{BaseTimestamp: 1, ProducerID: -1, BaseSequence: -1}
	for range 24 {
		spec.Records = append(spec.Records, recordbatch.Record{Key: []byte("k"), Value: value})
	}
	plain := recordbatch.Batch(recordbatch.Append(nil, spec))
	b := append(recordbatch.Batch(nil), plain[:recordbatch.HeaderSize]...)
	b = append(b, s2.EncodeSnappy(nil, plain.Records())...)
	b[22] = b[22]&^0x07 | byte(recordbatch.CodecSnappy)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-recordbatch.LengthPrefixSize))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			if err := Validate(b, 0); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
	wg.Wait()
	if decompressed.used != 0 || decompressed.peak > capacity || decompressed.peak < int64(len(plain.Records())) {
		t.Fatalf("used %d, peak %d: want 0, and a peak between one section (%d) and the capacity %d",
			decompressed.used, decompressed.peak, len(plain.Records()), capacity)
	}
	t.Logf("peak %d bytes held of a %d budget, sections of %d", decompressed.peak, capacity, len(plain.Records()))
}
