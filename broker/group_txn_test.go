package broker

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/mirrord/mirrord/broker/group"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// addOffsets is AddOffsetsToTxn for c's transaction.
func (c *txnClient) addOffsets(groupID string) error {
	return c.n.txns.AddOffsets(context.Background(), c.id, c.producerID, c.epoch, groupID)
}

// commitOffsets sends TxnOffsetCommit v3 for c's producer, as a member of
// no generation (-1), and returns the one partition's code.
func (c *txnClient) commitOffsets(groupID, topic string, partition int32, offset int64) int16 {
	c.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = 3, c.id, groupID, c.producerID, c.epoch
	req.Generation = -1
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = partition, offset, -1
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{rp}}}
	resp, err := c.n.Groups().TxnOffsetCommit(context.Background(), req)
	if err != nil {
		c.t.Fatalf("TxnOffsetCommit: %v", err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetchOffset is OffsetFetch v7 for one partition: its offset and code.
func fetchOffset(t *testing.T, n *Node, groupID, topic string, partition int32, requireStable bool) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group, req.RequireStable = 7, groupID, requireStable
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{partition}}}
	resp, err := n.Groups().OffsetFetch(context.Background(), req)
	if err != nil {
		t.Fatalf("OffsetFetch: %v", err)
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// wantOffset checks OffsetFetch, plain and with RequireStable.
func wantOffset(t *testing.T, what string, n *Node, offset int64, unstable bool) {
	t.Helper()
	if got, code := fetchOffset(t, n, "g", "t", 0, false); got != offset || code != 0 {
		t.Fatalf("%s: offset %d, code %d; want %d, 0", what, got, code, offset)
	}
	wantStable, wantCode := offset, int16(0)
	if unstable {
		wantStable, wantCode = -1, kerr.UnstableOffsetCommit.Code
	}
	if got, code := fetchOffset(t, n, "g", "t", 0, true); got != wantStable || code != wantCode {
		t.Fatalf("%s, require stable: offset %d, code %d; want %d, %d", what, got, code, wantStable, wantCode)
	}
}

// TestTxnOffsetCommitVisibility: offsets committed in a transaction are
// pending (RequireStable answers UNSTABLE_OFFSET_COMMIT) until the marker:
// visible after COMMIT, gone after ABORT; the __consumer_offsets marker
// closes the transaction there as in a data partition.
func TestTxnOffsetCommitVisibility(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(map[bool]string{true: "commit", false: "abort"}[commit], func(t *testing.T) {
			n := openTestNode(t, vfs.NewMem(), newTestClock())
			defer n.Close()
			createTopic(t, n, "t", 1)
			plain := kmsg.NewPtrOffsetCommitRequest()
			plain.Version, plain.Group, plain.Generation = 8, "g", -1
			plain.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3, LeaderEpoch: -1}}}}
			if resp, err := n.Groups().OffsetCommit(context.Background(), plain); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("plain commit: %v %+v", err, resp)
			}
			c := initTxn(t, n, "tx", time.Minute)
			c.add("t", 0)
			c.mustProduce("t", 0, 2)
			wantCode(t, "add offsets", c.addOffsets("g"), nil)
			if code := c.commitOffsets("g", "t", 0, 7); code != 0 {
				t.Fatalf("TxnOffsetCommit: code %d", code)
			}
			wantOffset(t, "pending", n, 3, true)
			offsets := nodePartition(t, n, consumerOffsetsTopic, 0)
			if hw, lso := stable(offsets); lso >= hw {
				t.Fatalf("%s mid-transaction: high watermark %d, last stable %d; want the transaction open", consumerOffsetsTopic, hw, lso)
			}
			wantCode(t, "end", c.end(commit), nil)
			want := int64(3)
			if commit {
				want = 7
			}
			wantOffset(t, "after the marker", n, want, false)
			if hw, lso := stable(offsets); lso != hw {
				t.Fatalf("%s after the marker: high watermark %d, last stable %d", consumerOffsetsTopic, hw, lso)
			}
		})
	}
}

// TestTxnOffsetCommitChecks: the producer checks of AddOffsetsToTxn and
// TxnOffsetCommit, and the group checks of a transactional commit.
func TestTxnOffsetCommitChecks(t *testing.T) {
	n := openTestNode(t, vfs.NewMem(), newTestClock())
	defer n.Close()
	createTopic(t, n, "t", 1)
	c := initTxn(t, n, "tx", time.Minute)
	if code := c.commitOffsets("g", "t", 0, 1); code != kerr.InvalidTxnState.Code {
		t.Fatalf("commit before AddOffsetsToTxn: code %d, want INVALID_TXN_STATE", code)
	}
	if code := c.commitOffsets("g", "nope", 0, 1); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit of an unknown topic before AddOffsetsToTxn: code %d, want UNKNOWN_TOPIC_OR_PARTITION first", code)
	}
	wantCode(t, "add offsets of an unknown transactional ID", n.txns.AddOffsets(context.Background(), "nope", c.producerID, c.epoch, "g"), kerr.InvalidProducerIDMapping)
	wantCode(t, "add offsets at a future epoch", n.txns.AddOffsets(context.Background(), "tx", c.producerID, c.epoch+1, "g"), kerr.ProducerFenced)
	wantCode(t, "add offsets", c.addOffsets("g"), nil)
	if code := c.commitOffsets("", "t", 0, 1); code != kerr.InvalidGroupID.Code {
		t.Fatalf("empty group: code %d", code)
	}
	if code := c.commitOffsets("g", "nope", 0, 1); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: code %d", code)
	}
	other := &txnClient{t: t, n: n, id: "other", producerID: c.producerID, epoch: c.epoch}
	if code := other.commitOffsets("g", "t", 0, 1); code != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("another transactional ID's producer: code %d", code)
	}
	member := kmsg.NewPtrTxnOffsetCommitRequest()
	member.Version, member.TransactionalID, member.Group, member.ProducerID, member.ProducerEpoch = 3, c.id, "no-such-group", c.producerID, c.epoch
	member.Generation, member.MemberID = 4, "m"
	member.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if resp, err := n.Groups().TxnOffsetCommit(context.Background(), member); err != nil || resp.Topics[0].Partitions[0].ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("generation 4 of a group that does not exist: %v %+v, want ILLEGAL_GENERATION", err, resp)
	}
	if code := c.commitOffsets("g", "t", 0, 1); code != 0 {
		t.Fatalf("commit: code %d", code)
	}

	// A new producer of the transactional ID fences the old one: its
	// transaction is aborted, and its late commit refused.
	fenced := *c
	c = initTxnRetry(t, n, "tx")
	if code := fenced.commitOffsets("g", "t", 0, 9); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("fenced producer's commit: code %d, want INVALID_PRODUCER_EPOCH", code)
	}
	wantCode(t, "fenced producer's AddOffsetsToTxn", fenced.addOffsets("g"), kerr.ProducerFenced)
	wantOffset(t, "after the fence", n, -1, false)
	wantCode(t, "add offsets at the new epoch", c.addOffsets("g"), nil)
	if code := c.commitOffsets("g", "t", 0, 5); code != 0 {
		t.Fatalf("commit at the new epoch: code %d", code)
	}
	wantCode(t, "commit", c.end(true), nil)
	wantOffset(t, "committed at the new epoch", n, 5, false)
}

// initTxnRetry is InitProducerID as a client sends it: an ongoing
// transaction answers CONCURRENT_TRANSACTIONS while it is aborted, then
// the epoch is bumped.
func initTxnRetry(t *testing.T, n *Node, id string) *txnClient {
	t.Helper()
	for range 3 {
		producerID, epoch, err := n.txns.InitProducerID(context.Background(), id, 60000, -1, -1)
		if err == nil {
			return &txnClient{t: t, n: n, id: id, producerID: producerID, epoch: epoch, sequences: map[int32]int32{}}
		}
		wantCode(t, "init "+id, err, kerr.ConcurrentTransactions)
	}
	t.Fatalf("init %s: still concurrent after 3 tries", id)
	return nil
}

// TestTxnOffsetsSurviveRestart restarts (closed, crashed) with a
// transaction's offsets pending: they come back pending, the transaction
// goes on and commits; a plain commit written after the transaction's
// wins over it, as in Kafka (the later record); all of it the same after
// another restart.
func TestTxnOffsetsSurviveRestart(t *testing.T) {
	for _, rc := range restarts {
		t.Run(rc.name, func(t *testing.T) {
			fs, clock := vfs.NewMem(), newTestClock()
			n := openTestNode(t, fs, clock)
			createTopic(t, n, "t", 2)
			c := initTxn(t, n, "tx", time.Minute)
			wantCode(t, "add offsets", c.addOffsets("g"), nil)
			if code := c.commitOffsets("g", "t", 0, 7); code != 0 {
				t.Fatalf("commit: code %d", code)
			}
			if code := c.commitOffsets("g", "t", 1, 8); code != 0 {
				t.Fatalf("commit: code %d", code)
			}
			n = rc.restart(t, n, fs, clock)
			c.n = n
			wantOffset(t, "pending after the restart", n, -1, true)
			plain := kmsg.NewPtrOffsetCommitRequest()
			plain.Version, plain.Group, plain.Generation = 8, "g", -1
			plain.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 2, LeaderEpoch: -1}}}}
			if resp, err := n.Groups().OffsetCommit(context.Background(), plain); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("plain commit: %v %+v", err, resp)
			}
			wantCode(t, "commit after the restart", c.end(true), nil)
			check := func(what string) {
				t.Helper()
				wantOffset(t, what, n, 7, false)
				if got, code := fetchOffset(t, n, "g", "t", 1, true); got != 2 || code != 0 {
					t.Fatalf("%s: partition 1 at %d (code %d), want the later plain commit's 2", what, got, code)
				}
			}
			check("committed")
			n = rc.restart(t, n, fs, clock)
			defer n.Close()
			check("after another restart")
		})
	}
}

// TestOpenAbortsOrphanOffsets: offsets of a transaction whose coordinator
// state timed out while the node was down are dropped at open.
func TestOpenAbortsTimedOutOffsets(t *testing.T) {
	fs, clock := vfs.NewMem(), newTestClock()
	n := openTestNode(t, fs, clock)
	createTopic(t, n, "t", 1)
	c := initTxn(t, n, "tx", time.Minute)
	wantCode(t, "add offsets", c.addOffsets("g"), nil)
	if code := c.commitOffsets("g", "t", 0, 7); code != 0 {
		t.Fatalf("commit: code %d", code)
	}
	crash(n, fs, nil)
	clock.advance(time.Minute + time.Millisecond)
	n = openTestNode(t, fs, clock)
	defer n.Close()
	wantOffset(t, "after the timeout's abort", n, -1, false)
}

// TestResolveTransactions: what compaction keeps of a log with
// transactions.
func TestResolveTransactions(t *testing.T) {
	data := func(key string, producerID int64) group.Record {
		return group.Record{Key: []byte(key), Value: []byte("v"), Transactional: producerID >= 0, ProducerID: producerID}
	}
	marker := func(producerID int64, m group.Marker) group.Record {
		return group.Record{Transactional: true, ProducerID: producerID, Marker: m}
	}
	plain := func(keys ...string) []group.Record {
		var out []group.Record
		for _, k := range keys {
			out = append(out, group.Record{Key: []byte(k), Value: []byte("v")})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		log  []group.Record
		want []group.Record
		open bool
	}{
		{"plain", []group.Record{data("a", -1), data("b", -1)}, plain("a", "b"), false},
		{"committed in place", []group.Record{data("a", 1), data("b", -1), data("c", 1), marker(1, group.CommitMarker)}, plain("a", "b", "c"), false},
		{"aborted dropped", []group.Record{data("a", 1), data("b", -1), marker(1, group.AbortMarker), marker(2, group.CommitMarker)}, plain("b"), false},
		{"open", []group.Record{data("a", 1), marker(2, group.AbortMarker), data("b", 2)}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, open := resolveTransactions(tc.log)
			if open != tc.open || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, open %v; want %v, open %v", got, open, tc.want, tc.open)
			}
		})
	}
}
