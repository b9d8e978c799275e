package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testClock is a virtual clock for Config.Log.Now.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// openTestNode opens a node over fs at /data on clock, every append
// synced, with its reaper goroutine stopped.
func openTestNode(t *testing.T, fs vfs.FS, clock *testClock) *Node {
	t.Helper()
	cfg := logstore.DefaultConfig()
	cfg.Flush, cfg.Now = logstore.FlushEveryAppend, clock.Now
	n, err := Open(Config{FS: fs, DataDir: "/data", Log: cfg}, nil)
	if err != nil {
		t.Fatalf("open node: %v", err)
	}
	// The tests tick the reaper themselves, on virtual time.
	n.txns.close()
	return n
}

// crash abandons n as a crash would: its reaper stops, nothing is closed.
func crash(n *Node, fs *vfs.Mem, rng *rand.Rand) {
	n.txns.close()
	fs.Crash(rng)
}

func nodePartition(t *testing.T, n *Node, topic string, index int32) *Partition {
	t.Helper()
	p, err := n.LocalPartition(topic, index)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func createTopic(t *testing.T, n *Node, name string, partitions int32) {
	t.Helper()
	if _, err := n.CreateTopic(context.Background(), name, partitions, nil, false); err != nil {
		t.Fatal(err)
	}
}

// txnClient drives the coordinator and partitions as a transactional
// producer would.
type txnClient struct {
	t          *testing.T
	n          *Node
	id         string
	producerID int64
	epoch      int16
	sequences  map[int32]int32
}

func initTxn(t *testing.T, n *Node, id string, timeout time.Duration) *txnClient {
	t.Helper()
	c := &txnClient{t: t, n: n, id: id, sequences: map[int32]int32{}}
	var err error
	c.producerID, c.epoch, err = n.txns.InitProducerID(context.Background(), id, int32(timeout.Milliseconds()), -1, -1)
	if err != nil {
		t.Fatalf("init %s: %v", id, err)
	}
	return c
}

func (c *txnClient) add(topic string, partitions ...int32) {
	c.t.Helper()
	for _, err := range c.n.txns.AddPartitions(context.Background(), c.id, c.producerID, c.epoch, topic, partitions) {
		if err != nil {
			c.t.Fatalf("add partitions %v: %v", partitions, err)
		}
	}
}

// produce writes n transactional records to partition index of topic.
func (c *txnClient) produce(topic string, index int32, n int) (netio.ProduceResult, error) {
	p := nodePartition(c.t, c.n, topic, index)
	result, err := produceTo(p, dataBatch(c.producerID, c.epoch, c.sequences[index], n, true), c.id)
	if err == nil {
		c.sequences[index] += int32(n)
	}
	return result, err
}

func (c *txnClient) mustProduce(topic string, index int32, n int) rb.Offset {
	c.t.Helper()
	result, err := c.produce(topic, index, n)
	if err != nil {
		c.t.Fatalf("produce to %s-%d: %v", topic, index, err)
	}
	return result.BaseOffset
}

func (c *txnClient) end(commit bool) error {
	_, _, err := c.n.txns.EndTransaction(context.Background(), c.id, c.producerID, c.epoch, commit, false)
	return err
}

// partitionState is what must come back the same after a restart.
type partitionState struct {
	Offsets   netio.Offsets
	Aborted   []abortedTxn
	Producers map[int64]producerSnapshot
	Ongoing   map[int64]rb.Offset
	Verified  map[int64]txnVerification
}

type producerSnapshot struct {
	Epoch          int16
	Batches        []batchMetadata
	TxnFirstOffset rb.Offset
	LastTimestamp  int64
}

func stateOf(p *Partition) partitionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := partitionState{Offsets: p.Offsets(), Aborted: p.producers.aborted.snapshot(),
		Producers: map[int64]producerSnapshot{}, Ongoing: map[int64]rb.Offset{}, Verified: map[int64]txnVerification{}}
	for id, e := range p.producers.producers {
		snap := producerSnapshot{Epoch: e.epoch, TxnFirstOffset: e.txnFirstOffset, LastTimestamp: e.lastTimestamp}
		for i := range e.count {
			snap.Batches = append(snap.Batches, e.batches[(e.head+i)%retainedBatches])
		}
		s.Producers[id] = snap
	}
	for id, o := range p.producers.ongoing {
		s.Ongoing[id] = o
	}
	for id, v := range p.producers.verified {
		s.Verified[id] = v
	}
	return s
}

func nodeState(t *testing.T, n *Node, topic string, partitions int32) []partitionState {
	t.Helper()
	var states []partitionState
	for i := range partitions {
		states = append(states, stateOf(nodePartition(t, n, topic, i)))
	}
	return states
}

func txnStateOf(t *testing.T, n *Node, id string) txnState {
	t.Helper()
	m := n.txns.lookup(id)
	if m == nil {
		t.Fatalf("transactional ID %q unknown", id)
	}
	defer m.mu.Unlock()
	return m.state
}

func TestTransactionCommitAndAbort(t *testing.T) {
	n := openTestNode(t, vfs.NewMem(), newTestClock())
	defer n.Close()
	createTopic(t, n, "t", 2)
	c := initTxn(t, n, "tx", time.Minute)
	if c.epoch != 0 {
		t.Fatalf("first epoch %d, want 0", c.epoch)
	}
	wantCode(t, "EndTxn with no transaction", c.end(true), kerr.InvalidTxnState)
	c.add("t", 0, 1)
	c.mustProduce("t", 0, 3)
	c.mustProduce("t", 1, 2)
	p0, p1 := nodePartition(t, n, "t", 0), nodePartition(t, n, "t", 1)
	if _, lso := stable(p0); lso != 0 {
		t.Fatalf("open transaction: last stable offset %d, want 0", lso)
	}
	wantCode(t, "commit", c.end(true), nil)
	for _, p := range []*Partition{p0, p1} {
		if hw, lso := stable(p); hw != lso || p.producers.aborted.len() != 0 {
			t.Fatalf("%s after commit: high watermark %d, last stable %d, %d aborted", p.tp, hw, lso, p.producers.aborted.len())
		}
	}
	wantCode(t, "a retried commit", c.end(true), nil)
	wantCode(t, "abort after commit", c.end(false), kerr.InvalidTxnState)
	// The next transaction, same epoch: sequences go on.
	c.add("t", 0)
	first := c.mustProduce("t", 0, 2)
	_, err := c.produce("t", 1, 1)
	wantCode(t, "a partition not in this transaction", err, kerr.InvalidTxnState)
	wantCode(t, "abort", c.end(false), nil)
	want := []abortedTxn{{producerID: c.producerID, firstOffset: rb.Offset(first), lastOffset: rb.Offset(first + 2)}}
	if got := p0.producers.aborted.snapshot(); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted index %v, want %v", got, want)
	}
	if got := txnStateOf(t, n, "tx"); got != txnCompleteAbort {
		t.Fatalf("state %v, want CompleteAbort", got)
	}
	wantCode(t, "commit after abort", c.end(true), kerr.InvalidTxnState)
	_, _, err = n.txns.EndTransaction(context.Background(), "tx", c.producerID+1, 0, true, false)
	wantCode(t, "EndTxn from another producer ID", err, kerr.InvalidProducerIDMapping)
	_, _, err = n.txns.EndTransaction(context.Background(), "nope", 1, 0, true, false)
	wantCode(t, "EndTxn from an unknown ID", err, kerr.InvalidProducerIDMapping)
	errs := n.txns.AddPartitions(context.Background(), "tx", c.producerID, c.epoch, "t", []int32{0, 9})
	if !errors.Is(errs[0], kerr.OperationNotAttempted) || !errors.Is(errs[1], kerr.UnknownTopicOrPartition) {
		t.Fatalf("add an unknown partition: %v", errs)
	}
}

func TestInitProducerID(t *testing.T) {
	n := openTestNode(t, vfs.NewMem(), newTestClock())
	defer n.Close()
	createTopic(t, n, "t", 1)
	ctx := context.Background()
	a, _, err1 := n.txns.InitProducerID(ctx, "", 0, -1, -1)
	b, _, err2 := n.txns.InitProducerID(ctx, "", 0, -1, -1)
	if err1 != nil || err2 != nil || a == b {
		t.Fatalf("idempotent producers: %d, %d (%v, %v); want two IDs", a, b, err1, err2)
	}
	for _, timeout := range []int32{0, -1, int32(DefaultTransactionConfig.MaxTimeout.Milliseconds()) + 1} {
		_, _, err := n.txns.InitProducerID(ctx, "tx", timeout, -1, -1)
		wantCode(t, fmt.Sprintf("timeout %d ms", timeout), err, kerr.InvalidTransactionTimeout)
	}
	// (A producer ID without an epoch is INVALID_REQUEST in netio, before
	// the coordinator, as in Kafka's KafkaApis.)

	old := initTxn(t, n, "tx", time.Minute)
	old.add("t", 0)
	old.mustProduce("t", 0, 2)
	_, _, err := n.txns.InitProducerID(ctx, "tx", 60000, -1, -1)
	wantCode(t, "init during a transaction", err, kerr.ConcurrentTransactions)
	p := nodePartition(t, n, "t", 0)
	if hw, lso := stable(p); hw != 3 || lso != 3 || p.producers.aborted.len() != 1 {
		t.Fatalf("after the fence: high watermark %d, last stable %d, %d aborted; want 3, 3, 1", hw, lso, p.producers.aborted.len())
	}
	_, err = old.produce("t", 0, 1)
	wantCode(t, "produce from the fenced epoch", err, kerr.InvalidProducerEpoch)
	errs := n.txns.AddPartitions(ctx, "tx", old.producerID, old.epoch, "t", []int32{0})
	wantCode(t, "add partitions from the fenced epoch", errs[0], kerr.ProducerFenced)
	wantCode(t, "EndTxn from the fenced epoch", old.end(true), kerr.ProducerFenced)

	id, epoch, err := n.txns.InitProducerID(ctx, "tx", 60000, -1, -1)
	if err != nil || id != old.producerID || epoch != 2 {
		t.Fatalf("init after the fence: %d/%d, %v; want %d/2 (one bump to fence, one to init)", id, epoch, err, old.producerID)
	}
	_, _, err = n.txns.InitProducerID(ctx, "tx", 60000, id, 0)
	wantCode(t, "resume with a fenced epoch", err, kerr.ProducerFenced)
	_, _, err = n.txns.InitProducerID(ctx, "tx", 60000, id+100, 2)
	wantCode(t, "resume with another producer ID", err, kerr.ProducerFenced)
	if id2, epoch2, err := n.txns.InitProducerID(ctx, "tx", 60000, id, 2); err != nil || id2 != id || epoch2 != 3 {
		t.Fatalf("resume at the current epoch: %d/%d, %v; want %d/3", id2, epoch2, err, id)
	}
	if id2, epoch2, err := n.txns.InitProducerID(ctx, "tx", 60000, id, 2); err != nil || id2 != id || epoch2 != 3 {
		t.Fatalf("the same resume retried: %d/%d, %v; want %d/3 again", id2, epoch2, err, id)
	}

	// Epoch exhaustion: the last epochs are for fencing; then a new ID.
	m := n.txns.lookup("tx")
	m.epoch = math.MaxInt16 - 2
	m.mu.Unlock()
	if _, epoch, err := n.txns.InitProducerID(ctx, "tx", 60000, -1, -1); err != nil || epoch != math.MaxInt16-1 {
		t.Fatalf("bump to the last epoch: %d, %v", epoch, err)
	}
	rotated, epoch, err := n.txns.InitProducerID(ctx, "tx", 60000, id, math.MaxInt16-1)
	if err != nil || rotated == id || epoch != 0 {
		t.Fatalf("init at the exhausted epoch: %d/%d, %v; want a new producer ID at epoch 0", rotated, epoch, err)
	}
	if again, epoch, err := n.txns.InitProducerID(ctx, "tx", 60000, id, math.MaxInt16-1); err != nil || again != rotated || epoch != 0 {
		t.Fatalf("the rotation retried: %d/%d, %v; want %d/0", again, epoch, err, rotated)
	}
}

func TestTransactionTimeoutAndExpiration(t *testing.T) {
	clock := newTestClock()
	fs := vfs.NewMem()
	n := openTestNode(t, fs, clock)
	defer n.Close()
	createTopic(t, n, "t", 1)
	c := initTxn(t, n, "slow", time.Second)
	c.add("t", 0)
	first := c.mustProduce("t", 0, 2)
	clock.advance(time.Second)
	if r := n.txns.reap(); r.aborted != 0 {
		t.Fatalf("at the timeout: %+v", r)
	}
	clock.advance(time.Millisecond)
	if r := n.txns.reap(); r.aborted != 1 {
		t.Fatalf("past the timeout: %+v, want one abort", r)
	}
	p := nodePartition(t, n, "t", 0)
	if hw, lso := stable(p); hw != lso || p.producers.aborted.len() != 1 || p.producers.aborted.snapshot()[0].firstOffset != rb.Offset(first) {
		t.Fatalf("after the timeout: high watermark %d, last stable %d, aborted %v", hw, lso, p.producers.aborted.snapshot())
	}
	wantCode(t, "EndTxn after the timeout", c.end(true), kerr.ProducerFenced)
	_, err := c.produce("t", 0, 1)
	wantCode(t, "produce after the timeout", err, kerr.InvalidProducerEpoch)

	// An idle transactional ID is forgotten, and its file removed.
	// Its producer, idle for a day, is forgotten by the partition first.
	clock.advance(DefaultTransactionConfig.TransactionalIDExpiration - time.Millisecond)
	if r := n.txns.reap(); r.expiredIDs != 0 || r.expiredProducers != 1 || len(p.producers.producers) != 0 {
		t.Fatalf("before the ID expiration: %+v, %d producers left; want the producer expired", r, len(p.producers.producers))
	}
	clock.advance(time.Millisecond)
	if r := n.txns.reap(); r.expiredIDs != 1 || n.txns.lookup("slow") != nil {
		t.Fatalf("at the expiration: %+v", r)
	}
	if exists, _ := fs.Exists(path.Join("/data", transactionsDirName, txnFileName("slow"))); exists {
		t.Fatal("the expired ID's file is still there")
	}
}

// restartCase is one way of stopping and reopening a node.
type restartCase struct {
	name    string
	restart func(t *testing.T, n *Node, fs *vfs.Mem, clock *testClock) *Node
}

var restarts = []restartCase{
	{"close and reopen", func(t *testing.T, n *Node, fs *vfs.Mem, clock *testClock) *Node {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		return openTestNode(t, fs, clock)
	}},
	{"crash", func(t *testing.T, n *Node, fs *vfs.Mem, clock *testClock) *Node {
		crash(n, fs, nil)
		return openTestNode(t, fs, clock)
	}},
	{"crash with torn tails", func(t *testing.T, n *Node, fs *vfs.Mem, clock *testClock) *Node {
		crash(n, fs, rand.New(rand.NewPCG(1, 2)))
		return openTestNode(t, fs, clock)
	}},
}

// TestRestartKeepsTransactions restarts mid-transaction and after it:
// offsets, aborted index, producer state and verifications come back the
// same, and the open transaction can go on and commit.
func TestRestartKeepsTransactions(t *testing.T) {
	for _, rc := range restarts {
		t.Run(rc.name, func(t *testing.T) {
			fs, clock := vfs.NewMem(), newTestClock()
			n := openTestNode(t, fs, clock)
			createTopic(t, n, "t", 2)
			aborted := initTxn(t, n, "a", time.Minute)
			aborted.add("t", 0, 1)
			aborted.mustProduce("t", 0, 2)
			aborted.mustProduce("t", 1, 1)
			wantCode(t, "abort", aborted.end(false), nil)
			open := initTxn(t, n, "b", time.Minute)
			open.add("t", 0)
			open.mustProduce("t", 0, 3)
			idempotent := nodePartition(t, n, "t", 1)
			if _, err := produceTo(idempotent, dataBatch(99, 0, 0, 2, false), ""); err != nil {
				t.Fatal(err)
			}
			before := nodeState(t, n, "t", 2)
			n = rc.restart(t, n, fs, clock)
			if after := nodeState(t, n, "t", 2); !reflect.DeepEqual(before, after) {
				t.Fatalf("mid-transaction:\nbefore %+v\nafter  %+v", before, after)
			}
			open.n = n
			open.mustProduce("t", 0, 1)
			wantCode(t, "commit after the restart", open.end(true), nil)
			before = nodeState(t, n, "t", 2)
			n = rc.restart(t, n, fs, clock)
			defer n.Close()
			if after := nodeState(t, n, "t", 2); !reflect.DeepEqual(before, after) {
				t.Fatalf("after the transactions:\nbefore %+v\nafter  %+v", before, after)
			}
			if got := txnStateOf(t, n, "b"); got != txnCompleteCommit {
				t.Fatalf("state of b after the restart: %v", got)
			}
		})
	}
}

// TestCrashCompletesPreparedCommit crashes after PrepareCommit is durable
// but before the markers could be written: the commit completes at open.
func TestCrashCompletesPreparedCommit(t *testing.T) {
	fs, clock := vfs.NewMem(), newTestClock()
	n := openTestNode(t, fs, clock)
	createTopic(t, n, "t", 2)
	c := initTxn(t, n, "tx", time.Minute)
	c.add("t", 0, 1)
	c.mustProduce("t", 0, 2)
	c.mustProduce("t", 1, 2)
	fs.SetFault(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite && strings.HasSuffix(name, ".log") && strings.Contains(name, "/t-1/") {
			return syscall.ENOSPC
		}
		return nil
	})
	wantCode(t, "commit with a full disk under t-1", c.end(true), nil)
	if got := txnStateOf(t, n, "tx"); got != txnPrepareCommit {
		t.Fatalf("state %v, want PrepareCommit until the marker is written", got)
	}
	_, _, err := n.txns.InitProducerID(context.Background(), "tx", 60000, -1, -1)
	wantCode(t, "init while the commit completes", err, kerr.ConcurrentTransactions)
	p1 := nodePartition(t, n, "t", 1)
	if _, lso := stable(p1); lso != 0 {
		t.Fatalf("t-1 without its marker: last stable offset %d, want 0", lso)
	}
	fs.SetFault(nil)
	crash(n, fs, nil)
	n = openTestNode(t, fs, clock)
	defer n.Close()
	if got := txnStateOf(t, n, "tx"); got != txnCompleteCommit {
		t.Fatalf("state after the restart %v, want CompleteCommit", got)
	}
	for i := range int32(2) {
		p := nodePartition(t, n, "t", i)
		if hw, lso := stable(p); hw != 3 || lso != 3 || p.producers.aborted.len() != 0 {
			t.Fatalf("t-%d: high watermark %d, last stable %d, %d aborted; want 3, 3, 0 (one marker each)", i, hw, lso, p.producers.aborted.len())
		}
	}
}

// TestReaperRetriesMarkers: a marker that could not be written is written
// by the next reaper tick.
func TestReaperRetriesMarkers(t *testing.T) {
	fs, clock := vfs.NewMem(), newTestClock()
	n := openTestNode(t, fs, clock)
	defer n.Close()
	createTopic(t, n, "t", 1)
	c := initTxn(t, n, "tx", time.Minute)
	c.add("t", 0)
	c.mustProduce("t", 0, 2)
	fs.SetFault(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite && strings.HasSuffix(name, ".log") {
			return syscall.ENOSPC
		}
		return nil
	})
	wantCode(t, "abort with a full log disk", c.end(false), nil)
	fs.SetFault(nil)
	if r := n.txns.reap(); r.completed != 1 {
		t.Fatalf("reap: %+v, want the abort completed", r)
	}
	p := nodePartition(t, n, "t", 0)
	if hw, lso := stable(p); hw != 3 || lso != 3 || p.producers.aborted.len() != 1 {
		t.Fatalf("high watermark %d, last stable %d, %d aborted; want 3, 3, 1", hw, lso, p.producers.aborted.len())
	}
}

// TestOpenAbortsOrphans: transactions whose coordinator state is lost, or
// whose timeout passed while the node was down, are aborted at open.
func TestOpenAbortsOrphans(t *testing.T) {
	for _, lost := range []bool{true, false} {
		t.Run(fmt.Sprintf("state lost %v", lost), func(t *testing.T) {
			fs, clock := vfs.NewMem(), newTestClock()
			n := openTestNode(t, fs, clock)
			createTopic(t, n, "t", 1)
			c := initTxn(t, n, "tx", time.Minute)
			c.add("t", 0)
			first := c.mustProduce("t", 0, 2)
			crash(n, fs, nil)
			if lost {
				if err := fs.Remove(path.Join("/data", transactionsDirName, txnFileName("tx"))); err != nil {
					t.Fatal(err)
				}
			} else {
				clock.advance(time.Minute + time.Millisecond)
			}
			n = openTestNode(t, fs, clock)
			defer n.Close()
			p := nodePartition(t, n, "t", 0)
			want := []abortedTxn{{producerID: c.producerID, firstOffset: rb.Offset(first), lastOffset: 2}}
			if hw, lso := stable(p); hw != 3 || lso != 3 || !reflect.DeepEqual(p.producers.aborted.snapshot(), want) {
				t.Fatalf("high watermark %d, last stable %d, aborted %v; want 3, 3, %v", hw, lso, p.producers.aborted.snapshot(), want)
			}
		})
	}
}

func TestTxnRecordEncoding(t *testing.T) {
	records := []txnRecord{
		{id: "tx", producerID: 7, lastProducerID: -1, epoch: 0, lastEpoch: -1, timeoutMillis: 60000, state: txnEmpty, startMillis: -1, updateMillis: 5, nextProducerID: -1},
		{id: "with \"quotes\"\nand a newline", producerID: 8, lastProducerID: 8, epoch: 3, lastEpoch: 2, timeoutMillis: 1, state: txnOngoing,
			partitions: []logstore.TopicPartition{{Topic: "a", Partition: 2}, {Topic: "a", Partition: 10}, {Topic: "b", Partition: 0}}, startMillis: 10, updateMillis: 11, nextProducerID: -1},
		{id: "x", producerID: 9, lastProducerID: 9, epoch: 32767, lastEpoch: -1, timeoutMillis: 900000, state: txnPrepareAbort,
			partitions: []logstore.TopicPartition{{Topic: "t", Partition: 0}}, startMillis: 1, updateMillis: 2, nextProducerID: -1},
		// Transaction version 2: an abort without a transaction, its epoch exhausted.
		{id: "v2", producerID: 10, lastProducerID: 10, epoch: 32767, lastEpoch: 32766, timeoutMillis: 60000, state: txnPrepareAbort,
			startMillis: 3, updateMillis: 3, nextProducerID: 11},
		// A commit keeps the start of the transaction it ended, as Kafka's.
		{id: "done", producerID: 13, lastProducerID: -1, epoch: 1, lastEpoch: -1, timeoutMillis: 60000, state: txnCompleteCommit,
			startMillis: 6, updateMillis: 7, nextProducerID: -1},
		// Copied from a mirror's source, which had a transaction open.
		{id: "m", producerID: 12, lastProducerID: -1, epoch: 4, lastEpoch: -1, timeoutMillis: 60000, state: txnCompleteCommit,
			startMillis: -1, updateMillis: 3, nextProducerID: -1, mirror: "dr \"east\"", sourceOpen: true},
	}
	for _, want := range records {
		got, err := decodeTxnRecord(encodeTxnRecord(&want))
		if err != nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("round trip of %+v: %+v, %v", want, got, err)
		}
	}
	// A file of format version 0 (before transaction version 2) reads
	// with no next producer ID.
	v0 := "0\ntransactional.id \"a\"\nproducer.id 1\nlast.producer.id -1\nproducer.epoch 0\nlast.producer.epoch -1\ntimeout.ms 1\nstate Ongoing\nstart.ms 4\nupdate.ms 5\npartition t 0\n"
	want := txnRecord{id: "a", producerID: 1, lastProducerID: -1, lastEpoch: -1, timeoutMillis: 1, state: txnOngoing,
		partitions: []logstore.TopicPartition{{Topic: "t", Partition: 0}}, startMillis: 4, updateMillis: 5, nextProducerID: -1}
	if got, err := decodeTxnRecord([]byte(v0)); err != nil || !reflect.DeepEqual(*got, want) {
		t.Errorf("version 0 file: %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{
		"", "1\n", "0\ntransactional.id \"\"\nproducer.id 1\nlast.producer.id -1\nproducer.epoch 0\nlast.producer.epoch -1\ntimeout.ms 1\nstate Empty\nstart.ms -1\nupdate.ms 0\n",
		"0\ntransactional.id \"a\"\nproducer.id 1\nlast.producer.id -1\nproducer.epoch 0\nlast.producer.epoch -1\ntimeout.ms 1\nstate Ongoing\nstart.ms -1\nupdate.ms 0\n",
		"0\ntransactional.id \"a\"\nproducer.id 1\nlast.producer.id -1\nproducer.epoch 0\nlast.producer.epoch -1\ntimeout.ms 1\nstate Empty\nstart.ms -1\nupdate.ms 0\npartition t 0\n",
		"0\ntransactional.id \"a\"\nproducer.id 1\nlast.producer.id -1\nproducer.epoch 0\nlast.producer.epoch -1\ntimeout.ms 1\nstate Empty\nstart.ms 3\nupdate.ms 0\n",
		"1\ntransactional.id \"a\"\nproducer.id 1\nlast.producer.id -1\nproducer.epoch 0\nlast.producer.epoch -1\ntimeout.ms 1\nstate Empty\nstart.ms -1\nupdate.ms 0\nnext.producer.id 5\nmirror \"\"\nmirror.open false\n",
		"1\ntransactional.id \"a\"\nproducer.id 1\nlast.producer.id -1\nproducer.epoch 0\nlast.producer.epoch -1\ntimeout.ms 1\nstate Empty\nstart.ms -1\nupdate.ms 0\nnext.producer.id -1\nmirror \"\"\nmirror.open true\n",
		"1\ntransactional.id \"a\"\nproducer.id 1\nlast.producer.id -1\nproducer.epoch 0\nlast.producer.epoch -1\ntimeout.ms 1\nstate Empty\nstart.ms -1\nupdate.ms 0\n",
	} {
		if _, err := decodeTxnRecord([]byte(bad)); !errors.Is(err, errTxnFile) {
			t.Errorf("decode %q: %v, want errTxnFile", bad, err)
		}
	}
}

// FuzzDecodeTxnRecord: whatever decodes encodes back to the same bytes
// and decodes to the same record.
func FuzzDecodeTxnRecord(f *testing.F) {
	f.Add(encodeTxnRecord(&txnRecord{id: "tx", producerID: 7, lastProducerID: -1, lastEpoch: -1, timeoutMillis: 60000, startMillis: -1}))
	f.Add(encodeTxnRecord(&txnRecord{id: "t", producerID: 1, lastProducerID: 1, epoch: 4, lastEpoch: 3, timeoutMillis: 5, state: txnPrepareCommit,
		partitions: []logstore.TopicPartition{{Topic: "a", Partition: 1}, {Topic: "b", Partition: 0}}, startMillis: 3, updateMillis: 4}))
	f.Fuzz(func(t *testing.T, data []byte) {
		record, err := decodeTxnRecord(data)
		if err != nil {
			if !errors.Is(err, errTxnFile) {
				t.Fatalf("error %v does not wrap errTxnFile", err)
			}
			return
		}
		encoded := encodeTxnRecord(record)
		again, err := decodeTxnRecord(encoded)
		if err != nil || !reflect.DeepEqual(record, again) {
			t.Fatalf("re-decode: %+v, %v; first %+v", again, err, record)
		}
		if !bytes.Equal(encoded, encodeTxnRecord(again)) {
			t.Fatal("encoding is not stable")
		}
	})
}

// served is a Node over a real directory, served by netio on a loopback
// address that stays the same across restarts, so that clients
// reconnect.
type served struct {
	t       *testing.T
	dir     string
	addr    string
	node    *Node
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

func serveDir(t *testing.T, dir, addr string) *served {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	tcp := ln.Addr().(*net.TCPAddr)
	node, err := Open(Config{FS: vfs.OS, DataDir: dir, Log: logstore.DefaultConfig(), Host: tcp.IP.String(), Port: int32(tcp.Port)}, nil)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	s := &served{t: t, dir: dir, addr: ln.Addr().String(), node: node, done: make(chan error, 1)}
	var ctx context.Context
	ctx, s.cancel = context.WithCancel(context.Background())
	go func() { s.done <- netio.NewServer(netio.Config{Backend: node}).Serve(ctx, ln) }()
	return s
}

// stopServing stops the listener; later calls do nothing (a deferred
// close after a failed restart must not wait for it again).
func (s *served) stopServing() {
	if s.stopped {
		return
	}
	s.stopped = true
	s.cancel()
	if err := <-s.done; err != nil {
		s.t.Errorf("serve: %v", err)
	}
}

// restart stops serving, closes the node (or abandons it, as a crash
// would: the OS keeps what was written, nothing is closed or
// checkpointed) and serves a new node over the same directory and
// address.
func (s *served) restart(crashed bool) *served {
	s.t.Helper()
	s.stopServing()
	if crashed {
		s.node.txns.close()
	} else if err := s.node.Close(); err != nil {
		s.t.Fatal(err)
	}
	return serveDir(s.t, s.dir, s.addr)
}

func (s *served) close() {
	s.stopServing()
	if err := s.node.Close(); err != nil {
		s.t.Errorf("close node: %v", err)
	}
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// produceValues produces one record per value, value i to partition i%2,
// and adds them to want.
func produceValues(ctx context.Context, t *testing.T, client *kgo.Client, want map[int32][]string, values ...string) {
	t.Helper()
	for i, v := range values {
		r := &kgo.Record{Value: []byte(v), Partition: int32(i % 2)}
		if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		if want != nil {
			want[r.Partition] = append(want[r.Partition], v)
		}
	}
}

// consumeValues reads both partitions of t from the start until the value
// "end" in each, and returns the values before it.
func consumeValues(ctx context.Context, t *testing.T, addr string, isolation kgo.IsolationLevel) map[int32][]string {
	t.Helper()
	client := newClient(t, addr, kgo.FetchIsolationLevel(isolation), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
	got := map[int32][]string{}
	ended := map[int32]bool{}
	for len(ended) < 2 {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume: %v; got %v", ctx.Err(), got)
		}
		fetches.EachError(func(topic string, partition int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, partition, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			switch {
			case ended[r.Partition]:
				t.Errorf("partition %d: %q after the end", r.Partition, r.Value)
			case string(r.Value) == "end":
				ended[r.Partition] = true
			default:
				got[r.Partition] = append(got[r.Partition], string(r.Value))
			}
		})
	}
	return got
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// TestKafkaClientTransactions runs franz-go's transactional producers and
// read_committed / read_uncommitted consumers against a served Node,
// restarting it (closed, then crashed) in the middle of a transaction and
// after it.
func TestKafkaClientTransactions(t *testing.T) {
	for _, crashed := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash %v", crashed), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			s := serveDir(t, filepath.Join(t.TempDir(), "data"), "127.0.0.1:0")
			defer func() { s.close() }()
			admin := newClient(t, s.addr)
			if _, err := kadm.NewClient(admin).CreateTopic(ctx, 2, 1, nil, "t"); err != nil {
				t.Fatal(err)
			}
			committed, everything := map[int32][]string{}, map[int32][]string{}
			both := func(values ...string) {
				for i, v := range values {
					everything[int32(i%2)] = append(everything[int32(i%2)], v)
				}
			}
			transaction := func(client *kgo.Client, prefix string, n int, commit bool) {
				t.Helper()
				if err := client.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				vs := values(prefix, n)
				both(vs...)
				if commit {
					produceValues(ctx, t, client, committed, vs...)
				} else {
					produceValues(ctx, t, client, nil, vs...)
				}
				if err := client.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
					t.Fatalf("end %s: %v", prefix, err)
				}
			}
			transaction(newClient(t, s.addr, kgo.TransactionalID("commits")), "c", 6, true)
			transaction(newClient(t, s.addr, kgo.TransactionalID("aborts")), "a", 6, false)
			plain := newClient(t, s.addr)
			produceValues(ctx, t, plain, committed, values("i", 4)...)
			both(values("i", 4)...)

			// A transaction across a restart: the client reconnects to the
			// same address and goes on.
			long := newClient(t, s.addr, kgo.TransactionalID("long"))
			if err := long.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			produceValues(ctx, t, long, committed, values("r", 4)...)
			both(values("r", 4)...)
			before := nodeState(t, s.node, "t", 2)
			if before[0].Offsets.LastStableOffset == before[0].Offsets.HighWatermark {
				t.Fatalf("partition 0 mid-transaction: %+v; want the last stable offset below the high watermark", before[0].Offsets)
			}
			s = s.restart(crashed)
			if after := nodeState(t, s.node, "t", 2); !reflect.DeepEqual(before, after) {
				t.Fatalf("restart mid-transaction:\nbefore %+v\nafter  %+v", before, after)
			}
			more := []string{"r4", "r5"}
			produceValues(ctx, t, long, committed, more...)
			both(more...)
			if err := long.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatalf("commit across the restart: %v", err)
			}
			before = nodeState(t, s.node, "t", 2)
			s = s.restart(crashed)
			if after := nodeState(t, s.node, "t", 2); !reflect.DeepEqual(before, after) {
				t.Fatalf("restart after the transactions:\nbefore %+v\nafter  %+v", before, after)
			}
			produceValues(ctx, t, newClient(t, s.addr), nil, "end", "end")

			if got := consumeValues(ctx, t, s.addr, kgo.ReadCommitted()); !reflect.DeepEqual(got, committed) {
				t.Errorf("read_committed:\ngot  %v\nwant %v", got, committed)
			}
			if got := consumeValues(ctx, t, s.addr, kgo.ReadUncommitted()); !reflect.DeepEqual(got, everything) {
				t.Errorf("read_uncommitted:\ngot  %v\nwant %v", got, everything)
			}
		})
	}
}
