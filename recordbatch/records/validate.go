package records

import (
	"encoding/binary"
	"fmt"

	"github.com/mirrord/mirrord/recordbatch"
)

// Control record types (the second int16 of a control record's key).
// ControlMirrorPIDReset is KIP-1279's MIRROR_PID_RESET, which a failover
// appends to drop the producer state copied from the source; upstream has
// not assigned it a number, so it is a private one (as the error code and
// API keys of the mirror RPCs are). Kafka's clients skip control batches
// of types they do not know.
const (
	ControlAbort          int16 = 0
	ControlCommit         int16 = 1
	ControlMirrorPIDReset int16 = 1000
)

// controlKeySize is a control record key: version int16, type int16.
const controlKeySize = 4

func corrupt(b recordbatch.Batch, format string, args ...any) error {
	return fmt.Errorf("records: base offset %d: %w: %s", b.BaseOffset(), recordbatch.ErrCorrupt, fmt.Sprintf(format, args...))
}

// checkFraming checks what the records depend on in the header, so that
// a Batch made from arbitrary bytes cannot make the accessors panic.
func checkFraming(b recordbatch.Batch) error {
	if len(b) < recordbatch.HeaderSize {
		return fmt.Errorf("records: %w: %d bytes, shorter than a batch header", recordbatch.ErrCorrupt, len(b))
	}
	if b.SizeOnDisk() != int64(len(b)) {
		return corrupt(b, "batch length %d does not match the %d bytes given", b.BatchLength(), len(b))
	}
	if b.Magic() != recordbatch.Magic {
		return corrupt(b, "magic %d, want %d", b.Magic(), recordbatch.Magic)
	}
	if b.Codec() > recordbatch.CodecZstd {
		return corrupt(b, "unknown compression codec %d", uint8(b.Codec()))
	}
	return nil
}

// Validate checks the records of b as Kafka's LogValidator does for magic
// 2 on Produce: the records decompress (within limit, see Decompress), the
// header's recordCount is positive and equals lastOffsetDelta+1, every
// record parses exactly, the offset deltas run 0, 1, 2, ... and no bytes
// follow the last record. A control batch must hold one record whose key
// is version 0 and type ABORT or COMMIT.
//
// It does not check the CRC (see Batch.Verify), timestamps against the
// batch's maxTimestamp, or producer fields. Errors wrap
// recordbatch.ErrCorrupt, or ErrTooLarge when the records decompress past
// limit. Once the pools are warm it allocates nothing on success.
func Validate(b recordbatch.Batch, limit int) error {
	_, err := ValidateProduce(b, limit, nil, nil)
	return err
}

// TimestampCheck is Kafka's check of the timestamps of produced records
// on a CreateTime topic (LogValidator.validateTimestamp): a record's
// timestamp t, unless -1 (none), must satisfy now-t <= BeforeMax and
// t-now <= AfterMax, in Java's wrapping long arithmetic
// (message.timestamp.before.max.ms and message.timestamp.after.max.ms). A
// record without a timestamp in a batch marked LogAppendTime is refused:
// only the broker may set that type. On a LogAppendTime topic
// (LogAppendTime set) there is no window, and every record of a batch
// marked LogAppendTime is refused.
type TimestampCheck struct {
	Now           int64 // milliseconds since the epoch
	BeforeMax     int64 // milliseconds
	AfterMax      int64 // milliseconds
	LogAppendTime bool  // the topic's message.timestamp.type is LogAppendTime
	// CompactedPartition, when set, is the topic-partition of a compacted
	// topic: a record without a key is refused first (Kafka's
	// LogValidator.validateKey).
	CompactedPartition string
}

// RecordError is a record a TimestampCheck refused: its index in the
// batch, Kafka's words for why, and whether its timestamp was at fault
// (INVALID_TIMESTAMP; else its key: INVALID_RECORD).
type RecordError struct {
	Index     int32
	Message   string
	Timestamp bool
}

// ValidateProduce is Validate, and with check set it also checks each
// record's timestamp, appending the records it refuses to refused, in
// order (Kafka reports all of them). A malformed record ends the walk
// with an error, as in Kafka; refused records are not an error.
func ValidateProduce(b recordbatch.Batch, limit int, check *TimestampCheck, refused []RecordError) ([]RecordError, error) {
	if err := checkFraming(b); err != nil {
		return refused, err
	}
	count := b.RecordCount()
	if count <= 0 {
		return refused, corrupt(b, "record count %d, want at least 1", count)
	}
	if int64(b.LastOffsetDelta())+1 != int64(count) {
		return refused, corrupt(b, "last offset delta %d with record count %d", b.LastOffsetDelta(), count)
	}
	if b.Control() && count != 1 {
		return refused, corrupt(b, "control batch with %d records, want 1", count)
	}
	r := openSection(b, limit)
	defer r.close()
	given := len(refused)
	refused, err := validateRecords(r, count, check, refused)
	if err != nil {
		return refused[:given], err
	}
	return refused, nil
}

// validateRecords walks the count records of r as Validate says,
// streaming, and then the rest of the section.
func validateRecords(r *sectionReader, count int32, check *TimestampCheck, refused []RecordError) ([]RecordError, error) {
	b := r.b
	for i := range count {
		if !r.next() {
			if _, err := r.finish(); err != nil {
				return refused, err
			}
			return refused, corrupt(b, "%d records, header counts %d", i, count)
		}
		record := &r.record
		if record.offsetDelta != i {
			end := r.position
			if _, err := r.finish(); err != nil {
				return refused, err
			}
			return refused, corrupt(b, "record %d at byte %d has offset delta %d, want %d", i, end, record.offsetDelta, i)
		}
		if b.Control() {
			if _, err := controlType(b, record.keyLength, record.key, false); err != nil {
				if _, drainErr := r.finish(); drainErr != nil {
					return refused, drainErr
				}
				return refused, err
			}
		}
		if check != nil {
			if check.CompactedPartition != "" && record.keyNull {
				refused = append(refused, RecordError{Index: i,
					Message: fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s.", check.CompactedPartition)})
			} else if message := check.refuse(b, record.timestampDelta, record.offsetDelta, record.keyLength, record.valueLength); message != "" {
				refused = append(refused, RecordError{Index: i, Message: message, Timestamp: true})
			}
		}
	}
	end := r.position
	length, err := r.finish()
	if err != nil {
		return refused, err
	}
	if end != length {
		return refused, corrupt(b, "%d bytes after the %d records the header counts", length-end, count)
	}
	return refused, nil
}

// refuse says why Kafka refuses record's timestamp, or "" (see
// TimestampCheck). The record's timestamp is its batch's maxTimestamp in
// a LogAppendTime batch, as Kafka reads it; its offset is the batch's
// base offset plus its delta, as sent.
func (c *TimestampCheck) refuse(b recordbatch.Batch, timestampDelta int64, offsetDelta int32, keyLength, valueLength int) string {
	timestamp := b.BaseTimestamp() + timestampDelta
	if b.LogAppendTime() {
		timestamp = b.MaxTimestamp()
	}
	offset := int64(b.BaseOffset()) + int64(offsetDelta)
	if !c.LogAppendTime && timestamp != noTimestamp {
		if difference := c.Now - timestamp; difference > c.BeforeMax || -difference > c.AfterMax {
			return fmt.Sprintf("Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]",
				timestamp, offset, c.Now-c.BeforeMax, c.Now+c.AfterMax)
		}
		return ""
	}
	if b.LogAppendTime() {
		return fmt.Sprintf("Invalid timestamp type in message DefaultRecord(offset=%d, timestamp=%d, key=%d bytes, value=%d bytes). Producer should not set timestamp type to LogAppendTime.",
			offset, timestamp, keyLength, valueLength)
	}
	return ""
}

// noTimestamp is a record without a timestamp (RecordBatch.NO_TIMESTAMP).
const noTimestamp = -1

// controlType reads a control record key of keyLength bytes: version 0,
// and type abort or commit unless anyType. key holds its bytes when
// keyLength is controlKeySize.
func controlType(b recordbatch.Batch, keyLength int, key []byte, anyType bool) (int16, error) {
	if keyLength != controlKeySize || len(key) != controlKeySize {
		return 0, corrupt(b, "control record key of %d bytes, want %d", keyLength, controlKeySize)
	}
	version := int16(binary.BigEndian.Uint16(key))
	kind := int16(binary.BigEndian.Uint16(key[2:]))
	if version != 0 {
		return 0, corrupt(b, "control record key version %d, want 0", version)
	}
	if !anyType && kind != ControlAbort && kind != ControlCommit {
		return 0, corrupt(b, "control record type %d, want 0 (abort) or 1 (commit)", kind)
	}
	return kind, nil
}

// controlLimit bounds the decompressed records of a control batch: its one
// record takes a few dozen bytes. Kafka writes control batches
// uncompressed, but nothing forbids compressing them.
const controlLimit = 64 << 10

// ControlType returns the type of the transaction marker b holds:
// ControlAbort (0) or ControlCommit (1). It fails, wrapping
// recordbatch.ErrCorrupt, unless b is a control batch of one well formed
// record whose key is version 0 and type 0 or 1.
func ControlType(b recordbatch.Batch) (int16, error) {
	kind, err := controlRecordType(b)
	if err == nil && kind != ControlAbort && kind != ControlCommit {
		return 0, corrupt(b, "control record type %d, want 0 (abort) or 1 (commit)", kind)
	}
	return kind, err
}

// IsMirrorPIDReset reports whether b is a MIRROR_PID_RESET control batch:
// no producer ID, one control record of type ControlMirrorPIDReset.
func IsMirrorPIDReset(b recordbatch.Batch) bool {
	if len(b) < recordbatch.HeaderSize || !b.Control() || b.ProducerID() >= 0 {
		return false
	}
	kind, err := controlRecordType(b)
	return err == nil && kind == ControlMirrorPIDReset
}

// controlRecordType is the type of b's one control record, any type.
func controlRecordType(b recordbatch.Batch) (int16, error) {
	if err := checkFraming(b); err != nil {
		return 0, err
	}
	if !b.Control() {
		return 0, corrupt(b, "not a control batch")
	}
	if count := b.RecordCount(); count != 1 {
		return 0, corrupt(b, "control batch with %d records, want 1", count)
	}
	var kind int16
	err := withRecords(b, controlLimit, func(section []byte) error {
		it := NewIter(section)
		if !it.Next() {
			if err := it.Err(); err != nil {
				return fmt.Errorf("records: base offset %d: %w", b.BaseOffset(), err)
			}
			return corrupt(b, "control batch without a record")
		}
		if it.Position() != len(section) {
			return corrupt(b, "%d bytes after the control record", len(section)-it.Position())
		}
		var err error
		key := it.Record().Key
		kind, err = controlType(b, len(key), key, true)
		return err
	})
	return kind, err
}

// FirstAtOrAfter finds the first record of b at offset from or later whose
// timestamp is at least timestamp, as Kafka's ListOffsets does within a
// batch (from is the log start offset, which can fall inside a batch): its offset
// (baseOffset + offsetDelta) and its timestamp, which is baseTimestamp +
// timestampDelta, or the batch's maxTimestamp for a LogAppendTime batch.
// Like Kafka it skips a batch whose maxTimestamp is below timestamp
// without reading its records. found is false when no record qualifies.
//
// It reads records only up to the one it returns, streaming (as
// Validate), checking that they parse but not their count or offset
// deltas, so it works on batches compaction has thinned. Errors are those
// of Validate; what follows the record it returns is not read.
func FirstAtOrAfter(b recordbatch.Batch, timestamp int64, from recordbatch.Offset, limit int) (offset recordbatch.Offset, recordTimestamp int64, found bool, err error) {
	if err := checkFraming(b); err != nil {
		return 0, 0, false, err
	}
	if b.MaxTimestamp() < timestamp || b.RecordCount() <= 0 {
		return 0, 0, false, nil
	}
	r := openSection(b, limit)
	defer r.close()
	for r.next() {
		recordTimestamp = b.BaseTimestamp() + r.record.timestampDelta
		if b.LogAppendTime() {
			recordTimestamp = b.MaxTimestamp()
		}
		if recordOffset := b.BaseOffset() + recordbatch.Offset(r.record.offsetDelta); recordTimestamp >= timestamp && recordOffset >= from {
			offset, found = recordOffset, true
			break
		}
	}
	if !found {
		_, err = r.finish()
	}
	if err != nil || !found {
		return 0, 0, false, err
	}
	return offset, recordTimestamp, true, nil
}
