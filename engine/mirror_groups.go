package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/logstore"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Consumer group offset sync (KIP-1279): every
// mirror.group.offsets.sync.interval.ms each mirror copies the committed
// offsets of the source's groups (groups.include minus groups.exclude)
// into this node's group coordinator, for the partitions it is MIRRORING,
// so a consumer moved here after a failover resumes where it was: offsets
// are identical, nothing is translated.
//
// A round lists the source's groups (ListGroups on every broker: classic
// and consumer groups), fetches their offsets (OffsetFetch, batched per
// coordinator), and commits, per group, what changed, as a simple
// consumer would (generation -1), with the source's metadata and the
// leader epoch the local log has at the offset. Each offset is clamped to
// what the mirror holds: max(local log start, min(source committed, local
// high watermark)). A clamp never moves a group back: when the source's
// offset is at or past what this node already holds for the group, and
// only the clamp would lower it (the local log was cut, say), the synced
// offset stays; a source whose own offset went back (a reset there) is
// followed. A group with members on this node is skipped: its consumers
// own its offsets now. A topic STOPPED (failed over) is not synced any
// more; after failback it is MIRRORING again, and synced again.
//
// The round runs in its own goroutine beside the mirror's owner; it reads
// partition states as published and writes only through the coordinator,
// whose commits are durable when answered: a kill -9 in the middle of a
// round loses no commit already made.

// GroupSyncStatus is the outcome of a mirror's last consumer group offset
// sync round.
type GroupSyncStatus = groupSyncStatus

// groupSyncStatus is the outcome of a mirror's last group sync round.
type groupSyncStatus struct {
	At       time.Time     // when the last round ended (zero: none yet)
	Duration time.Duration // how long it took
	Synced   int           // groups whose offsets are the source's (clamped), after the round
	Skipped  int           // groups with members on this node, left alone
	Err      string        // the round's failure, if any
	// Lag is, per synced group, the source's committed offsets minus the
	// synced ones, summed over the group's mirrored partitions.
	Lag           map[string]int64
	SkippedGroups []string // the groups skipped, sorted
	Errors        int64    // rounds failed since the mirror started
}

// groupSync holds a mirror's group sync status for describe and metrics.
type groupSync struct {
	mu     sync.Mutex
	status groupSyncStatus
}

func (g *groupSync) get() groupSyncStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.status
	s.Lag = make(map[string]int64, len(g.status.Lag))
	for k, v := range g.status.Lag {
		s.Lag[k] = v
	}
	s.SkippedGroups = slices.Clone(g.status.SkippedGroups)
	return s
}

func (g *groupSync) set(s groupSyncStatus) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s.Errors = g.status.Errors
	if s.Err != "" {
		s.Errors++
	}
	g.status = s
}

// syncGroupsLoop runs a group sync round, then a transactional ID sync
// round (mirror_txns.go) and a topic config sync round
// (mirror_configs.go), every interval until ctx is done. On a cluster the
// group and transactional ID rounds run on the node coordinating groups
// (the controller): the others' coordinators answer no client.
func (m *mirror) syncGroupsLoop(ctx context.Context) {
	runEvery(ctx, m.config.GroupOffsetsSyncInterval, func(ctx context.Context) {
		if m.node.coordinatesGroups() {
			m.syncGroups(ctx)
			m.syncTransactions(ctx)
		}
		m.syncConfigs(ctx)
	})
}

// coordinatesGroups reports whether this node's group coordinator is the
// one clients are sent to: always alone, the controller's on a cluster
// (clusterBackend.Coordinator).
func (n *Node) coordinatesGroups() bool {
	return n.member == nil || n.member.cache.ControllerID() == n.member.cfg.NodeID
}

// syncGroups runs one round and records its outcome.
func (m *mirror) syncGroups(ctx context.Context) {
	started := time.Now()
	status, err := m.syncGroupsRound(ctx)
	if ctx.Err() != nil {
		return
	}
	status.At, status.Duration = time.Now(), time.Since(started)
	if err != nil {
		status.Err = err.Error()
		m.log.Warn("consumer group offset sync failed", "error", err)
	}
	m.groupSync.set(status)
}

// syncGroupsRound lists, fetches and commits; an error that ends the
// round early keeps what it synced before.
func (m *mirror) syncGroupsRound(ctx context.Context) (groupSyncStatus, error) {
	status := groupSyncStatus{Lag: map[string]int64{}}
	ctx, cancel := context.WithTimeout(ctx, m.config.RequestTimeout)
	defer cancel()
	source := kadm.NewClient(m.client)
	listed, err := source.ListGroups(ctx)
	if err != nil && len(listed) == 0 {
		return status, fmt.Errorf("list the source's groups: %w", err)
	}
	var names []string
	for name := range listed {
		if m.config.GroupsInclude.Matches(name) && !m.config.GroupsExclude.Matches(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return status, err
	}
	mirroring := m.groupSyncPartitions()
	active, committed, localErr := m.localGroups(ctx, names)
	if localErr != nil {
		return status, localErr
	}
	fetched := source.FetchManyOffsets(ctx, names...)
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("list the source's groups: %w", err))
	}
	for _, name := range names {
		if active[name] {
			status.Skipped++
			status.SkippedGroups = append(status.SkippedGroups, name)
			continue
		}
		response, ok := fetched[name]
		if !ok || response.Err != nil {
			errs = append(errs, fmt.Errorf("fetch the offsets of group %s: %w", name, errors.Join(response.Err, errNotFetched(ok))))
			continue
		}
		lag, err := m.syncGroup(ctx, name, response.Fetched, committed[name], mirroring)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		status.Synced++
		status.Lag[name] = lag
	}
	return status, errors.Join(errs...)
}

func errNotFetched(fetched bool) error {
	if fetched {
		return nil
	}
	return errors.New("no answer")
}

// mirroringPartitions is the mirror's partitions that are MIRRORING.
func (m *mirror) mirroringPartitions() map[logstore.TopicPartition]*mirrorPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[logstore.TopicPartition]*mirrorPartition, len(m.partitions))
	for tp, mp := range m.partitions {
		if record, _ := mp.status(); record.State == mirrorstate.Mirroring {
			out[tp] = mp
		}
	}
	return out
}

// groupSyncPartitions is the partitions whose source group offsets a
// round copies, by their local log (which clamps them): the MIRRORING
// ones. On a cluster, every MIRRORING partition of the mirror's topics
// (its record in etcd) this node holds a replica of, led here or not: the
// group coordinator (the controller) leads only some.
func (m *mirror) groupSyncPartitions() map[logstore.TopicPartition]*broker.Partition {
	out := map[logstore.TopicPartition]*broker.Partition{}
	if m.node.member == nil {
		for tp, mp := range m.mirroringPartitions() {
			out[tp] = mp.local
		}
		return out
	}
	for topic, spec := range m.node.member.cache.MirrorTopics(m.name) {
		id, err := rb.ParseTopicID(spec.TopicID)
		if err != nil {
			continue
		}
		for i := range spec.Partitions {
			record, ok := m.node.states.get(MirrorStateKey{Mirror: m.name, TopicID: id, Partition: i})
			if !ok || record.State != mirrorstate.Mirroring {
				continue
			}
			if p, err := m.node.LocalPartition(topic, i); err == nil {
				out[logstore.TopicPartition{Topic: topic, Partition: i}] = p
			}
		}
	}
	return out
}

// localGroups asks this node's coordinator which of names have members
// (a state other than Empty or Dead) and what they have committed.
func (m *mirror) localGroups(ctx context.Context, names []string) (active map[string]bool, committed map[string]map[logstore.TopicPartition]int64, err error) {
	coordinator := m.node.Groups()
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Groups = names
	described, err := coordinator.DescribeGroups(ctx, describe)
	if err != nil {
		return nil, nil, fmt.Errorf("describe this node's groups: %w", err)
	}
	active = map[string]bool{}
	for _, g := range described.Groups {
		if g.ErrorCode == 0 && g.State != "Empty" && g.State != "Dead" && g.State != "" {
			active[g.Group] = true
		}
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8 // several groups in one request
	for _, name := range names {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = name // no topics: all of them
		fetch.Groups = append(fetch.Groups, g)
	}
	fetched, err := coordinator.OffsetFetch(ctx, fetch)
	if err != nil {
		return nil, nil, fmt.Errorf("fetch this node's offsets: %w", err)
	}
	committed = map[string]map[logstore.TopicPartition]int64{}
	for _, g := range fetched.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, nil, fmt.Errorf("fetch this node's offsets of group %s: %w", g.Group, err)
		}
		offsets := map[logstore.TopicPartition]int64{}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && p.Offset >= 0 {
					offsets[logstore.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.Offset
				}
			}
		}
		committed[g.Group] = offsets
	}
	return active, committed, nil
}

// syncGroup commits the group's clamped source offsets that differ from
// what this node holds, and returns the group's lag: the source's
// committed offsets minus the synced ones.
func (m *mirror) syncGroup(ctx context.Context, name string, source kadm.OffsetResponses, local map[logstore.TopicPartition]int64,
	mirroring map[logstore.TopicPartition]*broker.Partition) (int64, error) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8 // a simple consumer's commit: no member, generation -1
	req.Group, req.Generation, req.MemberID = name, -1, ""
	var lag int64
	topics := map[string]int{}
	source.Each(func(o kadm.OffsetResponse) {
		tp := logstore.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		p := mirroring[tp]
		if p == nil || o.Err != nil || o.At < 0 {
			return
		}
		offset, held := clampGroupOffset(o.At, p.LogStartOffset(), p.HighWatermark(), local, tp)
		lag += max(o.At-offset, 0)
		if held {
			return
		}
		i, ok := topics[o.Topic]
		if !ok {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = o.Topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topics[o.Topic] = i
		}
		commit := kmsg.NewOffsetCommitRequestTopicPartition()
		commit.Partition, commit.Offset = o.Partition, offset
		commit.LeaderEpoch = int32(p.CommittedLeaderEpoch(rb.Offset(offset)))
		metadata := o.Metadata
		commit.Metadata = &metadata
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, commit)
	})
	if len(req.Topics) == 0 {
		return lag, nil
	}
	resp, err := m.node.Groups().OffsetCommit(ctx, req)
	if err != nil {
		return lag, fmt.Errorf("commit the offsets of group %s: %w", name, err)
	}
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("commit group %s's offset of %s-%d: %w", name, t.Topic, p.Partition, err))
			}
		}
	}
	return lag, errors.Join(errs...)
}

// clampGroupOffset is the offset to sync for a source commit of
// committed: max(logStart, min(committed, highWatermark)); held reports
// that nothing is to be written: this node holds that offset already, or
// the clamp alone would move the group back from what it holds.
func clampGroupOffset(committed int64, logStart, highWatermark rb.Offset, local map[logstore.TopicPartition]int64, tp logstore.TopicPartition) (offset int64, held bool) {
	offset = max(int64(logStart), min(committed, int64(highWatermark)))
	current, ok := local[tp]
	switch {
	case !ok:
		return offset, false
	case offset == current:
		return offset, true
	case offset < current && committed >= current:
		return current, true // only the clamp is lower: keep what is synced
	}
	return offset, false
}
