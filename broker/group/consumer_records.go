package group

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
)

// The consumer group records Kafka 4.4 writes to __consumer_offsets
// (group-coordinator's ConsumerGroup*Key/Value.json; kmsg has none of
// them). Keys are not flexible and their int16 version is the record type;
// values are flexible (compact strings and arrays, tagged fields), led by
// their int16 version 0:
//
//	3 ConsumerGroupMetadata            key: group  value: epoch, tag 0: metadataHash
//	5 ConsumerGroupMemberMetadata      key: group, member  value: instanceId, rackId,
//	                                   clientId, clientHost, subscribedTopicNames,
//	                                   subscribedTopicRegex, rebalanceTimeoutMs, serverAssignor
//	6 ConsumerGroupTargetAssignmentMetadata  key: group  value: assignmentEpoch
//	7 ConsumerGroupTargetAssignmentMember    key: group, member  value: [topicId, [partition]]
//	8 ConsumerGroupCurrentMemberAssignment   key: group, member  value: memberEpoch,
//	                                   previousMemberEpoch, state, assigned, pendingRevocation
//
// Kafka 4.4 no longer writes ConsumerGroupPartitionMetadata (type 4): the
// metadata hash replaces it. Ours is an FNV-1a hash of the subscribed
// topics' names, IDs and partition counts, not Kafka's (KIP-1101): a group
// replayed from a Kafka log rebalances once.
const (
	consumerGroupMetadataType        = 3
	consumerGroupPartitionMetadata   = 4
	consumerGroupMemberMetadataType  = 5
	consumerTargetAssignmentMetadata = 6
	consumerTargetAssignmentMember   = 7
	consumerCurrentAssignmentType    = 8
	consumerRecordTypeMax            = 8
)

func metadataHash(subscribed map[string]TopicMetadata) int64 {
	h := fnv.New64a()
	for _, name := range slices.Sorted(maps.Keys(subscribed)) {
		t := subscribed[name]
		h.Write([]byte(name))
		h.Write(t.ID[:])
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(t.Partitions)))
	}
	return int64(h.Sum64())
}

func consumerKey(recordType int16, group string, member *string) []byte {
	key := kbin.AppendInt16(nil, recordType)
	key = kbin.AppendString(key, group)
	if member != nil {
		key = kbin.AppendString(key, *member)
	}
	return key
}

func appendTopicPartitions(dst []byte, p partitions) []byte {
	topics := slices.SortedFunc(maps.Keys(p), compareTopicIDs)
	dst = kbin.AppendCompactArrayLen(dst, len(topics))
	for _, t := range topics {
		dst = kbin.AppendUuid(dst, t)
		dst = kbin.AppendCompactArrayLen(dst, len(p[t]))
		for _, partition := range p[t] {
			dst = kbin.AppendInt32(dst, partition)
		}
		dst = kbin.AppendUvarint(dst, 0) // no tagged fields
	}
	return dst
}

func readTopicPartitions(b *kbin.Reader) partitions {
	out := make(partitions)
	n := b.CompactArrayLen()
	for i := int32(0); i < n && b.Ok(); i++ {
		t := b.Uuid()
		m := b.CompactArrayLen()
		for j := int32(0); j < m && b.Ok(); j++ {
			out.add(t, b.Int32())
		}
		skipTags(b)
	}
	return out
}

// skipTags reads past a tagged field section, calling tag for each field.
func skipTags(b *kbin.Reader) {
	readTags(b, nil)
}

func readTags(b *kbin.Reader, tag func(id uint32, value []byte)) {
	n := b.Uvarint()
	for i := uint32(0); i < n && b.Ok(); i++ {
		id := b.Uvarint()
		value := b.Span(int(b.Uvarint()))
		if tag != nil && b.Ok() {
			tag(id, value)
		}
	}
}

func consumerGroupMetadataRecord(group string, epoch int32, subscribed map[string]TopicMetadata) Record {
	value := kbin.AppendInt16(nil, 0)
	value = kbin.AppendInt32(value, epoch)
	value = kbin.AppendUvarint(value, 1) // one tagged field: 0, MetadataHash
	value = kbin.AppendUvarint(value, 0)
	value = kbin.AppendUvarint(value, 8)
	value = binary.BigEndian.AppendUint64(value, uint64(metadataHash(subscribed)))
	return Record{Key: consumerKey(consumerGroupMetadataType, group, nil), Value: value}
}

func consumerMemberMetadataRecord(group string, m *consumerMember) Record {
	value := kbin.AppendInt16(nil, 0)
	value = kbin.AppendCompactNullableString(value, m.instanceID)
	value = kbin.AppendCompactNullableString(value, m.rackID)
	value = kbin.AppendCompactString(value, m.clientID)
	value = kbin.AppendCompactString(value, m.clientHost)
	value = kbin.AppendCompactArrayLen(value, len(m.subscribedTopicNames))
	for _, name := range m.subscribedTopicNames {
		value = kbin.AppendCompactString(value, name)
	}
	value = kbin.AppendCompactNullableString(value, nonEmpty(m.subscribedTopicRegex))
	value = kbin.AppendInt32(value, int32(m.rebalanceTimeout.Milliseconds()))
	value = kbin.AppendCompactNullableString(value, nonEmpty(m.serverAssignor))
	value = kbin.AppendUvarint(value, 0)
	return Record{Key: consumerKey(consumerGroupMemberMetadataType, group, &m.id), Value: value}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func consumerCurrentAssignmentRecord(group string, m *consumerMember) Record {
	value := kbin.AppendInt16(nil, 0)
	value = kbin.AppendInt32(value, m.memberEpoch)
	value = kbin.AppendInt32(value, m.previousMemberEpoch)
	value = kbin.AppendInt8(value, int8(m.state))
	value = appendTopicPartitions(value, m.assigned)
	value = appendTopicPartitions(value, m.pendingRevocation)
	value = kbin.AppendUvarint(value, 0)
	return Record{Key: consumerKey(consumerCurrentAssignmentType, group, &m.id), Value: value}
}

// consumerTargetRecords writes a target assignment as Kafka does: the
// members whose target changed, then the epoch.
func consumerTargetRecords(group string, epoch int32, target, previous map[string]partitions) []Record {
	var records []Record
	for _, id := range slices.Sorted(maps.Keys(target)) {
		if old, ok := previous[id]; ok && old.equal(target[id]) {
			continue
		}
		value := kbin.AppendInt16(nil, 0)
		value = appendTopicPartitions(value, target[id])
		value = kbin.AppendUvarint(value, 0)
		records = append(records, Record{Key: consumerKey(consumerTargetAssignmentMember, group, &id), Value: value})
	}
	for _, id := range slices.Sorted(maps.Keys(previous)) {
		if _, ok := target[id]; !ok {
			records = append(records, Record{Key: consumerKey(consumerTargetAssignmentMember, group, &id)})
		}
	}
	value := kbin.AppendInt16(nil, 0)
	value = kbin.AppendInt32(value, epoch)
	value = kbin.AppendUvarint(value, 0)
	return append(records, Record{Key: consumerKey(consumerTargetAssignmentMetadata, group, nil), Value: value})
}

// consumerMemberTombstones removes a member: its current and target
// assignments, then its metadata (Kafka's order).
func consumerMemberTombstones(group, member string) []Record {
	return []Record{
		{Key: consumerKey(consumerCurrentAssignmentType, group, &member)},
		{Key: consumerKey(consumerTargetAssignmentMember, group, &member)},
		{Key: consumerKey(consumerGroupMemberMetadataType, group, &member)},
	}
}

// consumerGroupTombstones removes a consumer group without members.
func consumerGroupTombstones(group string) []Record {
	return []Record{
		{Key: consumerKey(consumerTargetAssignmentMetadata, group, nil)},
		{Key: consumerKey(consumerGroupPartitionMetadata, group, nil)},
		{Key: consumerKey(consumerGroupMetadataType, group, nil)},
	}
}

// replayConsumer applies a consumer group record (key version 3-8).
func (c *Coordinator) replayConsumer(recordType int16, r Record) error {
	kb := kbin.Reader{Src: r.Key[2:]}
	name := kb.String()
	var memberID string
	if recordType == consumerGroupMemberMetadataType || recordType == consumerTargetAssignmentMember || recordType == consumerCurrentAssignmentType {
		memberID = kb.String()
	}
	if err := kb.Complete(); err != nil {
		return fmt.Errorf("%w: consumer group record key of type %d: %v", ErrCorruptRecord, recordType, err)
	}
	g := c.groups[name]
	if r.Value == nil {
		if g == nil || g.consumer == nil {
			return nil
		}
		cg := g.consumer
		switch recordType {
		case consumerGroupMetadataType:
			delete(c.groups, name)
		case consumerGroupMemberMetadataType, consumerCurrentAssignmentType:
			delete(cg.members, memberID)
		case consumerTargetAssignmentMember:
			delete(cg.target, memberID)
		}
		return nil
	}
	if g == nil {
		g = c.loadingGroup(name)
	}
	if g.consumer == nil {
		g.consumer = newConsumerGroup()
	}
	cg := g.consumer
	member := func() *consumerMember {
		m := cg.members[memberID]
		if m == nil {
			m = &consumerMember{id: memberID, assigned: make(partitions), pendingRevocation: make(partitions)}
			cg.members[memberID] = m
		}
		return m
	}
	b := kbin.Reader{Src: r.Value}
	if version := b.Int16(); version != 0 {
		return fmt.Errorf("%w: consumer group record of type %d, value version %d", ErrCorruptRecord, recordType, version)
	}
	switch recordType {
	case consumerGroupMetadataType:
		cg.groupEpoch = b.Int32()
		readTags(&b, func(id uint32, value []byte) {
			if id == 0 && len(value) == 8 {
				cg.metadataHash = int64(binary.BigEndian.Uint64(value))
			}
		})
	case consumerGroupPartitionMetadata:
		return nil // Kafka before 4.1; the hash replaces it
	case consumerGroupMemberMetadataType:
		m := member()
		m.instanceID = b.CompactNullableString()
		m.rackID = b.CompactNullableString()
		m.clientID = b.CompactString()
		m.clientHost = b.CompactString()
		n := b.CompactArrayLen()
		m.subscribedTopicNames = nil
		for i := int32(0); i < n && b.Ok(); i++ {
			m.subscribedTopicNames = append(m.subscribedTopicNames, b.CompactString())
		}
		slices.Sort(m.subscribedTopicNames)
		if regex := b.CompactNullableString(); regex != nil {
			m.subscribedTopicRegex = *regex
		}
		m.rebalanceTimeout = milliseconds(b.Int32())
		if assignor := b.CompactNullableString(); assignor != nil {
			m.serverAssignor = *assignor
		}
		skipTags(&b)
	case consumerTargetAssignmentMetadata:
		cg.assignmentEpoch = b.Int32()
		skipTags(&b)
	case consumerTargetAssignmentMember:
		cg.target[memberID] = readTopicPartitions(&b)
		skipTags(&b)
	case consumerCurrentAssignmentType:
		m := member()
		m.memberEpoch = b.Int32()
		m.previousMemberEpoch = b.Int32()
		m.state = memberState(b.Int8())
		m.assigned = readTopicPartitions(&b)
		m.pendingRevocation = readTopicPartitions(&b)
		skipTags(&b)
		if m.state > memberUnreleasedPartitions || m.state < 0 {
			return fmt.Errorf("%w: consumer group %s member %s in state %d", ErrCorruptRecord, name, memberID, m.state)
		}
	}
	if err := b.Complete(); err != nil {
		return fmt.Errorf("%w: consumer group record of type %d of %s: %v", ErrCorruptRecord, recordType, name, err)
	}
	return nil
}

// loadedConsumer finishes the replay of a consumer group: the static
// members and owned partitions are indexed and every member has a full
// session timeout to heartbeat again.
func (c *Coordinator) loadedConsumer(g *group) {
	cg := g.consumer
	for _, m := range cg.members {
		if m.instanceID != nil {
			cg.staticMembers[*m.instanceID] = m.id
		}
		cg.own(m.assigned, m.memberEpoch)
		cg.own(m.pendingRevocation, m.memberEpoch)
		m.sessionDeadline = c.after(c.cfg.ConsumerSessionTimeout)
		if m.state == memberUnrevokedPartitions {
			m.rebalanceDeadline = c.after(m.rebalanceTimeout)
		}
	}
}

// consumerRecordType says whether r is a consumer group record, and which.
func consumerRecordType(r Record) (int16, bool) {
	if len(r.Key) < recordKeyVersionFieldBytesLen {
		return 0, false
	}
	t := int16(binary.BigEndian.Uint16(r.Key))
	return t, t >= consumerGroupMetadataType && t <= consumerRecordTypeMax
}
