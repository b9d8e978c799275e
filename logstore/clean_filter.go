package logstore

import (
	"encoding/binary"
	"fmt"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
)

// Header fields the cleaner rewrites (recordbatch's layout, KIP-98).
const (
	hdrBatchLength    = 8
	hdrAttributes     = 21
	hdrBaseTimestamp  = 27
	hdrMaxTimestamp   = 35
	hdrRecordCount    = 57
	attrDeleteHorizon = 0x40
	attrKeepMask      = 0x3f // codec, timestamp type, transactional, control

	cleanerRecordLimit = records.DefaultLimit
)

// batchFilter decides, batch by batch in offset order, what a cleaning
// keeps: Kafka's LogCleaner record filter (checkBatchRetention,
// shouldRetainRecord) and MemoryRecords.filterTo, which writes a batch
// unchanged when it keeps all of it and needs no delete horizon, rebuilds
// it with the records kept otherwise (same base offset, last offset delta,
// producer fields, epoch and codec), and keeps an emptied batch as a bare
// header when it holds an active producer's last sequence or ends the
// cleaning round.
type batchFilter struct {
	offsets    *OffsetMap
	txns       *cleanTxns
	producers  map[int64]lastRecord
	upperBound rb.Offset // the first uncleanable offset: a batch ending there is kept, even empty
	now        int64     // milliseconds
	retention  int64     // delete.retention.ms

	decompressed []byte
	section      []byte
	kept         []records.Record
	stats        *CleanStats
}

type batchRetention int

const (
	deleteBatch      batchRetention = iota // drop it whole
	deleteEmptyBatch                       // drop it if no record is kept
	retainEmptyBatch                       // keep at least its header
)

// filter appends to dst what is kept of b (a whole, verified batch).
func (f *batchFilter) filter(dst []byte, b rb.Batch) ([]byte, error) {
	f.stats.BytesRead += int64(len(b))
	var discardable, discardRecords bool
	if b.Control() {
		discardable = f.txns.onControl(b)
		discardRecords = discardable && b.HasDeleteHorizon() && b.BaseTimestamp() <= f.now
	} else {
		discardable = f.txns.onBatch(b)
		discardRecords = discardable
	}
	retention := deleteEmptyBatch
	switch {
	case b.ProducerID() >= 0 && f.lastOfProducer(b):
		retention = retainEmptyBatch
	case b.NextOffset() == f.upperBound:
		retention = retainEmptyBatch
	case discardRecords:
		retention = deleteBatch
	}
	emptyTxnMarker := discardable && b.Control()
	if retention == deleteBatch {
		f.stats.RecordsRead += int64(b.RecordCount())
		return dst, nil
	}
	section, err := records.Decompress(f.decompressed, b, cleanerRecordLimit)
	if err != nil {
		return dst, err
	}
	if b.Codec() != rb.CodecNone {
		f.decompressed = section[:0]
	}
	f.kept = f.kept[:0]
	whole, tombstones := true, false
	it := records.NewIter(section)
	for it.Next() {
		r := it.Record()
		f.stats.RecordsRead++
		if !f.retainRecord(b, r, discardRecords) {
			whole = false
			continue
		}
		f.kept = append(f.kept, r)
		tombstones = tombstones || r.Value == nil
	}
	if err := it.Err(); err != nil {
		return dst, fmt.Errorf("logstore: clean batch at offset %d: %w", b.BaseOffset(), err)
	}
	f.stats.RecordsKept += int64(len(f.kept))
	switch {
	case len(f.kept) > 0:
		needHorizon := (tombstones || emptyTxnMarker) && !b.HasDeleteHorizon()
		if whole && !needHorizon {
			return append(dst, b...), nil
		}
		horizon := int64(noTimestamp)
		if needHorizon {
			horizon = f.now + f.retention
		} else if b.HasDeleteHorizon() {
			horizon = b.BaseTimestamp()
		}
		return f.rebuild(dst, b, horizon)
	case retention == retainEmptyBatch:
		return appendEmptyBatch(dst, b), nil
	}
	return dst, nil
}

// lastOfProducer is Kafka's isBatchLastRecordOfProducer.
func (f *batchFilter) lastOfProducer(b rb.Batch) bool {
	last, ok := f.producers[b.ProducerID()]
	switch {
	case !ok:
		return false
	case last.lastDataOffset >= 0:
		return b.LastOffset() == last.lastDataOffset
	}
	return b.Control() && b.ProducerEpoch() == last.epoch
}

// retainRecord is Kafka's shouldRetainRecord: a record past the mapped
// range stays; a keyed one stays if it is the latest of its key and has a
// value, or is a tombstone whose batch's delete horizon has not passed; a
// record without a key goes (Kafka counts it invalid).
func (f *batchFilter) retainRecord(b rb.Batch, r records.Record, discardRecords bool) bool {
	switch {
	case discardRecords:
		return false
	case b.Control():
		return true
	}
	offset := b.BaseOffset() + rb.Offset(r.OffsetDelta)
	if offset > f.offsets.Latest() {
		return true
	}
	if r.Key == nil {
		return false
	}
	latest := offset >= f.offsets.Get(r.Key)
	keepTombstone := !b.HasDeleteHorizon() || f.now < b.BaseTimestamp()
	return latest && (r.Value != nil || keepTombstone)
}

// rebuild appends b with only the kept records, as Kafka's
// MemoryRecordsBuilder writes it: the same base offset and last offset
// delta (so the producer's last sequence stays), producer fields, leader
// epoch, codec and timestamp type; the base timestamp is the delete
// horizon when there is one (attribute bit 6), else the first kept
// record's timestamp; the max timestamp is the kept records' largest (the
// append time for LogAppendTime batches).
func (f *batchFilter) rebuild(dst []byte, b rb.Batch, horizon int64) ([]byte, error) {
	logAppendTime := b.LogAppendTime()
	timestampOf := func(r records.Record) int64 {
		if logAppendTime {
			return b.MaxTimestamp()
		}
		return b.BaseTimestamp() + r.TimestampDelta
	}
	base := horizon
	if base == noTimestamp {
		base = timestampOf(f.kept[0])
	}
	maxTimestamp := int64(noTimestamp)
	f.section = f.section[:0]
	for _, r := range f.kept {
		t := timestampOf(r)
		maxTimestamp = max(maxTimestamp, t)
		f.section = appendRecord(f.section, r, t-base)
	}
	if logAppendTime {
		maxTimestamp = b.MaxTimestamp()
	}
	start := len(dst)
	dst = append(dst, make([]byte, rb.HeaderSize)...)
	dst, err := records.Compress(dst, f.section, records.Compression{Codec: b.Codec()})
	if err != nil {
		return dst[:start], err
	}
	h := headerOf(b)
	h.DeleteHorizon = horizon != noTimestamp
	h.BaseTimestamp, h.MaxTimestamp, h.RecordCount = base, maxTimestamp, int32(len(f.kept))
	rb.PutHeader(rb.Batch(dst[start:]), h)
	return dst, nil
}

// headerOf is b's header: what a rebuilt batch keeps of it.
func headerOf(b rb.Batch) rb.Header {
	return rb.Header{BaseOffset: b.BaseOffset(), LeaderEpoch: b.LeaderEpoch(), Codec: b.Codec(), LogAppendTime: b.LogAppendTime(),
		Transactional: b.Transactional(), Control: b.Control(), DeleteHorizon: b.HasDeleteHorizon(), LastOffsetDelta: b.LastOffsetDelta(),
		BaseTimestamp: b.BaseTimestamp(), MaxTimestamp: b.MaxTimestamp(), ProducerID: b.ProducerID(), ProducerEpoch: b.ProducerEpoch(),
		BaseSequence: b.BaseSequence(), RecordCount: b.RecordCount()}
}

// appendEmptyBatch appends b's header with no records, as Kafka's
// DefaultRecordBatch.writeEmptyHeader: uncompressed, no base timestamp,
// b's max timestamp, offsets and producer fields.
func appendEmptyBatch(dst []byte, b rb.Batch) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, rb.HeaderSize)...)
	h := headerOf(b)
	h.Codec, h.DeleteHorizon, h.BaseTimestamp, h.RecordCount = rb.CodecNone, false, noTimestamp, 0
	rb.PutHeader(rb.Batch(dst[start:]), h)
	return dst
}

// appendRecord encodes r (a record as read) with a new timestamp delta:
// attributes 0, as Kafka writes them, and its offset delta, key, value and
// headers unchanged.
func appendRecord(dst []byte, r records.Record, timestampDelta int64) []byte {
	var head [1 + 2*binary.MaxVarintLen64]byte
	n := 1 // attributes
	n += binary.PutVarint(head[n:], timestampDelta)
	n += binary.PutVarint(head[n:], int64(r.OffsetDelta))
	size := n + varintBytesLen(r.Key) + varintBytesLen(r.Value) + varintLen(int64(r.HeaderCount)) + len(r.Headers)
	dst = binary.AppendVarint(dst, int64(size))
	dst = append(dst, head[:n]...)
	dst = appendVarintBytes(dst, r.Key)
	dst = appendVarintBytes(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(r.HeaderCount))
	return append(dst, r.Headers...)
}

func varintLen(v int64) int {
	var scratch [binary.MaxVarintLen64]byte
	return binary.PutVarint(scratch[:], v)
}

func varintBytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendVarintBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}
