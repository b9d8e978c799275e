package mirrorstate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
)

// A seeded random walk over the mirror state machine: random events, most
// of them ones the current state accepts, some stale; now and then a
// crash, after which a machine restored from the last Persist must behave
// as the one that crashed. Invariants are checked after every step.

func TestMirrorStateRandomWalk(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, uint64(time.Now().UnixNano())}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Logf("seed %d", seed)
			w := newMirrorWalk(t, seed)
			w.run(3000)
		})
	}
}

type mirrorWalk struct {
	t      *testing.T
	seed   uint64
	rand   *rand.Rand
	policy RetryPolicy
	now    time.Time
	p      *Machine
	// last is the latest Persist's record, or nil before the first.
	last *Record
	// bumpTo is the latest BumpLeaderEpoch asked for.
	bumpTo rb.Epoch
	// history is the latest events, for the failure message; at most
	// mirrorWalkHistory.
	history []string
	steps   int
	// visited counts the steps that ended in each state.
	visited [NumStates]int
}

const mirrorWalkHistory = 12

func newMirrorWalk(t *testing.T, seed uint64) *mirrorWalk {
	r := rand.New(rand.NewPCG(seed, 0))
	policy := RetryPolicy{InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, MaxAttempts: int32(r.IntN(6))}
	w := &mirrorWalk{t: t, seed: seed, rand: r, policy: policy, now: testNow}
	w.p = New(rb.Epoch(r.IntN(5)), policy, rand.New(rand.NewPCG(seed, 1)))
	return w
}

func (w *mirrorWalk) run(steps int) {
	w.step(Restarted{Desired: DesiredState(w.rand.IntN(int(desiredStateCount)))})
	for range steps {
		if w.last != nil && w.rand.IntN(40) == 0 {
			w.crash()
			continue
		}
		w.step(w.randomEvent())
	}
	for state, n := range w.visited {
		if n == 0 && State(state) != Unknown {
			w.fatalf("the walk never reached %v: %v", State(state), w.visited)
		}
	}
}

func (w *mirrorWalk) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("seed %d step %d: %s\nlatest events:\n  %s\nrecord: %v", w.seed, w.steps, fmt.Sprintf(format, args...),
		strings.Join(w.history, "\n  "), w.p.Record())
}

// stepOn steps p, turning a panic into a test failure.
func (w *mirrorWalk) stepOn(p *Machine, event Event) (actions []Action) {
	w.t.Helper()
	defer func() {
		if r := recover(); r != nil {
			w.fatalf("%v panicked: %v", event, r)
		}
	}()
	return p.Step(event)
}

// step applies event to the walk's machine and checks the invariants.
func (w *mirrorWalk) step(event Event) []Action {
	w.t.Helper()
	w.steps++
	w.history = append(w.history, event.String())
	if len(w.history) > mirrorWalkHistory {
		w.history = w.history[1:]
	}
	before := w.p.Record()
	accepted := !w.p.desiredKnown || w.p.accepts(event)
	actions := w.stepOn(w.p, event)
	w.check(event, before, accepted, actions)
	w.visited[w.p.state]++
	return actions
}

func (w *mirrorWalk) check(event Event, before Record, accepted bool, actions []Action) {
	w.t.Helper()
	p, after := w.p, w.p.Record()
	if !accepted && (len(actions) != 0 || after != before) {
		w.fatalf("stale %v changed the machine: %v", event, actions)
	}
	if after.StateEpoch < before.StateEpoch || after.State != before.State && after.StateEpoch <= before.StateEpoch {
		w.fatalf("state epoch %d -> %d with %v -> %v", before.StateEpoch, after.StateEpoch, before.State, after.State)
	}
	persisted := len(actions) > 0 && reflect.TypeOf(actions[0]) == reflect.TypeFor[Persist]()
	if persisted != (after.StateEpoch != before.StateEpoch) {
		w.fatalf("persisted %t, state epoch %d -> %d", persisted, before.StateEpoch, after.StateEpoch)
	}
	if persisted {
		w.checkPersist(actions[0].(Persist))
	}
	if after.State != Unknown && (w.last == nil || *w.last != after) {
		w.fatalf("the machine is not what was persisted last: %v", w.last)
	}
	if accepted && mirrorSuccessEvent(event) && (after.RetryCount != 0 || after.Error != "") {
		w.fatalf("success %v left retry count %d, error %q", event, after.RetryCount, after.Error)
	}
	if after.RetryCount > w.policy.MaxAttempts {
		w.fatalf("retry count %d above %d", after.RetryCount, w.policy.MaxAttempts)
	}
	if after.State == Stopped && before.State != Stopped &&
		(p.leaderEpoch <= p.sourceLeaderEpoch || p.leaderEpoch <= p.lastMirrorEpoch || p.lastMirrorOffset < 0) {
		w.fatalf("stopped without bumping the leader epoch above the source and the last mirror epoch")
	}
	for _, a := range actions[min(1, len(actions)):] {
		w.checkAction(a)
	}
}

func (w *mirrorWalk) checkPersist(a Persist) {
	w.t.Helper()
	if a.Record != w.p.Record() {
		w.fatalf("persisted %v, the machine is %v", a.Record, w.p.Record())
	}
	if err := a.Record.Validate(); err != nil {
		w.fatalf("persisted a record the __mirror_state codec refuses: %v", err)
	}
	record := a.Record
	w.last = &record
}

// checkAction checks that an action fits the state the step ended in.
func (w *mirrorWalk) checkAction(a Action) {
	w.t.Helper()
	p := w.p
	ok := true
	switch a := a.(type) {
	case Persist:
		ok = false // only first
	case StartAlignment:
		ok = p.state == LogAlignment
	case StartFetching:
		ok = p.state == Mirroring
	case Truncate:
		ok = p.state == ULERecovery && a.Offset == p.truncateTo
	case BumpLeaderEpoch:
		ok = p.state == EpochFencing && a.To == p.sourceLeaderEpoch+epochLead ||
			p.stopStep == StopBumpLeaderEpoch && a.To > p.leaderEpoch
		w.bumpTo = a.To
	case WriteAbortMarkers:
		ok = p.stopStep == StopAbortTransactions
	case WriteMirrorPIDReset:
		ok = p.stopStep == StopResetProducers
	case ScheduleRetry:
		ok = p.state == Failed && p.retryable && a.At.Equal(p.nextRetryAt)
	}
	if !ok {
		w.fatalf("action %v in %v", a, p.Record())
	}
}

func mirrorSuccessEvent(event Event) bool {
	switch event.(type) {
	case AlignmentDone, FetchSucceeded, LeaderEpochBumped, TruncationDone, PauseDone, StopStepDone:
		return true
	}
	return false
}

// crash restores a twin from the last Persist and checks that both,
// told Restarted, then fed the same events, act alike. The walk goes on
// with the twin.
func (w *mirrorWalk) crash() {
	w.t.Helper()
	seed := w.rand.Uint64()
	w.p.jitter = rand.New(rand.NewPCG(seed, 2))
	twin := Restore(*w.last, w.policy, rand.New(rand.NewPCG(seed, 2)))
	w.history = append(w.history, "-- crash --")
	event := Event(Restarted{Desired: w.p.desired})
	for range 20 {
		twinActions := w.stepOn(twin, event)
		actions := w.step(event)
		if !reflect.DeepEqual(actions, twinActions) || twin.Record() != w.p.Record() {
			w.fatalf("after a crash, %v: restored %v -> %v, original %v -> %v",
				event, twinActions, twin.Record(), actions, w.p.Record())
		}
		event = w.randomEvent()
	}
	w.p = twin
}

// randomEvent draws an event, preferring one the current state accepts.
func (w *mirrorWalk) randomEvent() Event {
	var event Event
	for range 4 {
		event = w.anyEvent()
		if w.p.accepts(event) {
			return event
		}
	}
	return event
}

var errWalk = errors.New("walk failure")

func (w *mirrorWalk) anyEvent() Event {
	r, p := w.rand, w.p
	w.now = w.now.Add(time.Duration(r.IntN(50)) * time.Millisecond)
	switch r.IntN(16) {
	case 0:
		return DesiredStateChanged{Desired: DesiredState(r.IntN(int(desiredStateCount)))}
	case 1:
		return AlignmentDone{TruncatedTo: rb.Offset(r.IntN(1000))}
	case 2:
		return AlignmentFailed{Err: errWalk, Retryable: r.IntN(5) > 0, Now: w.now}
	case 3:
		return FetchSucceeded{}
	case 4:
		return FetchFailed{Err: errWalk, Retryable: r.IntN(5) > 0, Now: w.now}
	case 5:
		return SourceEpochChanged{Epoch: max(0, p.sourceLeaderEpoch+rb.Epoch(r.IntN(8)-2))}
	case 6:
		if r.IntN(4) == 0 {
			return LeaderEpochBumped{Epoch: rb.Epoch(r.IntN(60))}
		}
		return LeaderEpochBumped{Epoch: w.bumpTo}
	case 7:
		return DivergenceDetected{TruncateTo: rb.Offset(r.IntN(1000))}
	case 8:
		return TruncationDone{}
	case 9:
		return PauseDone{}
	case 10, 11:
		step := p.stopStep
		if r.IntN(4) == 0 {
			step = StopStep(r.IntN(int(stopStepCount)))
		}
		return StopStepDone{Step: step, LastMirrorEpoch: rb.Epoch(r.IntN(40) - 1), LastMirrorOffset: rb.Offset(r.IntN(1000))}
	case 12:
		return StepFailed{Err: errWalk, Retryable: r.IntN(5) > 0, Now: w.now}
	case 13:
		if p.retryable && r.IntN(2) == 0 {
			w.now = slices.MaxFunc([]time.Time{w.now, p.nextRetryAt}, time.Time.Compare)
		}
		return Tick{Now: w.now}
	case 14:
		return Recover{}
	}
	return Restarted{Desired: DesiredState(r.IntN(int(desiredStateCount)))}
}
