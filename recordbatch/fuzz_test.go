package recordbatch_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mirrord/mirrord/recordbatch"
)

// fuzzSeeds are valid buffers from Append plus truncated and corrupted ones.
func fuzzSeeds(f *testing.F) [][]byte {
	seeds := [][]byte{nil, {0}, make([]byte, 12), make([]byte, headerBytes)}
	var buf []byte // all small batches back to back
	first := 0
	for _, tc := range specCases() {
		if tc.name == "several records" {
			// Its 9000-byte value makes the fuzzer spend its time
			// minimizing instead of exploring.
			continue
		}
		raw := recordbatch.Append(nil, tc.spec)
		seeds = append(seeds, raw)
		first = len(buf)
		buf = append(buf, raw...)
	}
	seeds = append(seeds, buf, buf[:first], buf[:first+headerBytes], buf[:len(buf)-1], buf[:11], buf[:20])
	corrupt := func(mutate func(raw []byte)) {
		raw := bytes.Clone(buf)
		mutate(raw[first:])
		seeds = append(seeds, raw)
	}
	corrupt(func(raw []byte) { raw[atMagic] = 1 })
	corrupt(func(raw []byte) { raw[len(raw)-1] ^= 0x10 })
	corrupt(func(raw []byte) { raw[atAttributes] ^= 0x01 })
	corrupt(func(raw []byte) { putUint32(raw, atBatchLength, 10) })
	corrupt(func(raw []byte) { putUint32(raw, atBatchLength, 1<<31-1) })
	corrupt(func(raw []byte) {
		putUint32(raw, atLastOffsetDelta, 1<<31)
		putUint32(raw, atCRC, crcOf(raw))
	})
	return seeds
}

func FuzzIter(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, input []byte, verify bool) {
		it := recordbatch.NewIter(input, verify)
		var batches []recordbatch.Batch
		sum := 0
		for it.Next() {
			b := it.Batch()
			if len(batches) >= len(input)/headerBytes {
				t.Fatalf("more than %d batches in %d bytes", len(batches), len(input))
			}
			if it.Position() != sum || it.Consumed() != sum+b.Size() || &b[0] != &input[sum] {
				t.Fatalf("batch %d at %d (consumed %d), previous batches end at %d", len(batches), it.Position(), it.Consumed(), sum)
			}
			if b.Size() != 12+int(b.BatchLength()) || b.Magic() != 2 || b.LastOffset() < b.BaseOffset() || b.BaseOffset() < 0 {
				t.Fatalf("batch %d: size %d, batch length %d, magic %d, offsets %d..%d",
					len(batches), b.Size(), b.BatchLength(), b.Magic(), b.BaseOffset(), b.LastOffset())
			}
			if verify {
				if err := b.Verify(); err != nil {
					t.Fatalf("batch %d yielded with verify but Verify: %v", len(batches), err)
				}
			}
			sum += b.Size()
			batches = append(batches, b)
		}
		consumed, err := it.Consumed(), it.Err()
		if consumed != sum || consumed > len(input) {
			t.Fatalf("consumed %d, batches hold %d, input %d", consumed, sum, len(input))
		}
		if err == nil && consumed != len(input) {
			t.Fatalf("clean end after %d of %d bytes", consumed, len(input))
		}
		if err != nil && !errors.Is(err, recordbatch.ErrTruncated) && !errors.Is(err, recordbatch.ErrCorrupt) {
			t.Fatalf("Err %v wraps neither sentinel", err)
		}
		if it.Next() || it.Consumed() != consumed || it.Err() != err {
			t.Fatalf("Next after the end moved: consumed %d, Err %v", it.Consumed(), it.Err())
		}

		again := recordbatch.NewIter(input[:consumed], verify)
		count := 0
		for again.Next() {
			if count >= len(batches) || !bytes.Equal(again.Batch(), batches[count]) {
				t.Fatalf("re-iterating the consumed prefix: batch %d differs", count)
			}
			count++
		}
		if count != len(batches) || again.Err() != nil || again.Consumed() != consumed {
			t.Fatalf("re-iterating %d bytes: %d of %d batches, consumed %d, Err %v", consumed, count, len(batches), again.Consumed(), again.Err())
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		b, err := recordbatch.Parse(input)
		if err != nil {
			if b != nil {
				t.Fatalf("Parse returned %d bytes with Err %v", len(b), err)
			}
			if !errors.Is(err, recordbatch.ErrTruncated) && !errors.Is(err, recordbatch.ErrCorrupt) {
				t.Fatalf("Err %v wraps neither sentinel", err)
			}
			return
		}
		if b.Size() > len(input) || b.Size() != 12+int(b.BatchLength()) {
			t.Fatalf("batch of %d bytes (batch length %d) from %d bytes", b.Size(), b.BatchLength(), len(input))
		}
		if b.Size() < headerBytes || b.Size() > recordbatch.MaxBatchSize || cap(b) != len(b) || &b[0] != &input[0] {
			t.Fatalf("batch of %d bytes, cap %d, aliases input %v", b.Size(), cap(b), &b[0] == &input[0])
		}
		if b.Magic() != 2 || b.LastOffsetDelta() < 0 || b.BaseOffset() < 0 || b.LastOffset() < b.BaseOffset() {
			t.Fatalf("magic %d, offsets %d..%d", b.Magic(), b.BaseOffset(), b.LastOffset())
		}
		exact, err := recordbatch.Parse(input[:b.Size()])
		if err != nil || !bytes.Equal(exact, b) {
			t.Fatalf("Parse of the batch alone: %v", err)
		}
		if verified := b.Verify() == nil; verified != (b.ComputeCRC() == b.CRC()) {
			t.Fatalf("Verify ok %v, CRC %08x, computed %08x", verified, b.CRC(), b.ComputeCRC())
		}
	})
}
