package broker

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// replicaNode is a node (ID 1, lag time 10 s) with topic "t" of one
// partition made with configs; the partition runs on a fake clock.
func replicaNode(t *testing.T, configs map[string]string) (*Node, *Partition, *testClock) {
	t.Helper()
	node, err := Open(Config{FS: vfs.OS, DataDir: filepath.Join(t.TempDir(), "data"), Log: logstore.DefaultConfig(), ReplicaLagTimeMax: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	if _, err := node.CreateTopic(context.Background(), "t", 1, configs, false); err != nil {
		t.Fatal(err)
	}
	p, err := node.LocalPartition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{now: time.Unix(1_700_000_000, 0)}
	p.now = clock.Now
	return node, p, clock
}

// produceAcks produces n records with acks, bounded by timeout.
func produceAcks(p *Partition, acks int16, n int, timeout time.Duration) (netio.ProduceResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.Produce(ctx, dataBatch(-1, -1, -1, n, false), netio.ProduceRequest{Version: 9, Acks: acks})
}

// fetchAs is follower id's fetch at offset (its log end).
func fetchAs(t *testing.T, p *Partition, id int32, offset rb.Offset) netio.ReadResult {
	t.Helper()
	read, err := p.ReadReplica(id, offset, 1<<20, true)
	if err != nil {
		t.Fatalf("fetch of follower %d at %d: %v", id, offset, err)
	}
	if read.Records.Release != nil {
		read.Records.Release()
	}
	return read
}

func TestReplicaNoRoleUnchanged(t *testing.T) {
	_, p, _ := replicaNode(t, nil)
	if _, ok := p.Role(); ok {
		t.Fatal("a new partition has a role")
	}
	if leader, replicas, isr := p.Replication(); leader != 1 || !slices.Equal(replicas, []int32{1}) || !slices.Equal(isr, []int32{1}) {
		t.Fatalf("replication %d %v %v, want node 1 alone", leader, replicas, isr)
	}
	if _, err := produceAcks(p, -1, 3, 0); err != nil { // acks=-1 does not wait: the deadline is past already
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d, want the log end 3", hw)
	}
	read := fetchAs(t, p, 7, 0) // any replica reads as a consumer
	if read.Offsets.HighWatermark != 3 || read.Records.Length == 0 {
		t.Fatalf("replica read %+v", read)
	}
}

// TestReplicaHighWatermark walks Kafka's rule: the high watermark is the
// least log end of the leader and the ISR's followers, never back.
func TestReplicaHighWatermark(t *testing.T) {
	_, p, _ := replicaNode(t, nil)
	p.SetRole(Role{Leader: 1, LeaderEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, PartitionEpoch: 10})
	if e := p.LeaderEpoch(); e != 3 {
		t.Fatalf("leader epoch %d, want the role's 3", e)
	}
	if _, err := produceAcks(p, 1, 4, time.Second); err != nil {
		t.Fatal(err)
	}
	if e := p.LatestEpoch(); e != 3 {
		t.Fatalf("the batch carries epoch %d, want 3", e)
	}
	for _, step := range []struct {
		follower int32
		offset   rb.Offset
		hw       rb.Offset
	}{
		{2, 4, 0}, // follower 3 unknown: nothing moves
		{3, 2, 2},
		{3, 4, 4},
		{2, 1, 4}, // never back
	} {
		read := fetchAs(t, p, step.follower, step.offset)
		if hw := p.HighWatermark(); hw != step.hw || read.Offsets.HighWatermark != step.hw {
			t.Fatalf("after follower %d fetched at %d: high watermark %d (answered %d), want %d", step.follower, step.offset, hw, read.Offsets.HighWatermark, step.hw)
		}
	}
	if _, err := p.ReadReplica(4, 0, 100, true); !errors.Is(err, kerr.UnknownLeaderEpoch) {
		t.Fatalf("fetch of a node not a replica: %v, want UNKNOWN_LEADER_EPOCH", err)
	}
	p.RaiseLeaderEpoch(9) // a mirror's, ahead of its source's
	if e, replica := p.LeaderEpoch(), p.ReplicaLeaderEpoch(); e != 9 || replica != 3 {
		t.Fatalf("leader epoch %d, followers fenced at %d; want 9 and the role's 3", e, replica)
	}
}

// TestReplicaMaximalISR: a follower outside the ISR that is not caught
// up does not hold the high watermark; once its expansion is proposed it
// does, before it is written; a proposed shrink holds it until written.
func TestReplicaMaximalISR(t *testing.T) {
	_, p, clock := replicaNode(t, nil)
	p.SetRole(Role{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, PartitionEpoch: 5})
	if _, err := produceAcks(p, 1, 5, time.Second); err != nil {
		t.Fatal(err)
	}
	fetchAs(t, p, 2, 5)
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("high watermark %d, want 5: follower 3 is outside the ISR", hw)
	}
	if _, ok := p.proposeISR(clock.Now()); ok {
		t.Fatal("a proposal while follower 3 has not reached the high watermark")
	}
	fetchAs(t, p, 3, 5) // at the high watermark, past the epoch's start (0)
	proposal, ok := p.proposeISR(clock.Now())
	if !ok || !slices.Equal(proposal.isr, []int32{1, 2, 3}) {
		t.Fatalf("proposal %v %v, want ISR 1,2,3", proposal.isr, ok)
	}
	p.SetRole(Role{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, PartitionEpoch: 5}) // the same role again
	if _, ok := p.proposeISR(clock.Now()); ok {
		t.Fatal("a second proposal while one is in flight")
	}
	clock.advance(11 * time.Second) // follower 3 is no longer caught up by time: only the maximal ISR holds it
	if _, err := produceAcks(p, 1, 2, time.Second); err != nil {
		t.Fatal(err)
	}
	fetchAs(t, p, 2, 7)
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("high watermark %d, want 5: the proposed expansion counts follower 3", hw)
	}
	p.isrWritten(proposal, Role{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, PartitionEpoch: 6}, nil)
	if r, _ := p.Role(); !slices.Equal(r.ISR, []int32{1, 2, 3}) || r.PartitionEpoch != 6 {
		t.Fatalf("role %+v after the write", r)
	}

	// Follower 3 falls behind for longer than replica.lag.time.max.ms.
	clock.advance(11 * time.Second)
	fetchAs(t, p, 2, 7)
	proposal, ok = p.proposeISR(clock.Now())
	if !ok || !slices.Equal(proposal.isr, []int32{1, 2}) {
		t.Fatalf("proposal %v %v, want the shrink to 1,2", proposal.isr, ok)
	}
	if _, err := produceAcks(p, 1, 1, time.Second); err != nil {
		t.Fatal(err)
	}
	fetchAs(t, p, 2, 8)
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("high watermark %d, want 5: a proposed shrink does not count", hw)
	}
	p.isrWritten(proposal, Role{}, errors.New("etcd: compare failed"))
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("high watermark %d after a refused shrink, want 5", hw)
	}
	proposal, ok = p.proposeISR(clock.Now())
	if !ok {
		t.Fatal("no proposal after a refused one")
	}
	p.isrWritten(proposal, Role{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: proposal.isr, PartitionEpoch: 7}, nil)
	if hw := p.HighWatermark(); hw != 8 {
		t.Fatalf("high watermark %d after the shrink, want 8", hw)
	}
}

// TestReplicaISRWriter runs the node's ISR goroutine: a follower that
// stops fetching leaves the ISR through the writer, and joins again.
func TestReplicaISRWriter(t *testing.T) {
	node, p, clock := replicaNode(t, nil)
	p.SetRole(Role{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, PartitionEpoch: 1})
	var mu sync.Mutex
	var written [][]int32
	node.SetISRWriter(func(_ context.Context, tp logstore.TopicPartition, r Role, isr []int32) (Role, error) {
		mu.Lock()
		defer mu.Unlock()
		if tp != p.tp {
			t.Errorf("ISR written for %s", tp)
		}
		written = append(written, isr)
		r.ISR, r.PartitionEpoch = isr, r.PartitionEpoch+1
		return r, nil
	})
	if _, err := produceAcks(p, 1, 1, time.Second); err != nil {
		t.Fatal(err)
	}
	clock.advance(11 * time.Second)
	node.maintainISR(context.Background())
	if r, _ := p.Role(); !slices.Equal(r.ISR, []int32{1}) || r.PartitionEpoch != 2 {
		t.Fatalf("role %+v, want ISR 1 at partition epoch 2", r)
	}
	fetchAs(t, p, 2, 1)
	node.maintainISR(context.Background())
	if r, _ := p.Role(); !slices.Equal(r.ISR, []int32{1, 2}) || r.PartitionEpoch != 3 {
		t.Fatalf("role %+v, want ISR 1,2 at partition epoch 3", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(written) != 2 {
		t.Fatalf("writes %v, want the shrink and the expansion", written)
	}
}

// TestReplicaAcksAll: min.insync.replicas before the append, the wait for
// the ISR after it, its deadline, and NOT_ENOUGH_REPLICAS_AFTER_APPEND.
func TestReplicaAcksAll(t *testing.T) {
	_, p, _ := replicaNode(t, map[string]string{"min.insync.replicas": "2"})
	p.SetRole(Role{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, PartitionEpoch: 1})
	_, err := produceAcks(p, -1, 1, time.Second)
	wantCode(t, "acks=-1 with ISR 1", err, kerr.NotEnoughReplicas)
	if end := p.LogEndOffset(); end != 0 {
		t.Fatalf("log end %d: NOT_ENOUGH_REPLICAS appended", end)
	}
	if _, err := produceAcks(p, 1, 1, time.Second); err != nil {
		t.Fatalf("acks=1 with ISR 1: %v", err)
	}
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d under min.insync.replicas, want 0", hw)
	}

	p.SetRole(Role{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, PartitionEpoch: 2})
	_, err = produceAcks(p, -1, 1, 50*time.Millisecond)
	wantCode(t, "acks=-1 without the follower fetching", err, kerr.RequestTimedOut)

	done := make(chan error, 1)
	go func() {
		_, err := produceAcks(p, -1, 1, 20*time.Second)
		done <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for p.LogEndOffset() != 3 {
		if time.Now().After(deadline) {
			t.Fatal("the acks=-1 produce did not append")
		}
		select {
		case err := <-done:
			t.Fatalf("acks=-1 answered %v before the follower fetched", err)
		case <-time.After(time.Millisecond):
		}
	}
	fetchAs(t, p, 2, 3)
	if err := <-done; err != nil {
		t.Fatalf("acks=-1 once the follower has it: %v", err)
	}

	if _, err := produceAcks(p, 1, 1, time.Second); err != nil {
		t.Fatal(err)
	}
	fetchAs(t, p, 2, 4)
	p.SetRole(Role{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, PartitionEpoch: 3})
	wantCode(t, "the ISR shrank below min.insync.replicas", p.awaitReplicas(context.Background(), 4), kerr.NotEnoughReplicasAfterAppend)
}

// TestReplicaFollower: a follower refuses clients, takes the role's
// epoch, appends the leader's bytes as sent and truncates.
func TestReplicaFollower(t *testing.T) {
	_, p, _ := replicaNode(t, nil)
	p.SetRole(Role{Leader: 2, LeaderEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, PartitionEpoch: 1})
	if e := p.LeaderEpoch(); e != 4 {
		t.Fatalf("leader epoch %d, want 4", e)
	}
	if leader, _, _ := p.Replication(); leader != 2 {
		t.Fatalf("leader %d, want 2", leader)
	}
	_, err := produceAcks(p, 1, 1, time.Second)
	wantCode(t, "produce", err, kerr.NotLeaderForPartition)
	_, err = p.Read(0, 100, netio.ReadUncommitted, true)
	wantCode(t, "read", err, kerr.NotLeaderForPartition)
	_, _, _, err = p.ListOffset(-1, netio.ReadUncommitted)
	wantCode(t, "list offsets", err, kerr.NotLeaderForPartition)
	_, err = p.DeleteRecords(context.Background(), 0)
	wantCode(t, "delete records", err, kerr.NotLeaderForPartition)
	_, err = p.ReadReplica(1, 0, 100, true)
	wantCode(t, "a replica's fetch", err, kerr.NotLeaderForPartition)

	first := rb.Append(nil, rb.Spec{BaseOffset: 0, LeaderEpoch: 3, BaseTimestamp: 1, ProducerID: -1, BaseSequence: -1, Records: []rb.Record{{Value: []byte("a")}, {Value: []byte("b")}}})
	second := rb.Append(nil, rb.Spec{BaseOffset: 2, LeaderEpoch: 4, BaseTimestamp: 2, ProducerID: -1, BaseSequence: -1, Records: []rb.Record{{Value: []byte("c")}}})
	if _, err := p.AppendReplica(append(slices.Clone(first), second...), 1); err != nil {
		t.Fatal(err)
	}
	if end, hw := p.LogEndOffset(), p.HighWatermark(); end != 3 || hw != 1 {
		t.Fatalf("log end %d, high watermark %d; want 3 and the leader's 1", end, hw)
	}
	if _, err := p.AppendReplica(nil, 9); err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d, want the log end 3", hw)
	}
	data, err := p.ReadBatches(nil, 0, 1<<20, 3)
	if err != nil || string(data) != string(first)+string(second) {
		t.Fatalf("log bytes differ from the leader's (%v)", err)
	}
	if err := p.TruncateReplica(2); err != nil {
		t.Fatal(err)
	}
	if end, hw, latest := p.LogEndOffset(), p.HighWatermark(), p.LatestEpoch(); end != 2 || hw != 2 || latest != 3 {
		t.Fatalf("after truncation: log end %d, high watermark %d, latest epoch %d; want 2, 2, 3", end, hw, latest)
	}

	p.SetRole(Role{Leader: 1, LeaderEpoch: 5, Replicas: []int32{1, 2}, ISR: []int32{1}, PartitionEpoch: 2})
	if _, err := p.AppendReplica(second, 3); !errors.Is(err, ErrLeader) {
		t.Fatalf("replica append on the leader: %v, want ErrLeader", err)
	}
	if err := p.TruncateReplica(0); !errors.Is(err, ErrLeader) {
		t.Fatalf("replica truncation on the leader: %v, want ErrLeader", err)
	}
}

// TestReplicationAllocatesNothing: a Fetch asks every partition it reads
// for its leader.
func TestReplicationAllocatesNothing(t *testing.T) {
	_, p, _ := replicaNode(t, nil)
	if allocs := testing.AllocsPerRun(100, func() { p.Replication() }); allocs != 0 {
		t.Fatalf("Replication without a role: %v allocations", allocs)
	}
	p.SetRole(Role{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	if allocs := testing.AllocsPerRun(100, func() { p.Replication() }); allocs != 0 {
		t.Fatalf("Replication with a role: %v allocations", allocs)
	}
}
