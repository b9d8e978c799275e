package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Produce on a writable partition, with Kafka's checks, in Kafka's order
// and with its codes (UnifiedLog.analyzeAndValidateRecords, then
// LogValidator for magic 2):
//
//   - a batch larger than the topic's max.message.bytes (the node's
//     message.max.bytes by default) is MESSAGE_TOO_LARGE, a bad CRC
//     CORRUPT_MESSAGE (the log checks framing and CRC again as it
//     appends); neither carries the log start offset;
//   - then, answered with the log start offset (netio.RecordsError): a
//     record count that is not positive or not lastOffsetDelta+1, a
//     control batch, a producer ID without a sequence, a base offset other
//     than 0, or malformed records (records.ValidateProduce, streaming:
//     record by record as they decompress) are INVALID_RECORD; CreateTime timestamps outside
//     message.timestamp.before.max.ms and .after.max.ms around the node's
//     clock are INVALID_TIMESTAMP with the records at fault;
//   - then the batch takes the topic's format (formatForLog): rebuilt
//     in the topic's compression.type when that is not the batch's codec
//     (producer keeps it), stamped on a LogAppendTime topic; a rebuilt
//     batch over max.message.bytes is MESSAGE_TOO_LARGE;
//   - a batch larger than segment.bytes is RECORD_LIST_TOO_LARGE;
//   - idempotence (see producer_state.go): per producer ID the epoch and
//     the sequence must follow, and a retry of one of the last five
//     batches answers the offset it was written at without appending;
//   - transactions: a transactional batch needs the request's
//     transactional ID and a producer that added this partition to its
//     ongoing transaction (AddPartitionsToTxn, transactions.go).
//
// Kafka refuses more than one batch per partition per request since
// Produce v3, and so does netio; several are accepted here and checked in
// order, each against the state the earlier ones left.

// recordsLimit bounds the decompressed records of one produced batch
// (records.DefaultLimit, 64 MiB); past it a batch is MESSAGE_TOO_LARGE.
// Validation and ListOffsets read them streaming, in constant memory;
// Recompress holds them within records.DecompressBudget, node-wide.
const recordsLimit = records.DefaultLimit

// lastStableOffset is Kafka's: the first offset of the earliest open
// transaction, clamped to [logStartOffset, highWatermark]. The caller
// reads hw before calling (a transaction's first offset is recorded
// before the high watermark moves past it).
func (p *Partition) lastStableOffset(start, hw rb.Offset) rb.Offset {
	first := rb.Offset(p.producers.firstUnstable.Load())
	if first < 0 {
		return hw
	}
	return min(max(first, start), hw)
}

// abortedTransactions lists the aborted transactions overlapping [from,
// to), for a read_committed fetch (an empty list, not null, as Kafka).
func (p *Partition) abortedTransactions(from, to rb.Offset) []netio.AbortedTransaction {
	found := p.producers.aborted.overlapping(from, to, nil)
	if found == nil {
		return []netio.AbortedTransaction{}
	}
	return found
}

// refineTimestamp narrows a timestamp lookup from the batch holding
// offset to its first record at offset from or later whose timestamp is at
// least timestamp (Kafka's LogSegment.findOffsetByTimestamp, from being
// the log start offset), and returns that record's offset and timestamp
// and its batch's partitionLeaderEpoch, as Kafka does. A batch that cannot
// be decoded (a mirrored batch in a codec this node does not read), or
// whose matching records all lie below from, answers offset, -1 and the
// batch's epoch (Kafka would look on in the next batches; only a log start
// inside a batch can cause it).
func (p *Partition) refineTimestamp(offset rb.Offset, timestamp int64, from rb.Offset) (rb.Offset, int64, rb.Epoch, error) {
	data, err := p.log.BatchBytes(nil, offset)
	if err != nil {
		return -1, -1, -1, err
	}
	b, err := rb.Parse(data)
	if err != nil {
		return offset, -1, p.epochAt(offset), nil // the batch is there but unreadable: answer the batch
	}
	epoch := b.LeaderEpoch()
	recordOffset, recordTimestamp, found, err := records.FirstAtOrAfter(b, timestamp, from, recordsLimit)
	if err != nil || !found {
		return offset, -1, epoch, nil // as above
	}
	return recordOffset, recordTimestamp, epoch, nil
}

// Produce appends a writable topic's batches, assigning offsets and the
// leader epoch; the high watermark follows the log end at once (one
// replica), or the ISR on a cluster's leader, where acks=-1 waits for it
// (replica.go) as long as ctx allows.
func (p *Partition) Produce(ctx context.Context, batches []byte, request netio.ProduceRequest) (netio.ProduceResult, error) {
	result, end, err := p.produce(batches, request)
	if err != nil || request.Acks != -1 {
		return result, err
	}
	if err := p.awaitReplicas(ctx, end); err != nil {
		return netio.ProduceResult{}, err
	}
	return result, nil
}

// produce is Produce up to the append; it also returns the offset past
// the batch, which the high watermark must reach for acks=-1.
func (p *Partition) produce(batches []byte, request netio.ProduceRequest) (netio.ProduceResult, rb.Offset, error) {
	if p.internal {
		return netio.ProduceResult{}, -1, errInternalTopic(p.tp.Topic)
	}
	if err := p.refuseUnlessLeader(); err != nil {
		return netio.ProduceResult{}, -1, err
	}
	if err := p.checkAcksBeforeAppend(request.Acks); err != nil {
		return netio.ProduceResult{}, -1, err
	}
	if err := p.refuseIfReadOnly("produce"); err != nil {
		return netio.ProduceResult{}, -1, err
	}
	now := p.now().UnixMilli() // Kafka's LogValidator reads its clock once
	if err := p.validateProduce(batches, request, now); err != nil {
		return netio.ProduceResult{}, -1, err
	}
	if err := p.verifyTransactions(batches, request); err != nil {
		return netio.ProduceResult{}, -1, err
	}
	batches, err := p.formatForLog(batches, now)
	if err != nil {
		return netio.ProduceResult{}, -1, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	next := p.log.LogEndOffset()
	staged, duplicate, err := p.checkProducers(batches, next)
	if err != nil {
		// Refused by the log's producer state: the answer carries the
		// log start offset, as Kafka's does.
		return netio.ProduceResult{}, -1, &netio.RecordsError{Err: err, LogStartOffset: p.log.LogStartOffset()}
	}
	if duplicate != nil {
		// A retry answers where the batch was written and, as its append
		// time, the batch's timestamp (Kafka's UnifiedLog for a duplicate).
		return netio.ProduceResult{BaseOffset: duplicate.firstOffset, LogAppendTime: duplicate.timestamp, LogStartOffset: p.log.LogStartOffset()}, duplicate.lastOffset + 1, nil
	}
	if err := p.space().admit(len(batches)); err != nil {
		return netio.ProduceResult{}, -1, err
	}
	info, err := p.log.AppendAssign(batches, p.LeaderEpoch())
	p.space().wrote(len(batches), err)
	if err != nil {
		return netio.ProduceResult{}, -1, produceError(err)
	}
	if info.FirstOffset != next {
		panic(fmt.Sprintf("broker: %s: append assigned offset %d, producer state expected %d", p.tp, info.FirstOffset, next))
	}
	staged.commit() // before the high watermark moves: see lastStableOffset
	p.advanceHighWatermark()
	p.notify()
	logAppendTime := int64(-1)
	if p.limits.Load().logAppendTime {
		logAppendTime = now
	}
	return netio.ProduceResult{BaseOffset: info.FirstOffset, LogAppendTime: logAppendTime, LogStartOffset: p.log.LogStartOffset()}, info.LastOffset + 1, nil
}

// formatForLog gives validated batches the topic's format before they
// are appended, as Kafka's LogValidator does: a batch whose codec is not
// the topic's compression.type (unless producer) is rebuilt in that codec
// (records.Recompress: producer fields kept, the offsets the append
// assigns, Kafka's timestamps); on a LogAppendTime topic every batch is
// marked LogAppendTime with maxTimestamp now, in place unless rebuilt
// (the records and baseTimestamp are the producer's). A rebuilt batch
// larger than max.message.bytes is MESSAGE_TOO_LARGE, as in Kafka. The
// request's bytes are returned when no batch was rebuilt.
func (p *Partition) formatForLog(batches []byte, now int64) ([]byte, error) {
	logAppendTime := int64(-1)
	if p.limits.Load().logAppendTime {
		logAppendTime = now
	}
	var rebuilt, scratch []byte // rebuilt stays nil until a batch is
	for it := rb.NewIter(batches, false); it.Next(); {
		b := it.Batch()
		to, recompress := p.limits.Load().target(b.Codec())
		if !recompress {
			if logAppendTime >= 0 {
				b.SetMaxTimestamp(true, logAppendTime)
			}
			if rebuilt != nil {
				rebuilt = append(rebuilt, b...)
			}
			continue
		}
		if rebuilt == nil {
			rebuilt = append(make([]byte, 0, len(batches)+rb.HeaderSize), batches[:it.Position()]...)
		}
		start := len(rebuilt)
		var err error
		if rebuilt, scratch, err = records.Recompress(rebuilt, scratch, b, to, logAppendTime, recordsLimit); err != nil {
			return nil, p.recompressError(err)
		}
		if size := int64(len(rebuilt) - start); size > p.limits.Load().maxMessageBytes {
			return nil, fmt.Errorf("%w: broker: message batch size is %d bytes in append to partition %s which exceeds the maximum configured size of %d",
				kerr.MessageTooLarge, size, p.tp, p.limits.Load().maxMessageBytes)
		}
	}
	if rebuilt == nil {
		return batches, nil
	}
	return rebuilt, nil
}

// recompressError is Kafka's answer when a validated batch cannot be
// rebuilt: a record's negative timestamp makes its MemoryRecordsBuilder
// throw, which Kafka answers UNKNOWN_SERVER_ERROR with the log start
// offset and no message.
func (p *Partition) recompressError(err error) error {
	switch {
	case errors.Is(err, records.ErrTooLarge):
		return errors.Join(kerr.MessageTooLarge, err)
	case errors.Is(err, records.ErrNegativeTimestamp):
		return &netio.RecordsError{Err: errors.Join(kerr.UnknownServerError, err), LogStartOffset: p.log.LogStartOffset()}
	}
	return &netio.RecordsError{Err: errors.Join(kerr.InvalidRecord, err), LogStartOffset: p.log.LogStartOffset()}
}

// validateProduce checks what needs no producer state: the batch kinds a
// client may send, size, CRC and records (see Produce).
func (p *Partition) validateProduce(batches []byte, request netio.ProduceRequest, now int64) error {
	it := rb.NewIter(batches, false)
	for it.Next() {
		b := it.Batch()
		switch {
		case b.Transactional() && request.TransactionalID == "":
			return fmt.Errorf("%w: a transactional batch in a request without a transactional ID", kerr.TransactionalIDAuthorizationFailed)
		case b.Transactional() && b.ProducerID() < 0:
			return fmt.Errorf("%w: a transactional batch without a producer ID", kerr.InvalidProducerIDMapping)
		case int64(b.Size()) > p.limits.Load().maxMessageBytes:
			return fmt.Errorf("%w: broker: the record batch size in the append to %s is %d bytes which exceeds the maximum configured value of %d",
				kerr.MessageTooLarge, p.tp, b.Size(), p.limits.Load().maxMessageBytes)
		}
		if err := b.Verify(); err != nil {
			return errors.Join(kerr.CorruptMessage, err)
		}
		if err := p.validateRecords(b, now); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return errors.Join(kerr.CorruptMessage, err)
	}
	return nil
}

// verifyTransactions has the coordinator verify, before the partition is
// locked, each transactional batch's producer and transaction (adding the
// partition under transaction version 2: verifyTransaction).
// checkProducers then finds the partition's verification guard set.
func (p *Partition) verifyTransactions(batches []byte, request netio.ProduceRequest) error {
	if request.TransactionalID == "" || p.node == nil {
		return nil
	}
	for it := rb.NewIter(batches, false); it.Next(); {
		if b := it.Batch(); b.Transactional() {
			if err := p.node.txns.verifyTransaction(request.TransactionalID, b.ProducerID(), b.ProducerEpoch(), p, produceTxnOperation(request.Version)); err != nil {
				return err
			}
		}
	}
	return nil
}

// invalidTimestampMessage is Kafka's error message of a batch with
// records refused for their timestamps.
const invalidTimestampMessage = "One or more records have been rejected due to invalid timestamp"

// validateRecords is Kafka's LogValidator for a client's v2 batch; its
// errors carry the log start offset, as Kafka's do.
func (p *Partition) validateRecords(b rb.Batch, now int64) error {
	refused := func(err error) error {
		return &netio.RecordsError{Err: err, LogStartOffset: p.log.LogStartOffset()}
	}
	count := b.RecordCount()
	switch {
	case count <= 0:
		return refused(fmt.Errorf("%w: broker: invalid reported count for record batch: %d in %s", kerr.InvalidRecord, count, p.tp))
	case int64(b.LastOffsetDelta())+1 != int64(count):
		return refused(fmt.Errorf("%w: broker: inconsistent batch offset range [%d, %d] and count of records %d in %s",
			kerr.InvalidRecord, b.BaseOffset(), b.LastOffset(), count, p.tp))
	case b.Control():
		return refused(fmt.Errorf("%w: broker: clients may not write control records in %s", kerr.InvalidRecord, p.tp))
	case b.ProducerID() >= 0 && b.BaseSequence() < 0:
		return refused(fmt.Errorf("%w: broker: invalid sequence number %d in record batch with producer ID %d in %s",
			kerr.InvalidRecord, b.BaseSequence(), b.ProducerID(), p.tp))
	case b.BaseOffset() != 0:
		return refused(fmt.Errorf("%w: broker: the base offset of the record batch in the append to %s should be 0, but it is %d",
			kerr.InvalidRecord, p.tp, b.BaseOffset()))
	}
	limits := p.limits.Load()
	check := records.TimestampCheck{Now: now, BeforeMax: limits.timestampBeforeMax, AfterMax: limits.timestampAfterMax, LogAppendTime: limits.logAppendTime}
	if limits.keyRequired {
		check.CompactedPartition = p.tp.String()
	}
	errs, err := records.ValidateProduce(b, recordsLimit, &check, nil)
	switch {
	case errors.Is(err, records.ErrTooLarge):
		return errors.Join(kerr.MessageTooLarge, err)
	case err != nil:
		return refused(errors.Join(kerr.InvalidRecord, err))
	case len(errs) > 0:
		return recordErrors(errs, p.tp.String(), p.log.LogStartOffset())
	}
	return nil
}

// recordErrors is Kafka's LogValidator.processRecordErrors: records
// refused for their timestamps make the batch INVALID_TIMESTAMP, others
// (a compacted topic's records without a key) INVALID_RECORD, each record
// listed.
func recordErrors(errs []records.RecordError, partition string, logStart rb.Offset) error {
	rejected := &netio.RecordsError{LogStartOffset: logStart, Message: invalidTimestampMessage}
	shown := make([]string, 0, 3)
	timestamps := false
	for _, e := range errs {
		rejected.Records = append(rejected.Records, netio.RecordError{BatchIndex: e.Index, Message: e.Message})
		timestamps = timestamps || e.Timestamp
		if len(shown) < cap(shown) {
			shown = append(shown, fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", e.Index, e.Message))
		}
	}
	if timestamps {
		rejected.Err = fmt.Errorf("%w: broker: %s: %d records refused, the first: %s", kerr.InvalidTimestamp, partition, len(errs), errs[0].Message)
		return rejected
	}
	rejected.Message = fmt.Sprintf("One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [%s]",
		len(errs), strings.Join(shown, ", "))
	rejected.Err = fmt.Errorf("%w: broker: %s", kerr.InvalidRecord, rejected.Message)
	return rejected
}

// checkProducers checks the idempotent and transactional batches against
// the producer state, with the offsets the append will assign from next,
// and stages their changes; p.mu is held. When the batches repeat
// retained ones (a client retry) it returns the first one's metadata and
// nothing must be appended.
func (p *Partition) checkProducers(batches []byte, next rb.Offset) (producerAppend, *batchMetadata, error) {
	staged := producerAppend{states: p.producers}
	var duplicate *batchMetadata
	fresh := 0
	for it := rb.NewIter(batches, false); it.Next(); {
		b := it.Batch()
		info := batchInfoOf(b)
		info.firstOffset, info.lastOffset = next, next+rb.Offset(b.LastOffsetDelta())
		next = info.lastOffset + 1
		if info.producerID < 0 {
			fresh++
			continue
		}
		if fresh == 0 {
			if m, ok := p.producers.duplicate(info); ok {
				if duplicate == nil {
					duplicate = &m
				}
				continue
			}
		}
		if duplicate != nil {
			return staged, nil, fmt.Errorf("%w: producer %d mixes retried and new batches in one request", kerr.OutOfOrderSequenceNumber, info.producerID)
		}
		fresh++
		if info.transactional {
			if err := p.producers.verify(info); err != nil {
				return staged, nil, err
			}
		}
		if err := staged.addClientBatch(info); err != nil {
			return staged, nil, err
		}
	}
	return staged, duplicate, nil
}

func produceError(err error) error {
	switch {
	case errors.Is(err, logstore.ErrInvalidAppend):
		return errors.Join(kerr.CorruptMessage, err)
	case errors.Is(err, logstore.ErrTooLarge):
		return errors.Join(kerr.RecordListTooLarge, err)
	case errors.Is(err, logstore.ErrClosed):
		return kerr.UnknownTopicOrPartition
	}
	return err
}

// addToTransaction lets producerID at epoch write transactional batches
// here, for transactionalID, until its transaction's marker (Kafka's
// verification guard).
func (p *Partition) addToTransaction(producerID int64, epoch int16, transactionalID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.producers.verified[producerID] = txnVerification{epoch: epoch, transactionalID: transactionalID}
}

// inTransaction reports whether producerID has an open transaction here
// at epoch (producerStates.inTransaction).
func (p *Partition) inTransaction(producerID int64, epoch int16) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producers.inTransaction(producerID, epoch)
}

// markerBatch is a transaction marker as Kafka's coordinator writes it: a
// transactional control batch of one record whose key is version 0 and
// the type, and whose value is version 0 and the coordinator epoch (0:
// this node is the only coordinator).
func markerBatch(producerID int64, epoch int16, commit bool, timestamp int64) []byte {
	kind := records.ControlAbort
	if commit {
		kind = records.ControlCommit
	}
	key := []byte{0, 0, byte(uint16(kind) >> 8), byte(kind)}
	value := []byte{0, 0, 0, 0, 0, 0}
	return rb.Append(nil, rb.Spec{BaseTimestamp: timestamp, ProducerID: producerID, ProducerEpoch: epoch,
		BaseSequence: -1, Transactional: true, Control: true, Records: []rb.Record{{Key: key, Value: value}}})
}

// writeMarker ends producerID's transaction here with a COMMIT or ABORT
// marker at epoch, unless the marker is already there (needsMarker), and
// ends its verification. It reports whether it wrote one; the caller
// flushes the log.
func (p *Partition) writeMarker(producerID int64, epoch int16, commit bool, timestamp int64) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.producers.needsMarker(producerID, epoch) {
		delete(p.producers.verified, producerID)
		return false, nil
	}
	if current := p.producers.entry(producerID).epoch; epoch < current {
		return false, fmt.Errorf("%w: %s: marker for producer %d at epoch %d below its epoch %d", kerr.InvalidProducerEpoch, p.tp, producerID, epoch, current)
	}
	info, err := p.log.AppendAssign(markerBatch(producerID, epoch, commit, timestamp), p.LeaderEpoch())
	if err != nil {
		return false, fmt.Errorf("broker: %s: write marker: %w", p.tp, err)
	}
	p.producers.applyMarker(producerID, epoch, !commit, info.FirstOffset, timestamp)
	p.advanceHighWatermark()
	p.notify()
	return true, nil
}

// loadReport says what loadProducerState found.
type loadReport struct {
	batches, markers int
	// inconsistent is the first batch the producer state could not make
	// sense of (replayed as written anyway), for the caller to log.
	inconsistent error
}

// loadProducerState rebuilds the producer state, open transactions and
// aborted-transaction index from the log, and drops producers idle since
// before expireBefore (milliseconds); p.mu is held. It walks every batch
// header from the log start (logstore.Log.WalkBatches: about one read of
// the log) and decodes each marker; Kafka starts from its latest producer
// snapshot instead, which this node does not write yet.
func (p *Partition) loadProducerState(expireBefore int64) (loadReport, error) {
	next, report, err := p.replayProducerState(expireBefore)
	if err != nil {
		return report, err
	}
	p.producers.adopt(next)
	return report, nil
}

// replayProducerState is loadProducerState without adopting the state it
// rebuilds (p.mu need not be held: the walk reads up to the log end as of
// its start).
func (p *Partition) replayProducerState(expireBefore int64) (*producerStates, loadReport, error) {
	next := newProducerStates()
	var report loadReport
	inconsistent := func(err error) {
		if report.inconsistent == nil {
			report.inconsistent = fmt.Errorf("broker: %s: %w", p.tp, err)
		}
	}
	err := p.log.WalkBatches(0, func(b rb.Batch) bool {
		report.batches++
		if b.ProducerID() < 0 {
			if b.Control() && records.IsMirrorPIDReset(b) {
				next.dropProducers() // a failover: what came before is the source's
			}
			return true
		}
		if !b.Control() {
			if err := next.applyReplicated(batchInfoOf(b)); err != nil {
				inconsistent(err)
			}
			return true
		}
		kind, err := records.ControlType(b)
		if err != nil {
			inconsistent(err) // not a transaction marker: no producer state
			return true
		}
		report.markers++
		next.applyMarker(b.ProducerID(), b.ProducerEpoch(), kind == records.ControlAbort, b.BaseOffset(), b.MaxTimestamp())
		return true
	})
	if err != nil {
		return nil, report, fmt.Errorf("broker: %s: load producer state: %w", p.tp, err)
	}
	next.expire(expireBefore)
	next.aborted.dropBelow(p.log.LogStartOffset())
	return next, report, nil
}

// logStartAdvanced drops the aborted transactions below the new log
// start. Producers stay (Kafka keeps them since KIP-360, so that a
// producer whose records were all deleted is not fenced); open
// transactions below the start are clamped by lastStableOffset.
func (p *Partition) logStartAdvanced() {
	p.producers.aborted.dropBelow(p.log.LogStartOffset())
}

// truncateTo truncates the log to offset and rebuilds the producer state
// from what is left (Kafka reloads from a snapshot). Until the rebuild
// the last stable offset stays at or below offset: a marker cut away
// reopens its transaction.
func (p *Partition) truncateTo(offset rb.Offset, expireBefore int64) (loadReport, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.notify()
	if first := p.producers.firstUnstable.Load(); first < 0 || first > int64(offset) {
		p.producers.firstUnstable.Store(int64(offset))
	}
	truncateErr := p.log.TruncateTo(offset)
	report, err := p.loadProducerState(expireBefore)
	return report, errors.Join(truncateErr, err)
}
