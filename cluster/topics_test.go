package cluster

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestTopicSpecs(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	cache := StartCache(ctx, client, clusterID)
	defer cache.Close()
	spec := TopicSpec{TopicID: "id-orders", Partitions: 3, Configs: map[string]string{"cleanup.policy": "compact"}, Mirror: "eu"}

	invalid := []struct {
		name  string
		topic string
		spec  TopicSpec
		want  error
	}{
		{"empty name", "", spec, ErrInvalidTopic},
		{"slash in name", "a/b", spec, ErrInvalidTopic},
		{"no topic ID", "x", TopicSpec{Partitions: 1}, ErrInvalidTopic},
		{"no partitions", "x", TopicSpec{TopicID: "id-x"}, ErrInvalidPartitions},
	}
	for _, tc := range invalid {
		if _, err := CreateTopic(ctx, client, clusterID, tc.topic, tc.spec); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	created, err := CreateTopic(ctx, client, clusterID, "orders", spec)
	if err != nil {
		t.Fatal(err)
	}
	// No controller runs here: nothing places the partitions.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = cache.WaitTopicPlaced(short, "orders", created.ModRevision)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for placement without a controller: %v, want DeadlineExceeded", err)
	}
	if _, err := CreateTopic(ctx, client, clusterID, "orders", TopicSpec{TopicID: "other", Partitions: 1}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("second create: %v, want ErrTopicExists", err)
	}
	// A name that extends another is a topic of its own.
	if _, err := CreateTopic(ctx, client, clusterID, "orders2", TopicSpec{TopicID: "id-orders2", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if err := cache.WaitRevision(ctx, created.ModRevision+1); err != nil {
		t.Fatal(err)
	}
	if got := cache.Topics(); len(got) != 2 || !reflect.DeepEqual(got["orders"], spec) {
		t.Fatalf("cache topics %+v, want orders = %+v and orders2", got, spec)
	}
	got, ok := cache.Topic("orders")
	if !ok || got.ModRevision != created.ModRevision {
		t.Fatalf("cache topic %+v, want revision %d", got, created.ModRevision)
	}
	got.Configs["cleanup.policy"] = "delete" // a copy: the cache's stays
	if again, _ := cache.Topic("orders"); again.Configs["cleanup.policy"] != "compact" {
		t.Fatal("a caller's change of Topic's configs reached the cache")
	}

	// Growth: a total above the current count; two racing grows to
	// different totals both land, in some order, or the lower is refused.
	if _, err := GrowTopic(ctx, client, clusterID, "orders", 3); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("grow to the same count: %v, want ErrInvalidPartitions", err)
	}
	if _, err := GrowTopic(ctx, client, clusterID, "nope", 4); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("grow of an unknown topic: %v, want ErrUnknownTopic", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, n := range []int32{5, 6} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = GrowTopic(ctx, client, clusterID, "orders", n)
		}()
	}
	wg.Wait()
	if errs[1] != nil || (errs[0] != nil && !errors.Is(errs[0], ErrInvalidPartitions)) {
		t.Fatalf("racing grows to 5 and 6: %v", errs)
	}
	state, err := readState(ctx, client, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	grown := state.topics["orders"]
	if grown.Partitions != 6 || grown.TopicID != spec.TopicID || !maps.Equal(grown.Configs, spec.Configs) || grown.Mirror != "eu" {
		t.Fatalf("after the grows: %+v, want 6 partitions and the rest unchanged", grown)
	}

	// Delete takes the spec and its partitions, and nothing of orders2.
	for _, key := range []string{partitionKey(clusterID, TopicPartition{"orders", 0}), partitionKey(clusterID, TopicPartition{"orders2", 0})} {
		if _, err := client.Put(ctx, key, encodeJSON(Assignment{TopicID: "x", Replicas: []int32{1}, Leader: 1, ISR: []int32{1}})); err != nil {
			t.Fatal(err)
		}
	}
	revision, err := DeleteTopic(ctx, client, clusterID, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DeleteTopic(ctx, client, clusterID, "orders"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("second delete: %v, want ErrUnknownTopic", err)
	}
	if err := cache.WaitRevision(ctx, revision); err != nil {
		t.Fatal(err)
	}
	partitions, _ := cache.Partitions()
	if _, ok := cache.Topic("orders"); ok || len(partitions) != 1 || len(cache.Topics()) != 1 {
		t.Fatalf("after delete: topics %v, partitions %v; want orders2 and its partition alone", cache.Topics(), partitions)
	}
	// The name is free again, for a topic of a new ID.
	if _, err := CreateTopic(ctx, client, clusterID, "orders", TopicSpec{TopicID: "id-orders-2", Partitions: 1}); err != nil {
		t.Fatalf("re-create: %v", err)
	}
}

func TestDrainAndControllerID(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	cache := StartCache(ctx, client, clusterID)
	defer cache.Close()
	joinNodes(t, clusterID, 1, 2)
	waitFor(t, 15*time.Second, "no controller yet", func() (bool, error) {
		return len(cache.LiveNodes()) == 2 && cache.ControllerID() == NoLeader, nil
	})
	if err := Drain(ctx, client, clusterID, 2, true); err != nil {
		t.Fatal(err)
	}
	if err := Drain(ctx, client, clusterID, 5, true); err != nil { // a node not (yet) registered
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "drain marks of 2 and 5", func() (bool, error) {
		return slices.Equal(cache.Drained(), []int32{2, 5}), nil
	})
	if live := cache.LiveNodes(); live[0].Drained || !live[1].Drained {
		t.Fatalf("live nodes %+v, want 2 drained and 1 not", live)
	}
	if err := Drain(ctx, client, clusterID, 2, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "node 2's mark cleared", func() (bool, error) {
		return slices.Equal(cache.Drained(), []int32{5}) && !cache.LiveNodes()[1].Drained, nil
	})

	// The first candidate leads; the second waits; when the first closes
	// its session, the second leads.
	first, err := Campaign(ctx, client, clusterID, 2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		c   *Controller
		err error
	}
	second := make(chan result, 1)
	go func() {
		c, err := Campaign(ctx, client, clusterID, 1, 5*time.Second)
		second <- result{c, err}
	}()
	waitFor(t, 15*time.Second, "node 2 controller, node 1 a candidate", func() (bool, error) {
		cache.mu.Lock()
		candidates := len(cache.state.candidates)
		cache.mu.Unlock()
		return cache.ControllerID() == 2 && candidates == 2, nil
	})
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	r := <-second
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.c.Close()
	waitFor(t, 15*time.Second, "node 1 controller", func() (bool, error) {
		return cache.ControllerID() == 1, nil
	})
}
