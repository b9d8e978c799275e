package netio

// SyncGroup, versions 0-5. The group coordinator (Backend.Groups) answers
// it whole: the leader's request carries the assignment, which is written
// before any member gets its part; a follower's answer waits for the
// leader's. No answer (the coordinator closed) is COORDINATOR_NOT_AVAILABLE.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveSyncGroup(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.SyncGroupRequest)
	resp, err := unlessDenied(c.authorize(opRead, resourceGroup, req.Group), kerr.GroupAuthorizationFailed, func() (*kmsg.SyncGroupResponse, error) {
		return c.server.backend.Groups().SyncGroup(ctx, req)
	})
	if err != nil {
		resp = req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = coordinatorErrorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
	}
	return resp, nil
}
