package group

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactional offset commits (TxnOffsetCommit, versions 0-4), as
// Kafka's OffsetMetadataManager keeps them:
//
//	TxnOffsetCommit ---records in a transactional batch of the producer--> pending[producer][group]
//	COMMIT marker   ---each pending offset written after the committed one--> committed
//	ABORT marker    ---------------------------------------------------------> dropped
//
// The transaction coordinator (the broker) writes the marker to
// __consumer_offsets and then calls CompleteTransaction; at replay the
// marker comes as a Record with Marker set, in its place in the log, so
// replay rebuilds the same state: the offsets of a transaction with no
// marker yet stay pending. While a group has a pending offset for a
// partition, OffsetFetch with RequireStable answers
// UNSTABLE_OFFSET_COMMIT for it.
//
// Offsets with a pending transactional offset do not expire, and a group
// with one is not deleted by retention (cleanupExpiredOffsets).
//
// Bounds: pending holds one entry per producer with an open transaction
// that committed offsets, each bounded by the partitions it committed;
// the transaction coordinator ends every transaction within its timeout
// (at most transaction.max.timeout.ms).

// Marker is the kind of a transaction marker.
type Marker int8

// The markers: none (a data record), COMMIT and ABORT.
const (
	NoMarker Marker = iota
	CommitMarker
	AbortMarker
)

func (m Marker) String() string {
	switch m {
	case NoMarker:
		return "none"
	case CommitMarker:
		return "COMMIT"
	case AbortMarker:
		return "ABORT"
	}
	return fmt.Sprintf("Marker(%d)", int8(m))
}

// topicPartition names a partition of a pending offset.
type topicPartition struct {
	topic     string
	partition int32
}

// pendingOffsets maps a producer ID to the offsets its open transaction
// committed, by group.
type pendingOffsets map[int64]map[string]map[topicPartition]committed

func (p pendingOffsets) add(producerID int64, group string, tp topicPartition, c committed) {
	groups := p[producerID]
	if groups == nil {
		groups = make(map[string]map[topicPartition]committed)
		p[producerID] = groups
	}
	offsets := groups[group]
	if offsets == nil {
		offsets = make(map[topicPartition]committed)
		groups[group] = offsets
	}
	offsets[tp] = c
}

// has reports whether some open transaction committed an offset for the
// group's partition (OffsetMetadataManager.hasPendingTransactionalOffsets).
func (p pendingOffsets) has(group string, tp topicPartition) bool {
	for _, groups := range p {
		if _, ok := groups[group][tp]; ok {
			return true
		}
	}
	return false
}

// hasGroup reports whether an open transaction committed offsets for the
// group: its offsets do not expire and it is not deleted meanwhile.
func (p pendingOffsets) hasGroup(group string) bool {
	for _, groups := range p {
		if _, ok := groups[group]; ok {
			return true
		}
	}
	return false
}

// TxnOffsetCommit answers a TxnOffsetCommit request (versions 0-4) once
// its records are in the store. The caller has checked that the producer
// added __consumer_offsets to its transaction (AddOffsetsToTxn); the
// store checks it again as it appends.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, error) {
	return do(ctx, c, func(reply func(*kmsg.TxnOffsetCommitResponse)) { reply(c.txnOffsetCommit(req)) })
}

// CompleteTransaction applies the marker the transaction coordinator
// wrote to the store for producerID's transaction: its pending offsets
// become committed (commit) or are dropped.
func (c *Coordinator) CompleteTransaction(ctx context.Context, producerID int64, commit bool) error {
	return c.submit(ctx, func() { c.completeTransaction(producerID, commit) })
}

// txnOffsetCommit is OffsetMetadataManager.commitTransactionalOffset.
func (c *Coordinator) txnOffsetCommit(req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	codes := newPartitionCodes(len(req.Topics), func(i int) int { return len(req.Topics[i].Partitions) })
	defer func() {
		for i, t := range req.Topics {
			rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic}
			for j, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: codes[i][j]})
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}()
	setAll := codes.setUndecided
	// Unknown partitions first, as KafkaApis answers them before the
	// coordinator sees the request.
	if c.cfg.Partitions != nil {
		for i, t := range req.Topics {
			for j, p := range t.Partitions {
				if !c.cfg.Partitions(t.Topic, p.Partition) {
					codes[i][j] = kerr.UnknownTopicOrPartition.Code
				}
			}
		}
	}
	if req.Group == "" {
		setAll(kerr.InvalidGroupID.Code)
		return resp
	}
	generation, memberID, instanceID := req.Generation, req.MemberID, req.InstanceID
	if req.Version < 3 { // no member fields before v3 (KIP-447)
		generation, memberID, instanceID = -1, "", nil
	}
	g := c.groups[req.Group]
	created := g == nil
	if created {
		if generation >= 0 {
			setAll(kerr.IllegalGeneration.Code)
			return resp
		}
		g = newGroup(req.Group, c.now) // a simple group, as for OffsetCommit
	}
	if code := g.validateTxnOffsetCommit(generation, memberID, instanceID); code != 0 {
		setAll(code)
		return resp
	}
	type change struct {
		tp        topicPartition
		committed committed
	}
	var changes []change
	var records []Record
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			if codes[i][j] != 0 {
				continue
			}
			metadata := ""
			if p.Metadata != nil {
				metadata = *p.Metadata
			}
			if len(metadata) > c.cfg.OffsetMetadataMaxBytes {
				codes[i][j] = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			leaderEpoch := p.LeaderEpoch
			if req.Version < 2 || leaderEpoch < 0 {
				leaderEpoch = noLeaderEpoch
			}
			ch := change{topicPartition{t.Topic, p.Partition}, committed{
				offset:          p.Offset,
				leaderEpoch:     leaderEpoch,
				metadata:        metadata,
				commitTimestamp: unixMilli(c.now),
				expireTimestamp: noExpireTimestamp,
			}}
			r := offsetCommitRecord(g.name, t.Topic, p.Partition, ch.committed)
			r.Transactional, r.ProducerID, r.ProducerEpoch = true, req.ProducerID, req.ProducerEpoch
			changes = append(changes, ch)
			records = append(records, r)
		}
	}
	if len(records) == 0 {
		return resp
	}
	if err := c.append(records...); err != nil {
		setAll(txnAppendErrorCode(err))
		return resp
	}
	for _, ch := range changes {
		ch.committed.sequence = g.nextOffsetSequence()
		c.pending.add(req.ProducerID, g.name, ch.tp, ch.committed)
	}
	if created {
		c.groups[g.name] = g
	}
	c.done(g)
	return resp
}

// txnAppendErrorCode is the answer to a transactional append the store
// refused: the transaction check's own code (the producer is fenced, or
// did not add __consumer_offsets to its transaction), else the answer to
// any failed append.
func txnAppendErrorCode(err error) int16 {
	var kafkaErr *kerr.Error
	if errors.As(err, &kafkaErr) {
		switch kafkaErr {
		case kerr.InvalidProducerEpoch, kerr.InvalidTxnState, kerr.InvalidProducerIDMapping, kerr.ProducerFenced:
			return kafkaErr.Code
		}
	}
	return storeFailedCode
}

// validateTxnOffsetCommit is ClassicGroup.validateOffsetCommit for a
// transactional commit: unlike OffsetCommit, a commit without a member is
// taken from a group that is not Empty, and a commit during
// CompletingRebalance is taken too (the transaction is fenced otherwise,
// KIP-447).
func (g *group) validateTxnOffsetCommit(generation int32, memberID string, instanceID *string) int16 {
	if g.consumer != nil {
		return g.consumer.validateTxnOffsetCommit(generation, memberID)
	}
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if generation < 0 && g.state == Empty {
		return 0
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if code := g.validateMember(memberID, instanceID); code != 0 {
			return code
		}
		if generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
	}
	return 0
}

// validateTxnOffsetCommit is ConsumerGroup.validateOffsetCommit for a
// transactional commit: any OffsetCommit version, and a stale member epoch
// is ILLEGAL_GENERATION (validateTransactionalOffsetCommit).
func (cg *consumerGroup) validateTxnOffsetCommit(memberEpoch int32, memberID string) int16 {
	if memberEpoch < 0 && len(cg.members) == 0 {
		return 0
	}
	m := cg.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case memberEpoch != m.memberEpoch:
		return kerr.IllegalGeneration.Code
	}
	return 0
}

// nextOffsetSequence hands out the next committed.sequence of g.
func (g *group) nextOffsetSequence() uint64 {
	g.offsetSequence++
	return g.offsetSequence
}

// completeTransaction applies a marker the loop was told of.
func (c *Coordinator) completeTransaction(producerID int64, commit bool) {
	for _, g := range c.applyMarker(producerID, commit) {
		c.done(g)
	}
}

// applyMarker is OffsetMetadataManager.replayEndTransactionMarker: on
// commit each pending offset of the producer replaces the committed one
// unless that one was written later (a plain OffsetCommit after the
// transaction's); on abort they are dropped. It returns the groups
// changed.
func (c *Coordinator) applyMarker(producerID int64, commit bool) []*group {
	groups := c.pending[producerID]
	delete(c.pending, producerID)
	if !commit {
		return nil
	}
	changed := make([]*group, 0, len(groups))
	for name, offsets := range groups {
		g := c.loadingGroup(name)
		for tp, pending := range offsets {
			if existing, ok := g.offset(tp.topic, tp.partition); ok && existing.sequence > pending.sequence {
				continue
			}
			g.setOffset(tp.topic, tp.partition, pending)
		}
		changed = append(changed, g)
	}
	return changed
}

// replayTransactional replays a record of a transaction, or its marker.
func (c *Coordinator) replayTransactional(r Record) error {
	if r.Marker != NoMarker {
		c.applyMarker(r.ProducerID, r.Marker == CommitMarker)
		return nil
	}
	d, err := decodeRecord(r)
	if err != nil {
		return err
	}
	if d.offsetKey == nil || d.offsetValue == nil {
		return fmt.Errorf("%w: a transactional record that is not an offset commit", ErrCorruptRecord)
	}
	k, v := d.offsetKey, d.offsetValue
	g := c.loadingGroup(k.Group)
	c.pending.add(r.ProducerID, k.Group, topicPartition{k.Topic, k.Partition}, committed{
		offset:          v.Offset,
		leaderEpoch:     v.LeaderEpoch,
		metadata:        v.Metadata,
		commitTimestamp: v.CommitTimestamp,
		expireTimestamp: v.ExpireTimestamp,
		sequence:        g.nextOffsetSequence(),
	})
	return nil
}

// markUnstable answers UNSTABLE_OFFSET_COMMIT, with no offset, for each
// partition of out that has a pending transactional offset, when the
// request asks for stable offsets (OffsetMetadataManager.fetchOffsets).
func (c *Coordinator) markUnstable(out *kmsg.OffsetFetchResponseGroup, requireStable bool) {
	if !requireStable || len(c.pending) == 0 {
		return
	}
	for i := range out.Topics {
		t := &out.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.ErrorCode == 0 && c.pending.has(out.Group, topicPartition{t.Topic, p.Partition}) {
				p.ErrorCode = kerr.UnstableOffsetCommit.Code
				p.Offset, p.LeaderEpoch, p.Metadata = -1, noLeaderEpoch, new(string)
			}
		}
	}
}
