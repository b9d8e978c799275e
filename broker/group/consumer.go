package group

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupHeartbeat answers a ConsumerGroupHeartbeat request
// (versions 0-1): the consumer protocol of KIP-848.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, client Client, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	return do(ctx, c, func(reply func(*kmsg.ConsumerGroupHeartbeatResponse)) { reply(c.consumerHeartbeat(client, req)) })
}

// ConsumerGroupDescribe answers a ConsumerGroupDescribe request (versions 0-1).
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) (*kmsg.ConsumerGroupDescribeResponse, error) {
	return do(ctx, c, func(reply func(*kmsg.ConsumerGroupDescribeResponse)) { reply(c.consumerDescribe(req)) })
}

// heartbeatError is an error answer of a ConsumerGroupHeartbeat.
type heartbeatError struct {
	err     *kerr.Error
	message string
}

func heartbeatFailure(err *kerr.Error, format string, args ...any) *heartbeatError {
	return &heartbeatError{err: err, message: fmt.Sprintf(format, args...)}
}

// consumerHeartbeat is GroupMetadataManager.consumerGroupHeartbeat.
func (c *Coordinator) consumerHeartbeat(client Client, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	var failure *heartbeatError
	switch failure = c.validateConsumerHeartbeat(req); {
	case failure != nil:
	case req.MemberEpoch == leaveGroupMemberEpoch || req.MemberEpoch == leaveGroupStaticMemberEpoch:
		failure = c.consumerLeave(req, resp)
	default:
		failure = c.consumerJoinOrHeartbeat(client, req, resp)
	}
	if failure != nil {
		resp = req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = failure.err.Code
		resp.ErrorMessage = &failure.message
	}
	return resp
}

// validateConsumerHeartbeat is throwIfConsumerGroupHeartbeatRequestIsInvalid.
func (c *Coordinator) validateConsumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) *heartbeatError {
	invalid := func(what string) *heartbeatError { return heartbeatFailure(kerr.InvalidRequest, "%s", what) }
	switch {
	case req.Group == "":
		return invalid("GroupId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return invalid("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return invalid("RackId can't be empty.")
	case req.Version >= 1 && req.MemberID == "":
		return invalid("MemberId can't be empty.")
	}
	switch e := req.MemberEpoch; {
	case e > 0 || e == leaveGroupMemberEpoch:
		if req.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
	case e == 0:
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		case req.Topics == nil || len(req.Topics) > 0:
			return invalid("TopicPartitions must be empty when (re-)joining.")
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case e == leaveGroupStaticMemberEpoch:
		if req.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
		if req.InstanceID == nil {
			return invalid("InstanceId can't be null.")
		}
	default:
		return invalid("MemberEpoch is invalid.")
	}
	if req.SubscribedTopicRegex != nil {
		if _, err := compileSubscriptionRegex(*req.SubscribedTopicRegex); err != nil {
			return heartbeatFailure(kerr.InvalidRegularExpression, "SubscribedTopicRegex `%s` is not a valid regular expression: %v.", *req.SubscribedTopicRegex, err)
		}
	}
	if req.ServerAssignor != nil && !slices.Contains(c.cfg.ConsumerAssignors, *req.ServerAssignor) {
		return heartbeatFailure(kerr.UnsupportedAssignor, "ServerAssignor %s is not supported. Supported assignors: %v.", *req.ServerAssignor, c.cfg.ConsumerAssignors)
	}
	return nil
}

// consumerGroupFor is getOrMaybeCreateConsumerGroup: a member joining
// (epoch 0) creates the group, or takes over an empty classic group of the
// name (its offsets stay); a non-empty classic group is not a consumer
// group. The second result says whether the group is new to c.groups;
// records gets what the take-over writes.
func (c *Coordinator) consumerGroupFor(name string, create bool, records *[]Record) (*group, bool, *heartbeatError) {
	g := c.groups[name]
	switch {
	case g == nil && !create:
		return nil, false, heartbeatFailure(kerr.GroupIDNotFound, "Consumer group %s not found.", name)
	case g == nil:
		g = newGroup(name, c.now)
		g.consumer = newConsumerGroup()
		return g, true, nil
	case g.consumer != nil:
		return g, false, nil
	case create && g.state == Empty && len(g.pending) == 0:
		// Kafka deletes the empty classic group and creates a consumer
		// group of the same name; the offsets are the group's, not the
		// protocol's, and stay.
		*records = append(*records, groupTombstone(name))
		converted := *g
		converted.consumer = newConsumerGroup()
		return &converted, false, nil
	}
	return nil, false, heartbeatFailure(kerr.GroupIDNotFound, "Group %s is not a consumer group.", name)
}

// consumerJoinOrHeartbeat serves a heartbeat of a joining (epoch 0) or
// joined member: it updates the member, bumps the group epoch when the
// subscriptions or their topics changed, computes a new target assignment
// when the group epoch is ahead of it, and moves the member towards its
// target. The records are in the store before the group changes.
func (c *Coordinator) consumerJoinOrHeartbeat(client Client, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) *heartbeatError {
	var records []Record
	g, created, failure := c.consumerGroupFor(req.Group, req.MemberEpoch == 0, &records)
	if failure != nil {
		return failure
	}
	cg := g.consumer
	memberID := req.MemberID
	if memberID == "" { // version 0: the coordinator names the member
		memberID = newMemberID("", nil)[1:]
	}
	if cg.members[memberID] == nil && len(cg.members) >= c.cfg.GroupMaxSize {
		return heartbeatFailure(kerr.GroupMaxSizeReached, "The consumer group has reached its maximum capacity of %d members.", c.cfg.GroupMaxSize)
	}
	owned := ownedPartitions(req.Topics)
	old, replaced, failure := cg.memberFor(memberID, req, owned)
	if failure != nil {
		return failure
	}

	updated := &consumerMember{id: memberID}
	if old != nil {
		updated = old.clone()
	} else if replaced != nil {
		// The new instance takes the old one's subscription and target;
		// the partitions it owned are released.
		updated = &consumerMember{id: memberID, subscribedTopicNames: replaced.subscribedTopicNames, subscribedTopicRegex: replaced.subscribedTopicRegex,
			serverAssignor: replaced.serverAssignor, rebalanceTimeout: replaced.rebalanceTimeout, assigned: make(partitions), pendingRevocation: make(partitions)}
	} else {
		updated.assigned, updated.pendingRevocation = make(partitions), make(partitions)
	}
	// A request without an instance ID keeps the member's (Kafka's
	// maybeUpdateInstanceId): franz-go's keepalive heartbeats leave it out.
	if req.InstanceID != nil {
		updated.instanceID = req.InstanceID
	}
	if req.RackID != nil {
		updated.rackID = req.RackID
	}
	if req.RebalanceTimeoutMillis != -1 {
		updated.rebalanceTimeout = milliseconds(req.RebalanceTimeoutMillis)
	}
	if req.ServerAssignor != nil {
		updated.serverAssignor = *req.ServerAssignor
	}
	if req.SubscribedTopicNames != nil {
		updated.subscribedTopicNames = slices.Sorted(slices.Values(req.SubscribedTopicNames))
		updated.subscribedTopicNames = slices.Compact(updated.subscribedTopicNames)
	}
	if req.SubscribedTopicRegex != nil {
		updated.subscribedTopicRegex = *req.SubscribedTopicRegex
	}
	updated.clientID, updated.clientHost = client.ID, client.Host

	// The group as it will be: the updated member in place of the old one
	// (and of the static member it replaces).
	members := make(map[string]*consumerMember, len(cg.members)+1)
	for id, m := range cg.members {
		members[id] = m
	}
	if replaced != nil {
		delete(members, replaced.id)
	}
	members[memberID] = updated

	bump := cg.groupEpoch == 0 || (old == nil && replaced == nil) || (old != nil && !old.sameSubscription(updated))
	idx := c.topicIndex()
	subscribed := idx.subscriptionMetadata(members)
	hash := metadataHash(subscribed)
	if hash != cg.metadataHash {
		bump = true
	}
	groupEpoch := cg.groupEpoch
	if bump {
		groupEpoch++
	}
	targetEpoch, target := cg.assignmentEpoch, cg.target
	if replaced != nil {
		target = maps.Clone(target)
		target[memberID] = target[replaced.id]
		delete(target, replaced.id)
	}
	if groupEpoch > cg.assignmentEpoch {
		target = assign(preferredAssignor(members, c.cfg.ConsumerAssignors), members, idx, target)
		targetEpoch = groupEpoch
	}

	// Reconcile against the group without the member it replaces.
	previousAssigned := updated.assigned.clone()
	if replaced != nil {
		cg.disown(replaced.assigned)
		cg.disown(replaced.pendingRevocation)
	}
	cg.reconcile(updated, targetEpoch, target[memberID], owned)
	if replaced != nil {
		cg.own(replaced.assigned, replaced.memberEpoch)
		cg.own(replaced.pendingRevocation, replaced.memberEpoch)
	}
	updated.sessionDeadline = c.after(c.cfg.ConsumerSessionTimeout)
	switch {
	case updated.state != memberUnrevokedPartitions:
		updated.rebalanceDeadline = time.Time{}
	case old == nil || old.state != memberUnrevokedPartitions || old.memberEpoch != updated.memberEpoch:
		updated.rebalanceDeadline = c.after(updated.rebalanceTimeout)
	}

	if replaced != nil {
		records = append(records, consumerMemberTombstones(g.name, replaced.id)...)
	}
	if old == nil || !old.sameMetadata(updated) {
		records = append(records, consumerMemberMetadataRecord(g.name, updated))
	}
	if groupEpoch != cg.groupEpoch || hash != cg.metadataHash {
		records = append(records, consumerGroupMetadataRecord(g.name, groupEpoch, subscribed))
	}
	if targetEpoch != cg.assignmentEpoch || replaced != nil {
		records = append(records, consumerTargetRecords(g.name, targetEpoch, target, cg.target)...)
	}
	if old == nil || !old.sameAssignment(updated) {
		records = append(records, consumerCurrentAssignmentRecord(g.name, updated))
	}
	if len(records) > 0 {
		if err := c.append(records...); err != nil {
			return heartbeatFailure(kerr.NotCoordinator, "%v", err)
		}
	}

	if created || c.groups[g.name] != g {
		c.groups[g.name] = g
	}
	if replaced != nil {
		cg.removeMember(replaced.id)
	}
	cg.setMember(updated)
	cg.groupEpoch, cg.assignmentEpoch, cg.target, cg.metadataHash = groupEpoch, targetEpoch, target, hash
	c.done(g)

	resp.MemberID = &updated.id
	resp.MemberEpoch = updated.memberEpoch
	resp.HeartbeatIntervalMillis = int32(c.cfg.ConsumerHeartbeatInterval / time.Millisecond)
	full := req.MemberEpoch == 0 || (req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil)
	if full || !previousAssigned.equal(updated.assigned) {
		resp.Assignment = heartbeatAssignment(updated.assigned)
	}
	return nil
}

func heartbeatAssignment(p partitions) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	out := &kmsg.ConsumerGroupHeartbeatResponseAssignment{Topics: []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}}
	for _, t := range slices.SortedFunc(maps.Keys(p), compareTopicIDs) {
		out.Topics = append(out.Topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: t, Partitions: slices.Clone(p[t])})
	}
	return out
}

// memberFor is getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember: it
// returns the member of the request (nil for a new one) and, for a static
// member joining in place of a previous instance that left with epoch -2,
// that instance.
func (cg *consumerGroup) memberFor(memberID string, req *kmsg.ConsumerGroupHeartbeatRequest, owned partitions) (old, replaced *consumerMember, failure *heartbeatError) {
	if req.InstanceID == nil {
		old = cg.members[memberID]
		if req.MemberEpoch == 0 {
			return old, nil, nil
		}
		if old == nil {
			return nil, nil, heartbeatFailure(kerr.UnknownMemberID, "Member %s is not a member of group %s.", memberID, req.Group)
		}
		return old, nil, validateMemberEpoch(old, req.MemberEpoch, owned)
	}
	instanceID := *req.InstanceID
	existing := cg.staticMember(instanceID)
	if req.MemberEpoch == 0 {
		switch {
		case existing == nil || existing.id == memberID:
			return existing, nil, nil
		case existing.memberEpoch != leaveGroupStaticMemberEpoch:
			return nil, nil, heartbeatFailure(kerr.UnreleasedInstanceID, "Static member %s with instance id %s cannot join the group %s since the instance id is owned by member %s.", memberID, instanceID, req.Group, existing.id)
		}
		return nil, existing, nil
	}
	old = cg.members[memberID]
	if old == nil {
		return nil, nil, heartbeatFailure(kerr.UnknownMemberID, "Member %s is not a member of group %s.", memberID, req.Group)
	}
	if failure := validateMemberEpoch(old, req.MemberEpoch, owned); failure != nil {
		return nil, nil, failure
	}
	if existing == nil {
		return nil, nil, heartbeatFailure(kerr.UnknownMemberID, "Instance id %s is unknown.", instanceID)
	}
	if existing.id != memberID {
		return nil, nil, heartbeatFailure(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", memberID, instanceID, existing.id)
	}
	return old, nil, nil
}

// validateMemberEpoch is throwIfConsumerGroupMemberEpochIsInvalid: a
// member may lag one epoch if what it owns is within its assignment (the
// answer that bumped it was lost).
func validateMemberEpoch(m *consumerMember, received int32, owned partitions) *heartbeatError {
	switch {
	case received > m.memberEpoch:
		return heartbeatFailure(kerr.FencedMemberEpoch, "The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", received, m.memberEpoch)
	case received < m.memberEpoch && (received != m.previousMemberEpoch || owned == nil || !owned.subsetOf(m.assigned)):
		return heartbeatFailure(kerr.FencedMemberEpoch, "The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", received, m.memberEpoch)
	}
	return nil
}

// consumerLeave is consumerGroupLeave: epoch -1 removes the member, epoch
// -2 (static members) keeps its partitions for its instance ID until its
// session expires.
func (c *Coordinator) consumerLeave(req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) *heartbeatError {
	g := c.groups[req.Group]
	if g == nil || g.consumer == nil {
		return heartbeatFailure(kerr.GroupIDNotFound, "Consumer group %s not found.", req.Group)
	}
	cg := g.consumer
	resp.MemberID, resp.MemberEpoch = &req.MemberID, req.MemberEpoch
	var m *consumerMember
	if req.InstanceID == nil {
		if m = cg.members[req.MemberID]; m == nil {
			return heartbeatFailure(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, req.Group)
		}
	} else {
		if m = cg.staticMember(*req.InstanceID); m == nil {
			return heartbeatFailure(kerr.UnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
		}
		if m.id != req.MemberID {
			return heartbeatFailure(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, m.id)
		}
		if req.MemberEpoch == leaveGroupStaticMemberEpoch {
			left := m.clone()
			// Its assignment waits for its instance; what it was
			// revoking goes at once (consumerGroupStaticMemberGroupLeave).
			left.memberEpoch = leaveGroupStaticMemberEpoch
			left.pendingRevocation = make(partitions)
			left.rebalanceDeadline = time.Time{}
			if err := c.append(consumerCurrentAssignmentRecord(g.name, left)); err != nil {
				return heartbeatFailure(kerr.NotCoordinator, "%v", err)
			}
			cg.setMember(left)
			c.done(g)
			return nil
		}
	}
	if err := c.fenceConsumerMember(g, m); err != nil {
		return heartbeatFailure(kerr.NotCoordinator, "%v", err)
	}
	return nil
}

// fenceConsumerMember is consumerGroupFenceMember: the member goes, with
// its partitions, and the group epoch is bumped so the next heartbeat
// computes a new target assignment.
func (c *Coordinator) fenceConsumerMember(g *group, m *consumerMember) error {
	cg := g.consumer
	members := make(map[string]*consumerMember, len(cg.members))
	for id, o := range cg.members {
		if id != m.id {
			members[id] = o
		}
	}
	subscribed := c.topicIndex().subscriptionMetadata(members)
	records := consumerMemberTombstones(g.name, m.id)
	records = append(records, consumerGroupMetadataRecord(g.name, cg.groupEpoch+1, subscribed))
	if err := c.append(records...); err != nil {
		return err
	}
	cg.removeMember(m.id)
	delete(cg.target, m.id)
	cg.groupEpoch++
	cg.metadataHash = metadataHash(subscribed)
	c.done(g)
	return nil
}

// consumerTick fences the members of a consumer group whose session or
// revocation deadline passed.
func (c *Coordinator) consumerTick(g *group) {
	defer c.done(g)
	cg := g.consumer
	for _, id := range slices.Sorted(maps.Keys(cg.members)) {
		m := cg.members[id]
		expired := !m.sessionDeadline.IsZero() && !m.sessionDeadline.After(c.now)
		revocationExpired := !m.rebalanceDeadline.IsZero() && !m.rebalanceDeadline.After(c.now)
		if !expired && !revocationExpired {
			continue
		}
		c.log.Info("group: consumer group member fenced", "group", g.name, "member", id, "session_expired", expired)
		if err := c.fenceConsumerMember(g, m); err != nil {
			// Try again in a second rather than spin on a failing store.
			m.sessionDeadline = c.after(time.Second)
			m.rebalanceDeadline = time.Time{}
		}
	}
}

func (m *consumerMember) sameMetadata(o *consumerMember) bool {
	return m.sameSubscription(o) && equalStringPointers(m.instanceID, o.instanceID) && equalStringPointers(m.rackID, o.rackID) &&
		m.clientID == o.clientID && m.clientHost == o.clientHost && m.rebalanceTimeout == o.rebalanceTimeout && m.serverAssignor == o.serverAssignor
}

func (m *consumerMember) sameAssignment(o *consumerMember) bool {
	return m.state == o.state && m.memberEpoch == o.memberEpoch && m.previousMemberEpoch == o.previousMemberEpoch &&
		m.assigned.equal(o.assigned) && m.pendingRevocation.equal(o.pendingRevocation)
}

func equalStringPointers(a, b *string) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// topicIndex reads the topics the assignors see.
func (c *Coordinator) topicIndex() topicIndex {
	if c.cfg.Topics == nil {
		return newTopicIndex(nil)
	}
	return newTopicIndex(c.cfg.Topics())
}
