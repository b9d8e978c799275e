package netio

// AddPartitionsToTxn, versions 0-3: the client path, one transaction per
// request. (v4-5 batch transactions and add VerifyOnly; only brokers send
// them, and verifying needs a coordinator call the Backend does not have.)
// As Kafka's KafkaApis.handleAddPartitionsToTxnRequest: every partition is
// checked first; an unknown one is UNKNOWN_TOPIC_OR_PARTITION, one of an
// internal topic TOPIC_AUTHORIZATION_FAILED (clients may not write there),
// and if any fails the others answer OPERATION_NOT_ATTEMPTED and nothing
// is added. Otherwise the coordinator adds them (Transactions.AddPartitions,
// topic by topic, stopping at the first failure) and the transaction's one
// outcome answers every partition, as the coordinator's single error does
// in Kafka. An empty transactional ID is INVALID_REQUEST. Below v2
// PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const addPartitionsToTxnFencedVersion = 2

func serveAddPartitionsToTxn(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	codes, failed := checkTxnPartitions(c.server.backend, req.Topics)
	if !failed {
		code := errorCode(c.server.log, addTxnPartitions(ctx, c.server.backend, req), kerr.UnknownServerError)
		code = olderFencedCode(code, req.Version, addPartitionsToTxnFencedVersion)
		for i := range codes {
			for j := range codes[i] {
				codes[i][j] = code
			}
		}
	}
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

// checkTxnPartitions answers, per requested partition, the error of the
// metadata check, OPERATION_NOT_ATTEMPTED for the partitions that passed
// when another failed, and whether any failed.
func checkTxnPartitions(backend Backend, topics []kmsg.AddPartitionsToTxnRequestTopic) ([][]int16, bool) {
	codes := make([][]int16, len(topics))
	failed := false
	for i, rt := range topics {
		codes[i] = make([]int16, len(rt.Partitions))
		t, known := backend.Topic(rt.Topic)
		for j, partition := range rt.Partitions {
			switch {
			case known && t.Internal:
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

// addTxnPartitions adds every requested partition to the transaction and
// returns the first failure.
func addTxnPartitions(ctx context.Context, backend Backend, req *kmsg.AddPartitionsToTxnRequest) error {
	if req.TransactionalID == "" {
		return kerr.InvalidRequest
	}
	transactions := backend.Transactions()
	for _, rt := range req.Topics {
		errs := transactions.AddPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, rt.Topic, rt.Partitions)
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
	}
	return nil
}
