package mirrorstate

import (
	"fmt"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
)

// The events a Machine accepts and the actions it asks for (see
// doc.go for the machine and the contract between it and its
// owner).
//
// An event that does not apply to the current state is stale (it answers
// an action of an earlier state) and Step ignores it: it returns no
// actions and changes nothing. The table of which event applies where is
// Machine.accepts. An event with impossible fields (a negative
// offset, a nil error) is a bug of the owner and panics.

// Event is something that happened to one mirrored partition: a request
// of the user, the completion or failure of an action, news from the
// source cluster, or the passing of time.
type Event interface {
	fmt.Stringer
	mirrorEvent()
}

// DesiredStateChanged: the user set the topic's desired state (--start,
// --pause, --resume, --stop). Reconciles (DESIGN.md's rule).
type DesiredStateChanged struct{ Desired DesiredState }

// Restarted: the owner (re)created the machine, new or from its persisted
// record (Restore), and tells it the topic's desired state. The first
// event of every machine is Restarted or DesiredStateChanged. Reconciles,
// re-running the current state's action: actions in flight before a crash
// are lost.
type Restarted struct{ Desired DesiredState }

// AlignmentDone: StartAlignment finished. The log is truncated to
// TruncatedTo (the last mirror epoch the source stored for this
// partition, or zero) and fetching can begin from there.
type AlignmentDone struct{ TruncatedTo rb.Offset }

// AlignmentFailed: StartAlignment failed. Non-retryable: the source still
// mirrors this topic from us (mirror loop), the source topic is gone, the
// source cluster ID changed.
type AlignmentFailed struct {
	Err       error
	Retryable bool
	Now       time.Time
}

// FetchSucceeded: a fetch for this partition succeeded after StartFetching
// (the owner sends it once per StartFetching, or whenever convenient: it
// is a no-op while nothing is failing). Resets the retry count.
type FetchSucceeded struct{}

// FetchFailed: fetching failed for good or for now. Non-retryable: the
// source topic was deleted, the source cluster ID changed, an unclean
// leader election on the source that its config did not allow was
// detected.
type FetchFailed struct {
	Err       error
	Retryable bool
	Now       time.Time
}

// SourceEpochChanged: the source partition's leader epoch, from its
// metadata. Lower or equal epochs than the highest seen are ignored.
type SourceEpochChanged struct{ Epoch rb.Epoch }

// LeaderEpochBumped: BumpLeaderEpoch of EPOCH_FENCING finished; the local
// partition leader epoch is now Epoch.
type LeaderEpochBumped struct{ Epoch rb.Epoch }

// DivergenceDetected: a fetch answered a DivergingEpoch (or
// OffsetForLeaderEpoch showed one): the local log must be truncated to
// TruncateTo (from epoch.Divergence) before fetching continues.
type DivergenceDetected struct{ TruncateTo rb.Offset }

// TruncationDone: Truncate of ULE_RECOVERY finished.
type TruncationDone struct{}

// PauseDone: StopFetching of PAUSING finished; nothing is fetched for the
// partition any more.
type PauseDone struct{}

// StopStepDone: the action of stop step Step finished. After
// StopRemoveFromFetcher the owner reports the last mirror epoch: the
// latest epoch of the local epoch cache (rb.NoEpoch for an empty cache)
// and the log end offset, read after the fetcher let go of the partition.
type StopStepDone struct {
	Step             StopStep
	LastMirrorEpoch  rb.Epoch
	LastMirrorOffset rb.Offset
}

// StepFailed: a local action failed (BumpLeaderEpoch, Truncate,
// StopFetching while pausing, or a stop step). Usually retryable: a disk
// error.
type StepFailed struct {
	Err       error
	Retryable bool
	Now       time.Time
}

// LogOffline: the partition's local log could not be opened (the node
// holds it offline). Non-retryable, from any state but STOPPED (then the
// topic is writable, the mirror's no more): FAILED, waiting for
// --recover, which rebuilds the log empty before it re-fetches.
type LogOffline struct {
	Err error
	Now time.Time
}

// Tick: the time is Now. A FAILED partition whose retry is due retries.
type Tick struct{ Now time.Time }

// Recover: the user asked to recover a FAILED partition (--recover): the
// retry count starts over and the partition retries at once.
type Recover struct{}

func (DesiredStateChanged) mirrorEvent() {}
func (Restarted) mirrorEvent()           {}
func (AlignmentDone) mirrorEvent()       {}
func (AlignmentFailed) mirrorEvent()     {}
func (FetchSucceeded) mirrorEvent()      {}
func (FetchFailed) mirrorEvent()         {}
func (SourceEpochChanged) mirrorEvent()  {}
func (LeaderEpochBumped) mirrorEvent()   {}
func (DivergenceDetected) mirrorEvent()  {}
func (TruncationDone) mirrorEvent()      {}
func (PauseDone) mirrorEvent()           {}
func (StopStepDone) mirrorEvent()        {}
func (StepFailed) mirrorEvent()          {}
func (LogOffline) mirrorEvent()          {}
func (Tick) mirrorEvent()                {}
func (Recover) mirrorEvent()             {}

func (e DesiredStateChanged) String() string {
	return "DesiredStateChanged(" + e.Desired.String() + ")"
}
func (e Restarted) String() string     { return "Restarted(" + e.Desired.String() + ")" }
func (e AlignmentDone) String() string { return fmt.Sprintf("AlignmentDone(%d)", e.TruncatedTo) }
func (e AlignmentFailed) String() string {
	return fmt.Sprintf("AlignmentFailed(%v, retryable %t)", e.Err, e.Retryable)
}
func (FetchSucceeded) String() string { return "FetchSucceeded" }
func (e FetchFailed) String() string {
	return fmt.Sprintf("FetchFailed(%v, retryable %t)", e.Err, e.Retryable)
}
func (e SourceEpochChanged) String() string { return fmt.Sprintf("SourceEpochChanged(%d)", e.Epoch) }
func (e LeaderEpochBumped) String() string  { return fmt.Sprintf("LeaderEpochBumped(%d)", e.Epoch) }
func (e DivergenceDetected) String() string {
	return fmt.Sprintf("DivergenceDetected(%d)", e.TruncateTo)
}
func (TruncationDone) String() string { return "TruncationDone" }
func (PauseDone) String() string      { return "PauseDone" }
func (e StopStepDone) String() string {
	return fmt.Sprintf("StopStepDone(%v, LME %d@%d)", e.Step, e.LastMirrorEpoch, e.LastMirrorOffset)
}
func (e StepFailed) String() string {
	return fmt.Sprintf("StepFailed(%v, retryable %t)", e.Err, e.Retryable)
}
func (e LogOffline) String() string { return fmt.Sprintf("LogOffline(%v)", e.Err) }
func (e Tick) String() string       { return fmt.Sprintf("Tick(%d)", e.Now.UnixMilli()) }
func (Recover) String() string      { return "Recover" }

// Action is something the owner must do for the partition, in the order
// Step returns them. A Persist comes first and must be durable before the
// owner performs the actions after it (as raft's Ready: persist, then
// act). Every action is idempotent: after a crash the machine asks again
// for the action of the state it resumes in, which may have run already;
// asking again for an action in progress must not start a second one.
type Action interface {
	fmt.Stringer
	mirrorAction()
}

// Persist: append Record to __mirror_state under the partition's key. The
// writer refuses a record whose StateEpoch is not above the stored one
// (fencing: a stale owner cannot overwrite a newer state).
type Persist struct{ Record Record }

// StartAlignment: failback alignment. Ask the source for the last mirror
// epoch it stored for this partition (DescribeClusterMirrors with
// LastMirrorEpochLookups), refuse if the source mirrors this topic from
// us, truncate the local log to it (no LME: to zero); then AlignmentDone
// or AlignmentFailed.
type StartAlignment struct{}

// StartFetching: add the partition to its source broker's fetcher, from
// the local log end offset.
type StartFetching struct{}

// StopFetching: stop all work on the source for the partition, fetching
// and alignment alike; when the action returns nothing of it runs or
// writes any more.
type StopFetching struct{}

// Truncate: truncate the local log to Offset (ULE_RECOVERY), then
// TruncationDone.
type Truncate struct{ Offset rb.Offset }

// BumpLeaderEpoch: raise the local partition leader epoch to To (a no-op
// if it is there already), then LeaderEpochBumped (EPOCH_FENCING) or
// StopStepDone (STOPPING).
type BumpLeaderEpoch struct{ To rb.Epoch }

// WriteAbortMarkers: append ABORT markers for every transaction still open
// in the local log, then StopStepDone.
type WriteAbortMarkers struct{}

// WriteMirrorPIDReset: append the MIRROR_PID_RESET control batch that
// drops the producer state copied from the source (unless the last batch
// of the log is one already), then StopStepDone.
type WriteMirrorPIDReset struct{}

// ScheduleRetry: deliver a Tick at or after At.
type ScheduleRetry struct{ At time.Time }

func (Persist) mirrorAction()             {}
func (StartAlignment) mirrorAction()      {}
func (StartFetching) mirrorAction()       {}
func (StopFetching) mirrorAction()        {}
func (Truncate) mirrorAction()            {}
func (BumpLeaderEpoch) mirrorAction()     {}
func (WriteAbortMarkers) mirrorAction()   {}
func (WriteMirrorPIDReset) mirrorAction() {}
func (ScheduleRetry) mirrorAction()       {}

func (a Persist) String() string {
	if a.Record.StopStep != StopNone {
		return fmt.Sprintf("Persist(%v:%v #%d)", a.Record.State, a.Record.StopStep, a.Record.StateEpoch)
	}
	return fmt.Sprintf("Persist(%v #%d)", a.Record.State, a.Record.StateEpoch)
}
func (StartAlignment) String() string      { return "StartAlignment" }
func (StartFetching) String() string       { return "StartFetching" }
func (StopFetching) String() string        { return "StopFetching" }
func (a Truncate) String() string          { return fmt.Sprintf("Truncate(%d)", a.Offset) }
func (a BumpLeaderEpoch) String() string   { return fmt.Sprintf("BumpLeaderEpoch(%d)", a.To) }
func (WriteAbortMarkers) String() string   { return "WriteAbortMarkers" }
func (WriteMirrorPIDReset) String() string { return "WriteMirrorPIDReset" }
func (a ScheduleRetry) String() string     { return fmt.Sprintf("ScheduleRetry(%d)", a.At.UnixMilli()) }
