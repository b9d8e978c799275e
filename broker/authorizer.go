package broker

// The node's ACL authorizer: Kafka's authorizer.class.name, super.users
// and allow.everyone.if.no.acl.found in server.properties, the ACLs in the
// data directory (package acl).

import (
	"fmt"
	"strconv"

	"github.com/mirrord/mirrord/acl"
)

// AuthorizerClassNames are Kafka's authorizers; naming either turns on
// mirrord's (acl.Authorizer decides as StandardAuthorizer does).
var AuthorizerClassNames = []string{
	"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"kafka.security.authorizer.AclAuthorizer",
}

// authorizerPropertyNames are the server.properties keys the authorizer
// takes (ServerPropertyNames lists them, so flags of the same name work).
var authorizerPropertyNames = []string{"authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found"}

// AuthorizerConfig configures the node's authorizer: none when ClassName
// is empty (Kafka's default: everything allowed, the ACL APIs answer
// SECURITY_DISABLED).
type AuthorizerConfig struct {
	ClassName string
	acl.Config
}

// takeAuthorizerProperties sets c.Authorizer from the authorizer keys of
// props and returns props without them.
func (c *Config) takeAuthorizerProperties(props map[string]string) (map[string]string, error) {
	rest := make(map[string]string, len(props))
	for key, value := range props {
		rest[key] = value
	}
	if name, ok := rest["authorizer.class.name"]; ok {
		delete(rest, "authorizer.class.name")
		known := name == ""
		for _, k := range AuthorizerClassNames {
			known = known || name == k
		}
		if !known {
			return nil, fmt.Errorf("%w: authorizer.class.name %q: mirrord's authorizer is Kafka's %v", ErrServerProperty, name, AuthorizerClassNames)
		}
		c.Authorizer.ClassName = name
	}
	if value, ok := rest["super.users"]; ok {
		delete(rest, "super.users")
		users, err := acl.ParseSuperUsers(value)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrServerProperty, err)
		}
		c.Authorizer.SuperUsers = users
	}
	if value, ok := rest["allow.everyone.if.no.acl.found"]; ok {
		delete(rest, "allow.everyone.if.no.acl.found")
		allow, err := strconv.ParseBool(value)
		if err != nil {
			return nil, fmt.Errorf("%w: allow.everyone.if.no.acl.found %q: not a boolean", ErrServerProperty, value)
		}
		c.Authorizer.AllowEveryoneIfNoACLFound = allow
	}
	return rest, nil
}

// openAuthorizer opens the ACLs of the data directory when the node has
// an authorizer.
func (n *Node) openAuthorizer() error {
	if n.cfg.Authorizer.ClassName == "" {
		return nil
	}
	a, err := acl.Open(n.nodeFile("acls"), n.cfg.Authorizer.Config)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	n.authorizer = a
	return nil
}

// Authorizer is the node's ACL authorizer, nil when it has none (every
// request allowed).
func (n *Node) Authorizer() *acl.Authorizer { return n.authorizer }
