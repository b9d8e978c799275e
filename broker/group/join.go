package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// storeFailedCode is the answer when the store refuses an append: Kafka
// maps its log's KAFKA_STORAGE_ERROR to NOT_COORDINATOR, and clients look
// for the coordinator again and retry.
var storeFailedCode = kerr.NotCoordinator.Code

func milliseconds(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

// joinTimeouts reads a JoinGroup's timeouts; version 0 has no rebalance
// timeout and uses the session timeout.
func joinTimeouts(req *kmsg.JoinGroupRequest) (rebalance, session time.Duration) {
	session = milliseconds(req.SessionTimeoutMillis)
	rebalance = milliseconds(req.RebalanceTimeoutMillis)
	if req.Version == 0 {
		rebalance = session
	}
	return rebalance, session
}

// join is GroupMetadataManager.classicGroupJoin with the validation
// GroupCoordinatorService does before it.
func (c *Coordinator) join(client Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	reply = finishJoin(req, reply)
	fail := func(code int16, memberID string) {
		resp := newJoinResponse(req)
		resp.ErrorCode, resp.MemberID = code, memberID
		reply(resp)
	}
	if req.Group == "" {
		fail(kerr.InvalidGroupID.Code, req.MemberID)
		return
	}
	_, session := joinTimeouts(req)
	if session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout {
		fail(kerr.InvalidSessionTimeout.Code, req.MemberID)
		return
	}
	g := c.groups[req.Group]
	if g != nil && g.consumer != nil {
		if code := c.classicJoinToConsumerGroup(g); code != 0 {
			fail(code, req.MemberID)
			return
		}
		g = c.groups[req.Group]
	}
	if g == nil {
		if req.MemberID != "" {
			fail(kerr.UnknownMemberID.Code, req.MemberID)
			return
		}
		// Kafka writes a new group's empty metadata before anything else
		// is known of it.
		g = newGroup(req.Group, c.now)
		if err := c.append(groupMetadataRecord(g.name, emptyGroupMetadata(g))); err != nil {
			fail(storeFailedCode, "")
			return
		}
		c.groups[g.name] = g
	}
	defer c.done(g)
	if !c.acceptJoiningMember(g, req.MemberID) {
		if m := g.members[req.MemberID]; m != nil {
			c.evict(g, m)
		}
		delete(g.pending, req.MemberID)
		fail(kerr.GroupMaxSizeReached.Code, "")
		return
	}
	if req.MemberID == "" {
		c.joinNewMember(g, client, req, reply)
	} else {
		c.joinExistingMember(g, client, req, reply)
	}
}

// finishJoin sets the answer's version to the request's; before version 7
// the protocol name is not nullable.
func finishJoin(req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) func(*kmsg.JoinGroupResponse) {
	return func(resp *kmsg.JoinGroupResponse) {
		resp.Version = req.Version
		if req.Version < 7 && resp.Protocol == nil {
			resp.Protocol = new(string)
		}
		reply(resp)
	}
}

func newJoinResponse(req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	return resp
}

// acceptJoiningMember is Kafka's group.max.size check.
func (c *Coordinator) acceptJoiningMember(g *group, memberID string) bool {
	switch g.state {
	case PreparingRebalance:
		m := g.members[memberID]
		return (m != nil && m.awaitingJoin()) || g.awaitingJoin < c.cfg.GroupMaxSize
	case CompletingRebalance, Stable:
		return g.hasMember(memberID) || len(g.members) < c.cfg.GroupMaxSize
	}
	return true
}

func (c *Coordinator) joinNewMember(g *group, client Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	resp := newJoinResponse(req)
	switch {
	case g.state == Dead:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	case !g.supportsProtocols(req.ProtocolType, req.Protocols):
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
	default:
		id := newMemberID(client.ID, req.InstanceID)
		if req.InstanceID != nil {
			if oldID, ok := g.staticMembers[*req.InstanceID]; ok {
				c.updateStaticMember(g, req, oldID, id, reply)
			} else {
				c.addMemberAndRebalance(g, client, req, id, reply)
			}
			return
		}
		if req.Version < 4 {
			c.addMemberAndRebalance(g, client, req, id, reply)
			return
		}
		// KIP-394: the member must come back with the ID it is given;
		// until then it is pending and holds up the rebalance.
		_, session := joinTimeouts(req)
		g.pending[id] = c.after(session)
		resp.MemberID = id
		resp.ErrorCode = kerr.MemberIDRequired.Code
	}
	reply(resp)
}

func (c *Coordinator) joinExistingMember(g *group, client Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	resp := newJoinResponse(req)
	resp.MemberID = req.MemberID
	if g.state == Dead {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		reply(resp)
		return
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		reply(resp)
		return
	}
	if _, pending := g.pending[req.MemberID]; pending && req.InstanceID == nil {
		c.addMemberAndRebalance(g, client, req, req.MemberID, reply)
		return
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
		resp.ErrorCode = code
		reply(resp)
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case PreparingRebalance:
		c.updateMemberAndRebalance(g, m, req, reply)
	case CompletingRebalance:
		if !m.sameProtocols(req.Protocols) {
			c.updateMemberAndRebalance(g, m, req, reply)
			return
		}
		// The member lost its JoinGroup answer: send it again.
		reply(g.currentJoinResponse(req, m.id, g.leader == m.id))
	case Stable:
		if g.leader == m.id || !m.sameProtocols(req.Protocols) {
			c.updateMemberAndRebalance(g, m, req, reply)
			return
		}
		reply(g.currentJoinResponse(req, m.id, false))
	default:
		resp.ErrorCode = kerr.UnknownMemberID.Code
		reply(resp)
	}
}

// currentJoinResponse is the JoinGroup answer for the current generation,
// with the member list when withMembers.
func (g *group) currentJoinResponse(req *kmsg.JoinGroupRequest, memberID string, withMembers bool) *kmsg.JoinGroupResponse {
	resp := newJoinResponse(req)
	resp.MemberID = memberID
	resp.Generation = g.generation
	resp.Protocol = g.protocolName
	resp.ProtocolType = g.protocolTypePtr()
	resp.LeaderID = g.leader
	if withMembers {
		resp.Members = g.joinMembers()
	}
	return resp
}

func (g *group) protocolTypePtr() *string {
	if g.protocolType == "" && len(g.members) == 0 {
		return nil
	}
	t := g.protocolType
	return &t
}

// validateMember is ClassicGroup.validateMember.
func (g *group) validateMember(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		existing, ok := g.staticMembers[*instanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID.Code
		case existing != memberID:
			return kerr.FencedInstanceID.Code
		}
		return 0
	}
	if !g.hasMember(memberID) {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

func (c *Coordinator) addMemberAndRebalance(g *group, client Client, req *kmsg.JoinGroupRequest, id string, reply func(*kmsg.JoinGroupResponse)) {
	rebalance, session := joinTimeouts(req)
	m := &member{
		id:               id,
		instanceID:       req.InstanceID,
		clientID:         client.ID,
		clientHost:       client.Host,
		rebalanceTimeout: rebalance,
		sessionTimeout:   session,
		protocolType:     req.ProtocolType,
		protocols:        req.Protocols,
		joinReply:        reply,
		isNew:            true,
	}
	if g.state == PreparingRebalance && g.previousState == Empty {
		g.newMemberAdded = true
	}
	g.add(m)
	// A new member cannot heartbeat before it has its JoinGroup answer, so
	// it expires after the new member join timeout instead (KIP-394).
	m.heartbeatDeadline = c.after(c.cfg.NewMemberJoinTimeout)
	c.maybePrepareRebalanceOrCompleteJoin(g)
}

func (c *Coordinator) updateMemberAndRebalance(g *group, m *member, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	rebalance, session := joinTimeouts(req)
	g.update(m, req.Protocols, rebalance, session, reply)
	c.maybePrepareRebalanceOrCompleteJoin(g)
}

// updateStaticMember is a known static member joining with a new member ID
// (KIP-345): the old member ID is fenced, and a Stable group whose protocol
// would not change keeps its assignment without a rebalance.
func (c *Coordinator) updateStaticMember(g *group, req *kmsg.JoinGroupRequest, oldID, newID string, reply func(*kmsg.JoinGroupResponse)) {
	currentLeader := g.leader
	m := g.replaceStatic(oldID, newID)
	m.heartbeatDeadline = c.after(m.sessionTimeout)
	oldProtocols, oldRebalance, oldSession := m.protocols, m.rebalanceTimeout, m.sessionTimeout
	rebalance, session := joinTimeouts(req)
	g.update(m, req.Protocols, rebalance, session, reply)
	switch g.state {
	case Stable:
		if g.protocolName == nil || *g.protocolName != g.selectProtocol() {
			c.maybePrepareRebalanceOrCompleteJoin(g)
			return
		}
		if err := c.append(groupMetadataRecord(g.name, g.metadata(g.assignments()))); err != nil {
			g.update(m, oldProtocols, oldRebalance, oldSession, nil)
			g.replaceStatic(newID, oldID).heartbeatDeadline = c.after(oldSession)
			resp := g.currentJoinResponse(req, "", false)
			resp.LeaderID = currentLeader
			resp.ErrorCode = storeFailedCode
			reply(resp)
			return
		}
		var resp *kmsg.JoinGroupResponse
		if req.Version >= 9 { // KIP-814: the leader is told to skip the assignment
			isLeader := g.leader == newID
			resp = g.currentJoinResponse(req, newID, isLeader)
			resp.SkipAssignment = isLeader
		} else { // an older leader must not think it leads: it would assign
			resp = g.currentJoinResponse(req, newID, false)
			resp.LeaderID = currentLeader
		}
		g.answerJoin(m, resp)
	case CompletingRebalance:
		// The leader may hold the old member ID in its assignment: rebalance.
		c.prepareRebalance(g)
	case PreparingRebalance:
		c.maybeCompleteJoinPhase(g)
	default:
		panic("group: " + g.name + ": static member rejoined a group in state " + g.state.String())
	}
}

// replaceStatic gives a static member a new member ID, fencing answers the
// old one awaits, and returns the member.
func (g *group) replaceStatic(oldID, newID string) *member {
	m := g.members[oldID]
	fenced := kerr.FencedInstanceID.Code
	g.answerJoin(m, &kmsg.JoinGroupResponse{Version: 0, MemberID: oldID, Generation: -1, ErrorCode: fenced})
	g.answerSync(m, &kmsg.SyncGroupResponse{ErrorCode: fenced})
	delete(g.members, oldID)
	m.id = newID
	g.members[newID] = m
	for i, id := range g.order {
		if id == oldID {
			g.order[i] = newID
		}
	}
	g.staticMembers[*m.instanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	if _, ok := g.pendingSync[oldID]; ok {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = struct{}{}
	}
	return m
}

func (c *Coordinator) maybePrepareRebalanceOrCompleteJoin(g *group) {
	switch g.state {
	case Stable, CompletingRebalance, Empty:
		c.prepareRebalance(g)
	default:
		c.maybeCompleteJoinPhase(g)
	}
}

// prepareRebalance starts a rebalance. A group leaving Empty waits
// group.initial.rebalance.delay.ms for more members, extended while new
// ones come, up to the rebalance timeout.
func (c *Coordinator) prepareRebalance(g *group) {
	if g.state == CompletingRebalance {
		c.resetAndPropagateAssignment(g, kerr.RebalanceInProgress.Code)
	}
	clear(g.pendingSync)
	g.syncDeadline = time.Time{}
	initial := g.state == Empty
	if initial {
		g.joinKind = joinInitial
		g.initialDelay = c.cfg.InitialRebalanceDelay
		g.initialRemaining = max(g.rebalanceTimeout()-c.cfg.InitialRebalanceDelay, 0)
		g.joinDeadline = c.now.Add(g.initialDelay)
	}
	g.transition(PreparingRebalance, c.now)
	if initial {
		return
	}
	if g.hasAllMembersJoined() {
		c.completeJoin(g)
		return
	}
	g.joinKind = joinComplete
	g.joinDeadline = c.after(g.rebalanceTimeout())
}

// maybeCompleteJoinPhase completes the join phase once every member has
// rejoined, except in the initial rebalance, which waits out its delay.
func (c *Coordinator) maybeCompleteJoinPhase(g *group) {
	if g.state == PreparingRebalance && g.previousState != Empty && g.hasAllMembersJoined() {
		c.completeJoin(g)
	}
}

// initialDelayPassed is tryCompleteInitialRebalanceElseSchedule.
func (c *Coordinator) initialDelayPassed(g *group) {
	if g.newMemberAdded && g.initialRemaining != 0 {
		g.newMemberAdded = false
		delay := min(c.cfg.InitialRebalanceDelay, g.initialRemaining)
		g.initialRemaining = max(g.initialRemaining-g.initialDelay, 0)
		g.initialDelay = delay
		g.joinDeadline = c.now.Add(delay)
		return
	}
	c.completeJoin(g)
}

// completeJoin ends the join phase: dynamic members that did not rejoin
// are dropped, the generation moves on, and every member gets its
// JoinGroup answer (the leader with the member list).
func (c *Coordinator) completeJoin(g *group) {
	g.joinDeadline = time.Time{}
	for _, id := range append([]string(nil), g.order...) {
		if m := g.members[id]; !m.awaitingJoin() && m.instanceID == nil {
			c.evict(g, m)
		}
	}
	if g.state == Dead {
		return
	}
	if !g.electJoinedLeader() && len(g.members) > 0 {
		// Only static members that did not rejoin are left: wait for
		// them or for their session timeouts.
		g.joinKind = joinComplete
		g.joinDeadline = c.after(g.rebalanceTimeout())
		return
	}
	g.generation++
	clear(g.pendingSync)
	if len(g.members) == 0 {
		g.protocolName = nil
		g.subscribed = g.computeSubscribedTopics()
		g.transition(Empty, c.now)
		// Kafka only warns when this fails: the last generation written
		// has no live members either.
		_ = c.append(groupMetadataRecord(g.name, g.metadata(nil)))
		return
	}
	name := g.selectProtocol()
	g.protocolName = &name
	g.subscribed = g.computeSubscribedTopics()
	g.transition(CompletingRebalance, c.now)
	for _, id := range g.order {
		m := g.members[id]
		resp := &kmsg.JoinGroupResponse{
			MemberID:     id,
			Generation:   g.generation,
			Protocol:     g.protocolName,
			ProtocolType: g.protocolTypePtr(),
			LeaderID:     g.leader,
		}
		if id == g.leader {
			resp.Members = g.joinMembers()
		}
		g.answerJoin(m, resp)
		m.heartbeatDeadline = c.after(m.sessionTimeout)
		m.isNew = false
		g.pendingSync[id] = struct{}{}
	}
	g.syncDeadline = c.after(g.rebalanceTimeout())
	g.syncGeneration = g.generation
}

// electJoinedLeader keeps a leader that rejoined, or picks the first member
// that did; false if none did.
func (g *group) electJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if g.members[g.leader].awaitingJoin() {
		return true
	}
	for _, id := range g.order {
		if g.members[id].awaitingJoin() {
			g.leader = id
			return true
		}
	}
	return false
}

// evict removes a member, answering UNKNOWN_MEMBER_ID to a JoinGroup or
// SyncGroup it awaits so that a live client joins again.
func (c *Coordinator) evict(g *group, m *member) {
	unknown := kerr.UnknownMemberID.Code
	g.answerJoin(m, &kmsg.JoinGroupResponse{Generation: -1, ErrorCode: unknown})
	g.answerSync(m, &kmsg.SyncGroupResponse{ErrorCode: unknown})
	g.remove(m.id)
}
