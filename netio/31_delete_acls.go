package netio

// DeleteAcls, versions 1-3 (v0 removed in Kafka 4.0). Needs ALTER on the cluster (else
// CLUSTER_AUTHORIZATION_FAILED in every result); without an authorizer,
// SECURITY_DISABLED. A filter with an UNKNOWN field is INVALID_REQUEST in
// its result; every binding the others match is removed (durably, before
// the answer) and listed under the first filter that matched it.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/acl"
)

func serveDeleteACLs(_ context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	fill := func(code int16, message *string) (any, error) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, message
		}
		return resp, nil
	}
	a, refusal := c.aclAuthorizer(opAlter)
	if refusal != nil {
		return fill(refusal.Code, refusal.message)
	}
	filters := make([]acl.Filter, len(req.Filters))
	for i, f := range req.Filters {
		filters[i] = acl.Filter{ResourceType: f.ResourceType, ResourceName: f.ResourceName, PatternType: f.ResourcePatternType,
			Principal: f.Principal, Host: f.Host, Operation: f.Operation, Permission: f.PermissionType}
	}
	deleted, errs, err := a.Delete(filters)
	if err != nil {
		return fill(aclErrorCode(c, err))
	}
	for i := range resp.Results {
		if errs[i] != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = aclErrorCode(c, errs[i])
			continue
		}
		for _, b := range deleted[i] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
		}
	}
	return resp, nil
}
