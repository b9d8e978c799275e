package netio

// LeaveGroup, versions 0-5 (v3+ leaves a batch of members, KIP-345). The
// group coordinator (Backend.Groups) answers it whole. No answer (the
// coordinator closed) is COORDINATOR_NOT_AVAILABLE.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveLeaveGroup(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	resp, err := unlessDenied(c.authorize(opRead, resourceGroup, req.Group), kerr.GroupAuthorizationFailed, func() (*kmsg.LeaveGroupResponse, error) {
		return c.server.backend.Groups().LeaveGroup(ctx, req)
	})
	if err != nil {
		resp = req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = coordinatorErrorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
	}
	return resp, nil
}
