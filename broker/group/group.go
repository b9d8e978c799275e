package group

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a classic group's state, as Kafka names it.
type State int8

// The states of a classic group (Kafka's ClassicGroupState).
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// validPrevious lists the states each state may be entered from
// (ClassicGroupState's transitions). A transition not listed is a bug.
var validPrevious = map[State][]State{
	Empty:               {PreparingRebalance},
	PreparingRebalance:  {Stable, CompletingRebalance, Empty},
	CompletingRebalance: {PreparingRebalance},
	Stable:              {CompletingRebalance},
	Dead:                {Stable, PreparingRebalance, CompletingRebalance, Empty, Dead},
}

// member is one member of a classic group.
type member struct {
	id               string
	instanceID       *string // static membership (KIP-345); nil for a dynamic member
	clientID         string
	clientHost       string
	rebalanceTimeout time.Duration
	sessionTimeout   time.Duration
	protocolType     string
	protocols        []kmsg.JoinGroupRequestProtocol // in the member's order of preference
	assignment       []byte

	joinReply func(*kmsg.JoinGroupResponse) // set while the member awaits its JoinGroup answer
	syncReply func(*kmsg.SyncGroupResponse) // set while the member awaits its SyncGroup answer
	isNew     bool                          // joined in the current rebalance; may expire while awaiting join

	heartbeatDeadline time.Time // zero: none armed
}

func (m *member) awaitingJoin() bool { return m.joinReply != nil }
func (m *member) awaitingSync() bool { return m.syncReply != nil }

// satisfiedHeartbeat says whether a member whose heartbeat deadline passed
// may stay (ClassicGroupMember.hasSatisfiedHeartbeat): members awaiting a
// rebalance need not heartbeat, unless they are new.
func (m *member) satisfiedHeartbeat() bool {
	return !m.isNew && (m.awaitingJoin() || m.awaitingSync())
}

func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// sameProtocols is ClassicGroupMember.matches: the same names and metadata
// in the same order.
func (m *member) sameProtocols(protocols []kmsg.JoinGroupRequestProtocol) bool {
	return slices.EqualFunc(m.protocols, protocols, func(a, b kmsg.JoinGroupRequestProtocol) bool {
		return a.Name == b.Name && string(a.Metadata) == string(b.Metadata)
	})
}

// joinDeadlineKind says what happens when a group's join deadline passes.
type joinDeadlineKind int8

const (
	joinComplete joinDeadlineKind = iota // completeJoin
	joinInitial                          // the initial rebalance delay: extend it or completeJoin
)

// group is one classic group and its committed offsets. The coordinator's
// loop owns it.
//
// Invariants (checkInvariants):
//   - order holds exactly the keys of members, in join order;
//   - awaitingJoin counts the members with a joinReply;
//   - supported[p] counts the members that list protocol p;
//   - staticMembers maps each static member's instance ID to its member ID;
//   - leader is a member, or empty exactly when there are no members;
//   - Empty and Dead groups have no members (an Empty group may have
//     pending members: JoinGroup v4+ does not start a rebalance).
type group struct {
	name           string
	state          State
	previousState  State
	stateTimestamp time.Time

	protocolType string  // "" until the first member joins, or for groups with offsets only
	protocolName *string // the protocol selected for the generation; nil while there is none
	generation   int32
	leader       string

	members       map[string]*member
	order         []string             // member IDs in join order
	staticMembers map[string]string    // instance ID -> member ID
	pending       map[string]time.Time // pending member ID (JoinGroup v4+ before its second join) -> session deadline
	pendingSync   map[string]struct{}  // members of the generation that have not sent SyncGroup yet
	supported     map[string]int       // protocol name -> members listing it
	awaitingJoin  int

	newMemberAdded   bool // a member joined during the initial rebalance delay
	joinDeadline     time.Time
	joinKind         joinDeadlineKind
	initialDelay     time.Duration
	initialRemaining time.Duration
	syncDeadline     time.Time
	syncGeneration   int32

	offsets    map[string]map[int32]committed // topic -> partition -> committed offset
	subscribed map[string]bool                // topics the members consume (consumer protocol); nil: not known
	// offsetSequence is the last committed.sequence handed out.
	offsetSequence uint64

	consumer *consumerGroup // a KIP-848 consumer group (consumer.go); nil: a classic group

	scheduled time.Time // the earliest deadline queued in the coordinator's heap for this group; zero: none
}

func newGroup(name string, now time.Time) *group {
	return &group{
		name:           name,
		state:          Empty,
		previousState:  Empty,
		stateTimestamp: now,
		members:        make(map[string]*member),
		staticMembers:  make(map[string]string),
		pending:        make(map[string]time.Time),
		pendingSync:    make(map[string]struct{}),
		supported:      make(map[string]int),
		offsets:        make(map[string]map[int32]committed),
	}
}

func (g *group) transition(to State, now time.Time) {
	if !slices.Contains(validPrevious[to], g.state) {
		panic("group: " + g.name + ": transition from " + g.state.String() + " to " + to.String())
	}
	g.previousState = g.state
	g.state = to
	g.stateTimestamp = now
}

func (g *group) hasMember(id string) bool { _, ok := g.members[id]; return ok }

// add makes m a member, awaiting join when reply is non-nil.
func (g *group) add(m *member) {
	if m.instanceID != nil {
		g.staticMembers[*m.instanceID] = m.id
	}
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.members[m.id] = m
	g.order = append(g.order, m.id)
	g.countProtocols(m, 1)
	if m.awaitingJoin() {
		g.awaitingJoin++
	}
	delete(g.pending, m.id)
}

// remove drops a member (or pending member) without answering it.
func (g *group) remove(id string) {
	if m, ok := g.members[id]; ok {
		g.countProtocols(m, -1)
		if m.awaitingJoin() {
			g.awaitingJoin--
		}
		if m.instanceID != nil {
			delete(g.staticMembers, *m.instanceID)
		}
		delete(g.members, id)
		g.order = slices.DeleteFunc(g.order, func(x string) bool { return x == id })
	}
	if g.leader == id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
	delete(g.pending, id)
	delete(g.pendingSync, id)
}

func (g *group) countProtocols(m *member, delta int) {
	for _, p := range m.protocols {
		g.supported[p.Name] += delta
		if g.supported[p.Name] == 0 {
			delete(g.supported, p.Name)
		}
	}
}

// update replaces a member's protocols and timeouts, and sets (or clears,
// with nil) the JoinGroup answer it awaits. An answer it awaited already
// (the client sent JoinGroup again) gets REBALANCE_IN_PROGRESS.
func (g *group) update(m *member, protocols []kmsg.JoinGroupRequestProtocol, rebalance, session time.Duration, reply func(*kmsg.JoinGroupResponse)) {
	g.countProtocols(m, -1)
	m.protocols = protocols
	g.countProtocols(m, 1)
	m.rebalanceTimeout, m.sessionTimeout = rebalance, session
	if reply != nil {
		g.answerJoin(m, &kmsg.JoinGroupResponse{MemberID: m.id, Generation: -1, ErrorCode: kerr.RebalanceInProgress.Code})
		g.awaitingJoin++
	} else if m.awaitingJoin() {
		g.awaitingJoin--
	}
	m.joinReply = reply
}

// answerJoin sends m its JoinGroup answer if it awaits one.
func (g *group) answerJoin(m *member, resp *kmsg.JoinGroupResponse) {
	if !m.awaitingJoin() {
		return
	}
	reply := m.joinReply
	m.joinReply = nil
	g.awaitingJoin--
	reply(resp)
}

// answerSync sends m its SyncGroup answer if it awaits one.
func (g *group) answerSync(m *member, resp *kmsg.SyncGroupResponse) bool {
	if !m.awaitingSync() {
		return false
	}
	reply := m.syncReply
	m.syncReply = nil
	reply(resp)
	return true
}

// supportsProtocols is ClassicGroup.supportsProtocols: an empty group takes
// any non-empty protocol type with some protocol; otherwise the type must
// match and some protocol must be listed by every member.
func (g *group) supportsProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if g.state == Empty {
		return protocolType != "" && len(protocols) > 0
	}
	if g.protocolType != protocolType {
		return false
	}
	for _, p := range protocols {
		if g.supported[p.Name] == len(g.members) {
			return true
		}
	}
	return false
}

// selectProtocol is ClassicGroup.selectProtocol: each member votes for its
// most preferred protocol among those all members list; the most votes win
// (ties go to the name first in byte order, where Kafka's pick is
// arbitrary).
func (g *group) selectProtocol() string {
	votes := make(map[string]int)
	for _, id := range g.order {
		for _, p := range g.members[id].protocols {
			if g.supported[p.Name] == len(g.members) {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for name, n := range votes {
		if n > bestVotes || (n == bestVotes && name < best) {
			best, bestVotes = name, n
		}
	}
	return best
}

func (g *group) hasAllMembersJoined() bool {
	return len(g.members) == g.awaitingJoin && len(g.pending) == 0
}

// rebalanceTimeout is the largest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var max time.Duration
	for _, m := range g.members {
		max = maxDuration(max, m.rebalanceTimeout)
	}
	return max
}

func maxDuration(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

// nextDeadline is the earliest armed deadline of the group, zero if none.
func (g *group) nextDeadline() time.Time {
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	earlier(g.joinDeadline)
	earlier(g.syncDeadline)
	for _, m := range g.members {
		earlier(m.heartbeatDeadline)
	}
	for _, t := range g.pending {
		earlier(t)
	}
	if g.consumer != nil {
		earlier(g.consumer.nextDeadline())
	}
	return next
}

// joinMembers lists the members with their metadata for the selected
// protocol, as the leader's JoinGroup answer carries them.
func (g *group) joinMembers() []kmsg.JoinGroupResponseMember {
	out := make([]kmsg.JoinGroupResponseMember, 0, len(g.order))
	protocol := ""
	if g.protocolName != nil {
		protocol = *g.protocolName
	}
	for _, id := range g.order {
		m := g.members[id]
		out = append(out, kmsg.JoinGroupResponseMember{MemberID: id, InstanceID: m.instanceID, ProtocolMetadata: m.metadata(protocol)})
	}
	return out
}

// checkInvariants panics if a documented invariant of the group is broken:
// that is a bug in this package, never an operating error.
func (g *group) checkInvariants() {
	fail := func(what string) { panic("group: " + g.name + ": invariant broken: " + what) }
	if len(g.order) != len(g.members) {
		fail("order and members differ")
	}
	awaiting, statics := 0, 0
	supported := make(map[string]int)
	for _, id := range g.order {
		m, ok := g.members[id]
		if !ok || m.id != id {
			fail("order names a missing member")
		}
		if m.awaitingJoin() {
			awaiting++
		}
		if m.instanceID != nil {
			statics++
			if g.staticMembers[*m.instanceID] != id {
				fail("static member not mapped")
			}
		}
		for _, p := range m.protocols {
			supported[p.Name]++
		}
	}
	if awaiting != g.awaitingJoin {
		fail("awaitingJoin count")
	}
	if statics != len(g.staticMembers) {
		fail("staticMembers count")
	}
	if len(supported) != len(g.supported) {
		fail("supported protocols")
	}
	for p, n := range supported {
		if g.supported[p] != n {
			fail("supported protocol count")
		}
	}
	if (g.leader == "") != (len(g.members) == 0) || (g.leader != "" && !g.hasMember(g.leader)) {
		fail("leader")
	}
	if (g.state == Empty || g.state == Dead) && len(g.members) > 0 {
		fail("members in an " + g.state.String() + " group")
	}
	if g.consumer != nil {
		if g.state != Empty && g.state != Dead {
			fail("a consumer group in classic state " + g.state.String())
		}
		g.consumer.checkInvariants(g.name)
	}
}
