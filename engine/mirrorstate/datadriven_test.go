package mirrorstate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	rb "github.com/mirrord/mirrord/recordbatch"
)

// TestMirrorStateData runs the stories of testdata/*.txt, one file per
// row group of DESIGN.md's state table (reconcile.txt: its reconcile
// rule). Each command steps one machine and prints the actions Step
// returned, one a line, then the machine's state:
//
//	STATE #state-epoch from PREVIOUS, desired D, leader epoch L[, source epoch S]
//	    [, stop step X][, truncate to O][, N retries][, retry at +T]
//	    [, error "..."][, LME E@O]
//
// ("ignored" instead of the actions when the event was stale). Times are
// relative to the start of the story's virtual clock.
//
// Commands:
//
//	new [state=S desired=D] [leader-epoch=N] [max-attempts=N]
//	    a fresh machine (UNKNOWN); with state, the fixture mirrorAt
//	    (machine_test.go): state epoch 7, leader epoch 20, source epoch 10,
//	    STOPPING at its first step, ULE_RECOVERY truncating to 42, FAILED
//	    from MIRRORING with a retry at +100ms
//	desire state=D              DesiredStateChanged
//	restart desired=D           a crash: a machine restored from the last
//	                            Persist (Restore; a new one before the
//	                            first) is told Restarted
//	event NAME [ARGS]           the other events (see event below)
//	tick [after=DURATION]       the clock moves on, then Tick
//
// Every failure event takes the clock's now; err=(text) sets its error.
// Rewrite the expected output with go test -run TestMirrorStateData -rewrite,
// then read every changed line against DESIGN.md before committing it.
func TestMirrorStateData(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var s story
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return s.run(t, d)
		})
	})
}

// story is the machine of one testdata file and its virtual clock.
type story struct {
	p      *Machine
	policy RetryPolicy
	now    time.Time
	// last is the latest Persist's record (nil before the first): what a
	// restart restores.
	last *Record
}

func (s *story) run(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd != "new" && s.p == nil {
		d.Fatalf(t, "%s before new", d.Cmd)
	}
	var event Event
	switch d.Cmd {
	case "new":
		s.create(t, d)
		return s.describe()
	case "desire":
		event = DesiredStateChanged{Desired: desiredArg(t, d, "state")}
	case "restart":
		desired := desiredArg(t, d, "desired")
		if s.last == nil { // nothing persisted: the owner makes a new machine
			s.p, event = New(s.p.leaderEpoch, s.policy, fixedJitter(0.5)), Restarted{Desired: desired}
			break
		}
		restored := Restore(*s.last, s.policy, fixedJitter(0.5))
		if restored.Record() != s.p.Record() {
			d.Fatalf(t, "restored %v, the machine that crashed was %v", restored.Record(), s.p.Record())
		}
		s.p, event = restored, Restarted{Desired: desired}
	case "tick":
		if d.HasArg("after") {
			var after string
			d.ScanArgs(t, "after", &after)
			dur, err := time.ParseDuration(after)
			if err != nil {
				d.Fatalf(t, "after=%s: %v", after, err)
			}
			s.now = s.now.Add(dur)
		}
		event = Tick{Now: s.now}
	case "event":
		event = s.event(t, d)
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	return s.step(t, d, event)
}

// create is the new command.
func (s *story) create(t *testing.T, d *datadriven.TestData) {
	s.policy, s.now, s.last = testRetryPolicy, testNow, nil
	d.MaybeScanArgs(t, "max-attempts", &s.policy.MaxAttempts)
	if d.HasArg("state") {
		var state string
		d.ScanArgs(t, "state", &state)
		s.p = mirrorAt(stateNamed(t, d, state), desiredArg(t, d, "desired"))
		s.p.policy = s.policy
		if record := s.p.Record(); record.State != Unknown {
			s.last = &record
		}
		return
	}
	leaderEpoch := 0
	d.MaybeScanArgs(t, "leader-epoch", &leaderEpoch)
	s.p = New(rb.Epoch(leaderEpoch), s.policy, fixedJitter(0.5))
}

// event is the event command: its first argument names the event.
func (s *story) event(t *testing.T, d *datadriven.TestData) Event {
	if len(d.CmdArgs) == 0 {
		d.Fatalf(t, "event without a name")
	}
	num := func(key string) int64 {
		var n int64
		d.ScanArgs(t, key, &n)
		return n
	}
	failure := func() (error, bool, time.Time) {
		err := errTestFetch
		if arg, ok := d.Arg("err"); ok {
			err = errors.New(strings.Join(arg.Vals, ", "))
		}
		return err, d.HasArg("retryable"), s.now
	}
	switch name := d.CmdArgs[0].Key; name {
	case "alignment-done":
		return AlignmentDone{TruncatedTo: rb.Offset(num("truncated-to"))}
	case "alignment-failed":
		err, retryable, now := failure()
		return AlignmentFailed{Err: err, Retryable: retryable, Now: now}
	case "fetch-succeeded":
		return FetchSucceeded{}
	case "fetch-failed":
		err, retryable, now := failure()
		return FetchFailed{Err: err, Retryable: retryable, Now: now}
	case "step-failed":
		err, retryable, now := failure()
		return StepFailed{Err: err, Retryable: retryable, Now: now}
	case "source-epoch":
		return SourceEpochChanged{Epoch: rb.Epoch(num("epoch"))}
	case "leader-epoch-bumped":
		return LeaderEpochBumped{Epoch: rb.Epoch(num("epoch"))}
	case "divergence":
		return DivergenceDetected{TruncateTo: rb.Offset(num("truncate-to"))}
	case "truncation-done":
		return TruncationDone{}
	case "pause-done":
		return PauseDone{}
	case "stop-step-done":
		var step string
		d.ScanArgs(t, "step", &step)
		e := StopStepDone{Step: stopStepNamed(t, d, step), LastMirrorEpoch: rb.NoEpoch}
		if d.HasArg("lme-epoch") {
			e.LastMirrorEpoch, e.LastMirrorOffset = rb.Epoch(num("lme-epoch")), rb.Offset(num("lme-offset"))
		}
		return e
	case "log-offline":
		err, _, now := failure()
		return LogOffline{Err: err, Now: now}
	case "recover":
		return Recover{}
	default:
		d.Fatalf(t, "unknown event %s", name)
		return nil
	}
}

// step applies event and prints the actions and the state.
func (s *story) step(t *testing.T, d *datadriven.TestData, event Event) string {
	stale := s.p.desiredKnown && !s.p.accepts(event)
	var actions []Action
	if text := panicText(func() { actions = s.p.Step(event) }); text != "" {
		d.Fatalf(t, "%v panicked: %s", event, text)
	}
	var b strings.Builder
	switch {
	case stale:
		b.WriteString("ignored\n")
	case len(actions) == 0:
		b.WriteString("no actions\n")
	}
	for _, a := range actions {
		switch a := a.(type) {
		case Persist:
			record := a.Record
			s.last = &record
		case ScheduleRetry:
			fmt.Fprintf(&b, "ScheduleRetry(at +%v)\n", a.At.Sub(testNow))
			continue
		}
		b.WriteString(a.String() + "\n")
	}
	return b.String() + s.describe()
}

// describe is the state line of the output.
func (s *story) describe() string {
	r := s.p.Record()
	var b strings.Builder
	fmt.Fprintf(&b, "%v #%d from %v, desired %v, leader epoch %d", r.State, r.StateEpoch, r.Previous, s.p.desired, r.LeaderEpoch)
	if !s.p.desiredKnown {
		b.Reset()
		fmt.Fprintf(&b, "%v #%d, leader epoch %d", r.State, r.StateEpoch, r.LeaderEpoch)
	}
	if r.SourceLeaderEpoch != rb.NoEpoch {
		fmt.Fprintf(&b, ", source epoch %d", r.SourceLeaderEpoch)
	}
	if r.StopStep != StopNone {
		fmt.Fprintf(&b, ", stop step %v", r.StopStep)
	}
	if r.TruncateTo >= 0 {
		fmt.Fprintf(&b, ", truncate to %d", r.TruncateTo)
	}
	if r.RetryCount != 0 {
		fmt.Fprintf(&b, ", %d retries", r.RetryCount)
	}
	if r.Retryable {
		fmt.Fprintf(&b, ", retry at +%v", time.UnixMilli(r.NextRetryAtMillis).Sub(testNow))
	}
	if r.Error != "" {
		fmt.Fprintf(&b, ", error %q", r.Error)
	}
	if r.LastMirrorOffset >= 0 {
		fmt.Fprintf(&b, ", LME %d@%d", r.LastMirrorEpoch, r.LastMirrorOffset)
	}
	return b.String() + "\n"
}

func stateNamed(t *testing.T, d *datadriven.TestData, name string) State {
	for s := range NumStates {
		if s.String() == name {
			return s
		}
	}
	d.Fatalf(t, "no state %s", name)
	return 0
}

func desiredArg(t *testing.T, d *datadriven.TestData, key string) DesiredState {
	var name string
	d.ScanArgs(t, key, &name)
	for desired := range desiredStateCount {
		if desired.String() == name {
			return desired
		}
	}
	d.Fatalf(t, "no desired state %s", name)
	return 0
}

func stopStepNamed(t *testing.T, d *datadriven.TestData, name string) StopStep {
	for step := range stopStepCount {
		if step.String() == name {
			return step
		}
	}
	d.Fatalf(t, "no stop step %s", name)
	return 0
}
