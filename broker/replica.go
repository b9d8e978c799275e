package broker

// A partition's place in a cluster (docs/cluster.md): the Role etcd says
// it has, and what the leader keeps of its followers to move the high
// watermark and the ISR, as Kafka's Partition does
// (kafka.cluster.Partition: makeLeader, updateFollowerFetchState,
// maybeIncrementLeaderHW, maybeExpandIsr, maybeShrinkIsr,
// appendRecordsToLeader, checkEnoughReplicasReachOffset).
//
// No role set: the node is alone and leads the partition as it always
// did (high watermark = log end after each append, acks not waited on).
//
// Leader (Role.Leader is this node):
//
//   - each follower's state is what its last fetch said: its log end
//     offset (the fetch offset), when it was last caught up to the
//     leader's log end (Kafka's Replica.updateFetchStateOrThrow), and
//     the leader's log end at its previous fetch;
//   - highWatermark = min(own log end, the log end of every follower in
//     the maximal ISR or caught up within replica.lag.time.max.ms),
//     never moving back, and not moving at all while the ISR is smaller
//     than min(min.insync.replicas, replicas) (Kafka 4's isUnderMinIsr);
//   - the maximal ISR: a proposed expansion counts at once (waiting for
//     one more replica is safe), a proposed shrink only once written
//     (KIP-497);
//   - a follower leaves the ISR when it has not been caught up for
//     replica.lag.time.max.ms, joins when its log end reaches the high
//     watermark and the start of the current leader epoch. The node's
//     ISR goroutine proposes either through the ISR writer (etcd's
//     AlterISR), one change in flight per partition, never on a produce
//     or fetch path;
//   - acks=-1: NOT_ENOUGH_REPLICAS before the append when the ISR is
//     below min(min.insync.replicas, replicas); after it, the produce
//     waits for the high watermark to pass the batch (REQUEST_TIMED_OUT
//     at the produce's deadline), then answers
//     NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal ISR shrank below
//     it meanwhile.
//
// Follower (or no leader): Produce, consumer reads, ListOffsets,
// DeleteRecords and followers' fetches answer NOT_LEADER_OR_FOLLOWER;
// the replica fetcher writes with AppendReplica and TruncateReplica.
//
// Locking: replication.mu is taken after Partition.mu, never before.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Role is what the cluster says of one partition (from etcd).
type Role struct {
	Leader        int32 // -1: none
	LeaderEpoch   rb.Epoch
	Replicas, ISR []int32
	// PartitionEpoch is the etcd ModRevision the role was read at
	// (AlterISR's CAS).
	PartitionEpoch int64
}

// clone copies the role's slices, so that the caller's stay theirs.
func (r Role) clone() Role {
	r.Replicas, r.ISR = slices.Clone(r.Replicas), slices.Clone(r.ISR)
	return r
}

// ISRWriter writes a partition's new ISR (etcd's AlterISR, a CAS on
// r.PartitionEpoch) and returns the role as written.
type ISRWriter func(ctx context.Context, tp logstore.TopicPartition, r Role, isr []int32) (Role, error)

// DefaultReplicaLagTimeMax is Kafka's replica.lag.time.max.ms.
const DefaultReplicaLagTimeMax = 30 * time.Second

// ErrLeader refuses a follower's write (AppendReplica, TruncateReplica)
// on a partition this node leads.
var ErrLeader = errors.New("broker: this node leads the partition")

// roleView is a role as this node sees it; never changed once stored.
type roleView struct {
	Role
	self  int32
	leads bool
}

// replication is a partition's cluster state.
type replication struct {
	view atomic.Pointer[roleView] // nil: no role
	// alone is the view Replication answers without a role (this node
	// leads, the only replica), made once.
	alone atomic.Pointer[roleView]

	mu sync.Mutex
	// followers are the other replicas, while this node leads; bounded
	// by the role's replicas.
	followers map[int32]*followerState
	// maximalISR is the ISR with a proposed expansion in it; inflight: a
	// change is proposed and not written yet (one at a time); generation
	// counts SetRole calls, so that a proposal's answer to an older role
	// is dropped.
	maximalISR []int32
	inflight   bool
	generation uint64
	// epochStart is the leader's log end when it took its epoch: a
	// follower joins the ISR only at or past it.
	epochStart rb.Offset
	// raised is closed and replaced when the high watermark rises or
	// the role changes: acks=-1 produces wait on it.
	raised chan struct{}
}

// followerState is the leader's view of one follower (Kafka's
// ReplicaState).
type followerState struct {
	logEndOffset                rb.Offset // the last fetch offset, -1 unknown
	lastCaughtUp                time.Time
	lastFetch                   time.Time
	lastFetchLeaderLogEndOffset rb.Offset
}

// caughtUp is Kafka's ReplicaState.isCaughtUp.
func (f *followerState) caughtUp(leaderEnd rb.Offset, now time.Time, lagMax time.Duration) bool {
	return f.logEndOffset == leaderEnd || now.Sub(f.lastCaughtUp) <= lagMax
}

// fetched is Kafka's updateFetchStateOrThrow: leaderEnd is the leader's
// log end when the fetch was read.
func (f *followerState) fetched(offset, leaderEnd rb.Offset, now time.Time) {
	switch {
	case offset >= leaderEnd:
		f.lastCaughtUp = maxTime(f.lastCaughtUp, now)
	case offset >= f.lastFetchLeaderLogEndOffset:
		f.lastCaughtUp = maxTime(f.lastCaughtUp, f.lastFetch)
	}
	f.logEndOffset, f.lastFetchLeaderLogEndOffset, f.lastFetch = offset, leaderEnd, now
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// selfID is this node's ID (-1 for a partition without a node).
func (p *Partition) selfID() int32 {
	if p.node == nil {
		return -1
	}
	return p.node.Cluster().NodeID
}

// lagTimeMax is replica.lag.time.max.ms.
func (p *Partition) lagTimeMax() time.Duration {
	if p.node == nil {
		return DefaultReplicaLagTimeMax
	}
	return p.node.replicaLagTimeMax()
}

// replicaLagTimeMax is the node's replica.lag.time.max.ms.
func (n *Node) replicaLagTimeMax() time.Duration {
	if n.cfg.ReplicaLagTimeMax > 0 {
		return n.cfg.ReplicaLagTimeMax
	}
	return DefaultReplicaLagTimeMax
}

// effectiveMinISR is Kafka's effectiveMinIsr: min.insync.replicas capped
// by the replica count.
func (p *Partition) effectiveMinISR(v *roleView) int {
	return max(1, min(p.limits.Load().minInSyncReplicas, len(v.Replicas)))
}

// SetRole sets the partition's role. A new leadership (this node leads
// where it did not, or at a new epoch) starts every follower over: those
// in the ISR as caught up now, the others as never (Kafka's makeLeader).
// A proposed ISR change is dropped: the role is the written state.
func (p *Partition) SetRole(role Role) {
	p.replication.mu.Lock()
	changed := p.setRoleLocked(role)
	p.replication.mu.Unlock()
	if changed {
		p.wake() // fetches naming the old epoch or leader are answered anew
	}
}

// setRoleLocked is SetRole with replication.mu held; it reports whether
// the leader or its epoch changed. The role the partition has already
// changes nothing (a cluster cache sets every role at each change of any):
// a proposed ISR change stays in flight.
func (p *Partition) setRoleLocked(role Role) bool {
	r := &p.replication
	old := r.view.Load()
	if old != nil && old.Leader == role.Leader && old.LeaderEpoch == role.LeaderEpoch && old.PartitionEpoch == role.PartitionEpoch &&
		slices.Equal(old.Replicas, role.Replicas) && slices.Equal(old.ISR, role.ISR) {
		return false
	}
	role = role.clone()
	self := p.selfID()
	view := &roleView{Role: role, self: self, leads: self >= 0 && role.Leader == self}
	previous := r.followers
	r.followers = nil
	if view.leads && p.Offline() == nil {
		r.followers = p.followersFor(old, view, previous)
	}
	r.maximalISR, r.inflight = slices.Clone(role.ISR), false
	r.generation++
	r.view.Store(view)
	r.broadcast()
	if view.leads && p.Offline() == nil {
		p.raiseHighWatermark(view)
	}
	return old == nil || old.leads != view.leads || old.LeaderEpoch != view.LeaderEpoch || old.Leader != view.Leader
}

// followersFor is the follower states of a leader's new view: kept from
// the old view at the same epoch, else started over (and the epoch
// starts at the log end); replication.mu is held.
func (p *Partition) followersFor(old, view *roleView, previous map[int32]*followerState) map[int32]*followerState {
	r := &p.replication
	end, now := p.log.LogEndOffset(), p.now()
	if old == nil || !old.leads || old.LeaderEpoch != view.LeaderEpoch {
		previous, r.epochStart = nil, end
	}
	followers := make(map[int32]*followerState, len(view.Replicas))
	for _, id := range view.Replicas {
		if id == view.self {
			continue
		}
		if f, ok := previous[id]; ok {
			followers[id] = f
			continue
		}
		f := &followerState{logEndOffset: -1, lastFetch: now, lastFetchLeaderLogEndOffset: end}
		if slices.Contains(view.ISR, id) {
			f.lastCaughtUp = now
		}
		followers[id] = f
	}
	return followers
}

// Role returns the partition's role; false: none is set (the node alone
// leads it).
func (p *Partition) Role() (Role, bool) {
	v := p.replication.view.Load()
	if v == nil {
		return Role{}, false
	}
	return v.Role.clone(), true
}

// Replication is the partition's leader, replicas and ISR
// (netio.ReplicatedPartition): this node alone without a role. The
// slices are shared and must not be changed (a Fetch asks for every
// partition it reads: no allocation).
func (p *Partition) Replication() (leader int32, replicas, isr []int32) {
	v := p.replication.view.Load()
	if v == nil {
		if v = p.replication.alone.Load(); v == nil {
			self := p.selfID()
			v = &roleView{Role: Role{Leader: self, Replicas: []int32{self}, ISR: []int32{self}}, self: self, leads: true}
			p.replication.alone.Store(v)
		}
	}
	return v.Leader, v.Replicas, v.ISR
}

// ReplicaLeaderEpoch is the cluster's leader epoch of the partition,
// which followers' fetches are fenced by (netio.ReplicaEpochPartition):
// the role's; LeaderEpoch without a role.
func (p *Partition) ReplicaLeaderEpoch() rb.Epoch {
	if v := p.replication.view.Load(); v != nil {
		return v.LeaderEpoch
	}
	return p.LeaderEpoch()
}

// refuseUnlessLeader answers NOT_LEADER_OR_FOLLOWER while the partition
// has a role that another node (or no node) leads.
func (p *Partition) refuseUnlessLeader() error {
	if v := p.replication.view.Load(); v != nil && !v.leads {
		return fmt.Errorf("%w: %s is led by node %d, not %d", kerr.NotLeaderForPartition, p.tp, v.Leader, v.self)
	}
	return nil
}

// roleLeaderEpoch is the leader epoch with the role's: a follower's is
// the role's, a leader's at least the role's.
func (p *Partition) roleLeaderEpoch(local rb.Epoch) rb.Epoch {
	v := p.replication.view.Load()
	switch {
	case v == nil:
		return local
	case v.leads:
		return max(local, v.LeaderEpoch)
	}
	return v.LeaderEpoch
}

// broadcast wakes the acks=-1 produces; r.mu is held.
func (r *replication) broadcast() {
	if r.raised != nil {
		close(r.raised)
	}
	r.raised = make(chan struct{})
}

// advanceHighWatermark moves the high watermark after an append by the
// partition itself (Partition.mu held): to the log end with no role, by
// the ISR on a leader, not at all on a follower (AppendReplica moves it).
func (p *Partition) advanceHighWatermark() {
	v := p.replication.view.Load()
	switch {
	case v == nil:
		p.log.SetHighWatermark(p.log.LogEndOffset())
	case v.leads:
		p.replication.mu.Lock()
		p.raiseHighWatermark(v)
		p.replication.mu.Unlock()
	}
}

// raiseHighWatermark is Kafka's maybeIncrementLeaderHW; replication.mu
// is held. It reports whether the high watermark rose.
func (p *Partition) raiseHighWatermark(v *roleView) bool {
	r := &p.replication
	if len(v.ISR) < p.effectiveMinISR(v) {
		return false
	}
	end, now, lagMax := p.log.LogEndOffset(), p.now(), p.lagTimeMax()
	hw := end
	for id, f := range r.followers {
		if f.logEndOffset < hw && (slices.Contains(r.maximalISR, id) || p.nodeLive(id) && f.caughtUp(end, now, lagMax)) {
			hw = f.logEndOffset
		}
	}
	if hw <= p.log.HighWatermark() {
		return false
	}
	p.log.SetHighWatermark(hw)
	r.broadcast()
	p.watchers.Notify()
	return true
}

// ReadReplica serves a follower's fetch (netio.ReplicaPartition): the
// records from offset up to the log end, and the fetch offset as the
// follower's log end, which may raise the high watermark and ask the
// node's ISR goroutine for an expansion. Without a role it reads as a
// consumer would, as the node always answered.
func (p *Partition) ReadReplica(replicaID int32, offset rb.Offset, maxBytes int32, minOneBatch bool) (netio.ReadResult, error) {
	v := p.replication.view.Load()
	if v == nil {
		return p.Read(offset, maxBytes, netio.ReadUncommitted, minOneBatch)
	}
	if err := p.refuseUnlessLeader(); err != nil {
		return netio.ReadResult{}, err
	}
	if replicaID == v.self || !slices.Contains(v.Replicas, replicaID) {
		// Kafka's followerReplicaOrThrow for a fetch naming its epoch.
		return netio.ReadResult{}, fmt.Errorf("%w: node %d is not a replica of %s at leader epoch %d", kerr.UnknownLeaderEpoch, replicaID, p.tp, v.LeaderEpoch)
	}
	end := p.log.LogEndOffset() // before the read: appends after it do not hold the follower back
	slice, err := p.log.Read(offset, int64(maxBytes), end, minOneBatch)
	if err != nil {
		return netio.ReadResult{Offsets: p.Offsets()}, readError(err)
	}
	if p.followerFetched(v, replicaID, offset, end) && p.node != nil {
		p.node.isr.kick()
	}
	result := netio.ReadResult{Offsets: p.Offsets()}
	if slice.Length > 0 {
		result.Records = netio.FileRange{File: slice.File, Position: slice.Position, Length: slice.Length, Release: slice.Release}
	}
	return result, nil
}

// followerFetched records a follower's fetch at offset, raises the high
// watermark if it can, and reports whether the follower may now join the
// ISR.
func (p *Partition) followerFetched(v *roleView, replicaID int32, offset, leaderEnd rb.Offset) bool {
	r := &p.replication
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.view.Load() != v {
		return false // the role changed under the read: its next fetch counts
	}
	f := r.followers[replicaID]
	if f == nil {
		return false
	}
	previous := f.logEndOffset
	f.fetched(offset, leaderEnd, p.now())
	if previous != offset {
		p.raiseHighWatermark(v)
	}
	return !r.inflight && p.mayJoinISR(v, replicaID, f)
}

// mayJoinISR is Kafka's isFollowerInSync for a replica outside the ISR;
// replication.mu is held.
func (p *Partition) mayJoinISR(v *roleView, id int32, f *followerState) bool {
	// A node the cluster no longer has live never joins (Kafka's
	// isReplicaIsrEligible): on an idle partition its last fetch stays
	// at the high watermark, and taking it back into the ISR the
	// controller dropped it from could later elect it, out of sync.
	return !slices.Contains(v.ISR, id) && p.nodeLive(id) && f.logEndOffset >= p.log.HighWatermark() && f.logEndOffset >= p.replication.epochStart
}

// AppendReplica appends a follower's fetched batches exactly as the
// leader sent them (AppendMirrored's path), then moves the high watermark
// up to min(leaderHW, log end). Empty batches only move it.
func (p *Partition) AppendReplica(batches []byte, leaderHW rb.Offset) (logstore.AppendInfo, error) {
	if v := p.replication.view.Load(); v != nil && v.leads {
		return logstore.AppendInfo{}, fmt.Errorf("broker: %s: replica append: %w", p.tp, ErrLeader)
	}
	followLeader := func() {
		p.log.SetHighWatermark(max(p.log.HighWatermark(), min(leaderHW, p.log.LogEndOffset())))
	}
	if len(batches) == 0 {
		p.mu.Lock()
		defer p.mu.Unlock()
		followLeader()
		p.notify()
		return logstore.AppendInfo{}, nil
	}
	return p.appendAsSent(batches, "replica append", followLeader)
}

// TruncateReplica truncates a follower's log to offset (a DivergingEpoch
// from the leader), as TruncateTo does.
func (p *Partition) TruncateReplica(offset rb.Offset) error {
	if v := p.replication.view.Load(); v != nil && v.leads {
		return fmt.Errorf("broker: %s: replica truncation: %w", p.tp, ErrLeader)
	}
	return p.TruncateTo(offset)
}

// checkAcksBeforeAppend is appendRecordsToLeader's check: acks=-1 needs
// an ISR of at least min(min.insync.replicas, replicas).
func (p *Partition) checkAcksBeforeAppend(acks int16) error {
	v := p.replication.view.Load()
	if v == nil || acks != -1 || len(v.ISR) >= p.effectiveMinISR(v) {
		return nil
	}
	return fmt.Errorf("%w: the ISR %v of %s is smaller than min.insync.replicas %d", kerr.NotEnoughReplicas, v.ISR, p.tp, p.effectiveMinISR(v))
}

// awaitReplicas waits, for an acks=-1 produce, until the high watermark
// reaches required (Kafka's DelayedProduce over
// checkEnoughReplicasReachOffset). No role: nothing to wait for.
func (p *Partition) awaitReplicas(ctx context.Context, required rb.Offset) error {
	maximal, err := p.awaitHighWatermark(ctx, required)
	if err != nil {
		return err
	}
	if v := p.replication.view.Load(); v != nil && maximal < p.effectiveMinISR(v) {
		return fmt.Errorf("%w: %s", kerr.NotEnoughReplicasAfterAppend, p.tp)
	}
	return nil
}

// AwaitReplicated waits until the high watermark reaches offset: every
// in-sync replica holds the log below it (a mirror's stop waits for it
// before a step's record names what it wrote). No role (a node alone):
// nothing to wait for; not the leader: NOT_LEADER_OR_FOLLOWER.
func (p *Partition) AwaitReplicated(ctx context.Context, offset rb.Offset) error {
	_, err := p.awaitHighWatermark(ctx, offset)
	return err
}

// awaitHighWatermark waits until the high watermark reaches required and
// returns the maximal ISR's size then.
func (p *Partition) awaitHighWatermark(ctx context.Context, required rb.Offset) (int, error) {
	r := &p.replication
	for {
		v := r.view.Load()
		if v == nil {
			return 0, nil
		}
		if !v.leads {
			return 0, p.refuseUnlessLeader()
		}
		r.mu.Lock()
		hw, raised, maximal := p.log.HighWatermark(), r.raised, len(r.maximalISR)
		r.mu.Unlock()
		if hw >= required {
			return maximal, nil
		}
		select {
		case <-raised:
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: %s: the high watermark %d did not reach %d", kerr.RequestTimedOut, p.tp, hw, required)
		}
	}
}

// isrProposal is an ISR change the node's goroutine writes.
type isrProposal struct {
	role       Role
	isr        []int32
	generation uint64
}

// proposeISR returns the ISR change this leader needs now, if any, and
// marks it in flight: a shrink of the followers not caught up for
// replica.lag.time.max.ms (maximal ISR unchanged until written), else an
// expansion by the followers in sync (in the maximal ISR at once). It
// also raises the high watermark, which followers falling behind may
// free.
func (p *Partition) proposeISR(now time.Time) (isrProposal, bool) {
	v := p.replication.view.Load()
	if v == nil || !v.leads || p.Offline() != nil {
		return isrProposal{}, false
	}
	r := &p.replication
	r.mu.Lock()
	defer r.mu.Unlock()
	p.raiseHighWatermark(v)
	if r.inflight {
		return isrProposal{}, false
	}
	end, lagMax := p.log.LogEndOffset(), p.lagTimeMax()
	var out, in []int32
	for _, id := range v.ISR {
		if f, ok := r.followers[id]; id != v.self && (!ok || !f.caughtUp(end, now, lagMax)) {
			out = append(out, id)
		}
	}
	isr := slices.DeleteFunc(slices.Clone(v.ISR), func(id int32) bool { return slices.Contains(out, id) })
	if len(out) == 0 {
		for _, id := range v.Replicas {
			if f, ok := r.followers[id]; ok && p.mayJoinISR(v, id, f) {
				in = append(in, id)
			}
		}
		if len(in) == 0 {
			return isrProposal{}, false
		}
		isr = append(isr, in...)
		r.maximalISR = slices.Clone(isr)
	}
	r.inflight = true
	return isrProposal{role: v.Role.clone(), isr: isr, generation: r.generation}, true
}

// isrWritten ends a proposal: written, the role returned is the
// partition's (unless its role changed meanwhile); refused, the maximal
// ISR is the role's again.
func (p *Partition) isrWritten(proposal isrProposal, written Role, err error) {
	r := &p.replication
	r.mu.Lock()
	if r.generation != proposal.generation {
		r.mu.Unlock()
		return // SetRole came in between: the cluster's word is newer
	}
	changed := false
	switch current := r.view.Load(); {
	case err != nil:
		r.inflight = false
		r.maximalISR = slices.Clone(proposal.role.ISR)
	case current != nil && written.PartitionEpoch < current.PartitionEpoch:
		r.inflight = false // written, but the cluster already said more
		r.maximalISR = slices.Clone(current.ISR)
	default:
		changed = p.setRoleLocked(written)
	}
	r.mu.Unlock()
	if changed {
		p.wake()
	}
}

// isrKeeper is the node's ISR goroutine: every replica.lag.time.max.ms/2
// (Kafka's isr-expiration task) and whenever a follower's fetch may let
// it join, it asks each partition this node leads for an ISR change and
// writes it with the ISR writer, one partition at a time. No writer: no
// goroutine, and the ISR stays as the roles say.
type isrKeeper struct {
	mu     sync.Mutex
	writer ISRWriter
	kicks  chan struct{} // capacity 1: a kick pending is enough
	stop   context.CancelFunc
	done   chan struct{}
}

// SetISRWriter sets the hook the leader writes ISR changes through (etcd's
// AlterISR) and starts the node's ISR goroutine; on success the returned
// role is applied. nil stops further writes.
func (n *Node) SetISRWriter(w ISRWriter) {
	k := &n.isr
	k.mu.Lock()
	defer k.mu.Unlock()
	k.writer = w
	if w == nil || k.done != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	k.kicks, k.stop, k.done = make(chan struct{}, 1), cancel, make(chan struct{})
	go func() {
		defer close(k.done)
		n.runISR(ctx, k.kicks)
	}()
}

// kick asks the ISR goroutine for a pass soon; it never blocks.
func (k *isrKeeper) kick() {
	k.mu.Lock()
	kicks := k.kicks
	k.mu.Unlock()
	if kicks == nil {
		return
	}
	select {
	case kicks <- struct{}{}:
	default:
	}
}

// close stops the ISR goroutine and waits for it.
func (k *isrKeeper) close() {
	k.mu.Lock()
	stop, done := k.stop, k.done
	k.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

func (n *Node) runISR(ctx context.Context, kicks <-chan struct{}) {
	ticker := time.NewTicker(max(n.replicaLagTimeMax()/2, time.Millisecond))
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-kicks:
		}
		n.maintainISR(ctx)
	}
}

// maintainISR is one pass of the ISR goroutine over the partitions this
// node leads.
func (n *Node) maintainISR(ctx context.Context) {
	n.isr.mu.Lock()
	writer := n.isr.writer
	n.isr.mu.Unlock()
	if writer == nil {
		return
	}
	for _, p := range partitionsOf(n) {
		if ctx.Err() != nil {
			return
		}
		proposal, ok := p.proposeISR(p.now())
		if !ok {
			continue
		}
		write, cancel := context.WithTimeout(ctx, p.lagTimeMax())
		written, err := writer(write, p.tp, proposal.role, proposal.isr)
		cancel()
		if err != nil {
			n.log.Warn("ISR change not written", "topic", p.tp.Topic, "partition", p.tp.Partition,
				"isr", proposal.role.ISR, "proposed", proposal.isr, "error", err)
		}
		p.isrWritten(proposal, written, err)
	}
}
