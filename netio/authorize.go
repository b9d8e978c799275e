package netio

// Authorization: every handler asks, before it serves a resource, whether
// the connection's principal may perform the operation Kafka's KafkaApis
// checks for that API (c.authorize), and answers a denial with Kafka's
// code (TOPIC_, GROUP_, CLUSTER_, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
// CLUSTER_MIRROR_AUTHORIZATION_FAILED for the mirror admin RPCs) where
// Kafka puts it; a denial never closes the connection. With no authorizer
// (Config.Authorizer nil, Kafka's empty authorizer.class.name) every check
// allows and the ACL APIs answer SECURITY_DISABLED.
//
// Metrics (Config.Registerer):
//
//	metric                               labels  kind
//	mirrord_authorization_denied_total   api     counter
//
// api is Kafka's request name (Produce, Fetch, CreateClusterMirror, ...):
// bounded by the keys the server serves.

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/acl"
	"github.com/mirrord/mirrord/mirrorwire"
)

// Resource types and operations under short names for the handlers.
const (
	resourceTopic         = kmsg.ACLResourceTypeTopic
	resourceGroup         = kmsg.ACLResourceTypeGroup
	resourceCluster       = kmsg.ACLResourceTypeCluster
	resourceTransactional = kmsg.ACLResourceTypeTransactionalId
	resourceClusterMirror = acl.ResourceClusterMirror

	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opClusterAction   = kmsg.ACLOperationClusterAction
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite
)

// clusterMirrorAuthorizationFailed is KIP-1279's
// CLUSTER_MIRROR_AUTHORIZATION_FAILED, which kerr does not know yet.
var clusterMirrorAuthorizationFailed = &kerr.Error{Message: "CLUSTER_MIRROR_AUTHORIZATION_FAILED", Code: 142,
	Description: "Cluster mirror authorization failed."}

// authorizationMetrics are the server's denial counters.
type authorizationMetrics struct {
	denied *prometheus.CounterVec
}

func newAuthorizationMetrics(r prometheus.Registerer) *authorizationMetrics {
	m := &authorizationMetrics{denied: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mirrord_authorization_denied_total",
		Help: "Requests (or resources within a request) the authorizer denied, by Kafka API.",
	}, []string{"api"})}
	if r != nil {
		r.MustRegister(m.denied)
	}
	return m
}

// authorize reports whether the connection's principal may perform op on
// the resource, and counts a denial against the request being served.
func (c *conn) authorize(op kmsg.ACLOperation, resourceType kmsg.ACLResourceType, name string) bool {
	a := c.server.cfg.Authorizer
	if a == nil || a.Authorize(c.principal, c.clientHost, op, resourceType, name) {
		return true
	}
	c.server.authz.denied.WithLabelValues(apiName(c.requestKey)).Inc()
	return false
}

// authorizeCluster is authorize on the cluster resource.
func (c *conn) authorizeCluster(op kmsg.ACLOperation) bool {
	return c.authorize(op, resourceCluster, acl.ClusterName)
}

// authorizedOperations is Kafka's authorized-operations bit field of the
// resource for the connection's principal; with no authorizer, every
// operation the resource type supports.
func (c *conn) authorizedOperations(resourceType kmsg.ACLResourceType, name string) int32 {
	a := c.server.cfg.Authorizer
	if a == nil {
		return allOperations(resourceType)
	}
	return a.AuthorizedOperations(c.principal, c.clientHost, resourceType, name)
}

// allOperations is every operation the resource type supports, as an
// authorizer allowing everything answers.
func allOperations(resourceType kmsg.ACLResourceType) int32 {
	return acl.SupportedOperations(resourceType)
}

// authorizeAnyTopicWrite is Kafka's check of an idempotent producer
// without a transactional ID (KIP-679): IDEMPOTENT_WRITE on the cluster,
// or WRITE on some topic.
func (c *conn) authorizeIdempotent() bool {
	a := c.server.cfg.Authorizer
	if a == nil || a.Authorize(c.principal, c.clientHost, opIdempotentWrite, resourceCluster, acl.ClusterName) ||
		a.AuthorizeByResourceType(c.principal, c.clientHost, opWrite, resourceTopic) {
		return true
	}
	c.server.authz.denied.WithLabelValues(apiName(c.requestKey)).Inc()
	return false
}

// apiName is Kafka's name of a request key, the mirror admin RPCs' too.
func apiName(key int16) string {
	if name := mirrorwire.KeyName(key); name != "" {
		return name
	}
	if name := kmsg.NameForKey(key); name != "" {
		return name
	}
	return "Unknown"
}
