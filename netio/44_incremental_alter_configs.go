package netio

// IncrementalAlterConfigs, versions 0-1, answered as a Kafka 4.4 broker
// answers: each resource on its own; each config is SET (0), DELETE (1:
// back to its default), APPEND (2) or SUBTRACT (3) (list-typed configs
// only, else INVALID_CONFIG), applied to the current overrides; a key
// named twice in a resource is INVALID_REQUEST; ValidateOnly checks
// without applying. Errors as AlterConfigs (33_alter_configs.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveIncrementalAlterConfigs(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		changes := make([]ConfigChange, 0, len(rr.Configs))
		for _, rc := range rr.Configs {
			changes = append(changes, ConfigChange{Name: rc.Name, Op: ConfigOp(rc.Op), Value: rc.Value})
		}
		err := alterConfigs(ctx, c, ConfigResource{Type: ConfigResourceType(rr.ResourceType), Name: rr.ResourceName}, changes, true, req.ValidateOnly)
		sr.ErrorCode, sr.ErrorMessage = alterError(c, err)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}
