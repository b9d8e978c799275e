package recordbatch

import (
	"encoding/binary"
)

// Record is one uncompressed record for Append. A nil Key or Value is
// encoded as null (length -1).
type Record struct {
	Key   []byte
	Value []byte
	// TimestampDelta is added to the batch's base timestamp.
	TimestampDelta int64
}

// Spec describes a batch for Append. Records are written uncompressed;
// MaxTimestamp is computed from them.
type Spec struct {
	BaseOffset    Offset
	LeaderEpoch   Epoch
	BaseTimestamp int64
	ProducerID    int64 // -1 when not idempotent
	ProducerEpoch int16
	BaseSequence  int32
	Transactional bool
	Control       bool
	Records       []Record
}

// Append encodes spec as a v2 batch at the end of dst, with a valid CRC.
// It is for tests, tools and control batches, not for the data path.
func Append(dst []byte, spec Spec) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	maxTimestampDelta := int64(0) // a batch without records keeps its base timestamp
	for i, r := range spec.Records {
		dst = appendRecord(dst, i, r)
		if i == 0 || r.TimestampDelta > maxTimestampDelta {
			maxTimestampDelta = r.TimestampDelta
		}
	}
	b := Batch(dst[start:])
	attributes := uint16(0)
	if spec.Transactional {
		attributes |= attrTransactional
	}
	if spec.Control {
		attributes |= attrControl
	}
	lastOffsetDelta := int32(len(spec.Records) - 1)
	if len(spec.Records) == 0 {
		lastOffsetDelta = 0
	}
	be := binary.BigEndian
	be.PutUint64(b[posBaseOffset:], uint64(spec.BaseOffset))
	be.PutUint32(b[posBatchLength:], uint32(len(b)-LengthPrefixSize))
	be.PutUint32(b[posLeaderEpoch:], uint32(spec.LeaderEpoch))
	b[posMagic] = Magic
	be.PutUint16(b[posAttributes:], attributes)
	be.PutUint32(b[posLastOffsetDelta:], uint32(lastOffsetDelta))
	be.PutUint64(b[posBaseTimestamp:], uint64(spec.BaseTimestamp))
	be.PutUint64(b[posMaxTimestamp:], uint64(spec.BaseTimestamp+maxTimestampDelta))
	be.PutUint64(b[posProducerID:], uint64(spec.ProducerID))
	be.PutUint16(b[posProducerEpoch:], uint16(spec.ProducerEpoch))
	be.PutUint32(b[posBaseSequence:], uint32(spec.BaseSequence))
	be.PutUint32(b[posRecordCount:], uint32(len(spec.Records)))
	b.SetCRC(b.ComputeCRC())
	return dst
}

func appendRecord(dst []byte, offsetDelta int, r Record) []byte {
	var body [64]byte
	n := 0
	body[n] = 0 // record attributes
	n++
	n += binary.PutVarint(body[n:], r.TimestampDelta)
	n += binary.PutVarint(body[n:], int64(offsetDelta))
	head := body[:n]
	size := len(head) + varintLen(r.Key) + len(r.Key) + varintLen(r.Value) + len(r.Value) + 1
	dst = binary.AppendVarint(dst, int64(size))
	dst = append(dst, head...)
	dst = appendBytes(dst, r.Key)
	dst = appendBytes(dst, r.Value)
	return binary.AppendVarint(dst, 0) // no headers
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}

func varintLen(b []byte) int {
	var scratch [binary.MaxVarintLen64]byte
	if b == nil {
		return binary.PutVarint(scratch[:], -1)
	}
	return binary.PutVarint(scratch[:], int64(len(b)))
}
