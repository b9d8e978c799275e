package mirrorstate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var testRetryPolicy = RetryPolicy{InitialBackoff: 100 * time.Millisecond, MaxBackoff: 300 * time.Second, MaxAttempts: 20}

// fixedJitter is a RetryJitter that always returns itself.
type fixedJitter float64

func (f fixedJitter) Float64() float64 { return float64(f) }

var errTestFetch = errors.New("connection refused")

// testNow is the virtual time of the tests.
var testNow = time.UnixMilli(1_000_000)

// mirrorAt returns a machine in state, desiring desired, with the fields
// the state implies: stateEpoch 7, leader epoch 20, source epoch 10; a
// STOPPING machine is at its first step, ULE_RECOVERY truncates to 42, a
// FAILED one failed from MIRRORING with a retry at testNow + 100ms.
func mirrorAt(state State, desired DesiredState) *Machine {
	p := New(20, testRetryPolicy, fixedJitter(0.5))
	p.desired, p.desiredKnown = desired, true
	if state == Unknown {
		return p
	}
	p.state, p.stateEpoch, p.sourceLeaderEpoch = state, 7, 10
	switch state {
	case LogAlignment:
		p.previous = Stopped
	case Pausing, EpochFencing, ULERecovery:
		p.previous = Mirroring
	case Paused:
		p.previous = Pausing
	case Stopped:
		p.previous = Stopping
	default:
		p.previous = LogAlignment
	}
	switch state {
	case ULERecovery:
		p.truncateTo = 42
	case Stopping:
		p.stopStep = StopRemoveFromFetcher
	case Stopped:
		p.lastMirrorEpoch, p.lastMirrorOffset = 19, 100
	case Failed:
		p.previous, p.retryCount, p.errorText = Mirroring, 1, "connection refused"
		p.retryable, p.nextRetryAt = true, testNow.Add(100*time.Millisecond)
	}
	return p
}

func actionNames(actions []Action) []string {
	names := make([]string, len(actions))
	for i, a := range actions {
		names[i] = a.String()
	}
	return names
}

// stepWant steps p and checks the actions by name.
func stepWant(t *testing.T, p *Machine, event Event, want ...string) []Action {
	t.Helper()
	actions := p.Step(event)
	if got := actionNames(actions); !slices.Equal(got, want) {
		t.Fatalf("in %v, %v: actions %q, want %q", p.Record().State, event, got, want)
	}
	return actions
}

// panicText runs f and returns what it panicked with ("" if it did not).
func panicText(f func()) (text string) {
	defer func() {
		if r := recover(); r != nil {
			text = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// The table of DESIGN.md, "to <- allowed from", copied by hand.
var designTransitions = map[State][]State{
	LogAlignment: {Unknown, Stopped, Failed},
	EpochFencing: {Mirroring},
	ULERecovery:  {Mirroring},
	Pausing:      {Mirroring},
	Mirroring:    {LogAlignment, EpochFencing, Paused, ULERecovery, Failed},
	Paused:       {Pausing},
	Stopping: {LogAlignment, EpochFencing, ULERecovery, Mirroring,
		Pausing, Paused, Failed}, // any but STOPPED and UNKNOWN (and itself)
	Stopped: {Stopping},
	Failed: {Unknown, LogAlignment, EpochFencing, ULERecovery, Mirroring,
		Pausing, Paused, Stopping, Stopped}, // any (but itself)
}

func TestMirrorStateTransitions(t *testing.T) {
	allowed := 0
	for from := range NumStates {
		for to := range NumStates {
			want := slices.Contains(designTransitions[to], from)
			p := mirrorAt(from, DesiredMirroring)
			epoch := p.stateEpoch
			text := panicText(func() { p.transition(to) })
			switch {
			case want && text != "":
				t.Errorf("%v -> %v: panicked %q, want allowed", from, to, text)
			case want && (p.state != to || p.previous != from || p.stateEpoch != epoch+1):
				t.Errorf("%v -> %v: state %v previous %v epoch %d, want epoch %d", from, to, p.state, p.previous, p.stateEpoch, epoch+1)
			case !want && !strings.Contains(text, "illegal transition "+from.String()+" -> "+to.String()):
				t.Errorf("%v -> %v: panic %q, want an illegal transition naming both", from, to, text)
			}
			if want {
				allowed++
			}
		}
	}
	if allowed != 3+3+5+1+7+1+9 {
		t.Fatalf("%d allowed transitions", allowed)
	}
}

func TestMirrorStateReconcile(t *testing.T) {
	const (
		M = DesiredMirroring
		P = DesiredPaused
		S = DesiredStopped
	)
	stopping := []string{"Persist(STOPPING:REMOVE_FROM_FETCHER #8)", "StopFetching"}
	for _, c := range []struct {
		state   State
		desired DesiredState
		want    State
		actions []string // on DesiredStateChanged and on Restarted
		restart []string // on Restarted, where it differs
	}{
		{Unknown, M, LogAlignment, []string{"Persist(LOG_ALIGNMENT #1)", "StartAlignment"}, nil},
		{Unknown, P, LogAlignment, []string{"Persist(LOG_ALIGNMENT #1)", "StartAlignment"}, nil},
		{Unknown, S, Unknown, nil, nil},
		{LogAlignment, M, LogAlignment, []string{"StartAlignment"}, nil},
		{LogAlignment, P, LogAlignment, []string{"StartAlignment"}, nil},
		{LogAlignment, S, Stopping, stopping, nil},
		{EpochFencing, M, EpochFencing, []string{"StopFetching", "BumpLeaderEpoch(20)"}, nil},
		{EpochFencing, P, EpochFencing, []string{"StopFetching", "BumpLeaderEpoch(20)"}, nil},
		{EpochFencing, S, Stopping, stopping, nil},
		{ULERecovery, M, ULERecovery, []string{"StopFetching", "Truncate(42)"}, nil},
		{ULERecovery, P, ULERecovery, []string{"StopFetching", "Truncate(42)"}, nil},
		{ULERecovery, S, Stopping, stopping, nil},
		{Mirroring, M, Mirroring, []string{"StartFetching"}, nil},
		{Mirroring, P, Pausing, []string{"Persist(PAUSING #8)", "StopFetching"}, nil},
		{Mirroring, S, Stopping, stopping, nil},
		{Pausing, M, Pausing, []string{"StopFetching"}, nil},
		{Pausing, P, Pausing, []string{"StopFetching"}, nil},
		{Pausing, S, Stopping, stopping, nil},
		{Paused, M, Mirroring, []string{"Persist(MIRRORING #8)", "StartFetching"}, nil},
		{Paused, P, Paused, nil, nil},
		{Paused, S, Stopping, stopping, nil},
		{Stopping, M, Stopping, []string{"StopFetching"}, nil},
		{Stopping, P, Stopping, []string{"StopFetching"}, nil},
		{Stopping, S, Stopping, []string{"StopFetching"}, nil},
		{Stopped, M, LogAlignment, []string{"Persist(LOG_ALIGNMENT #8)", "StartAlignment"}, nil},
		{Stopped, P, LogAlignment, []string{"Persist(LOG_ALIGNMENT #8)", "StartAlignment"}, nil},
		{Stopped, S, Stopped, nil, nil},
		{Failed, M, Failed, nil, []string{"StopFetching", "ScheduleRetry(1000100)"}},
		{Failed, P, Failed, nil, []string{"StopFetching", "ScheduleRetry(1000100)"}},
		{Failed, S, Failed, nil, []string{"StopFetching", "ScheduleRetry(1000100)"}},
	} {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/%v/restart=%t", c.state, c.desired, restart), func(t *testing.T) {
				p := mirrorAt(c.state, c.desired)
				event, want := Event(DesiredStateChanged{Desired: c.desired}), c.actions
				if restart {
					event = Restarted{Desired: c.desired}
					if c.restart != nil {
						want = c.restart
					}
				}
				stepWant(t, p, event, want...)
				if p.State() != c.want || p.Desired() != c.desired {
					t.Fatalf("state %v desired %v, want %v %v", p.State(), p.Desired(), c.want, c.desired)
				}
			})
		}
	}
}

func TestMirrorStateBackoff(t *testing.T) {
	policy := testRetryPolicy
	base := func(attempt int32) time.Duration {
		return min(policy.MaxBackoff, policy.InitialBackoff<<min(attempt-1, 30))
	}
	for attempt := int32(1); attempt <= 25; attempt++ {
		if got := policy.Backoff(attempt, fixedJitter(0.5)); got != base(attempt) {
			t.Errorf("attempt %d without jitter: %v, want %v", attempt, got, base(attempt))
		}
	}
	if got := policy.Backoff(1, fixedJitter(0)); got != policy.InitialBackoff {
		t.Errorf("lowest jitter of the first attempt: %v, want the initial backoff", got)
	}
	if got := policy.Backoff(25, fixedJitter(0.999)); got != policy.MaxBackoff {
		t.Errorf("highest jitter of a late attempt: %v, want the max backoff", got)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	jitter := rand.New(rand.NewPCG(seed, 1))
	for range 100 {
		previous := [2]time.Duration{}
		for attempt := int32(1); attempt <= 25; attempt++ {
			d := policy.Backoff(attempt, jitter)
			low := max(policy.InitialBackoff, time.Duration(0.8*float64(base(attempt))).Truncate(time.Millisecond))
			high := min(policy.MaxBackoff, time.Duration(1.2*float64(base(attempt))))
			if d < low || d > high || d%time.Millisecond != 0 {
				t.Fatalf("seed %d attempt %d: %v outside [%v, %v] or not whole ms", seed, attempt, d, low, high)
			}
			// Two doublings outgrow the jitter: 0.8*4 > 1.2.
			if attempt > 2 && base(attempt) == 4*base(attempt-2) && d <= previous[0] {
				t.Fatalf("seed %d attempt %d: %v not above %v", seed, attempt, d, previous[0])
			}
			previous = [2]time.Duration{previous[1], d}
		}
	}
}

func TestMirrorStateMaxAttempts(t *testing.T) {
	p := mirrorAt(Mirroring, DesiredMirroring)
	p.policy.MaxAttempts = 3
	now := testNow
	for attempt := 1; attempt <= 3; attempt++ {
		wait := testRetryPolicy.InitialBackoff << (attempt - 1)
		stepWant(t, p, FetchFailed{Err: errTestFetch, Retryable: true, Now: now},
			fmt.Sprintf("Persist(FAILED #%d)", 6+2*attempt), "StopFetching", fmt.Sprintf("ScheduleRetry(%d)", now.Add(wait).UnixMilli()))
		if r := p.Record(); r.RetryCount != int32(attempt) || r.Error != "connection refused" || r.Previous != Mirroring {
			t.Fatalf("after failure %d: %v", attempt, r)
		}
		stepWant(t, p, Tick{Now: now.Add(wait - time.Millisecond)}) // not yet
		now = now.Add(wait)
		stepWant(t, p, Tick{Now: now}, fmt.Sprintf("Persist(MIRRORING #%d)", 7+2*attempt), "StartFetching")
	}
	stepWant(t, p, FetchFailed{Err: errTestFetch, Retryable: true, Now: now}, "Persist(FAILED #14)", "StopFetching")
	if r := p.Record(); r.Retryable || r.RetryCount != 3 || r.Error != "gave up after 3 retries: connection refused" {
		t.Fatalf("after the attempts ran out: %v", r)
	}
	stepWant(t, p, Tick{Now: now.Add(time.Hour)})
	stepWant(t, p, Recover{}, "Persist(MIRRORING #15)", "StartFetching")
	if r := p.Record(); r.RetryCount != 0 || r.Error != "" {
		t.Fatalf("after Recover: %v", r)
	}
}

func TestMirrorStateRetryCountResetsOnSuccess(t *testing.T) {
	p := mirrorAt(Mirroring, DesiredMirroring)
	stepWant(t, p, FetchFailed{Err: errTestFetch, Retryable: true, Now: testNow}, "Persist(FAILED #8)", "StopFetching", "ScheduleRetry(1000100)")
	stepWant(t, p, Tick{Now: testNow.Add(time.Second)}, "Persist(MIRRORING #9)", "StartFetching")
	if r := p.Record(); r.RetryCount != 1 || r.Error == "" {
		t.Fatalf("retrying: %v", r)
	}
	stepWant(t, p, FetchSucceeded{}, "Persist(MIRRORING #10)")
	if r := p.Record(); r.RetryCount != 0 || r.Error != "" {
		t.Fatalf("after success: %v", r)
	}
	stepWant(t, p, FetchSucceeded{}) // nothing to reset, nothing to persist
}

func TestMirrorStateNonRetryable(t *testing.T) {
	p := mirrorAt(LogAlignment, DesiredMirroring)
	stepWant(t, p, AlignmentFailed{Err: errors.New("mirror loop: the source mirrors this topic from us"), Now: testNow},
		"Persist(FAILED #8)", "StopFetching")
	stepWant(t, p, Tick{Now: testNow.Add(24 * time.Hour)})
	stepWant(t, p, DesiredStateChanged{Desired: DesiredStopped}) // FAILED stays FAILED
	stepWant(t, p, Restarted{Desired: DesiredMirroring}, "StopFetching")
	stepWant(t, p, Recover{}, "Persist(LOG_ALIGNMENT #9)", "StartAlignment")
	stepWant(t, p, Recover{}) // not FAILED: stale
}

func TestMirrorStateRetryWalksToDesired(t *testing.T) {
	// Failed while aligning, the user stopped the topic meanwhile: the
	// retry goes to STOPPING.
	p := mirrorAt(LogAlignment, DesiredMirroring)
	stepWant(t, p, AlignmentFailed{Err: errTestFetch, Retryable: true, Now: testNow}, "Persist(FAILED #8)", "StopFetching", "ScheduleRetry(1000100)")
	stepWant(t, p, DesiredStateChanged{Desired: DesiredStopped})
	stepWant(t, p, Tick{Now: testNow.Add(time.Second)}, "Persist(STOPPING:REMOVE_FROM_FETCHER #9)", "StopFetching")
	// Failed while mirroring, the user paused meanwhile: MIRRORING, then
	// PAUSING, in one step.
	p = mirrorAt(Mirroring, DesiredMirroring)
	stepWant(t, p, FetchFailed{Err: errTestFetch, Retryable: true, Now: testNow}, "Persist(FAILED #8)", "StopFetching", "ScheduleRetry(1000100)")
	stepWant(t, p, DesiredStateChanged{Desired: DesiredPaused})
	stepWant(t, p, Recover{}, "Persist(PAUSING #10)", "StopFetching")
}

func TestMirrorStateStopSequence(t *testing.T) {
	p := mirrorAt(Mirroring, DesiredMirroring)
	p.sourceLeaderEpoch = 17 // leader epoch 20
	var last Persist
	steps := []struct {
		event Event
		want  []string
	}{
		{DesiredStateChanged{Desired: DesiredStopped}, []string{"Persist(STOPPING:REMOVE_FROM_FETCHER #8)", "StopFetching"}},
		{StopStepDone{Step: StopRemoveFromFetcher, LastMirrorEpoch: 17, LastMirrorOffset: 500},
			[]string{"Persist(STOPPING:BUMP_LEADER_EPOCH #9)", "BumpLeaderEpoch(21)"}},
		{StopStepDone{Step: StopBumpLeaderEpoch}, []string{"Persist(STOPPING:ABORT_TRANSACTIONS #10)", "WriteAbortMarkers"}},
		{StopStepDone{Step: StopAbortTransactions}, []string{"Persist(STOPPING:RESET_PRODUCERS #11)", "WriteMirrorPIDReset"}},
		{StopStepDone{Step: StopResetProducers}, []string{"Persist(STOPPED #12)"}},
	}
	for i, s := range steps {
		stepWant(t, p, StopStepDone{Step: StopResetProducers + 1}) // stale: not the step in progress
		actions := stepWant(t, p, s.event, s.want...)
		last = actions[0].(Persist)
		// A crash now: the restored machine asks for the same action.
		restored := Restore(last.Record, testRetryPolicy, fixedJitter(0.5))
		stepWant(t, restored, Restarted{Desired: DesiredStopped}, s.want[1:]...)
		if restored.Record() != p.Record() {
			t.Fatalf("step %d: restored %v, want %v", i, restored.Record(), p.Record())
		}
	}
	if r := p.Record(); r.LeaderEpoch != 21 || r.LastMirrorEpoch != 17 || r.LastMirrorOffset != 500 || r.StopStep != StopNone {
		t.Fatalf("stopped: %v", r)
	}
	// Failback: mirror again; alignment first.
	stepWant(t, p, DesiredStateChanged{Desired: DesiredMirroring}, "Persist(LOG_ALIGNMENT #13)", "StartAlignment")
	stepWant(t, p, SourceEpochChanged{Epoch: 30}, "Persist(LOG_ALIGNMENT #14)")
	stepWant(t, p, AlignmentDone{TruncatedTo: 480}, "Persist(EPOCH_FENCING #16)", "StopFetching", "BumpLeaderEpoch(40)")
	stepWant(t, p, LeaderEpochBumped{Epoch: 40}, "Persist(MIRRORING #17)", "StartFetching")
}

func TestMirrorStateStopStepFailureResumes(t *testing.T) {
	p := mirrorAt(Stopping, DesiredStopped)
	stepWant(t, p, StopStepDone{Step: StopRemoveFromFetcher, LastMirrorEpoch: 9, LastMirrorOffset: 70},
		"Persist(STOPPING:BUMP_LEADER_EPOCH #8)", "BumpLeaderEpoch(21)")
	stepWant(t, p, StepFailed{Err: errors.New("disk full"), Retryable: true, Now: testNow},
		"Persist(FAILED:BUMP_LEADER_EPOCH #9)", "StopFetching", "ScheduleRetry(1000100)")
	stepWant(t, p, DesiredStateChanged{Desired: DesiredMirroring}) // FAILED stays FAILED
	stepWant(t, p, Tick{Now: testNow.Add(time.Second)}, "Persist(STOPPING:BUMP_LEADER_EPOCH #10)", "BumpLeaderEpoch(21)")
	stepWant(t, p, StopStepDone{Step: StopBumpLeaderEpoch}, "Persist(STOPPING:ABORT_TRANSACTIONS #11)", "WriteAbortMarkers")
	stepWant(t, p, StopStepDone{Step: StopAbortTransactions}, "Persist(STOPPING:RESET_PRODUCERS #12)", "WriteMirrorPIDReset")
	// The user wants to mirror again: the stop completes first.
	stepWant(t, p, StopStepDone{Step: StopResetProducers}, "Persist(LOG_ALIGNMENT #14)", "StartAlignment")
}

func TestMirrorStateEpochFencing(t *testing.T) {
	p := mirrorAt(Mirroring, DesiredMirroring)
	stepWant(t, p, SourceEpochChanged{Epoch: 9})                           // lower: ignored
	stepWant(t, p, SourceEpochChanged{Epoch: 17}, "Persist(MIRRORING #8)") // gap 3: fine
	stepWant(t, p, SourceEpochChanged{Epoch: 18}, "Persist(EPOCH_FENCING #9)", "StopFetching", "BumpLeaderEpoch(28)")
	stepWant(t, p, SourceEpochChanged{Epoch: 26}, "Persist(EPOCH_FENCING #10)")
	// The bump to 28 is no longer enough: fence again.
	stepWant(t, p, LeaderEpochBumped{Epoch: 28}, "Persist(EPOCH_FENCING #12)", "StopFetching", "BumpLeaderEpoch(36)")
	stepWant(t, p, LeaderEpochBumped{Epoch: 36}, "Persist(MIRRORING #13)", "StartFetching")
}

func TestMirrorStateDivergence(t *testing.T) {
	p := mirrorAt(Mirroring, DesiredMirroring)
	stepWant(t, p, DivergenceDetected{TruncateTo: 42}, "Persist(ULE_RECOVERY #8)", "StopFetching", "Truncate(42)")
	stepWant(t, p, DivergenceDetected{TruncateTo: 40}) // stale: not mirroring
	stepWant(t, p, TruncationDone{}, "Persist(MIRRORING #9)", "StartFetching")
	if r := p.Record(); r.TruncateTo != -1 {
		t.Fatalf("after recovery: %v", r)
	}
}

func TestMirrorStatePause(t *testing.T) {
	p := mirrorAt(LogAlignment, DesiredPaused)
	// Aligning while paused: the walk goes on through MIRRORING.
	stepWant(t, p, AlignmentDone{TruncatedTo: 0}, "Persist(PAUSING #9)", "StopFetching")
	stepWant(t, p, PauseDone{}, "Persist(PAUSED #10)")
	stepWant(t, p, FetchFailed{Err: errTestFetch, Now: testNow}) // stale
	stepWant(t, p, DesiredStateChanged{Desired: DesiredMirroring}, "Persist(MIRRORING #11)", "StartFetching")
	// Resume wanted while pausing: the pause completes first.
	stepWant(t, p, DesiredStateChanged{Desired: DesiredPaused}, "Persist(PAUSING #12)", "StopFetching")
	stepWant(t, p, DesiredStateChanged{Desired: DesiredMirroring}, "StopFetching")
	stepWant(t, p, PauseDone{}, "Persist(MIRRORING #14)", "StartFetching")
}

func TestMirrorStateBadUse(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func()
		want string
	}{
		{"first event", func() { New(0, testRetryPolicy, fixedJitter(0)).Step(Tick{Now: testNow}) }, "first event"},
		{"nil error", func() { mirrorAt(Mirroring, DesiredMirroring).Step(FetchFailed{Now: testNow}) }, "impossible event"},
		{"negative offset", func() { mirrorAt(Mirroring, DesiredMirroring).Step(DivergenceDetected{TruncateTo: -1}) }, "impossible event"},
		{"desired", func() { mirrorAt(Mirroring, DesiredMirroring).Step(DesiredStateChanged{Desired: 7}) }, "impossible event"},
		{"nil event", func() { mirrorAt(Mirroring, DesiredMirroring).Step(nil) }, "impossible event"},
		{"policy", func() { New(0, RetryPolicy{}, fixedJitter(0)) }, "New"},
		{"restore", func() { Restore(Record{}, testRetryPolicy, fixedJitter(0)) }, "Restore"},
		{"restarted after restore", func() {
			Restore(mirrorAt(Paused, DesiredPaused).Record(), testRetryPolicy, fixedJitter(0)).Step(DesiredStateChanged{})
		}, "want Restarted"},
	} {
		if got := panicText(c.f); !strings.Contains(got, c.want) {
			t.Errorf("%s: panic %q, want %q", c.name, got, c.want)
		}
	}
}

func TestMirrorStateErrorTextBounded(t *testing.T) {
	p := mirrorAt(Mirroring, DesiredMirroring)
	p.Step(FetchFailed{Err: errors.New(strings.Repeat("é", ErrorTextMax)), Now: testNow})
	if r := p.Record(); len(r.Error) != ErrorTextMax || !strings.HasSuffix(r.Error, "é") {
		t.Fatalf("error text of %d bytes", len(r.Error))
	}
}
