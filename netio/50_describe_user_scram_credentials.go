package netio

// DescribeUserScramCredentials, version 0 (KIP-554), as Kafka's ScramImage
// answers it: no users (null or empty) lists every user with a credential;
// a named user without one is RESOURCE_NOT_FOUND, a user named twice
// DUPLICATE_RESOURCE, each with Kafka's message. Each credential is its
// mechanism (1 SCRAM-SHA-256, 2 SCRAM-SHA-512) and iterations, never a
// key or salt. The store is Config.ScramCredentials.
//
// With an authorizer, DESCRIBE on the cluster, as Kafka's
// KafkaApis.handleDescribeUserScramCredentialsRequest; without it the
// top-level error is CLUSTER_AUTHORIZATION_FAILED and no user is listed.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/auth"
)

// scramMechanismTypes are Kafka's ScramMechanism types on the wire.
var scramMechanismTypes = map[string]int8{auth.MechanismScramSHA256: 1, auth.MechanismScramSHA512: 2}

func scramMechanismName(wire int8) string {
	for name, t := range scramMechanismTypes {
		if t == wire {
			return name
		}
	}
	return ""
}

func serveDescribeUserScramCredentials(_ context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !c.authorizeCluster(opDescribe) {
		// No message: Kafka answers getErrorResponse(CLUSTER_AUTHORIZATION_FAILED.exception),
		// and ApiError.fromThrowable drops an exception's default message.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	store := c.server.cfg.ScramCredentials
	if store == nil {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		message := "this node keeps no SCRAM credentials"
		resp.ErrorMessage = &message
		return resp, nil
	}
	var names []string // nil: all
	seen := map[string]int{}
	for _, u := range req.Users {
		if seen[u.Name]++; seen[u.Name] == 1 {
			names = append(names, u.Name)
		}
	}
	infos := store.Describe(names)
	if len(req.Users) == 0 {
		infos = store.Describe(nil)
		for _, info := range infos {
			names = append(names, info.User)
		}
	}
	found := map[string]auth.ScramUserInfo{}
	for _, info := range infos {
		found[info.User] = info
	}
	for _, name := range names {
		result := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		result.User = name
		info, ok := found[name]
		switch {
		case seen[name] > 1:
			result.ErrorCode = kerr.DuplicateResource.Code
			message := "Cannot describe SCRAM credentials for the same user twice in a single request: " + name
			result.ErrorMessage = &message
		case !ok:
			result.ErrorCode = kerr.ResourceNotFound.Code
			message := "Attempt to describe a user credential that does not exist: " + name
			result.ErrorMessage = &message
		default:
			for i, mechanism := range info.Mechanisms {
				credential := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				credential.Mechanism, credential.Iterations = scramMechanismTypes[mechanism], info.Iterations[i]
				result.CredentialInfos = append(result.CredentialInfos, credential)
			}
		}
		resp.Results = append(resp.Results, result)
	}
	return resp, nil
}
