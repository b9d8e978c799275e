package netio

// Produce, versions 3-13 (v3 is the first with v2 record batches; v13
// names topics by ID), answered as Kafka 4.4 answers it
// (KafkaApis.handleProduceRequest, ReplicaManager.appendRecords):
//
//   - an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION;
//   - the records must be one whole v2 batch (ProduceRequest.
//     validateRecords): no batch, a legacy one (magic 0 or 1) or a second
//     one is INVALID_RECORD; a batch length below a legacy message's
//     overhead or an unknown magic is CORRUPT_MESSAGE; zstd below v7 is
//     UNSUPPORTED_COMPRESSION_TYPE. Bytes after the batch too few to be
//     another whole one are dropped, as Kafka trims them;
//   - acks other than -1, 0 and 1: INVALID_REQUIRED_ACKS, for the
//     partitions that passed the checks above;
//   - then Partition.Produce checks the batch against the partition
//     (size, CRC, Kafka's LogValidator) and appends it.
//
// A refused partition answers base offset -1 and log start offset -1,
// but a RecordsError carries the partition's log start offset and, for
// INVALID_TIMESTAMP, the records at fault (v8+). The error message (v8+)
// is Kafka's where Kafka sends one (a RecordsError's Message), null for
// the refusals Kafka answers without one (silentProduceErrors), and the
// error's text for refusals of mirrord's own (a mirror topic's, or an
// error without a Kafka code), so that a client sees why.
//
// acks=0 gets no response, as in Kafka; and as in Kafka a request with
// acks=0 of which any partition failed closes the connection, so that
// the producer learns something went wrong (the other partitions are
// appended). acks=1 and acks=-1 are the same on a single node; on a
// cluster's leader acks=-1 waits for the ISR up to the request's
// TimeoutMillis (the ctx Partition.Produce gets), partition after
// partition. From v10 a NOT_LEADER_OR_FOLLOWER names the current leader
// and its endpoint (KIP-951).

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RecordsError is a Produce error found while checking a batch against
// its partition's log (Kafka's LogValidator), which Kafka answers with
// the partition's log start offset and, for the records at fault, their
// index in the batch and why.
type RecordsError struct {
	Err            error // wraps the kerr error
	LogStartOffset rb.Offset
	Records        []RecordError
	// Message is the partition's ErrorMessage when Kafka has words for
	// it; "" means Err's text.
	Message string
}

func (e *RecordsError) Error() string { return e.Err.Error() }
func (e *RecordsError) Unwrap() error { return e.Err }

// RecordError is one record a Produce refused (Kafka's RecordError).
type RecordError struct {
	BatchIndex int32
	Message    string
}

// ErrProduceFailedAcksZero closes the connection of an acks=0 Produce of
// which a partition failed.
var ErrProduceFailedAcksZero = errors.New("netio: produce with acks=0 failed")

func serveProduce(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	produce := ProduceRequest{Version: req.Version, Acks: req.Acks}
	if req.TransactionID != nil {
		produce.TransactionalID = *req.TransactionID
	}
	if req.Acks == -1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(max(req.TimeoutMillis, 0))*time.Millisecond)
		defer cancel()
	}
	var failed, transactionDenied error
	if req.TransactionID != nil && !c.authorize(opWrite, resourceTransactional, *req.TransactionID) {
		transactionDenied = kerr.TransactionalIDAuthorizationFailed
	}
	answer := func(sp *kmsg.ProduceResponseTopicPartition, requested, topic string, result ProduceResult, err error) {
		sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = int64(result.BaseOffset), result.LogAppendTime, int64(result.LogStartOffset)
		if err != nil {
			answerProduceError(c, sp, err)
			if req.Version >= 10 && sp.ErrorCode == kerr.NotLeaderForPartition.Code {
				nameProduceLeader(c, resp, sp, topic)
			}
			failed = errors.Join(failed, fmt.Errorf("%s-%d: %w", requested, sp.Partition, err))
		}
	}
	// On a cluster's leader an acks=-1 partition waits for its ISR: the
	// partitions are appended and waited on at once, as Kafka appends
	// them all before one delayed produce waits (bounded by the request's
	// partitions). Alone, one after the other as always.
	_, cluster := c.server.backend.(ClusterBackend)
	var waits sync.WaitGroup
	type waiting struct {
		topicIndex, partitionIndex int
		requested, topic           string
		result                     ProduceResult
		err                        error
	}
	var pending []*waiting
	for _, rt := range req.Topics {
		topicName := rt.Topic
		t, topicErr := lookupTopic(c.server.backend, &topicName, rt.TopicID)
		if req.Version >= 13 {
			t, topicErr = lookupTopic(c.server.backend, nil, rt.TopicID)
		}
		if (topicErr == nil || req.Version < 13) && !c.authorize(opWrite, resourceTopic, cmp.Or(t.Name, rt.Topic)) {
			topicErr = kerr.TopicAuthorizationFailed
		}
		if transactionDenied != nil {
			topicErr = transactionDenied
		}
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range distinctPartitions(rt.Partitions) {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case topicErr != nil:
				answer(&sp, rt.Topic, t.Name, ProduceResult{}, topicErr)
			case cluster && req.Acks == -1:
				w := &waiting{topicIndex: len(resp.Topics), partitionIndex: len(st.Partitions), requested: rt.Topic, topic: t.Name}
				pending = append(pending, w)
				waits.Go(func() {
					w.result, w.err = produceOne(ctx, c.server.backend, w.topic, rp.Partition, rp.Records, req.Version, produce)
				})
			default:
				result, err := produceOne(ctx, c.server.backend, t.Name, rp.Partition, rp.Records, req.Version, produce)
				answer(&sp, rt.Topic, t.Name, result, err)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	waits.Wait()
	for _, w := range pending {
		answer(&resp.Topics[w.topicIndex].Partitions[w.partitionIndex], w.requested, w.topic, w.result, w.err)
	}
	if req.Acks == 0 {
		if failed != nil {
			return nil, fmt.Errorf("%w: %w", ErrProduceFailedAcksZero, failed)
		}
		return nil, nil
	}
	return resp, nil
}

// nameProduceLeader fills a NOT_LEADER_OR_FOLLOWER answer's current
// leader and adds its endpoint to the response's, once per node (KIP-951).
func nameProduceLeader(c *conn, resp *kmsg.ProduceResponse, sp *kmsg.ProduceResponseTopicPartition, topic string) {
	partition, err := c.server.backend.Partition(topic, sp.Partition)
	if err != nil {
		partition = nil // held elsewhere: the cluster's view names the leader
	}
	leader, epoch, endpoint, found := c.partitionLeader(topic, sp.Partition, partition)
	sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, int32(epoch)
	if !found || slices.ContainsFunc(resp.Brokers, func(b kmsg.ProduceResponseBroker) bool { return b.NodeID == leader }) {
		return
	}
	b := kmsg.NewProduceResponseBroker()
	b.NodeID, b.Host, b.Port = endpoint.NodeID, endpoint.Host, endpoint.Port
	if endpoint.Rack != "" {
		b.Rack = &endpoint.Rack
	}
	resp.Brokers = append(resp.Brokers, b)
}

// distinctPartitions keeps one entry per partition, as Kafka's
// KafkaApis.handleProduceRequest does (it maps partitions to their
// records): a partition given twice is answered once, with the records
// of its last entry.
func distinctPartitions(partitions []kmsg.ProduceRequestTopicPartition) []kmsg.ProduceRequestTopicPartition {
	at := make(map[int32]int, len(partitions))
	distinct := partitions[:0:0]
	for _, rp := range partitions {
		if i, seen := at[rp.Partition]; seen {
			distinct[i] = rp
			continue
		}
		at[rp.Partition] = len(distinct)
		distinct = append(distinct, rp)
	}
	return distinct
}

// answerProduceError fills a refused partition's answer.
func answerProduceError(c *conn, sp *kmsg.ProduceResponseTopicPartition, err error) {
	sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
	sp.ErrorCode = errorCode(c.server.log, err, kerr.KafkaStorageError)
	sp.ErrorMessage = errorMessage(err)
	var kafkaErr *kerr.Error
	var worded *Error
	if errors.As(err, &kafkaErr) && silentProduceErrors[kafkaErr.Code] && !errors.As(err, &worded) {
		sp.ErrorMessage = nil
	}
	var refused *RecordsError
	if errors.As(err, &refused) {
		sp.LogStartOffset = int64(refused.LogStartOffset)
		for _, r := range refused.Records {
			record := kmsg.NewProduceResponseTopicPartitionErrorRecord()
			record.RelativeOffset = r.BatchIndex
			record.ErrorMessage = &r.Message
			sp.ErrorRecords = append(sp.ErrorRecords, record)
		}
		sp.ErrorMessage = nonEmpty(refused.Message)
	}
}

// silentProduceErrors are the Produce refusals Kafka 4.4 answers with a
// null error message: it sends one only for records its LogValidator
// refused record by record (ReplicaManager's hasCustomErrorMessage), and
// for the few refusals the Backend words itself (an *Error). A topic
// denied WRITE is KafkaApis.handleProduceRequest's
// new PartitionResponse(TOPIC_AUTHORIZATION_FAILED): no message either.
var silentProduceErrors = map[int16]bool{}

func init() {
	for _, e := range []*kerr.Error{kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.InvalidRecord, kerr.CorruptMessage,
		kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRequiredAcks, kerr.InvalidTimestamp,
		kerr.UnsupportedCompressionType, kerr.OutOfOrderSequenceNumber, kerr.DuplicateSequenceNumber,
		kerr.InvalidProducerEpoch, kerr.InvalidProducerIDMapping, kerr.TransactionalIDAuthorizationFailed,
		kerr.InvalidTxnState, kerr.TransactionAbortable, kerr.ConcurrentTransactions, kerr.KafkaStorageError, kerr.NotLeaderForPartition,
		kerr.TopicAuthorizationFailed} {
		silentProduceErrors[e.Code] = true
	}
}

func produceOne(ctx context.Context, backend Backend, topic string, partition int32, records []byte, version int16, request ProduceRequest) (ProduceResult, error) {
	p, err := backend.Partition(topic, partition)
	if err != nil {
		return ProduceResult{}, err
	}
	batch, err := produceBatch(records, version)
	if err != nil {
		return ProduceResult{}, err
	}
	if request.Acks != 0 && request.Acks != 1 && request.Acks != -1 {
		return ProduceResult{}, fmt.Errorf("%w: acks %d, want -1, 0 or 1", kerr.InvalidRequiredAcks, request.Acks)
	}
	return p.Produce(ctx, batch, request)
}

// Positions in a batch, v2 or legacy, that Kafka's batch iterator reads
// before knowing the format (Records.SIZE_OFFSET, MAGIC_OFFSET).
const (
	magicPosition = 16
	// legacyOverheadV0 is the smallest batch length Kafka's iterator
	// takes (LegacyRecord.RECORD_OVERHEAD_V0).
	legacyOverheadV0 = 14
	zstdVersionMin   = 7
)

// produceBatch returns the one whole batch of a partition's records, as
// Kafka's ProduceRequest.validateRecords and its batch iterator
// (ByteBufferLogInputStream) accept it: bytes after it too few for a
// second whole batch are dropped.
func produceBatch(records []byte, version int16) ([]byte, error) {
	size, err := nextBatchSize(records)
	if err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, fmt.Errorf("%w: Produce requests with version %d must have at least one record batch per partition", kerr.InvalidRecord, version)
	}
	if magic := int8(records[magicPosition]); magic != rb.Magic {
		return nil, fmt.Errorf("%w: Produce requests with version %d are only allowed to contain record batches with magic version 2, not %d", kerr.InvalidRecord, version, magic)
	}
	batch := records[:size]
	if version < zstdVersionMin && len(batch) >= rb.HeaderSize && rb.Batch(batch).Codec() == rb.CodecZstd {
		return nil, fmt.Errorf("%w: Produce requests with version %d are not allowed to use ZStandard compression", kerr.UnsupportedCompressionType, version)
	}
	if next, err := nextBatchSize(records[size:]); err != nil {
		return nil, err
	} else if next > 0 {
		return nil, fmt.Errorf("%w: Produce requests with version %d are only allowed to contain exactly one record batch per partition", kerr.InvalidRecord, version)
	}
	return batch, nil
}

// nextBatchSize is the size of the batch that starts records, 0 when
// records holds no whole batch (Kafka's ByteBufferLogInputStream.
// nextBatchSize and nextBatch).
func nextBatchSize(records []byte) (int, error) {
	if len(records) < rb.LengthPrefixSize {
		return 0, nil
	}
	length := int32(binary.BigEndian.Uint32(records[8:]))
	if length < legacyOverheadV0 {
		return 0, fmt.Errorf("%w: Record size %d is less than the minimum record overhead (%d)", kerr.CorruptMessage, length, legacyOverheadV0)
	}
	if len(records) <= magicPosition {
		return 0, nil
	}
	if magic := int8(records[magicPosition]); magic < 0 || magic > rb.Magic {
		return 0, fmt.Errorf("%w: Invalid magic found in record: %d", kerr.CorruptMessage, magic)
	}
	size := int64(length) + rb.LengthPrefixSize
	if int64(len(records)) < size {
		return 0, nil
	}
	return int(size), nil
}
