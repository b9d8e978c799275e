package netio

// ListGroups, versions 0-5 (v4+ filters by state, v5+ by type). The group
// coordinator (Backend.Groups) answers it whole. No answer (the
// coordinator closed) is COORDINATOR_NOT_AVAILABLE.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveListGroups(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.ListGroupsRequest)
	resp, err := c.server.backend.Groups().ListGroups(ctx, req)
	if err != nil {
		resp = req.ResponseKind().(*kmsg.ListGroupsResponse)
		resp.ErrorCode = errorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
	}
	if !c.authorizeQuietly(opDescribe, resourceCluster, clusterResourceName) {
		resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
			return !c.authorizeQuietly(opDescribe, resourceGroup, g.Group)
		})
	}
	return resp, nil
}
