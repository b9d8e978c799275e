package acl

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/auth"
)

const (
	topic    = kmsg.ACLResourceTypeTopic
	group    = kmsg.ACLResourceTypeGroup
	cluster  = kmsg.ACLResourceTypeCluster
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
	allow    = kmsg.ACLPermissionTypeAllow
	deny     = kmsg.ACLPermissionTypeDeny
	read     = kmsg.ACLOperationRead
	write    = kmsg.ACLOperationWrite
	describe = kmsg.ACLOperationDescribe
)

func bind(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

func openWith(t testing.TB, cfg Config, bindings ...Binding) *Authorizer {
	t.Helper()
	a, err := Open(&MemStore{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := a.Create(bindings)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("binding %v: %v", bindings[i], e)
		}
	}
	return a
}

func TestAuthorize(t *testing.T) {
	alice, bob := auth.User("alice"), auth.User("bob")
	tests := []struct {
		name     string
		cfg      Config
		bindings []Binding
		who      auth.Principal
		host     string
		op       kmsg.ACLOperation
		rt       kmsg.ACLResourceType
		resource string
		want     bool
	}{
		{"no acls denies", Config{}, nil, alice, "127.0.0.1", read, topic, "t", false},
		{"no acls, allow.everyone", Config{AllowEveryoneIfNoACLFound: true}, nil, alice, "127.0.0.1", read, topic, "t", true},
		{"acls on the resource for another principal deny even with allow.everyone", Config{AllowEveryoneIfNoACLFound: true},
			[]Binding{bind(topic, "t", literal, "User:bob", "*", read, allow)}, alice, "127.0.0.1", read, topic, "t", false},
		{"acls on another resource leave allow.everyone", Config{AllowEveryoneIfNoACLFound: true},
			[]Binding{bind(topic, "u", literal, "User:bob", "*", read, allow)}, alice, "127.0.0.1", read, topic, "t", true},
		{"super user", Config{SuperUsers: []auth.Principal{alice}},
			[]Binding{bind(topic, "t", literal, "User:alice", "*", read, deny)}, alice, "127.0.0.1", read, topic, "t", true},
		{"literal allow", Config{}, []Binding{bind(topic, "t", literal, "User:alice", "*", read, allow)}, alice, "127.0.0.1", read, topic, "t", true},
		{"literal allow, other principal", Config{}, []Binding{bind(topic, "t", literal, "User:alice", "*", read, allow)}, bob, "127.0.0.1", read, topic, "t", false},
		{"literal allow, other operation", Config{}, []Binding{bind(topic, "t", literal, "User:alice", "*", read, allow)}, alice, "127.0.0.1", write, topic, "t", false},
		{"literal allow, other resource type", Config{}, []Binding{bind(group, "t", literal, "User:alice", "*", read, allow)}, alice, "127.0.0.1", read, topic, "t", false},
		{"wildcard resource", Config{}, []Binding{bind(topic, "*", literal, "User:alice", "*", read, allow)}, alice, "127.0.0.1", read, topic, "anything", true},
		{"wildcard principal", Config{}, []Binding{bind(topic, "t", literal, "User:*", "*", read, allow)}, bob, "127.0.0.1", read, topic, "t", true},
		{"host matches", Config{}, []Binding{bind(topic, "t", literal, "User:alice", "10.0.0.1", read, allow)}, alice, "10.0.0.1", read, topic, "t", true},
		{"host differs", Config{}, []Binding{bind(topic, "t", literal, "User:alice", "10.0.0.1", read, allow)}, alice, "10.0.0.2", read, topic, "t", false},
		{"prefixed", Config{}, []Binding{bind(topic, "orders-", prefixed, "User:alice", "*", read, allow)}, alice, "127.0.0.1", read, topic, "orders-eu", true},
		{"prefixed equal name", Config{}, []Binding{bind(topic, "orders-", prefixed, "User:alice", "*", read, allow)}, alice, "127.0.0.1", read, topic, "orders-", true},
		{"prefixed no match", Config{}, []Binding{bind(topic, "orders-", prefixed, "User:alice", "*", read, allow)}, alice, "127.0.0.1", read, topic, "order", false},
		{"prefixed * is not a wildcard", Config{}, []Binding{bind(topic, "*", prefixed, "User:alice", "*", read, allow)}, alice, "127.0.0.1", read, topic, "t", false},
		{"deny wins over allow", Config{}, []Binding{
			bind(topic, "t", literal, "User:alice", "*", read, allow),
			bind(topic, "orders", prefixed, "User:*", "*", read, deny),
		}, alice, "127.0.0.1", read, topic, "orders-1", false},
		{"deny on wildcard resource wins", Config{}, []Binding{
			bind(topic, "t", literal, "User:alice", "*", read, allow),
			bind(topic, "*", literal, "User:alice", "*", read, deny),
		}, alice, "127.0.0.1", read, topic, "t", false},
		{"deny ALL wins", Config{}, []Binding{
			bind(topic, "t", literal, "User:alice", "*", kmsg.ACLOperationAll, allow),
			bind(topic, "t", literal, "User:alice", "10.0.0.9", kmsg.ACLOperationAll, deny),
		}, alice, "10.0.0.9", write, topic, "t", false},
		{"deny from another host does not apply", Config{}, []Binding{
			bind(topic, "t", literal, "User:alice", "*", read, allow),
			bind(topic, "t", literal, "User:alice", "10.0.0.9", read, deny),
		}, alice, "10.0.0.1", read, topic, "t", true},
		{"ALL allows", Config{}, []Binding{bind(topic, "t", literal, "User:alice", "*", kmsg.ACLOperationAll, allow)}, alice, "127.0.0.1", kmsg.ACLOperationDelete, topic, "t", true},
		{"READ implies DESCRIBE", Config{}, []Binding{bind(topic, "t", literal, "User:alice", "*", read, allow)}, alice, "127.0.0.1", describe, topic, "t", true},
		{"WRITE implies DESCRIBE", Config{}, []Binding{bind(topic, "t", literal, "User:alice", "*", write, allow)}, alice, "127.0.0.1", describe, topic, "t", true},
		{"ALTER implies DESCRIBE", Config{}, []Binding{bind(cluster, ClusterName, literal, "User:alice", "*", kmsg.ACLOperationAlter, allow)}, alice, "127.0.0.1", describe, cluster, ClusterName, true},
		{"CREATE does not imply DESCRIBE", Config{}, []Binding{bind(topic, "t", literal, "User:alice", "*", kmsg.ACLOperationCreate, allow)}, alice, "127.0.0.1", describe, topic, "t", false},
		{"ALTER_CONFIGS implies DESCRIBE_CONFIGS", Config{}, []Binding{bind(topic, "t", literal, "User:alice", "*", kmsg.ACLOperationAlterConfigs, allow)}, alice, "127.0.0.1", kmsg.ACLOperationDescribeConfigs, topic, "t", true},
		{"DESCRIBE does not imply READ", Config{}, []Binding{bind(topic, "t", literal, "User:alice", "*", describe, allow)}, alice, "127.0.0.1", read, topic, "t", false},
		{"DENY READ does not deny DESCRIBE", Config{}, []Binding{
			bind(topic, "t", literal, "User:alice", "*", describe, allow),
			bind(topic, "t", literal, "User:alice", "*", read, deny),
		}, alice, "127.0.0.1", describe, topic, "t", true},
		{"cluster mirror", Config{}, []Binding{bind(ResourceClusterMirror, "m1", literal, "User:alice", "*", kmsg.ACLOperationAlter, allow)}, alice, "127.0.0.1", kmsg.ACLOperationAlter, ResourceClusterMirror, "m1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := openWith(t, tt.cfg, tt.bindings...)
			if got := a.Authorize(tt.who, tt.host, tt.op, tt.rt, tt.resource); got != tt.want {
				t.Fatalf("Authorize(%s, %s, %s, %s:%s) = %v, want %v", tt.who, tt.host, tt.op, ResourceTypeName(tt.rt), tt.resource, got, tt.want)
			}
		})
	}
}

func TestAuthorizedOperations(t *testing.T) {
	a := openWith(t, Config{}, bind(topic, "t", literal, "User:alice", "*", read, allow), bind(topic, "t", literal, "User:alice", "*", kmsg.ACLOperationAlterConfigs, allow))
	got := a.AuthorizedOperations(auth.User("alice"), "127.0.0.1", topic, "t")
	want := int32(1<<read | 1<<describe | 1<<kmsg.ACLOperationAlterConfigs | 1<<kmsg.ACLOperationDescribeConfigs)
	if got != want {
		t.Fatalf("AuthorizedOperations = %b, want %b", got, want)
	}
}

func TestValidate(t *testing.T) {
	good := bind(topic, "t", literal, "User:alice", "*", read, allow)
	tests := []struct {
		name   string
		change func(*Binding)
	}{
		{"resource type ANY", func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeAny }},
		{"resource type UNKNOWN", func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeUnknown }},
		{"resource type 9", func(b *Binding) { b.ResourceType = 9 }},
		{"pattern ANY", func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeAny }},
		{"pattern MATCH", func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeMatch }},
		{"operation ANY", func(b *Binding) { b.Operation = kmsg.ACLOperationAny }},
		{"operation 99", func(b *Binding) { b.Operation = 99 }},
		{"permission ANY", func(b *Binding) { b.Permission = kmsg.ACLPermissionTypeAny }},
		{"empty name", func(b *Binding) { b.ResourceName = "" }},
		{"cluster name", func(b *Binding) { b.ResourceType = cluster; b.ResourceName = "c" }},
		{"principal without type", func(b *Binding) { b.Principal = "alice" }},
		{"empty host", func(b *Binding) { b.Host = "" }},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid binding: %v", err)
	}
	for _, tt := range tests {
		b := good
		tt.change(&b)
		if err := b.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", tt.name, err)
		}
	}
}

func TestFilterMatches(t *testing.T) {
	name := func(s string) *string { return &s }
	lit := bind(topic, "orders", literal, "User:alice", "*", read, allow)
	wild := bind(topic, "*", literal, "User:alice", "*", read, allow)
	pre := bind(topic, "ord", prefixed, "User:bob", "*", write, deny)
	tests := []struct {
		name   string
		filter Filter
		want   []Binding
	}{
		{"all", FilterAll, []Binding{lit, wild, pre}},
		{"ANY pattern with name is exact", Filter{ResourceType: topic, ResourceName: name("orders"), PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, []Binding{lit}},
		{"MATCH finds literal, wildcard and prefix", Filter{ResourceType: topic, ResourceName: name("orders"), PatternType: kmsg.ACLResourcePatternTypeMatch, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, []Binding{lit, wild, pre}},
		{"PREFIXED exact", Filter{ResourceType: kmsg.ACLResourceTypeAny, ResourceName: name("ord"), PatternType: prefixed, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, []Binding{pre}},
		{"principal", Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Principal: name("User:bob"), Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, []Binding{pre}},
		{"operation and permission", Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: read, Permission: allow}, []Binding{lit, wild}},
		{"group", Filter{ResourceType: group, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, nil},
		{"exact", lit.Exact(), []Binding{lit}},
	}
	for _, tt := range tests {
		var got []Binding
		for _, b := range []Binding{lit, wild, pre} {
			if tt.filter.Matches(b) {
				got = append(got, b)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: matched %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestCreateDescribeDelete(t *testing.T) {
	a := openWith(t, Config{})
	b1 := bind(topic, "t", literal, "User:alice", "*", read, allow)
	b2 := bind(group, "g", prefixed, "User:alice", "*", read, allow)
	bad := bind(kmsg.ACLResourceTypeAny, "t", literal, "User:alice", "*", read, allow)
	errs, err := a.Create([]Binding{b1, bad, b2, b1})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrInvalid) || errs[2] != nil || errs[3] != nil {
		t.Fatalf("Create: errs %v, err %v", errs, err)
	}
	if got := a.Describe(FilterAll); len(got) != 2 {
		t.Fatalf("Describe after Create = %v, want the 2 distinct bindings", got)
	}
	deleted, errs, err := a.Delete([]Filter{b2.Exact(), {ResourceType: 0}, b2.Exact()})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrInvalid) || len(deleted[0]) != 1 || len(deleted[2]) != 0 {
		t.Fatalf("Delete: deleted %v, errs %v, err %v", deleted, errs, err)
	}
	if got := a.Describe(FilterAll); len(got) != 1 || got[0] != b1 {
		t.Fatalf("Describe after Delete = %v, want [%v]", got, b1)
	}
}

// TestSaveFails: a change whose Save failed changes nothing, in the store
// or in decisions; what Create and Delete returned from is what a reopen
// decides by.
func TestSaveFails(t *testing.T) {
	store := &MemStore{}
	a, err := Open(store, Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Binding{
		bind(topic, "quoted \"name\" with spaces", literal, "User:CN=a b,O=c", "*", read, allow),
		bind(ResourceClusterMirror, "m", prefixed, "User:*", "127.0.0.1", kmsg.ACLOperationAlter, deny),
		bind(cluster, ClusterName, literal, "User:admin", "*", kmsg.ACLOperationAll, allow),
	}
	if _, err := a.Create(want); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Delete([]Filter{want[2].Exact()}); err != nil {
		t.Fatal(err)
	}
	want = want[:2]
	injected := errors.New("injected")
	store.Fail = injected
	if _, err := a.Create([]Binding{bind(group, "g", literal, "User:x", "*", read, allow)}); !errors.Is(err, injected) {
		t.Fatalf("Create with a failing save = %v, want the injected error", err)
	}
	if a.Authorize(auth.User("x"), "127.0.0.1", read, group, "g") {
		t.Fatal("a binding whose save failed decides")
	}
	if _, _, err := a.Delete([]Filter{FilterAll}); !errors.Is(err, injected) || len(a.Describe(FilterAll)) != len(want) {
		t.Fatalf("Delete with a failing save = %v, left %v", err, a.Describe(FilterAll))
	}
	store.Fail = nil
	reopened, err := Open(store, Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := reopened.Describe(FilterAll)
	if fmt.Sprint(got) != fmt.Sprint(a.Describe(FilterAll)) || len(got) != len(want) {
		t.Fatalf("reopened: %v, want %v", got, a.Describe(FilterAll))
	}
	if !reopened.Authorize(auth.User("CN=a b,O=c"), "10.1.1.1", describe, topic, "quoted \"name\" with spaces") {
		t.Fatal("the reopened authorizer does not decide by the stored bindings")
	}
}

func TestOpenCorrupt(t *testing.T) {
	for _, data := range []string{"2\n", "1\nacl TOPIC LITERAL \"t\"\n", "1\nacl ANY LITERAL \"t\" \"User:a\" \"*\" READ ALLOW\n", "1\nacl TOPIC LITERAL \"t\" \"User:a\" \"*\" READ MAYBE\n"} {
		store := &MemStore{}
		if err := store.Save([]byte(data)); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(store, Config{}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Open(%q) = %v, want ErrCorrupt", data, err)
		}
	}
}

func TestParseSuperUsers(t *testing.T) {
	got, err := ParseSuperUsers("User:admin; User:CN=x,O=y ;")
	if err != nil || fmt.Sprint(got) != "[User:admin User:CN=x,O=y]" {
		t.Fatalf("ParseSuperUsers = %v, %v", got, err)
	}
	if _, err := ParseSuperUsers("admin"); !errors.Is(err, auth.ErrPrincipal) {
		t.Fatalf("ParseSuperUsers(admin) = %v, want auth.ErrPrincipal", err)
	}
}
