package netio

// AlterUserScramCredentials, version 0 (KIP-554), as Kafka's
// ScramControlManager: deletions and upsertions (the client's salt and
// salted password; the node keeps the stored and server keys) applied per
// user, one result per user named. A user named by more than one
// alteration is DUPLICATE_RESOURCE; an unknown mechanism
// UNSUPPORTED_SASL_MECHANISM; an empty user or iterations outside
// [4096, 16384] UNACCEPTABLE_CREDENTIAL; deleting a credential that does
// not exist RESOURCE_NOT_FOUND; each with Kafka's message. The changes
// are durable before the answer (auth.ScramCredentials).
//
// With an authorizer, ALTER on the cluster, as Kafka's
// ControllerApis.handleAlterUserScramCredentials; without it every user
// named is CLUSTER_AUTHORIZATION_FAILED, once each, in name order (Kafka's
// AlterUserScramCredentialsRequest.getErrorResponse), and nothing changes.

import (
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/auth"
)

// scramAlterErrors are the codes and messages of auth's alteration errors.
var scramAlterErrors = []struct {
	err     error
	code    *kerr.Error
	message string
}{
	{auth.ErrScramDuplicateUser, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"},
	{auth.ErrScramEmptyUser, kerr.UnacceptableCredential, "Username must not be empty"},
	{auth.ErrScramUnknownMechanism, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism"},
	{auth.ErrScramTooFewIterations, kerr.UnacceptableCredential, "Too few iterations"},
	{auth.ErrScramTooManyIterations, kerr.UnacceptableCredential, "Too many iterations"},
	{auth.ErrScramNotFound, kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist"},
}

func serveAlterUserScramCredentials(_ context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	if !c.authorizeCluster(opAlter) {
		users := make([]string, 0, len(req.Deletions)+len(req.Upsertions))
		for _, d := range req.Deletions {
			users = append(users, d.Name)
		}
		for _, u := range req.Upsertions {
			users = append(users, u.Name)
		}
		slices.Sort(users)
		message := c.clusterDeniedMessage(opAlter) // the controller's ControllerApis.alterUserScramCredentials throws it
		for _, user := range slices.Compact(users) {
			result := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			result.User, result.ErrorCode, result.ErrorMessage = user, kerr.ClusterAuthorizationFailed.Code, &message
			resp.Results = append(resp.Results, result)
		}
		return resp, nil
	}
	var alterations []auth.ScramAlteration
	for _, d := range req.Deletions {
		alterations = append(alterations, auth.ScramAlteration{User: d.Name, Mechanism: scramMechanismName(d.Mechanism), Delete: true})
	}
	for _, u := range req.Upsertions {
		alterations = append(alterations, auth.ScramAlteration{User: u.Name, Mechanism: scramMechanismName(u.Mechanism),
			Iterations: u.Iterations, Salt: u.Salt, SaltedPassword: u.SaltedPassword})
	}
	errs := make([]error, len(alterations))
	if store := c.server.cfg.ScramCredentials; store != nil {
		errs = store.Alter(alterations)
	} else {
		for i := range errs {
			errs[i] = Errorf(kerr.UnsupportedVersion, "this node keeps no SCRAM credentials")
		}
	}
	index := map[string]int{}
	for i, a := range alterations {
		at, seen := index[a.User]
		if !seen {
			at = len(resp.Results)
			index[a.User] = at
			result := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			result.User = a.User
			resp.Results = append(resp.Results, result)
		}
		if result := &resp.Results[at]; result.ErrorCode == 0 && errs[i] != nil {
			code, message := c.scramAlterError(errs[i])
			result.ErrorCode, result.ErrorMessage = code, &message
		}
	}
	return resp, nil
}

func (c *conn) scramAlterError(err error) (int16, string) {
	for _, e := range scramAlterErrors {
		if errors.Is(err, e.err) {
			return e.code.Code, e.message
		}
	}
	var netErr *Error
	if errors.As(err, &netErr) {
		return netErr.Code.Code, netErr.Message
	}
	return errorCode(c.server.log, err, kerr.UnknownServerError), kerr.UnknownServerError.Message
}
