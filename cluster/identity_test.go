package cluster

import (
	"sync"
	"testing"
)

// TestClaimClusterID: of several first nodes claiming at once, one names
// the cluster and all of them, and every later one, get that name.
func TestClaimClusterID(t *testing.T) {
	client, ctx := testClient(t), testContext(t)
	if _, err := client.Delete(ctx, clusterIDKey); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ClusterID(ctx, client); ok || err != nil {
		t.Fatalf("ClusterID before any claim: ok %v, %v", ok, err)
	}
	proposals := []string{"AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB", "CCCCCCCCCCCCCCCCCCCCCC"}
	got := make([]string, len(proposals))
	var namers sync.Map
	var wg sync.WaitGroup
	for i, p := range proposals {
		wg.Go(func() {
			id, named, err := ClaimClusterID(ctx, client, p)
			if err != nil {
				t.Error(err)
			}
			got[i] = id
			if named {
				namers.Store(p, true)
			}
		})
	}
	wg.Wait()
	for _, id := range got {
		if id != got[0] {
			t.Fatalf("claims answered different IDs: %q", got)
		}
	}
	count := 0
	namers.Range(func(key, _ any) bool {
		count++
		if key != got[0] {
			t.Errorf("%v says it named the cluster, which is %q", key, got[0])
		}
		return true
	})
	if count != 1 {
		t.Fatalf("%d claims named the cluster, want 1", count)
	}
	later, named, err := ClaimClusterID(ctx, client, "DDDDDDDDDDDDDDDDDDDDDD")
	if err != nil || later != got[0] || named {
		t.Fatalf("a later claim got %q, %v; want %q", later, err, got[0])
	}
	if id, ok, err := ClusterID(ctx, client); !ok || err != nil || id != got[0] {
		t.Fatalf("ClusterID: %q %v %v, want %q", id, ok, err, got[0])
	}
}
