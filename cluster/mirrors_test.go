package cluster

import (
	"errors"
	"reflect"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestMirrorKeys: a mirror's spec is created once, its changes append by
// compare-and-swap in order, the cache decodes it and tells it from the
// records below it, and a delete takes the spec, not the records.
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
	// A partition's record below the mirror's key is not its spec.
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
	// The partitions' records stay (failback's last mirror epochs).
	if resp, err := client.Get(ctx, mirrorKey(clusterID, "m")+"/", clientv3.WithPrefix()); err != nil || resp.Count != 1 {
		t.Fatalf("keys below the mirror after its delete: %v %v, want its one record", resp, err)
	}
	if _, err := DeleteMirror(ctx, client, clusterID, "m"); !errors.Is(err, ErrUnknownMirror) {
		t.Fatalf("second delete: %v, want ErrUnknownMirror", err)
	}
}

// TestMirrorPartitionStates: a partition's record is written by
// compare-and-swap on the revision its writer read, fenced by the mirror's
// incarnation too; the cache holds the records, and they outlive the
// mirror's delete (failback's last mirror epochs).
func TestMirrorPartitionStates(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	cache := StartCache(ctx, client, clusterID)
	defer cache.Close()
	created, err := CreateMirror(ctx, client, clusterID, "m", map[string]string{"bootstrap.servers": "127.0.0.1:9092"})
	if err != nil {
		t.Fatal(err)
	}
	p0 := MirrorPartition{Mirror: "m", TopicID: "AAAAAAAAAAAAAAAAAAAAAA", Partition: 0}
	p1 := MirrorPartition{Mirror: "m", TopicID: "AAAAAAAAAAAAAAAAAAAAAA", Partition: 1}
	first, err := PutMirrorStates(ctx, client, clusterID, "m", created.CreateRevision,
		[]MirrorStateWrite{{Partition: p0, Value: []byte("a")}, {Partition: p1, Value: []byte("b")}})
	if err != nil {
		t.Fatal(err)
	}
	// A writer that read no record, after one was written, loses.
	if _, err := PutMirrorStates(ctx, client, clusterID, "m", created.CreateRevision,
		[]MirrorStateWrite{{Partition: p0, Value: []byte("stale")}}); !errors.Is(err, ErrMirrorStateConflict) {
		t.Fatalf("a write of a record read at revision 0: %v, want ErrMirrorStateConflict", err)
	}
	second, err := PutMirrorStates(ctx, client, clusterID, "m", created.CreateRevision,
		[]MirrorStateWrite{{Partition: p0, Value: []byte("c"), ModRevision: first}})
	if err != nil {
		t.Fatal(err)
	}
	// Both compares must hold: p1 read right, p0 read stale writes neither.
	if _, err := PutMirrorStates(ctx, client, clusterID, "m", created.CreateRevision,
		[]MirrorStateWrite{{Partition: p1, Value: []byte("x"), ModRevision: first}, {Partition: p0, Value: []byte("x"), ModRevision: first}}); !errors.Is(err, ErrMirrorStateConflict) {
		t.Fatalf("a write with one stale record: %v, want ErrMirrorStateConflict", err)
	}
	if _, err := PutMirrorStates(ctx, client, clusterID, "m", created.CreateRevision+1,
		[]MirrorStateWrite{{Partition: p0, Value: []byte("x"), ModRevision: second}}); !errors.Is(err, ErrMirrorStateConflict) {
		t.Fatalf("a write for another incarnation of the mirror: %v, want ErrMirrorStateConflict", err)
	}
	if err := cache.WaitRevision(ctx, second); err != nil {
		t.Fatal(err)
	}
	want := map[MirrorPartition]MirrorPartitionRecord{p0: {Value: []byte("c"), ModRevision: second}, p1: {Value: []byte("b"), ModRevision: first}}
	if got := cache.MirrorPartitionStates(); !reflect.DeepEqual(got, want) {
		t.Fatalf("cache has %v, want %v", got, want)
	}
	if _, ok := cache.Mirrors()["m"]; !ok {
		t.Fatal("the cache lost the mirror's spec among its records")
	}
	revision, err := DeleteMirror(ctx, client, clusterID, "m")
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.WaitRevision(ctx, revision); err != nil {
		t.Fatal(err)
	}
	if got := cache.MirrorPartitionStates(); !reflect.DeepEqual(got, want) || len(cache.Mirrors()) != 0 {
		t.Fatalf("after the mirror's delete the cache has records %v and mirrors %v, want %v and none", got, cache.Mirrors(), want)
	}
}
