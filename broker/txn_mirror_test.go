package broker

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/mirrord/mirrord/netio"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The copy of a source's transactional IDs: it holds them as the source
// has them, never moves one back, leaves this node's own IDs alone, keeps
// the IDs this node hands out above the source's, and lasts across a
// restart.
func TestSyncMirroredTransactions(t *testing.T) {
	fs, clock := vfs.NewMem(), newTestClock()
	n := openTestNode(t, fs, clock)
	local := initTxn(t, n, "local", time.Minute)
	source := []MirroredTransaction{
		{TransactionalID: "idle", ProducerID: 5000, Epoch: 3, TimeoutMillis: 60000},
		{TransactionalID: "aborted", ProducerID: 5001, Epoch: 7, TimeoutMillis: 60000, Aborted: true},
		{TransactionalID: "open", ProducerID: 5002, Epoch: 0, TimeoutMillis: 60000, Open: true},
		{TransactionalID: "local", ProducerID: 5003, Epoch: 9, TimeoutMillis: 60000},
		{TransactionalID: "never-initialised", ProducerID: -1, Epoch: -1, TimeoutMillis: 60000},
	}
	synced, err := n.SyncMirroredTransactions("m", source)
	if err != nil || synced != 3 {
		t.Fatalf("sync: %d, %v; want 3 (not the local or the uninitialised ID)", synced, err)
	}
	want := map[string]netio.TransactionState{
		"idle":    {TransactionalID: "idle", ProducerID: 5000, ProducerEpoch: 3, State: "CompleteCommit", TimeoutMillis: 60000, StartMillis: -1},
		"aborted": {TransactionalID: "aborted", ProducerID: 5001, ProducerEpoch: 7, State: "CompleteAbort", TimeoutMillis: 60000, StartMillis: -1},
		"open":    {TransactionalID: "open", ProducerID: 5002, ProducerEpoch: 0, State: "CompleteCommit", TimeoutMillis: 60000, StartMillis: -1},
		"local":   {TransactionalID: "local", ProducerID: local.producerID, ProducerEpoch: local.epoch, State: "Empty", TimeoutMillis: 60000, StartMillis: -1},
	}
	check := func(when string, n *Node) {
		t.Helper()
		states := n.txns.TransactionStates(context.Background(), nil)
		if len(states) != len(want) {
			t.Fatalf("%s: %d transactional IDs, want %d: %+v", when, len(states), len(want), states)
		}
		for _, s := range states {
			if !reflect.DeepEqual(s, want[s.TransactionalID]) {
				t.Fatalf("%s: %+v, want %+v", when, s, want[s.TransactionalID])
			}
		}
	}
	check("after the copy", n)
	// A source that lags (a lower epoch of the same producer) moves
	// nothing back; a newer epoch is copied.
	if _, err := n.SyncMirroredTransactions("m", []MirroredTransaction{{TransactionalID: "idle", ProducerID: 5000, Epoch: 2, TimeoutMillis: 60000},
		{TransactionalID: "aborted", ProducerID: 5001, Epoch: 8, TimeoutMillis: 60000}}); err != nil {
		t.Fatal(err)
	}
	want["aborted"] = netio.TransactionState{TransactionalID: "aborted", ProducerID: 5001, ProducerEpoch: 8, State: "CompleteCommit", TimeoutMillis: 60000, StartMillis: -1}
	check("after a second copy", n)
	id, _, err := n.txns.InitProducerID(context.Background(), "", 0, -1, -1)
	if err != nil || id <= 5002 {
		t.Fatalf("a new producer ID %d (%v), want one above the source's 5002", id, err)
	}
	n.Close()
	n = openTestNode(t, fs, clock)
	defer n.Close()
	check("after a restart", n)
}

// The stop fences the copied producers whose transaction was open, on the
// source or in the partition being stopped, and a fenced producer goes on
// as after a timeout on Kafka: EndTxn v5 at its old epoch is answered
// with the next, InitProducerID with its old epoch gets the next. An idle
// producer goes on at once.
func TestStopFencesMirroredProducers(t *testing.T) {
	n := openTestNode(t, vfs.NewMem(), newTestClock())
	defer n.Close()
	createTopic(t, n, "t", 1)
	p := nodePartition(t, n, "t", 0)
	// Producer 5000 has records of an open transaction mirrored, which
	// the last copy did not see; 5001's source transaction was open when
	// copied, none of its records mirrored; 5002 is idle.
	if _, err := p.AppendMirrored(dataBatch(5000, 3, 0, 2, true)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.SyncMirroredTransactions("m", []MirroredTransaction{
		{TransactionalID: "mid", ProducerID: 5000, Epoch: 3, TimeoutMillis: 60000},
		{TransactionalID: "open", ProducerID: 5001, Epoch: 0, TimeoutMillis: 60000, Open: true},
		{TransactionalID: "idle", ProducerID: 5002, Epoch: 4, TimeoutMillis: 60000},
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent, as a resumed stop runs it again
		if err := p.AbortOpenTransactions("m"); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.WriteMirrorPIDReset(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id    string
		state txnState
		epoch int16
	}{{"mid", txnCompleteAbort, 4}, {"open", txnCompleteAbort, 1}, {"idle", txnCompleteCommit, 4}} {
		m := n.txns.lookup(c.id)
		got, epoch := m.state, m.epoch
		m.mu.Unlock()
		if got != c.state || epoch != c.epoch {
			t.Fatalf("%s: %v at epoch %d, want %v at %d", c.id, got, epoch, c.state, c.epoch)
		}
	}
	ctx := context.Background()
	// The fenced producer's next write: INVALID_PRODUCER_EPOCH.
	_, err := p.Produce(ctx, dataBatch(5000, 3, 2, 1, true), netio.ProduceRequest{Version: 12, Acks: -1, TransactionalID: "mid"})
	wantCode(t, "a write of the fenced producer", err, kerr.InvalidProducerEpoch)
	// It aborts at its old epoch (a retry to the coordinator) and goes on
	// at the next.
	id, epoch, err := n.txns.EndTransaction(ctx, "mid", 5000, 3, false, true)
	if err != nil || id != 5000 || epoch != 4 {
		t.Fatalf("EndTxn v5 abort at the old epoch: %d, %d, %v; want 5000, 4", id, epoch, err)
	}
	if _, err := p.Produce(ctx, dataBatch(5000, 4, 0, 1, true), netio.ProduceRequest{Version: 12, Acks: -1, TransactionalID: "mid"}); err != nil {
		t.Fatalf("the next transaction: %v", err)
	}
	if _, epoch, err := n.txns.EndTransaction(ctx, "mid", 5000, 4, true, true); err != nil || epoch != 5 {
		t.Fatalf("commit: epoch %d, %v; want 5", epoch, err)
	}
	// KIP-360: InitProducerID with the old epoch gets the fenced one.
	id, epoch, err = n.txns.InitProducerID(ctx, "open", 60000, 5001, 0)
	if err != nil || id != 5001 || epoch != 1 {
		t.Fatalf("InitProducerID with the old epoch: %d, %d, %v; want 5001, 1", id, epoch, err)
	}
	// The idle producer writes at once, at any sequence (the stop reset
	// the producers), and commits.
	if _, err := p.Produce(ctx, dataBatch(5002, 4, 17, 1, true), netio.ProduceRequest{Version: 12, Acks: -1, TransactionalID: "idle"}); err != nil {
		t.Fatalf("the idle producer's write: %v", err)
	}
	if _, epoch, err := n.txns.EndTransaction(ctx, "idle", 5002, 4, true, true); err != nil || epoch != 5 {
		t.Fatalf("the idle producer's commit: epoch %d, %v; want 5", epoch, err)
	}
}
