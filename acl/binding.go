package acl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/auth"
)

// ResourceClusterMirror is KIP-1279's ClusterMirror resource type. Kafka's
// ResourceType stops at USER (7) and the KIP names no code, so mirrord
// takes the next free one, 8.
const ResourceClusterMirror kmsg.ACLResourceType = 8

// ClusterName is the one name of the CLUSTER resource.
const ClusterName = "kafka-cluster"

// Wildcard is the literal resource name and host that match any.
const Wildcard = "*"

// WildcardPrincipal matches every principal.
const WildcardPrincipal = "User:*"

// ErrInvalid is a binding or filter Kafka refuses (INVALID_REQUEST).
var ErrInvalid = errors.New("acl: invalid")

// Binding is Kafka's AclBinding: a resource pattern and an access control
// entry.
type Binding struct {
	ResourceType kmsg.ACLResourceType
	ResourceName string
	PatternType  kmsg.ACLResourcePatternType // LITERAL or PREFIXED
	Principal    string                      // "User:alice", or "User:*"
	Host         string                      // an IP address, or "*"
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

func (b Binding) String() string {
	return fmt.Sprintf("(pattern=%s:%s:%s, principal=%s, host=%s, operation=%s, permission=%s)",
		ResourceTypeName(b.ResourceType), b.PatternType, b.ResourceName, b.Principal, b.Host, b.Operation, b.Permission)
}

// Validate is Kafka's check of a binding to create (AclControlManager
// validateNewAcl and the CreateAcls handler): every field definite, a
// non-empty name, kafka-cluster the only CLUSTER name, a TYPE:NAME
// principal.
func (b Binding) Validate() error {
	switch {
	case !definiteResourceType(b.ResourceType):
		return fmt.Errorf("%w: resource type %s", ErrInvalid, ResourceTypeName(b.ResourceType))
	case b.PatternType != kmsg.ACLResourcePatternTypeLiteral && b.PatternType != kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("%w: pattern type %s", ErrInvalid, b.PatternType)
	case !definiteOperation(b.Operation):
		return fmt.Errorf("%w: operation %s", ErrInvalid, b.Operation)
	case b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny:
		return fmt.Errorf("%w: permission type %s", ErrInvalid, b.Permission)
	case b.ResourceName == "":
		return fmt.Errorf("%w: empty resource name", ErrInvalid)
	case b.ResourceType == kmsg.ACLResourceTypeCluster && b.ResourceName != ClusterName:
		return fmt.Errorf("%w: the only valid name for the CLUSTER resource is %s", ErrInvalid, ClusterName)
	case b.Host == "":
		return fmt.Errorf("%w: empty host", ErrInvalid)
	}
	if _, err := auth.ParsePrincipal(b.Principal); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// Filter is Kafka's AclBindingFilter: ANY (or a nil string) matches every
// value; pattern type MATCH matches the patterns that would apply to the
// named resource (the literal name, the wildcard, the prefixes).
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// FilterAll matches every binding.
var FilterAll = Filter{
	ResourceType: kmsg.ACLResourceTypeAny,
	PatternType:  kmsg.ACLResourcePatternTypeAny,
	Operation:    kmsg.ACLOperationAny,
	Permission:   kmsg.ACLPermissionTypeAny,
}

// Exact is the filter matching b alone.
func (b Binding) Exact() Filter {
	name, principal, host := b.ResourceName, b.Principal, b.Host
	return Filter{
		ResourceType: b.ResourceType, ResourceName: &name, PatternType: b.PatternType,
		Principal: &principal, Host: &host, Operation: b.Operation, Permission: b.Permission,
	}
}

// Validate refuses a filter with an UNKNOWN field (Kafka's
// AclBindingFilter.findIndefiniteField for UNKNOWN).
func (f Filter) Validate() error {
	switch {
	case !knownResourceType(f.ResourceType):
		return fmt.Errorf("%w: filter resource type %s", ErrInvalid, ResourceTypeName(f.ResourceType))
	case f.PatternType < kmsg.ACLResourcePatternTypeAny || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("%w: filter pattern type %s", ErrInvalid, f.PatternType)
	case f.Operation < kmsg.ACLOperationAny || f.Operation > kmsg.ACLOperationDescribeTokens:
		return fmt.Errorf("%w: filter operation %s", ErrInvalid, f.Operation)
	case f.Permission < kmsg.ACLPermissionTypeAny || f.Permission > kmsg.ACLPermissionTypeAllow:
		return fmt.Errorf("%w: filter permission type %s", ErrInvalid, f.Permission)
	}
	return nil
}

// Matches is Kafka's AclBindingFilter.matches.
func (f Filter) Matches(b Binding) bool {
	return f.matchesPattern(b) && f.matchesEntry(b)
}

func (f Filter) matchesPattern(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != kmsg.ACLResourcePatternTypeAny && f.PatternType != kmsg.ACLResourcePatternTypeMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName == nil {
		return true
	}
	name := *f.ResourceName
	if f.PatternType == kmsg.ACLResourcePatternTypeAny || f.PatternType == b.PatternType {
		return name == b.ResourceName
	}
	switch b.PatternType { // f.PatternType is MATCH
	case kmsg.ACLResourcePatternTypeLiteral:
		return name == b.ResourceName || b.ResourceName == Wildcard
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

func (f Filter) matchesEntry(b Binding) bool {
	return (f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == kmsg.ACLOperationAny || f.Operation == b.Operation) &&
		(f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission)
}

func knownResourceType(t kmsg.ACLResourceType) bool {
	return t >= kmsg.ACLResourceTypeAny && t <= ResourceClusterMirror
}

func definiteResourceType(t kmsg.ACLResourceType) bool {
	return t > kmsg.ACLResourceTypeAny && t <= ResourceClusterMirror
}

func definiteOperation(op kmsg.ACLOperation) bool {
	return op > kmsg.ACLOperationAny && op <= kmsg.ACLOperationDescribeTokens
}

// ResourceTypeName is kmsg's name, and CLUSTER_MIRROR for ClusterMirror.
func ResourceTypeName(t kmsg.ACLResourceType) string {
	if t == ResourceClusterMirror {
		return "CLUSTER_MIRROR"
	}
	return t.String()
}

// ParseResourceType is kmsg's parser, and CLUSTER_MIRROR (or
// ClusterMirror) for ClusterMirror.
func ParseResourceType(s string) (kmsg.ACLResourceType, error) {
	if strings.EqualFold(strings.ReplaceAll(s, "_", ""), "clustermirror") {
		return ResourceClusterMirror, nil
	}
	t, err := kmsg.ParseACLResourceType(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return t, nil
}

// ParseSuperUsers parses Kafka's super.users: principals separated by
// semicolons (names may hold commas).
func ParseSuperUsers(s string) ([]auth.Principal, error) {
	var principals []auth.Principal
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := auth.ParsePrincipal(part)
		if err != nil {
			return nil, fmt.Errorf("acl: super.users: %w", err)
		}
		principals = append(principals, p)
	}
	return principals, nil
}
