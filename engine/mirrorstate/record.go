package mirrorstate

import (
	"errors"
	"fmt"

	rb "github.com/mirrord/mirrord/recordbatch"
)

// ErrInvalidRecord marks a Record that breaks the invariants of Machine's
// fields: no Machine could have persisted it.
var ErrInvalidRecord = errors.New("mirrorstate: invalid record")

// Record is what a Persist writes (the value of a __mirror_state record): Machine's
// persisted fields (see their comments for the meanings and invariants).
type Record struct {
	State             State
	Previous          State
	StopStep          StopStep
	StateEpoch        StateEpoch
	LeaderEpoch       rb.Epoch
	SourceLeaderEpoch rb.Epoch
	RetryCount        int32
	Retryable         bool
	NextRetryAtMillis int64 // -1 unless Retryable
	Error             string
	LastMirrorEpoch   rb.Epoch
	LastMirrorOffset  rb.Offset
	TruncateTo        rb.Offset
}

func (v Record) String() string {
	s := fmt.Sprintf("%v (from %v, state epoch %d, leader epoch %d)", v.State, v.Previous, v.StateEpoch, v.LeaderEpoch)
	if v.StopStep != StopNone {
		s += " at stop step " + v.StopStep.String()
	}
	if v.Error != "" {
		s += fmt.Sprintf(", %d retries, error %q", v.RetryCount, v.Error)
	}
	return s
}

// Validate checks the invariants a persisted value keeps (those of
// Machine's field comments).
func (v Record) Validate() error {
	for _, check := range []struct {
		ok   bool
		what string
	}{
		{v.State > Unknown && v.State < NumStates, "state out of range or UNKNOWN"},
		{v.Previous >= 0 && v.Previous < NumStates && v.Previous != v.State, "previous state out of range or the state itself"},
		{v.State != Failed || failable(v.Previous), "FAILED from a state without an action"},
		{v.StopStep >= 0 && v.StopStep < stopStepCount, "stop step out of range"},
		{(v.StopStep != StopNone) == (v.State == Stopping || v.State == Failed && v.Previous == Stopping), "stop step outside a stop"},
		{v.StateEpoch >= 1, "state epoch below 1"},
		{v.LeaderEpoch >= 0 && v.SourceLeaderEpoch >= rb.NoEpoch && v.LastMirrorEpoch >= rb.NoEpoch, "negative epoch"},
		{v.State != Mirroring || !epochsNeedFencing(v.LeaderEpoch, v.SourceLeaderEpoch), "MIRRORING with a leader epoch too close to the source's"},
		{v.RetryCount >= 0, "negative retry count"},
		{!v.Retryable || v.State == Failed, "retryable outside FAILED"},
		{(v.NextRetryAtMillis >= 0) == v.Retryable && v.NextRetryAtMillis >= -1, "next retry time without a retry"},
		{len(v.Error) <= ErrorTextMax, "error text too long"},
		{v.Error != "" || v.State != Failed && v.RetryCount == 0, "FAILED or retrying without an error"},
		{v.LastMirrorOffset >= -1, "last mirror offset below -1"},
		{v.LastMirrorOffset >= 0 || v.State != Stopped && v.StopStep <= StopRemoveFromFetcher, "stopped without a last mirror offset"},
		{(v.TruncateTo >= 0) == (v.State == ULERecovery) && v.TruncateTo >= -1, "truncation offset outside ULE_RECOVERY"},
	} {
		if !check.ok {
			return fmt.Errorf("%w: %s: %v", ErrInvalidRecord, check.what, v)
		}
	}
	return nil
}

func epochsNeedFencing(leader, source rb.Epoch) bool {
	return source != rb.NoEpoch && int64(leader) < int64(source)+epochGapMin
}
