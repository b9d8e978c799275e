package group

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The consumer group's side of the shared group APIs: describe, list,
// delete, offset commits, and a classic JoinGroup meeting a consumer group.

// consumerGroupType is the group type ListGroups (v5+) names consumer
// groups; their protocol type is the consumer's too.
const consumerGroupType = "consumer"

// memberTypeConsumer is ConsumerGroupDescribe's MemberType (v1+) of a
// member of the consumer protocol.
const memberTypeConsumer = 1

// consumerDescribe is ConsumerGroupDescribe.
func (c *Coordinator) consumerDescribe(req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	names := make(map[topicID]string)
	for _, t := range c.topicIndex().byName {
		names[t.ID] = t.Name
	}
	for _, name := range req.Groups {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group = name
		if req.IncludeAuthorizedOperations {
			d.AuthorizedOperations = groupOperations
		}
		g := c.groups[name]
		switch {
		case name == "":
			d.ErrorCode = kerr.InvalidGroupID.Code
		case g == nil:
			d.ErrorCode = kerr.GroupIDNotFound.Code
			d.ErrorMessage = kmsg.StringPtr("Group " + name + " not found.")
		case g.consumer == nil:
			d.ErrorCode = kerr.GroupIDNotFound.Code
			d.ErrorMessage = kmsg.StringPtr("Group " + name + " is not a consumer group.")
		default:
			cg := g.consumer
			d.State = cg.state().String()
			d.Epoch = cg.groupEpoch
			d.AssignmentEpoch = cg.assignmentEpoch
			d.AssignorName = preferredAssignor(cg.members, c.cfg.ConsumerAssignors)
			d.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{}
			for _, id := range slices.Sorted(maps.Keys(cg.members)) {
				m := cg.members[id]
				dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
				dm.MemberID, dm.InstanceID, dm.RackID = m.id, m.instanceID, m.rackID
				dm.MemberEpoch = m.memberEpoch
				dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
				dm.SubscribedTopics = slices.Clone(m.subscribedTopicNames)
				if dm.SubscribedTopics == nil {
					dm.SubscribedTopics = []string{}
				}
				dm.SubscribedTopicRegex = nonEmpty(m.subscribedTopicRegex)
				dm.Assignment = describeAssignment(m.assigned, names)
				dm.TargetAssignment = describeAssignment(cg.target[id], names)
				dm.MemberType = memberTypeConsumer
				d.Members = append(d.Members, dm)
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

func describeAssignment(p partitions, names map[topicID]string) kmsg.Assignment {
	out := kmsg.Assignment{TopicPartitions: []kmsg.AssignmentTopicPartition{}}
	for _, t := range slices.SortedFunc(maps.Keys(p), compareTopicIDs) {
		out.TopicPartitions = append(out.TopicPartitions, kmsg.AssignmentTopicPartition{TopicID: t, Topic: names[t], Partitions: slices.Clone(p[t])})
	}
	return out
}

// listed is a group as ListGroups and DescribeGroups show it: its state,
// type and protocol type.
func (g *group) listed() (state, groupType, protocolType string) {
	if g.consumer != nil {
		return g.consumer.state().String(), consumerGroupType, consumerProtocolType
	}
	return g.state.String(), classicGroupType, g.protocolType
}

// describeConsumerGroup is ConsumerGroup.asDescribedGroup: a consumer
// group seen through DescribeGroups, its members without protocol metadata
// or assignment (they are not classic members), the assignor as protocol.
func (c *Coordinator) describeConsumerGroup(g *group, d *kmsg.DescribeGroupsResponseGroup) {
	cg := g.consumer
	d.State = cg.state().String()
	d.ProtocolType = consumerProtocolType
	d.Protocol = preferredAssignor(cg.members, c.cfg.ConsumerAssignors)
	for _, id := range slices.Sorted(maps.Keys(cg.members)) {
		m := cg.members[id]
		d.Members = append(d.Members, kmsg.DescribeGroupsResponseGroupMember{
			MemberID: id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			ProtocolMetadata: []byte{}, MemberAssignment: []byte{},
		})
	}
}

// subscribedTo says whether a member subscribes to topic, by name or regex.
func (cg *consumerGroup) subscribedTo(topic string) bool {
	for _, m := range cg.members {
		if slices.Contains(m.subscribedTopicNames, topic) {
			return true
		}
		if m.subscribedTopicRegex != "" {
			if re, err := compileSubscriptionRegex(m.subscribedTopicRegex); err == nil && re.MatchString(topic) {
				return true
			}
		}
	}
	return false
}

// validateOffsetCommit is ConsumerGroup.validateOffsetCommit for a
// non-transactional commit: anyone may commit to an empty group with a
// negative epoch; a member commits at its member epoch, with OffsetCommit
// v9 or later.
func (cg *consumerGroup) validateOffsetCommit(req *kmsg.OffsetCommitRequest) int16 {
	if req.Generation < 0 && len(cg.members) == 0 {
		return 0
	}
	m := cg.members[req.MemberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case req.Version < 9:
		return kerr.UnsupportedVersion.Code
	case req.Generation != m.memberEpoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// classicJoinToConsumerGroup handles a JoinGroup naming a consumer group:
// an empty one becomes a classic group (its offsets stay), a non-empty one
// answers INCONSISTENT_GROUP_PROTOCOL (classic members in a consumer group,
// KIP-848's online migration, are not built).
func (c *Coordinator) classicJoinToConsumerGroup(g *group) int16 {
	if len(g.consumer.members) > 0 {
		return kerr.InconsistentGroupProtocol.Code
	}
	converted := newGroup(g.name, c.now)
	converted.offsets = g.offsets
	records := append(consumerGroupTombstones(g.name), groupMetadataRecord(g.name, emptyGroupMetadata(converted)))
	if err := c.append(records...); err != nil {
		return storeFailedCode
	}
	c.groups[g.name] = converted
	return 0
}
