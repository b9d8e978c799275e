package e2e

// The answers of the transaction sequences made comparable (see
// diff_txn_test.go for what differs legitimately and why).

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnAPIKeys are the API keys whose versions decide the transaction
// version a client uses: Produce, InitProducerID, AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn, TxnOffsetCommit.
var txnAPIKeys = []int16{0, 22, 24, 25, 26, 28}

const transactionVersionFeature = "transaction.version"

// txnLogAppendTimeSet stands for a log append time in a Produce answer:
// Kafka answers a duplicate batch with its timestamp there, which is
// the clock of the test when it built the batch for that server.
const txnLogAppendTimeSet = 1

// txnLeaderEpochAfterRestart stands for a leader epoch once the servers
// were restarted (see diff_txn_test.go).
const txnLeaderEpochAfterRestart = 1 << 30

func (s *txnSession) normaliseLeaderEpoch(epoch *int32) {
	if s.restarted && *epoch >= 0 {
		*epoch = txnLeaderEpochAfterRestart
	}
}

// sortByPartition orders an answer's partitions: Kafka answers them in
// the order of a hash map, which is not part of the protocol. Partitions
// named twice keep their order.
func sortByPartition[P any](partitions []P, partition func(P) int32) {
	slices.SortStableFunc(partitions, func(a, b P) int { return cmp.Compare(partition(a), partition(b)) })
}

// normaliseTxnAnswer makes an answer of server s comparable: the common
// normaliser, then producer IDs as ordinals, throttles and messages; a
// Fetch becomes a txnFetchAnswer.
func normaliseTxnAnswer(s *txnSession, resp kmsg.Response) any {
	normaliseResponse(resp)
	switch r := resp.(type) {
	case *kmsg.ApiVersionsResponse:
		return txnVersions(r)
	case *kmsg.InitProducerIDResponse:
		r.ThrottleMillis = 0
		r.ProducerID = s.ordinal(r.ProducerID)
	case *kmsg.EndTxnResponse:
		r.ThrottleMillis = 0
		r.ProducerID = s.ordinal(r.ProducerID)
	case *kmsg.AddPartitionsToTxnResponse:
		r.ThrottleMillis = 0
		for i := range r.Topics {
			sortByPartition(r.Topics[i].Partitions, func(p kmsg.AddPartitionsToTxnResponseTopicPartition) int32 { return p.Partition })
		}
		for i := range r.Transactions {
			for j := range r.Transactions[i].Topics {
				sortByPartition(r.Transactions[i].Topics[j].Partitions, func(p kmsg.AddPartitionsToTxnResponseTransactionTopicPartition) int32 { return p.Partition })
			}
		}
	case *kmsg.AddOffsetsToTxnResponse:
		r.ThrottleMillis = 0
	case *kmsg.TxnOffsetCommitResponse:
		r.ThrottleMillis = 0
	case *kmsg.ListOffsetsResponse:
		r.ThrottleMillis = 0
		for i := range r.Topics {
			sortByPartition(r.Topics[i].Partitions, func(p kmsg.ListOffsetsResponseTopicPartition) int32 { return p.Partition })
			for j := range r.Topics[i].Partitions {
				s.normaliseLeaderEpoch(&r.Topics[i].Partitions[j].LeaderEpoch)
			}
		}
	case *kmsg.FindCoordinatorResponse:
		r.ThrottleMillis = 0
		normaliseString(r.ErrorMessage, diffMessage)
		r.NodeID, r.Host, r.Port = normaliseCoordinator(s, r.NodeID), diffHost, 0
		for i := range r.Coordinators {
			c := &r.Coordinators[i]
			normaliseString(c.ErrorMessage, diffMessage)
			c.NodeID, c.Host, c.Port = normaliseCoordinator(s, c.NodeID), diffHost, 0
		}
	case *kmsg.ProduceResponse:
		r.ThrottleMillis = 0
		sameProduceAnswers(nil, r, r)
		for i := range r.Topics {
			topic := &r.Topics[i]
			normaliseTopicID(&topic.TopicID)
			sortByPartition(topic.Partitions, func(p kmsg.ProduceResponseTopicPartition) int32 { return p.Partition })
			for j := range topic.Partitions {
				if p := &topic.Partitions[j]; p.LogAppendTime != -1 {
					p.LogAppendTime = txnLogAppendTimeSet
				}
			}
		}
	case *kmsg.FetchResponse:
		return summariseFetch(s, r)
	case *kmsg.DescribeTransactionsResponse:
		s.normaliseDescribeTransactions(r)
	case *kmsg.ListTransactionsResponse:
		s.normaliseListTransactions(r)
	}
	return resp
}

func normaliseCoordinator(s *txnSession, node int32) int32 {
	if node == s.server.node {
		return diffNodeIDBase
	}
	return node
}

// txnVersionsAnswer is what of ApiVersions decides transactions: the
// versions of txnAPIKeys and the transaction.version feature.
type txnVersionsAnswer struct {
	ErrorCode int16
	APIKeys   []kmsg.ApiVersionsResponseApiKey
	Supported []kmsg.ApiVersionsResponseSupportedFeature
	Finalized []kmsg.ApiVersionsResponseFinalizedFeature
}

func txnVersions(r *kmsg.ApiVersionsResponse) txnVersionsAnswer {
	answer := txnVersionsAnswer{ErrorCode: r.ErrorCode}
	for _, k := range r.ApiKeys {
		if slices.Contains(txnAPIKeys, k.ApiKey) {
			answer.APIKeys = append(answer.APIKeys, k)
		}
	}
	for _, f := range r.SupportedFeatures {
		if f.Name == transactionVersionFeature {
			answer.Supported = append(answer.Supported, f)
		}
	}
	for _, f := range r.FinalizedFeatures {
		if f.Name == transactionVersionFeature {
			answer.Finalized = append(answer.Finalized, f)
		}
	}
	return answer
}

// txnFetchAnswer is a Fetch answer with its batches summarised.
type txnFetchAnswer struct {
	ErrorCode  int16
	Partitions []txnFetchPartition
}

type txnFetchPartition struct {
	Topic               string
	Partition           int32
	ErrorCode           int16
	HighWatermark       int64
	LastStableOffset    int64
	LogStartOffset      int64
	AbortedTransactions []kmsg.FetchResponseTopicPartitionAbortedTransaction
	Batches             []txnBatchSummary
}

// txnBatchSummary is a fetched batch without what carries a clock
// (timestamps, and so CRC and length).
type txnBatchSummary struct {
	BaseOffset           int64
	LastOffsetDelta      int32
	PartitionLeaderEpoch int32
	Attributes           int16
	ProducerID           int64 // ordinal
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
	Marker               string // control batches: commit, abort or other
	Error                string // a batch that does not parse
}

func summariseFetch(s *txnSession, r *kmsg.FetchResponse) txnFetchAnswer {
	answer := txnFetchAnswer{ErrorCode: r.ErrorCode}
	for _, topic := range r.Topics {
		for _, p := range topic.Partitions {
			fp := txnFetchPartition{Topic: topic.Topic, Partition: p.Partition, ErrorCode: p.ErrorCode,
				HighWatermark: p.HighWatermark, LastStableOffset: p.LastStableOffset, LogStartOffset: p.LogStartOffset,
				AbortedTransactions: p.AbortedTransactions}
			for i := range fp.AbortedTransactions {
				fp.AbortedTransactions[i].ProducerID = s.ordinal(fp.AbortedTransactions[i].ProducerID)
			}
			fp.Batches = summariseBatches(s, p.RecordBatches)
			answer.Partitions = append(answer.Partitions, fp)
		}
	}
	return answer
}

// summariseBatches summarises the whole batches of records; a partial
// one at the end (a Fetch may cut one) is dropped.
func summariseBatches(s *txnSession, data []byte) []txnBatchSummary {
	var batches []txnBatchSummary
	for len(data) >= batchHeaderBytes {
		size := 12 + int(int32(binary.BigEndian.Uint32(data[batchLengthAt:])))
		if size < batchHeaderBytes || size > len(data) {
			break
		}
		raw := data[:size]
		data = data[size:]
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw); err != nil {
			batches = append(batches, txnBatchSummary{Error: err.Error()})
			continue
		}
		summary := txnBatchSummary{BaseOffset: b.FirstOffset, LastOffsetDelta: b.LastOffsetDelta,
			PartitionLeaderEpoch: b.PartitionLeaderEpoch, Attributes: b.Attributes, ProducerID: s.ordinal(b.ProducerID),
			ProducerEpoch: b.ProducerEpoch, BaseSequence: b.FirstSequence, NumRecords: b.NumRecords}
		s.normaliseLeaderEpoch(&summary.PartitionLeaderEpoch)
		if b.Attributes&batchControlBit != 0 {
			summary.Marker = controlType(raw)
		}
		batches = append(batches, summary)
	}
	return batches
}
