package engine

import (
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/logstore"
	"github.com/prometheus/client_golang/prometheus"
)

// Mirror metrics. Each Node has its own Prometheus registry (Node.Metrics);
// nothing is registered process-wide, so two nodes in one process report
// apart.
//
//	metric                                 labels                     kind
//	mirrord_mirror_lag_records             mirror, topic, partition   gauge
//	mirrord_mirror_lag_seconds             mirror, topic, partition   gauge
//	mirrord_mirror_bytes_total             mirror, topic, partition   counter
//	mirrord_mirror_batches_total           mirror, topic, partition   counter
//	mirrord_mirror_unclean_truncations_total
//	                                       mirror, topic, partition   counter
//	mirrord_mirror_partitions              mirror, state              gauge
//	mirrord_mirror_fetch_latency_seconds   mirror, source_broker      histogram
//	mirrord_mirror_source_high_watermark_age_seconds
//	                                       mirror, topic, partition   gauge
//	mirrord_mirror_group_sync_groups       mirror, result             gauge
//	mirrord_mirror_group_sync_timestamp_seconds
//	                                       mirror                     gauge
//	mirrord_mirror_group_sync_duration_seconds
//	                                       mirror                     gauge
//	mirrord_mirror_group_sync_errors_total mirror                     counter
//	mirrord_mirror_group_offset_lag        mirror, group              gauge
//	mirrord_mirror_{transaction,config,acl}_sync_timestamp_seconds
//	                                       mirror                     gauge
//	mirrord_mirror_source_reachable        mirror                     gauge
//	mirrord_mirror_source_unreachable_seconds
//	                                       mirror                     gauge
//
// Cardinality is bounded by what the node mirrors now. The partition and
// state series are read at scrape time from the mirrors' partition maps
// (a Collector), so a partition's series go when it leaves its mirror and
// a mirror's when it is deleted; every state is listed for every mirror
// (ten series each). A fetcher deletes its latency series when it stops.
// The fetch path only adds to atomics and observes a histogram: it takes
// no lock of ours (the histogram vector looks its series up under a read
// lock of its own).
//
// Lag in records: max(0, sourceHighWatermark - logEndOffset), with the
// source high watermark as last learned: from each fetch answer and, for
// the partitions no answer refreshed lately (paused topics, FAILED
// partitions, a fetcher backing off), from the high watermark prober
// (mirror_source.go). Absent until the source high watermark is known.
// Exact while the source high watermark is fresh; once it is older than
// the mirror's staleness bound (MirrorConfig.staleAfter: 5 s by default)
// it is a lower bound: the source may have grown since it last answered.
// /metrics keeps the lower bound and shows the age beside it
// (mirrord_mirror_source_high_watermark_age_seconds); describe and the
// status page say "at least".
//
// Lag in time: how long the partition has been behind. 0 while the lag in
// records is 0 and exact; otherwise the time since the partition was last
// seen caught up (after an answer, logEndOffset >= the high watermark it
// carried), or since it joined the mirror if it never was; on this node's
// monotonic clock. While the source high watermark is stale it keeps
// growing from the last time the partition was seen caught up: what the
// source wrote since it last answered may be missing. Why not the age of the oldest
// record not yet mirrored: that needs the append time of a record not yet
// fetched, and record timestamps are the producers' clocks (CreateTime),
// not the source's. The time since last caught up needs neither, and
// bounds that age from above within one fetch round trip: every record not
// yet mirrored lies at or above the high watermark of the last caught-up
// answer, so the source committed it after sending that answer. It errs
// high: a partition that joins with a backlog shows the time since it
// joined, and one kept just behind by a stream that never quite catches up
// shows the time since it last did. It is as fresh as the source high
// watermark it compares with: a fetch round behind while fetching, a
// probe round behind otherwise.

// fetchLatencyBuckets spans a loopback round trip to a request timeout
// (request.timeout.ms, 30 s by default); an idle fetch lasts about
// fetch.wait.max.ms (1 s by default).
var fetchLatencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// mirrorMetrics is the node's mirror metrics. Its zero value is ready for
// the node totals; the registry and the fetch histogram are built on first
// use through Node.mirrorMetricsBuilt.
type mirrorMetrics struct {
	bytes, batches atomic.Int64 // appended by every mirror of the node, since it opened

	once         sync.Once
	registry     *prometheus.Registry
	fetchLatency *prometheus.HistogramVec // {mirror, source_broker}: one series per running fetcher
}

// partitionMetrics is what the fetcher observes of one mirrored partition.
type partitionMetrics struct {
	bytes, batches atomic.Int64
	// uncleanTruncations counts ULE_RECOVERY's truncations.
	uncleanTruncations atomic.Int64
	joined             time.Time    // when the partition joined the mirror (monotonic); set before the partition is shared
	caughtUp           atomic.Int64 // nanoseconds after joined at which it was last seen caught up (0: never)
	// highWatermarkAt: nanoseconds after joined at which the source high
	// watermark was last learned or confirmed (0: never); stored after
	// the high watermark it dates.
	highWatermarkAt atomic.Int64
}

// mirrorMetricsBuilt builds the node's registry on first use and returns
// the node's metrics.
func (n *Node) mirrorMetricsBuilt() *mirrorMetrics {
	mm := n.metrics
	mm.once.Do(func() {
		mm.registry = prometheus.NewRegistry()
		mm.fetchLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mirrord_mirror_fetch_latency_seconds",
			Help: "Time from sending a Fetch to a source broker to its answer (answered requests only). " +
				"Includes the broker's long-poll wait: a fetcher with nothing new to fetch shows about fetch.wait.max.ms.",
			Buckets: fetchLatencyBuckets,
		}, []string{"mirror", "source_broker"})
		mm.registry.MustRegister(mm.fetchLatency, newMirrorCollector(n), newLogDirCollector(n), newLogRecoveryCollector(n), newLogFilesCollector(n),
			newOfflineCollector(n), newClusterCollector(n))
	})
	return mm
}

// Metrics is the node's Prometheus registry: its mirrors' lag, bytes,
// batches, partition states and fetch latency.
func (n *Node) Metrics() *prometheus.Registry { return n.mirrorMetricsBuilt().registry }

// MirroredBytes is the number of record bytes every mirror of the node
// has appended.
func (n *Node) MirroredBytes() int64 { return n.metrics.bytes.Load() }

// observeFetch records one answered Fetch of a fetcher.
func (mm *mirrorMetrics) observeFetch(f *fetcher, d time.Duration) {
	mm.fetchLatency.WithLabelValues(f.mirror.name, strconv.Itoa(int(f.broker))).Observe(d.Seconds())
}

// fetcherStopped drops a fetcher's latency series; it runs as the fetcher
// ends, before its owner may start another for the same broker.
func (mm *mirrorMetrics) fetcherStopped(f *fetcher) {
	mm.fetchLatency.DeleteLabelValues(f.mirror.name, strconv.Itoa(int(f.broker)))
}

func (mm *mirrorMetrics) observeAppend(mp *mirrorPartition, info logstore.AppendInfo) {
	mm.bytes.Add(int64(info.Bytes))
	mm.batches.Add(int64(info.Batches))
	mp.metrics.bytes.Add(int64(info.Bytes))
	mp.metrics.batches.Add(int64(info.Batches))
}

// observeCaughtUp notes the time if the local log has reached the source
// high watermark last seen; the fetcher calls it after applying each
// answer for the partition, the paused probe after each high watermark.
func (mp *mirrorPartition) observeCaughtUp() {
	hw := mp.sourceHighWatermark.Load()
	if hw >= 0 && int64(mp.local.LogEndOffset()) >= hw {
		mp.metrics.caughtUp.Store(int64(time.Since(mp.metrics.joined)))
	}
}

// MirrorReport is a mirror and its partitions as /metrics and the status
// page show them.
type MirrorReport struct {
	Name            string
	SourceBootstrap string
	SourceClusterID string
	// SourceUnreachableSince is when the source stopped answering (the
	// first failure of the current run of failures of a request path),
	// zero while it answers; SourceError is the latest failure's text.
	SourceUnreachableSince time.Time
	SourceError            string
	// StaleAfter is the staleness bound: a source high watermark older
	// than this makes a partition's lag a lower bound.
	StaleAfter time.Duration
	Partitions []MirrorPartitionReport // by topic, then partition
	// GroupSync is the consumer group offset sync's last round.
	GroupSync GroupSyncStatus
	// TransactionSync is the transactional ID sync's last round.
	TransactionSync SyncStatus
	// ConfigSync is the topic config sync's last round.
	ConfigSync SyncStatus
	// ACLSync is the ACL sync's last round (mirror_acls.go).
	ACLSync SyncStatus
}

// MirrorPartitionReport is one mirrored partition's state, lag and
// counters (see the lag definitions at the top of mirror_metrics.go).
type MirrorPartitionReport struct {
	Topic     string
	Partition int32
	// State is the state DescribeClusterMirrors reports, Previous the
	// one before it; Error is the failure's text in FAILED (as
	// DescribeClusterMirrors reports it), RetryCount the attempts made
	// (-1: it waits for --recover).
	State, Previous mirrorstate.State
	Error           string
	RetryCount      int16
	// SourceHighWatermark is the source's high watermark as last learned,
	// -1 when unknown; SourceHighWatermarkAge is its age (-1 when
	// unknown); LogEndOffset is the local log end offset.
	SourceHighWatermark    int64
	SourceHighWatermarkAge time.Duration
	LogEndOffset           int64
	// LeaderEpoch is the local log's latest leader epoch, SourceLeaderEpoch
	// the source leader's as last learned; -1 when unknown (as
	// DescribeClusterMirrors reports them).
	LeaderEpoch, SourceLeaderEpoch int32
	// LagRecords is max(0, SourceHighWatermark - LogEndOffset), -1 while
	// the source high watermark is unknown. It is exact unless
	// LagLowerBound: the source high watermark is older than the
	// mirror's StaleAfter, and the lag may be larger.
	LagRecords    int64
	LagLowerBound bool
	// Lag is the lag in time: 0 when LagRecords is 0 and exact, else the
	// time since the partition was last seen caught up (or joined the
	// mirror).
	Lag time.Duration
	// Bytes and Batches count what the mirror appended to the partition
	// since it joined the mirror in this process.
	Bytes, Batches int64
	// UncleanTruncations counts the truncations that followed an unclean
	// leader election on the source (ULE_RECOVERY) in this process.
	UncleanTruncations int64
}

// MirrorReports reports every mirror of the node, by name.
func (n *Node) MirrorReports() []MirrorReport {
	n.mirrorsMu.Lock()
	defer n.mirrorsMu.Unlock()
	out := make([]MirrorReport, 0, len(n.mirrors))
	for _, m := range n.mirrors {
		out = append(out, m.report())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (m *mirror) report() MirrorReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := MirrorReport{Name: m.name, SourceBootstrap: m.props["bootstrap.servers"], SourceClusterID: m.sourceClusterID,
		StaleAfter: m.config.staleAfter(), Partitions: make([]MirrorPartitionReport, 0, len(m.partitions))}
	r.SourceUnreachableSince, r.SourceError = m.health.status()
	r.GroupSync = m.groupSync.get()
	r.TransactionSync = m.txnSync.get()
	r.ConfigSync = m.cfgSync.get()
	r.ACLSync = m.aclSync.get()
	now := time.Now()
	for _, mp := range m.partitions {
		record, errText := mp.status()
		pr := mp.report(record.State, now, r.StaleAfter)
		pr.Previous, pr.Error, pr.RetryCount = record.Previous, errText, retryCount(record)
		r.Partitions = append(r.Partitions, pr)
	}
	sort.Slice(r.Partitions, func(i, j int) bool {
		a, b := r.Partitions[i], r.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return r
}

// report is the partition's state, lag and counters at now; a source
// high watermark older than staleAfter makes the lag a lower bound.
func (mp *mirrorPartition) report(state mirrorstate.State, now time.Time, staleAfter time.Duration) MirrorPartitionReport {
	age := mp.highWatermarkAge(now) // before the high watermark: never older than the value read
	hw := mp.sourceHighWatermark.Load()
	leo := int64(mp.local.LogEndOffset())
	r := MirrorPartitionReport{Topic: mp.topic, Partition: mp.partition, State: state,
		SourceHighWatermark: hw, SourceHighWatermarkAge: age, LogEndOffset: leo, LagRecords: -1,
		Bytes: mp.metrics.bytes.Load(), Batches: mp.metrics.batches.Load(), UncleanTruncations: mp.metrics.uncleanTruncations.Load()}
	r.LeaderEpoch, r.SourceLeaderEpoch = mp.leaderEpochs()
	if hw >= 0 && leo >= 0 { // leo -1: the local log is offline
		r.LagRecords = max(hw-leo, 0)
		r.LagLowerBound = age < 0 || age > staleAfter
	}
	if r.LagRecords != 0 || r.LagLowerBound {
		r.Lag = max(now.Sub(mp.metrics.joined)-time.Duration(mp.metrics.caughtUp.Load()), 0)
	}
	return r
}

// leaderEpochs are the local log's latest leader epoch and the source
// leader's as last learned, -1 when unknown: what describe and report
// both show.
func (mp *mirrorPartition) leaderEpochs() (local, source int32) {
	return max(int32(mp.local.LatestEpoch()), -1), max(mp.sourceLeaderEpoch.Load(), -1)
}

// mirrorCollector reads the node's mirrors at scrape time.
type mirrorCollector struct {
	node                                           *Node
	lagRecords, lagSeconds, bytes, batches, states *prometheus.Desc
	uncleanTruncations                             *prometheus.Desc
	groupSyncGroups, groupSyncAt, groupSyncTook    *prometheus.Desc
	groupSyncErrors, groupOffsetLag                *prometheus.Desc
	txnSyncIDs, txnSyncErrors, txnSyncAt           *prometheus.Desc
	configSyncTopics, configSyncErrors, configAt   *prometheus.Desc
	aclSyncACLs, aclSyncErrors, aclSyncAt          *prometheus.Desc
	highWatermarkAge, reachable, unreachable       *prometheus.Desc
}

func newMirrorCollector(n *Node) *mirrorCollector {
	partitionLabels := []string{"mirror", "topic", "partition"}
	return &mirrorCollector{
		node: n,
		lagRecords: prometheus.NewDesc("mirrord_mirror_lag_records",
			"Records the mirror partition lacks: the source high watermark last learned (from a fetch answer, "+
				"or from ListOffsets for partitions no fetch answered lately) minus the local log end offset, at least 0. "+
				"A lower bound once mirrord_mirror_source_high_watermark_age_seconds passes the staleness bound "+
				"(twice 2*fetch.wait.max.ms+0.5 s, at least 2 s): the source may have grown since it last answered. "+
				"Absent until the source high watermark is known.", partitionLabels, nil),
		lagSeconds: prometheus.NewDesc("mirrord_mirror_lag_seconds",
			"How long the mirror partition has been behind: 0 while mirrord_mirror_lag_records is 0 and exact, "+
				"else the seconds since it was last seen caught up (local log end offset at or past the source high watermark "+
				"of an answer), or since it joined the mirror if never; this node's monotonic clock. "+
				"An upper bound, within one fetch round trip, of how long the oldest record not yet mirrored has been committed at the source.",
			partitionLabels, nil),
		bytes: prometheus.NewDesc("mirrord_mirror_bytes_total",
			"Record batch bytes appended to the mirror partition since it joined the mirror in this process.", partitionLabels, nil),
		batches: prometheus.NewDesc("mirrord_mirror_batches_total",
			"Record batches appended to the mirror partition since it joined the mirror in this process.", partitionLabels, nil),
		uncleanTruncations: prometheus.NewDesc("mirrord_mirror_unclean_truncations_total",
			"Truncations of the mirror partition that followed an unclean leader election on the source (ULE_RECOVERY, "+
				"with mirror.support.unclean.leader.election) since it joined the mirror in this process; "+
				"the removed batches are kept under truncated/ in the data directory.", partitionLabels, nil),
		groupSyncGroups: prometheus.NewDesc("mirrord_mirror_group_sync_groups",
			"Consumer groups of the source the last offset sync round handled: result=synced (their offsets are the source's, "+
				"clamped to what the mirror holds) or result=skipped_active (members on this node: left alone).", []string{"mirror", "result"}, nil),
		groupSyncAt: prometheus.NewDesc("mirrord_mirror_group_sync_timestamp_seconds",
			"When the last consumer group offset sync round ended (Unix seconds); absent before the first.", []string{"mirror"}, nil),
		groupSyncTook: prometheus.NewDesc("mirrord_mirror_group_sync_duration_seconds",
			"How long the last consumer group offset sync round took.", []string{"mirror"}, nil),
		groupSyncErrors: prometheus.NewDesc("mirrord_mirror_group_sync_errors_total",
			"Consumer group offset sync rounds that failed in part or whole since the mirror started.", []string{"mirror"}, nil),
		txnSyncIDs: prometheus.NewDesc("mirrord_mirror_transaction_sync_ids",
			"Transactional IDs of the source the last sync round holds on this node as the source has them (producer ID, epoch): "+
				"their producers go on here after a failover.", []string{"mirror"}, nil),
		txnSyncErrors: prometheus.NewDesc("mirrord_mirror_transaction_sync_errors_total",
			"Transactional ID sync rounds that failed in part or whole since the mirror started.", []string{"mirror"}, nil),
		txnSyncAt: prometheus.NewDesc("mirrord_mirror_transaction_sync_timestamp_seconds",
			"When the last transactional ID sync round ended (Unix seconds); absent before the first.", []string{"mirror"}, nil),
		configAt: prometheus.NewDesc("mirrord_mirror_config_sync_timestamp_seconds",
			"When the last topic config sync round ended (Unix seconds); absent before the first.", []string{"mirror"}, nil),
		configSyncTopics: prometheus.NewDesc("mirrord_mirror_config_sync_topics",
			"Mirror topics whose configs are the source topic's dynamic configs (minus topic.properties.exclude) after the last sync round.", []string{"mirror"}, nil),
		configSyncErrors: prometheus.NewDesc("mirrord_mirror_config_sync_errors_total",
			"Topic config sync rounds that failed in part or whole since the mirror started.", []string{"mirror"}, nil),
		aclSyncACLs: prometheus.NewDesc("mirrord_mirror_acl_sync_acls",
			"Source ACLs matching acls.include (ClusterMirror ones aside) that this node holds after the last ACL sync round.", []string{"mirror"}, nil),
		aclSyncErrors: prometheus.NewDesc("mirrord_mirror_acl_sync_errors_total",
			"ACL sync rounds that failed in part or whole since the mirror started (a node without an authorizer counts none: "+
				"describe says the sync is off).", []string{"mirror"}, nil),
		aclSyncAt: prometheus.NewDesc("mirrord_mirror_acl_sync_timestamp_seconds",
			"When the last ACL sync round ended (Unix seconds); absent before the first.", []string{"mirror"}, nil),
		groupOffsetLag: prometheus.NewDesc("mirrord_mirror_group_offset_lag",
			"Per synced group, the source's committed offsets minus the synced ones, summed over its mirrored partitions: "+
				"what a consumer of the group would read twice after a failover now.", []string{"mirror", "group"}, nil),
		states: prometheus.NewDesc("mirrord_mirror_partitions",
			"Partitions of the mirror in each state (as DescribeClusterMirrors reports it); every state is listed.",
			[]string{"mirror", "state"}, nil),
		highWatermarkAge: prometheus.NewDesc("mirrord_mirror_source_high_watermark_age_seconds",
			"Age of the source high watermark mirrord_mirror_lag_records is computed from: the seconds since the source "+
				"last answered for the partition (a fetch answer, dated at its request, or a ListOffsets). "+
				"Absent until the source high watermark is known.", partitionLabels, nil),
		reachable: prometheus.NewDesc("mirrord_mirror_source_reachable",
			"1 while every request path of the mirror to its source (metadata, each fetcher, each probe) answers; "+
				"0 once one fails at the network level, until it answers again.", []string{"mirror"}, nil),
		unreachable: prometheus.NewDesc("mirrord_mirror_source_unreachable_seconds",
			"Seconds since the first failure of the current run of failures of a request path of the mirror to its source; "+
				"0 while the source answers.", []string{"mirror"}, nil),
	}
}

func (c *mirrorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lagRecords
	ch <- c.lagSeconds
	ch <- c.bytes
	ch <- c.batches
	ch <- c.uncleanTruncations
	ch <- c.groupSyncGroups
	ch <- c.groupSyncAt
	ch <- c.groupSyncTook
	ch <- c.groupSyncErrors
	ch <- c.txnSyncIDs
	ch <- c.txnSyncErrors
	ch <- c.txnSyncAt
	ch <- c.configAt
	ch <- c.configSyncTopics
	ch <- c.configSyncErrors
	ch <- c.aclSyncACLs
	ch <- c.aclSyncErrors
	ch <- c.aclSyncAt
	ch <- c.groupOffsetLag
	ch <- c.states
	ch <- c.highWatermarkAge
	ch <- c.reachable
	ch <- c.unreachable
}

func (c *mirrorCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.node.MirrorReports() {
		var states [mirrorstate.NumStates]int
		for _, p := range m.Partitions {
			labels := []string{m.Name, p.Topic, strconv.Itoa(int(p.Partition))}
			if p.LagRecords >= 0 {
				ch <- prometheus.MustNewConstMetric(c.lagRecords, prometheus.GaugeValue, float64(p.LagRecords), labels...)
			}
			if p.SourceHighWatermarkAge >= 0 {
				ch <- prometheus.MustNewConstMetric(c.highWatermarkAge, prometheus.GaugeValue, p.SourceHighWatermarkAge.Seconds(), labels...)
			}
			ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, p.Lag.Seconds(), labels...)
			ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(p.Bytes), labels...)
			ch <- prometheus.MustNewConstMetric(c.batches, prometheus.CounterValue, float64(p.Batches), labels...)
			ch <- prometheus.MustNewConstMetric(c.uncleanTruncations, prometheus.CounterValue, float64(p.UncleanTruncations), labels...)
			states[p.State]++
		}
		for s, count := range states {
			ch <- prometheus.MustNewConstMetric(c.states, prometheus.GaugeValue, float64(count), m.Name, mirrorstate.State(s).String())
		}
		g := m.GroupSync
		ch <- prometheus.MustNewConstMetric(c.groupSyncGroups, prometheus.GaugeValue, float64(g.Synced), m.Name, "synced")
		ch <- prometheus.MustNewConstMetric(c.groupSyncGroups, prometheus.GaugeValue, float64(g.Skipped), m.Name, "skipped_active")
		ch <- prometheus.MustNewConstMetric(c.groupSyncErrors, prometheus.CounterValue, float64(g.Errors), m.Name)
		if !g.At.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.groupSyncAt, prometheus.GaugeValue, float64(g.At.UnixMilli())/1000, m.Name)
			ch <- prometheus.MustNewConstMetric(c.groupSyncTook, prometheus.GaugeValue, g.Duration.Seconds(), m.Name)
		}
		ch <- prometheus.MustNewConstMetric(c.txnSyncIDs, prometheus.GaugeValue, float64(m.TransactionSync.Synced), m.Name)
		ch <- prometheus.MustNewConstMetric(c.txnSyncErrors, prometheus.CounterValue, float64(m.TransactionSync.Errors), m.Name)
		ch <- prometheus.MustNewConstMetric(c.configSyncTopics, prometheus.GaugeValue, float64(m.ConfigSync.Synced), m.Name)
		ch <- prometheus.MustNewConstMetric(c.configSyncErrors, prometheus.CounterValue, float64(m.ConfigSync.Errors), m.Name)
		for desc, at := range map[*prometheus.Desc]time.Time{c.txnSyncAt: m.TransactionSync.At, c.configAt: m.ConfigSync.At} {
			if !at.IsZero() {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(at.UnixMilli())/1000, m.Name)
			}
		}
		ch <- prometheus.MustNewConstMetric(c.aclSyncACLs, prometheus.GaugeValue, float64(m.ACLSync.Synced), m.Name)
		ch <- prometheus.MustNewConstMetric(c.aclSyncErrors, prometheus.CounterValue, float64(m.ACLSync.Errors), m.Name)
		if !m.ACLSync.At.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.aclSyncAt, prometheus.GaugeValue, float64(m.ACLSync.At.UnixMilli())/1000, m.Name)
		}
		for group, lag := range g.Lag {
			ch <- prometheus.MustNewConstMetric(c.groupOffsetLag, prometheus.GaugeValue, float64(lag), m.Name, group)
		}
		reachable, unreachable := 1.0, 0.0
		if !m.SourceUnreachableSince.IsZero() {
			reachable, unreachable = 0, time.Since(m.SourceUnreachableSince).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.reachable, prometheus.GaugeValue, reachable, m.Name)
		ch <- prometheus.MustNewConstMetric(c.unreachable, prometheus.GaugeValue, unreachable, m.Name)
	}
}
