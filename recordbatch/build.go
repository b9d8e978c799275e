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
	lastOffsetDelta := int32(len(spec.Records) - 1)
	if len(spec.Records) == 0 {
		lastOffsetDelta = 0
	}
	PutHeader(Batch(dst[start:]), Header{BaseOffset: spec.BaseOffset, LeaderEpoch: spec.LeaderEpoch,
		Transactional: spec.Transactional, Control: spec.Control, LastOffsetDelta: lastOffsetDelta,
		BaseTimestamp: spec.BaseTimestamp, MaxTimestamp: spec.BaseTimestamp + maxTimestampDelta,
		ProducerID: spec.ProducerID, ProducerEpoch: spec.ProducerEpoch, BaseSequence: spec.BaseSequence,
		RecordCount: int32(len(spec.Records))})
	return dst
}

// Header is what a writer sets in a v2 batch header; PutHeader adds the
// batch length, the magic and the CRC.
type Header struct {
	BaseOffset      Offset
	LeaderEpoch     Epoch
	Codec           Codec
	LogAppendTime   bool // attributes bit 3: maxTimestamp is the broker's
	Transactional   bool
	Control         bool
	DeleteHorizon   bool // attributes bit 6: BaseTimestamp is the delete horizon (KIP-534, the log cleaner's)
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32
}

// PutHeader writes h into the first HeaderSize bytes of b, whose records
// section (already encoded with h.Codec) fills the rest of b: the batch
// length is len(b), and the CRC is computed last, over the whole batch.
func PutHeader(b Batch, h Header) {
	attributes := uint16(h.Codec) & attrCodecMask
	if h.LogAppendTime {
		attributes |= attrTimestampType
	}
	if h.Transactional {
		attributes |= attrTransactional
	}
	if h.Control {
		attributes |= attrControl
	}
	if h.DeleteHorizon {
		attributes |= attrDeleteHorizonMs
	}
	be := binary.BigEndian
	be.PutUint64(b[posBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(b[posBatchLength:], uint32(len(b)-LengthPrefixSize))
	be.PutUint32(b[posLeaderEpoch:], uint32(h.LeaderEpoch))
	b[posMagic] = Magic
	be.PutUint16(b[posAttributes:], attributes)
	be.PutUint32(b[posLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[posBaseTimestamp:], uint64(h.BaseTimestamp))
	be.PutUint64(b[posMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(b[posProducerID:], uint64(h.ProducerID))
	be.PutUint16(b[posProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(b[posBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(b[posRecordCount:], uint32(h.RecordCount))
	b.SetCRC(b.ComputeCRC())
}

// SetMaxTimestamp sets b's timestamp type and maxTimestamp, as Kafka's
// DefaultRecordBatch.setMaxTimestamp does in place: a broker stamping a
// LogAppendTime topic's batch sets the type bit and its clock. The CRC is
// recomputed when anything changed; the records are untouched.
func (b Batch) SetMaxTimestamp(logAppendTime bool, maxTimestamp int64) {
	if b.LogAppendTime() == logAppendTime && b.MaxTimestamp() == maxTimestamp {
		return
	}
	if logAppendTime {
		b[posAttributes+1] |= attrTimestampType
	} else {
		b[posAttributes+1] &^= attrTimestampType
	}
	binary.BigEndian.PutUint64(b[posMaxTimestamp:], uint64(maxTimestamp))
	b.SetCRC(b.ComputeCRC())
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
