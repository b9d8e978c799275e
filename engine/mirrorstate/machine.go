package mirrorstate

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	rb "github.com/mirrord/mirrord/recordbatch"
)

// State is the state of one mirrored partition.
type State int8

const (
	Unknown State = iota // before the first record
	LogAlignment
	EpochFencing
	ULERecovery
	Mirroring
	Pausing
	Paused
	Stopping
	Stopped
	Failed
	NumStates
)

var stateNames = [NumStates]string{
	"UNKNOWN", "LOG_ALIGNMENT", "EPOCH_FENCING", "ULE_RECOVERY", "MIRRORING",
	"PAUSING", "PAUSED", "STOPPING", "STOPPED", "FAILED",
}

// ParseState is the state named name (as String gives it), or false.
func ParseState(name string) (State, bool) {
	for s, n := range stateNames {
		if n == name {
			return State(s), true
		}
	}
	return Unknown, false
}

func (s State) String() string {
	if s < 0 || s >= NumStates {
		return fmt.Sprintf("State(%d)", s)
	}
	return stateNames[s]
}

// transitionAllowed is DESIGN.md's table ("to <- allowed from").
// Staying in a state is not a transition: a state is never entered from
// itself (so FAILED and STOPPING, allowed from "any", are not entered from
// FAILED and STOPPING).
func transitionAllowed(from, to State) bool {
	if from == to {
		return false
	}
	switch to {
	case LogAlignment:
		return from == Unknown || from == Stopped || from == Failed
	case EpochFencing, ULERecovery, Pausing:
		return from == Mirroring
	case Mirroring:
		switch from {
		case LogAlignment, EpochFencing, Paused, ULERecovery, Failed:
			return true
		}
		return false
	case Paused:
		return from == Pausing
	case Stopping:
		return from != Stopped && from != Unknown
	case Stopped:
		return from == Stopping
	case Failed:
		return true
	}
	return false
}

// failable: the states with an action in flight that can fail, the
// only possible previous states of FAILED.
func failable(s State) bool {
	switch s {
	case LogAlignment, EpochFencing, ULERecovery, Mirroring, Pausing, Stopping:
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
	// epochGapMin and epochLead: the local leader epoch stays
	// at least epochGapMin above the source's; when the gap shrinks
	// below it, EPOCH_FENCING bumps it to source + epochLead.
	epochGapMin = 3
	epochLead   = 10
	// ErrorTextMax bounds the error text kept and persisted, in bytes.
	ErrorTextMax = 1024
	// settleHopsMax bounds the transitions one event causes after
	// its first: PAUSED -> MIRRORING -> EPOCH_FENCING is the longest walk.
	settleHopsMax = 4
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
func (r RetryPolicy) Backoff(attempt int32, jitter RetryJitter) time.Duration {
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

// Machine is the mirror state machine of one partition. It is not
// safe for concurrent use: its owner alone calls it.
type Machine struct {
	// state changes only through transition, along DESIGN.md's table.
	state State
	// previous is the state before the latest transition: != state, or
	// both UNKNOWN before the first one. In FAILED, failable(previous).
	previous State
	// desired is the topic's desired state; meaningless until
	// desiredKnown, which the first event (Restarted or
	// DesiredStateChanged) sets.
	desired      DesiredState
	desiredKnown bool
	// restored: made by Restore and not yet told Restarted, which must
	// come first (it re-runs the actions a crash lost).
	restored bool
	// stateEpoch is the StateEpoch of the latest record: +1 on every
	// transition, and +1 for a step that changes persisted fields without
	// one. Never decreases; 0 only in UNKNOWN.
	stateEpoch StateEpoch
	// leaderEpoch is the local partition leader epoch, >= 0, never
	// decreasing. In MIRRORING it is at least epochGapMin above
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
	// errorText is the latest failure, at most ErrorTextMax bytes:
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

// New returns the machine of a partition that has no
// record yet: UNKNOWN, at the local partition's leader epoch.
func New(leaderEpoch rb.Epoch, policy RetryPolicy, jitter RetryJitter) *Machine {
	if leaderEpoch < 0 || !policy.valid() || jitter == nil {
		panic(fmt.Sprintf("mirrorstate: New(%d, %+v, %v)", leaderEpoch, policy, jitter))
	}
	return &Machine{
		previous: Unknown, leaderEpoch: leaderEpoch, sourceLeaderEpoch: rb.NoEpoch,
		truncateTo: -1, lastMirrorEpoch: rb.NoEpoch, lastMirrorOffset: -1,
		policy: policy, jitter: jitter,
	}
}

// Restore returns the machine a persisted record describes (one that
// DecodeMirrorStateRecord accepted). Its first event must be Restarted.
func Restore(record Record, policy RetryPolicy, jitter RetryJitter) *Machine {
	if err := record.Validate(); err != nil {
		panic(fmt.Sprintf("mirrorstate: Restore: %v", err))
	}
	p := New(record.LeaderEpoch, policy, jitter)
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
func (p *Machine) State() State { return p.state }

// Desired is the topic's desired state, as last told.
func (p *Machine) Desired() DesiredState { return p.desired }

// Record is the partition's persisted state, as the latest Persist wrote
// it (or would write it, in UNKNOWN).
func (p *Machine) Record() Record {
	v := Record{
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
func (p *Machine) Step(event Event) []Action {
	checkEvent(event)
	if _, restart := event.(Restarted); p.restored && !restart {
		panic(fmt.Sprintf("mirrorstate: first event after Restore %v, want Restarted", event))
	}
	p.restored = false
	if !p.desiredKnown {
		switch event.(type) {
		case Restarted, DesiredStateChanged:
		default:
			panic(fmt.Sprintf("mirrorstate: first event %v, want Restarted or DesiredStateChanged", event))
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
func (p *Machine) accepts(event Event) bool {
	switch e := event.(type) {
	case AlignmentDone, AlignmentFailed:
		return p.state == LogAlignment
	case FetchSucceeded, FetchFailed, DivergenceDetected:
		return p.state == Mirroring
	case SourceEpochChanged:
		// Once the stop has begun (STOPPING, or FAILED within it) the
		// source no longer matters, and the stop's epoch bump must stay
		// what it was when its step was persisted.
		return p.stopStep == StopNone && e.Epoch > p.sourceLeaderEpoch
	case LeaderEpochBumped:
		return p.state == EpochFencing
	case TruncationDone:
		return p.state == ULERecovery
	case PauseDone:
		return p.state == Pausing
	case StopStepDone:
		return p.state == Stopping && e.Step == p.stopStep
	case StepFailed:
		switch p.state {
		case EpochFencing, ULERecovery, Pausing, Stopping:
			return true
		}
		return false
	case LogOffline:
		// Already waiting for --recover, or a writable topic's.
		return p.state != Stopped && !(p.state == Failed && !p.retryable)
	case Recover:
		return p.state == Failed
	case Tick:
		return p.retryable && !e.Now.Before(p.nextRetryAt)
	}
	return true // DesiredStateChanged, Restarted
}

// apply changes the machine for an accepted event; it reports whether the
// current state's action must run again without a transition.
func (p *Machine) apply(event Event) (rerun bool) {
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
		p.dirty = p.state != Unknown // nothing is persisted before the first transition
		p.settle()
	case DivergenceDetected:
		p.truncateTo = e.TruncateTo
		p.transition(ULERecovery)
	case StopStepDone:
		return p.stopStepDone(e)
	case AlignmentFailed:
		p.fail(e.Now, e.Err, e.Retryable)
	case FetchFailed:
		p.fail(e.Now, e.Err, e.Retryable)
	case StepFailed:
		p.fail(e.Now, e.Err, e.Retryable)
	case LogOffline:
		if p.state != Failed {
			p.fail(e.Now, e.Err, false)
			break
		}
		// FAILED with a retry scheduled: no retry, the log is gone.
		p.retryable, p.nextRetryAt, p.errorText, p.dirty = false, time.Time{}, truncateErrorText(e.Err.Error()), true
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
func (p *Machine) reconcile(restart bool) (rerun bool) {
	if p.state == Failed {
		return restart
	}
	return !p.settle()
}

// settle walks towards the desired state as far as the table allows
// without waiting for an action, and reports whether it moved.
func (p *Machine) settle() bool {
	for hop := range settleHopsMax {
		next, ok := p.nextTowardsDesired()
		if !ok {
			return hop > 0
		}
		p.transition(next)
	}
	panic(fmt.Sprintf("mirrorstate: no rest after %d hops, in %v desiring %v", settleHopsMax, p.state, p.desired))
}

// nextTowardsDesired is the transition part of the reconcile rule, in its
// order: desired STOPPED -> STOPPING; desired PAUSED -> PAUSING (only
// MIRRORING may pause); PAUSED with desired MIRRORING -> MIRRORING;
// UNKNOWN or STOPPED (with desired MIRRORING or PAUSED) -> LOG_ALIGNMENT.
// Added: MIRRORING whose leader epoch is too close to the source's ->
// EPOCH_FENCING, so MIRRORING never fetches with a leader epoch the
// source could reach.
func (p *Machine) nextTowardsDesired() (State, bool) {
	switch {
	case p.state == Failed:
		return 0, false
	case p.desired == DesiredStopped:
		return Stopping, transitionAllowed(p.state, Stopping)
	case p.desired == DesiredPaused && p.state == Mirroring:
		return Pausing, true
	case p.desired == DesiredMirroring && p.state == Paused:
		return Mirroring, true
	case p.state == Unknown || p.state == Stopped:
		return LogAlignment, true
	case p.state == Mirroring && p.needsFencing():
		return EpochFencing, true
	}
	return 0, false
}

// needsFencing: the source's leader epoch is known and within
// epochGapMin of ours.
func (p *Machine) needsFencing() bool {
	return p.sourceLeaderEpoch != rb.NoEpoch && int64(p.leaderEpoch) < int64(p.sourceLeaderEpoch)+epochGapMin
}

// fencingEpoch is the leader epoch EPOCH_FENCING bumps to.
func (p *Machine) fencingEpoch() rb.Epoch {
	return rb.Epoch(min(int64(p.sourceLeaderEpoch)+epochLead, math.MaxInt32))
}

// stopEpoch is the leader epoch the stop bumps to: above the local, the
// source and the last mirror epochs.
func (p *Machine) stopEpoch() rb.Epoch {
	return rb.Epoch(min(int64(max(p.leaderEpoch, p.sourceLeaderEpoch, p.lastMirrorEpoch))+1, math.MaxInt32))
}

// complete handles the success of the action of LOG_ALIGNMENT,
// EPOCH_FENCING, ULE_RECOVERY or PAUSING.
func (p *Machine) complete(event Event) {
	p.succeeded()
	switch e := event.(type) {
	case LeaderEpochBumped:
		p.leaderEpoch = max(p.leaderEpoch, e.Epoch)
	case PauseDone:
		p.transition(Paused)
		p.settle()
		return
	}
	p.transition(Mirroring)
	p.settle()
}

// succeeded resets the retry count after an action succeeded.
func (p *Machine) succeeded() {
	if p.retryCount != 0 || p.errorText != "" {
		p.retryCount, p.errorText = 0, ""
		p.dirty = true
	}
}

// stopStepDone moves the stop sequence on by one step.
func (p *Machine) stopStepDone(e StopStepDone) (rerun bool) {
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
		p.transition(Stopped)
		p.settle()
		return false
	}
	p.dirty = true
	return true
}

// fail enters FAILED, scheduling a retry if the failure is retryable and
// the attempts are not used up.
func (p *Machine) fail(now time.Time, err error, retryable bool) {
	text := err.Error()
	schedule := retryable && p.retryCount < p.policy.MaxAttempts
	if retryable && !schedule {
		text = fmt.Sprintf("gave up after %d retries: %s", p.retryCount, text)
	}
	p.transition(Failed)
	p.errorText = truncateErrorText(text)
	if schedule {
		p.retryCount++
		delay := p.policy.Backoff(p.retryCount, p.jitter)
		p.retryable = true
		p.nextRetryAt = time.UnixMilli(now.UnixMilli() + delay.Milliseconds())
	}
}

// leaveFailed retries: to STOPPING if the stop was under way or is
// desired, to LOG_ALIGNMENT if alignment failed, otherwise to MIRRORING
// (which re-detects divergence and re-fences as needed).
func (p *Machine) leaveFailed() {
	switch {
	case p.previous == Stopping || p.desired == DesiredStopped:
		p.transition(Stopping)
	case p.previous == LogAlignment:
		p.transition(LogAlignment)
	default:
		p.transition(Mirroring)
	}
	p.settle()
}

// transition moves to state to, which DESIGN.md's table must allow: an
// illegal transition is a bug. It keeps the per-state fields' invariants.
func (p *Machine) transition(to State) {
	if !transitionAllowed(p.state, to) {
		panic(fmt.Sprintf("mirrorstate: illegal transition %v -> %v", p.state, to))
	}
	p.previous, p.state = p.state, to
	p.stateEpoch++
	p.transitions++
	switch {
	case to == Stopping && p.stopStep == StopNone:
		p.stopStep = StopRemoveFromFetcher
	case to != Stopping && to != Failed:
		p.stopStep = StopNone
	}
	if to != ULERecovery {
		p.truncateTo = -1
	}
	p.retryable, p.nextRetryAt = false, time.Time{}
}

// appendStateActions appends the actions the current state runs on entry
// (and again on a restart or reconcile).
func (p *Machine) appendStateActions(actions []Action) []Action {
	switch p.state {
	case LogAlignment:
		return append(actions, StartAlignment{})
	case EpochFencing:
		return append(actions, StopFetching{}, BumpLeaderEpoch{To: p.fencingEpoch()})
	case ULERecovery:
		return append(actions, StopFetching{}, Truncate{Offset: p.truncateTo})
	case Mirroring:
		return append(actions, StartFetching{})
	case Pausing:
		return append(actions, StopFetching{})
	case Stopping:
		return append(actions, p.stopStepAction())
	case Failed:
		actions = append(actions, StopFetching{})
		if p.retryable {
			actions = append(actions, ScheduleRetry{At: p.nextRetryAt})
		}
	}
	return actions // UNKNOWN, PAUSED, STOPPED: nothing to do
}

func (p *Machine) stopStepAction() Action {
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
	panic(fmt.Sprintf("mirrorstate: STOPPING at step %v", p.stopStep))
}

// checkInvariants panics if a field comment's invariant does not hold.
func (p *Machine) checkInvariants() {
	if next, ok := p.nextTowardsDesired(); ok {
		panic(fmt.Sprintf("mirrorstate: at rest in %v desiring %v, but %v is due", p.state, p.desired, next))
	}
	if p.state == Unknown {
		if p.stateEpoch != 0 || p.retryCount != 0 || p.stopStep != StopNone || p.errorText != "" {
			panic(fmt.Sprintf("mirrorstate: UNKNOWN with %+v", p.Record()))
		}
		return
	}
	if err := p.Record().Validate(); err != nil {
		panic(fmt.Sprintf("mirrorstate: invariant: %v", err))
	}
}

// checkEvent panics on an event no correct owner sends.
func checkEvent(event Event) {
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
	case LogOffline:
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
		panic(fmt.Sprintf("mirrorstate: impossible event %v", event))
	}
}

// truncateErrorText cuts text to ErrorTextMax bytes on a rune
// boundary.
func truncateErrorText(text string) string {
	if len(text) <= ErrorTextMax {
		return text
	}
	cut := ErrorTextMax
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut]
}
