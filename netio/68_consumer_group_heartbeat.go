package netio

// ConsumerGroupHeartbeat, versions 0-1: the consumer group protocol of
// KIP-848, where the coordinator assigns the partitions. The group
// coordinator (Backend.Groups) answers it whole; the member's client host
// is the peer address as Kafka prints it ("/127.0.0.1"). No answer (the
// coordinator closed) is COORDINATOR_NOT_AVAILABLE, which clients retry.
//
// With an authorizer, as Kafka 4.4's KafkaApis.handleConsumerGroupHeartbeat:
// READ on the group (else GROUP_AUTHORIZATION_FAILED), then DESCRIBE on
// every subscribed topic name (else TOPIC_AUTHORIZATION_FAILED, no
// message, and the coordinator does not see the heartbeat). A regular
// expression subscription is not checked here: Kafka filters the topics it
// matches inside the coordinator, which mirrord's does not (yet).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveConsumerGroupHeartbeat(ctx context.Context, c *conn, h RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	client := GroupClient{ID: h.ClientID, Host: "/" + peerHost(c.nc.RemoteAddr())}
	resp, err := unlessDenied(c.authorize(opRead, resourceGroup, req.Group), kerr.GroupAuthorizationFailed, func() (*kmsg.ConsumerGroupHeartbeatResponse, error) {
		if !c.authorizeSubscription(req.SubscribedTopicNames) {
			answer := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
			answer.ErrorCode = kerr.TopicAuthorizationFailed.Code
			return answer, nil
		}
		return c.server.backend.Groups().ConsumerGroupHeartbeat(ctx, client, req)
	})
	if err != nil {
		resp = req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = coordinatorErrorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
	}
	return resp, nil
}

// authorizeSubscription reports whether the client may DESCRIBE every
// subscribed topic (each distinct name asked once).
func (c *conn) authorizeSubscription(topics []string) bool {
	_, denied := splitTopicsByAuthorized(c, opDescribe, topics, func(name string) string { return name })
	return len(denied) == 0
}
