package acl

import (
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/auth"
)

// Config is the node's authorizer configuration (server.properties).
type Config struct {
	SuperUsers                []auth.Principal // super.users
	AllowEveryoneIfNoACLFound bool             // allow.everyone.if.no.acl.found
}

// Authorizer holds the node's ACLs and decides requests. Authorize is
// safe for concurrent use and takes no lock.
type Authorizer struct {
	superUsers map[auth.Principal]bool
	allowEmpty bool
	index      atomic.Pointer[index]

	store Store
	mu    sync.Mutex // serializes Create and Delete (file write, then publish)
}

// resourceKey names the ACLs of one pattern.
type resourceKey struct {
	resourceType kmsg.ACLResourceType
	name         string
}

// entry is a binding's access control entry, its principal parsed.
type entry struct {
	principal  auth.Principal
	anyone     bool // User:*
	host       string
	operation  kmsg.ACLOperation
	permission kmsg.ACLPermissionType
}

// index is an immutable snapshot of the bindings, arranged for Authorize.
type index struct {
	bindings      []Binding // sorted by bindingLess, no duplicates
	literal       map[resourceKey][]entry
	prefixed      map[resourceKey][]entry
	prefixLengths map[kmsg.ACLResourceType][]int // distinct prefixed name lengths, ascending
}

func newIndex(bindings []Binding) *index {
	ix := &index{
		bindings:      bindings,
		literal:       map[resourceKey][]entry{},
		prefixed:      map[resourceKey][]entry{},
		prefixLengths: map[kmsg.ACLResourceType][]int{},
	}
	lengths := map[kmsg.ACLResourceType]map[int]bool{}
	for _, b := range bindings {
		principal, err := auth.ParsePrincipal(b.Principal)
		if err != nil {
			panic("acl: a stored binding has an invalid principal: " + b.String()) // Validate ran before
		}
		e := entry{principal: principal, anyone: b.Principal == WildcardPrincipal, host: b.Host, operation: b.Operation, permission: b.Permission}
		key := resourceKey{b.ResourceType, b.ResourceName}
		if b.PatternType == kmsg.ACLResourcePatternTypePrefixed {
			ix.prefixed[key] = append(ix.prefixed[key], e)
			if lengths[b.ResourceType] == nil {
				lengths[b.ResourceType] = map[int]bool{}
			}
			lengths[b.ResourceType][len(b.ResourceName)] = true
			continue
		}
		ix.literal[key] = append(ix.literal[key], e)
	}
	for resourceType, set := range lengths {
		for n := range set {
			ix.prefixLengths[resourceType] = append(ix.prefixLengths[resourceType], n)
		}
		sort.Ints(ix.prefixLengths[resourceType])
	}
	return ix
}

// verdict accumulates the ACLs matching one request.
type verdict struct {
	found   bool // some ACL's pattern matches the resource
	allowed bool
	denied  bool
}

func (v *verdict) apply(entries []entry, principal auth.Principal, host string, op kmsg.ACLOperation) {
	if len(entries) > 0 {
		v.found = true
	}
	for i := range entries {
		e := &entries[i]
		if !e.anyone && e.principal != principal {
			continue
		}
		if e.host != Wildcard && e.host != host {
			continue
		}
		if e.permission == kmsg.ACLPermissionTypeDeny {
			if e.operation == op || e.operation == kmsg.ACLOperationAll {
				v.denied = true
				return
			}
			continue
		}
		if implies(e.operation, op) {
			v.allowed = true
		}
	}
}

// implies reports whether an ALLOW of granted allows op.
func implies(granted, op kmsg.ACLOperation) bool {
	if granted == op || granted == kmsg.ACLOperationAll {
		return true
	}
	switch op {
	case kmsg.ACLOperationDescribe:
		switch granted {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return granted == kmsg.ACLOperationAlterConfigs
	}
	return false
}

func (ix *index) decide(principal auth.Principal, host string, op kmsg.ACLOperation, resourceType kmsg.ACLResourceType, name string) verdict {
	var v verdict
	v.apply(ix.literal[resourceKey{resourceType, name}], principal, host, op)
	if name != Wildcard && !v.denied {
		v.apply(ix.literal[resourceKey{resourceType, Wildcard}], principal, host, op)
	}
	for _, n := range ix.prefixLengths[resourceType] {
		if n > len(name) || v.denied {
			break
		}
		v.apply(ix.prefixed[resourceKey{resourceType, name[:n]}], principal, host, op)
	}
	return v
}

// Authorize reports whether principal, connected from host (an IP
// address), may perform op on the resource (see the package doc).
func (a *Authorizer) Authorize(principal auth.Principal, host string, op kmsg.ACLOperation, resourceType kmsg.ACLResourceType, name string) bool {
	if a.superUsers[principal] {
		return true
	}
	v := a.index.Load().decide(principal, host, op, resourceType, name)
	switch {
	case v.denied:
		return false
	case !v.found:
		return a.allowEmpty
	}
	return v.allowed
}

// operationsOf lists, per resource type, the operations Kafka reports in
// the authorized-operations fields (AclEntry.supportedOperations).
var operationsOf = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	kmsg.ACLResourceTypeTopic: {kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe,
		kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs},
	kmsg.ACLResourceTypeGroup: {kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete},
	kmsg.ACLResourceTypeCluster: {kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe},
	kmsg.ACLResourceTypeTransactionalId: {kmsg.ACLOperationDescribe, kmsg.ACLOperationWrite},
	ResourceClusterMirror:               {kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe},
}

// AuthorizedOperations is Kafka's authorized-operations bit field: bit op
// set for each supported operation of the resource type principal may
// perform on the resource.
func (a *Authorizer) AuthorizedOperations(principal auth.Principal, host string, resourceType kmsg.ACLResourceType, name string) int32 {
	var bits int32
	for _, op := range operationsOf[resourceType] {
		if a.Authorize(principal, host, op, resourceType, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// Describe returns the bindings f matches, sorted.
func (a *Authorizer) Describe(f Filter) []Binding {
	var out []Binding
	for _, b := range a.index.Load().bindings {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// Len is the number of bindings.
func (a *Authorizer) Len() int { return len(a.index.Load().bindings) }

// SupportedOperations is the bit field of every operation Kafka reports
// for the resource type (what an authorizer allowing all answers).
func SupportedOperations(resourceType kmsg.ACLResourceType) int32 {
	var bits int32
	for _, op := range operationsOf[resourceType] {
		bits |= 1 << op
	}
	return bits
}

// AuthorizeByResourceType is Kafka's Authorizer.authorizeByResourceType:
// whether principal may perform op on some resource of the type. A super
// user may; a DENY of op on the literal wildcard forbids; otherwise an
// ALLOW (of op or an operation implying it) whose pattern no DENY of the
// principal covers allows; with no ACLs on the type at all,
// allow.everyone.if.no.acl.found decides.
func (a *Authorizer) AuthorizeByResourceType(principal auth.Principal, host string, op kmsg.ACLOperation, resourceType kmsg.ACLResourceType) bool {
	if a.superUsers[principal] {
		return true
	}
	applies := func(b Binding) bool {
		return (b.Principal == WildcardPrincipal || b.Principal == principal.String()) && (b.Host == Wildcard || b.Host == host)
	}
	var denies, allows []Binding
	found := false
	for _, b := range a.index.Load().bindings {
		if b.ResourceType != resourceType {
			continue
		}
		found = true
		if !applies(b) {
			continue
		}
		switch {
		case b.Permission == kmsg.ACLPermissionTypeDeny && (b.Operation == op || b.Operation == kmsg.ACLOperationAll):
			if b.PatternType == kmsg.ACLResourcePatternTypeLiteral && b.ResourceName == Wildcard {
				return false
			}
			denies = append(denies, b)
		case b.Permission == kmsg.ACLPermissionTypeAllow && implies(b.Operation, op):
			allows = append(allows, b)
		}
	}
	if !found {
		return a.allowEmpty
	}
	for _, allow := range allows {
		covered := false
		for _, deny := range denies {
			if deny.PatternType == kmsg.ACLResourcePatternTypePrefixed && strings.HasPrefix(allow.ResourceName, deny.ResourceName) ||
				deny.PatternType == allow.PatternType && deny.ResourceName == allow.ResourceName {
				covered = true
				break
			}
		}
		if !covered {
			return true
		}
	}
	return false
}
