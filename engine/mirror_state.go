package engine

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	rb "github.com/mirrord/mirrord/recordbatch"
)

// The per-partition mirror state machine of DESIGN.md, as a pure type in
// the manner of etcd-io/raft: it does no I/O, starts no goroutines, reads
// no clock and no global random source. Its owner (one goroutine per
// mirror) feeds it events (mirror_state_events.go) and performs the
// actions it returns, in order: a Persist first, durable before the rest.
// Time comes in as data (Tick, and the Now of failure events); retry
// jitter comes from the RetryJitter the owner passes in.
//
//	UNKNOWN, STOPPED --desired MIRRORING/PAUSED--> LOG_ALIGNMENT --AlignmentDone--> MIRRORING
//	MIRRORING --source epoch within 3 of ours--> EPOCH_FENCING --LeaderEpochBumped--> MIRRORING
//	MIRRORING --DivergenceDetected-------------> ULE_RECOVERY  --TruncationDone-----> MIRRORING
//	MIRRORING --desired PAUSED-----------------> PAUSING       --PauseDone----------> PAUSED
//	PAUSED    --desired MIRRORING--------------> MIRRORING
//	any but UNKNOWN, STOPPED --desired STOPPED--> STOPPING --StopStepDone x4--> STOPPED
//	    REMOVE_FROM_FETCHER -> BUMP_LEADER_EPOCH -> ABORT_TRANSACTIONS -> RESET_PRODUCERS
//	any --failure--> FAILED --retry due, Recover--> STOPPING if the stop was under way or is
//	    desired, LOG_ALIGNMENT if alignment failed, MIRRORING otherwise
//
// After a completion the partition walks on towards the desired state as
// far as the table allows (AlignmentDone while PAUSED is desired goes
// through MIRRORING to PAUSING in one step, persisting once). Events that
// do not apply to the current state are stale and ignored (accepts).
//
// Every change of persisted fields is persisted, so a machine restored
// from the last Persist (RestorePartitionMirror) and told Restarted behaves as the one
// that crashed would have: the stop sequence, in particular, resumes at
// the step it was in.

// MirrorState is the state of one mirrored partition.
type MirrorState int8

const (
	MirrorUnknown MirrorState = iota // before the first record
	MirrorLogAlignment
	MirrorEpochFencing
	MirrorULERecovery
	MirrorMirroring
	MirrorPausing
	MirrorPaused
	MirrorStopping
	MirrorStopped
	MirrorFailed
	mirrorStateCount
)

var mirrorStateNames = [mirrorStateCount]string{
	"UNKNOWN", "LOG_ALIGNMENT", "EPOCH_FENCING", "ULE_RECOVERY", "MIRRORING",
	"PAUSING", "PAUSED", "STOPPING", "STOPPED", "FAILED",
}

func (s MirrorState) String() string {
	if s < 0 || s >= mirrorStateCount {
		return fmt.Sprintf("MirrorState(%d)", s)
	}
	return mirrorStateNames[s]
}

// mirrorTransitionAllowed is DESIGN.md's table ("to <- allowed from").
// Staying in a state is not a transition: a state is never entered from
// itself (so FAILED and STOPPING, allowed from "any", are not entered from
// FAILED and STOPPING).
func mirrorTransitionAllowed(from, to MirrorState) bool {
	if from == to {
		return false
	}
	switch to {
	case MirrorLogAlignment:
		return from == MirrorUnknown || from == MirrorStopped || from == MirrorFailed
	case MirrorEpochFencing, MirrorULERecovery, MirrorPausing:
		return from == MirrorMirroring
	case MirrorMirroring:
		switch from {
		case MirrorLogAlignment, MirrorEpochFencing, MirrorPaused, MirrorULERecovery, MirrorFailed:
			return true
		}
		return false
	case MirrorPaused:
		return from == MirrorPausing
	case MirrorStopping:
		return from != MirrorStopped && from != MirrorUnknown
	case MirrorStopped:
		return from == MirrorStopping
	case MirrorFailed:
		return true
	}
	return false
}

// mirrorFailable: the states with an action in flight that can fail, the
// only possible previous states of FAILED.
func mirrorFailable(s MirrorState) bool {
	switch s {
	case MirrorLogAlignment, MirrorEpochFencing, MirrorULERecovery, MirrorMirroring, MirrorPausing, MirrorStopping:
		return true
	}
	return false
}

// DesiredState is what the user asked for a topic; each of its partitions
// walks there.
type DesiredState int8

const (
	DesiredMirroring DesiredState = iota
	DesiredPaused
	DesiredStopped
	desiredStateCount
)

func (d DesiredState) String() string {
	switch d {
	case DesiredMirroring:
		return "MIRRORING"
	case DesiredPaused:
		return "PAUSED"
	case DesiredStopped:
		return "STOPPED"
	}
	return fmt.Sprintf("DesiredState(%d)", d)
}

// StopStep is the step of the stop (failover) sequence in progress while
// STOPPING. Each step's action is idempotent and the step is persisted
// before its action runs. Persisting the last mirror epoch is not a step
// of its own: it is the record that moves from StopRemoveFromFetcher to
// StopBumpLeaderEpoch.
type StopStep int8

const (
	StopNone              StopStep = iota // not stopping
	StopRemoveFromFetcher                 // StopFetching; done reports the LME
	StopBumpLeaderEpoch                   // BumpLeaderEpoch above local, source and LME epochs
	StopAbortTransactions                 // WriteAbortMarkers
	StopResetProducers                    // WriteMirrorPIDReset; done: STOPPED
	stopStepCount
)

func (s StopStep) String() string {
	names := [stopStepCount]string{"NONE", "REMOVE_FROM_FETCHER", "BUMP_LEADER_EPOCH", "ABORT_TRANSACTIONS", "RESET_PRODUCERS"}
	if s < 0 || s >= stopStepCount {
		return fmt.Sprintf("StopStep(%d)", s)
	}
	return names[s]
}

// StateEpoch numbers the records of one partition's mirror state: the
// __mirror_state writer keeps a record only if its StateEpoch is above the
// stored one.
type StateEpoch int64

const (
	// mirrorEpochGapMin and mirrorEpochLead: the local leader epoch stays
	// at least mirrorEpochGapMin above the source's; when the gap shrinks
	// below it, EPOCH_FENCING bumps it to source + mirrorEpochLead.
	mirrorEpochGapMin = 3
	mirrorEpochLead   = 10
	// mirrorErrorTextMax bounds the error text kept and persisted, in bytes.
	mirrorErrorTextMax = 1024
	// mirrorSettleHopsMax bounds the transitions one event causes after
	// its first: PAUSED -> MIRRORING -> EPOCH_FENCING is the longest walk.
	mirrorSettleHopsMax = 4
)

// RetryPolicy is how FAILED retries: exponential backoff with jitter,
// from InitialBackoff doubling up to MaxBackoff, each delay multiplied by
// a random factor in [0.8, 1.2) (Kafka's retry jitter) and kept within
// [InitialBackoff, MaxBackoff]; after MaxAttempts retries without a
// success the next failure is not retried.
type RetryPolicy struct {
	InitialBackoff time.Duration // > 0, whole milliseconds
	MaxBackoff     time.Duration // >= InitialBackoff
	MaxAttempts    int32         // >= 0
}

// RetryJitter is the random source of retry jitter: Float64 in [0, 1).
// *math/rand/v2.Rand is one; tests seed it.
type RetryJitter interface{ Float64() float64 }

const retryJitterFraction = 0.2

// backoff is the delay before retry number attempt (1 for the first).
func (r RetryPolicy) backoff(attempt int32, jitter RetryJitter) time.Duration {
	base := r.InitialBackoff
	for i := int32(1); i < attempt && base < r.MaxBackoff; i++ {
		base *= 2
	}
	base = min(base, r.MaxBackoff)
	factor := 1 - retryJitterFraction + 2*retryJitterFraction*jitter.Float64()
	delay := time.Duration(float64(base) * factor).Truncate(time.Millisecond)
	return max(r.InitialBackoff, min(r.MaxBackoff, delay))
}

func (r RetryPolicy) valid() bool {
	return r.InitialBackoff > 0 && r.MaxBackoff >= r.InitialBackoff && r.MaxAttempts >= 0
}

// PartitionMirror is the mirror state machine of one partition. It is not
// safe for concurrent use: its owner alone calls it.
type PartitionMirror struct {
	// state changes only through transition, along DESIGN.md's table.
	state MirrorState
	// previous is the state before the latest transition: != state, or
	// both UNKNOWN before the first one. In FAILED, mirrorFailable(previous).
	previous MirrorState
	// desired is the topic's desired state; meaningless until
	// desiredKnown, which the first event (Restarted or
	// DesiredStateChanged) sets.
	desired      DesiredState
	desiredKnown bool
	// restored: made by RestorePartitionMirror and not yet told Restarted, which must
	// come first (it re-runs the actions a crash lost).
	restored bool
	// stateEpoch is the StateEpoch of the latest record: +1 on every
	// transition, and +1 for a step that changes persisted fields without
	// one. Never decreases; 0 only in UNKNOWN.
	stateEpoch StateEpoch
	// leaderEpoch is the local partition leader epoch, >= 0, never
	// decreasing. In MIRRORING it is at least mirrorEpochGapMin above
	// sourceLeaderEpoch (when known).
	leaderEpoch rb.Epoch
	// sourceLeaderEpoch is the highest source leader epoch reported, or
	// rb.NoEpoch. Never decreases.
	sourceLeaderEpoch rb.Epoch
	// stopStep != StopNone iff state is STOPPING, or FAILED with previous
	// STOPPING (the stop resumes at that step).
	stopStep StopStep
	// truncateTo is ULE_RECOVERY's truncation offset: >= 0 in
	// ULE_RECOVERY, -1 elsewhere.
	truncateTo rb.Offset
	// retryCount is the number of retries scheduled since the last
	// success, >= 0; it exceeds policy.MaxAttempts only if a restored
	// record was written under a larger policy.
	retryCount int32
	// retryable: FAILED with a retry scheduled at nextRetryAt. Only in
	// FAILED; nextRetryAt is non-zero (whole milliseconds) iff retryable.
	retryable   bool
	nextRetryAt time.Time
	// errorText is the latest failure, at most mirrorErrorTextMax bytes:
	// non-empty in FAILED and while retryCount > 0; cleared by a success
	// or Recover.
	errorText string
	// lastMirrorEpoch and lastMirrorOffset are the last mirror epoch of
	// the latest stop (rb.NoEpoch and -1 before one): set by the
	// stop's first step, kept afterwards. lastMirrorOffset >= 0 past it.
	lastMirrorEpoch  rb.Epoch
	lastMirrorOffset rb.Offset

	policy RetryPolicy // valid()
	jitter RetryJitter // non-nil

	// Scratch of the current Step only: transitions made, and whether
	// persisted fields changed without a transition.
	transitions int
	dirty       bool
}

// NewPartitionMirror returns the machine of a partition that has no
// record yet: UNKNOWN, at the local partition's leader epoch.
func NewPartitionMirror(leaderEpoch rb.Epoch, policy RetryPolicy, jitter RetryJitter) *PartitionMirror {
	if leaderEpoch < 0 || !policy.valid() || jitter == nil {
		panic(fmt.Sprintf("engine: NewPartitionMirror(%d, %+v, %v)", leaderEpoch, policy, jitter))
	}
	return &PartitionMirror{
		previous: MirrorUnknown, leaderEpoch: leaderEpoch, sourceLeaderEpoch: rb.NoEpoch,
		truncateTo: -1, lastMirrorEpoch: rb.NoEpoch, lastMirrorOffset: -1,
		policy: policy, jitter: jitter,
	}
}

// RestorePartitionMirror returns the machine a persisted record describes (one that
// DecodeMirrorStateRecord accepted). Its first event must be Restarted.
func RestorePartitionMirror(record MirrorStateValue, policy RetryPolicy, jitter RetryJitter) *PartitionMirror {
	if err := record.validate(); err != nil {
		panic(fmt.Sprintf("engine: RestorePartitionMirror: %v", err))
	}
	p := NewPartitionMirror(record.LeaderEpoch, policy, jitter)
	p.state, p.previous, p.stopStep = record.State, record.Previous, record.StopStep
	p.stateEpoch = record.StateEpoch
	p.sourceLeaderEpoch = record.SourceLeaderEpoch
	p.truncateTo = record.TruncateTo
	p.retryCount, p.retryable, p.errorText = record.RetryCount, record.Retryable, record.Error
	if record.NextRetryAtMillis >= 0 {
		p.nextRetryAt = time.UnixMilli(record.NextRetryAtMillis)
	}
	p.lastMirrorEpoch, p.lastMirrorOffset = record.LastMirrorEpoch, record.LastMirrorOffset
	p.restored = true
	return p
}

// State is where the partition is.
func (p *PartitionMirror) State() MirrorState { return p.state }

// Desired is the topic's desired state, as last told.
func (p *PartitionMirror) Desired() DesiredState { return p.desired }

// Record is the partition's persisted state, as the latest Persist wrote
// it (or would write it, in UNKNOWN).
func (p *PartitionMirror) Record() MirrorStateValue {
	v := MirrorStateValue{
		State: p.state, Previous: p.previous, StopStep: p.stopStep, StateEpoch: p.stateEpoch,
		LeaderEpoch: p.leaderEpoch, SourceLeaderEpoch: p.sourceLeaderEpoch,
		RetryCount: p.retryCount, Retryable: p.retryable, NextRetryAtMillis: -1, Error: p.errorText,
		LastMirrorEpoch: p.lastMirrorEpoch, LastMirrorOffset: p.lastMirrorOffset, TruncateTo: p.truncateTo,
	}
	if p.retryable {
		v.NextRetryAtMillis = p.nextRetryAt.UnixMilli()
	}
	return v
}

// Step applies one event and returns the actions it calls for, in order.
func (p *PartitionMirror) Step(event Event) []Action {
	checkMirrorEvent(event)
	if _, restart := event.(Restarted); p.restored && !restart {
		panic(fmt.Sprintf("engine: mirror state: first event after RestorePartitionMirror %v, want Restarted", event))
	}
	p.restored = false
	if !p.desiredKnown {
		switch event.(type) {
		case Restarted, DesiredStateChanged:
		default:
			panic(fmt.Sprintf("engine: mirror state: first event %v, want Restarted or DesiredStateChanged", event))
		}
		p.desiredKnown = true
	}
	if !p.accepts(event) {
		return nil
	}
	epochBefore := p.stateEpoch
	p.transitions, p.dirty = 0, false
	rerun := p.apply(event)
	if p.dirty && p.transitions == 0 {
		p.stateEpoch++
	}
	var actions []Action
	if p.stateEpoch != epochBefore {
		actions = append(actions, Persist{Record: p.Record()})
	}
	if p.transitions > 0 || rerun {
		actions = p.appendStateActions(actions)
	}
	p.checkInvariants()
	return actions
}

// accepts says whether event applies to the current state; one that does
// not is stale and ignored.
func (p *PartitionMirror) accepts(event Event) bool {
	switch e := event.(type) {
	case AlignmentDone, AlignmentFailed:
		return p.state == MirrorLogAlignment
	case FetchSucceeded, FetchFailed, DivergenceDetected:
		return p.state == MirrorMirroring
	case SourceEpochChanged:
		// Once the stop has begun (STOPPING, or FAILED within it) the
		// source no longer matters, and the stop's epoch bump must stay
		// what it was when its step was persisted.
		return p.stopStep == StopNone && e.Epoch > p.sourceLeaderEpoch
	case LeaderEpochBumped:
		return p.state == MirrorEpochFencing
	case TruncationDone:
		return p.state == MirrorULERecovery
	case PauseDone:
		return p.state == MirrorPausing
	case StopStepDone:
		return p.state == MirrorStopping && e.Step == p.stopStep
	case StepFailed:
		switch p.state {
		case MirrorEpochFencing, MirrorULERecovery, MirrorPausing, MirrorStopping:
			return true
		}
		return false
	case Recover:
		return p.state == MirrorFailed
	case Tick:
		return p.retryable && !e.Now.Before(p.nextRetryAt)
	}
	return true // DesiredStateChanged, Restarted
}

// apply changes the machine for an accepted event; it reports whether the
// current state's action must run again without a transition.
func (p *PartitionMirror) apply(event Event) (rerun bool) {
	switch e := event.(type) {
	case DesiredStateChanged:
		p.desired = e.Desired
		return p.reconcile(false)
	case Restarted:
		p.desired = e.Desired
		return p.reconcile(true)
	case AlignmentDone, LeaderEpochBumped, TruncationDone, PauseDone:
		p.complete(e)
	case FetchSucceeded:
		p.succeeded()
	case SourceEpochChanged:
		p.sourceLeaderEpoch = e.Epoch
		p.dirty = p.state != MirrorUnknown // nothing is persisted before the first transition
		p.settle()
	case DivergenceDetected:
		p.truncateTo = e.TruncateTo
		p.transition(MirrorULERecovery)
	case StopStepDone:
		return p.stopStepDone(e)
	case AlignmentFailed:
		p.fail(e.Now, e.Err, e.Retryable)
	case FetchFailed:
		p.fail(e.Now, e.Err, e.Retryable)
	case StepFailed:
		p.fail(e.Now, e.Err, e.Retryable)
	case Tick:
		p.leaveFailed()
	case Recover:
		p.retryCount, p.errorText = 0, ""
		p.leaveFailed()
	}
	return false
}

// reconcile is DESIGN.md's rule, on a desired-state change or a restart:
// FAILED stays FAILED (on a restart its retry is scheduled again); the
// partition walks towards the desired state where the table lets it;
// otherwise the current state's action runs again.
func (p *PartitionMirror) reconcile(restart bool) (rerun bool) {
	if p.state == MirrorFailed {
		return restart
	}
	return !p.settle()
}

// settle walks towards the desired state as far as the table allows
// without waiting for an action, and reports whether it moved.
func (p *PartitionMirror) settle() bool {
	for hop := range mirrorSettleHopsMax {
		next, ok := p.nextTowardsDesired()
		if !ok {
			return hop > 0
		}
		p.transition(next)
	}
	panic(fmt.Sprintf("engine: mirror state: no rest after %d hops, in %v desiring %v", mirrorSettleHopsMax, p.state, p.desired))
}

// nextTowardsDesired is the transition part of the reconcile rule, in its
// order: desired STOPPED -> STOPPING; desired PAUSED -> PAUSING (only
// MIRRORING may pause); PAUSED with desired MIRRORING -> MIRRORING;
// UNKNOWN or STOPPED (with desired MIRRORING or PAUSED) -> LOG_ALIGNMENT.
// Added: MIRRORING whose leader epoch is too close to the source's ->
// EPOCH_FENCING, so MIRRORING never fetches with a leader epoch the
// source could reach.
func (p *PartitionMirror) nextTowardsDesired() (MirrorState, bool) {
	switch {
	case p.state == MirrorFailed:
		return 0, false
	case p.desired == DesiredStopped:
		return MirrorStopping, mirrorTransitionAllowed(p.state, MirrorStopping)
	case p.desired == DesiredPaused && p.state == MirrorMirroring:
		return MirrorPausing, true
	case p.desired == DesiredMirroring && p.state == MirrorPaused:
		return MirrorMirroring, true
	case p.state == MirrorUnknown || p.state == MirrorStopped:
		return MirrorLogAlignment, true
	case p.state == MirrorMirroring && p.needsFencing():
		return MirrorEpochFencing, true
	}
	return 0, false
}

// needsFencing: the source's leader epoch is known and within
// mirrorEpochGapMin of ours.
func (p *PartitionMirror) needsFencing() bool {
	return p.sourceLeaderEpoch != rb.NoEpoch && int64(p.leaderEpoch) < int64(p.sourceLeaderEpoch)+mirrorEpochGapMin
}

// fencingEpoch is the leader epoch EPOCH_FENCING bumps to.
func (p *PartitionMirror) fencingEpoch() rb.Epoch {
	return rb.Epoch(min(int64(p.sourceLeaderEpoch)+mirrorEpochLead, math.MaxInt32))
}

// stopEpoch is the leader epoch the stop bumps to: above the local, the
// source and the last mirror epochs.
func (p *PartitionMirror) stopEpoch() rb.Epoch {
	return rb.Epoch(min(int64(max(p.leaderEpoch, p.sourceLeaderEpoch, p.lastMirrorEpoch))+1, math.MaxInt32))
}

// complete handles the success of the action of LOG_ALIGNMENT,
// EPOCH_FENCING, ULE_RECOVERY or PAUSING.
func (p *PartitionMirror) complete(event Event) {
	p.succeeded()
	switch e := event.(type) {
	case LeaderEpochBumped:
		p.leaderEpoch = max(p.leaderEpoch, e.Epoch)
	case PauseDone:
		p.transition(MirrorPaused)
		p.settle()
		return
	}
	p.transition(MirrorMirroring)
	p.settle()
}

// succeeded resets the retry count after an action succeeded.
func (p *PartitionMirror) succeeded() {
	if p.retryCount != 0 || p.errorText != "" {
		p.retryCount, p.errorText = 0, ""
		p.dirty = true
	}
}

// stopStepDone moves the stop sequence on by one step.
func (p *PartitionMirror) stopStepDone(e StopStepDone) (rerun bool) {
	p.succeeded()
	switch p.stopStep {
	case StopRemoveFromFetcher:
		p.lastMirrorEpoch, p.lastMirrorOffset = e.LastMirrorEpoch, e.LastMirrorOffset
		p.stopStep = StopBumpLeaderEpoch
	case StopBumpLeaderEpoch:
		p.leaderEpoch = p.stopEpoch()
		p.stopStep = StopAbortTransactions
	case StopAbortTransactions:
		p.stopStep = StopResetProducers
	case StopResetProducers:
		p.transition(MirrorStopped)
		p.settle()
		return false
	}
	p.dirty = true
	return true
}

// fail enters FAILED, scheduling a retry if the failure is retryable and
// the attempts are not used up.
func (p *PartitionMirror) fail(now time.Time, err error, retryable bool) {
	text := err.Error()
	schedule := retryable && p.retryCount < p.policy.MaxAttempts
	if retryable && !schedule {
		text = fmt.Sprintf("gave up after %d retries: %s", p.retryCount, text)
	}
	p.transition(MirrorFailed)
	p.errorText = truncateErrorText(text)
	if schedule {
		p.retryCount++
		delay := p.policy.backoff(p.retryCount, p.jitter)
		p.retryable = true
		p.nextRetryAt = time.UnixMilli(now.UnixMilli() + delay.Milliseconds())
	}
}

// leaveFailed retries: to STOPPING if the stop was under way or is
// desired, to LOG_ALIGNMENT if alignment failed, otherwise to MIRRORING
// (which re-detects divergence and re-fences as needed).
func (p *PartitionMirror) leaveFailed() {
	switch {
	case p.previous == MirrorStopping || p.desired == DesiredStopped:
		p.transition(MirrorStopping)
	case p.previous == MirrorLogAlignment:
		p.transition(MirrorLogAlignment)
	default:
		p.transition(MirrorMirroring)
	}
	p.settle()
}

// transition moves to state to, which DESIGN.md's table must allow: an
// illegal transition is a bug. It keeps the per-state fields' invariants.
func (p *PartitionMirror) transition(to MirrorState) {
	if !mirrorTransitionAllowed(p.state, to) {
		panic(fmt.Sprintf("engine: illegal mirror state transition %v -> %v", p.state, to))
	}
	p.previous, p.state = p.state, to
	p.stateEpoch++
	p.transitions++
	switch {
	case to == MirrorStopping && p.stopStep == StopNone:
		p.stopStep = StopRemoveFromFetcher
	case to != MirrorStopping && to != MirrorFailed:
		p.stopStep = StopNone
	}
	if to != MirrorULERecovery {
		p.truncateTo = -1
	}
	p.retryable, p.nextRetryAt = false, time.Time{}
}

// appendStateActions appends the actions the current state runs on entry
// (and again on a restart or reconcile).
func (p *PartitionMirror) appendStateActions(actions []Action) []Action {
	switch p.state {
	case MirrorLogAlignment:
		return append(actions, StartAlignment{})
	case MirrorEpochFencing:
		return append(actions, StopFetching{}, BumpLeaderEpoch{To: p.fencingEpoch()})
	case MirrorULERecovery:
		return append(actions, StopFetching{}, Truncate{Offset: p.truncateTo})
	case MirrorMirroring:
		return append(actions, StartFetching{})
	case MirrorPausing:
		return append(actions, StopFetching{})
	case MirrorStopping:
		return append(actions, p.stopStepAction())
	case MirrorFailed:
		actions = append(actions, StopFetching{})
		if p.retryable {
			actions = append(actions, ScheduleRetry{At: p.nextRetryAt})
		}
	}
	return actions // UNKNOWN, PAUSED, STOPPED: nothing to do
}

func (p *PartitionMirror) stopStepAction() Action {
	switch p.stopStep {
	case StopRemoveFromFetcher:
		return StopFetching{}
	case StopBumpLeaderEpoch:
		return BumpLeaderEpoch{To: p.stopEpoch()}
	case StopAbortTransactions:
		return WriteAbortMarkers{}
	case StopResetProducers:
		return WriteMirrorPIDReset{}
	}
	panic(fmt.Sprintf("engine: mirror state: STOPPING at step %v", p.stopStep))
}

// checkInvariants panics if a field comment's invariant does not hold.
func (p *PartitionMirror) checkInvariants() {
	if next, ok := p.nextTowardsDesired(); ok {
		panic(fmt.Sprintf("engine: mirror state: at rest in %v desiring %v, but %v is due", p.state, p.desired, next))
	}
	if p.state == MirrorUnknown {
		if p.stateEpoch != 0 || p.retryCount != 0 || p.stopStep != StopNone || p.errorText != "" {
			panic(fmt.Sprintf("engine: mirror state: UNKNOWN with %+v", p.Record()))
		}
		return
	}
	if err := p.Record().validate(); err != nil {
		panic(fmt.Sprintf("engine: mirror state invariant: %v", err))
	}
}

// checkMirrorEvent panics on an event no correct owner sends.
func checkMirrorEvent(event Event) {
	bad := false
	switch e := event.(type) {
	case DesiredStateChanged:
		bad = e.Desired < 0 || e.Desired >= desiredStateCount
	case Restarted:
		bad = e.Desired < 0 || e.Desired >= desiredStateCount
	case AlignmentDone:
		bad = e.TruncatedTo < 0
	case AlignmentFailed:
		bad = e.Err == nil || e.Now.UnixMilli() < 0
	case FetchFailed:
		bad = e.Err == nil || e.Now.UnixMilli() < 0
	case StepFailed:
		bad = e.Err == nil || e.Now.UnixMilli() < 0
	case LeaderEpochBumped:
		bad = e.Epoch < 0
	case DivergenceDetected:
		bad = e.TruncateTo < 0
	case StopStepDone:
		bad = e.Step == StopRemoveFromFetcher && (e.LastMirrorEpoch < rb.NoEpoch || e.LastMirrorOffset < 0)
	case nil:
		bad = true
	}
	if bad {
		panic(fmt.Sprintf("engine: mirror state: impossible event %v", event))
	}
}

// truncateErrorText cuts text to mirrorErrorTextMax bytes on a rune
// boundary.
func truncateErrorText(text string) string {
	if len(text) <= mirrorErrorTextMax {
		return text
	}
	cut := mirrorErrorTextMax
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut]
}
