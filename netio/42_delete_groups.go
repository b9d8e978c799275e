package netio

// DeleteGroups, versions 0-2. The group coordinator (Backend.Groups)
// answers it whole: only an Empty group is deleted (NON_EMPTY_GROUP
// otherwise), with its offsets. No answer (the coordinator closed) is
// COORDINATOR_NOT_AVAILABLE for every group asked for.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveDeleteGroups(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	allowed, denied := c.splitByAuthorized(opDelete, resourceGroup, req.Groups)
	asked := *req
	asked.Groups = allowed
	resp, err := req.ResponseKind().(*kmsg.DeleteGroupsResponse), error(nil)
	if len(allowed) > 0 { // a coordinator's failure must not hide the denials
		resp, err = c.server.backend.Groups().DeleteGroups(ctx, &asked)
	}
	if err == nil {
		for _, name := range denied {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
		}
	}
	if err == nil {
		return resp, nil
	}
	code := coordinatorErrorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
	resp = req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group, g.ErrorCode = name, code
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
