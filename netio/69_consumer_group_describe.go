package netio

// ConsumerGroupDescribe, versions 0-1: the consumer groups (KIP-848) of
// the request, as the group coordinator (Backend.Groups) describes them;
// a classic group is GROUP_ID_NOT_FOUND. No answer (the coordinator
// closed) is COORDINATOR_NOT_AVAILABLE for every group.

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
		for _, name := range denied {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
		}
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
