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
	var wg sync.WaitGroup
	for i, p := range proposals {
		wg.Go(func() {
			id, err := ClaimClusterID(ctx, client, p)
			if err != nil {
				t.Error(err)
			}
			got[i] = id
		})
	}
	wg.Wait()
	for _, id := range got {
		if id != got[0] {
			t.Fatalf("claims answered different IDs: %q", got)
		}
	}
	later, err := ClaimClusterID(ctx, client, "DDDDDDDDDDDDDDDDDDDDDD")
	if err != nil || later != got[0] {
		t.Fatalf("a later claim got %q, %v; want %q", later, err, got[0])
	}
	if id, ok, err := ClusterID(ctx, client); !ok || err != nil || id != got[0] {
		t.Fatalf("ClusterID: %q %v %v, want %q", id, ok, err, got[0])
	}
}
