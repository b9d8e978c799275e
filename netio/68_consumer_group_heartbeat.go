package netio

// ConsumerGroupHeartbeat, versions 0-1: the consumer group protocol of
// KIP-848, where the coordinator assigns the partitions. The group
// coordinator (Backend.Groups) answers it whole; the member's client host
// is the peer address as Kafka prints it ("/127.0.0.1"). No answer (the
// coordinator closed) is COORDINATOR_NOT_AVAILABLE, which clients retry.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveConsumerGroupHeartbeat(ctx context.Context, c *conn, h RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	client := GroupClient{ID: h.ClientID, Host: "/" + peerHost(c.nc.RemoteAddr())}
	resp, err := unlessDenied(c.authorize(opRead, resourceGroup, req.Group), kerr.GroupAuthorizationFailed, func() (*kmsg.ConsumerGroupHeartbeatResponse, error) {
		return c.server.backend.Groups().ConsumerGroupHeartbeat(ctx, client, req)
	})
	if err != nil {
		resp = req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = errorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
	}
	return resp, nil
}
