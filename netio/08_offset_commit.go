package netio

// OffsetCommit, versions 2-9 (v0-1 were removed in Kafka 4.0, KIP-896;
// v10, with topic IDs, is not served). The group coordinator
// (Backend.Groups) answers it once the commits are durable; it answers
// UNKNOWN_TOPIC_OR_PARTITION for partitions the node does not have. No
// answer (the coordinator closed) is COORDINATOR_NOT_AVAILABLE for every
// partition of the request.
//
// With an authorizer, as Kafka's KafkaApis.handleOffsetCommitRequest: READ
// on the group (else GROUP_AUTHORIZATION_FAILED for every partition), then
// READ on each topic: the partitions of a denied topic are
// TOPIC_AUTHORIZATION_FAILED, answered first, and the coordinator sees only
// the others (not at all when none is left).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveOffsetCommit(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	resp, err := unlessDenied(c.authorize(opRead, resourceGroup, req.Group), kerr.GroupAuthorizationFailed, func() (*kmsg.OffsetCommitResponse, error) {
		allowed, denied := splitTopicsByAuthorized(c, opRead, req.Topics, func(rt kmsg.OffsetCommitRequestTopic) string { return rt.Topic })
		answer := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range denied {
			answer.Topics = append(answer.Topics, offsetCommitAnswer(rt, kerr.TopicAuthorizationFailed.Code))
		}
		if len(allowed) == 0 {
			return answer, nil
		}
		asked := *req
		asked.Topics = allowed
		committed, err := c.server.backend.Groups().OffsetCommit(ctx, &asked)
		if err != nil {
			return nil, err
		}
		committed.Topics = append(answer.Topics, committed.Topics...)
		return committed, nil
	})
	if err == nil {
		return resp, nil
	}
	code := coordinatorErrorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
	resp = req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range req.Topics {
		resp.Topics = append(resp.Topics, offsetCommitAnswer(rt, code))
	}
	return resp, nil
}

// offsetCommitAnswer answers every partition of rt with code.
func offsetCommitAnswer(rt kmsg.OffsetCommitRequestTopic, code int16) kmsg.OffsetCommitResponseTopic {
	st := kmsg.NewOffsetCommitResponseTopic()
	st.Topic = rt.Topic
	for _, rp := range rt.Partitions {
		sp := kmsg.NewOffsetCommitResponseTopicPartition()
		sp.Partition, sp.ErrorCode = rp.Partition, code
		st.Partitions = append(st.Partitions, sp)
	}
	return st
}
