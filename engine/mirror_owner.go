package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mirrord/mirrord/engine/mirrorstate"
)

// The owner of a mirror's partition state machines (engine/mirrorstate):
// the mirror's controller goroutine (mirror.run). Everything that happens
// to a mirrored partition reaches its Machine as an event, from the
// owner's own work (metadata, alignment, local steps), from the fetchers
// (through the inbox) or from an admin request (through requests); the
// owner alone steps the machines and performs the actions they return.
//
// It works in rounds (step): every pending event is stepped, the Persist
// actions of the round are written to __mirror_state in one group commit
// (a stop of many partitions pays one sync per step, not one each), and
// only then are the other actions performed. Actions that finish at once
// (the stop steps, a fence, a truncation, an alignment) produce the events
// of the next round. A failed Persist halts the mirror (halt): none of the
// round's actions runs, the fetchers stop, every partition shows the
// error, and the owner rebuilds the machines from the durable records
// after a backoff (reload), as a restart would.

// partitionEvent is an event for one partition's machine.
type partitionEvent struct {
	mp    *mirrorPartition
	event mirrorstate.Event
}

// inbox queues events for the owner from other goroutines (fetchers, the
// prober). post never blocks: a fetcher may post while the owner waits
// for that fetcher to let go of a partition. Bounded in practice: a
// fetcher posts at most one failure or divergence per partition per
// StartFetching, a success only after a failure, and a source epoch only
// when it rises.
type inbox struct {
	mu     sync.Mutex
	events []partitionEvent
	wake   chan struct{} // capacity 1: events are queued
}

func newInbox() *inbox { return &inbox{wake: make(chan struct{}, 1)} }

func (q *inbox) post(mp *mirrorPartition, event mirrorstate.Event) {
	q.mu.Lock()
	q.events = append(q.events, partitionEvent{mp, event})
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *inbox) take() []partitionEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	events := q.events
	q.events = nil
	return events
}

// ownerRequest is work an admin call hands the owner: run runs on the
// owner's goroutine, between rounds; done closes after it.
type ownerRequest struct {
	run  func(ctx context.Context)
	done chan struct{}
}

// do runs f on the owner's goroutine and waits for it, or for the mirror
// to end (errMirrorClosed) or ctx.
func (m *mirror) do(ctx context.Context, f func(ctx context.Context)) error {
	req := ownerRequest{run: f, done: make(chan struct{})}
	select {
	case m.requests <- req:
	case <-m.done:
		return errMirrorClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-req.done:
		return nil
	case <-m.done:
		return errMirrorClosed
	}
}

var errMirrorClosed = errors.New("engine: the mirror was deleted or the node closed")

// ownerRoundsMax bounds the rounds of one step: a partition walks at most
// the stop's five persisted steps, or alignment and a fence, in a row
// without waiting for a fetch. Past it (a bug: a machine that never
// rests) the events left go back to the inbox, loudly, rather than hold
// the owner.
const ownerRoundsMax = 16

// step steps events through the machines and performs their actions,
// round after round, until no action produces another event.
func (m *mirror) step(ctx context.Context, events []partitionEvent) {
	for round := 0; len(events) > 0 && m.halted == nil; round++ {
		if round == ownerRoundsMax {
			m.log.Error("mirror partition machines did not come to rest; their events are queued again", "rounds", round,
				"events", len(events), "first", events[0].event, "topic", events[0].mp.topic, "partition", events[0].mp.partition)
			for _, e := range events {
				m.inbox.post(e.mp, e.event)
			}
			return
		}
		// Several events of one partition in a round: its latest record
		// supersedes the earlier ones (a higher state epoch, written
		// before any of its actions runs), and its actions run in order.
		var order []*mirrorPartition
		records := map[*mirrorPartition]mirrorstate.Record{}
		actions := map[*mirrorPartition][]mirrorstate.Action{}
		for _, e := range events {
			if e.mp.dropped.Load() {
				continue
			}
			stepped := e.mp.machine.Step(e.event)
			if len(stepped) == 0 {
				continue
			}
			if _, seen := actions[e.mp]; !seen {
				order = append(order, e.mp)
			}
			if p, ok := stepped[0].(mirrorstate.Persist); ok {
				records[e.mp] = p.Record
				stepped = stepped[1:]
			}
			actions[e.mp] = append(actions[e.mp], stepped...)
		}
		persists := make([]stateEntry, 0, len(records))
		work := make([]partitionWork, 0, len(order))
		for _, mp := range order {
			if record, ok := records[mp]; ok {
				persists = append(persists, stateEntry{mp.stateKey(), record})
			}
			work = append(work, partitionWork{mp, actions[mp]})
		}
		if len(persists) > 0 {
			if err := m.node.states.putAll(persists); err != nil {
				m.halt(fmt.Errorf("cannot persist %d partition states to %s: %w", len(persists), mirrorStateTopic, err))
				return
			}
		}
		for _, w := range work {
			m.publish(w.mp)
		}
		events = m.perform(ctx, work)
	}
}

// partitionWork is the actions of one partition in a round.
type partitionWork struct {
	mp      *mirrorPartition
	actions []mirrorstate.Action
}

// localStepParallelism bounds the partitions whose actions (markers,
// truncations: a flush each) run at once. Their time is the syncs': many
// at once let the file system commit them together (10,000 fsyncs of
// small files on ext4: 1.4-3.5 s 8 at a time, 0.45-0.6 s 64 or 256 at a
// time, measured on a 2-core VM), so a stop of 10,000 partitions is not
// 10,000 sync latencies over 8.
const localStepParallelism = 64

// performed is what performing one partition's actions produced.
type performed struct {
	events          []partitionEvent
	fetchSetChanged bool
	nextRetry       time.Time // zero: none asked
	align           bool      // StartAlignment: the round's lookup includes it
}

// perform performs a round's actions and returns the events their
// completions produce. Each partition's actions run in order, on one
// goroutine; partitions run in parallel, localStepParallelism at a time.
// Fetch set changes apply at once (StopFetching returns when the fetcher
// has let go); alignment asks the source for all the round's partitions
// in one request, after the rest.
func (m *mirror) perform(ctx context.Context, work []partitionWork) []partitionEvent {
	results := make([]performed, len(work))
	indexes := make([]int, len(work))
	for i := range indexes {
		indexes[i] = i
	}
	runBounded(indexes, localStepParallelism, func(i int) { results[i] = m.performPartition(ctx, work[i].mp, work[i].actions) })
	var out []partitionEvent
	var aligning []*mirrorPartition
	for i, r := range results {
		out = append(out, r.events...)
		m.fetchSetChanged = m.fetchSetChanged || r.fetchSetChanged
		if !r.nextRetry.IsZero() && (m.nextRetry.IsZero() || r.nextRetry.Before(m.nextRetry)) {
			m.nextRetry = r.nextRetry
		}
		if r.align {
			aligning = append(aligning, work[i].mp)
		}
	}
	if len(aligning) > 0 {
		out = append(out, m.align(ctx, aligning)...)
	}
	return out
}

// performPartition performs one partition's actions in order.
func (m *mirror) performPartition(ctx context.Context, mp *mirrorPartition, actions []mirrorstate.Action) performed {
	var r performed
	emit := func(event mirrorstate.Event) { r.events = append(r.events, partitionEvent{mp, event}) }
	if offline := offlineActions(mp, actions); offline != nil { // offline.go
		emit(offline)
		return r
	}
	for _, action := range actions {
		switch a := action.(type) {
		case mirrorstate.StartFetching:
			mp.startFetching()
			r.fetchSetChanged = true
		case mirrorstate.StopFetching:
			if mp.stopFetching() {
				r.fetchSetChanged = true
			}
			switch mp.machine.State() {
			case mirrorstate.Pausing:
				emit(mirrorstate.PauseDone{})
			case mirrorstate.Stopping:
				// The last mirror offset must be durable before a record
				// names it: a power loss would otherwise leave a record
				// past what survived on disk (and, on a cluster, a new
				// leader without it).
				if err := errors.Join(mp.local.Flush(), m.awaitReplicated(ctx, mp)); err != nil {
					emit(mirrorstate.StepFailed{Err: err, Retryable: true, Now: time.Now()})
					break
				}
				emit(mirrorstate.StopStepDone{Step: mirrorstate.StopRemoveFromFetcher,
					LastMirrorEpoch: mp.local.LatestEpoch(), LastMirrorOffset: mp.local.LogEndOffset()})
			}
		case mirrorstate.StartAlignment:
			r.align = true
		case mirrorstate.BumpLeaderEpoch:
			mp.local.RaiseLeaderEpoch(a.To)
			m.node.kickLeaderEpochs() // a cluster's leader writes it to etcd (cluster_mirrors.go)
			if mp.machine.State() == mirrorstate.Stopping {
				emit(mirrorstate.StopStepDone{Step: mirrorstate.StopBumpLeaderEpoch})
			} else {
				emit(mirrorstate.LeaderEpochBumped{Epoch: a.To})
			}
		case mirrorstate.Truncate, mirrorstate.WriteAbortMarkers, mirrorstate.WriteMirrorPIDReset:
			emit(m.performLocal(ctx, mp, action))
		case mirrorstate.ScheduleRetry:
			if r.nextRetry.IsZero() || a.At.Before(r.nextRetry) {
				r.nextRetry = a.At
			}
		default:
			panic(fmt.Sprintf("engine: mirror %s: unknown action %v", m.name, action))
		}
	}
	return r
}

// performLocal performs one action that writes the partition's log and
// returns its completion or failure.
func (m *mirror) performLocal(ctx context.Context, mp *mirrorPartition, action mirrorstate.Action) mirrorstate.Event {
	var err error
	var done mirrorstate.Event
	switch a := action.(type) {
	case mirrorstate.Truncate:
		err, done = m.recoverUnclean(mp, a.Offset), mirrorstate.TruncationDone{}
	case mirrorstate.WriteAbortMarkers:
		err, done = mp.local.AbortOpenTransactions(m.name), mirrorstate.StopStepDone{Step: mirrorstate.StopAbortTransactions}
	case mirrorstate.WriteMirrorPIDReset:
		err, done = mp.local.WriteMirrorPIDReset(), mirrorstate.StopStepDone{Step: mirrorstate.StopResetProducers}
	}
	if _, stopStep := done.(mirrorstate.StopStepDone); stopStep && err == nil {
		err = m.awaitReplicated(ctx, mp) // the next step's record says this one is done
	}
	if err != nil {
		return mirrorstate.StepFailed{Err: err, Retryable: true, Now: time.Now()}
	}
	return done
}

// publish makes what the machine says visible to the rest of the node,
// after its Persist is durable: the view describe and the metrics read,
// the partition's read-only mark (lifted only once STOPPED is durable),
// and the log line of a state change.
func (m *mirror) publish(mp *mirrorPartition) {
	record := mp.machine.Record()
	mp.mu.Lock()
	previous := mp.view.State
	mp.view = record
	mp.mu.Unlock()
	if record.State == mirrorstate.Stopped {
		mp.local.SetReadOnly(nil)
	} else {
		mp.local.SetReadOnly(mp.refuse)
	}
	if record.State == previous {
		return
	}
	switch record.State {
	case mirrorstate.Failed:
		m.log.Warn("mirror partition failed", "topic", mp.topic, "partition", mp.partition, "from", record.Previous.String(),
			"retryable", record.Retryable, "retry_count", record.RetryCount, "error", record.Error)
	case mirrorstate.Stopped:
		m.log.Info("stopped mirroring: the partition is writable", "topic", mp.topic, "partition", mp.partition,
			"last_mirror_epoch", record.LastMirrorEpoch, "last_mirror_offset", record.LastMirrorOffset, "leader_epoch", record.LeaderEpoch)
	default:
		m.log.Debug("mirror partition state", "topic", mp.topic, "partition", mp.partition, "state", record.State.String(), "from", previous.String())
	}
}

// halt stops the mirror after a Persist failed: nothing the machines
// asked for after it may run, since their state is not durable. The
// fetchers stop, every partition shows err, and reload runs after a
// backoff.
func (m *mirror) halt(err error) {
	m.halted = err
	m.haltCount = min(m.haltCount+1, reconnectAttemptsMax)
	m.log.Error("mirror halted: its partition states cannot be persisted; retrying", "error", err,
		"backoff", reconnectBackoff.Backoff(m.haltCount, processJitter{}))
	m.mu.Lock()
	partitions := make([]*mirrorPartition, 0, len(m.partitions))
	for _, mp := range m.partitions {
		partitions = append(partitions, mp)
	}
	m.mu.Unlock()
	for _, mp := range partitions {
		if mp.stopFetching() {
			m.fetchSetChanged = true
		}
		mp.mu.Lock()
		mp.halted = err.Error()
		mp.mu.Unlock()
	}
	m.nextRetry = time.Now().Add(reconnectBackoff.Backoff(m.haltCount, processJitter{}))
}

// reload rebuilds every machine from its durable record, as a restart
// does, once a halt's backoff is over.
func (m *mirror) reload(ctx context.Context) {
	m.log.Info("mirror resuming from its persisted partition states", "after", m.halted)
	m.halted = nil
	m.mu.Lock()
	partitions := make([]*mirrorPartition, 0, len(m.partitions))
	for _, mp := range m.partitions {
		partitions = append(partitions, mp)
	}
	m.mu.Unlock()
	// firstEvent reads the selection under m.mu: not held here.
	events := make([]partitionEvent, 0, len(partitions))
	for _, mp := range partitions {
		m.newMachine(mp)
		mp.mu.Lock()
		mp.halted = ""
		mp.mu.Unlock()
		events = append(events, partitionEvent{mp, m.firstEvent(mp)})
	}
	m.step(ctx, events)
	if m.halted == nil {
		m.haltCount = 0
	}
}

// newMachine gives mp a machine: restored from its record in
// __mirror_state, or new at the local leader epoch. A restored record's
// leader epoch is claimed again at once (a stop resumed after a crash
// writes its markers at it).
func (m *mirror) newMachine(mp *mirrorPartition) {
	record, ok := m.node.states.get(mp.stateKey())
	if m.node.member != nil && mp.local.LogEndOffset() > 0 && !ok {
		record, ok = continuingRecord(mp), true // cluster_mirrors.go
	}
	if !ok {
		mp.machine = mirrorstate.New(max(mp.local.LeaderEpoch(), 0), m.config.Retry, processJitter{})
		return
	}
	mp.local.RaiseLeaderEpoch(record.LeaderEpoch)
	m.node.kickLeaderEpochs() // a cluster's new leader may hold a record of a higher epoch than etcd's
	mp.machine = mirrorstate.Restore(record, m.config.Retry, processJitter{})
	mp.restored = true
	mp.mu.Lock()
	mp.view = record
	mp.mu.Unlock()
}

// firstEvent is the first event of mp's new machine: Restarted for a
// restored one, DesiredStateChanged for a new one.
func (m *mirror) firstEvent(mp *mirrorPartition) mirrorstate.Event {
	desired := m.desiredState(mp.topic)
	if mp.restored {
		mp.restored = false
		return mirrorstate.Restarted{Desired: desired}
	}
	return mirrorstate.DesiredStateChanged{Desired: desired}
}

// desiredState is the topic's desired state, from the mirror's selection.
func (m *mirror) desiredState(topic string) mirrorstate.DesiredState {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.stopped[topic]:
		return mirrorstate.DesiredStopped
	case m.paused[topic]:
		return mirrorstate.DesiredPaused
	}
	return mirrorstate.DesiredMirroring
}

// tick tells the machines whose retry may be due the time, and sets the
// next retry.
func (m *mirror) tick(ctx context.Context, now time.Time) {
	m.nextRetry = time.Time{}
	var events []partitionEvent
	m.mu.Lock()
	for _, mp := range m.partitions {
		if r := mp.machine.Record(); r.Retryable {
			events = append(events, partitionEvent{mp, mirrorstate.Tick{Now: now}})
			if at := time.UnixMilli(r.NextRetryAtMillis); now.Before(at) && (m.nextRetry.IsZero() || at.Before(m.nextRetry)) {
				m.nextRetry = at
			}
		}
	}
	m.mu.Unlock()
	m.step(ctx, events)
}
