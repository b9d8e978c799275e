package netio

// Heartbeat, versions 0-4. The group coordinator (Backend.Groups) answers
// it: REBALANCE_IN_PROGRESS tells a member to join again. No answer (the
// coordinator closed) is COORDINATOR_NOT_AVAILABLE.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveHeartbeat(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	resp, err := unlessDenied(c.authorize(opRead, resourceGroup, req.Group), kerr.GroupAuthorizationFailed, func() (*kmsg.HeartbeatResponse, error) {
		return c.server.backend.Groups().Heartbeat(ctx, req)
	})
	if err != nil {
		resp = req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = coordinatorErrorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
	}
	return resp, nil
}
