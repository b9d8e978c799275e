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
