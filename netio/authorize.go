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
// Metrics (Config.Metrics):
//
//	metric                               labels  kind
//	mirrord_authorization_denied_total   api     counter
//
// api is Kafka's request name (Produce, Fetch, CreateClusterMirror, ...):
// bounded by the keys the server serves.

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/acl"
	"github.com/mirrord/mirrord/mirrorwire"
)

// Resource types and operations under short names for the handlers.
const (
	clusterResourceName = acl.ClusterName

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

// ErrClusterMirrorAuthorizationFailed is KIP-1279's
// CLUSTER_MIRROR_AUTHORIZATION_FAILED, which kerr does not know yet.
var ErrClusterMirrorAuthorizationFailed = &kerr.Error{Message: "CLUSTER_MIRROR_AUTHORIZATION_FAILED", Code: 142,
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

// clusterDeniedMessage is the message of a request refused for want of op
// on the cluster, worded as Kafka's AuthHelper.authorizeClusterOperation
// words its ClusterAuthorizationException ("Request <request> needs <op>
// permission."), the request named by its API (Kafka prints its
// connection and session, which mean nothing here).
func (c *conn) clusterDeniedMessage(op kmsg.ACLOperation) string {
	return fmt.Sprintf("Request %s needs %s permission.", apiName(c.requestKey), op)
}

// authorizeQuietly is authorize for filtering a listing (an all-topics
// Metadata, ListGroups): a resource left out is not a denial, as Kafka
// does not log it (logIfDenied=false).
func (c *conn) authorizeQuietly(op kmsg.ACLOperation, resourceType kmsg.ACLResourceType, name string) bool {
	a := c.server.cfg.Authorizer
	return a == nil || a.Authorize(c.principal, c.clientHost, op, resourceType, name)
}

// describedOperations is the authorized-operations field Kafka answers
// for a resource the client asked about: the bit field when it may
// DESCRIBE the resource, else 0.
func (c *conn) describedOperations(resourceType kmsg.ACLResourceType, name string) int32 {
	ops := c.authorizedOperations(resourceType, name)
	if ops&(1<<opDescribe) == 0 {
		return 0
	}
	return ops
}

// unlessDenied calls serve when allowed; else it returns denial as the
// error the handler answers the whole request with (errorCode keeps a
// kerr code), and serve does not run.
func unlessDenied[R any](allowed bool, denial *kerr.Error, serve func() (R, error)) (R, error) {
	if !allowed {
		var zero R
		return zero, denial
	}
	return serve()
}

// groupIDs is the subset of names the connection may perform op on, and
// the others.
func (c *conn) splitByAuthorized(op kmsg.ACLOperation, resourceType kmsg.ACLResourceType, names []string) (allowed, denied []string) {
	for _, name := range names {
		if c.authorize(op, resourceType, name) {
			allowed = append(allowed, name)
		} else {
			denied = append(denied, name)
		}
	}
	return allowed, denied
}

// configsDenied is Kafka's check of a config resource (DescribeConfigs,
// AlterConfigs, IncrementalAlterConfigs): op on the topic, or on the
// cluster for a broker or broker logger; nil when allowed.
func (c *conn) configsDenied(op kmsg.ACLOperation, resource ConfigResource) error {
	if resource.Type == ConfigResourceTopic {
		if !c.authorize(op, resourceTopic, resource.Name) {
			return kerr.TopicAuthorizationFailed
		}
		return nil
	}
	if !c.authorizeCluster(op) {
		return kerr.ClusterAuthorizationFailed
	}
	return nil
}

// configsDenial is the code configsDenied answers for the resource type.
func configsDenial(resource ConfigResource) *kerr.Error {
	if resource.Type == ConfigResourceTopic {
		return kerr.TopicAuthorizationFailed
	}
	return kerr.ClusterAuthorizationFailed
}

// txnPartitionsDenied is Kafka's check of AddPartitionsToTxn: a broker's
// batch (v4+) needs CLUSTER_ACTION on the cluster; a client's, WRITE on
// the transactional ID (else every partition is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic (else
// its partitions are TOPIC_AUTHORIZATION_FAILED and the others
// OPERATION_NOT_ATTEMPTED). nil when allowed.
func (c *conn) txnPartitionsDenied(version int16, transactionalID string, topics []txnTopic) [][]int16 {
	fill := func(code func(topic int) int16) [][]int16 {
		codes := make([][]int16, len(topics))
		for i, rt := range topics {
			codes[i] = make([]int16, len(rt.partitions))
			for j := range codes[i] {
				codes[i][j] = code(i)
			}
		}
		return codes
	}
	if version >= addPartitionsToTxnBatchVersion {
		if !c.authorizeCluster(opClusterAction) {
			return fill(func(int) int16 { return kerr.ClusterAuthorizationFailed.Code })
		}
		return nil
	}
	if !c.authorize(opWrite, resourceTransactional, transactionalID) {
		return fill(func(int) int16 { return kerr.TransactionalIDAuthorizationFailed.Code })
	}
	denied := make([]bool, len(topics))
	any := false
	for i, rt := range topics {
		denied[i] = !c.authorize(opWrite, resourceTopic, rt.topic)
		any = any || denied[i]
	}
	if !any {
		return nil
	}
	return fill(func(i int) int16 {
		if denied[i] {
			return kerr.TopicAuthorizationFailed.Code
		}
		return kerr.OperationNotAttempted.Code
	})
}

// coordinatorDenied is FindCoordinator's check of one key: DESCRIBE on the
// group or the transactional ID; nil when allowed.
func (c *conn) coordinatorDenied(coordinatorType int8, key string) *kerr.Error {
	switch {
	case coordinatorType == coordinatorGroup && !c.authorize(opDescribe, resourceGroup, key):
		return kerr.GroupAuthorizationFailed
	case coordinatorType == coordinatorTransaction && !c.authorize(opDescribe, resourceTransactional, key):
		return kerr.TransactionalIDAuthorizationFailed
	}
	return nil
}

// splitTopicsByAuthorized splits a request's topics by whether the
// connection may perform op on each, keeping their order, as Kafka's
// AuthHelper.partitionSeqByAuthorized: one decision per distinct name.
func splitTopicsByAuthorized[T any](c *conn, op kmsg.ACLOperation, topics []T, name func(T) string) (allowed, denied []T) {
	if c.server.cfg.Authorizer == nil {
		return topics, nil
	}
	decided := make(map[string]bool, len(topics)) // bounded by the request
	for _, topic := range topics {
		n := name(topic)
		ok, seen := decided[n]
		if !seen {
			ok = c.authorize(op, resourceTopic, n)
			decided[n] = ok
		}
		if ok {
			allowed = append(allowed, topic)
		} else {
			denied = append(denied, topic)
		}
	}
	return allowed, denied
}

// aclRefusal is why an ACL API does not run: its code, and the message
// Kafka gives with it (AuthHelper.authorizeClusterOperation's "Request ...
// needs OP permission.", in every result of CreateAcls and DeleteAcls too).
type aclRefusal struct {
	*kerr.Error
	message *string
}

// aclAuthorizer is the authorizer the ACL APIs (CreateAcls, DescribeAcls,
// DeleteAcls) work on, or their refusal: SECURITY_DISABLED without one,
// CLUSTER_AUTHORIZATION_FAILED without op on the cluster.
func (c *conn) aclAuthorizer(op kmsg.ACLOperation) (*acl.Authorizer, *aclRefusal) {
	a := c.server.cfg.Authorizer
	switch {
	case a == nil:
		message := "No Authorizer is configured."
		return nil, &aclRefusal{kerr.SecurityDisabled, &message}
	case !c.authorizeCluster(op):
		message := c.clusterDeniedMessage(op)
		return nil, &aclRefusal{kerr.ClusterAuthorizationFailed, &message}
	}
	return a, nil
}
