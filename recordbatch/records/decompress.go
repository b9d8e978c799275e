package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/mirrord/mirrord/recordbatch"
)

// DefaultLimit bounds decompressed records when the caller passes a limit
// <= 0: twice the largest message.max.bytes one would configure.
const DefaultLimit = 64 << 20

// limitMax caps any limit: Kafka's sizes are int32.
const limitMax = math.MaxInt32

// ErrTooLarge: a batch's records decompress to more than the limit.
var ErrTooLarge = errors.New("records: decompressed records over the limit")

func normalizeLimit(limit int) int {
	if limit <= 0 {
		return DefaultLimit
	}
	return min(limit, limitMax)
}

// Decompress returns the records section of b, decompressed. When b is
// uncompressed that is b.Records() itself, aliasing b, and dst is unused.
// Otherwise dst supplies only capacity: the result starts at dst[:0] and
// grows past it as needed. At most limit bytes are produced (DefaultLimit
// when limit <= 0); more is an error wrapping ErrTooLarge. b's header must
// be whole (at least recordbatch.HeaderSize bytes).
func Decompress(dst []byte, b recordbatch.Batch, limit int) ([]byte, error) {
	limit = normalizeLimit(limit)
	src := b.Records()
	var out []byte
	var err error
	switch b.Codec() {
	case recordbatch.CodecNone:
		return src, nil
	case recordbatch.CodecGzip:
		out, err = decompressGzip(dst[:0], src, limit)
	case recordbatch.CodecSnappy:
		out, err = decompressSnappy(dst[:0], src, limit)
	case recordbatch.CodecLZ4:
		out, err = decompressLZ4(dst[:0], src, limit)
	case recordbatch.CodecZstd:
		out, err = decompressZstd(dst[:0], src, limit)
	default:
		return nil, corrupt(b, "unknown compression codec %d", uint8(b.Codec()))
	}
	switch {
	case errors.Is(err, errTooLarge) || err == nil && len(out) > limit:
		return nil, fmt.Errorf("records: base offset %d: %w: %s records of %d compressed bytes decompress to more than %d bytes",
			b.BaseOffset(), ErrTooLarge, b.Codec(), len(src), limit)
	case err != nil:
		return nil, fmt.Errorf("records: base offset %d: %w: %s decompression of %d bytes: %w",
			b.BaseOffset(), recordbatch.ErrCorrupt, b.Codec(), len(src), err)
	}
	return out, nil
}

// errTooLarge is what the codec functions report; Decompress turns it
// into an error naming the batch.
var errTooLarge = errors.New("over the limit")

// readBounded reads r to its end into dst[:0], failing with errTooLarge
// past limit bytes. Every Read either makes progress or ends the loop,
// except a Read returning (0, nil), which io.Reader allows but bounds here.
func readBounded(dst []byte, r io.Reader, limit int) ([]byte, error) {
	const emptyReadsMax = 100
	dst = dst[:0]
	for emptyReads := 0; emptyReads < emptyReadsMax; {
		if len(dst) == cap(dst) {
			if len(dst) > limit {
				return nil, errTooLarge
			}
			// Double, from 64 KiB, but never past limit+1: one byte
			// beyond the limit is enough to know it was crossed.
			grow := min(max(cap(dst), 64<<10), limit+1-len(dst))
			dst = slices.Grow(dst, grow)
		}
		n, err := r.Read(dst[len(dst):min(cap(dst), limit+1)])
		dst = dst[:len(dst)+n]
		switch {
		case len(dst) > limit:
			return nil, errTooLarge
		case err == io.EOF:
			return dst, nil
		case err != nil:
			return nil, err
		case n == 0:
			emptyReads++
		}
	}
	return nil, io.ErrNoProgress
}

// gzipDecoder is pooled with the bytes.Reader it reads from, so that a
// decompression allocates neither.
type gzipDecoder struct {
	inner gzip.Reader
	src   bytes.Reader
}

var gzipPool = sync.Pool{New: func() any { return new(gzipDecoder) }}

func decompressGzip(dst, src []byte, limit int) ([]byte, error) {
	d := gzipPool.Get().(*gzipDecoder)
	defer gzipPool.Put(d)
	defer d.src.Reset(nil) // drop the reference to the batch
	d.src.Reset(src)
	if err := d.inner.Reset(&d.src); err != nil {
		return nil, err
	}
	return readBounded(dst, &d.inner, limit)
}

type lz4Decoder struct {
	inner *lz4.Reader
	src   bytes.Reader
}

var lz4Pool = sync.Pool{New: func() any { return &lz4Decoder{inner: lz4.NewReader(nil)} }}

func decompressLZ4(dst, src []byte, limit int) ([]byte, error) {
	d := lz4Pool.Get().(*lz4Decoder)
	defer lz4Pool.Put(d)
	defer d.inner.Reset(nil)
	d.src.Reset(src)
	d.inner.Reset(&d.src)
	return readBounded(dst, d.inner, limit)
}

// zstdPools holds decoders by the power of two their WithDecoderMaxMemory
// bound is set to: index k bounds output at 1<<k bytes, the least power of
// two >= the limit. A zstd decoder fixes its bound when it is made, and
// this keeps the number of pools at 32 however callers choose limits.
var zstdPools [32]sync.Pool

func decompressZstd(dst, src []byte, limit int) ([]byte, error) {
	k := bits.Len(uint(limit - 1)) // limit <= MaxInt32, so k <= 31
	pool := &zstdPools[k]
	d, _ := pool.Get().(*zstd.Decoder)
	if d == nil {
		var err error
		d, err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1), // DecodeAll only: no goroutines
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(1)<<k),
		)
		if err != nil {
			return nil, err
		}
	}
	defer pool.Put(d)
	out, err := d.DecodeAll(src, dst)
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded):
		return nil, errTooLarge
	case err != nil:
		return nil, err
	case len(out) > limit:
		return nil, errTooLarge
	}
	return out, nil
}

// xerialMagic starts snappy-java's framing: the magic, then version and
// minimum compatible version as big-endian int32s.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

// decompressSnappy decodes xerial-framed or raw snappy. The two cannot be
// confused: a raw block starting with the xerial magic would open with a
// copy, which is invalid before any literal.
func decompressSnappy(dst, src []byte, limit int) ([]byte, error) {
	if isXerial(src) {
		return decompressXerial(dst, src[xerialHeaderSize:], limit)
	}
	n, err := snappyDecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, errTooLarge
	}
	dst = slices.Grow(dst, n)
	return s2.Decode(dst[:n], src)
}

var errXerial = errors.New("malformed xerial snappy framing")

// decompressXerial walks the block lengths first, summing the decoded sizes
// the blocks claim, so that the limit is checked and dst grows once before
// anything is decoded.
func decompressXerial(dst, blocks []byte, limit int) ([]byte, error) {
	total := 0
	for rest := blocks; len(rest) > 0; {
		block, after, err := xerialBlock(rest)
		if err != nil {
			return nil, err
		}
		n, err := snappyDecodedLen(block)
		if err != nil {
			return nil, err
		}
		if n > limit-total {
			return nil, errTooLarge
		}
		total += n
		rest = after
	}
	dst = slices.Grow(dst, total)
	for rest := blocks; len(rest) > 0; {
		block, after, _ := xerialBlock(rest)
		n, _ := s2.DecodedLen(block)
		// Decode writes in place when given exactly the decoded length.
		if _, err := s2.Decode(dst[len(dst):len(dst)+n], block); err != nil {
			return nil, err
		}
		dst = dst[:len(dst)+n]
		rest = after
	}
	return dst, nil
}

func xerialBlock(src []byte) (block, rest []byte, err error) {
	if len(src) < 4 {
		return nil, nil, errXerial
	}
	size := int64(binary.BigEndian.Uint32(src))
	if size > int64(len(src)-4) {
		return nil, nil, errXerial
	}
	return src[4 : 4+size], src[4+size:], nil
}

// scratch buffers hold decompressed records inside Validate,
// FirstAtOrAfter and ControlType. One larger than scratchKeepMax is
// dropped rather than pooled, so a rare huge batch does not pin its memory.
var scratchPool = sync.Pool{New: func() any { return new([]byte) }}

const scratchKeepMax = 16 << 20

// withRecords calls f with b's decompressed records section, held in a
// pooled buffer that f must not retain.
func withRecords(b recordbatch.Batch, limit int, f func(records []byte) error) error {
	if b.Codec() == recordbatch.CodecNone {
		return f(b.Records())
	}
	scratch := scratchPool.Get().(*[]byte)
	records, err := Decompress(*scratch, b, limit)
	if err == nil {
		err = f(records)
	}
	if cap(records) > cap(*scratch) {
		*scratch = records[:0]
	}
	if cap(*scratch) <= scratchKeepMax {
		scratchPool.Put(scratch)
	}
	return err
}
