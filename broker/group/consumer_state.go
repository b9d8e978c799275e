package group

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The consumer protocol (KIP-848): the group's types and their invariants.
// consumer.go serves ConsumerGroupHeartbeat, consumer_assign.go computes
// target assignments and reconciles members towards them.

// topicID is a topic's UUID, which the consumer protocol names topics by.
type topicID = [16]byte

// TopicMetadata is a topic as the consumer protocol's assignors see it.
type TopicMetadata struct {
	Name       string
	ID         [16]byte
	Partitions int32
	Internal   bool // never matched by a subscription regex
}

// ConsumerGroupState is a consumer group's state, as Kafka names it
// (ConsumerGroup.ConsumerGroupState).
type ConsumerGroupState int8

// The states of a consumer group.
const (
	ConsumerEmpty       ConsumerGroupState = iota // no members
	ConsumerAssigning                             // the group epoch is ahead of the target assignment
	ConsumerReconciling                           // some member has not reached the target assignment
	ConsumerStable                                // every member is at the target assignment epoch
)

func (s ConsumerGroupState) String() string {
	switch s {
	case ConsumerEmpty:
		return "Empty"
	case ConsumerAssigning:
		return "Assigning"
	case ConsumerReconciling:
		return "Reconciling"
	case ConsumerStable:
		return "Stable"
	}
	return "Unknown"
}

// memberState is where a member is in reconciling towards its target
// (Kafka's MemberState).
type memberState int8

const (
	memberStable               memberState = iota // at its target, or waiting for nothing
	memberUnrevokedPartitions                     // must give partitions up before it goes on
	memberUnreleasedPartitions                    // waits for partitions other members still own
)

func (s memberState) String() string {
	switch s {
	case memberStable:
		return "STABLE"
	case memberUnrevokedPartitions:
		return "UNREVOKED_PARTITIONS"
	case memberUnreleasedPartitions:
		return "UNRELEASED_PARTITIONS"
	}
	return "UNKNOWN"
}

// The member epochs a leaving member sends.
const (
	leaveGroupMemberEpoch       = -1 // leaves for good
	leaveGroupStaticMemberEpoch = -2 // a static member leaves for now: its instance ID keeps its partitions until its session expires
)

// partitions is a set of partitions by topic ID: each list sorted, without
// duplicates, and never empty.
type partitions map[topicID][]int32

func (p partitions) clone() partitions {
	out := make(partitions, len(p))
	for t, ps := range p {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (p partitions) has(t topicID, partition int32) bool {
	_, ok := slices.BinarySearch(p[t], partition)
	return ok
}

func (p partitions) count() int {
	n := 0
	for _, ps := range p {
		n += len(ps)
	}
	return n
}

func (p partitions) equal(q partitions) bool {
	if len(p) != len(q) {
		return false
	}
	for t, ps := range p {
		if !slices.Equal(ps, q[t]) {
			return false
		}
	}
	return true
}

// add puts a partition in p.
func (p partitions) add(t topicID, partition int32) {
	ps := p[t]
	i, ok := slices.BinarySearch(ps, partition)
	if !ok {
		p[t] = slices.Insert(ps, i, partition)
	}
}

// intersects says whether p and q share a partition.
func (p partitions) intersects(q partitions) bool {
	for t, ps := range p {
		for _, partition := range ps {
			if q.has(t, partition) {
				return true
			}
		}
	}
	return false
}

// subsetOf says whether every partition of p is in q.
func (p partitions) subsetOf(q partitions) bool {
	for t, ps := range p {
		for _, partition := range ps {
			if !q.has(t, partition) {
				return false
			}
		}
	}
	return true
}

// ownedPartitions reads the partitions a member says it owns; nil when the
// request leaves them out.
func ownedPartitions(topics []kmsg.ConsumerGroupHeartbeatRequestTopic) partitions {
	if topics == nil {
		return nil
	}
	out := make(partitions, len(topics))
	for _, t := range topics {
		for _, p := range t.Partitions {
			out.add(t.TopicID, p)
		}
	}
	return out
}

// consumerMember is one member of a consumer group.
type consumerMember struct {
	id                   string
	instanceID           *string // static membership; nil for a dynamic member
	rackID               *string
	clientID             string
	clientHost           string
	rebalanceTimeout     time.Duration
	subscribedTopicNames []string // sorted
	subscribedTopicRegex string   // "": none
	serverAssignor       string   // "": none asked for

	state               memberState
	memberEpoch         int32
	previousMemberEpoch int32
	assigned            partitions // the partitions the member may own at memberEpoch
	pendingRevocation   partitions // the partitions it must give up before it goes on

	sessionDeadline   time.Time // the member is fenced if it does not heartbeat by then
	rebalanceDeadline time.Time // armed while it revokes: fenced if it has not by then
}

func (m *consumerMember) clone() *consumerMember {
	out := *m
	out.subscribedTopicNames = slices.Clone(m.subscribedTopicNames)
	out.assigned = m.assigned.clone()
	out.pendingRevocation = m.pendingRevocation.clone()
	return &out
}

// sameSubscription says whether m and o subscribe to the same topics.
func (m *consumerMember) sameSubscription(o *consumerMember) bool {
	return slices.Equal(m.subscribedTopicNames, o.subscribedTopicNames) && m.subscribedTopicRegex == o.subscribedTopicRegex
}

// consumerGroup is the consumer protocol state of a group (group.consumer).
// The coordinator's loop owns it.
//
// Invariants (checkInvariants):
//   - staticMembers maps each static member's instance ID to its member ID;
//   - owners holds exactly the partitions of every member's assigned and
//     pendingRevocation sets, each with its member's epoch: no partition
//     is owned by two members;
//   - assignmentEpoch <= groupEpoch.
type consumerGroup struct {
	groupEpoch      int32
	assignmentEpoch int32 // the group epoch the target assignment was computed at
	members         map[string]*consumerMember
	staticMembers   map[string]string     // instance ID -> member ID
	target          map[string]partitions // member ID -> target assignment at assignmentEpoch
	owners          map[topicID]map[int32]int32
	// metadataHash is the hash of the metadata of the topics the members
	// subscribe to, as of groupEpoch: a change bumps the group epoch.
	metadataHash int64
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members:       make(map[string]*consumerMember),
		staticMembers: make(map[string]string),
		target:        make(map[string]partitions),
		owners:        make(map[topicID]map[int32]int32),
	}
}

// state is ConsumerGroup.state.
func (cg *consumerGroup) state() ConsumerGroupState {
	switch {
	case len(cg.members) == 0:
		return ConsumerEmpty
	case cg.groupEpoch > cg.assignmentEpoch:
		return ConsumerAssigning
	}
	for _, m := range cg.members {
		if m.state != memberStable || (m.memberEpoch != cg.assignmentEpoch && m.memberEpoch != leaveGroupStaticMemberEpoch) {
			return ConsumerReconciling
		}
	}
	return ConsumerStable
}

// partitionEpoch is ConsumerGroup.currentPartitionEpoch: the epoch of the
// member owning a partition, -1 if none does.
func (cg *consumerGroup) partitionEpoch(t topicID, partition int32) int32 {
	if e, ok := cg.owners[t][partition]; ok {
		return e
	}
	return -1
}

func (cg *consumerGroup) own(p partitions, epoch int32) {
	for t, ps := range p {
		byPartition := cg.owners[t]
		if byPartition == nil {
			byPartition = make(map[int32]int32)
			cg.owners[t] = byPartition
		}
		for _, partition := range ps {
			if _, taken := byPartition[partition]; taken {
				panic("group: a partition owned by two consumer group members")
			}
			byPartition[partition] = epoch
		}
	}
}

func (cg *consumerGroup) disown(p partitions) {
	for t, ps := range p {
		for _, partition := range ps {
			delete(cg.owners[t], partition)
		}
		if len(cg.owners[t]) == 0 {
			delete(cg.owners, t)
		}
	}
}

// setMember puts m in the group in place of the member of its ID (and of
// replaced, a static member it takes over from, if any).
func (cg *consumerGroup) setMember(m *consumerMember) {
	if old := cg.members[m.id]; old != nil {
		cg.removeMember(old.id)
	}
	cg.members[m.id] = m
	if m.instanceID != nil {
		cg.staticMembers[*m.instanceID] = m.id
	}
	cg.own(m.assigned, m.memberEpoch)
	cg.own(m.pendingRevocation, m.memberEpoch)
}

// removeMember drops a member, its partitions and its target assignment.
func (cg *consumerGroup) removeMember(id string) {
	m := cg.members[id]
	if m == nil {
		return
	}
	cg.disown(m.assigned)
	cg.disown(m.pendingRevocation)
	if m.instanceID != nil && cg.staticMembers[*m.instanceID] == id {
		delete(cg.staticMembers, *m.instanceID)
	}
	delete(cg.members, id)
}

// staticMember returns the member of an instance ID, nil if none.
func (cg *consumerGroup) staticMember(instanceID string) *consumerMember {
	if id, ok := cg.staticMembers[instanceID]; ok {
		return cg.members[id]
	}
	return nil
}

func (cg *consumerGroup) nextDeadline() time.Time {
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, m := range cg.members {
		earlier(m.sessionDeadline)
		earlier(m.rebalanceDeadline)
	}
	return next
}

// checkInvariants panics if a documented invariant is broken.
func (cg *consumerGroup) checkInvariants(name string) {
	fail := func(what string) { panic("group: " + name + ": consumer group invariant broken: " + what) }
	if cg.assignmentEpoch > cg.groupEpoch {
		fail("assignment epoch ahead of the group epoch")
	}
	statics, owned := 0, 0
	for id, m := range cg.members {
		if m.id != id {
			fail("member under another ID")
		}
		if m.instanceID != nil {
			statics++
			if cg.staticMembers[*m.instanceID] != id {
				fail("static member not mapped")
			}
		}
		for _, p := range []partitions{m.assigned, m.pendingRevocation} {
			for t, ps := range p {
				for _, partition := range ps {
					if e, ok := cg.owners[t][partition]; !ok || e != m.memberEpoch {
						fail("owned partition not in owners")
					}
				}
				owned += len(ps)
			}
		}
	}
	if statics != len(cg.staticMembers) {
		fail("staticMembers count")
	}
	n := 0
	for _, byPartition := range cg.owners {
		n += len(byPartition)
	}
	if n != owned {
		fail("owners count")
	}
}
