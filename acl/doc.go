// Package acl is Kafka's ACL authorizer (KIP-11, KIP-290; the decisions of
// StandardAuthorizer): bindings of a resource pattern to an access control
// entry, filters over them (AclBindingFilter), and the Authorizer that
// decides whether a principal connecting from a host may perform an
// operation on a resource. The enums are kmsg's (one codec); the
// ClusterMirror resource type of KIP-1279 is ResourceClusterMirror.
//
// # Decisions
//
// Authorize answers, in this order:
//
//  1. a principal in super.users is allowed everything;
//  2. the ACLs whose pattern matches the resource are those on the
//     literal name, on the literal wildcard "*", and on every PREFIXED
//     name the resource name starts with;
//  3. if none match the resource (whoever they name), the answer is
//     allow.everyone.if.no.acl.found (default false);
//  4. among those naming the principal (or User:*) and the host (or "*"),
//     a DENY of the operation (or of ALL) wins over any ALLOW;
//  5. an ALLOW of the operation, of ALL, or of an operation implying it
//     allows: DESCRIBE is implied by READ, WRITE, DELETE and ALTER;
//     DESCRIBE_CONFIGS by ALTER_CONFIGS. Implication never widens a DENY.
//  6. otherwise denied.
//
// # On disk
//
// All bindings are saved in one Store, the node's file <data dir>/acls
// (broker replaces it with logstore.WriteFileAtomic: a crash leaves the old
// or the new set, never a mix); a change is durable before Create or
// Delete returns and before it takes effect:
//
//	1                                                       format version
//	acl <resource type> <pattern type> <"name"> <"principal"> <"host"> <operation> <permission>
//
// one acl line per binding, sorted, names as Kafka prints them (TOPIC,
// PREFIXED, READ, ALLOW, CLUSTER_MIRROR), strings Go-quoted.
//
// # Concurrency
//
// Authorize reads an immutable index through an atomic pointer and takes
// no lock, so the Produce and Fetch paths pay a few map lookups; Create and
// Delete are serialized by a mutex, write the file, then publish a new
// index.
package acl
