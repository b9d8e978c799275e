package engine

// Mirrors on a cluster (docs/cluster.md, "Mirrors on a cluster").
//
//   - A mirror's definition and its topic admin changes are etcd's
//     (cluster.MirrorSpec at mirrors/<name>): the node that receives the
//     admin RPC checks the mirror as a node alone would (its config, its
//     source) and writes the key by compare-and-swap; every node makes the
//     mirror locally and applies the changes in order through the node's
//     own admin calls (mirrorAdmin), so the selection is the same
//     everywhere (mirrorLoop, applyMirror).
//   - Every node runs the mirror, each for the partitions it leads: the
//     mirror's ensureTopics writes a cluster topic spec (the source's
//     topic ID, its partition count, the mirror's name) and waits for the
//     controller to place it; only the partitions whose local role says
//     this node leads get a machine and a fetcher (ensureClusterTopics).
//     A change of the partitions the node leads (reconcile) refreshes the
//     mirrors, which let go of the partitions they no longer lead
//     (dropLostLeaderships) and take those they now lead. Followers copy
//     the leader's bytes with follower Fetch; the broker refuses a mirror
//     append to a partition the node does not lead.
//   - The partition machine's record is etcd's (clusterStates,
//     cluster_mirror_states.go): the leader writes it before it acts on
//     it, and a new leader resumes the machine where the old one left it.
//     A node that leads a partition with a log but no record continues it
//     MIRRORING from its log end (continuingRecord).
//   - --stop (failover) is a change of the mirror's key like the others:
//     every node applies it, each stops the partitions it leads, taking
//     those of stopped topics whose record is not STOPPED
//     (takeStoppingPartitions: a stop the old leader began resumes on the
//     new one, without the source). A stop step that wrote to the log
//     waits until the ISR holds it (awaitReplicated) before its record
//     moves on, so a new leader never lacks what a record names. The node
//     that received the stop answers once every partition's record says
//     STOPPED (waitStopped). A partition is writable on every replica
//     once its record says STOPPED or its mirror is deleted (reconcile).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/cluster"
	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
)

// Bounds of a cluster mirror's waits.
const (
	// clusterMirrorPlacedWait bounds the mirror owner's wait for the
	// controller to place a mirror topic; a topic not placed by then is
	// taken at a later refresh.
	clusterMirrorPlacedWait = 10 * time.Second
	// clusterMirrorRetry is when the mirror loop tries again after a
	// failure to apply etcd's mirrors, if the cache did not change before.
	clusterMirrorRetry = time.Second
	// clusterStopReplicaWait bounds a stop step's wait for the ISR to hold
	// what it wrote; past it the step fails and is retried (an ISR member
	// that stopped fetching leaves the ISR after a lease or
	// replica.lag.time.max.ms).
	clusterStopReplicaWait = 10 * time.Second
	// clusterStopWait bounds the wait of the node that received a stop for
	// every partition's record to say STOPPED.
	clusterStopWait = 30 * time.Second
)

// errMirrorTopicConflict: the cluster has a topic of the mirrored name
// that is not this mirror's copy of the source topic.
var errMirrorTopicConflict = errors.New("engine: the cluster's topic is not the mirror's")

// clusterMirrorSync is a node's copy of etcd's mirrors.
type clusterMirrorSync struct {
	// applyMu: one writer of the local mirrors from etcd at a time (the
	// mirror loop, or an admin call, which writes etcd and applies its
	// change under it).
	applyMu sync.Mutex
	applied map[string]appliedMirror // guarded by applyMu

	ledMu sync.Mutex
	led   map[logstore.TopicPartition]bool // mirror partitions this node leads, as the last reconcile set

	epochKicks chan struct{} // capacity 1: a leader epoch may be above etcd's
}

// appliedMirror is how much of a mirror's key the node applied: the
// incarnation (etcd's CreateRevision) and its changes applied.
type appliedMirror struct {
	createRevision int64
	changes        int
}

// mirrorLoop applies etcd's mirrors to the node at each change of the
// cache, and again after clusterMirrorRetry while one fails.
func (n *Node) mirrorLoop(ctx context.Context) {
	c := n.member
	for {
		changed := c.cache.Changed()
		var retry <-chan time.Time
		if c.cache.Revision() > 0 {
			if err := n.syncMirrors(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("applying the cluster's mirrors failed", "error", err)
				retry = time.After(clusterMirrorRetry)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-retry:
		}
	}
}

// syncMirrors makes the node's mirrors etcd's: each mirror exists with
// every change applied, and a mirror gone from etcd goes.
func (n *Node) syncMirrors(ctx context.Context) error {
	s := &n.member.mirrors
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	specs := n.member.cache.Mirrors()
	var errs []error
	for name, st := range specs {
		if _, err := n.applyMirror(ctx, name, st); err != nil {
			errs = append(errs, err)
		}
	}
	for name := range s.applied {
		if _, ok := specs[name]; ok {
			continue
		}
		if err := n.Mirrors().DeleteMirror(ctx, name); err != nil && !errors.Is(err, kerr.ResourceNotFound) {
			errs = append(errs, fmt.Errorf("engine: mirror %s, deleted from etcd: %w", name, err))
			continue
		}
		delete(s.applied, name)
	}
	return errors.Join(errs...)
}

// applyMirror makes the local mirror st's: created (afresh when the node
// has not applied this incarnation: one loaded from mirror-<name>.json is
// rebuilt from etcd's changes) and the changes not applied yet applied in
// order by the node's own admin call. It answers the results of the last
// change applied (applyMu held).
func (n *Node) applyMirror(ctx context.Context, name string, st cluster.MirrorState) ([]netio.TopicResult, error) {
	s := &n.member.mirrors
	if s.applied == nil {
		s.applied = map[string]appliedMirror{}
	}
	done, ok := s.applied[name]
	if !ok || done.createRevision != st.CreateRevision {
		n.mirrorsMu.Lock()
		if m, ok := n.mirrors[name]; ok {
			m.stop()
			delete(n.mirrors, name)
		}
		err := n.createMirror(ctx, name, st.Config, false)
		n.mirrorsMu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("engine: mirror %s from etcd: %w", name, err)
		}
		done = appliedMirror{createRevision: st.CreateRevision}
		s.applied[name] = done
	}
	var results []netio.TopicResult
	for ; done.changes < len(st.Changes); done.changes++ {
		c := st.Changes[done.changes]
		r, err := n.Mirrors().SetTopicsDesiredState(ctx, name, netio.TopicsChange(c.Change),
			netio.TopicSelection{Names: c.Names, Include: c.Include, Exclude: c.Exclude})
		if err != nil {
			return nil, fmt.Errorf("engine: mirror %s: change %d from etcd: %w", name, done.changes, err)
		}
		results = r
		s.applied[name] = appliedMirror{createRevision: done.createRevision, changes: done.changes + 1}
	}
	return results, nil
}

// kickLeaderEpochs asks the epoch loop for a pass soon (never blocks; a
// node alone has none).
func (n *Node) kickLeaderEpochs() {
	if n.member == nil {
		return
	}
	select {
	case n.member.mirrors.epochKicks <- struct{}{}:
	default:
	}
}

// epochLoop writes to etcd the leader epochs of the partitions this node
// leads that are above etcd's (a mirror's EPOCH_FENCING raised it, or its
// source's batches carry a higher one), at each kick: the epoch clients
// are told by every node and fenced with by the leader is then one.
func (n *Node) epochLoop(ctx context.Context) {
	c := n.member
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.mirrors.epochKicks:
		}
		failed := false
		for _, t := range n.TopicsSnapshot() {
			for i, p := range t.Partitions {
				r, ok := p.Role()
				epoch := p.LeaderEpoch()
				if !ok || r.Leader != c.cfg.NodeID || epoch <= r.LeaderEpoch {
					continue
				}
				write, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
				_, err := cluster.RaiseLeaderEpoch(write, c.client, c.id, cluster.TopicPartition{Topic: t.Name, Partition: int32(i)},
					r.Leader, int32(r.LeaderEpoch), r.PartitionEpoch, int32(epoch))
				cancel()
				if err != nil && ctx.Err() == nil {
					// Stale: the cache brings the newer role, and reconcile kicks again.
					c.log.Info("leader epoch not written to etcd", "topic", t.Name, "partition", i, "epoch", epoch, "error", err)
					failed = !errors.Is(err, cluster.ErrStaleMetadata)
				}
			}
		}
		if failed {
			select {
			case <-ctx.Done():
				return
			case <-time.After(clusterMirrorRetry):
				n.kickLeaderEpochs()
			}
		}
	}
}

// noteMirrorLeaderships refreshes every mirror when the mirror partitions
// this node leads changed (reconcile, after the roles are set).
func (n *Node) noteMirrorLeaderships(led map[logstore.TopicPartition]bool) {
	n.kickLeaderEpochs()
	s := &n.member.mirrors
	s.ledMu.Lock()
	same := maps.Equal(led, s.led)
	s.led = led
	s.ledMu.Unlock()
	if same {
		return
	}
	n.mirrorsMu.Lock()
	for _, m := range n.mirrors {
		m.refreshSoon()
	}
	n.mirrorsMu.Unlock()
}

// leads reports whether the cluster has this node lead p, as the node's
// last reconcile set p's role.
func (n *Node) leads(p *broker.Partition) bool {
	r, ok := p.Role()
	return ok && r.Leader == n.member.cfg.NodeID
}

// continuingRecord is the record a new leader of a mirror partition
// starts its machine from when etcd holds none for it (a partition
// mirrored before the records moved to etcd): MIRRORING, from the log
// end. A record of an alignment is etcd's like any other: a failback's
// alignment that a leader's loss interrupted runs again on the new one.
// The log is the partition's replica, a prefix of the source's partition
// byte for byte (the old leader's copy of it): failback's alignment, which
// a machine without a record starts with, would find no last mirror epoch
// at the source and truncate it to nothing, then fetch it all again. The
// source's epoch comes with the metadata (EPOCH_FENCING if it is close).
func continuingRecord(mp *mirrorPartition) mirrorstate.Record {
	return mirrorstate.Record{State: mirrorstate.Mirroring, Previous: mirrorstate.LogAlignment, StateEpoch: 1,
		LeaderEpoch: max(mp.local.LeaderEpoch(), 0), SourceLeaderEpoch: rb.NoEpoch, NextRetryAtMillis: -1,
		LastMirrorEpoch: rb.NoEpoch, LastMirrorOffset: -1, TruncateTo: -1}
}

// ensureClusterTopics is ensureTopics on a cluster: each topic's cluster
// spec is written if absent (grown if the source grew) and placed, and the
// partitions this node leads are registered (m.mu held). A topic the
// cluster cannot take now is skipped until a later refresh; one that is
// another topic of the same name fails.
func (m *mirror) ensureClusterTopics(ctx context.Context, topics []kmsg.MetadataResponseTopic) []ensuredTopic {
	out := make([]ensuredTopic, len(topics))
	for i, t := range topics {
		name, id, count := *t.Topic, rb.TopicID(t.TopicID), int32(len(t.Partitions))
		if err := m.ensureClusterTopic(ctx, name, id, count); err != nil {
			if errors.Is(err, errMirrorTopicConflict) {
				out[i].err = err
			} else {
				m.log.Warn("the cluster has not taken the mirror topic yet", "topic", name, "error", err)
			}
			continue
		}
		for index := range count {
			tp := logstore.TopicPartition{Topic: name, Partition: index}
			if m.partitions[tp] != nil {
				continue
			}
			p, err := m.node.LocalPartition(name, index)
			if err != nil || !m.node.leads(p) {
				continue // led elsewhere, or not made here yet: the node's reconcile refreshes the mirror
			}
			mp := m.newPartition(name, id, index, p)
			m.partitions[tp] = mp
			out[i].added = append(out[i].added, mp)
		}
	}
	return out
}

// ensureClusterTopic writes the spec of a mirror topic (or grows it) and
// waits, bounded, until the controller placed it.
func (m *mirror) ensureClusterTopic(ctx context.Context, name string, id rb.TopicID, count int32) error {
	c := m.node.member
	want := id.String()
	st, ok := c.cache.Topic(name)
	revision := st.ModRevision
	switch {
	case !ok:
		written, err := cluster.CreateTopic(ctx, c.client, c.id, name, cluster.TopicSpec{TopicID: want, Partitions: count, Mirror: m.name})
		if err != nil {
			return err // ErrTopicExists too: a later refresh reads the spec
		}
		revision = written.ModRevision
		m.log.Info("created the mirror topic on the cluster", "topic", name, "partitions", count)
	case st.TopicID != want:
		return fmt.Errorf("%w: topic %s has topic ID %s on the cluster, the source's is %s", errMirrorTopicConflict, name, st.TopicID, want)
	case st.Mirror != m.name:
		return fmt.Errorf("%w: topic %s of the cluster is not mirror %s's (mirror %q)", errMirrorTopicConflict, name, m.name, st.Mirror)
	case st.Partitions < count:
		grown, err := cluster.GrowTopic(ctx, c.client, c.id, name, count)
		if err != nil {
			return err
		}
		revision = grown.ModRevision
	}
	ctx, cancel := context.WithTimeout(ctx, clusterMirrorPlacedWait)
	defer cancel()
	return c.cache.WaitTopicPlaced(ctx, name, revision)
}

// dropLostLeaderships lets go of the partitions this node no longer leads
// (or no longer has): their machines stop (events still queued for them
// are ignored), their fetchers drop them. They stay read-only. The
// owner's, at each refresh.
func (m *mirror) dropLostLeaderships() {
	var lost []*mirrorPartition
	m.mu.Lock()
	for tp, mp := range m.partitions {
		if p, err := m.node.LocalPartition(tp.Topic, tp.Partition); err == nil && p == mp.local && m.node.leads(p) {
			continue
		}
		mp.dropped.Store(true)
		delete(m.partitions, tp)
		lost = append(lost, mp)
	}
	m.mu.Unlock()
	for _, mp := range lost {
		mp.stopFetching()
		delete(m.fetchedLeaders, mp)
		m.fetchSetChanged = true
		m.log.Info("let go of a mirror partition: this node no longer leads it", "topic", mp.topic, "partition", mp.partition)
	}
}

// clusterMirrors is the mirror administration of a cluster node: the
// changes go to etcd, and the node applies them as every node does.
type clusterMirrors struct{ n *Node }

func (a clusterMirrors) CreateMirror(ctx context.Context, name string, config map[string]string) error {
	n := a.n
	if !mirrorName.MatchString(name) {
		return fmt.Errorf("%w: mirror name %q: want 1-249 of [a-zA-Z0-9._-]", kerr.InvalidRequest, name)
	}
	if _, ok := n.member.cache.MirrorCreateRevision(name); ok {
		return fmt.Errorf("%w: mirror %q exists", kerr.DuplicateResource, name)
	}
	// Checked as a node alone checks it: the config parses and the source
	// answers.
	m, err := startMirror(n, name, config)
	if err != nil {
		return err
	}
	err = m.probeSource(ctx)
	m.stop()
	if err != nil {
		return err
	}
	s := &n.member.mirrors
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	st, err := cluster.CreateMirror(ctx, n.member.client, n.member.id, name, config)
	if errors.Is(err, cluster.ErrMirrorExists) {
		return fmt.Errorf("%w: mirror %q exists", kerr.DuplicateResource, name)
	}
	if err != nil {
		return fmt.Errorf("engine: create mirror %s: %w", name, err)
	}
	if _, err := n.applyMirror(ctx, name, st); err != nil {
		return err
	}
	return n.waitMirrorRevision(ctx, name, st.ModRevision)
}

// waitMirrorRevision waits, bounded, until the node's cache holds the
// write of a mirror's key at revision: a call that follows an admin call
// on this node finds what it wrote.
func (n *Node) waitMirrorRevision(ctx context.Context, name string, revision int64) error {
	ctx, cancel := context.WithTimeout(ctx, clusterCreateTopicWait)
	defer cancel()
	if err := n.member.cache.WaitRevision(ctx, revision); err != nil {
		return fmt.Errorf("engine: mirror %s: this node's view of etcd is behind: %w: %w", name, err, kerr.RequestTimedOut)
	}
	return nil
}

// DeleteMirror deletes a mirror whose topics on the cluster are all
// stopped (every partition's record STOPPED), as a node alone does.
func (a clusterMirrors) DeleteMirror(ctx context.Context, name string) error {
	n := a.n
	if _, ok := n.member.cache.MirrorCreateRevision(name); !ok {
		return fmt.Errorf("%w: no mirror %q", kerr.ResourceNotFound, name)
	}
	for topic, spec := range n.member.cache.MirrorTopics(name) {
		if err := n.stopDone(name, topic, spec); err != nil {
			return fmt.Errorf("%w: mirror %q still mirrors topic %s: stop its topics first (%w)", kerr.InvalidRequest, name, topic, err)
		}
	}
	s := &n.member.mirrors
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if _, err := cluster.DeleteMirror(ctx, n.member.client, n.member.id, name); err != nil {
		if errors.Is(err, cluster.ErrUnknownMirror) {
			return fmt.Errorf("%w: no mirror %q", kerr.ResourceNotFound, name)
		}
		return fmt.Errorf("engine: delete mirror %s: %w", name, err)
	}
	if err := n.Mirrors().DeleteMirror(ctx, name); err != nil && !errors.Is(err, kerr.ResourceNotFound) {
		return err
	}
	delete(s.applied, name)
	return nil
}

// SetTopicsDesiredState appends the change to the mirror's key and
// applies it here (with any change before it this node has not applied),
// answering this node's results; the other nodes apply it from etcd.
func (a clusterMirrors) SetTopicsDesiredState(ctx context.Context, name string, change netio.TopicsChange, topics netio.TopicSelection) ([]netio.TopicResult, error) {
	n := a.n
	for key, list := range map[string][]string{"include": topics.Include, "exclude": topics.Exclude} {
		if _, err := patterns(key, strings.Join(list, ",")); err != nil {
			return nil, fmt.Errorf("%w: %w", kerr.InvalidRegularExpression, err)
		}
	}
	s := &n.member.mirrors
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	st, err := cluster.AppendMirrorChange(ctx, n.member.client, n.member.id, name,
		cluster.MirrorChange{Change: int8(change), Names: topics.Names, Include: topics.Include, Exclude: topics.Exclude})
	if errors.Is(err, cluster.ErrUnknownMirror) {
		return nil, fmt.Errorf("%w: no mirror %q", kerr.ResourceNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: mirror %s: %w", name, err)
	}
	results, err := n.applyMirror(ctx, name, st)
	if err != nil {
		return nil, err
	}
	if err := n.waitMirrorRevision(ctx, name, st.ModRevision); err != nil {
		return nil, err
	}
	if change == netio.StopMirroring {
		n.waitStopped(ctx, name, results)
	}
	return results, nil
}

// waitStopped waits, bounded, until every partition of each stopped topic
// the results name without an error has a record saying STOPPED, on
// whichever node leads it; a topic that does not get there in time has
// the first such partition's state as its error (retriable: the leaders
// go on, and a stop asked again waits again).
func (n *Node) waitStopped(ctx context.Context, mirror string, results []netio.TopicResult) {
	ctx, cancel := context.WithTimeout(ctx, clusterStopWait)
	defer cancel()
	c := n.member
	for { // bounded by ctx
		changed := c.cache.Changed()
		specs := c.cache.MirrorTopics(mirror)
		pending := 0
		for i, r := range results {
			if r.Err != nil && !errors.Is(r.Err, errStopNotDone) {
				continue
			}
			results[i].Err = nil
			spec, ok := specs[r.Topic]
			if !ok {
				continue
			}
			if err := n.stopDone(mirror, r.Topic, spec); err != nil {
				results[i].Err = err
				pending++
			}
		}
		if pending == 0 {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// errStopNotDone: a partition of a stopped topic has no STOPPED record
// yet.
var errStopNotDone = fmt.Errorf("the stop did not finish on every partition's leader: %w", kerr.RequestTimedOut)

// stopDone is nil when every partition of a mirror's topic has a STOPPED
// record, else errStopNotDone naming the first that has not.
func (n *Node) stopDone(mirror, topic string, spec cluster.TopicState) error {
	id, err := rb.ParseTopicID(spec.TopicID)
	if err != nil {
		return fmt.Errorf("engine: topic %s: %w", topic, err)
	}
	for i := range spec.Partitions {
		record, ok := n.states.get(MirrorStateKey{Mirror: mirror, TopicID: id, Partition: i})
		if ok && record.State == mirrorstate.Stopped {
			continue
		}
		state := "no record"
		if ok {
			state = record.State.String()
			if record.Error != "" {
				state += ": " + record.Error
			}
		}
		leader := cluster.NoLeader
		if st, ok := n.member.cache.Partition(cluster.TopicPartition{Topic: topic, Partition: i}); ok {
			leader = st.Leader
		}
		return fmt.Errorf("%w: %s-%d is %s (leader %d)", errStopNotDone, topic, i, state, leader)
	}
	return nil
}

// addClusterTopics adds the cluster's topics of the mirror to held
// (heldTopics).
func (m *mirror) addClusterTopics(held map[string]bool) {
	for topic := range m.node.member.cache.MirrorTopics(m.name) {
		held[topic] = true
	}
}

// takeStoppingPartitions gives a machine to each partition of the
// mirror's stopped topics that this node leads and whose record is not
// STOPPED: a stop the old leader began, or never reached, resumes here,
// without asking the source (the owner's, at each refresh and stop).
func (m *mirror) takeStoppingPartitions() []partitionEvent {
	specs := m.node.member.cache.MirrorTopics(m.name)
	var events []partitionEvent
	m.mu.Lock()
	for topic := range m.stopped {
		spec, ok := specs[topic]
		if !ok {
			continue
		}
		id, err := rb.ParseTopicID(spec.TopicID)
		if err != nil {
			continue
		}
		for index := range spec.Partitions {
			tp := logstore.TopicPartition{Topic: topic, Partition: index}
			if m.partitions[tp] != nil {
				continue
			}
			p, err := m.node.LocalPartition(topic, index)
			if err != nil || !m.node.leads(p) {
				continue
			}
			if record, ok := m.node.states.get(MirrorStateKey{Mirror: m.name, TopicID: id, Partition: index}); ok && record.State == mirrorstate.Stopped {
				continue
			}
			mp := m.newPartition(topic, id, index, p)
			m.partitions[tp] = mp
			events = append(events, partitionEvent{mp, nil})
		}
	}
	m.mu.Unlock()
	for i := range events {
		events[i].event = m.firstEvent(events[i].mp) // takes m.mu
	}
	if len(events) > 0 {
		m.log.Info("took the stop of partitions this node now leads", "partitions", len(events))
	}
	return events
}

// awaitReplicated waits, on a cluster, until the ISR holds mp's log: the
// record of a stop's next step names what this one wrote, and a new
// leader must have it. A node alone returns at once.
func (m *mirror) awaitReplicated(ctx context.Context, mp *mirrorPartition) error {
	if m.node.member == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, clusterStopReplicaWait)
	defer cancel()
	return mp.local.AwaitReplicated(ctx, mp.local.LogEndOffset())
}

// ListMirrors and LastMirrorEpochs answer from the node's own copy of
// each mirror: every node has every mirror. DescribeMirrors shows every
// partition of the cluster, with its leader and ISR
// (cluster_mirror_describe.go).
func (a clusterMirrors) ListMirrors(ctx context.Context) ([]netio.MirrorListing, error) {
	return a.n.Mirrors().ListMirrors(ctx)
}

func (a clusterMirrors) DescribeMirrors(ctx context.Context, names []string, failedOnly bool) ([]netio.MirrorDescription, error) {
	return a.n.describeClusterMirrors(ctx, names, failedOnly)
}

func (a clusterMirrors) LastMirrorEpochs(ctx context.Context, clusterID string, partitions []netio.TopicPartitions) ([]netio.LastMirrorEpoch, error) {
	return a.n.Mirrors().LastMirrorEpochs(ctx, clusterID, partitions)
}
