package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testClusters numbers the cluster IDs handed out, so that a test run again
// (-count) in the same process starts from an empty cluster too.
var testClusters atomic.Int64

// testCluster returns a cluster ID of the test's own, so tests sharing the
// etcd cluster never see each other's keys.
func testCluster(t *testing.T) string {
	return fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), testClusters.Add(1))
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls condition until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, condition func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	for {
		ok, err := condition()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, timeout)
		}
		<-ticker.C
	}
}

func nodeIDs(ns []Node) []int32 {
	ids := make([]int32, len(ns))
	for i, n := range ns {
		ids[i] = n.ID
	}
	return ids
}

func TestRegistry(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	one, err := Join(ctx, client, clusterID, Node{ID: 1, Host: "127.0.0.1", Port: 9001, Rack: "a"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	two, err := Join(ctx, client, clusterID, Node{ID: 2, Host: "127.0.0.1", Port: 9002}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	live, err := LiveNodes(ctx, client, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{{ID: 1, Host: "127.0.0.1", Port: 9001, Rack: "a"}, {ID: 2, Host: "127.0.0.1", Port: 9002}}
	if !slices.Equal(live, want) {
		t.Fatalf("live nodes %+v, want %+v", live, want)
	}
	if _, err := Join(ctx, client, clusterID, Node{ID: 1, Host: "127.0.0.1", Port: 9999}, 5*time.Second); !errors.Is(err, ErrDuplicateNode) {
		t.Fatalf("second Join of node 1: %v, want ErrDuplicateNode", err)
	}
	if err := two.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-two.Lost():
	default:
		t.Fatal("Lost not closed after Close")
	}
	live, err = LiveNodes(ctx, client, clusterID)
	if err != nil || !slices.Equal(nodeIDs(live), []int32{1}) {
		t.Fatalf("after node 2 left: %+v, %v", live, err)
	}
	// Node 2 may join again once it has left.
	again, err := Join(ctx, client, clusterID, Node{ID: 2, Host: "127.0.0.1", Port: 9002}, 5*time.Second)
	if err != nil {
		t.Fatalf("rejoin: %v", err)
	}
	for _, r := range []*Registration{one, again} {
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := one.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestRegistryLeaseRevoked: a lease revoked behind the node's back (an
// operator, or etcd expiring it while the node was cut off) ends the
// keep-alive, and Lost tells the node it must join again.
func TestRegistryLeaseRevoked(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	r, err := Join(ctx, client, clusterID, Node{ID: 3, Host: "127.0.0.1", Port: 9003}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Revoke(ctx, r.lease); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Lost():
	case <-ctx.Done():
		t.Fatal("Lost not closed after the lease was revoked")
	}
	live, err := LiveNodes(ctx, client, clusterID)
	if err != nil || len(live) != 0 {
		t.Fatalf("live after revoke: %+v, %v", live, err)
	}
	again, err := Join(ctx, client, clusterID, Node{ID: 3, Host: "127.0.0.1", Port: 9003}, 5*time.Second)
	if err != nil {
		t.Fatalf("join again: %v", err)
	}
	if err := again.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryLeaseExpires stops a node's keep-alive without revoking its
// lease, as a crash does: the node leaves the live set after its TTL.
func TestRegistryLeaseExpires(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	r, err := Join(ctx, client, clusterID, Node{ID: 7, Host: "127.0.0.1", Port: 9007}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	live, err := LiveNodes(ctx, client, clusterID)
	if err != nil || len(live) != 1 {
		t.Fatalf("live %+v, %v", live, err)
	}
	r.cancel() // the crash: no more keep-alives, no revoke
	<-r.lost
	waitFor(t, 20*time.Second, "node 7's lease expires", func() (bool, error) {
		live, err := LiveNodes(ctx, client, clusterID)
		return len(live) == 0, err
	})
}

// TestRejoin: a node whose keep-alive ended while its lease still lives
// (etcd was unreachable for a while) resumes on the same lease, its key
// never leaving; one whose lease is gone joins anew.
func TestRejoin(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	node := Node{ID: 4, Host: "127.0.0.1", Port: 9004}
	r, err := Join(ctx, client, clusterID, node, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	key := nodeKey(clusterID, node.ID)
	before, err := client.Get(ctx, key)
	if err != nil || len(before.Kvs) != 1 {
		t.Fatalf("get %s: %v %v", key, before, err)
	}
	r.cancel() // the keep-alive gives up, the lease lives on
	<-r.Lost()
	resumed, err := Rejoin(ctx, r, clusterID, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.lease != r.lease {
		t.Fatalf("rejoined on lease %x, want the living lease %x", resumed.lease, r.lease)
	}
	// Past two TTLs the key is the same key: renewed, never re-created.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		after, err := client.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(after.Kvs) != 1 || after.Kvs[0].CreateRevision != before.Kvs[0].CreateRevision {
			t.Fatalf("the node's key left the registry after a rejoin on its living lease: %v", after.Kvs)
		}
		select {
		case <-resumed.Lost():
			t.Fatal("the resumed keep-alive ended")
		case <-time.After(250 * time.Millisecond): // the key is checked at each tick for 5 s: two TTLs and more
		}
	}

	if _, err := client.Revoke(ctx, resumed.lease); err != nil {
		t.Fatal(err)
	}
	<-resumed.Lost()
	anew, err := Rejoin(ctx, resumed, clusterID, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer anew.Close(ctx)
	if anew.lease == resumed.lease {
		t.Fatal("rejoined on a revoked lease")
	}
	if live, err := LiveNodes(ctx, client, clusterID); err != nil || len(live) != 1 || live[0].ID != 4 {
		t.Fatalf("live after joining anew: %+v, %v", live, err)
	}
}
