package netio

// ConsumerGroupDescribe, versions 0-1: the consumer groups (KIP-848) of
// the request, as the group coordinator (Backend.Groups) describes them;
// a classic group is GROUP_ID_NOT_FOUND. No answer (the coordinator
// closed) is COORDINATOR_NOT_AVAILABLE for every group.
//
// With an authorizer, as Kafka 4.4's KafkaApis.handleConsumerGroupDescribe:
// the groups the client may not DESCRIBE are GROUP_AUTHORIZATION_FAILED,
// answered first; a described group whose members' assignments or target
// assignments name a topic the client may not DESCRIBE is answered as
// TOPIC_AUTHORIZATION_FAILED with Kafka's fixed message and no members.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveConsumerGroupDescribe(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	allowed, denied := c.splitByAuthorized(opDescribe, resourceGroup, req.Groups)
	asked := *req
	asked.Groups = allowed
	resp, err := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse), error(nil)
	if len(allowed) > 0 { // a coordinator's failure must not hide the denials
		resp, err = c.server.backend.Groups().ConsumerGroupDescribe(ctx, &asked)
	}
	if err == nil {
		answered := make([]kmsg.ConsumerGroupDescribeResponseGroup, 0, len(req.Groups))
		for _, name := range denied {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
			answered = append(answered, g)
		}
		for _, g := range resp.Groups {
			answered = append(answered, c.hideGroupOfDeniedTopics(g))
		}
		resp.Groups = answered
	}
	if err != nil {
		resp = req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		code := errorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
		for _, name := range req.Groups {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = name, code
			resp.Groups = append(resp.Groups, g)
		}
	}
	return resp, nil
}

// describedTopicsDenied is Kafka's message for a consumer group described
// with topics the client may not DESCRIBE.
const describedTopicsDenied = "The group has described topic(s) that the client is not authorized to describe."

// hideGroupOfDeniedTopics is g, or TOPIC_AUTHORIZATION_FAILED when a
// member's assignment or target assignment names a topic the client may
// not DESCRIBE.
func (c *conn) hideGroupOfDeniedTopics(g kmsg.ConsumerGroupDescribeResponseGroup) kmsg.ConsumerGroupDescribeResponseGroup {
	if c.server.cfg.Authorizer == nil {
		return g
	}
	for _, m := range g.Members {
		for _, assignment := range []kmsg.Assignment{m.Assignment, m.TargetAssignment} {
			for _, tp := range assignment.TopicPartitions {
				if !c.authorize(opDescribe, resourceTopic, tp.Topic) {
					hidden := kmsg.NewConsumerGroupDescribeResponseGroup()
					hidden.Group, hidden.ErrorCode, hidden.ErrorMessage = g.Group, kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr(describedTopicsDenied)
					hidden.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{}
					return hidden
				}
			}
		}
	}
	return g
}
