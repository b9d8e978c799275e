package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sync is GroupMetadataManager.classicGroupSync: followers wait for the
// leader; the leader's assignment is written to the store before anyone
// gets it.
func (c *Coordinator) sync(req *kmsg.SyncGroupRequest, reply func(*kmsg.SyncGroupResponse)) {
	reply = finishSync(req, reply)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		reply(resp)
		return
	}
	g := c.groups[req.Group]
	if g == nil || g.state == Empty {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		reply(resp)
		return
	}
	defer c.done(g)
	if code := g.validateSync(req); code != 0 {
		resp.ErrorCode = code
		reply(resp)
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case PreparingRebalance:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		reply(resp)
	case CompletingRebalance:
		g.answerSync(m, &kmsg.SyncGroupResponse{ErrorCode: kerr.RebalanceInProgress.Code}) // a SyncGroup sent again
		m.syncReply = reply
		c.removePendingSync(g, m.id)
		if m.id != g.leader {
			return
		}
		assignment := make(map[string][]byte, len(g.members))
		for _, a := range req.GroupAssignment {
			if g.hasMember(a.MemberID) {
				assignment[a.MemberID] = a.MemberAssignment
			}
		}
		for id := range g.members {
			if _, ok := assignment[id]; !ok {
				assignment[id] = []byte{}
			}
		}
		if err := c.append(groupMetadataRecord(g.name, g.metadata(assignment))); err != nil {
			c.resetAndPropagateAssignment(g, storeFailedCode)
			c.maybePrepareRebalanceOrCompleteJoin(g)
			return
		}
		for id, m := range g.members {
			m.assignment = assignment[id]
		}
		c.propagateAssignment(g, 0)
		g.transition(Stable, c.now)
	case Stable:
		c.removePendingSync(g, m.id)
		resp.ProtocolType = g.protocolTypePtr()
		resp.Protocol = g.protocolName
		resp.MemberAssignment = nonNil(m.assignment)
		reply(resp)
	default:
		panic("group: " + g.name + ": SyncGroup in state " + g.state.String())
	}
}

func finishSync(req *kmsg.SyncGroupRequest, reply func(*kmsg.SyncGroupResponse)) func(*kmsg.SyncGroupResponse) {
	return func(resp *kmsg.SyncGroupResponse) {
		resp.Version = req.Version
		if resp.MemberAssignment == nil {
			resp.MemberAssignment = []byte{}
		}
		reply(resp)
	}
}

func (g *group) validateSync(req *kmsg.SyncGroupRequest) int16 {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	if inconsistent(req.ProtocolType, g.protocolTypePtr()) || inconsistent(req.Protocol, g.protocolName) {
		return kerr.InconsistentGroupProtocol.Code
	}
	return 0
}

// inconsistent is isProtocolInconsistent: both known and different.
func inconsistent(asked, actual *string) bool {
	return asked != nil && actual != nil && *asked != *actual
}

func (c *Coordinator) removePendingSync(g *group, id string) {
	delete(g.pendingSync, id)
	if len(g.pendingSync) == 0 || (g.state != CompletingRebalance && g.state != Stable) {
		g.syncDeadline = time.Time{}
	}
}

// resetAndPropagateAssignment clears every assignment and answers the
// SyncGroups waiting with code.
func (c *Coordinator) resetAndPropagateAssignment(g *group, code int16) {
	if g.state != CompletingRebalance {
		panic("group: " + g.name + ": assignment reset in state " + g.state.String())
	}
	for _, m := range g.members {
		m.assignment = []byte{}
	}
	c.propagateAssignment(g, code)
}

// propagateAssignment answers every waiting SyncGroup; a member answered
// gets a full session timeout from now.
func (c *Coordinator) propagateAssignment(g *group, code int16) {
	for _, id := range g.order {
		m := g.members[id]
		resp := &kmsg.SyncGroupResponse{ErrorCode: code, MemberAssignment: nonNil(m.assignment)}
		if code == 0 {
			resp.ProtocolType = g.protocolTypePtr()
			resp.Protocol = g.protocolName
		}
		if g.answerSync(m, resp) {
			m.heartbeatDeadline = c.after(m.sessionTimeout)
		}
	}
}

// heartbeat is classicGroupHeartbeat.
func (c *Coordinator) heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	g := c.groups[req.Group]
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	defer c.done(g)
	switch {
	case g.state == Dead:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	case g.validateMember(req.MemberID, req.InstanceID) != 0:
		resp.ErrorCode = g.validateMember(req.MemberID, req.InstanceID)
	case req.Generation != g.generation:
		resp.ErrorCode = kerr.IllegalGeneration.Code
	case g.state == Empty:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	default:
		m := g.members[req.MemberID]
		m.heartbeatDeadline = c.after(m.sessionTimeout)
		if g.state == PreparingRebalance {
			resp.ErrorCode = kerr.RebalanceInProgress.Code
		}
	}
	return resp
}

// leave is classicGroupLeave: members leave one by one, by member ID or
// (administratively) by instance ID alone; one rebalance follows.
func (c *Coordinator) leave(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	identities := req.Members
	if req.Version < 3 {
		identities = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	switch g := c.groups[req.Group]; {
	case req.Group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
	case g == nil: // Kafka's GroupCoordinatorService.leaveGroup: "Group was not found."
		for _, who := range identities {
			resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{MemberID: who.MemberID, InstanceID: who.InstanceID, ErrorCode: kerr.UnknownMemberID.Code})
		}
	case g.state == Dead:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		defer c.done(g)
		resp.Members = c.leaveMembers(g, identities)
	}
	if req.Version < 3 {
		if len(resp.Members) == 1 {
			resp.ErrorCode = resp.Members[0].ErrorCode
		}
		resp.Members = nil
	}
	return resp
}

func (c *Coordinator) leaveMembers(g *group, identities []kmsg.LeaveGroupRequestMember) []kmsg.LeaveGroupResponseMember {
	out := make([]kmsg.LeaveGroupResponseMember, 0, len(identities))
	left := 0
	for _, who := range identities {
		answer := kmsg.LeaveGroupResponseMember{MemberID: who.MemberID, InstanceID: who.InstanceID}
		_, pending := g.pending[who.MemberID]
		switch {
		case who.MemberID == "":
			id, ok := "", false
			if who.InstanceID != nil {
				id, ok = g.staticMembers[*who.InstanceID]
			}
			if !ok {
				answer.ErrorCode = kerr.UnknownMemberID.Code
				break
			}
			c.evict(g, g.members[id])
		case pending:
			delete(g.pending, who.MemberID)
		default:
			if answer.ErrorCode = g.validateMember(who.MemberID, who.InstanceID); answer.ErrorCode == 0 {
				c.evict(g, g.members[who.MemberID])
			}
		}
		if answer.ErrorCode == 0 {
			left++
		}
		out = append(out, answer)
	}
	if left > 0 {
		switch g.state {
		case Stable, CompletingRebalance:
			c.maybePrepareRebalanceOrCompleteJoin(g)
		case PreparingRebalance:
			c.maybeCompleteJoinPhase(g)
		}
	}
	return out
}

// tick runs the deadlines of g that have passed, earliest first.
func (c *Coordinator) tick(g *group) {
	if g.consumer != nil {
		c.consumerTick(g)
		return
	}
	defer c.done(g)
	bound := 2*(len(g.members)+len(g.pending)) + 8 // each firing clears or moves one deadline past now
	for range bound {
		if g.state == Dead {
			return
		}
		at, fire := g.earliestDue(c, c.now)
		if at.IsZero() {
			return
		}
		fire()
	}
}

// earliestDue returns the earliest deadline of g not after now and what to
// do then; a zero time if none has passed.
func (g *group) earliestDue(c *Coordinator, now time.Time) (time.Time, func()) {
	var at time.Time
	var fire func()
	consider := func(t time.Time, f func()) {
		if !t.IsZero() && !t.After(now) && (at.IsZero() || t.Before(at)) {
			at, fire = t, f
		}
	}
	consider(g.joinDeadline, func() {
		g.joinDeadline = time.Time{}
		if g.joinKind == joinInitial {
			c.initialDelayPassed(g)
		} else {
			c.completeJoin(g)
		}
	})
	consider(g.syncDeadline, func() { g.syncDeadline = time.Time{}; c.pendingSyncExpired(g) })
	for _, id := range g.order {
		m := g.members[id]
		consider(m.heartbeatDeadline, func() { m.heartbeatDeadline = time.Time{}; c.heartbeatExpired(g, m) })
	}
	for id, t := range g.pending {
		consider(t, func() {
			delete(g.pending, id)
			if g.state == PreparingRebalance && g.hasAllMembersJoined() {
				c.completeJoin(g)
			}
		})
	}
	return at, fire
}

// heartbeatExpired is expireClassicGroupMemberHeartbeat for a member.
func (c *Coordinator) heartbeatExpired(g *group, m *member) {
	if m.satisfiedHeartbeat() {
		return
	}
	c.log.Info("group: member session expired", "group", g.name, "member", m.id)
	c.evict(g, m)
	switch {
	case g.state == Stable || g.state == CompletingRebalance:
		c.maybePrepareRebalanceOrCompleteJoin(g)
	case g.state == PreparingRebalance && g.hasAllMembersJoined():
		c.completeJoin(g)
	}
}

// pendingSyncExpired is expirePendingSync: members of the generation that
// never sent SyncGroup within the rebalance timeout are removed.
func (c *Coordinator) pendingSyncExpired(g *group) {
	if g.generation != g.syncGeneration || (g.state != CompletingRebalance && g.state != Stable) || len(g.pendingSync) == 0 {
		return
	}
	for id := range g.pendingSync {
		c.evict(g, g.members[id])
	}
	c.prepareRebalance(g)
}
