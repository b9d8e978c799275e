package console

import (
	"cmp"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/netio"
)

// Status is the one model both views render: /status.json is it encoded,
// /status.txt and the page (console.js) are drawn from it.
type Status struct {
	At   time.Time `json:"at"` // when the node was read
	Node Node      `json:"node"`
	// Failed lists every FAILED partition of every mirror, by mirror,
	// topic and partition: the views show them before anything else.
	Failed []FailedPartition `json:"failed"`
	// Offline lists the partitions whose log could not be opened.
	Offline []OfflinePartition `json:"offline"`
	Mirrors []Mirror           `json:"mirrors"` // by name
	// SampleIntervalSeconds and SamplesMax are the history's shape: one
	// sample per interval, the last SamplesMax kept per mirror.
	SampleIntervalSeconds float64 `json:"sampleIntervalSeconds"`
	SamplesMax            int     `json:"samplesMax"`
}

// Node is the node itself.
type Node struct {
	ID        int32  `json:"id"`
	ClusterID string `json:"clusterId"`
	Address   string `json:"address"` // host:port of its first listener
	LogDir    LogDir `json:"logDir"`
}

// LogDir is the data directory's space.
type LogDir struct {
	Known        bool  `json:"known"`
	FreeBytes    int64 `json:"freeBytes"`
	ReserveBytes int64 `json:"reserveBytes"`
	Low          bool  `json:"low"` // below the reserve: writes are refused
}

// FailedPartition is a FAILED partition with what is known of its failure.
type FailedPartition struct {
	Mirror    string `json:"mirror"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Error     string `json:"error"`
	Previous  string `json:"previous"` // the state it failed from
	// Attempts is the retries made; WaitsForRecover: it will not retry,
	// `mirrord mirrors --recover` is the way out.
	Attempts        int16 `json:"attempts"`
	WaitsForRecover bool  `json:"waitsForRecover"`
}

// OfflinePartition is a partition whose log cannot be opened.
type OfflinePartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Error     string `json:"error"`
}

// Mirror is one mirror: its source, syncs, partitions, history and the
// failover dry run.
type Mirror struct {
	Name            string `json:"name"`
	SourceBootstrap string `json:"sourceBootstrap"`
	SourceClusterID string `json:"sourceClusterId"`
	// SourceReachable is false from the first failure of the current run
	// of failures (SourceUnreachableSince) until the source answers.
	SourceReachable        bool         `json:"sourceReachable"`
	SourceUnreachableSince *time.Time   `json:"sourceUnreachableSince,omitempty"`
	SourceError            string       `json:"sourceError,omitempty"`
	StaleAfterSeconds      float64      `json:"staleAfterSeconds"`
	States                 []StateCount `json:"states"` // by state name
	GroupSync              GroupSync    `json:"groupSync"`
	ConfigSync             Sync         `json:"configSync"`
	ACLSync                Sync         `json:"aclSync"`
	TransactionSync        Sync         `json:"transactionSync"`
	// Partitions: the FAILED ones first, then by topic and partition.
	Partitions []Partition `json:"partitions"`
	// Totals now: the lag in records (of the partitions whose lag is
	// known; a lower bound when LagAtLeast), the largest lag in time,
	// the bytes appended per second over the last sample interval (-1
	// before two samples).
	LagRecords     int64   `json:"lagRecords"`
	LagAtLeast     bool    `json:"lagAtLeast"`
	LagSeconds     float64 `json:"lagSeconds"`
	BytesPerSecond float64 `json:"bytesPerSecond"`
	// History is the samples of the last SamplesMax intervals, oldest
	// first.
	History []Sample `json:"history"`
	DryRun  DryRun   `json:"dryRun"`
}

// StateCount is how many of a mirror's partitions are in a state.
type StateCount struct {
	State string `json:"state"`
	Count int    `json:"count"`
}

// Sync is the last round of one of a mirror's syncs (config, ACL,
// transactional ID).
type Sync struct {
	At              *time.Time `json:"at,omitempty"` // nil before the first round
	DurationSeconds float64    `json:"durationSeconds"`
	Synced          int        `json:"synced"`
	Error           string     `json:"error,omitempty"` // the last round's failure
	FailedRounds    int64      `json:"failedRounds"`
}

// GroupSync is the consumer group offset sync's last round, with each
// synced group's offset lag (largest first).
type GroupSync struct {
	Sync
	Skipped   int        `json:"skipped"`
	OffsetLag int64      `json:"offsetLag"` // summed over the groups
	Groups    []GroupLag `json:"groups"`
}

// GroupLag is one synced group's offset lag: the source's committed
// offsets minus those synced here, summed over its mirrored partitions.
type GroupLag struct {
	Group     string `json:"group"`
	OffsetLag int64  `json:"offsetLag"`
}

// Partition is one mirrored partition now.
type Partition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	State     string `json:"state"`
	Previous  string `json:"previous"`
	Error     string `json:"error,omitempty"`
	Attempts  int16  `json:"attempts"` // -1: waits for --recover
	// SourceHighWatermark is -1 when unknown, its age -1 when unknown.
	SourceHighWatermark           int64   `json:"sourceHighWatermark"`
	SourceHighWatermarkAgeSeconds float64 `json:"sourceHighWatermarkAgeSeconds"`
	LogEndOffset                  int64   `json:"logEndOffset"`
	// LeaderEpoch is the local log's latest leader epoch,
	// SourceLeaderEpoch the source leader's; -1 when unknown.
	LeaderEpoch       int32 `json:"leaderEpoch"`
	SourceLeaderEpoch int32 `json:"sourceLeaderEpoch"`
	// LagRecords is -1 while unknown; a lower bound when LagAtLeast.
	LagRecords int64   `json:"lagRecords"`
	LagAtLeast bool    `json:"lagAtLeast"`
	LagSeconds float64 `json:"lagSeconds"`
	Bytes      int64   `json:"bytes"` // appended since it joined the mirror in this process
	// BytesPerSecond is from the last two samples of Bytes, -1 before.
	BytesPerSecond float64 `json:"bytesPerSecond"`
}

// Sample is one point of a mirror's history.
type Sample struct {
	At             time.Time `json:"at"`
	LagRecords     int64     `json:"lagRecords"`
	LagSeconds     float64   `json:"lagSeconds"`
	BytesPerSecond float64   `json:"bytesPerSecond"` // -1: the first sample
}

// DryRun is what `mirrord mirrors --stop --dry-run` would print for the
// whole mirror: what a stop now would leave behind on the source. The
// console only shows it; Command is what to run to act.
type DryRun struct {
	Records    int64   `json:"records"`    // not yet mirrored, over the partitions not STOPPED
	AtLeast    bool    `json:"atLeast"`    // some lag is a lower bound (stale source high watermark)
	Unknown    int     `json:"unknown"`    // partitions whose lag is unknown
	LagSeconds float64 `json:"lagSeconds"` // the largest lag in time
	// GroupOffsetLag is the consumer groups' offset lag as of the last
	// group sync round (-1: no round yet).
	GroupOffsetLag int64  `json:"groupOffsetLag"`
	DryRunCommand  string `json:"dryRunCommand"`
	Command        string `json:"command"`
}

// build reads the source into a Status, taking throughput and history
// from h (under the console's lock).
func build(cluster netio.ClusterInfo, space broker.LogDirSpace, reports []engine.MirrorReport, offline []netio.OfflineLog, h *history, now time.Time) Status {
	address := net.JoinHostPort(cluster.Host, strconv.Itoa(int(cluster.Port)))
	s := Status{At: now, Failed: []FailedPartition{}, Offline: []OfflinePartition{}, Mirrors: []Mirror{},
		Node: Node{ID: cluster.NodeID, ClusterID: cluster.ClusterID, Address: address,
			LogDir: LogDir{Known: space.Known, FreeBytes: space.FreeBytes, ReserveBytes: space.ReserveBytes, Low: space.Low}},
		SampleIntervalSeconds: h.interval.Seconds(), SamplesMax: h.samplesMax}
	for _, o := range offline {
		s.Offline = append(s.Offline, OfflinePartition{Topic: o.Topic, Partition: o.Partition, Error: o.Error})
	}
	for _, r := range reports {
		m := buildMirror(r, h, address, now)
		for _, p := range m.Partitions {
			if p.State == mirrorstate.Failed.String() {
				s.Failed = append(s.Failed, FailedPartition{Mirror: m.Name, Topic: p.Topic, Partition: p.Partition, Error: p.Error,
					Previous: p.Previous, Attempts: max(p.Attempts, 0), WaitsForRecover: p.Attempts < 0})
			}
		}
		s.Mirrors = append(s.Mirrors, m)
	}
	slices.SortFunc(s.Mirrors, func(a, b Mirror) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortStableFunc(s.Failed, func(a, b FailedPartition) int {
		return cmp.Or(cmp.Compare(a.Mirror, b.Mirror), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return s
}

func buildMirror(r engine.MirrorReport, h *history, address string, now time.Time) Mirror {
	m := Mirror{Name: r.Name, SourceBootstrap: r.SourceBootstrap, SourceClusterID: r.SourceClusterID,
		SourceReachable: r.SourceUnreachableSince.IsZero(), SourceError: r.SourceError, StaleAfterSeconds: r.StaleAfter.Seconds(),
		States: stateCounts(r.Partitions), GroupSync: groupSync(r.GroupSync), ConfigSync: syncOf(r.ConfigSync),
		ACLSync: syncOf(r.ACLSync), TransactionSync: syncOf(r.TransactionSync), Partitions: make([]Partition, 0, len(r.Partitions)),
		BytesPerSecond: -1}
	if !m.SourceReachable {
		since := r.SourceUnreachableSince
		m.SourceUnreachableSince = &since
	}
	rates := h.partitionRates(r.Name)
	for _, p := range r.Partitions {
		row := Partition{Topic: p.Topic, Partition: p.Partition, State: p.State.String(), Previous: p.Previous.String(),
			Attempts: p.RetryCount, SourceHighWatermark: p.SourceHighWatermark, SourceHighWatermarkAgeSeconds: -1,
			LogEndOffset: p.LogEndOffset, LeaderEpoch: p.LeaderEpoch, SourceLeaderEpoch: p.SourceLeaderEpoch,
			LagRecords: p.LagRecords, LagAtLeast: p.LagRecords >= 0 && p.LagLowerBound,
			LagSeconds: p.Lag.Seconds(), Bytes: p.Bytes, BytesPerSecond: -1}
		if p.State == mirrorstate.Failed {
			row.Error = p.Error
		}
		if p.SourceHighWatermarkAge >= 0 {
			row.SourceHighWatermarkAgeSeconds = p.SourceHighWatermarkAge.Seconds()
		}
		if rate, ok := rates[partitionKey{p.Topic, p.Partition}]; ok {
			row.BytesPerSecond = rate
			m.BytesPerSecond = max(m.BytesPerSecond, 0) + rate
		}
		m.Partitions = append(m.Partitions, row)
	}
	// FAILED first; the report's order (topic, partition) otherwise.
	slices.SortStableFunc(m.Partitions, func(a, b Partition) int {
		return cmp.Compare(failedFirst(a.State), failedFirst(b.State))
	})
	m.LagRecords, m.LagAtLeast, m.LagSeconds = lagTotals(r.Partitions)
	m.History = h.samples(r.Name)
	m.DryRun = dryRun(r, m.GroupSync, address)
	return m
}

func failedFirst(state string) int {
	if state == mirrorstate.Failed.String() {
		return 0
	}
	return 1
}

// lagTotals is the lag in records summed over the partitions whose lag is
// known (a lower bound if any is), and the largest lag in time.
func lagTotals(partitions []engine.MirrorPartitionReport) (records int64, atLeast bool, seconds float64) {
	for _, p := range partitions {
		if p.LagRecords >= 0 {
			records += p.LagRecords
			atLeast = atLeast || p.LagLowerBound
		}
		seconds = max(seconds, p.Lag.Seconds())
	}
	return records, atLeast, seconds
}

// dryRun is --stop --dry-run's summary over the mirror's partitions not
// STOPPED (mirrors_stop.go printStopLags).
func dryRun(r engine.MirrorReport, groups GroupSync, address string) DryRun {
	d := DryRun{GroupOffsetLag: -1,
		DryRunCommand: "mirrord mirrors --bootstrap-server " + address + " --stop --dry-run --mirror " + r.Name + " --topics '.*'",
		Command:       "mirrord mirrors --bootstrap-server " + address + " --stop --mirror " + r.Name + " --topics '.*'"}
	if groups.At != nil {
		d.GroupOffsetLag = groups.OffsetLag
	}
	for _, p := range r.Partitions {
		if p.State == mirrorstate.Stopped {
			continue
		}
		switch {
		case p.LagRecords < 0:
			d.Unknown++
		default:
			d.Records += p.LagRecords
			d.AtLeast = d.AtLeast || p.LagLowerBound
		}
		d.LagSeconds = max(d.LagSeconds, p.Lag.Seconds())
	}
	return d
}

// stateCounts counts the partitions per state, by state name.
func stateCounts(partitions []engine.MirrorPartitionReport) []StateCount {
	counts := map[string]int{}
	for _, p := range partitions {
		counts[p.State.String()]++
	}
	out := make([]StateCount, 0, len(counts))
	for state, n := range counts {
		out = append(out, StateCount{State: state, Count: n})
	}
	slices.SortFunc(out, func(a, b StateCount) int { return cmp.Compare(a.State, b.State) })
	return out
}

func syncOf(s engine.SyncStatus) Sync {
	out := Sync{DurationSeconds: s.Duration.Seconds(), Synced: s.Synced, Error: s.Err, FailedRounds: s.Errors}
	if !s.At.IsZero() {
		at := s.At
		out.At = &at
	}
	return out
}

func groupSync(g engine.GroupSyncStatus) GroupSync {
	out := GroupSync{Sync: syncOf(engine.SyncStatus{At: g.At, Duration: g.Duration, Synced: g.Synced, Err: g.Err, Errors: g.Errors}),
		Skipped: g.Skipped, Groups: make([]GroupLag, 0, len(g.Lag))}
	for group, lag := range g.Lag {
		out.Groups = append(out.Groups, GroupLag{Group: group, OffsetLag: lag})
		out.OffsetLag += lag
	}
	slices.SortFunc(out.Groups, func(a, b GroupLag) int {
		return cmp.Or(cmp.Compare(b.OffsetLag, a.OffsetLag), cmp.Compare(a.Group, b.Group))
	})
	return out
}
