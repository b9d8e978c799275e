package netio

// OffsetDelete, version 0 (KIP-496). The group coordinator
// (Backend.Groups) answers it whole: offsets of topics the group still
// consumes are GROUP_SUBSCRIBED_TO_TOPIC. No answer (the coordinator
// closed) is COORDINATOR_NOT_AVAILABLE.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveOffsetDelete(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	resp, err := unlessDenied(c.authorize(opDelete, resourceGroup, req.Group), kerr.GroupAuthorizationFailed, func() (*kmsg.OffsetDeleteResponse, error) {
		return c.server.backend.Groups().OffsetDelete(ctx, req)
	})
	if err != nil {
		resp = req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = coordinatorErrorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
	}
	return resp, nil
}
