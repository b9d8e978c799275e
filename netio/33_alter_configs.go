package netio

// AlterConfigs, versions 0-2, answered as a Kafka 4.4 broker answers:
// each resource on its own; a topic's configs in the request replace
// every override it had (those not named go back to their defaults); a
// null value is INVALID_REQUEST, as is a key named twice; ValidateOnly
// checks without applying. Backend.Configs applies (INVALID_CONFIG naming
// the key, UNKNOWN_TOPIC_OR_PARTITION, POLICY_VIOLATION for a topic
// another writer owns, INVALID_REQUEST for broker configs the node does
// not take while it runs).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveAlterConfigs(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		changes := make([]ConfigChange, 0, len(rr.Configs))
		for _, rc := range rr.Configs {
			changes = append(changes, ConfigChange{Name: rc.Name, Op: ConfigSet, Value: rc.Value})
		}
		err := alterConfigs(ctx, c, ConfigResource{Type: ConfigResourceType(rr.ResourceType), Name: rr.ResourceName}, changes, false, req.ValidateOnly)
		sr.ErrorCode, sr.ErrorMessage = alterError(c, err)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

// alterConfigs checks what Kafka checks before the resource's own
// validation: a key at most once, a value for each SET and APPEND and
// SUBTRACT, a known op.
func alterConfigs(ctx context.Context, c *conn, resource ConfigResource, changes []ConfigChange, incremental, validateOnly bool) error {
	if err := c.configsDenied(opAlterConfigs, resource); err != nil {
		return err
	}
	seen := make(map[string]bool, len(changes))
	for _, change := range changes {
		switch {
		case seen[change.Name]:
			return Errorf(kerr.InvalidRequest, "Error due to duplicate config keys")
		case change.Op < ConfigSet || change.Op > ConfigSubtract:
			return Errorf(kerr.InvalidRequest, "Unknown alter configs operation %d for %s", change.Op, change.Name)
		case change.Value == nil && change.Op != ConfigDelete:
			return Errorf(kerr.InvalidRequest, "Null value not supported for : %s", change.Name)
		}
		seen[change.Name] = true
	}
	return c.server.backend.Configs().AlterConfigs(ctx, resource, changes, incremental, validateOnly)
}

// alterError is a resource's error code and message. A cluster denial
// (a BROKER resource) has no message: Kafka's ConfigAdminManager.preprocess
// answers it through ApiError.fromThrowable, which drops a message that is
// the error's default.
func alterError(c *conn, err error) (int16, *string) {
	switch {
	case err == nil:
		return 0, nil
	case err == kerr.ClusterAuthorizationFailed:
		return kerr.ClusterAuthorizationFailed.Code, nil
	}
	message := err.Error()
	return errorCode(c.server.log, err, kerr.UnknownServerError), &message
}
