package netio

// TxnOffsetCommit, versions 0-5 (v3+ carry the member's generation, ID
// and instance ID, KIP-447; v5, KIP-890 part 2, adds the partition to the
// transaction implicitly: transaction version 2). The
// group coordinator (Backend.Groups) answers it whole once the offsets
// are written in the producer's transaction: INVALID_TXN_STATE when the
// producer has not sent AddOffsetsToTxn, INVALID_PRODUCER_EPOCH when it
// is fenced, the group checks of a transactional commit otherwise. No
// answer (the coordinator closed) is COORDINATOR_NOT_AVAILABLE for every
// partition of the request.
//
// With an authorizer, as Kafka's KafkaApis.handleTxnOffsetCommitRequest:
// WRITE on the transactional ID, then READ on the group (each denial
// answers every partition), then READ on each topic: the partitions of a
// denied topic are TOPIC_AUTHORIZATION_FAILED, answered first, and the
// coordinator sees only the others (not at all when none is left).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveTxnOffsetCommit(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	resp, err := unlessDenied(c.authorize(opWrite, resourceTransactional, req.TransactionalID), kerr.TransactionalIDAuthorizationFailed, func() (*kmsg.TxnOffsetCommitResponse, error) {
		return unlessDenied(c.authorize(opRead, resourceGroup, req.Group), kerr.GroupAuthorizationFailed, func() (*kmsg.TxnOffsetCommitResponse, error) {
			allowed, denied := splitTopicsByAuthorized(c, opRead, req.Topics, func(rt kmsg.TxnOffsetCommitRequestTopic) string { return rt.Topic })
			answer := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
			for _, rt := range denied {
				answer.Topics = append(answer.Topics, txnOffsetCommitAnswer(rt, kerr.TopicAuthorizationFailed.Code))
			}
			if len(allowed) == 0 {
				return answer, nil
			}
			asked := *req
			asked.Topics = allowed
			committed, err := c.server.backend.Groups().TxnOffsetCommit(ctx, &asked)
			if err != nil {
				return nil, err
			}
			committed.Topics = append(answer.Topics, committed.Topics...)
			return committed, nil
		})
	})
	if err == nil {
		return resp, nil
	}
	code := coordinatorErrorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
	resp = req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, rt := range req.Topics {
		resp.Topics = append(resp.Topics, txnOffsetCommitAnswer(rt, code))
	}
	return resp, nil
}

// txnOffsetCommitAnswer answers every partition of rt with code.
func txnOffsetCommitAnswer(rt kmsg.TxnOffsetCommitRequestTopic, code int16) kmsg.TxnOffsetCommitResponseTopic {
	st := kmsg.NewTxnOffsetCommitResponseTopic()
	st.Topic = rt.Topic
	for _, rp := range rt.Partitions {
		sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
		sp.Partition, sp.ErrorCode = rp.Partition, code
		st.Partitions = append(st.Partitions, sp)
	}
	return st
}
