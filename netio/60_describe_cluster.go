package netio

// DescribeCluster, versions 0-2 (KIP-700). Answers this node's cluster ID
// and the brokers (cluster.go: this one alone, or every live node of a
// cluster), and the controller ID clients see (alone, this node: a KRaft
// broker answers a live broker there too). As Kafka's
// AuthHelper.computeDescribeClusterResponse: EndpointType (v1+) 1 asks for
// brokers; 2 (controllers) is MISMATCHED_ENDPOINT_TYPE, as a broker
// answers; any other value is UNSUPPORTED_ENDPOINT_TYPE. With no
// authorizer every cluster operation is allowed, so
// IncludeClusterAuthorizedOperations answers all of them. v2's
// IncludeFencedBrokers changes nothing: this node is never fenced.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	endpointTypeBroker     = 1
	endpointTypeController = 2
)

// clusterOperationsAll is the bit field of every operation on the cluster
// resource (AclEntry.supportedOperations(CLUSTER)): CREATE 5, ALTER 7,
// DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
// IDEMPOTENT_WRITE 12.
const clusterOperationsAll = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12

func serveDescribeCluster(_ context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	var message string
	switch req.EndpointType {
	case endpointTypeBroker:
	case endpointTypeController:
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		message = "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
	default:
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		message = fmt.Sprintf("Unsupported endpoint type %d", req.EndpointType)
	}
	if resp.ErrorCode != 0 {
		resp.ErrorMessage = &message
		return resp, nil
	}
	cluster := c.cluster()
	brokers, controller := c.brokers()
	resp.ClusterID, resp.ControllerID = cluster.ClusterID, controller
	for _, b := range brokers {
		broker := kmsg.NewDescribeClusterResponseBroker()
		broker.NodeID, broker.Host, broker.Port, broker.Rack = b.NodeID, b.Host, b.Port, b.rack()
		resp.Brokers = append(resp.Brokers, broker)
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = c.describedOperations(resourceCluster, clusterResourceName)
	}
	return resp, nil
}
