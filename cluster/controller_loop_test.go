package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// planState builds a state for planControl: live nodes, specs (each at
// ModRevision 10+i) and partitions (each at ModRevision 100).
func planState(live []Node, specs map[string]TopicSpec, partitions Assignments) clusterState {
	s := newClusterState()
	for _, n := range live {
		s.nodes[n.ID] = Node{ID: n.ID, Host: n.Host, Port: n.Port}
		if n.Drained {
			s.drained[n.ID] = true
		}
	}
	for i, name := range slices.Sorted(maps.Keys(specs)) {
		s.topics[name] = TopicState{TopicSpec: specs[name], ModRevision: int64(10 + i)}
	}
	for tp, a := range partitions {
		s.partitions[tp] = PartitionState{Assignment: a, ModRevision: 100}
	}
	return s
}

func TestPlanControl(t *testing.T) {
	led := func(id string, leader int32, replicas ...int32) Assignment {
		return Assignment{TopicID: id, Replicas: replicas, Leader: leader, ISR: slices.Clone(replicas)}
	}
	tp := func(topic string, n int32) TopicPartition { return TopicPartition{topic, n} }
	tests := []struct {
		name       string
		live       []Node
		specs      map[string]TopicSpec
		partitions Assignments
		defaultRF  int
		// want, per partition: "place/<rf>", "elect/<leader>", "delete"
		want     map[TopicPartition]string
		unplaced int
	}{
		{"new spec placed with the default factor", nodes(1, 2, 3),
			map[string]TopicSpec{"a": {TopicID: "A", Partitions: 3}}, nil, 2,
			map[TopicPartition]string{tp("a", 0): "place/2", tp("a", 1): "place/2", tp("a", 2): "place/2"}, 0},
		{"spec's factor over the default, capped by the live nodes", nodes(1, 2),
			map[string]TopicSpec{"a": {TopicID: "A", Partitions: 1, ReplicationFactor: 3}}, nil, 1,
			map[TopicPartition]string{tp("a", 0): "place/2"}, 0},
		{"grown spec: only the new partitions", nodes(1, 2),
			map[string]TopicSpec{"a": {TopicID: "A", Partitions: 2}},
			Assignments{tp("a", 0): led("A", 1, 1, 2)}, 2,
			map[TopicPartition]string{tp("a", 1): "place/2"}, 0},
		{"steady: nothing", nodes(1, 2),
			map[string]TopicSpec{"a": {TopicID: "A", Partitions: 1}},
			Assignments{tp("a", 0): led("A", 1, 1, 2)}, 2, map[TopicPartition]string{}, 0},
		{"spec gone: its partitions deleted", nodes(1, 2), nil,
			Assignments{tp("a", 0): led("A", 1, 1, 2), tp("a", 1): led("A", 2, 2, 1)}, 2,
			map[TopicPartition]string{tp("a", 0): "delete", tp("a", 1): "delete"}, 0},
		{"spec of another topic ID: old partition deleted, placed after", nodes(1, 2),
			map[string]TopicSpec{"a": {TopicID: "B", Partitions: 2}},
			Assignments{tp("a", 0): led("A", 1, 1, 2)}, 2,
			map[TopicPartition]string{tp("a", 0): "delete", tp("a", 1): "place/2"}, 0},
		{"leader lost: elected, lost node out of the ISR", nodes(2, 3),
			map[string]TopicSpec{"a": {TopicID: "A", Partitions: 1}},
			Assignments{tp("a", 0): led("A", 1, 1, 2, 3)}, 3,
			map[TopicPartition]string{tp("a", 0): "elect/2"}, 0},
		{"leader drained: moved", drain(nodes(1, 2, 3), 1),
			map[string]TopicSpec{"a": {TopicID: "A", Partitions: 1}},
			Assignments{tp("a", 0): led("A", 1, 1, 3, 2)}, 3,
			map[TopicPartition]string{tp("a", 0): "elect/3"}, 0},
		{"every node drained: nothing placed, elections still made", drain(nodes(2, 3), 2, 3),
			map[string]TopicSpec{"a": {TopicID: "A", Partitions: 1}, "b": {TopicID: "B", Partitions: 2}},
			Assignments{tp("a", 0): led("A", 1, 1, 2)}, 3,
			map[TopicPartition]string{tp("a", 0): "elect/2"}, 2},
		{"no live node: nothing placed", nil,
			map[string]TopicSpec{"b": {TopicID: "B", Partitions: 2}}, nil, 3,
			map[TopicPartition]string{}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state := planState(tc.live, tc.specs, tc.partitions)
			plan, err := planControl(state, tc.defaultRF)
			if err != nil {
				t.Fatal(err)
			}
			got := map[TopicPartition]string{}
			for _, op := range plan.ops {
				spec := state.topics[op.Partition.Topic]
				switch {
				case op.delete:
					got[op.Partition] = "delete"
					if !op.guardSpec || op.specRevision != spec.ModRevision || op.ModRevision != 100 {
						t.Errorf("%s: delete %+v not guarded by spec revision %d and partition revision 100", op.Partition, op, spec.ModRevision)
					}
				case op.ModRevision == 0:
					got[op.Partition] = "place/" + strconv.Itoa(len(op.Assignment.Replicas))
					if !op.guardSpec || op.specRevision != spec.ModRevision || op.Assignment.TopicID != spec.TopicID {
						t.Errorf("%s: placement %+v not guarded by spec %+v", op.Partition, op, spec)
					}
					for _, r := range op.Assignment.Replicas {
						if !slices.ContainsFunc(tc.live, func(n Node) bool { return n.ID == r && !n.Drained }) {
							t.Errorf("%s: placed on %d, not a live undrained node", op.Partition, r)
						}
					}
				default:
					got[op.Partition] = "elect/" + strconv.Itoa(int(op.Assignment.Leader))
					if op.ModRevision != 100 || op.Assignment.LeaderEpoch != 1 {
						t.Errorf("%s: election %+v, want from revision 100 with epoch 1", op.Partition, op)
					}
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("ops %v, want %v", got, tc.want)
			}
			for p, w := range tc.want {
				if got[p] != w {
					t.Errorf("%s: %q, want %q (all: %v)", p, got[p], w, got)
				}
			}
			if plan.unplaced != tc.unplaced {
				t.Errorf("%d unplaced, want %d", plan.unplaced, tc.unplaced)
			}
		})
	}
}

// runController runs RunController for nodeID, with a client of its own,
// until the test ends (or the returned stop is called), and requires it
// to return nil within a deadline.
func runController(t *testing.T, clusterID string, nodeID int32, cfg ControllerConfig) (stop func()) {
	t.Helper()
	client := testClient(t)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunController(ctx, client, clusterID, nodeID, cfg) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("RunController of node %d: %v", nodeID, err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("RunController of node %d did not return after its context ended", nodeID)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// topicPartitions returns the cache's partitions of topic.
func topicPartitions(cache *Cache, topic string) map[TopicPartition]PartitionState {
	all, _ := cache.Partitions()
	maps.DeleteFunc(all, func(tp TopicPartition, _ PartitionState) bool { return tp.Topic != topic })
	return all
}

// waitPlaced waits until topic has partitions partitions in the cache, of
// its spec's topic ID, each with rf replicas none of which is in avoid.
func waitPlaced(t *testing.T, cache *Cache, topic string, partitions int32, rf int, avoid ...int32) map[TopicPartition]PartitionState {
	t.Helper()
	var got map[TopicPartition]PartitionState
	waitFor(t, 15*time.Second, fmt.Sprintf("%s placed: %d partitions of %d replicas", topic, partitions, rf), func() (bool, error) {
		spec, ok := cache.Topic(topic)
		got = topicPartitions(cache, topic)
		if !ok || len(got) != int(partitions) {
			return false, nil
		}
		for tp, p := range got {
			if tp.Partition >= partitions || p.TopicID != spec.TopicID || len(p.Replicas) != rf {
				return false, fmt.Errorf("%s: %+v", tp, p)
			}
			for _, id := range avoid {
				if slices.Contains(p.Replicas, id) {
					return false, fmt.Errorf("%s placed on node %d: %+v", tp, id, p)
				}
			}
		}
		return true, nil
	})
	return got
}

func TestRunControllerTopics(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	cache := StartCache(ctx, client, clusterID)
	defer cache.Close()
	joinNodes(t, clusterID, 1, 2, 3)
	if err := RunController(ctx, client, clusterID, 1, ControllerConfig{ReplicationFactor: 0, TTL: 5 * time.Second}); err == nil {
		t.Fatal("replication factor 0 accepted")
	}
	runController(t, clusterID, 1, ControllerConfig{ReplicationFactor: 2, TTL: 5 * time.Second})
	waitFor(t, 15*time.Second, "node 1 controller", func() (bool, error) { return cache.ControllerID() == 1, nil })

	created, err := CreateTopic(ctx, client, clusterID, "a", TopicSpec{TopicID: "id-a", Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.WaitTopicPlaced(ctx, "a", created.ModRevision); err != nil {
		t.Fatal(err)
	}
	if got := topicPartitions(cache, "a"); len(got) != 4 {
		t.Fatalf("WaitTopicPlaced returned with %d partitions of a, want 4", len(got))
	}
	if _, err := CreateTopic(ctx, client, clusterID, "b", TopicSpec{TopicID: "id-b", Partitions: 2, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	before := waitPlaced(t, cache, "a", 4, 2)
	waitPlaced(t, cache, "b", 2, 3)
	for tp, p := range before {
		if p.LeaderEpoch != 0 || p.Leader != p.Replicas[0] || !slices.Equal(p.ISR, p.Replicas) {
			t.Errorf("%s placed as %+v, want led by its first replica at epoch 0, all in sync", tp, p)
		}
	}

	// Growth places the new partitions and leaves the old ones alone.
	if _, err := GrowTopic(ctx, client, clusterID, "a", 6); err != nil {
		t.Fatal(err)
	}
	after := waitPlaced(t, cache, "a", 6, 2)
	for tp, p := range before {
		if after[tp].ModRevision != p.ModRevision {
			t.Errorf("%s rewritten by the growth: %+v, was %+v", tp, after[tp], p)
		}
	}

	// A deleted topic's partitions stay deleted, a re-created one is placed
	// anew, and a partition without a spec is removed.
	deleted, err := DeleteTopic(ctx, client, clusterID, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.WaitTopicPlaced(ctx, "b", deleted); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("waiting for a deleted topic: %v, want ErrUnknownTopic", err)
	}
	ghost := partitionKey(clusterID, TopicPartition{"ghost", 0})
	if _, err := client.Put(ctx, ghost, encodeJSON(Assignment{TopicID: "id-ghost", Replicas: []int32{1}, Leader: 1, ISR: []int32{1}})); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateTopic(ctx, client, clusterID, "c", TopicSpec{TopicID: "id-c", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	waitPlaced(t, cache, "c", 1, 2)
	waitFor(t, 15*time.Second, "the spec-less partition removed", func() (bool, error) {
		return len(topicPartitions(cache, "ghost")) == 0, nil
	})
	if got := topicPartitions(cache, "b"); len(got) != 0 {
		t.Fatalf("deleted topic b has partitions %v", got)
	}
	if _, err := CreateTopic(ctx, client, clusterID, "b", TopicSpec{TopicID: "id-b2", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	waitPlaced(t, cache, "b", 1, 2)
}

// TestRunControllerNodeLoss: a node stops renewing its lease (a crash); when
// etcd expires it, the controller moves its leaderships to the next in-sync
// replica with the leader epoch + 1 and takes it out of every ISR.
func TestRunControllerNodeLoss(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	cache := StartCache(ctx, client, clusterID)
	defer cache.Close()
	joinNodes(t, clusterID, 1, 2)
	const ttl = 2 * time.Second // etcd's minimum for the test cluster's election timeout
	lost, err := Join(ctx, client, clusterID, Node{ID: 3, Host: "127.0.0.1", Port: 9003}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	runController(t, clusterID, 1, ControllerConfig{ReplicationFactor: 3, TTL: 5 * time.Second})
	if _, err := CreateTopic(ctx, client, clusterID, "events", TopicSpec{TopicID: "id-events", Partitions: 6}); err != nil {
		t.Fatal(err)
	}
	before := waitPlaced(t, cache, "events", 6, 3)
	led := 0
	for _, p := range before {
		if p.Leader == 3 {
			led++
		}
	}
	if led == 0 {
		t.Fatalf("node 3 leads nothing in %v", before)
	}

	crashed := time.Now()
	lost.cancel() // no more keep-alives, no revoke
	<-lost.lost
	waitFor(t, 15*time.Second, "node 3's lease expires", func() (bool, error) {
		return !slices.Contains(nodeIDs(cache.LiveNodes()), 3), nil
	})
	expired := time.Now()
	var after map[TopicPartition]PartitionState
	waitFor(t, 15*time.Second, "node 3 out of every leadership and ISR", func() (bool, error) {
		after = topicPartitions(cache, "events")
		for _, p := range after {
			if p.Leader == 3 || slices.Contains(p.ISR, 3) {
				return false, nil
			}
		}
		return true, nil
	})
	moved := time.Now()
	if moved.Sub(expired) > ttl {
		t.Errorf("leaders moved %v after node 3's expiry was seen, more than a TTL (%v)", moved.Sub(expired), ttl)
	}
	t.Logf("node loss: lease expired %v after the crash (TTL %v), leaders moved %v after the expiry", expired.Sub(crashed).Round(time.Millisecond), ttl, moved.Sub(expired).Round(time.Millisecond))
	for tp, b := range before {
		a := after[tp]
		wantLeader, wantEpoch := b.Leader, b.LeaderEpoch
		if b.Leader == 3 {
			wantLeader = slices.DeleteFunc(slices.Clone(b.Replicas), func(r int32) bool { return r == 3 })[0]
			wantEpoch++
		}
		if a.Leader != wantLeader || a.LeaderEpoch != wantEpoch || !slices.Equal(a.Replicas, b.Replicas) {
			t.Errorf("%s: %+v -> %+v, want leader %d at epoch %d", tp, b.Assignment, a.Assignment, wantLeader, wantEpoch)
		}
	}
}

// TestRunControllerDrain: a drained node's leaderships move to other
// in-sync replicas with the epoch + 1, it stays a replica in sync, new
// topics avoid it, and once the mark is cleared they use it again.
func TestRunControllerDrain(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	cache := StartCache(ctx, client, clusterID)
	defer cache.Close()
	joinNodes(t, clusterID, 1, 2, 3)
	runController(t, clusterID, 1, ControllerConfig{ReplicationFactor: 3, TTL: 5 * time.Second})
	if _, err := CreateTopic(ctx, client, clusterID, "d", TopicSpec{TopicID: "id-d", Partitions: 6}); err != nil {
		t.Fatal(err)
	}
	before := waitPlaced(t, cache, "d", 6, 3)
	if err := Drain(ctx, client, clusterID, 2, true); err != nil {
		t.Fatal(err)
	}
	var after map[TopicPartition]PartitionState
	waitFor(t, 15*time.Second, "node 2 leads nothing", func() (bool, error) {
		after = topicPartitions(cache, "d")
		return !slices.ContainsFunc(slices.Collect(maps.Values(after)), func(p PartitionState) bool { return p.Leader == 2 }), nil
	})
	for tp, b := range before {
		a := after[tp]
		wantLeader, wantEpoch := b.Leader, b.LeaderEpoch
		if b.Leader == 2 {
			wantLeader = slices.DeleteFunc(slices.Clone(b.Replicas), func(r int32) bool { return r == 2 })[0]
			wantEpoch++
		}
		if a.Leader != wantLeader || a.LeaderEpoch != wantEpoch || !slices.Equal(a.ISR, b.ISR) {
			t.Errorf("%s: %+v -> %+v, want leader %d at epoch %d, the ISR kept", tp, b.Assignment, a.Assignment, wantLeader, wantEpoch)
		}
	}
	if _, err := CreateTopic(ctx, client, clusterID, "e", TopicSpec{TopicID: "id-e", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	waitPlaced(t, cache, "e", 3, 2, 2)
	if err := Drain(ctx, client, clusterID, 2, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "node 2's mark cleared", func() (bool, error) { return len(cache.Drained()) == 0, nil })
	if _, err := CreateTopic(ctx, client, clusterID, "f", TopicSpec{TopicID: "id-f", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	waitPlaced(t, cache, "f", 3, 3)
}

// TestRunControllerFailover: the controller's session is lost in the middle
// of a placement larger than one transaction. It writes nothing more; the
// waiting candidate is elected and places the rest.
func TestRunControllerFailover(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	cache := StartCache(ctx, client, clusterID)
	defer cache.Close()
	joinNodes(t, clusterID, 1, 2, 3)
	var batches [3]atomic.Int64
	hook := func(nodeID int32) {
		if batches[nodeID].Add(1) != 1 || nodeID != 1 {
			return
		}
		// Node 1's first transaction is in: its session's lease goes, as
		// when it expires under a long pause.
		resp, err := client.Get(ctx, controllerPrefix(clusterID)+"/", clientv3.WithPrefix())
		if err != nil {
			t.Error(err)
			return
		}
		for _, kv := range resp.Kvs {
			if string(kv.Value) == "1" {
				if _, err := client.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
					t.Error(err)
				}
				return
			}
		}
		t.Error("no election key of node 1")
	}
	cfg := ControllerConfig{ReplicationFactor: 2, TTL: 5 * time.Second, afterBatch: hook}
	runController(t, clusterID, 1, cfg)
	waitFor(t, 15*time.Second, "node 1 controller", func() (bool, error) { return cache.ControllerID() == 1, nil })
	stopSecond := runController(t, clusterID, 2, cfg)
	waitFor(t, 15*time.Second, "node 2 a candidate", func() (bool, error) {
		cache.mu.Lock()
		defer cache.mu.Unlock()
		return len(cache.state.candidates) == 2, nil
	})

	const partitions = 3*writesPerTxn + 8 // four transactions
	if _, err := CreateTopic(ctx, client, clusterID, "wide", TopicSpec{TopicID: "id-wide", Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
	placed := waitPlaced(t, cache, "wide", partitions, 2)
	waitFor(t, 15*time.Second, "node 2 controller", func() (bool, error) { return cache.ControllerID() == 2, nil })
	// Node 1 wrote one transaction; node 2 the 136 partitions left, in
	// three. The hook counts after a commit returns, which the cache may
	// see first: wait for node 2's third count, then require exactly these.
	waitFor(t, 15*time.Second, "node 2's third transaction counted", func() (bool, error) { return batches[2].Load() >= 3, nil })
	if got := [2]int64{batches[1].Load(), batches[2].Load()}; got != [2]int64{1, 3} {
		t.Fatalf("transactions by node 1 and node 2: %v, want [1 3]", got)
	}
	leaders, _ := counts(assignmentsOf(placed))
	if s := spread(leaders, nodes(1, 2, 3)); s > 1 {
		t.Errorf("leaders spread by %d over the nodes (%v), want at most 1", s, leaders)
	}

	// Node 1 campaigned again after its loss: when node 2 stops, it leads
	// and places a growth.
	stopSecond()
	waitFor(t, 15*time.Second, "node 1 controller again", func() (bool, error) { return cache.ControllerID() == 1, nil })
	if _, err := GrowTopic(ctx, client, clusterID, "wide", partitions+1); err != nil {
		t.Fatal(err)
	}
	waitPlaced(t, cache, "wide", partitions+1, 2)
	if got := batches[1].Load(); got != 2 {
		t.Fatalf("node 1 wrote %d transactions in all, want 2", got)
	}
}

func assignmentsOf(ps map[TopicPartition]PartitionState) Assignments {
	out := make(Assignments, len(ps))
	for tp, p := range ps {
		out[tp] = p.Assignment
	}
	return out
}

// TestReconcileRetriesStale: the controller computes a leader election
// from a state older than the leader's last ISR change. Its write is stale,
// it reads again, and elects from the ISR as written: the replica that the
// change took out of the ISR is not elected.
func TestReconcileRetriesStale(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	registrations := joinNodes(t, clusterID, 1, 2, 3)
	c, err := Campaign(ctx, client, clusterID, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	discard := slog.New(slog.DiscardHandler)
	if _, err := CreateTopic(ctx, client, clusterID, "s", TopicSpec{TopicID: "id-s", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	state, err := readState(ctx, client, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	if revision, err := c.reconcile(ctx, state, 3, discard); err != nil || revision == 0 {
		t.Fatalf("placement: revision %d, %v", revision, err)
	}
	tp := TopicPartition{"s", 0}
	old, err := readState(ctx, client, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	p := old.partitions[tp]
	leader, next, last := p.Replicas[0], p.Replicas[1], p.Replicas[2]
	// The leader drops the next in line from the ISR, then is lost.
	if _, err := AlterISR(ctx, client, clusterID, tp, p.LeaderEpoch, p.ModRevision, []int32{leader, last}); err != nil {
		t.Fatal(err)
	}
	if err := registrations[leader].Close(ctx); err != nil {
		t.Fatal(err)
	}
	stale, err := readState(ctx, client, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	stale.partitions[tp] = p // as a lagging cache has it
	if plan, err := planControl(stale, 3); err != nil || len(plan.ops) != 1 || plan.ops[0].Assignment.Leader != next {
		t.Fatalf("the stale plan %+v, %v; want %d elected", plan, err, next)
	}
	if _, err := c.reconcile(ctx, stale, 3, discard); err != nil {
		t.Fatal(err)
	}
	now, err := readState(ctx, client, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	if got := now.partitions[tp]; got.Leader != last || got.LeaderEpoch != p.LeaderEpoch+1 || !slices.Equal(got.ISR, []int32{last}) {
		t.Fatalf("after the retry: %+v, want leader %d at epoch %d with ISR [%d]", got.Assignment, last, p.LeaderEpoch+1, last)
	}
}

// TestApplySpecGuard: a placement computed from a spec that has since been
// deleted (or changed) writes nothing.
func TestApplySpecGuard(t *testing.T) {
	client, clusterID, ctx := testClient(t), testCluster(t), testContext(t)
	joinNodes(t, clusterID, 1)
	c, err := Campaign(ctx, client, clusterID, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	spec, err := CreateTopic(ctx, client, clusterID, "g", TopicSpec{TopicID: "id-g", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	place := func(n int32, specRevision int64) partitionOp {
		return partitionOp{
			Write:     Write{Partition: TopicPartition{"g", n}, Assignment: Assignment{TopicID: "id-g", Replicas: []int32{1}, Leader: 1, ISR: []int32{1}}},
			guardSpec: true, specRevision: specRevision,
		}
	}
	if _, err := c.apply(ctx, []partitionOp{place(0, spec.ModRevision)}); err != nil {
		t.Fatalf("placement at the spec's revision: %v", err)
	}
	if _, err := DeleteTopic(ctx, client, clusterID, "g"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.apply(ctx, []partitionOp{place(1, spec.ModRevision)}); !errors.Is(err, ErrStaleMetadata) {
		t.Fatalf("placement of a deleted spec: %v, want ErrStaleMetadata", err)
	}
	state, err := readState(ctx, client, clusterID)
	if err != nil {
		t.Fatal(err)
	}
	if len(state.partitions) != 0 {
		t.Fatalf("partitions %v left after the delete and a refused placement", state.partitions)
	}
}
