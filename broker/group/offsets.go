package group

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetCommit is OffsetMetadataManager.commitOffset for classic groups:
// members commit in their generation; anyone commits to an Empty group
// with generation -1 (assign() consumers, admin tools), which creates it.
// The commits are in the store before the answer.
func (c *Coordinator) offsetCommit(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	codes := newPartitionCodes(len(req.Topics), func(i int) int { return len(req.Topics[i].Partitions) })
	defer func() {
		for i, t := range req.Topics {
			rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic}
			for j, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: codes[i][j]})
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}()
	setAll := codes.setUndecided
	if req.Group == "" {
		setAll(kerr.InvalidGroupID.Code)
		return resp
	}
	if c.cfg.Partitions != nil {
		for i, t := range req.Topics {
			for j, p := range t.Partitions {
				if !c.cfg.Partitions(t.Topic, p.Partition) {
					codes[i][j] = kerr.UnknownTopicOrPartition.Code
				}
			}
		}
	}
	g := c.groups[req.Group]
	created := g == nil
	if created {
		switch {
		case req.Generation < 0: // a simple group: created by its first commit
			g = newGroup(req.Group, c.now)
		case req.Version >= 9:
			setAll(kerr.GroupIDNotFound.Code)
			return resp
		default:
			setAll(kerr.IllegalGeneration.Code)
			return resp
		}
	}
	if code := g.validateOffsetCommit(req); code != 0 {
		setAll(code)
		return resp
	}
	type change struct {
		topic     string
		partition int32
		committed committed
	}
	var changes []change
	var records []Record
	commitTimestamp := unixMilli(c.now)
	expireTimestamp := int64(noExpireTimestamp)
	if req.Version <= 4 && req.RetentionTimeMillis >= 0 {
		expireTimestamp = commitTimestamp + req.RetentionTimeMillis
	}
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
			if req.Version < 6 || leaderEpoch < 0 {
				leaderEpoch = noLeaderEpoch
			}
			ch := change{t.Topic, p.Partition, committed{
				offset:          p.Offset,
				leaderEpoch:     leaderEpoch,
				metadata:        metadata,
				commitTimestamp: commitTimestamp,
				expireTimestamp: expireTimestamp,
			}}
			changes = append(changes, ch)
			records = append(records, offsetCommitRecord(g.name, ch.topic, ch.partition, ch.committed))
		}
	}
	if len(records) == 0 {
		return resp
	}
	if err := c.append(records...); err != nil {
		setAll(storeFailedCode)
		return resp
	}
	for _, ch := range changes {
		g.setOffset(ch.topic, ch.partition, ch.committed)
	}
	if created {
		c.groups[g.name] = g
	}
	c.done(g)
	return resp
}

// validateOffsetCommit is ClassicGroup.validateOffsetCommit for a
// non-transactional commit.
func (g *group) validateOffsetCommit(req *kmsg.OffsetCommitRequest) int16 {
	if g.consumer != nil {
		return g.consumer.validateOffsetCommit(req)
	}
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if req.Generation < 0 && g.state == Empty {
		return 0
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil {
		if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
			return code
		}
		if req.Generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
	} else if g.state != Empty {
		return kerr.UnknownMemberID.Code
	}
	if g.state == CompletingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// offsetFetch answers for one group (versions 1-7) or several (8+).
func (c *Coordinator) offsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			fetched := c.fetchGroup(rg.Group, rg.Topics)
			c.markUnstable(&fetched, req.RequireStable)
			resp.Groups = append(resp.Groups, fetched)
		}
		return resp
	}
	var topics []kmsg.OffsetFetchRequestGroupTopic
	if req.Topics != nil || req.Version < 2 {
		topics = make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	fetched := c.fetchGroup(req.Group, topics)
	c.markUnstable(&fetched, req.RequireStable)
	resp.ErrorCode = fetched.ErrorCode
	for _, t := range fetched.Topics {
		rt := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			code := p.ErrorCode
			if code == 0 && req.Version < 2 {
				code = fetched.ErrorCode // version 1 has no top-level error
			}
			rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseTopicPartition{
				Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: code,
			})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// fetchGroup is OffsetMetadataManager.fetchOffsets (topics listed) and
// fetchAllOffsets (topics nil). A partition without a committed offset, or
// of a group that does not exist, answers offset -1. The caller marks
// the partitions with pending transactional offsets (markUnstable).
func (c *Coordinator) fetchGroup(name string, topics []kmsg.OffsetFetchRequestGroupTopic) kmsg.OffsetFetchResponseGroup {
	out := kmsg.OffsetFetchResponseGroup{Group: name}
	if name == "" {
		out.ErrorCode = kerr.InvalidGroupID.Code
		return out
	}
	g := c.groups[name]
	if topics == nil {
		if g == nil {
			return out
		}
		names := make([]string, 0, len(g.offsets))
		for topic := range g.offsets {
			names = append(names, topic)
		}
		slices.Sort(names)
		for _, topic := range names {
			partitions := make([]int32, 0, len(g.offsets[topic]))
			for p := range g.offsets[topic] {
				partitions = append(partitions, p)
			}
			slices.Sort(partitions)
			topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: topic, Partitions: partitions})
		}
	}
	for _, t := range topics {
		rt := kmsg.OffsetFetchResponseGroupTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rp := kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p, Offset: -1, LeaderEpoch: noLeaderEpoch}
			if g != nil {
				if committed, ok := g.offset(t.Topic, p); ok {
					rp.Offset = committed.offset
					rp.LeaderEpoch = committed.leaderEpoch
					rp.Metadata = &committed.metadata
				}
			}
			if rp.Metadata == nil {
				rp.Metadata = new(string)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}

// offsetDelete is OffsetMetadataManager.deleteOffsets: a group with live
// members may delete offsets only of topics it does not consume, and only
// if it uses the consumer protocol (whose subscriptions say which).
func (c *Coordinator) offsetDelete(req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	g := c.groups[req.Group]
	switch {
	case req.Group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	case g == nil:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp
	case g.state != Empty && g.protocolType != consumerProtocolType:
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		return resp
	}
	type key struct {
		topic     string
		partition int32
	}
	var deleted []key
	var records []Record
	for _, t := range req.Topics {
		rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
		subscribed := g.subscribedTo(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition}
			switch {
			case c.cfg.Partitions != nil && !c.cfg.Partitions(t.Topic, p.Partition):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case subscribed:
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			default:
				if _, ok := g.offset(t.Topic, p.Partition); ok {
					deleted = append(deleted, key{t.Topic, p.Partition})
					records = append(records, offsetTombstone(g.name, t.Topic, p.Partition))
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(records) > 0 {
		if err := c.append(records...); err != nil {
			resp.ErrorCode = storeFailedCode
			resp.Topics = nil
			return resp
		}
	}
	for _, k := range deleted {
		g.deleteOffset(k.topic, k.partition)
	}
	c.done(g)
	return resp
}

// partitionCodes are the error codes of a commit request's partitions,
// per request topic and partition: 0 until decided.
type partitionCodes [][]int16

func newPartitionCodes(topics int, partitions func(i int) int) partitionCodes {
	codes := make(partitionCodes, topics)
	for i := range codes {
		codes[i] = make([]int16, partitions(i))
	}
	return codes
}

// setUndecided answers code for every partition not decided yet.
func (c partitionCodes) setUndecided(code int16) {
	for i := range c {
		for j := range c[i] {
			if c[i][j] == 0 {
				c[i][j] = code
			}
		}
	}
}
