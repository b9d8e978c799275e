package group

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerProtocolType is the protocol type of Kafka's consumers; only
// their subscriptions are read (for OffsetDelete).
const consumerProtocolType = "consumer"

func unixMilli(t time.Time) int64 { return t.UnixMilli() }

// emptyGroupMetadata is the record Kafka writes for a group just created:
// no protocol type, generation 0, no members.
func emptyGroupMetadata(g *group) *kmsg.GroupMetadataValue {
	return &kmsg.GroupMetadataValue{Generation: 0, CurrentStateTimestamp: unixMilli(g.stateTimestamp)}
}

// assignments returns each member's current assignment.
func (g *group) assignments() map[string][]byte {
	out := make(map[string][]byte, len(g.members))
	for id, m := range g.members {
		out[id] = m.assignment
	}
	return out
}

// metadata is the GroupMetadataValue of g with the given assignment of
// each member.
func (g *group) metadata(assignment map[string][]byte) *kmsg.GroupMetadataValue {
	v := &kmsg.GroupMetadataValue{
		ProtocolType:          g.protocolType,
		Generation:            g.generation,
		Protocol:              g.protocolName,
		CurrentStateTimestamp: unixMilli(g.stateTimestamp),
	}
	if g.leader != "" {
		leader := g.leader
		v.Leader = &leader
	}
	protocol := ""
	if g.protocolName != nil {
		protocol = *g.protocolName
	}
	for _, id := range g.order {
		m := g.members[id]
		a, ok := assignment[id]
		if !ok || g.protocolName == nil {
			panic("group: " + g.name + ": writing member " + id + " with no assignment or no protocol")
		}
		v.Members = append(v.Members, kmsg.GroupMetadataValueMember{
			MemberID:               id,
			InstanceID:             m.instanceID,
			ClientID:               m.clientID,
			ClientHost:             m.clientHost,
			RebalanceTimeoutMillis: int32(m.rebalanceTimeout / time.Millisecond),
			SessionTimeoutMillis:   int32(m.sessionTimeout / time.Millisecond),
			Subscription:           m.metadata(protocol),
			Assignment:             nonNil(a),
		})
	}
	return v
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// replay applies one record of the log to the groups being loaded.
func (c *Coordinator) replay(r Record) error {
	if r.Transactional {
		return c.replayTransactional(r)
	}
	if recordType, ok := consumerRecordType(r); ok {
		return c.replayConsumer(recordType, r)
	}
	d, err := decodeRecord(r)
	if err != nil {
		return err
	}
	switch {
	case d.offsetKey != nil:
		k := d.offsetKey
		if d.offsetValue == nil {
			if g := c.groups[k.Group]; g != nil {
				g.deleteOffset(k.Topic, k.Partition)
			}
			return nil
		}
		v := d.offsetValue
		c.loadingGroup(k.Group).setOffset(k.Topic, k.Partition, committed{
			offset:          v.Offset,
			leaderEpoch:     v.LeaderEpoch,
			metadata:        v.Metadata,
			commitTimestamp: v.CommitTimestamp,
			expireTimestamp: v.ExpireTimestamp,
		})
	case d.groupValue == nil:
		delete(c.groups, d.groupKey.Group)
	default:
		return c.loadingGroup(d.groupKey.Group).load(d.groupValue, c.now)
	}
	return nil
}

func (c *Coordinator) loadingGroup(name string) *group {
	g := c.groups[name]
	if g == nil {
		g = newGroup(name, c.now)
		c.groups[name] = g
	}
	return g
}

// load replaces g's generation and members with those of a record.
func (g *group) load(v *kmsg.GroupMetadataValue, now time.Time) error {
	if len(v.Members) > 0 && v.Protocol == nil {
		return fmt.Errorf("%w: group %s has %d members and no protocol", ErrCorruptRecord, g.name, len(v.Members))
	}
	stateTimestamp := now
	if v.Version >= 2 && v.CurrentStateTimestamp >= 0 {
		stateTimestamp = time.UnixMilli(v.CurrentStateTimestamp)
	}
	offsets := g.offsets
	*g = *newGroup(g.name, stateTimestamp)
	g.offsets = offsets
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	g.protocolName = v.Protocol
	for _, vm := range v.Members {
		if g.hasMember(vm.MemberID) || (vm.InstanceID != nil && g.staticMembers[*vm.InstanceID] != "") {
			return fmt.Errorf("%w: group %s lists member %s twice", ErrCorruptRecord, g.name, vm.MemberID)
		}
		rebalance := milliseconds(vm.RebalanceTimeoutMillis)
		if v.Version == 0 {
			rebalance = milliseconds(vm.SessionTimeoutMillis)
		}
		g.add(&member{
			id:               vm.MemberID,
			instanceID:       vm.InstanceID,
			clientID:         vm.ClientID,
			clientHost:       vm.ClientHost,
			rebalanceTimeout: rebalance,
			sessionTimeout:   milliseconds(vm.SessionTimeoutMillis),
			protocolType:     v.ProtocolType,
			protocols:        []kmsg.JoinGroupRequestProtocol{{Name: *v.Protocol, Metadata: vm.Subscription}},
			assignment:       vm.Assignment,
		})
	}
	if v.Leader != nil && g.hasMember(*v.Leader) {
		g.leader = *v.Leader
	}
	return nil
}

// loaded finishes the replay: groups with members are Stable, and every
// member has a full session timeout to heartbeat again.
func (c *Coordinator) loaded() {
	for _, g := range c.groups {
		if len(g.members) > 0 {
			g.state, g.previousState = Stable, Stable
		}
		for _, m := range g.members {
			m.heartbeatDeadline = c.after(m.sessionTimeout)
		}
		g.subscribed = g.computeSubscribedTopics()
		if g.consumer != nil {
			c.loadedConsumer(g)
		}
		c.done(g)
	}
}

// computeSubscribedTopics reads the topics in the consumer protocol
// subscriptions of the members (ClassicGroup.computeSubscribedTopics): nil
// when not known.
func (g *group) computeSubscribedTopics() map[string]bool {
	if g.protocolType != consumerProtocolType {
		return nil
	}
	topics := make(map[string]bool)
	if len(g.members) == 0 {
		return topics
	}
	if g.protocolName == nil {
		return nil
	}
	for _, m := range g.members {
		// Every version of ConsumerProtocolSubscription starts with the
		// version and the topics of version 0.
		b := kbin.Reader{Src: m.metadata(*g.protocolName)}
		b.Int16()
		n := b.ArrayLen()
		for i := int32(0); i < n && b.Ok(); i++ {
			topics[b.String()] = true
		}
		if !b.Ok() {
			return nil
		}
	}
	return topics
}

// subscribedTo is ClassicGroup.isSubscribedToTopic.
func (g *group) subscribedTo(topic string) bool {
	if g.consumer != nil {
		return g.consumer.subscribedTo(topic)
	}
	if g.subscribed != nil {
		return g.subscribed[topic]
	}
	return g.protocolType == consumerProtocolType
}

func (g *group) setOffset(topic string, partition int32, c committed) {
	if c.sequence == 0 {
		c.sequence = g.nextOffsetSequence()
	}
	partitions := g.offsets[topic]
	if partitions == nil {
		partitions = make(map[int32]committed)
		g.offsets[topic] = partitions
	}
	partitions[partition] = c
}

func (g *group) deleteOffset(topic string, partition int32) {
	partitions := g.offsets[topic]
	delete(partitions, partition)
	if len(partitions) == 0 {
		delete(g.offsets, topic)
	}
}

func (g *group) offset(topic string, partition int32) (committed, bool) {
	c, ok := g.offsets[topic][partition]
	return c, ok
}
