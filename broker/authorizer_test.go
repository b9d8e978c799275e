package broker

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/acl"
	"github.com/mirrord/mirrord/auth"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/vfs"
)

// The ACLs a node's authorizer accepted survive a crash (only synced
// bytes count: vfs.Mem.Crash), and the reopened node decides by them.
func TestACLsSurviveACrash(t *testing.T) {
	fs := vfs.NewMem()
	open := func() *Node {
		n, err := Open(Config{FS: fs, DataDir: "/data", Log: logstore.DefaultConfig(),
			Authorizer: AuthorizerConfig{ClassName: "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := open()
	bindings := []acl.Binding{
		{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "orders", PatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow},
		{ResourceType: acl.ResourceClusterMirror, ResourceName: "m", PatternType: kmsg.ACLResourcePatternTypePrefixed,
			Principal: "User:*", Host: "127.0.0.1", Operation: kmsg.ACLOperationAlter, Permission: kmsg.ACLPermissionTypeDeny},
	}
	if errs, err := n.Authorizer().Create(bindings); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatal(err, errs)
	}
	want := fmt.Sprint(n.Authorizer().Describe(acl.FilterAll))
	fs.Crash(rand.New(rand.NewPCG(1, 2)))
	reopened := open()
	defer reopened.Close()
	if got := fmt.Sprint(reopened.Authorizer().Describe(acl.FilterAll)); got != want {
		t.Fatalf("after a crash: %s, want %s", got, want)
	}
	if !reopened.Authorizer().Authorize(auth.User("alice"), "10.0.0.1", kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, "orders") {
		t.Fatal("the reopened node does not decide by the stored ACLs")
	}
}
