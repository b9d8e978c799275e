package netio

// DescribeGroups, versions 0-5 (v6, with per-group error messages, is not
// served). The group coordinator (Backend.Groups) answers it whole. No
// answer (the coordinator closed) is COORDINATOR_NOT_AVAILABLE for every
// group asked for.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveDescribeGroups(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	allowed, denied := c.splitByAuthorized(opDescribe, resourceGroup, req.Groups)
	asked := *req
	asked.Groups = allowed
	resp, err := req.ResponseKind().(*kmsg.DescribeGroupsResponse), error(nil)
	if len(allowed) > 0 { // a coordinator's failure must not hide the denials
		resp, err = c.server.backend.Groups().DescribeGroups(ctx, &asked)
	}
	if err == nil {
		for _, name := range denied {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
		}
	}
	if err == nil {
		return resp, nil
	}
	code := errorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
	resp = req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.ErrorCode = name, code
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
