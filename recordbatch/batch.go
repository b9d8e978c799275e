package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Offset is a Kafka record offset within one partition.
type Offset int64

// Epoch is a partition leader epoch. NoEpoch (-1) marks "unknown".
type Epoch int32

// NoEpoch is the epoch of a batch written without one, and "no epoch known".
const NoEpoch Epoch = -1

// Codec is the compression codec of a batch (attributes bits 0-2).
type Codec uint8

const (
	CodecNone Codec = iota
	CodecGzip
	CodecSnappy
	CodecLZ4
	CodecZstd
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// Field positions and sizes of the v2 batch header.
const (
	posBaseOffset      = 0
	posBatchLength     = 8
	posLeaderEpoch     = 12
	posMagic           = 16
	posCRC             = 17
	posAttributes      = 21
	posLastOffsetDelta = 23
	posBaseTimestamp   = 27
	posMaxTimestamp    = 35
	posProducerID      = 43
	posProducerEpoch   = 51
	posBaseSequence    = 53
	posRecordCount     = 57

	// HeaderSize is the size of a v2 batch header; records follow it.
	HeaderSize = 61
	// LengthPrefixSize is the number of bytes before the batchLength count
	// starts: baseOffset and batchLength itself.
	LengthPrefixSize = 12
	// MaxBatchSize bounds one batch (header included). Kafka's own bound is
	// message.max.bytes (1 MiB by default, at most int32); anything larger
	// than this is treated as corruption rather than buffered.
	MaxBatchSize = 1 << 30

	// Magic is the only batch format this package accepts.
	Magic = 2
)

const (
	attrCodecMask       = 0x07
	attrTimestampType   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
	attrDeleteHorizonMs = 0x40
)

var (
	// ErrTruncated: the buffer ends inside a batch.
	ErrTruncated = errors.New("recordbatch: truncated batch")
	// ErrCorrupt: the bytes are not a valid v2 batch.
	ErrCorrupt = errors.New("recordbatch: corrupt batch")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch is exactly one v2 record batch, header and records. It is a view:
// it aliases the buffer it was parsed from and copies nothing.
type Batch []byte

// Size returns the number of bytes a batch occupies, read from its first
// LengthPrefixSize bytes: 12 + batchLength. It does not check anything.
func sizeOf(b []byte) int64 {
	return LengthPrefixSize + int64(int32(binary.BigEndian.Uint32(b[posBatchLength:])))
}

// Parse returns the first batch of buf after checking its framing (length,
// magic, offset delta) but not its CRC; see Verify. It never reads past
// the batch, so buf may hold more batches after it.
func Parse(buf []byte) (Batch, error) {
	if len(buf) < LengthPrefixSize {
		return nil, fmt.Errorf("%w: %d bytes, need %d for the length prefix", ErrTruncated, len(buf), LengthPrefixSize)
	}
	size := sizeOf(buf)
	if size < HeaderSize || size > MaxBatchSize {
		return nil, fmt.Errorf("%w: base offset %d: batch length %d out of range [%d, %d]",
			ErrCorrupt, int64(binary.BigEndian.Uint64(buf)), size-LengthPrefixSize, HeaderSize-LengthPrefixSize, MaxBatchSize-LengthPrefixSize)
	}
	if len(buf) > posMagic && buf[posMagic] != Magic {
		return nil, fmt.Errorf("%w: base offset %d: magic %d, want %d", ErrCorrupt, int64(binary.BigEndian.Uint64(buf)), int8(buf[posMagic]), Magic)
	}
	if int64(len(buf)) < size {
		return nil, fmt.Errorf("%w: base offset %d: %d of %d bytes", ErrTruncated, int64(binary.BigEndian.Uint64(buf)), len(buf), size)
	}
	b := Batch(buf[:size:size])
	if delta := b.LastOffsetDelta(); delta < 0 {
		return nil, fmt.Errorf("%w: base offset %d: negative last offset delta %d", ErrCorrupt, b.BaseOffset(), delta)
	}
	if b.BaseOffset() < 0 || int64(b.BaseOffset())+int64(b.LastOffsetDelta()) < 0 {
		return nil, fmt.Errorf("%w: base offset %d: offsets out of range", ErrCorrupt, b.BaseOffset())
	}
	return b, nil
}

// Verify checks the CRC-32C of b over [attributes, end).
func (b Batch) Verify() error {
	want := b.CRC()
	got := crc32.Checksum(b[posAttributes:], castagnoli)
	if got != want {
		return fmt.Errorf("%w: base offset %d: crc %08x, computed %08x", ErrCorrupt, b.BaseOffset(), want, got)
	}
	return nil
}

// ComputeCRC returns the CRC-32C of b's checksummed range.
func (b Batch) ComputeCRC() uint32 { return crc32.Checksum(b[posAttributes:], castagnoli) }

// SetCRC stores crc in the header (for writers building batches).
func (b Batch) SetCRC(crc uint32) { binary.BigEndian.PutUint32(b[posCRC:], crc) }

func (b Batch) Size() int           { return len(b) }
func (b Batch) BaseOffset() Offset  { return Offset(binary.BigEndian.Uint64(b[posBaseOffset:])) }
func (b Batch) BatchLength() int32  { return int32(binary.BigEndian.Uint32(b[posBatchLength:])) }
func (b Batch) LeaderEpoch() Epoch  { return Epoch(binary.BigEndian.Uint32(b[posLeaderEpoch:])) }
func (b Batch) Magic() int8         { return int8(b[posMagic]) }
func (b Batch) CRC() uint32         { return binary.BigEndian.Uint32(b[posCRC:]) }
func (b Batch) Attributes() int16   { return int16(binary.BigEndian.Uint16(b[posAttributes:])) }
func (b Batch) Codec() Codec        { return Codec(b[posAttributes+1] & attrCodecMask) }
func (b Batch) LogAppendTime() bool { return b[posAttributes+1]&attrTimestampType != 0 }
func (b Batch) Transactional() bool { return b[posAttributes+1]&attrTransactional != 0 }
func (b Batch) Control() bool       { return b[posAttributes+1]&attrControl != 0 }
func (b Batch) HasDeleteHorizon() bool {
	return b[posAttributes+1]&attrDeleteHorizonMs != 0
}
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[posLastOffsetDelta:]))
}
func (b Batch) LastOffset() Offset     { return b.BaseOffset() + Offset(b.LastOffsetDelta()) }
func (b Batch) NextOffset() Offset     { return b.LastOffset() + 1 }
func (b Batch) BaseTimestamp() int64   { return int64(binary.BigEndian.Uint64(b[posBaseTimestamp:])) }
func (b Batch) MaxTimestamp() int64    { return int64(binary.BigEndian.Uint64(b[posMaxTimestamp:])) }
func (b Batch) ProducerID() int64      { return int64(binary.BigEndian.Uint64(b[posProducerID:])) }
func (b Batch) ProducerEpoch() int16   { return int16(binary.BigEndian.Uint16(b[posProducerEpoch:])) }
func (b Batch) BaseSequence() int32    { return int32(binary.BigEndian.Uint32(b[posBaseSequence:])) }
func (b Batch) RecordCount() int32     { return int32(binary.BigEndian.Uint32(b[posRecordCount:])) }
func (b Batch) Records() []byte        { return b[HeaderSize:] }
func (b Batch) SetBaseOffset(o Offset) { binary.BigEndian.PutUint64(b[posBaseOffset:], uint64(o)) }

// SetLeaderEpoch stamps the partition leader epoch; the CRC stays valid.
func (b Batch) SetLeaderEpoch(e Epoch) { binary.BigEndian.PutUint32(b[posLeaderEpoch:], uint32(e)) }

// Iter walks the batches of a buffer: for it.Next() { b := it.Batch() }.
// After the loop, Err reports why it stopped (nil at a clean end) and
// Consumed how many bytes of whole, valid batches precede that point.
type Iter struct {
	buf    []byte
	pos    int
	verify bool
	batch  Batch
	err    error
}

// NewIter iterates over buf. With verify set each batch's CRC is checked.
func NewIter(buf []byte, verify bool) Iter { return Iter{buf: buf, verify: verify} }

// Next advances to the next batch; it returns false at the end of the
// buffer or at the first truncated or corrupt batch.
func (it *Iter) Next() bool {
	if it.err != nil || it.pos == len(it.buf) {
		return false
	}
	b, err := Parse(it.buf[it.pos:])
	if err == nil && it.verify {
		err = b.Verify()
	}
	if err != nil {
		it.err = fmt.Errorf("recordbatch: at byte %d: %w", it.pos, err)
		return false
	}
	it.batch = b
	it.pos += len(b)
	return true
}

// Batch is the batch Next advanced to.
func (it *Iter) Batch() Batch { return it.batch }

// Position is the byte position of the current batch in the buffer.
func (it *Iter) Position() int { return it.pos - len(it.batch) }

// Consumed is the number of bytes of whole, valid batches read so far.
func (it *Iter) Consumed() int { return it.pos }

// Err is nil at a clean end of the buffer, else wraps ErrTruncated or ErrCorrupt.
func (it *Iter) Err() error { return it.err }

// ParseHeader checks the framing of the batch that starts buf, like Parse,
// but needs only its HeaderSize bytes: the returned view holds the header
// alone, so Size reports the whole batch size but Verify and Records must
// not be called on it. It is for walking batches stored in a file.
func ParseHeader(buf []byte) (Batch, error) {
	if len(buf) < HeaderSize {
		return nil, fmt.Errorf("%w: %d bytes, need %d for a header", ErrTruncated, len(buf), HeaderSize)
	}
	b := Batch(buf[:HeaderSize:HeaderSize])
	size := sizeOf(buf)
	switch {
	case size < HeaderSize || size > MaxBatchSize:
		return nil, fmt.Errorf("%w: base offset %d: batch length %d out of range", ErrCorrupt, b.BaseOffset(), size-LengthPrefixSize)
	case b.Magic() != Magic:
		return nil, fmt.Errorf("%w: base offset %d: magic %d, want %d", ErrCorrupt, b.BaseOffset(), b.Magic(), Magic)
	case b.LastOffsetDelta() < 0 || b.BaseOffset() < 0 || b.LastOffset() < 0:
		return nil, fmt.Errorf("%w: base offset %d: offsets out of range", ErrCorrupt, b.BaseOffset())
	}
	return b, nil
}

// SizeOnDisk is the full size of the batch whose header view this is:
// 12 + batchLength. For a whole batch it equals Size.
func (b Batch) SizeOnDisk() int64 { return sizeOf(b) }
