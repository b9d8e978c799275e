package engine

import (
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
)

// Failover: StopMirrorTopics makes mirror topics writable with the offsets
// they have (DESIGN.md, "Failover and failback"). Per partition, in this
// order, each step persisted in __mirror_state before its action runs, so
// that a crash resumes at the step it was in (every action is
// idempotent):
//
//	REMOVE_FROM_FETCHER  the mirror's fetchers are stopped and restarted
//	                     without the topic, then the last mirror epoch is
//	                     read: (latest local epoch, log end offset)
//	BUMP_LEADER_EPOCH    the new leader epoch is chosen above the local,
//	                     source and last mirror epochs
//	ABORT_TRANSACTIONS   ABORT markers, at the new epoch, for transactions
//	                     the source's producers left open
//	RESET_PRODUCERS      a MIRROR_PID_RESET control batch (one offset, at
//	                     the new epoch) drops the producer state copied
//	                     from the source, now and whenever the log is
//	                     loaded again
//	STOPPED              the record keeps the last mirror epoch for
//	                     failback lookups; the partition accepts Produce
//
// The topic's desired state (stopped) is in mirror-<name>.json first, so a
// restart never fetches the topic again and resumes the stop instead
// (loadMirrors).

// stopTopics stops the given topics of the mirror: the desired state is
// saved, the fetchers let go of the topics, and each partition walks the
// stop steps. It answers per topic (n.mirrorsMu held).
func (m *mirror) stopTopics(topics []string) []netio.TopicResult {
	m.aligning.Lock() // no alignment runs on a partition being stopped
	defer m.aligning.Unlock()
	m.mu.Lock()
	var stopping []*mirrorPartition
	undo := m.selectionSnapshot()
	for _, t := range topics {
		m.stopped[t] = true // a stop supersedes a pause; a later start begins afresh
		delete(m.names, t)
		delete(m.paused, t)
	}
	for tp, mp := range m.partitions {
		if m.stopped[tp.Topic] {
			stopping = append(stopping, mp)
			delete(m.partitions, tp)
			m.stoppedPartitions[tp] = mp
		}
	}
	for tp, mp := range m.stoppedPartitions { // a stop that failed earlier resumes
		if state, _, _ := mp.status(); m.stopped[tp.Topic] && state == "STOPPING" && !slices.Contains(stopping, mp) {
			stopping = append(stopping, mp)
		}
	}
	m.mu.Unlock()
	results := make([]netio.TopicResult, 0, len(topics))
	if err := m.node.saveMirror(m); err != nil { // nothing stopped: the mirror goes on as it was
		m.mu.Lock()
		undo()
		m.mu.Unlock()
		for _, t := range topics {
			results = append(results, netio.TopicResult{Topic: t, Err: err})
		}
		return results
	}
	m.stopFetchers() // nothing fetches a stopped topic any more; the others resume below
	m.refreshSoon()
	sort.Slice(stopping, func(i, j int) bool { return stopping[i].less(stopping[j]) })
	errs := m.stopPartitions(stopping)
	for _, t := range topics {
		results = append(results, netio.TopicResult{Topic: t, Err: errs[t]})
	}
	return results
}

// selectionSnapshot returns a function that puts back the mirror's
// selection and partition sets as they are now (m.mu held by both).
func (m *mirror) selectionSnapshot() func() {
	names, paused, stopped := maps.Clone(m.names), maps.Clone(m.paused), maps.Clone(m.stopped)
	partitions, stoppedPartitions := maps.Clone(m.partitions), maps.Clone(m.stoppedPartitions)
	return func() {
		m.names, m.paused, m.stopped = names, paused, stopped
		m.partitions, m.stoppedPartitions = partitions, stoppedPartitions
	}
}

func (mp *mirrorPartition) less(other *mirrorPartition) bool {
	return mp.topic < other.topic || mp.topic == other.topic && mp.partition < other.partition
}

// stopParallelism bounds the partitions whose stop actions (markers, a
// flush each) run at once.
const stopParallelism = 8

// stopping is one partition's stop in progress: its record, whose
// StopStep is the step to persist and run next.
type stopping struct {
	mp     *mirrorPartition
	record mirrorstate.Record
	done   bool
	err    error
}

// stopPartitions walks the partitions through the stop steps, step by
// step for all of them: one group commit of __mirror_state per step, then
// the step's actions in parallel. Each partition starts where its record
// says. A failure leaves the partition STOPPING at that step with the
// error shown (the next stop request or restart resumes it); the first
// failure per topic is returned.
func (m *mirror) stopPartitions(mps []*mirrorPartition) map[string]error {
	var all []*stopping
	for _, mp := range mps {
		if s := m.startStop(mp); s != nil {
			all = append(all, s)
		}
	}
	for step := mirrorstate.StopRemoveFromFetcher; step <= mirrorstate.StopResetProducers; step++ {
		var group []*stopping
		for _, s := range all {
			if s.err == nil && !s.done && s.record.StopStep == step {
				group = append(group, s)
			}
		}
		if len(group) == 0 || !m.persistStops(group) {
			continue
		}
		m.node.crashPoint("stop:" + step.String())
		runBounded(group, stopParallelism, m.runStopStep)
	}
	var finished []*stopping
	for _, s := range all {
		if s.done && s.err == nil {
			s.record.Previous, s.record.State, s.record.StopStep = mirrorstate.Stopping, mirrorstate.Stopped, mirrorstate.StopNone
			finished = append(finished, s)
		}
	}
	if len(finished) > 0 && m.persistStops(finished) {
		m.node.crashPoint("stop:STOPPED")
		for _, s := range finished {
			s.mp.stopped(s.record)
			m.log.Info("stopped mirroring: the partition is writable", "topic", s.mp.topic, "partition", s.mp.partition,
				"last_mirror_epoch", s.record.LastMirrorEpoch, "last_mirror_offset", s.record.LastMirrorOffset, "leader_epoch", s.record.LeaderEpoch)
		}
	}
	errs := map[string]error{}
	for _, s := range all {
		if s.err == nil {
			continue
		}
		s.mp.mu.Lock()
		s.mp.state, s.mp.err = "STOPPING", s.err.Error()
		s.mp.mu.Unlock()
		m.log.Warn("stop failed; it resumes on the next stop request or restart", "topic", s.mp.topic, "partition", s.mp.partition, "error", s.err)
		if errs[s.mp.topic] == nil {
			errs[s.mp.topic] = s.err
		}
	}
	return errs
}

// startStop returns the partition's stop from its record: nil when it is
// STOPPED already (made writable here), the first step when it was not
// stopping.
func (m *mirror) startStop(mp *mirrorPartition) *stopping {
	record, ok := m.node.states.get(mp.stateKey())
	switch {
	case ok && record.State == mirrorstate.Stopped:
		mp.stopped(record)
		return nil
	case !ok || record.State != mirrorstate.Stopping:
		previous := mirrorstate.Mirroring
		if ok && record.State != mirrorstate.Mirroring {
			previous = record.State
		}
		source := rb.Epoch(mp.sourceLeaderEpoch.Load())
		if source < 0 {
			source = rb.NoEpoch
		}
		record = mirrorstate.Record{State: mirrorstate.Stopping, Previous: previous, StopStep: mirrorstate.StopRemoveFromFetcher,
			StateEpoch: record.StateEpoch, LeaderEpoch: mp.local.LeaderEpoch(), SourceLeaderEpoch: source,
			NextRetryAtMillis: -1, LastMirrorEpoch: rb.NoEpoch, LastMirrorOffset: -1, TruncateTo: -1}
	}
	mp.mu.Lock()
	mp.state, mp.err = "STOPPING", ""
	mp.mu.Unlock()
	return &stopping{mp: mp, record: record}
}

// runStopStep runs the action of s's current step and moves s to the
// next step (or done after RESET_PRODUCERS).
func (m *mirror) runStopStep(s *stopping) {
	n, p, record := m.node, s.mp.local, &s.record
	switch record.StopStep {
	case mirrorstate.StopRemoveFromFetcher:
		// The fetchers no longer hold the partition (stopTopics, or a
		// restart that never fetches a stopped topic).
		record.LastMirrorEpoch, record.LastMirrorOffset = p.log.LatestEpoch(), p.log.LogEndOffset()
		record.StopStep = mirrorstate.StopBumpLeaderEpoch
	case mirrorstate.StopBumpLeaderEpoch:
		bumped := max(record.LeaderEpoch, record.SourceLeaderEpoch, record.LastMirrorEpoch, p.LeaderEpoch())
		record.LeaderEpoch = rb.Epoch(min(int64(bumped)+1, math.MaxInt32))
		record.StopStep = mirrorstate.StopAbortTransactions
	case mirrorstate.StopAbortTransactions:
		p.raiseLocalEpoch(int32(record.LeaderEpoch))
		if s.err = p.abortOpenTransactions(); s.err != nil {
			return
		}
		n.crashPoint("stop:ABORT_TRANSACTIONS:written")
		record.StopStep = mirrorstate.StopResetProducers
	case mirrorstate.StopResetProducers:
		p.raiseLocalEpoch(int32(record.LeaderEpoch))
		if s.err = p.resetMirroredProducers(); s.err != nil {
			return
		}
		n.crashPoint("stop:RESET_PRODUCERS:written")
		s.done = true
	}
}

// persistStops writes the records of group under their next state epochs
// in one group commit; on failure every one of them fails.
func (m *mirror) persistStops(group []*stopping) bool {
	entries := make([]stateEntry, 0, len(group))
	for _, s := range group {
		next := s.record
		next.StateEpoch = max(s.record.StateEpoch, s.mp.persistedEpoch()) + 1
		entries = append(entries, stateEntry{s.mp.stateKey(), next})
	}
	if err := m.node.states.putAll(entries); err != nil {
		for _, s := range group {
			s.err = fmt.Errorf("engine: %s-%d: persist %v: %w", s.mp.topic, s.mp.partition, s.record.StopStep, err)
		}
		return false
	}
	for i, s := range group {
		s.record = entries[i].value
		s.mp.mu.Lock()
		s.mp.stateEpoch = s.record.StateEpoch
		s.mp.mu.Unlock()
	}
	return true
}

// runBounded calls run for every item, at most limit at a time, and
// returns when all have returned.
func runBounded[T any](items []T, limit int, run func(T)) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, limit)
	for _, item := range items {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			run(item)
		}()
	}
	wg.Wait()
}

func (mp *mirrorPartition) persistedEpoch() mirrorstate.StateEpoch {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	return mp.stateEpoch
}

// stopped makes the partition writable, as its STOPPED record says.
func (mp *mirrorPartition) stopped(record mirrorstate.Record) {
	mp.local.raiseLocalEpoch(int32(record.LeaderEpoch))
	mp.mu.Lock()
	mp.state, mp.err, mp.failures = "STOPPED", "", 0
	mp.stateEpoch = record.StateEpoch
	mp.lastMirrorEpoch, mp.lastMirrorOffset = record.LastMirrorEpoch, record.LastMirrorOffset
	mp.mu.Unlock()
	mp.local.setMirroredBy("")
}

// raiseLocalEpoch raises the leader epoch this node claims.
func (p *partition) raiseLocalEpoch(epoch int32) {
	for {
		current := p.localEpoch.Load()
		if current >= epoch {
			return
		}
		if p.localEpoch.CompareAndSwap(current, epoch) {
			p.wake()
			return
		}
	}
}

// abortOpenTransactions writes an ABORT marker, at the current leader
// epoch, for every transaction open in the partition (after a stop, those
// of the source's producers, which will never end them here), and flushes.
func (p *partition) abortOpenTransactions() error {
	type open struct {
		producerID int64
		epoch      int16
	}
	p.mu.Lock()
	var opens []open // bounded by the partition's producers
	for id := range p.producers.ongoing {
		opens = append(opens, open{id, p.producers.entry(id).epoch})
	}
	p.mu.Unlock()
	sort.Slice(opens, func(i, j int) bool { return opens[i].producerID < opens[j].producerID })
	for _, o := range opens {
		if _, err := p.writeMarker(o.producerID, o.epoch, false, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("engine: %s: abort the source's open transaction of producer %d: %w", p.tp, o.producerID, err)
		}
	}
	if err := p.log.Flush(); err != nil {
		return fmt.Errorf("engine: %s: flush the abort markers: %w", p.tp, err)
	}
	return nil
}

// resetMirroredProducers appends the MIRROR_PID_RESET control batch at
// the current leader epoch (unless the log ends with one already), drops
// the producer state, and flushes.
func (p *partition) resetMirroredProducers() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.endsWithPIDReset() {
		batch := rb.Append(nil, rb.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
			Control: true, Records: []rb.Record{{Key: controlKey(records.ControlMirrorPIDReset), Value: []byte{0, 0, 0, 0, 0, 0}}}})
		if _, err := p.log.AppendAssign(batch, p.LeaderEpoch()); err != nil {
			return fmt.Errorf("engine: %s: write MIRROR_PID_RESET: %w", p.tp, err)
		}
		p.log.SetHighWatermark(p.log.LogEndOffset())
	}
	p.producers.dropProducers()
	p.notify()
	if err := p.log.Flush(); err != nil {
		return fmt.Errorf("engine: %s: flush MIRROR_PID_RESET: %w", p.tp, err)
	}
	return nil
}

func controlKey(kind int16) []byte { return []byte{0, 0, byte(uint16(kind) >> 8), byte(kind)} }

// endsWithPIDReset: the log's last batch is a MIRROR_PID_RESET (p.mu held).
func (p *partition) endsWithPIDReset() bool {
	end := p.log.LogEndOffset()
	if end == 0 || end <= p.log.LogStartOffset() {
		return false
	}
	data, err := p.log.BatchBytes(nil, end-1)
	if err != nil {
		return false
	}
	b, err := rb.Parse(data)
	return err == nil && b.LastOffset() == end-1 && records.IsMirrorPIDReset(b)
}

// resumeStops finishes, at load, the stops a crash interrupted: the
// partitions of stopped topics whose record is not STOPPED. m.mu is held
// by loadMirrors, so the mirror's controller (started already) waits.
func (m *mirror) resumeStops() {
	var stopping []*mirrorPartition
	for _, local := range m.node.topicsSnapshot() {
		if !m.stopped[local.name] {
			continue
		}
		for i, p := range local.partitions {
			tp := logstore.TopicPartition{Topic: local.name, Partition: int32(i)}
			key := MirrorStateKey{Mirror: m.name, TopicID: local.id, Partition: int32(i)}
			record, ok := m.node.states.get(key)
			if !ok {
				continue // never mirrored by this mirror
			}
			mp := m.newStoppedPartition(local.name, local.id, int32(i), p)
			m.stoppedPartitions[tp] = mp
			if record.State == mirrorstate.Stopped {
				mp.stopped(record)
				continue
			}
			stopping = append(stopping, mp)
		}
	}
	sort.Slice(stopping, func(i, j int) bool { return stopping[i].less(stopping[j]) })
	if len(stopping) > 0 {
		m.log.Info("resuming interrupted stops", "partitions", len(stopping))
		m.stopPartitions(stopping) // a failure is logged and shown; the next --stop resumes it
	}
}

func (m *mirror) newStoppedPartition(name string, id [16]byte, index int32, p *partition) *mirrorPartition {
	mp := &mirrorPartition{topic: name, topicID: id, partition: index, local: p, state: "STOPPING", retry: m.config.Retry,
		states: m.node.states, mirror: m.name, log: m.log}
	if v, ok := m.node.states.get(mp.stateKey()); ok {
		mp.stateEpoch = v.StateEpoch
	}
	mp.sourceLeaderEpoch.Store(-1)
	mp.sourceHighWatermark.Store(-1)
	return mp
}

// lastMirrorEpochs answers failback's lookups: per partition the last
// mirror epoch a stop stored (the greatest over this node's mirrors), -1
// and -1 when none; a mirror of this node that still mirrors the
// partition from the asking cluster makes it a mirror loop.
func (n *Node) lastMirrorEpochs(askingCluster string, lookups []netio.TopicPartitions) []netio.LastMirrorEpoch {
	type key struct {
		id        netio.TopicID
		partition int32
	}
	looping := map[key]string{}
	for _, m := range n.mirrors {
		m.mu.Lock()
		if m.sourceClusterID == askingCluster && askingCluster != "" {
			for _, mp := range m.partitions {
				looping[key{netio.TopicID(mp.topicID), mp.partition}] = m.name
			}
		}
		m.mu.Unlock()
	}
	stored := n.states.stoppedEpochs()
	var out []netio.LastMirrorEpoch
	for _, tp := range lookups {
		for _, p := range tp.Partitions {
			answer := netio.LastMirrorEpoch{TopicID: tp.TopicID, Partition: p, Epoch: -1, Offset: -1}
			if name, ok := looping[key{tp.TopicID, p}]; ok {
				answer.Err = fmt.Errorf("%w: mirror %s of cluster %s still mirrors this partition from the asking cluster %s", ErrMirrorLoop, name, n.cluster.ClusterID, askingCluster)
			} else if lme, ok := stored[MirrorStateKey{TopicID: [16]byte(tp.TopicID), Partition: p}]; ok {
				answer.Epoch, answer.Offset = int32(lme.epoch), int64(lme.offset)
			}
			out = append(out, answer)
		}
	}
	return out
}

// crashPoint ends the process with SIGKILL when the node was configured
// to crash at name (NodeConfig.CrashPoint): the crash tests of the stop
// and alignment steps. A no-op otherwise.
func (n *Node) crashPoint(name string) {
	if n.cfg.CrashPoint == "" || n.cfg.CrashPoint != name {
		return
	}
	n.log.Warn("crash point reached: killing this process", "point", name)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL cannot be caught: the process ends here
}
