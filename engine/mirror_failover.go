package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/netio"
)

// Failover: StopMirrorTopics makes mirror topics writable with the offsets
// they have (DESIGN.md, "Failover and failback"). Per partition, the
// machine's stop steps (engine/mirrorstate), each persisted in
// __mirror_state before its action runs, so that a crash resumes at the
// step it was in (every action is idempotent):
//
//	REMOVE_FROM_FETCHER  the fetcher lets go of the partition, then the
//	                     last mirror epoch is read: (latest local epoch,
//	                     log end offset)
//	BUMP_LEADER_EPOCH    the local leader epoch is raised above the local,
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
// (restorePartitions). This file holds the partition's side of the steps.

// stopTopics stops the given topics of the mirror: the desired state is
// saved, then the owner walks each partition's machine through the stop
// steps (group commits of __mirror_state, one per step). It answers per
// topic: nil once every partition of it is STOPPED, else the first
// partition's failure (a retryable one resumes by itself; the next stop
// request or restart resumes any).
func (m *mirror) stopTopics(ctx context.Context, topics []string) []netio.TopicResult {
	m.mu.Lock()
	undo := m.selectionSnapshot()
	for _, t := range topics {
		m.stopped[t] = true // a stop supersedes a pause; a later start begins afresh
		delete(m.names, t)
		delete(m.paused, t)
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
	errs := map[string]error{}
	err := m.do(ctx, func(ctx context.Context) {
		if m.node.member != nil {
			m.step(ctx, m.takeStoppingPartitions()) // cluster_mirrors.go
		}
		events := m.topicEvents(topics, mirrorstate.DesiredStateChanged{Desired: mirrorstate.DesiredStopped})
		m.step(ctx, events)
		for _, e := range events {
			record, shown := e.mp.status()
			switch {
			case errs[e.mp.topic] != nil:
			case m.halted != nil:
				errs[e.mp.topic] = fmt.Errorf("engine: %s-%d: %w", e.mp.topic, e.mp.partition, m.halted)
			case record.State != mirrorstate.Stopped:
				errs[e.mp.topic] = fmt.Errorf("engine: %s-%d: the stop did not finish (%v): %s", e.mp.topic, e.mp.partition, record.State, shown)
			}
		}
	})
	for _, t := range topics {
		if err != nil {
			errs[t] = err
		}
		results = append(results, netio.TopicResult{Topic: t, Err: errs[t]})
	}
	return results
}

// topicEvents is event for every partition of topics, in partition order.
func (m *mirror) topicEvents(topics []string, event mirrorstate.Event) []partitionEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	var events []partitionEvent
	for tp, mp := range m.partitions {
		if slices.Contains(topics, tp.Topic) {
			events = append(events, partitionEvent{mp, event})
		}
	}
	sort.Slice(events, func(i, j int) bool { return events[i].mp.less(events[j].mp) })
	return events
}

// selectionSnapshot returns a function that puts back the mirror's
// selection as it is now (m.mu held by both).
func (m *mirror) selectionSnapshot() func() {
	names, paused, stopped := maps.Clone(m.names), maps.Clone(m.paused), maps.Clone(m.stopped)
	include, exclude := slices.Clone(m.include), slices.Clone(m.exclude)
	return func() {
		m.names, m.paused, m.stopped = names, paused, stopped
		m.include, m.exclude = include, exclude
	}
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
				if record, _ := mp.status(); record.State != mirrorstate.Stopped {
					looping[key{netio.TopicID(mp.topicID), mp.partition}] = m.name
				}
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
				answer.Err = fmt.Errorf("%w: mirror %s of cluster %s still mirrors this partition from the asking cluster %s", ErrMirrorLoop, name, n.Cluster().ClusterID, askingCluster)
			} else if lme, ok := stored[MirrorStateKey{TopicID: [16]byte(tp.TopicID), Partition: p}]; ok {
				answer.Epoch, answer.Offset = int32(lme.epoch), int64(lme.offset)
			}
			out = append(out, answer)
		}
	}
	return out
}
