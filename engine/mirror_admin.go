package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	"github.com/twmb/franz-go/pkg/kerr"
)

// mirrorRecord is a mirror as persisted: its config and the topics the
// operator selected, in mirror-<name>.json in the data directory, written
// atomically on every change. (The per-partition state lives in the
// internal log __mirror_state, see stateLog; the mirror's definition
// stays in this file.)
type mirrorRecord struct {
	Name    string            `json:"name"`
	Config  map[string]string `json:"config"`
	Names   []string          `json:"names,omitempty"`
	Include []string          `json:"include,omitempty"`
	Exclude []string          `json:"exclude,omitempty"`
	Paused  []string          `json:"paused,omitempty"`
	Stopped []string          `json:"stopped,omitempty"` // failed over: never fetched again unless started
}

const mirrorFilePrefix, mirrorFileSuffix = "mirror-", ".json"

var mirrorName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Mirrors is the node's mirror administration (netio.MirrorBackend).
func (n *Node) Mirrors() netio.MirrorAdmin { return (*mirrorAdmin)(n) }

type mirrorAdmin Node

func (a *mirrorAdmin) node() *Node { return (*Node)(a) }

func (a *mirrorAdmin) CreateMirror(ctx context.Context, name string, config map[string]string) error {
	n := a.node()
	if !mirrorName.MatchString(name) {
		return fmt.Errorf("%w: mirror name %q: want 1-249 of [a-zA-Z0-9._-]", kerr.InvalidRequest, name)
	}
	n.mirrorsMu.Lock()
	defer n.mirrorsMu.Unlock()
	return n.createMirror(ctx, name, config, true)
}

// createMirror creates, persists and starts a mirror (mirrorsMu held);
// probe: ask its source first (a cluster's node makes the mirror etcd
// has, whose source the receiving node asked).
func (n *Node) createMirror(ctx context.Context, name string, config map[string]string, probe bool) error {
	if _, ok := n.mirrors[name]; ok {
		return fmt.Errorf("%w: mirror %q exists", kerr.DuplicateResource, name)
	}
	m, err := startMirror(n, name, config)
	if err != nil {
		return err
	}
	if probe {
		if err := m.probeSource(ctx); err != nil {
			m.stop()
			return err
		}
	}
	if err := n.saveMirror(m); err != nil {
		m.stop()
		return err
	}
	m.start()
	n.mirrors[name] = m
	n.log.Info("created mirror", "mirror", name, "source", config["bootstrap.servers"])
	return nil
}

func (a *mirrorAdmin) DeleteMirror(_ context.Context, name string) error {
	n := a.node()
	n.mirrorsMu.Lock()
	defer n.mirrorsMu.Unlock()
	m, ok := n.mirrors[name]
	if !ok {
		return fmt.Errorf("%w: no mirror %q", kerr.ResourceNotFound, name)
	}
	m.mu.Lock()
	active := 0
	for _, mp := range m.partitions {
		if record, _ := mp.status(); record.State != mirrorstate.Stopped {
			active++
		}
	}
	m.mu.Unlock()
	if active > 0 {
		return fmt.Errorf("%w: mirror %q still mirrors %d partitions: stop its topics first", kerr.InvalidRequest, name, active)
	}
	m.stop()
	delete(n.mirrors, name)
	if err := n.cfg.FS.Remove(path.Join(n.cfg.DataDir, mirrorFilePrefix+name+mirrorFileSuffix)); err != nil {
		return err
	}
	return n.dropACLOwners(name)
}

func (a *mirrorAdmin) SetTopicsDesiredState(ctx context.Context, name string, change netio.TopicsChange, topics netio.TopicSelection) ([]netio.TopicResult, error) {
	n := a.node()
	n.mirrorsMu.Lock()
	m, ok := n.mirrors[name]
	n.mirrorsMu.Unlock() // not held while the mirror's owner works: a source may ask this node meanwhile
	if !ok {
		return nil, fmt.Errorf("%w: no mirror %q", kerr.ResourceNotFound, name)
	}
	include, err := patterns("include", strings.Join(topics.Include, ","))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", kerr.InvalidRegularExpression, err)
	}
	exclude, err := patterns("exclude", strings.Join(topics.Exclude, ","))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", kerr.InvalidRegularExpression, err)
	}
	m.adminMu.Lock() // one change of the mirror's selection at a time
	defer m.adminMu.Unlock()
	if change == netio.StopMirroring {
		m.mu.Lock()
		matched, unknown := m.withPartitions(m.matching(topics.Names, include, exclude))
		m.mu.Unlock()
		if len(matched) == 0 {
			return unknown, nil
		}
		return append(m.stopTopics(ctx, matched), unknown...), nil
	}
	matched := m.change(change, topics.Names, include, exclude)
	if err := n.saveMirror(m); err != nil {
		return nil, err
	}
	var event mirrorstate.Event
	switch change {
	case netio.StartMirroring, netio.ResumeMirroring:
		event = mirrorstate.DesiredStateChanged{Desired: mirrorstate.DesiredMirroring}
	case netio.PauseMirroring:
		event = mirrorstate.DesiredStateChanged{Desired: mirrorstate.DesiredPaused}
	case netio.RecoverMirroring:
		event = mirrorstate.Recover{}
	}
	if err := m.do(ctx, func(ctx context.Context) {
		if change == netio.RecoverMirroring {
			m.rebuildOffline(ctx, matched) // offline.go
		}
		m.step(ctx, m.topicEvents(matched, event))
	}); err != nil {
		return nil, err
	}
	m.refreshSoon() // partitions new to the mirror come with the metadata
	results := make([]netio.TopicResult, 0, len(matched))
	for _, t := range matched {
		results = append(results, netio.TopicResult{Topic: t})
	}
	return results, nil
}

// change applies a topic-state change to the mirror's selection and
// returns the topics it names or matches.
func (m *mirror) change(change netio.TopicsChange, names []string, include, exclude []*regexp.Regexp) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	matched := m.matching(names, include, exclude)
	switch change {
	case netio.StartMirroring:
		for _, t := range names {
			m.names[t] = true
		}
		m.include = append(m.include, include...)
		m.exclude = append(m.exclude, exclude...)
		matched = m.matching(names, include, exclude)
		for _, t := range matched { // a stopped topic mirrors again, after alignment (failback)
			delete(m.stopped, t)
		}
	case netio.PauseMirroring, netio.ResumeMirroring:
		for _, t := range matched {
			m.paused[t] = change == netio.PauseMirroring
		}
	}
	return matched
}

// matching lists the topics a selection names or matches among the
// mirror's partitions, sorted (m.mu held).
func (m *mirror) matching(names []string, include, exclude []*regexp.Regexp) []string {
	set := map[string]bool{}
	for _, t := range names {
		set[t] = true
	}
	for topic := range m.heldTopics() {
		for _, re := range include {
			if re.MatchString(topic) {
				set[topic] = true
			}
		}
	}
	var out []string
	for t := range set {
		excluded := false
		for _, re := range exclude {
			excluded = excluded || re.MatchString(t)
		}
		if !excluded {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// withPartitions splits topics into those with a partition in the mirror
// (mirroring or stopped) and, as results, those without: a stop of a topic
// the mirror holds nothing of would report it writable and stop nothing
// (m.mu held).
func (m *mirror) withPartitions(topics []string) ([]string, []netio.TopicResult) {
	held := m.heldTopics()
	var known []string
	var unknown []netio.TopicResult
	for _, t := range topics {
		if held[t] {
			known = append(known, t)
			continue
		}
		unknown = append(unknown, netio.TopicResult{Topic: t,
			Err: netio.Errorf(kerr.UnknownTopicOrPartition, "mirror %s has no topic %s: nothing to stop", m.name, t)})
	}
	return known, unknown
}

// heldTopics is the topics the mirror has partitions of: on a cluster,
// those of the cluster's mirror topics of this mirror, wherever led
// (m.mu held).
func (m *mirror) heldTopics() map[string]bool {
	held := map[string]bool{}
	for tp := range m.partitions {
		held[tp.Topic] = true
	}
	if m.node.member != nil {
		m.addClusterTopics(held) // cluster_mirrors.go
	}
	return held
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (a *mirrorAdmin) ListMirrors(context.Context) ([]netio.MirrorListing, error) {
	n := a.node()
	n.mirrorsMu.Lock()
	defer n.mirrorsMu.Unlock()
	var out []netio.MirrorListing
	for _, m := range n.mirrors {
		m.mu.Lock()
		listing := netio.MirrorListing{Name: m.name, SourceBootstrap: m.props["bootstrap.servers"], SourceClusterID: m.sourceClusterID}
		topics := map[string]bool{}
		for tp := range m.partitions {
			topics[tp.Topic] = true
		}
		m.mu.Unlock()
		for t := range topics {
			listing.Topics = append(listing.Topics, t)
		}
		sort.Strings(listing.Topics)
		out = append(out, listing)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (a *mirrorAdmin) DescribeMirrors(_ context.Context, names []string, failedOnly bool) ([]netio.MirrorDescription, error) {
	n := a.node()
	n.mirrorsMu.Lock()
	defer n.mirrorsMu.Unlock()
	if names == nil {
		for name := range n.mirrors {
			names = append(names, name)
		}
		sort.Strings(names)
	}
	var out []netio.MirrorDescription
	for _, name := range names {
		m, ok := n.mirrors[name]
		if !ok {
			out = append(out, netio.MirrorDescription{Name: name, Err: fmt.Errorf("%w: no mirror %q", kerr.ResourceNotFound, name)})
			continue
		}
		out = append(out, m.describe(failedOnly))
	}
	return out, nil
}

func (m *mirror) describe(failedOnly bool) netio.MirrorDescription {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := netio.MirrorDescription{Name: m.name, SourceBootstrap: m.props["bootstrap.servers"], SourceClusterID: m.sourceClusterID}
	d.SourceUnreachableSince, d.SourceError = m.health.status()
	d.GroupSync = groupSyncDescription(m.groupSync.get())
	acls := m.aclSync.get()
	d.ACLSync = &netio.MirrorACLSync{At: acls.At, Duration: acls.Duration, Synced: acls.Synced, FailedRounds: acls.Errors, Error: acls.Err}
	now, staleAfter := time.Now(), m.config.staleAfter()
	for tp, mp := range m.partitions {
		record, errText := mp.status()
		if failedOnly && record.State != mirrorstate.Failed && errText == "" {
			continue
		}
		status := netio.MirrorPartitionStatus{Topic: tp.Topic, Partition: tp.Partition, State: record.State.String(), Error: errText,
			RetryCount: retryCount(record), LastMirrorEpoch: -1, LastMirrorOffset: -1}
		status.LeaderEpoch, status.SourceLeaderEpoch = mp.leaderEpochs()
		status.Leader = -1 // a node alone's; a cluster's are set by describeClusterMirrors
		if record.State == mirrorstate.Stopping || record.State == mirrorstate.Stopped {
			status.SourceHighWatermark, status.SourceHighWatermarkAge, status.LagTime = -1, -1, -1
			status.LogEndOffset = int64(mp.local.LogEndOffset())
			status.LastMirrorEpoch, status.LastMirrorOffset = int32(record.LastMirrorEpoch), int64(record.LastMirrorOffset)
		} else {
			report := mp.report(record.State, now, staleAfter)
			status.LagTime = report.Lag
			if report.LagRecords < 0 {
				status.LagTime = -1
			}
			status.SourceHighWatermark, status.SourceHighWatermarkAge = report.SourceHighWatermark, report.SourceHighWatermarkAge
			status.Stale, status.LogEndOffset = report.LagLowerBound, report.LogEndOffset
		}
		d.Partitions = append(d.Partitions, status)
	}
	sort.Slice(d.Partitions, func(i, j int) bool {
		a, b := d.Partitions[i], d.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return d
}

// groupSyncDescription is a group sync round as describe shows it: the
// groups synced with their lag and those skipped, by name.
func groupSyncDescription(s groupSyncStatus) *netio.MirrorGroupSync {
	d := &netio.MirrorGroupSync{At: s.At, Duration: s.Duration, Synced: s.Synced, Skipped: s.Skipped, FailedRounds: s.Errors, Error: s.Err}
	for group, lag := range s.Lag {
		d.Groups = append(d.Groups, netio.MirrorGroupSyncGroup{Group: group, OffsetLag: lag})
	}
	for _, group := range s.SkippedGroups {
		d.Groups = append(d.Groups, netio.MirrorGroupSyncGroup{Group: group, OffsetLag: -1, Skipped: true})
	}
	sort.Slice(d.Groups, func(i, j int) bool { return d.Groups[i].Group < d.Groups[j].Group })
	return d
}

func (a *mirrorAdmin) LastMirrorEpochs(_ context.Context, clusterID string, partitions []netio.TopicPartitions) ([]netio.LastMirrorEpoch, error) {
	n := a.node()
	n.mirrorsMu.Lock()
	defer n.mirrorsMu.Unlock()
	return n.lastMirrorEpochs(clusterID, partitions), nil
}

// saveMirror persists a mirror's record (mirrorsMu held).
func (n *Node) saveMirror(m *mirror) error {
	m.mu.Lock()
	record := mirrorRecord{Name: m.name, Config: m.props}
	for t := range m.names {
		record.Names = append(record.Names, t)
	}
	for t, paused := range m.paused {
		if paused {
			record.Paused = append(record.Paused, t)
		}
	}
	for t := range m.stopped {
		record.Stopped = append(record.Stopped, t)
	}
	record.Include = patternSources(m.include)
	record.Exclude = patternSources(m.exclude)
	m.mu.Unlock()
	sort.Strings(record.Names)
	sort.Strings(record.Paused)
	sort.Strings(record.Stopped)
	data, err := json.MarshalIndent(record, "", "  ")
	if err != nil {
		return err
	}
	return logstore.WriteFileAtomic(n.cfg.FS, n.cfg.DataDir, mirrorFilePrefix+m.name+mirrorFileSuffix, data)
}

// patterns compiles a comma-separated list of regular expressions, each
// anchored to match a whole name (Java's Pattern.matches).
func patterns(key, list string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil {
			return nil, fmt.Errorf("%s pattern %q: %v", key, p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// patternSources gives back the patterns as the operator wrote them
// (without the anchoring patterns adds).
func patternSources(res []*regexp.Regexp) []string {
	var out []string
	for _, re := range res {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(re.String(), "^(?:"), ")$"))
	}
	return out
}

// readMirrorRecords reads every mirror persisted in the data directory.
func (n *Node) readMirrorRecords() ([]mirrorRecord, error) {
	names, err := n.cfg.FS.List(n.cfg.DataDir)
	if err != nil {
		return nil, err
	}
	var records []mirrorRecord // bounded by the mirrors an operator created
	for _, file := range names {
		if !strings.HasPrefix(file, mirrorFilePrefix) || !strings.HasSuffix(file, mirrorFileSuffix) {
			continue
		}
		data, _, err := logstore.ReadFile(n.cfg.FS, path.Join(n.cfg.DataDir, file))
		if err != nil {
			return nil, err
		}
		var record mirrorRecord
		if err := json.Unmarshal(data, &record); err != nil {
			return nil, fmt.Errorf("engine: %s: %w", file, err)
		}
		records = append(records, record)
	}
	return records, nil
}

// restoreSelection sets the topics a persisted mirror selected (m.mu
// held, or m not yet shared).
func (m *mirror) restoreSelection(record mirrorRecord) {
	include, _ := patterns("include", strings.Join(record.Include, ","))
	exclude, _ := patterns("exclude", strings.Join(record.Exclude, ","))
	for _, t := range record.Names {
		m.names[t] = true
	}
	for _, t := range record.Paused {
		m.paused[t] = true
	}
	for _, t := range record.Stopped {
		m.stopped[t] = true
	}
	m.include, m.exclude = append(m.include, include...), append(m.exclude, exclude...)
}

// markPersistedMirrors makes the local topics the persisted mirrors
// select read-only, before the node's transaction recovery runs: the open
// transactions in those partitions are the source's, whose markers the
// mirror will copy, and recovery must not abort them as orphans (a
// marker of ours would put the mirror at odds with the source). No mirror
// starts here; loadMirrors starts them once the node is open.
func (n *Node) markPersistedMirrors() error {
	records, err := n.readMirrorRecords()
	if err != nil {
		return err
	}
	for _, record := range records {
		config, err := ParseMirrorConfig(record.Config)
		if err != nil {
			return fmt.Errorf("engine: mirror %s: %w", record.Name, err)
		}
		m := &mirror{name: record.Name, config: config, names: map[string]bool{}, paused: map[string]bool{}, stopped: map[string]bool{}}
		m.restoreSelection(record)
		n.markMirrored(m)
	}
	return nil
}

// loadMirrors starts every mirror persisted in the data directory.
func (n *Node) loadMirrors() error {
	records, err := n.readMirrorRecords()
	if err != nil {
		return err
	}
	if err := n.loadACLOwnership(records); err != nil {
		return err
	}
	for _, record := range records {
		m, err := startMirror(n, record.Name, record.Config)
		if err != nil {
			return fmt.Errorf("engine: mirror %s: %w", record.Name, err)
		}
		m.mu.Lock()
		m.restoreSelection(record)
		n.markMirrored(m)
		m.mu.Unlock()
		m.start() // restores its partitions' machines first (a stop a crash interrupted resumes)
		n.mirrors[record.Name] = m
	}
	return nil
}

// markMirrored makes the local topics a restarted mirror selects
// read-only at once, before its first metadata refresh (m.mu held).
func (n *Node) markMirrored(m *mirror) {
	for _, t := range n.TopicsSnapshot() {
		if m.selects(t.Name) {
			for _, p := range t.Partitions {
				p.SetReadOnly(mirrorTopicRefusal(t.Name, m.name))
			}
		}
		if !m.stopped[t.Name] {
			continue
		}
		// A stop a crash interrupted stays read-only until it resumes
		// (restorePartitions): its open transactions are the source's.
		for i, p := range t.Partitions {
			if v, ok := n.states.get(MirrorStateKey{Mirror: m.name, TopicID: t.ID, Partition: int32(i)}); ok && v.State != mirrorstate.Stopped {
				p.SetReadOnly(mirrorTopicRefusal(t.Name, m.name))
			}
		}
	}
}
