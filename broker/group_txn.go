package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/mirrord/mirrord/broker/group"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Offsets in a transaction (Kafka's AddOffsetsToTxn and TxnOffsetCommit):
//
//   - AddOffsetsToTxn adds __consumer_offsets-0 (this node's one partition
//     for every group) to the transaction, as AddPartitionsToTxn adds a
//     partition: the same producer checks and errors, and the partition's
//     verification guard (addToTransaction) lets the producer's
//     transactional records in.
//   - TxnOffsetCommit has the transaction coordinator verify the producer
//     (verifyTransaction: INVALID_PRODUCER_ID_MAPPING for another or an
//     unknown transactional ID, INVALID_PRODUCER_EPOCH when it is fenced)
//     and the partition: under transaction version 2 (v5+) it is added to
//     the transaction then, below the producer must have added it
//     (INVALID_TXN_STATE, v4 TRANSACTION_ABORTABLE),
//     then the group coordinator validates the group and appends the
//     offsets as a transactional batch of the producer ID and epoch (base
//     sequence 0, as Kafka's coordinator writes them; no sequence check).
//     The store checks the guard again under the partition lock, and the
//     batch opens the producer's transaction in the partition's producer
//     state, like a produced one.
//   - EndTxn writes the marker to __consumer_offsets-0 with the other
//     partitions' (transactions.complete), flushes it, then tells the group
//     coordinator, which commits or drops the pending offsets.
//   - At open, the transaction recovery runs first (it completes Prepare*
//     transactions and aborts orphans, in __consumer_offsets too), then the
//     group store reads the log with its transactional batches and
//     markers, and the coordinator rebuilds the same pending and committed
//     offsets; only then does the reaper start, so no marker falls between
//     the read and the coordinator.

// appendCoordinatorBatch appends a batch the group coordinator built
// (Kafka's AppendOrigin.COORDINATOR: no sequence check). A transactional
// batch needs the producer's verification at its epoch, and is recorded in
// the producer state; the caller flushes.
func (p *Partition) appendCoordinatorBatch(batch []byte) error {
	b, err := rb.Parse(batch)
	if err != nil {
		panic(fmt.Sprintf("broker: %s: the group coordinator built a bad batch: %v", p.tp, err))
	}
	info := batchInfoOf(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	if info.transactional {
		if err := p.producers.verify(info); err != nil {
			return err
		}
	}
	appended, err := p.log.AppendAssign(batch, p.LeaderEpoch())
	if err != nil {
		return err
	}
	if info.producerID >= 0 {
		info.firstOffset = appended.FirstOffset
		info.lastOffset = appended.FirstOffset + rb.Offset(b.LastOffsetDelta())
		if err := p.producers.applyReplicated(info); err != nil {
			panic(fmt.Sprintf("broker: %s: %v", p.tp, err)) // a non-transactional batch of a producer: never built
		}
	}
	p.log.SetHighWatermark(p.log.LogEndOffset())
	p.notify()
	return nil
}

// groupBatch encodes records as one batch: a transactional batch of their
// producer when they are transactional (all of one append are, or none).
func groupBatch(dst []byte, recs []group.Record, timestamp int64) []byte {
	batch := make([]rb.Record, len(recs))
	spec := rb.Spec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: timestamp}
	if recs[0].Transactional {
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = recs[0].ProducerID, recs[0].ProducerEpoch, 0, true
	}
	for i, r := range recs {
		if r.Transactional != recs[0].Transactional || r.ProducerID != recs[0].ProducerID || r.ProducerEpoch != recs[0].ProducerEpoch || r.Marker != group.NoMarker {
			panic("broker: a group store append mixing producers or holding a marker")
		}
		batch[i] = rb.Record{Key: r.Key, Value: r.Value}
	}
	spec.Records = batch
	return rb.Append(dst, spec)
}

// markerRecord is the group.Record of a transaction marker read back.
func markerRecord(b rb.Batch) (group.Record, error) {
	kind, err := records.ControlType(b)
	if err != nil {
		return group.Record{}, err
	}
	marker := group.AbortMarker
	if kind == records.ControlCommit {
		marker = group.CommitMarker
	}
	return group.Record{Transactional: true, ProducerID: b.ProducerID(), ProducerEpoch: b.ProducerEpoch(), Marker: marker}, nil
}

// resolveTransactions returns the records of all as a log without
// transactions would hold them, for compaction: a committed transaction's
// records become plain records in their place, an aborted one's are
// dropped, and so are the markers. open reports a transaction with no
// marker yet: its records cannot be resolved, and the log is not
// compacted.
func resolveTransactions(all []group.Record) (plain []group.Record, open bool) {
	pending := map[int64][]int{} // producer ID -> indexes of its open transaction's records
	keep := make([]bool, len(all))
	for i, r := range all {
		switch {
		case !r.Transactional:
			keep[i] = true
		case r.Marker == group.NoMarker:
			pending[r.ProducerID] = append(pending[r.ProducerID], i)
		default:
			for _, j := range pending[r.ProducerID] {
				keep[j] = r.Marker == group.CommitMarker
			}
			delete(pending, r.ProducerID)
		}
	}
	if len(pending) > 0 {
		return nil, true
	}
	for i, r := range all {
		if keep[i] {
			plain = append(plain, group.Record{Key: r.Key, Value: r.Value})
		}
	}
	return plain, false
}

// consumerOffsetsPartition returns __consumer_offsets-0, created if the
// node has none yet.
func (s *groupStore) consumerOffsetsPartition() (*Partition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ensureLog(); err != nil {
		return nil, err
	}
	return s.node.LocalPartition(consumerOffsetsTopic, 0)
}

// AddOffsets adds __consumer_offsets' partition of group (this node has
// one) to the producer's transaction (Kafka's
// handleAddOffsetsToTransaction).
func (t *transactions) AddOffsets(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, _ string) error {
	if transactionalID == "" {
		return kerr.InvalidRequest
	}
	if _, err := t.node.groups.store.consumerOffsetsPartition(); err != nil {
		return err
	}
	return t.AddPartitions(ctx, transactionalID, producerID, producerEpoch, consumerOffsetsTopic, []int32{0})[0]
}

// groupsTransactionCompleted tells the group coordinator that the marker
// of producerID's transaction is in __consumer_offsets (before the
// coordinator has opened, at recovery, it reads the marker from the log).
func (t *transactions) groupsTransactionCompleted(producerID int64, commit bool) {
	coordinator := t.groups.Load()
	if coordinator == nil {
		return
	}
	if err := coordinator.CompleteTransaction(context.Background(), producerID, commit); err != nil {
		t.log.Warn("group coordinator not told of a transaction marker", "producer.id", producerID, "commit", commit, "error", err)
	}
}

// TxnOffsetCommit has the transaction coordinator verify the producer's
// transaction on __consumer_offsets (adding the partition under
// transaction version 2, v5+), then has the group coordinator commit
// (netio.GroupCoordinator).
func (g groupCoordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, error) {
	if req.Group != "" {
		if err := g.store.checkTransaction(req.TransactionalID, req.ProducerID, req.ProducerEpoch, txnOffsetCommitOperation(req.Version)); err != nil {
			code := kerr.InvalidTxnState.Code
			var kafkaErr *kerr.Error
			if errors.As(err, &kafkaErr) {
				code = kafkaErr.Code
			}
			return g.txnOffsetCommitError(req, code), nil
		}
	}
	return g.Coordinator.TxnOffsetCommit(ctx, req)
}

// txnOffsetCommitOperation is Kafka's
// txnOffsetCommitRequestVersionToTransactionSupportedOperation.
func txnOffsetCommitOperation(version int16) txnOperation {
	switch {
	case version >= 5:
		return txnAddPartition
	case version == 4:
		return txnGenericError
	}
	return txnDefaultError
}

// checkTransaction is the verification TxnOffsetCommit needs before the
// group coordinator runs: the producer's transaction of transactionalID
// at this epoch has __consumer_offsets, or gets it (op).
func (s *groupStore) checkTransaction(transactionalID string, producerID int64, producerEpoch int16, op txnOperation) error {
	p, err := s.consumerOffsetsPartition()
	if err != nil {
		return err
	}
	return s.node.txns.verifyTransaction(transactionalID, producerID, producerEpoch, p, op)
}

// txnOffsetCommitError answers code for each partition the node has, and
// UNKNOWN_TOPIC_OR_PARTITION for the others (KafkaApis answers those
// before the coordinator sees the request).
func (g groupCoordinator) txnOffsetCommitError(req *kmsg.TxnOffsetCommitRequest, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			partitionCode := code
			if _, err := g.store.node.LocalPartition(t.Topic, p.Partition); err != nil {
				partitionCode = kerr.UnknownTopicOrPartition.Code
			}
			rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: partitionCode})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
