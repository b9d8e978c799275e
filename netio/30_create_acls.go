package netio

// CreateAcls, versions 1-3 (v0 removed in Kafka 4.0). Needs ALTER on the cluster (else
// CLUSTER_AUTHORIZATION_FAILED in every result); without an authorizer,
// SECURITY_DISABLED. A creation Kafka refuses (an ANY or UNKNOWN field, an
// empty name, a CLUSTER name other than kafka-cluster, a principal not
// TYPE:NAME) is INVALID_REQUEST in its result; the others are durable
// before the answer. Creating an existing binding succeeds.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/acl"
)

func serveCreateACLs(_ context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
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
	bindings := make([]acl.Binding, len(req.Creations))
	for i, x := range req.Creations {
		bindings[i] = acl.Binding{ResourceType: x.ResourceType, ResourceName: x.ResourceName, PatternType: x.ResourcePatternType,
			Principal: x.Principal, Host: x.Host, Operation: x.Operation, Permission: x.PermissionType}
	}
	errs, err := a.Create(bindings)
	if err != nil {
		return fill(aclErrorCode(c, err))
	}
	for i, err := range errs {
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = aclErrorCode(c, err)
		}
	}
	return resp, nil
}
