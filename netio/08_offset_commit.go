package netio

// OffsetCommit, versions 2-9 (v0-1 were removed in Kafka 4.0, KIP-896;
// v10, with topic IDs, is not served). The group coordinator
// (Backend.Groups) answers it once the commits are durable; it answers
// UNKNOWN_TOPIC_OR_PARTITION for partitions the node does not have. No
// answer (the coordinator closed) is COORDINATOR_NOT_AVAILABLE for every
// partition of the request.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveOffsetCommit(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	resp, err := unlessDenied(c.authorize(opRead, resourceGroup, req.Group), kerr.GroupAuthorizationFailed, func() (*kmsg.OffsetCommitResponse, error) {
		return c.server.backend.Groups().OffsetCommit(ctx, req)
	})
	if err == nil {
		return resp, nil
	}
	code := errorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
	resp = req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
