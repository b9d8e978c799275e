package group

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicGroupType is the group type ListGroups (v5+) names classic groups.
const classicGroupType = "classic"

// authorizedOperationsOmitted is Kafka's answer when the client did not
// ask for authorized operations (Integer.MIN_VALUE).
const authorizedOperationsOmitted = -2147483648

// groupOperations is the bit set of ACL operations on a group (READ,
// DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS): mirrord has no
// authorizer, so every client may do all of them.
const groupOperations = 1<<3 | 1<<6 | 1<<8 | 1<<10 | 1<<11

// listGroups is ListGroups: every group, filtered by state (v4+) and type
// (v5+), both matched without regard to case as Kafka does.
func (c *Coordinator) listGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	matches := func(filter []string, value string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, value) })
	}
	names := make([]string, 0, len(c.groups))
	for name := range c.groups {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		state, groupType, protocolType := c.groups[name].listed()
		if !matches(req.StatesFilter, state) || !matches(req.TypesFilter, groupType) {
			continue
		}
		resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{
			Group:        name,
			ProtocolType: protocolType,
			GroupState:   state,
			GroupType:    groupType,
		})
	}
	return resp
}

// describeGroups is DescribeGroups: a group that does not exist is
// described as Dead (GROUP_ID_NOT_FOUND comes only with version 6);
// members carry their metadata and assignment only while Stable.
func (c *Coordinator) describeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		d := kmsg.DescribeGroupsResponseGroup{Group: name, AuthorizedOperations: authorizedOperationsOmitted, Members: []kmsg.DescribeGroupsResponseGroupMember{}}
		if req.IncludeAuthorizedOperations {
			d.AuthorizedOperations = groupOperations
		}
		g := c.groups[name]
		switch {
		case name == "":
			d.ErrorCode = kerr.InvalidGroupID.Code
			d.State = Dead.String()
		case g == nil:
			d.State = Dead.String()
		case g.consumer != nil:
			c.describeConsumerGroup(g, &d)
		default:
			d.State = g.state.String()
			d.ProtocolType = g.protocolType
			stable := g.state == Stable
			if stable && g.protocolName != nil {
				d.Protocol = *g.protocolName
			}
			for _, id := range g.order {
				m := g.members[id]
				dm := kmsg.DescribeGroupsResponseGroupMember{
					MemberID:         id,
					InstanceID:       m.instanceID,
					ClientID:         m.clientID,
					ClientHost:       m.clientHost,
					ProtocolMetadata: []byte{},
					MemberAssignment: []byte{},
				}
				if stable {
					dm.ProtocolMetadata = nonNil(m.metadata(d.Protocol))
					dm.MemberAssignment = nonNil(m.assignment)
				}
				d.Members = append(d.Members, dm)
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

// deleteGroups is DeleteGroups: only Empty groups go, with their offsets,
// by tombstones written before the answer.
func (c *Coordinator) deleteGroups(req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		result := kmsg.DeleteGroupsResponseGroup{Group: name}
		g := c.groups[name]
		switch {
		case name == "":
			result.ErrorCode = kerr.InvalidGroupID.Code
		case g == nil || g.state == Dead:
			result.ErrorCode = kerr.GroupIDNotFound.Code
		case g.state != Empty || (g.consumer != nil && len(g.consumer.members) > 0):
			result.ErrorCode = kerr.NonEmptyGroup.Code
		default:
			result.ErrorCode = c.deleteGroup(g)
		}
		resp.Groups = append(resp.Groups, result)
	}
	return resp
}

func (c *Coordinator) deleteGroup(g *group) int16 {
	var records []Record
	topics := make([]string, 0, len(g.offsets))
	for topic := range g.offsets {
		topics = append(topics, topic)
	}
	slices.Sort(topics)
	for _, topic := range topics {
		partitions := make([]int32, 0, len(g.offsets[topic]))
		for p := range g.offsets[topic] {
			partitions = append(partitions, p)
		}
		slices.Sort(partitions)
		for _, p := range partitions {
			records = append(records, offsetTombstone(g.name, topic, p))
		}
	}
	if g.consumer != nil {
		records = append(records, consumerGroupTombstones(g.name)...)
	} else {
		records = append(records, groupTombstone(g.name))
	}
	if err := c.append(records...); err != nil {
		return storeFailedCode
	}
	// Pending members of an Empty group just lose their IDs.
	clear(g.pending)
	g.transition(Dead, c.now)
	c.done(g)
	return 0
}
