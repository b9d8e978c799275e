package group

import (
	"maps"
	"regexp"
	"slices"
)

// The server-side assignors (group.consumer.assignors) and reconciliation
// (Kafka's CurrentAssignmentBuilder) of the consumer protocol.

// The assignors Kafka serves; the first of Config.ConsumerAssignors is the
// group's default.
const (
	uniformAssignor = "uniform"
	rangeAssignor   = "range"
)

// compileSubscriptionRegex compiles a SubscribedTopicRegex. Kafka uses
// RE2/J, whose syntax is Go's; the regex must match the whole topic name
// (Java's Matcher.matches).
func compileSubscriptionRegex(expr string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + expr + `)$`)
}

// topicIndex is the topics a computation sees, read once from Config.Topics.
type topicIndex struct {
	byName map[string]TopicMetadata
	names  []string // sorted
}

func newTopicIndex(topics []TopicMetadata) topicIndex {
	idx := topicIndex{byName: make(map[string]TopicMetadata, len(topics))}
	for _, t := range topics {
		if t.Partitions <= 0 {
			continue
		}
		idx.byName[t.Name] = t
		idx.names = append(idx.names, t.Name)
	}
	slices.Sort(idx.names)
	return idx
}

// memberTopics is the sorted names of the existing topics m subscribes to:
// its names and the non-internal topics its regex matches.
func (idx topicIndex) memberTopics(m *consumerMember) []string {
	set := make(map[string]bool)
	for _, name := range m.subscribedTopicNames {
		if _, ok := idx.byName[name]; ok {
			set[name] = true
		}
	}
	if m.subscribedTopicRegex != "" {
		// Validated when the member sent it; a regex that does not compile
		// here matches nothing.
		if re, err := compileSubscriptionRegex(m.subscribedTopicRegex); err == nil {
			for _, name := range idx.names {
				if !idx.byName[name].Internal && re.MatchString(name) {
					set[name] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// subscriptionMetadata is the metadata of every topic some member
// subscribes to.
func (idx topicIndex) subscriptionMetadata(members map[string]*consumerMember) map[string]TopicMetadata {
	out := make(map[string]TopicMetadata)
	for _, m := range members {
		for _, name := range idx.memberTopics(m) {
			out[name] = idx.byName[name]
		}
	}
	return out
}

// preferredAssignor is ConsumerGroup.computePreferredServerAssignor: the
// assignor most members ask for (ties to the first name in byte order),
// else the default.
func preferredAssignor(members map[string]*consumerMember, assignors []string) string {
	votes := make(map[string]int)
	for _, m := range members {
		if m.serverAssignor != "" {
			votes[m.serverAssignor]++
		}
	}
	best, bestVotes := assignors[0], 0
	for _, name := range slices.Sorted(maps.Keys(votes)) {
		if votes[name] > bestVotes {
			best, bestVotes = name, votes[name]
		}
	}
	return best
}

// assign computes the target assignment of members (by member ID) over
// the topics of idx, starting from the previous target.
func assign(assignor string, members map[string]*consumerMember, idx topicIndex, previous map[string]partitions) map[string]partitions {
	ids := slices.Sorted(maps.Keys(members))
	subscriptions := make(map[string][]string, len(ids))
	for _, id := range ids {
		subscriptions[id] = idx.memberTopics(members[id])
	}
	if assignor == rangeAssignor {
		return assignRange(ids, subscriptions, idx)
	}
	return assignUniform(ids, subscriptions, idx, previous)
}

// assignRange is the range assignor: for each topic, the members
// subscribed to it, in member ID order, take consecutive ranges of its
// partitions, the first ones one partition more when they do not divide
// evenly. Members subscribed to the same topics get the same partition
// numbers of each (co-partitioning).
func assignRange(ids []string, subscriptions map[string][]string, idx topicIndex) map[string]partitions {
	out := make(map[string]partitions, len(ids))
	for _, id := range ids {
		out[id] = make(partitions)
	}
	subscribers := make(map[string][]string)
	for _, id := range ids {
		for _, name := range subscriptions[id] {
			subscribers[name] = append(subscribers[name], id)
		}
	}
	for _, name := range idx.names {
		members := subscribers[name]
		if len(members) == 0 {
			continue
		}
		t := idx.byName[name]
		quota, extra := int(t.Partitions)/len(members), int(t.Partitions)%len(members)
		next := int32(0)
		for i, id := range members {
			n := quota
			if i < extra {
				n++
			}
			for range n {
				out[id].add(t.ID, next)
				next++
			}
		}
	}
	return out
}

// assignUniform is the uniform assignor: every partition of a subscribed
// topic goes to one of its subscribers, the counts as even as the
// subscriptions allow, and a member keeps what it had in the previous
// target where balance permits. With the same subscription everywhere the
// counts differ by at most one, as Kafka's OptimizedUniformAssignmentBuilder
// gives; with different subscriptions it is a greedy balance (each
// partition, those of the least subscribed topics first, to the subscriber
// with the fewest), where Kafka's GeneralUniformAssignmentBuilder may
// balance better.
func assignUniform(ids []string, subscriptions map[string][]string, idx topicIndex, previous map[string]partitions) map[string]partitions {
	out := make(map[string]partitions, len(ids))
	counts := make(map[string]int, len(ids))
	subscribers := make(map[string][]string)
	for _, id := range ids {
		out[id] = make(partitions)
		for _, name := range subscriptions[id] {
			subscribers[name] = append(subscribers[name], id)
		}
	}
	// quota is each member's fair share: the partitions of its topics,
	// each topic shared among its subscribers, rounded up.
	quota := make(map[string]int, len(ids))
	total := 0
	for name, members := range subscribers {
		total += int(idx.byName[name].Partitions)
		for _, id := range members {
			quota[id] += int(idx.byName[name].Partitions)
		}
	}
	homogeneous := true
	for _, id := range ids {
		if !slices.Equal(subscriptions[id], subscriptions[ids[0]]) {
			homogeneous = false
		}
	}
	extra := 0
	if homogeneous && len(ids) > 0 {
		extra = total % len(ids)
		for _, id := range ids {
			quota[id] = total / len(ids)
		}
	} else {
		for _, id := range ids {
			n := 0
			for _, name := range subscriptions[id] {
				s := len(subscribers[name])
				n += (int(idx.byName[name].Partitions) + s - 1) / s
			}
			quota[id] = n
		}
	}
	taken := make(map[topicID]map[int32]bool)
	take := func(id string, t topicID, p int32) {
		out[id].add(t, p)
		counts[id]++
		if taken[t] == nil {
			taken[t] = make(map[int32]bool)
		}
		taken[t][p] = true
	}
	// Sticky: each member keeps its previous partitions still subscribed
	// to, up to its quota (plus one while extra slots remain, when
	// homogeneous).
	for _, id := range ids {
		subscribed := make(map[topicID]int32)
		for _, name := range subscriptions[id] {
			subscribed[idx.byName[name].ID] = idx.byName[name].Partitions
		}
		prev := previous[id]
		topics := slices.SortedFunc(maps.Keys(prev), compareTopicIDs)
		kept := 0
		var over []struct {
			t topicID
			p int32
		}
		for _, t := range topics {
			n, ok := subscribed[t]
			if !ok {
				continue
			}
			for _, p := range prev[t] {
				if p >= n || taken[t][p] {
					continue
				}
				if kept < quota[id] {
					take(id, t, p)
					kept++
				} else {
					over = append(over, struct {
						t topicID
						p int32
					}{t, p})
				}
			}
		}
		if homogeneous && extra > 0 && len(over) > 0 {
			take(id, over[0].t, over[0].p)
			extra--
		}
	}
	// The rest: each partition to the subscriber with the fewest, ties to
	// the first in member ID order; topics with fewer subscribers first.
	names := slices.Clone(idx.names)
	slices.SortStableFunc(names, func(a, b string) int { return len(subscribers[a]) - len(subscribers[b]) })
	for _, name := range names {
		members := subscribers[name]
		if len(members) == 0 {
			continue
		}
		t := idx.byName[name]
		for p := range t.Partitions {
			if taken[t.ID][p] {
				continue
			}
			best := members[0]
			for _, id := range members[1:] {
				if counts[id] < counts[best] {
					best = id
				}
			}
			take(best, t.ID, p)
		}
	}
	return out
}

func compareTopicIDs(a, b topicID) int {
	for i := range a {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return 0
}

// reconcile is CurrentAssignmentBuilder.build: it moves m towards target
// (the member's partitions at targetEpoch) as far as the partitions other
// members still own and those m still owns (owned; nil: not reported)
// allow.
func (cg *consumerGroup) reconcile(m *consumerMember, targetEpoch int32, target partitions, owned partitions) {
	switch m.state {
	case memberStable:
		if m.memberEpoch != targetEpoch {
			cg.nextAssignment(m, m.memberEpoch, targetEpoch, target, owned)
		}
	case memberUnrevokedPartitions:
		if ownsAny(owned, m.pendingRevocation) {
			return
		}
		cg.nextAssignment(m, min(m.memberEpoch+1, targetEpoch), targetEpoch, target, owned)
	case memberUnreleasedPartitions:
		cg.nextAssignment(m, m.memberEpoch, targetEpoch, target, owned)
	default:
		panic("group: reconciling a member in state " + m.state.String())
	}
}

// ownsAny is CurrentAssignmentBuilder.ownsRevokedPartitions: a member that
// did not report what it owns is taken to own everything.
func ownsAny(owned, revoking partitions) bool {
	if owned == nil {
		return true
	}
	return owned.intersects(revoking)
}

// nextAssignment is CurrentAssignmentBuilder.computeNextAssignment.
func (cg *consumerGroup) nextAssignment(m *consumerMember, memberEpoch, targetEpoch int32, target partitions, owned partitions) {
	assigned, revoking, pending := make(partitions), make(partitions), make(partitions)
	unreleased := false
	topics := make(map[topicID]bool)
	for t := range target {
		topics[t] = true
	}
	for t := range m.assigned {
		topics[t] = true
	}
	for t := range topics {
		for _, p := range m.assigned[t] {
			if target.has(t, p) {
				assigned.add(t, p)
			} else {
				revoking.add(t, p)
			}
		}
		for _, p := range target[t] {
			if assigned.has(t, p) {
				continue
			}
			if cg.partitionEpoch(t, p) != -1 && !m.pendingRevocation.has(t, p) {
				unreleased = true
				continue
			}
			pending.add(t, p)
		}
	}
	update := func(state memberState, epoch int32, assigned, revoking partitions) {
		if epoch != m.memberEpoch {
			m.previousMemberEpoch = m.memberEpoch
		}
		m.state, m.memberEpoch, m.assigned, m.pendingRevocation = state, epoch, assigned, revoking
	}
	switch {
	case len(revoking) > 0 && ownsAny(owned, revoking):
		update(memberUnrevokedPartitions, memberEpoch, assigned, revoking)
	default:
		for t, ps := range pending {
			for _, p := range ps {
				assigned.add(t, p)
			}
		}
		state := memberStable
		if unreleased {
			state = memberUnreleasedPartitions
		}
		update(state, targetEpoch, assigned, make(partitions))
	}
}

func validAssignors(names []string) bool {
	if len(names) == 0 {
		return false
	}
	for _, name := range names {
		if name != uniformAssignor && name != rangeAssignor {
			return false
		}
	}
	return true
}
