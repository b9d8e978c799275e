package netio

// AddPartitionsToTxn, versions 0-5. v0-3 are the client's: one
// transaction per request. v4-5 (KIP-890) batch transactions, each of
// which may be VerifyOnly; in Kafka brokers send them (their own
// transaction verification) under the CLUSTER_ACTION ACL, and any client
// may where no authorizer runs, as here. As Kafka's
// KafkaApis.handleAddPartitionsToTxnRequest, per transaction: every
// partition is checked first; an unknown one is
// UNKNOWN_TOPIC_OR_PARTITION, one of an internal topic (v0-3 only:
// clients may not write there) TOPIC_AUTHORIZATION_FAILED, and if any
// fails the others answer OPERATION_NOT_ATTEMPTED and nothing is added.
// Otherwise the coordinator adds them (Transactions.AddPartitions, topic
// by topic, stopping at the first failure) and the transaction's one
// outcome answers every partition, as the coordinator's single error does
// in Kafka; a VerifyOnly transaction answers per partition whether it is
// in the transaction (Transactions.VerifyPartitions). An empty
// transactional ID is INVALID_REQUEST. Below v2 PRODUCER_FENCED is
// answered as INVALID_PRODUCER_EPOCH.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	addPartitionsToTxnFencedVersion = 2
	addPartitionsToTxnBatchVersion  = 4
)

// txnTopic is one topic's partitions of an AddPartitionsToTxn, in either
// version's shape.
type txnTopic struct {
	topic      string
	partitions []int32
}

func serveAddPartitionsToTxn(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < addPartitionsToTxnBatchVersion {
		topics := make([]txnTopic, len(req.Topics))
		for i, rt := range req.Topics {
			topics[i] = txnTopic{rt.Topic, rt.Partitions}
		}
		codes := addTxnPartitions(ctx, c, req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, topics)
		for i, rt := range req.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = rt.Topic
			for j, partition := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = partition, codes[i][j]
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	for _, rtx := range req.Transactions {
		topics := make([]txnTopic, len(rtx.Topics))
		for i, rt := range rtx.Topics {
			topics[i] = txnTopic{rt.Topic, rt.Partitions}
		}
		codes := addTxnPartitions(ctx, c, req.Version, rtx.TransactionalID, rtx.ProducerID, rtx.ProducerEpoch, rtx.VerifyOnly, topics)
		stx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		stx.TransactionalID = rtx.TransactionalID
		for i, rt := range rtx.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			st.Topic = rt.Topic
			for j, partition := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				sp.Partition, sp.ErrorCode = partition, codes[i][j]
				st.Partitions = append(st.Partitions, sp)
			}
			stx.Topics = append(stx.Topics, st)
		}
		resp.Transactions = append(resp.Transactions, stx)
	}
	return resp, nil
}

// addTxnPartitions checks, then adds or verifies, one transaction's
// partitions, and returns the code of each.
func addTxnPartitions(ctx context.Context, c *conn, version int16, transactionalID string, producerID int64, producerEpoch int16, verifyOnly bool, topics []txnTopic) [][]int16 {
	if denied := c.txnPartitionsDenied(version, transactionalID, topics); denied != nil {
		return denied
	}
	codes, failed := checkTxnPartitions(c.server.backend, topics, version < addPartitionsToTxnBatchVersion)
	if failed {
		return codes
	}
	transactions := c.server.backend.Transactions()
	if verifyOnly {
		for i, rt := range topics {
			for j, err := range transactions.VerifyPartitions(ctx, transactionalID, producerID, producerEpoch, rt.topic, rt.partitions) {
				codes[i][j] = coordinatorErrorCode(c.server.log, err, kerr.UnknownServerError)
			}
		}
		return codes
	}
	err := error(kerr.InvalidRequest)
	if transactionalID != "" {
		err = nil
		for _, rt := range topics {
			if err = errors.Join(transactions.AddPartitions(ctx, transactionalID, producerID, producerEpoch, rt.topic, rt.partitions)...); err != nil {
				break
			}
		}
	}
	code := olderFencedCode(coordinatorErrorCode(c.server.log, err, kerr.UnknownServerError), version, addPartitionsToTxnFencedVersion)
	for i := range codes {
		for j := range codes[i] {
			codes[i][j] = code
		}
	}
	return codes
}

// checkTxnPartitions answers, per requested partition, the error of the
// metadata check, OPERATION_NOT_ATTEMPTED for the partitions that passed
// when another failed, and whether any failed. Internal topics are
// refused to clients (fromClient: v0-3).
func checkTxnPartitions(backend Backend, topics []txnTopic, fromClient bool) ([][]int16, bool) {
	codes := make([][]int16, len(topics))
	failed := false
	for i, rt := range topics {
		codes[i] = make([]int16, len(rt.partitions))
		t, known := backend.Topic(rt.topic)
		for j, partition := range rt.partitions {
			switch {
			case known && t.Internal && fromClient:
				codes[i][j], failed = kerr.TopicAuthorizationFailed.Code, true
			case !known || partition < 0 || partition >= t.Partitions:
				codes[i][j], failed = kerr.UnknownTopicOrPartition.Code, true
			}
		}
	}
	if failed {
		for i := range codes {
			for j := range codes[i] {
				if codes[i][j] == 0 {
					codes[i][j] = kerr.OperationNotAttempted.Code
				}
			}
		}
	}
	return codes, failed
}
