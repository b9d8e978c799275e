package records

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mirrord/mirrord/recordbatch"
)

// ErrNegativeTimestamp: a record's timestamp is negative and not -1 (no
// timestamp), which Kafka's MemoryRecordsBuilder refuses to write
// ("Invalid negative timestamp"), so a batch holding one cannot be
// recompressed.
var ErrNegativeTimestamp = errors.New("records: invalid negative timestamp")

// Recompress appends to dst a new batch holding b's records compressed
// as to says, as Kafka's LogValidator builds one when a topic's
// compression.type is not the batch's codec (buildRecordsAndAssignOffsets
// with a MemoryRecordsBuilder):
//
//   - the producer ID, epoch, base sequence and transactional bit are
//     b's; the base offset is 0 and the leader epoch b's, for the append
//     to assign; the control bit is clear (clients write no control
//     batches);
//   - each record keeps its key, value and headers, its timestamp (b's
//     maxTimestamp for every record of a LogAppendTime batch, as Kafka
//     reads one), gets offset delta i and attributes 0;
//   - baseTimestamp is the first record's timestamp; maxTimestamp the
//     largest (-1 when none has one), or logAppendTime when that is not
//     -1: then the batch is marked LogAppendTime (attributes bit 3).
//
// Memory: see DecompressBudget. b must be a valid batch (ValidateProduce). scratch supplies capacity
// for the uncompressed records and is returned for reuse. Errors wrap
// recordbatch.ErrCorrupt, ErrTooLarge (past limit, see Decompress) or
// ErrNegativeTimestamp.
func Recompress(dst, scratch []byte, b recordbatch.Batch, to Compression, logAppendTime int64, limit int) (out, scratchOut []byte, err error) {
	if err := checkFraming(b); err != nil {
		return dst, scratch, err
	}
	h := recordbatch.Header{Codec: to.Codec, LeaderEpoch: b.LeaderEpoch(), Transactional: b.Transactional(),
		ProducerID: b.ProducerID(), ProducerEpoch: b.ProducerEpoch(), BaseSequence: b.BaseSequence(),
		BaseTimestamp: noTimestamp, MaxTimestamp: noTimestamp}
	// Recompress holds the records decompressed, rewritten and compressed
	// at once: it measures them first, streaming, and takes three times
	// their size from the node's DecompressBudget.
	size, err := sectionSize(b, limit)
	if err != nil {
		return dst, scratch, err
	}
	defer decompressed.release(decompressed.acquire(3 * int64(size)))
	section := scratch[:0]
	err = withRecords(b, limit, func(in []byte) error {
		var rewriteErr error
		section, rewriteErr = rewriteRecords(section, b, in, &h)
		return rewriteErr
	})
	if err != nil {
		return dst, section, err
	}
	if logAppendTime != noTimestamp {
		h.LogAppendTime, h.MaxTimestamp = true, logAppendTime
	}
	start := len(dst)
	dst = append(dst, make([]byte, recordbatch.HeaderSize)...)
	if dst, err = Compress(dst, section, to); err != nil {
		return dst[:start], section, err
	}
	recordbatch.PutHeader(recordbatch.Batch(dst[start:]), h)
	return dst, section, nil
}

// rewriteRecords appends the records of section (b's, decompressed) to
// out, uncompressed, with offset deltas from 0 and timestamp deltas from
// the first record's timestamp, and sets h's counts and timestamps.
func rewriteRecords(out []byte, b recordbatch.Batch, section []byte, h *recordbatch.Header) ([]byte, error) {
	it := NewIter(section)
	for it.Next() {
		r := it.Record()
		timestamp := b.BaseTimestamp() + r.TimestampDelta
		if b.LogAppendTime() {
			timestamp = b.MaxTimestamp()
		}
		if timestamp < 0 && timestamp != noTimestamp {
			return out, fmt.Errorf("%w %d: record %d of the batch at base offset %d", ErrNegativeTimestamp, timestamp, it.Index()-1, b.BaseOffset())
		}
		index := it.Index() - 1
		if index == 0 {
			h.BaseTimestamp = timestamp
		}
		h.MaxTimestamp = max(h.MaxTimestamp, timestamp)
		out = appendRecord(out, int32(index), timestamp-h.BaseTimestamp, r)
	}
	if err := it.Err(); err != nil {
		return out, fmt.Errorf("records: base offset %d: %w", b.BaseOffset(), err)
	}
	count := it.Index()
	if count == 0 {
		return out, corrupt(b, "no records to recompress")
	}
	h.RecordCount, h.LastOffsetDelta = int32(count), int32(count-1)
	return out, nil
}

// appendRecord encodes r (see the package doc) at offsetDelta, with
// attributes 0, as Kafka's DefaultRecord.writeTo.
func appendRecord(out []byte, offsetDelta int32, timestampDelta int64, r Record) []byte {
	size := 1 + varlongSize(timestampDelta) + varlongSize(int64(offsetDelta)) +
		nullableSize(r.Key) + nullableSize(r.Value) + varlongSize(int64(r.HeaderCount)) + len(r.Headers)
	out = binary.AppendVarint(out, int64(size))
	out = append(out, 0)
	out = binary.AppendVarint(out, timestampDelta)
	out = binary.AppendVarint(out, int64(offsetDelta))
	out = appendNullable(out, r.Key)
	out = appendNullable(out, r.Value)
	out = binary.AppendVarint(out, int64(r.HeaderCount))
	return append(out, r.Headers...)
}

func appendNullable(out, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(out, -1)
	}
	return append(binary.AppendVarint(out, int64(len(b))), b...)
}

func nullableSize(b []byte) int {
	if b == nil {
		return varlongSize(-1)
	}
	return varlongSize(int64(len(b))) + len(b)
}

// varlongSize is the encoded size of a zig-zag varint.
func varlongSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
