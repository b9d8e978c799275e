package engine

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/acl"
	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/vfs"
)

// openACLNode opens a node with Kafka's authorizer in dir (no listener:
// the sync writes through the node).
func openACLNode(t *testing.T, dir string) *Node {
	t.Helper()
	node, err := OpenNode(NodeConfig{FS: vfs.OS, DataDir: dir, Log: logstore.DefaultConfig(), Host: "127.0.0.1", Port: 9092,
		Authorizer: broker.AuthorizerConfig{ClassName: broker.AuthorizerClassNames[0]}})
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// aclSource is a kfake cluster whose ACLs a test sets through kadm.
type aclSource struct {
	addr  string
	admin *kadm.Client
}

func startACLSource(t *testing.T) aclSource {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	addr := cluster.ListenAddrs()[0]
	return aclSource{addr: addr, admin: kadm.NewClient(newClient(t, addr))}
}

// allow gives principal op on a literal topic (or a prefixed one when
// the name ends in "*" after a letter).
func topicACL(name, principal string, op kmsg.ACLOperation) acl.Binding {
	pattern := kmsg.ACLResourcePatternTypeLiteral
	if len(name) > 1 && strings.HasSuffix(name, "*") {
		name, pattern = strings.TrimSuffix(name, "*"), kmsg.ACLResourcePatternTypePrefixed
	}
	return acl.Binding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: name, PatternType: pattern,
		Principal: principal, Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

func (s aclSource) builder(b acl.Binding) *kadm.ACLBuilder {
	builder := kadm.NewACLs().Allow(b.Principal).AllowHosts(b.Host).Operations(b.Operation).
		ResourcePatternType(b.PatternType)
	if b.ResourceType == kmsg.ACLResourceTypeGroup {
		return builder.Groups(b.ResourceName)
	}
	return builder.Topics(b.ResourceName)
}

func (s aclSource) create(t *testing.T, bindings ...acl.Binding) {
	t.Helper()
	for _, b := range bindings {
		results, err := s.admin.CreateACLs(context.Background(), s.builder(b))
		if err == nil {
			for _, r := range results {
				err = errors.Join(err, r.Err)
			}
		}
		if err != nil {
			t.Fatalf("create %v on the source: %v", b, err)
		}
	}
}

func (s aclSource) delete(t *testing.T, b acl.Binding) {
	t.Helper()
	results, err := s.admin.DeleteACLs(context.Background(), s.builder(b))
	if err == nil && (len(results) != 1 || len(results[0].Deleted) != 1) {
		err = errors.New("not one ACL deleted")
	}
	if err != nil {
		t.Fatalf("delete %v on the source: %v", b, err)
	}
}

// waitACLs waits until the node's ACLs are want (in any order).
func waitACLs(t *testing.T, node *Node, what string, want ...acl.Binding) {
	t.Helper()
	sortBindings := func(bs []acl.Binding) []string {
		out := make([]string, len(bs))
		for i, b := range bs {
			out[i] = b.String()
		}
		slices.Sort(out)
		return out
	}
	wantText := sortBindings(want)
	var got []string
	waitUntil(t, what, func() bool {
		got = sortBindings(node.Authorizer().Describe(acl.FilterAll))
		return slices.Equal(got, wantText)
	})
}

func createMirrorOnly(t *testing.T, node *Node, name string, config map[string]string) {
	t.Helper()
	if err := node.Mirrors().CreateMirror(context.Background(), name, config); err != nil {
		t.Fatal(err)
	}
}

// The ACL sync: the source's ACLs matching acls.include are created
// within a round, one deleted on the source is deleted here, the
// ClusterMirror ACLs and the operator's are left alone, a second mirror
// does not lose an ACL it shares when the first's source drops it, and
// what a mirror owns survives a restart.
func TestMirrorSyncsACLs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "target")
	target := openACLNode(t, dir)
	closed := false
	t.Cleanup(func() {
		if !closed {
			target.Close()
		}
	})
	first, second := startACLSource(t), startACLSource(t)

	const alice, bob, carol = "User:alice", "User:bob", "User:carol"
	ordersRead := topicACL("orders", alice, kmsg.ACLOperationRead)
	ordersWrite := topicACL("orders", bob, kmsg.ACLOperationWrite)
	prefixed := topicACL("orders-*", alice, kmsg.ACLOperationDescribe)
	secret := topicACL("secret", alice, kmsg.ACLOperationRead) // outside acls.include
	shared := topicACL("orders", carol, kmsg.ACLOperationRead) // on both sources
	first.create(t, ordersRead, ordersWrite, prefixed, secret, shared)
	second.create(t, shared)

	// This node's own: who administers its mirrors, and an operator's ACL.
	clusterMirror := acl.Binding{ResourceType: acl.ResourceClusterMirror, ResourceName: "*", PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:ops", Host: "*", Operation: kmsg.ACLOperationAlter, Permission: kmsg.ACLPermissionTypeAllow}
	operators := topicACL("orders", "User:dave", kmsg.ACLOperationRead)
	if errs, err := target.Authorizer().Create([]acl.Binding{clusterMirror, operators}); err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}

	config := func(source aclSource) map[string]string {
		c := mirrorConfig(source.addr)
		c["acls.include"] = "orders.*"
		c["mirror.acls.sync.interval.ms"] = "50"
		return c
	}
	createMirrorOnly(t, target, "m", config(first))
	createMirrorOnly(t, target, "n", config(second))
	waitACLs(t, target, "the source's ACLs matching acls.include", clusterMirror, operators, ordersRead, ordersWrite, prefixed, shared)

	first.delete(t, ordersWrite)
	waitACLs(t, target, "the ACL the source deleted gone", clusterMirror, operators, ordersRead, prefixed, shared)
	first.delete(t, shared) // mirror n's source still has it
	waitUntil(t, "mirror m to drop the shared ACL", func() bool {
		return !slices.Contains(target.ACLsOwned("m"), shared)
	})
	waitACLs(t, target, "the shared ACL kept for mirror n", clusterMirror, operators, ordersRead, prefixed, shared)
	if got := target.ACLsOwned("n"); !slices.Equal(got, []acl.Binding{shared}) {
		t.Fatalf("mirror n owns %v, want the shared ACL", got)
	}
	// The round that dropped the ACL reports when it ends, after the
	// ownership the wait above saw: wait for its report.
	waitUntil(t, "mirror m's ACL sync to report 2 ACLs synced without error", func() bool {
		reports := target.MirrorReports()
		s := reports[0].ACLSync
		return reports[0].Name == "m" && !s.At.IsZero() && s.Err == "" && s.Synced == 2
	})

	// Restart: what m owns is durable, so an ACL deleted on the source
	// while the node is down goes at the next round.
	closed = true
	if err := target.Close(); err != nil {
		t.Fatal(err)
	}
	first.delete(t, prefixed)
	target = openACLNode(t, dir)
	closed = false
	waitACLs(t, target, "the ACL deleted during the restart gone", clusterMirror, operators, ordersRead, shared)

	// Deleting a mirror keeps its ACLs and drops its ownership.
	if err := target.Mirrors().DeleteMirror(context.Background(), "n"); err != nil {
		t.Fatal(err)
	}
	second.delete(t, shared)
	if got := target.ACLsOwned("n"); len(got) != 0 {
		t.Fatalf("deleted mirror n still owns %v", got)
	}
	waitACLs(t, target, "the ACLs after mirror n's deletion", clusterMirror, operators, ordersRead, shared)
}

// On a node without an authorizer the ACL sync writes nothing, never asks
// the source, and says so in its status (SECURITY_DISABLED) without
// counting failed rounds.
func TestMirrorACLSyncWithoutAuthorizer(t *testing.T) {
	target, _ := startNode(t, filepath.Join(t.TempDir(), "target"))
	source := startACLSource(t)
	source.create(t, topicACL("orders", "User:alice", kmsg.ACLOperationRead))
	config := mirrorConfig(source.addr)
	config["mirror.acls.sync.interval.ms"] = "20"
	createMirrorOnly(t, target, "m", config)
	var status SyncStatus
	waitUntil(t, "the ACL sync to report SECURITY_DISABLED", func() bool {
		status = target.MirrorReports()[0].ACLSync
		return status.Err != ""
	})
	if !strings.Contains(status.Err, kerr.SecurityDisabled.Message) || status.Errors != 0 || !status.At.IsZero() {
		t.Fatalf("status %+v, want SECURITY_DISABLED, no failed round", status)
	}
	described, err := target.Mirrors().DescribeMirrors(context.Background(), []string{"m"}, false)
	if err != nil || len(described) != 1 || described[0].ACLSync == nil || described[0].ACLSync.Error != status.Err {
		t.Fatalf("describe %+v, %v: want the ACL sync's status", described, err)
	}
}
