package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// mirror copies the topics it selects from one source cluster. One
// controller goroutine refreshes the source's metadata (every
// mirror.metadata.refresh.interval.ms, or sooner when a fetcher asks),
// creates the local topics with the source's topic IDs and partition
// counts, and hands each source broker's fetcher the partitions it leads.
// The mirror owns the controller and the fetchers and waits for them in
// stop.
type mirror struct {
	node    *Node
	name    string
	props   map[string]string
	config  MirrorConfig
	client  *kgo.Client
	log     *slog.Logger
	metrics *mirrorMetrics
	health  sourceHealth // the source's reachability (mirror_source.go)

	refresh chan struct{} // capacity 1: a pending refresh request
	cancel  context.CancelFunc
	done    chan struct{}

	// aligning serializes log alignment (run without mu, since it asks the
	// source) with stops. Lock order: the node's mirrorsMu, aligning, mu.
	aligning sync.Mutex

	mu         sync.Mutex
	include    []*regexp.Regexp                             // start patterns
	exclude    []*regexp.Regexp                             // start exclusions
	names      map[string]bool                              // topics started by name
	paused     map[string]bool                              // topics whose desired state is PAUSED
	stopped    map[string]bool                              // topics whose desired state is STOPPED (failed over)
	partitions map[logstore.TopicPartition]*mirrorPartition // bounded by the source's partitions
	// stoppedPartitions are the partitions of stopped topics, STOPPING or
	// STOPPED: no fetcher holds them (bounded as partitions).
	stoppedPartitions map[logstore.TopicPartition]*mirrorPartition
	fetchers          map[int32]*fetcherRun
	sourceClusterID   string
}

type fetcherRun struct {
	fetcher *fetcher
	cancel  context.CancelFunc
	done    chan struct{}
}

// mirrorPartition is one mirrored partition: the local partition and what
// the source says of it.
type mirrorPartition struct {
	topic     string
	topicID   [16]byte
	partition int32
	local     *partition

	sourceLeader        atomic.Int32
	sourceLeaderEpoch   atomic.Int32
	sourceHighWatermark atomic.Int64
	metrics             partitionMetrics

	retry mirrorstate.RetryPolicy // the mirror's, for failures

	// states persists every state change under (mirror, topicID,
	// partition); nil in tests that build partitions by hand.
	states *stateLog
	mirror string
	log    *slog.Logger

	mu         sync.Mutex
	state      string
	err        string
	failures   int16                  // retries so far; -1: waits for RecoverMirroring
	retryAt    time.Time              // when a FAILED partition is fetched again
	stateEpoch mirrorstate.StateEpoch // of the last persisted state
	// aligned: failback's log alignment ran (or this mirror's record
	// shows it fetched before); until then the fetchers skip it.
	aligned bool
	// lastMirrorEpoch and lastMirrorOffset: the stop's last mirror
	// epoch, once STOPPED (rb.NoEpoch and -1 before).
	lastMirrorEpoch  rb.Epoch
	lastMirrorOffset rb.Offset
}

// mirrored runs after every mirrored append: it persists a change only,
// back to MIRRORING after a failure.
func (mp *mirrorPartition) mirrored(_ logstore.AppendInfo) {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	if mp.state == "MIRRORING" && mp.err == "" && mp.failures == 0 {
		return
	}
	previous := mp.state
	mp.state, mp.err, mp.failures = "MIRRORING", "", 0
	mp.persistLocked(previous, 0)
}

// recover clears a failure (RecoverMirroring) and persists MIRRORING, or,
// for a partition not aligned yet, lets alignment run again.
func (mp *mirrorPartition) recover() {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	if !mp.aligned { // alignment runs again (it persists MIRRORING when done)
		mp.state, mp.err, mp.failures = "LOG_ALIGNMENT", "", 0
		return
	}
	previous := mp.state
	changed := mp.state != "MIRRORING" || mp.err != "" || mp.failures != 0
	mp.state, mp.err, mp.failures = "MIRRORING", "", 0
	if changed {
		mp.persistLocked(previous, 0)
	}
}

func (mp *mirrorPartition) stateKey() MirrorStateKey {
	return MirrorStateKey{Mirror: mp.mirror, TopicID: mp.topicID, Partition: mp.partition}
}

// persistLocked writes the partition's state to __mirror_state with the
// next state epoch (mp.mu held). attempts is the retry count of a
// partition that now waits for recover. A refused or failed write is
// logged: the partition goes on with its state in memory.
func (mp *mirrorPartition) persistLocked(previous string, attempts int32) {
	if mp.states == nil {
		return
	}
	v := mp.stateValueLocked(previous, attempts)
	if err := mp.states.put(mp.stateKey(), v); err != nil {
		if mp.log != nil {
			mp.log.Warn("cannot persist the partition state", "topic", mp.topic, "partition", mp.partition, "state", mp.state, "error", err)
		}
		return
	}
	mp.stateEpoch = v.StateEpoch
}

// stateValueLocked is the record of the partition's state under the next
// state epoch (mp.mu held).
func (mp *mirrorPartition) stateValueLocked(previous string, attempts int32) mirrorstate.Record {
	v := mirrorstate.Record{State: mirrorstate.Mirroring, Previous: mirrorstate.Unknown, StateEpoch: mp.stateEpoch + 1,
		SourceLeaderEpoch: rb.NoEpoch, NextRetryAtMillis: -1, LastMirrorEpoch: rb.NoEpoch, LastMirrorOffset: -1, TruncateTo: -1}
	if mp.local != nil {
		v.LeaderEpoch = max(mp.local.LeaderEpoch(), 0)
	}
	if previous == "FAILED" {
		v.Previous = mirrorstate.Failed
	}
	if mp.state == "FAILED" {
		v.State, v.Previous, v.Error = mirrorstate.Failed, mirrorstate.Mirroring, mp.err
		if len(v.Error) > mirrorstate.ErrorTextMax {
			v.Error = v.Error[:mirrorstate.ErrorTextMax]
		}
		if v.Error == "" {
			v.Error = "unknown error"
		}
		v.RetryCount = attempts
		if mp.failures >= 0 {
			v.RetryCount, v.Retryable, v.NextRetryAtMillis = int32(mp.failures), true, max(mp.retryAt.UnixMilli(), 0)
		}
	}
	return v
}

// restore sets the partition's state from its __mirror_state record
// (before the partition is shared).
func (mp *mirrorPartition) restore(v mirrorstate.Record) {
	mp.stateEpoch = v.StateEpoch
	// A partition this mirror fetched before (any record but STOPPED:
	// MIRRORING, FAILED) needs no alignment; a stopped one started again
	// does (failback).
	mp.aligned = v.State != mirrorstate.Stopped && v.State != mirrorstate.Stopping
	if v.State != mirrorstate.Failed {
		return // pause is the mirror's
	}
	mp.state, mp.err, mp.failures = "FAILED", v.Error, -1
	if v.Retryable {
		mp.failures = int16(min(v.RetryCount, 1<<15-1))
		mp.retryAt = time.UnixMilli(v.NextRetryAtMillis)
	}
}

// fail records a partition failure; the fetcher retries on its next round
// (retryable) or the partition waits for recover.
func (mp *mirrorPartition) fail(err error, retryable bool) {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	previous := mp.state
	mp.state, mp.err = "FAILED", err.Error()
	if !retryable || mp.failures < 0 || int32(mp.failures) >= mp.retry.MaxAttempts {
		attempts := int32(max(mp.failures, 0))
		mp.failures = -1 // waits for RecoverMirroring
		mp.persistLocked(previous, attempts)
		return
	}
	defer mp.persistLocked(previous, 0)
	mp.failures++
	// Jitter, so partitions that failed together do not retry together.
	mp.retryAt = time.Now().Add(mp.retry.Backoff(int32(mp.failures), processJitter{}))
}

// failOnce fails the partition non-retryably unless it already waits
// for recover (the first cause is kept).
func (mp *mirrorPartition) failOnce(err error) {
	mp.mu.Lock()
	waiting := mp.state == "FAILED" && mp.failures < 0
	mp.mu.Unlock()
	if !waiting {
		mp.fail(err, false)
	}
}

// ready reports whether the partition may be fetched now, and if not,
// when it may (zero: not until it is recovered).
func (mp *mirrorPartition) ready(now time.Time) (bool, time.Time) {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	switch {
	case !mp.aligned:
		return false, time.Time{} // the controller aligns it first
	case mp.state != "FAILED":
		return true, time.Time{}
	case mp.failures < 0:
		return false, time.Time{}
	}
	return !now.Before(mp.retryAt), mp.retryAt
}

func (mp *mirrorPartition) isAligned() bool {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	return mp.aligned
}

func (mp *mirrorPartition) status() (string, string, int16) {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	return mp.state, mp.err, mp.failures
}

func startMirror(n *Node, name string, props map[string]string) (*mirror, error) {
	config, err := ParseMirrorConfig(props)
	if err != nil {
		return nil, err
	}
	options, err := config.SourceClientOptions()
	if err != nil {
		return nil, fmt.Errorf("%w: mirror %s: %w", kerr.InvalidConfig, name, err)
	}
	options = append(options, kgo.MaxVersions(netio.MirrorClientVersions())) // failback's lookups
	client, err := kgo.NewClient(options...)
	if err != nil {
		return nil, fmt.Errorf("%w: mirror %s: %w", kerr.InvalidConfig, name, err)
	}
	m := &mirror{node: n, name: name, props: props, config: config, client: client,
		log: n.log.With("mirror", name), metrics: n.mirrorMetricsBuilt(), refresh: make(chan struct{}, 1), done: make(chan struct{}),
		names: map[string]bool{}, paused: map[string]bool{}, stopped: map[string]bool{},
		partitions: map[logstore.TopicPartition]*mirrorPartition{}, stoppedPartitions: map[logstore.TopicPartition]*mirrorPartition{},
		fetchers: map[int32]*fetcherRun{}}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.run(ctx)
	return m, nil
}

// stop ends the controller and every fetcher and closes the source client.
func (m *mirror) stop() {
	m.cancel()
	<-m.done
	m.client.Close()
}

func (m *mirror) refreshSoon() {
	select {
	case m.refresh <- struct{}{}:
	default:
	}
}

func (m *mirror) run(ctx context.Context) {
	defer close(m.done)
	defer m.stopFetchers()
	prober := make(chan struct{})
	go func() {
		defer close(prober)
		m.probeHighWatermarks(ctx)
	}()
	defer func() { <-prober }()
	timer := time.NewTimer(0)
	defer timer.Stop()
	var failures int32 // metadata refreshes failed in a row
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-m.refresh:
		}
		err := m.reconcile(ctx)
		if ctx.Err() != nil {
			return
		}
		m.health.observe(metadataPath(), err)
		if err != nil {
			failures = min(failures+1, reconnectAttemptsMax)
			backoff := reconnectBackoff.Backoff(failures, processJitter{})
			m.log.Warn("mirror metadata refresh failed", "error", err, "backoff", backoff)
			timer.Reset(backoff)
			continue
		}
		failures = 0
		timer.Reset(m.config.MetadataRefreshInterval)
	}
}

// selects reports whether the mirror mirrors topic (m.mu held): a topic
// not stopped, started by name or by a start pattern, that the mirror config's
// topics.include admits and its topics.exclude does not, and that no
// start exclusion names.
func (m *mirror) selects(topic string) bool {
	if m.stopped[topic] || !m.config.TopicsInclude.Matches(topic) || m.config.TopicsExclude.Matches(topic) {
		return false
	}
	for _, re := range m.exclude {
		if re.MatchString(topic) {
			return false
		}
	}
	if m.names[topic] {
		return true
	}
	for _, re := range m.include {
		if re.MatchString(topic) {
			return true
		}
	}
	return false
}

// reconcile reads the source's metadata and brings local topics,
// partitions and fetchers in line with it.
func (m *mirror) reconcile(ctx context.Context) error {
	req := kmsg.NewPtrMetadataRequest()
	kresp, err := m.client.Request(ctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	m.mu.Lock()
	defer m.mu.Unlock()
	if resp.ClusterID != nil {
		m.sourceClusterID = *resp.ClusterID
	}
	byBroker := map[int32][]*mirrorPartition{}
	present := map[string][16]byte{} // the source's topics and their IDs
	for _, t := range resp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 {
			present[*t.Topic] = t.TopicID
		}
		if t.Topic == nil || t.ErrorCode != 0 || t.IsInternal || !m.selects(*t.Topic) {
			continue
		}
		if t.TopicID == ([16]byte{}) {
			// Topic IDs keep a mirror from mixing two topics of one name;
			// sources before Kafka 2.8 have none (nor, before 2.7, the
			// DivergingEpoch the fetchers rely on).
			m.log.Warn("cannot mirror topic: the source reports no topic ID (Kafka 3.1 or later is needed)", "topic", *t.Topic)
			continue
		}
		if err := m.ensureTopic(ctx, *t.Topic, t.TopicID, int32(len(t.Partitions))); err != nil {
			m.log.Warn("cannot mirror topic", "topic", *t.Topic, "error", err)
			m.failTopic(*t.Topic, err)
			continue
		}
		for _, p := range t.Partitions {
			mp := m.partitions[logstore.TopicPartition{Topic: *t.Topic, Partition: p.Partition}]
			if mp == nil || p.Leader < 0 {
				continue
			}
			mp.sourceLeader.Store(p.Leader)
			mp.sourceLeaderEpoch.Store(p.LeaderEpoch)
			if mp.local.keepEpochAhead(p.LeaderEpoch) {
				mp.local.wake()
			}
			if !m.paused[*t.Topic] {
				byBroker[p.Leader] = append(byBroker[p.Leader], mp)
			}
		}
	}
	m.checkSourceTopics(present)
	var unaligned []*mirrorPartition
	for _, set := range byBroker {
		for _, mp := range set {
			if !mp.isAligned() {
				unaligned = append(unaligned, mp)
			}
		}
	}
	if len(unaligned) > 0 {
		// Alignment asks the source, which may at that moment be asking
		// this node (two mirrors started towards each other): m.mu is not
		// held across the request, so this node's answers never wait on
		// it. The fetchers then take only the partitions still mirrored.
		sourceClusterID := m.sourceClusterID
		m.mu.Unlock()
		m.aligning.Lock()
		m.alignPartitions(ctx, unaligned, sourceClusterID)
		m.aligning.Unlock()
		m.mu.Lock()
		byBroker = m.stillMirrored(byBroker)
	}
	m.assignFetchers(byBroker)
	return nil
}

// stillMirrored drops from byBroker the partitions no longer in
// m.partitions (stopped while m.mu was released; m.mu held).
func (m *mirror) stillMirrored(byBroker map[int32][]*mirrorPartition) map[int32][]*mirrorPartition {
	out := make(map[int32][]*mirrorPartition, len(byBroker))
	for broker, set := range byBroker {
		for _, mp := range set {
			if m.partitions[logstore.TopicPartition{Topic: mp.topic, Partition: mp.partition}] == mp {
				out[broker] = append(out[broker], mp)
			}
		}
	}
	return out
}

// checkSourceTopics fails, waiting for recover, the partitions whose
// source topic is gone or was recreated under another topic ID: mirroring
// a different topic into the same log would mix two histories (m.mu held).
func (m *mirror) checkSourceTopics(present map[string][16]byte) {
	for tp, mp := range m.partitions {
		switch id, ok := present[tp.Topic]; {
		case !ok:
			mp.failOnce(fmt.Errorf("the source topic %s was deleted", tp.Topic))
		case id != mp.topicID:
			mp.failOnce(fmt.Errorf("the source topic %s was recreated with another topic ID", tp.Topic))
		}
	}
}

// failTopic fails the mirrored partitions of topic, waiting for recover.
func (m *mirror) failTopic(topic string, err error) {
	for tp, mp := range m.partitions {
		if tp.Topic == topic {
			mp.failOnce(err)
		}
	}
}

// ensureTopic creates the local mirror topic (source topic ID, partition
// count) or grows it, and registers its partitions (m.mu held).
func (m *mirror) ensureTopic(ctx context.Context, name string, id [16]byte, partitions int32) error {
	local, err := m.node.ensureMirrorTopic(ctx, name, netio.TopicID(id), partitions)
	if err != nil {
		return err
	}
	for i, p := range local {
		tp := logstore.TopicPartition{Topic: name, Partition: int32(i)}
		if m.partitions[tp] == nil {
			m.partitions[tp] = m.newPartition(name, id, int32(i), p)
		}
	}
	return nil
}

// newPartition makes a mirrored partition, in the state __mirror_state
// holds for it if any (a FAILED partition stays FAILED across a restart).
func (m *mirror) newPartition(name string, id [16]byte, index int32, p *partition) *mirrorPartition {
	p.setMirroredBy(m.name)
	mp := &mirrorPartition{topic: name, topicID: id, partition: index, local: p, state: "LOG_ALIGNMENT", retry: m.config.Retry,
		states: m.node.states, mirror: m.name, log: m.log, lastMirrorEpoch: rb.NoEpoch, lastMirrorOffset: -1}
	if v, ok := m.node.states.get(mp.stateKey()); ok {
		mp.restore(v)
	}
	if mp.aligned && mp.state == "LOG_ALIGNMENT" {
		mp.state = "MIRRORING"
	}
	mp.sourceHighWatermark.Store(-1)
	mp.sourceLeader.Store(-1) // until the source's metadata names one
	mp.metrics.joined = time.Now()
	return mp
}

// restorePartitions registers, at load, the selected local partitions
// that __mirror_state holds a state for, so their state (FAILED waiting
// for recover, say) shows before the first metadata refresh (m.mu held).
func (m *mirror) restorePartitions() {
	type local struct {
		name       string
		id         [16]byte
		partitions []*partition
	}
	var locals []local
	m.node.mu.RLock()
	for name, t := range m.node.topics {
		if !t.internal && m.selects(name) {
			locals = append(locals, local{name, t.id, append([]*partition(nil), t.partitions...)})
		}
	}
	m.node.mu.RUnlock()
	for _, l := range locals {
		for i, p := range l.partitions {
			tp := logstore.TopicPartition{Topic: l.name, Partition: int32(i)}
			if m.partitions[tp] != nil {
				continue
			}
			if _, ok := m.node.states.get(MirrorStateKey{Mirror: m.name, TopicID: l.id, Partition: int32(i)}); ok {
				m.partitions[tp] = m.newPartition(l.name, l.id, int32(i), p)
			}
		}
	}
}

// assignFetchers starts, updates and stops fetchers so each source broker
// fetches exactly the partitions it leads (m.mu held).
func (m *mirror) assignFetchers(byBroker map[int32][]*mirrorPartition) {
	for broker, run := range m.fetchers {
		if _, ok := byBroker[broker]; !ok {
			run.cancel()
			<-run.done
			delete(m.fetchers, broker)
		}
	}
	for broker, set := range byBroker {
		sort.Slice(set, func(i, j int) bool {
			if set[i].topic != set[j].topic {
				return set[i].topic < set[j].topic
			}
			return set[i].partition < set[j].partition
		})
		run := m.fetchers[broker]
		if run == nil {
			ctx, cancel := context.WithCancel(context.Background())
			run = &fetcherRun{fetcher: newFetcher(m, broker), cancel: cancel, done: make(chan struct{})}
			m.fetchers[broker] = run
			go func() {
				defer close(run.done)
				run.fetcher.run(ctx)
			}()
		}
		run.fetcher.setPartitions(set)
	}
}

func (m *mirror) stopFetchers() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for broker, run := range m.fetchers {
		run.cancel()
		<-run.done
		delete(m.fetchers, broker)
	}
}

// realign answers OFFSET_OUT_OF_RANGE: below the source's log start the
// local log restarts there; past the source's end it is cut to it.
func (m *mirror) realign(ctx context.Context, mp *mirrorPartition) error {
	start, err := m.sourceOffset(ctx, mp, -2)
	if err != nil {
		return err
	}
	end, err := m.sourceOffset(ctx, mp, -1)
	if err != nil {
		return err
	}
	leo := int64(mp.local.log.LogEndOffset())
	switch {
	case leo < start:
		m.log.Info("source log start passed the local log end: restarting there", "topic", mp.topic, "partition", mp.partition, "source_start", start, "local_end", leo)
		return mp.local.restartAt(start)
	case leo > end:
		_, err := mp.local.truncateTo(rb.Offset(end), 0)
		return err
	}
	// Inside the source's range and still out of range: the source did
	// not accept our last fetched epoch. Back off (the caller fails the
	// partition) rather than ask again at once.
	return fmt.Errorf("offset %d is inside the source's range [%d, %d] but the source answered OFFSET_OUT_OF_RANGE", leo, start, end)
}

func (m *mirror) sourceOffset(ctx context.Context, mp *mirrorPartition, timestamp int64) (int64, error) {
	kresp, err := m.client.Broker(int(mp.sourceLeader.Load())).Request(ctx, listOffsetsRequest([]*mirrorPartition{mp}, timestamp))
	if err != nil {
		return -1, err
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, errors.New("list offsets: malformed answer")
	}
	rp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return -1, err
	}
	return rp.Offset, nil
}

// listOffsetsRequest asks a source broker, as a consumer would
// (READ_UNCOMMITTED, no leader epoch), for the offset at timestamp (-2
// earliest, -1 latest) of each partition.
func listOffsetsRequest(partitions []*mirrorPartition, timestamp int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = -1, 0
	topics := map[string]int{}
	for _, mp := range partitions {
		i, ok := topics[mp.topic]
		if !ok {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = mp.topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topics[mp.topic] = i
		}
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp, p.CurrentLeaderEpoch = mp.partition, timestamp, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	return req
}

// topicSnapshot is a local topic as it was when listed.
type topicSnapshot struct {
	name       string
	id         [16]byte
	partitions []*partition
}

// topicsSnapshot lists the node's topics but the internal one.
func (n *Node) topicsSnapshot() []topicSnapshot {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]topicSnapshot, 0, len(n.topics))
	for name, t := range n.topics {
		if !t.internal {
			out = append(out, topicSnapshot{name, t.id, append([]*partition(nil), t.partitions...)})
		}
	}
	return out
}
