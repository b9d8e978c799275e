package cluster

import (
	"errors"
	"reflect"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestMirrorKeys: a mirror's spec is created once, its changes append by
// compare-and-swap in order, the cache decodes it and skips the keys below
// it, and a delete takes it and them.
func TestMirrorKeys(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	cache := StartCache(ctx, client, clusterID)
	defer cache.Close()
	config := map[string]string{"bootstrap.servers": "127.0.0.1:9092"}
	created, err := CreateMirror(ctx, client, clusterID, "m", config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CreateMirror(ctx, client, clusterID, "m", config); !errors.Is(err, ErrMirrorExists) {
		t.Fatalf("second create: %v, want ErrMirrorExists", err)
	}
	if _, err := AppendMirrorChange(ctx, client, clusterID, "none", MirrorChange{Change: 1}); !errors.Is(err, ErrUnknownMirror) {
		t.Fatalf("change of an unknown mirror: %v, want ErrUnknownMirror", err)
	}
	// A key below the mirror's (stage B's partition states) is not the cache's.
	if _, err := client.Put(ctx, mirrorKey(clusterID, "m")+"/state/x/0", "not a spec"); err != nil {
		t.Fatal(err)
	}
	changes := []MirrorChange{{Change: 1, Names: []string{"a"}}, {Change: 1, Include: []string{"b.*"}, Exclude: []string{"bx"}}, {Change: 3, Names: []string{"a"}}}
	var last MirrorState
	for _, c := range changes {
		if last, err = AppendMirrorChange(ctx, client, clusterID, "m", c); err != nil {
			t.Fatal(err)
		}
	}
	if last.ModRevision <= created.ModRevision || !reflect.DeepEqual(last.Changes, changes) {
		t.Fatalf("written %+v, want the changes %+v after revision %d", last, changes, created.ModRevision)
	}
	if err := cache.WaitRevision(ctx, last.ModRevision); err != nil {
		t.Fatal(err)
	}
	got, ok := cache.Mirrors()["m"]
	if !ok || !reflect.DeepEqual(got, last) || got.CreateRevision != created.CreateRevision {
		t.Fatalf("cache has %+v (%v), want %+v", got, ok, last)
	}
	revision, err := DeleteMirror(ctx, client, clusterID, "m")
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.WaitRevision(ctx, revision); err != nil {
		t.Fatal(err)
	}
	if len(cache.Mirrors()) != 0 || cache.Err() != nil {
		t.Fatalf("after delete: mirrors %v, cache error %v", cache.Mirrors(), cache.Err())
	}
	if resp, err := client.Get(ctx, mirrorKey(clusterID, "m")+"/", clientv3.WithPrefix()); err != nil || resp.Count != 0 {
		t.Fatalf("keys below the mirror left: %v %v", resp, err)
	}
	if _, err := DeleteMirror(ctx, client, clusterID, "m"); !errors.Is(err, ErrUnknownMirror) {
		t.Fatalf("second delete: %v, want ErrUnknownMirror", err)
	}
}
