package netio

// DescribeAcls, versions 1-3 (v0 removed in Kafka 4.0). Needs DESCRIBE on the cluster (else
// CLUSTER_AUTHORIZATION_FAILED); without an authorizer, SECURITY_DISABLED.
// An UNKNOWN field in the filter is INVALID_REQUEST. The bindings are
// grouped by resource pattern, in the authorizer's order.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/acl"
)

func serveDescribeACLs(_ context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	fail := func(err *kerr.Error, message string) (any, error) {
		resp.ErrorCode, resp.ErrorMessage = err.Code, &message
		return resp, nil
	}
	a, refusal := c.aclAuthorizer(opDescribe)
	if refusal != nil {
		return fail(refusal.Error, *refusal.message)
	}
	filter := acl.Filter{ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType}
	if err := filter.Validate(); err != nil {
		return fail(kerr.InvalidRequest, err.Error())
	}
	for _, b := range a.Describe(filter) {
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != b.ResourceType || resp.Resources[n-1].ResourceName != b.ResourceName ||
			resp.Resources[n-1].ResourcePatternType != b.PatternType {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			resp.Resources = append(resp.Resources, r)
			n++
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host, e.Operation, e.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, e)
	}
	return resp, nil
}

// aclErrorCode is the code and message of an ACL API's error: a binding
// or filter Kafka refuses is INVALID_REQUEST, anything else (the file
// write) UNKNOWN_SERVER_ERROR, logged.
func aclErrorCode(c *conn, err error) (int16, *string) {
	message := err.Error()
	if errors.Is(err, acl.ErrInvalid) {
		return kerr.InvalidRequest.Code, &message
	}
	return errorCode(c.server.log, err, kerr.UnknownServerError), &message
}
