package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (h *harness) txnCommit(version int16, group, member string, generation int32, producerID int64, offset int64) int16 {
	h.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = version, "tx", group, producerID, 0
	req.MemberID, req.Generation = member, generation
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "a", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
	resp, err := h.c.TxnOffsetCommit(h.ctx(), req)
	if err != nil {
		h.t.Fatalf("TxnOffsetCommit: %v", err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetched is OffsetFetch v8 of partition a-0, with require_stable.
func (h *harness) fetched(group string) (int64, int16) {
	h.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.RequireStable = 8, true
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "a", Partitions: []int32{0}}}}}
	resp, err := h.c.OffsetFetch(h.ctx(), req)
	if err != nil {
		h.t.Fatalf("OffsetFetch: %v", err)
	}
	p := resp.Groups[0].Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// TestTxnOffsetCommitConsumerGroup: a KIP-848 group's member commits in a
// transaction with its member epoch (any TxnOffsetCommit version; a stale
// epoch is ILLEGAL_GENERATION, as Kafka's
// validateTransactionalOffsetCommit answers it).
func TestTxnOffsetCommitConsumerGroup(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.Topics = func() []TopicMetadata { return consumerTestTopics } })
	h.consumerStep(t, 0, hb{member: "m1", epoch: 0, want: 1, assigned: parts{"a": {0, 1, 2, 3}}})
	expectCode(t, "stale member epoch", h.txnCommit(3, "g", "m1", 0, 7, 5), kerr.IllegalGeneration.Code)
	expectCode(t, "unknown member", h.txnCommit(3, "g", "m9", 1, 7, 5), kerr.UnknownMemberID.Code)
	expectCode(t, "v2 without member fields", h.txnCommit(2, "g", "", -1, 7, 5), kerr.UnknownMemberID.Code)
	expectCode(t, "member at its epoch", h.txnCommit(3, "g", "m1", 1, 7, 5), 0)
	if offset, code := h.fetched("g"); offset != -1 || code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("pending: offset %d, %s", offset, codeName(code))
	}
	if err := h.c.CompleteTransaction(h.ctx(), 7, true); err != nil {
		t.Fatal(err)
	}
	if offset, code := h.fetched("g"); offset != 5 || code != 0 {
		t.Fatalf("committed: offset %d, %s", offset, codeName(code))
	}
}

// TestTxnOffsetReplay: the store's transactional records and markers
// replay to the same pending and committed offsets; a classic group that
// is not Empty takes a transactional commit without a member (v0-2).
func TestTxnOffsetReplay(t *testing.T) {
	h := newHarness(t, nil)
	h.stableGroup("g", "c1")
	expectCode(t, "v2 commit to a Stable group", h.txnCommit(2, "g", "", -1, 7, 5), 0)
	expectCode(t, "a second producer's", h.txnCommit(3, "h", "", -1, 8, 6), 0)
	h.restart()
	if offset, code := h.fetched("g"); offset != -1 || code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("pending after a restart: offset %d, %s", offset, codeName(code))
	}
	markers := []Record{{Transactional: true, ProducerID: 7, Marker: CommitMarker}, {Transactional: true, ProducerID: 8, Marker: AbortMarker}}
	if err := h.store.Append(markers); err != nil {
		t.Fatal(err)
	}
	h.restart()
	if offset, code := h.fetched("g"); offset != 5 || code != 0 {
		t.Fatalf("committed at replay: offset %d, %s", offset, codeName(code))
	}
	if offset, code := h.fetched("h"); offset != -1 || code != 0 {
		t.Fatalf("aborted at replay: offset %d, %s", offset, codeName(code))
	}
}

// TestTxnOffsetsOutliveRetention: while a transaction's offset is pending,
// retention neither expires the partition's offset nor deletes the group.
func TestTxnOffsetsOutliveRetention(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.OffsetsRetention, cfg.OffsetsRetentionCheckInterval = time.Minute, time.Second
	})
	plain := kmsg.NewPtrOffsetCommitRequest()
	plain.Version, plain.Group, plain.Generation = 8, "g", -1
	plain.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "a", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3, LeaderEpoch: -1}}}}
	if _, err := h.c.OffsetCommit(h.ctx(), plain); err != nil {
		t.Fatal(err)
	}
	expectCode(t, "transactional commit", h.txnCommit(3, "g", "", -1, 7, 5), 0)
	h.advance(2 * time.Minute)
	if offset, code := h.fetched("g"); offset != -1 || code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("pending past the retention: offset %d, %s", offset, codeName(code))
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version, fetch.Group = 7, "g"
	fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "a", Partitions: []int32{0}}}
	if resp, err := h.c.OffsetFetch(h.ctx(), fetch); err != nil || resp.Topics[0].Partitions[0].Offset != 3 {
		t.Fatalf("the committed offset under a pending one, past the retention: %+v %v; want 3 kept", resp, err)
	}
	if err := h.c.CompleteTransaction(h.ctx(), 7, true); err != nil {
		t.Fatal(err)
	}
	if offset, code := h.fetched("g"); offset != 5 || code != 0 {
		t.Fatalf("committed: offset %d, %s", offset, codeName(code))
	}
	h.advance(2 * time.Minute)
	if offset, code := h.fetched("g"); offset != -1 || code != 0 {
		t.Fatalf("expired once committed: offset %d, %s", offset, codeName(code))
	}
}
