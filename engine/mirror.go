package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrReadOnlyTopic is the Kafka error a call that would change a mirror
// topic gets: Produce, DeleteRecords, CreatePartitions, DeleteTopics.
// KIP-1279 plans a READ_ONLY_TOPIC code, but upstream has not assigned it,
// and a private code is "unknown server error" to every client (the Java
// console producer retries it). POLICY_VIOLATION is a code Java, franz-go
// and librdkafka already know and never retry; the message (Produce v8+,
// the admin answers) says why. When the KIP's code is assigned, it goes
// here and nowhere else.
var ErrReadOnlyTopic = kerr.PolicyViolation

// mirrorTopicRefusal is the refusal a topic that mirror writes gives
// (broker.Partition.SetReadOnly).
func mirrorTopicRefusal(topic, mirror string) func(action string) error {
	return func(action string) error {
		return netio.Errorf(ErrReadOnlyTopic, "topic %s is a mirror topic of mirror %s: it is read-only until `mirrord mirrors --stop --mirror %s --topics %s` (%s refused)",
			topic, mirror, mirror, topic, action)
	}
}

// mirror copies the topics it selects from one source cluster. One
// controller goroutine, the owner of the partitions' state machines
// (mirror_owner.go), refreshes the source's metadata (every
// mirror.metadata.refresh.interval.ms, or sooner when a fetcher asks),
// creates the local topics with the source's topic IDs and partition
// counts, steps the machines and performs their actions, and hands each
// source broker's fetcher the partitions it leads that their machines
// want fetched. The mirror owns the controller and the fetchers and waits
// for them in stop.
type mirror struct {
	node   *Node
	name   string
	props  map[string]string
	config MirrorConfig
	client *kgo.Client
	dialer *sourceDialer // the fetchers' own connections (mirror_fetch_conn.go)
	// sourceBrokers is each source broker's host:port, from the last
	// metadata answer: where the fetchers dial.
	sourceBrokers atomic.Pointer[map[int32]string]
	log           *slog.Logger
	metrics       *mirrorMetrics
	health        sourceHealth // the source's reachability (mirror_source.go)
	// groupSync is the consumer group offset sync's last round
	// (mirror_groups.go).
	groupSync groupSync
	// txnSync is the transactional ID sync's last round (mirror_txns.go).
	txnSync syncStatus
	// cfgSync is the topic config sync's last round (mirror_configs.go).
	cfgSync syncStatus
	// aclSync is the ACL sync's last round (mirror_acls.go).
	aclSync syncStatus

	refresh  chan struct{} // capacity 1: a pending refresh request
	inbox    *inbox        // events for the owner
	requests chan ownerRequest
	cancel   context.CancelFunc
	done     chan struct{}

	// The owner's own fields (its goroutine alone uses them, but
	// fetchers, which it changes under mu).
	fetchers        map[int32]*fetcherRun
	fetchedLeaders  map[*mirrorPartition]int32 // the source leader of each partition, as the metadata said
	fetchSetChanged bool                       // a machine started or stopped fetching
	nextRetry       time.Time                  // the earliest ScheduleRetry or halt retry; zero: none
	halted          error                      // a Persist failed: nothing runs until reload
	haltCount       int32                      // halts in a row, for the backoff

	// adminMu serializes the admin calls that change the selection.
	adminMu sync.Mutex

	mu      sync.Mutex
	include []*regexp.Regexp // start patterns
	exclude []*regexp.Regexp // start exclusions
	names   map[string]bool  // topics started by name
	paused  map[string]bool  // topics whose desired state is PAUSED
	stopped map[string]bool  // topics whose desired state is STOPPED (failed over)
	// partitions are every partition the mirror has a machine for, in any
	// state, STOPPED included; only the owner adds to it (bounded by the
	// source's partitions).
	partitions      map[logstore.TopicPartition]*mirrorPartition
	sourceClusterID string
}

type fetcherRun struct {
	fetcher *fetcher
	cancel  context.CancelFunc
	done    chan struct{}
}

// mirrorPartition is one mirrored partition: the local partition, what
// the source says of it, and its state machine.
type mirrorPartition struct {
	topic     string
	topicID   [16]byte
	partition int32
	local     *broker.Partition

	sourceLeader        atomic.Int32
	sourceLeaderEpoch   atomic.Int32
	sourceHighWatermark atomic.Int64
	metrics             partitionMetrics

	mirror string
	refuse func(action string) error // the partition's read-only refusal

	// machine is the partition's state (the owner's alone); restored: it
	// was made from a record and awaits Restarted.
	machine  *mirrorstate.Machine
	restored bool

	// The fetch gate. fetching: a machine's StartFetching let the
	// fetcher take the partition. The fetcher holds gate while it applies
	// an answer and drops the answer if fetching is off, so when
	// stopFetching returns nothing of a fetch runs or writes any more.
	gate     sync.Mutex
	fetching atomic.Bool
	// fetcher is the fetcher whose requests hold the partition (nil:
	// none); a fetcher given the partition waits until the one before lets
	// go, so two never fetch it at once.
	fetcher atomic.Pointer[fetcher]
	// reported is the highest source leader epoch posted to the owner
	// from fetched batches; reportSuccess: post FetchSucceeded after the
	// next good answer (the machine counts retries).
	reported      atomic.Int32
	reportSuccess atomic.Bool
	// dropped: the mirror let the partition go (its node no longer leads
	// it on the cluster); events still queued for it are ignored.
	dropped atomic.Bool

	mu     sync.Mutex
	view   mirrorstate.Record // the machine's record, as last published
	halted string             // the mirror's halt, shown as the error
}

func (mp *mirrorPartition) stateKey() MirrorStateKey {
	return MirrorStateKey{Mirror: mp.mirror, TopicID: mp.topicID, Partition: mp.partition}
}

// status is the partition's state as last published: its record, and
// the error to show (the mirror's halt wins).
func (mp *mirrorPartition) status() (mirrorstate.Record, string) {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	if mp.halted != "" {
		return mp.view, mp.halted
	}
	return mp.view, mp.view.Error
}

// retryCount is the wire's retry count: the retries so far, or -1 for a
// FAILED partition that waits for --recover.
func retryCount(v mirrorstate.Record) int16 {
	if v.State == mirrorstate.Failed && !v.Retryable {
		return -1
	}
	return int16(min(v.RetryCount, 1<<15-1))
}

// startFetching lets the fetcher take the partition (from its log end
// offset); the next good answer reports FetchSucceeded.
func (mp *mirrorPartition) startFetching() {
	mp.reportSuccess.Store(true)
	mp.fetching.Store(true)
}

// stopFetching takes the partition from its fetcher and returns once no
// answer of it is being applied; it reports whether it was fetched.
func (mp *mirrorPartition) stopFetching() bool {
	mp.gate.Lock()
	defer mp.gate.Unlock()
	return mp.fetching.Swap(false)
}

func startMirror(n *Node, name string, props map[string]string) (*mirror, error) {
	config, err := ParseMirrorConfig(props)
	if err != nil {
		return nil, err
	}
	log := n.log.With("mirror", name)
	dialer, err := newSourceDialer(config, n.cfg.MirrorConfigFilesDir, log)
	if err != nil {
		return nil, fmt.Errorf("%w: mirror %s: %w", kerr.InvalidConfig, name, err)
	}
	options := config.sourceClientOptions(dialer)
	options = append(options, kgo.MaxVersions(netio.MirrorClientVersions())) // failback's lookups
	client, err := kgo.NewClient(options...)
	if err != nil {
		return nil, fmt.Errorf("%w: mirror %s: %w", kerr.InvalidConfig, name, err)
	}
	m := &mirror{node: n, name: name, props: props, config: config, client: client, dialer: dialer,
		log: log, metrics: n.mirrorMetricsBuilt(), refresh: make(chan struct{}, 1),
		inbox: newInbox(), requests: make(chan ownerRequest), done: make(chan struct{}),
		names: map[string]bool{}, paused: map[string]bool{}, stopped: map[string]bool{},
		partitions: map[logstore.TopicPartition]*mirrorPartition{}, fetchers: map[int32]*fetcherRun{}}
	return m, nil
}

// start restores the machines of the partitions __mirror_state holds
// (so their states show at once) and starts the mirror's controller,
// which restarts them first.
func (m *mirror) start() {
	restored := m.restorePartitions()
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.run(ctx, restored)
}

// stop ends the controller and every fetcher and closes the source client.
func (m *mirror) stop() {
	if m.cancel != nil { // started
		m.cancel()
		<-m.done
	}
	m.client.Close()
}

// learnSourceBrokers keeps the addresses of a metadata answer's brokers.
func (m *mirror) learnSourceBrokers(brokers []kmsg.MetadataResponseBroker) {
	addrs := make(map[int32]string, len(brokers))
	for _, b := range brokers {
		addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	m.sourceBrokers.Store(&addrs)
}

// sourceBrokerAddr is broker's host:port, as the source's metadata said.
func (m *mirror) sourceBrokerAddr(broker int32) (string, bool) {
	addrs := m.sourceBrokers.Load()
	if addrs == nil {
		return "", false
	}
	addr, ok := (*addrs)[broker]
	return addr, ok
}

func (m *mirror) refreshSoon() {
	select {
	case m.refresh <- struct{}{}:
	default:
	}
}

// run is the owner: it refreshes metadata, steps the machines with the
// events of the inbox, the admin requests and the retry timer, and keeps
// the fetchers in line with the machines.
func (m *mirror) run(ctx context.Context, restored []partitionEvent) {
	defer close(m.done)
	defer m.stopFetchers()
	prober := make(chan struct{})
	go func() {
		defer close(prober)
		m.probeHighWatermarks(ctx)
	}()
	defer func() { <-prober }()
	groups := make(chan struct{})
	go func() {
		defer close(groups)
		m.syncGroupsLoop(ctx)
	}()
	defer func() { <-groups }()
	acls := make(chan struct{})
	go func() {
		defer close(acls)
		m.syncACLsLoop(ctx)
	}()
	defer func() { <-acls }()
	m.step(ctx, restored)
	metadata := time.NewTimer(0)
	defer metadata.Stop()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	var failures int32 // metadata refreshes failed in a row
	// The source's metadata is asked for off the owner's goroutine, one
	// request at a time, and applied on it: an admin request (a failover
	// above all) must not wait on a source that stopped answering, whose
	// client holds a request it has written until the request timeout.
	metadataAnswers := make(chan metadataAnswer, 1)
	asking := false
	for {
		refresh := false
		select {
		case <-ctx.Done():
			return
		case <-metadata.C:
			refresh = true
		case <-m.refresh:
			refresh = true
		case <-m.inbox.wake:
		case req := <-m.requests:
			req.run(ctx)
			close(req.done)
		case now := <-retry.C:
			if m.halted != nil {
				m.reload(ctx)
			} else {
				m.tick(ctx, now)
			}
		case answer := <-metadataAnswers:
			asking = false
			err := answer.err
			if err == nil && m.halted == nil {
				err = m.reconcile(ctx, answer.resp)
			}
			if ctx.Err() != nil {
				return
			}
			m.health.observe(metadataPath(), err)
			if err != nil {
				failures = min(failures+1, reconnectAttemptsMax)
				backoff := reconnectBackoff.Backoff(failures, processJitter{})
				m.log.Warn("mirror metadata refresh failed", "error", err, "backoff", backoff)
				metadata.Reset(backoff)
			} else {
				failures = 0
				metadata.Reset(m.config.MetadataRefreshInterval)
			}
		}
		if refresh && m.node.member != nil {
			m.dropLostLeaderships() // cluster_mirrors.go
			if m.halted == nil {
				m.step(ctx, m.takeStoppingPartitions())
			}
		}
		if refresh && m.halted == nil && !asking {
			asking = true
			go func() {
				resp, err := m.client.Request(ctx, kmsg.NewPtrMetadataRequest())
				answer := metadataAnswer{err: err}
				if err == nil {
					answer.resp = resp.(*kmsg.MetadataResponse)
				}
				metadataAnswers <- answer // never blocks: one request at a time
			}()
		}
		if m.halted == nil {
			m.step(ctx, m.inbox.take())
		}
		if m.fetchSetChanged {
			m.fetchSetChanged = false
			m.assignFetchers()
		}
		if !m.nextRetry.IsZero() {
			retry.Reset(max(time.Until(m.nextRetry), 0))
		}
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

// metadataAnswer is the answer to the owner's metadata request.
type metadataAnswer struct {
	resp *kmsg.MetadataResponse
	err  error
}

// reconcile brings local topics and partitions in line with the source's
// metadata, and tells the machines what it learned: new partitions,
// source leader epochs, source topics gone.
func (m *mirror) reconcile(ctx context.Context, resp *kmsg.MetadataResponse) error {
	var events []partitionEvent
	m.mu.Lock()
	if resp.ClusterID != nil {
		m.sourceClusterID = *resp.ClusterID
	}
	m.learnSourceBrokers(resp.Brokers)
	leaders := map[*mirrorPartition]int32{}
	present := map[string][16]byte{} // the source's topics and their IDs
	var mirrored []kmsg.MetadataResponseTopic
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
		mirrored = append(mirrored, t)
	}
	ensured := m.ensureTopics(ctx, mirrored)
	for i, t := range mirrored {
		added, err := ensured[i].added, ensured[i].err
		if err != nil {
			m.log.Warn("cannot mirror topic", "topic", *t.Topic, "error", err)
			events = append(events, m.failTopic(*t.Topic, err)...)
			continue
		}
		for _, mp := range added {
			events = append(events, partitionEvent{mp, nil}) // its first event, below
		}
		for _, p := range t.Partitions {
			mp := m.partitions[logstore.TopicPartition{Topic: *t.Topic, Partition: p.Partition}]
			if mp == nil || p.Leader < 0 {
				continue
			}
			mp.sourceLeader.Store(p.Leader)
			mp.sourceLeaderEpoch.Store(p.LeaderEpoch)
			leaders[mp] = p.Leader
			if p.LeaderEpoch >= 0 {
				events = append(events, partitionEvent{mp, mirrorstate.SourceEpochChanged{Epoch: rb.Epoch(p.LeaderEpoch)}})
			}
		}
	}
	events = append(events, m.checkSourceTopics(present)...)
	m.mu.Unlock()
	for i, e := range events {
		if e.event == nil {
			events[i].event = m.firstEvent(e.mp)
		}
	}
	if !samePartitionLeaders(leaders, m.fetchedLeaders) {
		m.fetchedLeaders, m.fetchSetChanged = leaders, true
	}
	m.step(ctx, events)
	return nil
}

// checkSourceTopics fails, waiting for recover, the mirrored partitions
// whose source topic is gone or was recreated under another topic ID:
// mirroring a different topic into the same log would mix two histories
// (m.mu held).
func (m *mirror) checkSourceTopics(present map[string][16]byte) []partitionEvent {
	var events []partitionEvent
	for tp, mp := range m.partitions {
		if m.stopped[tp.Topic] {
			continue
		}
		switch id, ok := present[tp.Topic]; {
		case !ok:
			events = append(events, failEvent(mp, fmt.Errorf("the source topic %s was deleted", tp.Topic)))
		case id != mp.topicID:
			events = append(events, failEvent(mp, fmt.Errorf("the source topic %s was recreated with another topic ID", tp.Topic)))
		}
	}
	return events
}

// failTopic fails the mirrored partitions of topic, waiting for recover
// (m.mu held).
func (m *mirror) failTopic(topic string, err error) []partitionEvent {
	var events []partitionEvent
	for tp, mp := range m.partitions {
		if tp.Topic == topic {
			events = append(events, failEvent(mp, err))
		}
	}
	return events
}

// failEvent fails a MIRRORING partition for good: it waits for --recover
// (a machine in another state ignores it).
func failEvent(mp *mirrorPartition, err error) partitionEvent {
	return partitionEvent{mp, mirrorstate.FetchFailed{Err: err, Retryable: false, Now: time.Now()}}
}

// ensuredTopic is what ensureTopics did for one topic: the partitions new
// to the mirror, or why the topic could not be made.
type ensuredTopic struct {
	added []*mirrorPartition
	err   error
}

// ensureTopics creates the local mirror topics (source topic ID, partition
// count) or grows them, all in one call of the node (their partitions'
// syncs overlap), and registers their partitions, returning per topic
// those new to the mirror (m.mu held).
func (m *mirror) ensureTopics(ctx context.Context, topics []kmsg.MetadataResponseTopic) []ensuredTopic {
	if m.node.member != nil {
		return m.ensureClusterTopics(ctx, topics) // cluster_mirrors.go
	}
	asked := make([]broker.EnsuredTopic, len(topics))
	for i, t := range topics {
		asked[i] = broker.EnsuredTopic{Name: *t.Topic, ID: netio.TopicID(t.TopicID), Partitions: int32(len(t.Partitions))}
	}
	out := make([]ensuredTopic, len(topics))
	for i, e := range m.node.EnsureTopics(ctx, asked) {
		if e.Err != nil {
			out[i].err = e.Err
			continue
		}
		for index, p := range e.Local {
			tp := logstore.TopicPartition{Topic: e.Name, Partition: int32(index)}
			if m.partitions[tp] == nil {
				mp := m.newPartition(e.Name, e.ID, int32(index), p)
				m.partitions[tp] = mp
				out[i].added = append(out[i].added, mp)
			}
		}
	}
	return out
}

// newPartition makes a mirrored partition with its machine, restored from
// the record __mirror_state holds for it if any (a FAILED partition stays
// FAILED across a restart, a stop resumes at its step).
func (m *mirror) newPartition(name string, id [16]byte, index int32, p *broker.Partition) *mirrorPartition {
	mp := &mirrorPartition{topic: name, topicID: id, partition: index, local: p, mirror: m.name, refuse: mirrorTopicRefusal(name, m.name)}
	mp.reported.Store(-1)
	mp.sourceHighWatermark.Store(-1)
	mp.sourceLeader.Store(-1) // until the source's metadata names one
	mp.sourceLeaderEpoch.Store(-1)
	mp.metrics.joined = time.Now()
	m.newMachine(mp)
	// Read-only unless the record says STOPPED: a restored STOPPED
	// machine takes no action on Restarted, so publish never lifts it.
	if mp.machine.State() == mirrorstate.Stopped {
		p.SetReadOnly(nil)
	} else {
		p.SetReadOnly(mp.refuse)
	}
	return mp
}

// restorePartitions gives a machine, at start, to every local partition
// __mirror_state holds a record of this mirror for, selected or stopped,
// and returns the events that restart them: its state (FAILED waiting
// for recover, say) shows before the first metadata refresh, and a stop
// a crash interrupted resumes at its step.
func (m *mirror) restorePartitions() []partitionEvent {
	if m.node.member != nil {
		// On a cluster the mirror takes the partitions its node leads,
		// once the node's roles are etcd's (ensureClusterTopics).
		return nil
	}
	var events []partitionEvent
	m.mu.Lock()
	for _, l := range m.node.TopicsSnapshot() {
		if !m.selects(l.Name) && !m.stopped[l.Name] {
			continue
		}
		for i, p := range l.Partitions {
			tp := logstore.TopicPartition{Topic: l.Name, Partition: int32(i)}
			if m.partitions[tp] != nil {
				continue
			}
			if _, ok := m.node.states.get(MirrorStateKey{Mirror: m.name, TopicID: l.ID, Partition: int32(i)}); ok {
				mp := m.newPartition(l.Name, l.ID, int32(i), p)
				m.partitions[tp] = mp
				events = append(events, partitionEvent{mp, nil})
			}
		}
	}
	m.mu.Unlock()
	for i := range events {
		events[i].event = m.firstEvent(events[i].mp)
	}
	if len(events) > 0 {
		m.log.Info("restored mirror partition states", "partitions", len(events))
	}
	return events
}

// assignFetchers starts, updates and stops fetchers so each source broker
// fetches exactly the partitions it leads whose machines fetch (the
// owner's; m.mu guards the fetchers for readers).
func (m *mirror) assignFetchers() {
	m.mu.Lock()
	defer m.mu.Unlock()
	byBroker := map[int32][]*mirrorPartition{}
	for mp, leader := range m.fetchedLeaders {
		if mp.fetching.Load() {
			byBroker[leader] = append(byBroker[leader], mp)
		}
	}
	for broker, run := range m.fetchers {
		if _, ok := byBroker[broker]; !ok {
			run.cancel()
			<-run.done
			delete(m.fetchers, broker)
		}
	}
	for broker, set := range byBroker {
		sort.Slice(set, func(i, j int) bool { return set[i].less(set[j]) })
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

func (mp *mirrorPartition) less(other *mirrorPartition) bool {
	return mp.topic < other.topic || mp.topic == other.topic && mp.partition < other.partition
}

// samePartitionLeaders: a and b name the same partitions with the same
// source leaders.
func samePartitionLeaders(a, b map[*mirrorPartition]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for mp, leader := range a {
		if other, ok := b[mp]; !ok || other != leader {
			return false
		}
	}
	return true
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
