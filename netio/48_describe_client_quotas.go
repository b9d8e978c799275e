package netio

// DescribeClientQuotas, versions 0-1 (KIP-546), as Kafka's broker answers
// it: DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED
// for the whole request, without a message (KafkaApis answers
// getErrorResponse(CLUSTER_AUTHORIZATION_FAILED.exception), and
// ApiError.fromThrowable drops a message that is the error's default); a filter component of an entity type other than
// user, client-id or ip, or of an unknown match type, is INVALID_REQUEST.
// mirrord enforces no client quotas and none can be set (AlterClientQuotas
// is not served), so every valid filter matches no entity: the answer is
// an empty list, which is what `kafka-configs --describe --entity-type
// users` needs beside DescribeUserScramCredentials.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// quotaEntityTypes are the entity types Kafka's client quotas know.
var quotaEntityTypes = map[string]bool{"user": true, "client-id": true, "ip": true}

func serveDescribeClientQuotas(_ context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(code int16, message string) (any, error) {
		resp.ErrorCode, resp.ErrorMessage, resp.Entries = code, &message, nil
		return resp, nil
	}
	if !c.authorizeCluster(kmsg.ACLOperationDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	for _, component := range req.Components {
		switch {
		case !quotaEntityTypes[component.EntityType]:
			return fail(kerr.InvalidRequest.Code, fmt.Sprintf("Custom entity type '%s' not supported", component.EntityType))
		case component.MatchType < 0 || component.MatchType > 2:
			return fail(kerr.InvalidRequest.Code, fmt.Sprintf("Unknown match type %d", component.MatchType))
		}
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	return resp, nil
}
