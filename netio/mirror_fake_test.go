package netio

// fakeMirrorAdmin is a MirrorAdmin over a small in-memory model, for the
// mirror admin tests: mirrors hold partitions whose state a change sets
// directly (no walk through the state machine), the source's topics are
// what a test says, and last mirror epochs are stored per asking cluster.
// mirrorMemBackend is a memBackend that administers mirrors with it.

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

type mirrorMemBackend struct {
	*memBackend
	admin *fakeMirrorAdmin
}

func newMirrorMemBackend() *mirrorMemBackend {
	return &mirrorMemBackend{memBackend: newMemBackend(), admin: newFakeMirrorAdmin()}
}

func (b *mirrorMemBackend) Mirrors() MirrorAdmin { return b.admin }

type fakeMirrorAdmin struct {
	mu      sync.Mutex
	mirrors map[string]*fakeMirror
	// sourceTopics are the topics of every source cluster, with their
	// partition counts.
	sourceTopics map[string]int32
	// epochs are the last mirror epochs stored, by asking cluster ID.
	epochs map[string]map[fakeEpochKey]LastMirrorEpoch
	// fail, when set, is every call's error.
	fail  error
	calls []string
}

type fakeMirror struct {
	config     map[string]string
	clusterID  string
	partitions []MirrorPartitionStatus // sorted by topic, partition
	// unreachableSince and sourceError: what describe says of the source.
	unreachableSince time.Time
	sourceError      string
	// groupSync: what describe says of the group offset sync.
	groupSync *MirrorGroupSync
}

type fakeEpochKey struct {
	id        TopicID
	partition int32
}

// fakeMirrorConfigKeys are the config keys the fake accepts.
var fakeMirrorConfigKeys = []string{"bootstrap.servers", "topics.include", "topics.exclude", "fetch.wait.max.ms"}

func newFakeMirrorAdmin() *fakeMirrorAdmin {
	return &fakeMirrorAdmin{
		mirrors:      map[string]*fakeMirror{},
		sourceTopics: map[string]int32{"orders": 2, "pay-eu": 1, "pay-us": 1, "tmp-1": 1},
		epochs:       map[string]map[fakeEpochKey]LastMirrorEpoch{},
	}
}

func (a *fakeMirrorAdmin) record(format string, args ...any) {
	a.calls = append(a.calls, fmt.Sprintf(format, args...))
}

// takeCalls returns the calls made since the last takeCalls.
func (a *fakeMirrorAdmin) takeCalls() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := strings.Join(a.calls, " ")
	a.calls = nil
	return out
}

func (a *fakeMirrorAdmin) CreateMirror(_ context.Context, name string, config map[string]string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.record("Create(%s)", name)
	switch {
	case a.fail != nil:
		return a.fail
	case name == "":
		return fmt.Errorf("empty mirror name: %w", kerr.InvalidRequest)
	case a.mirrors[name] != nil:
		return fmt.Errorf("mirror %q exists: %w", name, kerr.DuplicateResource)
	case config["bootstrap.servers"] == "":
		return fmt.Errorf("bootstrap.servers is required: %w", kerr.InvalidConfig)
	}
	for key := range config {
		if !slices.Contains(fakeMirrorConfigKeys, key) {
			return fmt.Errorf("unknown mirror config %q: %w", key, kerr.InvalidConfig)
		}
	}
	a.mirrors[name] = &fakeMirror{config: config, clusterID: "source-" + name}
	return nil
}

func (a *fakeMirrorAdmin) DeleteMirror(_ context.Context, name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.record("Delete(%s)", name)
	if a.fail != nil {
		return a.fail
	}
	if a.mirrors[name] == nil {
		return fmt.Errorf("mirror %q: %w", name, kerr.ResourceNotFound)
	}
	delete(a.mirrors, name)
	return nil
}

func (a *fakeMirrorAdmin) SetTopicsDesiredState(_ context.Context, name string, change TopicsChange, topics TopicSelection) ([]TopicResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.record("%s(%s, %v, %v, %v)", change, name, topics.Names, topics.Include, topics.Exclude)
	if a.fail != nil {
		return nil, a.fail
	}
	mirror := a.mirrors[name]
	if mirror == nil {
		return nil, fmt.Errorf("mirror %q: %w", name, kerr.ResourceNotFound)
	}
	selected, err := a.selectTopics(mirror, change, topics)
	if err != nil {
		return nil, err
	}
	var results []TopicResult
	for _, topic := range selected {
		results = append(results, TopicResult{Topic: topic, Err: a.changeTopic(mirror, change, topic)})
	}
	return results, nil
}

// selectTopics returns the sorted topics a selection names or matches:
// among the source's topics for a start, else among the mirror's.
func (a *fakeMirrorAdmin) selectTopics(mirror *fakeMirror, change TopicsChange, topics TopicSelection) ([]string, error) {
	include, err := fakeCompile(topics.Include)
	if err != nil {
		return nil, err
	}
	exclude, err := fakeCompile(topics.Exclude)
	if err != nil {
		return nil, err
	}
	candidates := mirror.topics()
	if change == StartMirroring {
		candidates = nil
		for topic := range a.sourceTopics {
			candidates = append(candidates, topic)
		}
	}
	chosen := map[string]bool{}
	for _, topic := range topics.Names {
		chosen[topic] = true
	}
	for _, topic := range candidates {
		if fakeMatch(include, topic) {
			chosen[topic] = true
		}
	}
	var out []string
	for topic := range chosen {
		if !fakeMatch(exclude, topic) {
			out = append(out, topic)
		}
	}
	sort.Strings(out)
	return out, nil
}

func fakeCompile(patterns []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, pattern := range patterns {
		re, err := regexp.Compile("^(?:" + pattern + ")$")
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", pattern, kerr.InvalidRegularExpression)
		}
		out = append(out, re)
	}
	return out, nil
}

func fakeMatch(patterns []*regexp.Regexp, topic string) bool {
	for _, re := range patterns {
		if re.MatchString(topic) {
			return true
		}
	}
	return false
}

func (m *fakeMirror) topics() []string {
	var out []string
	for _, p := range m.partitions {
		if len(out) == 0 || out[len(out)-1] != p.Topic {
			out = append(out, p.Topic)
		}
	}
	return out
}

// changeTopic applies change to every partition of topic.
func (a *fakeMirrorAdmin) changeTopic(mirror *fakeMirror, change TopicsChange, topic string) error {
	if change == StartMirroring && !slices.Contains(mirror.topics(), topic) {
		count, ok := a.sourceTopics[topic]
		if !ok {
			return fmt.Errorf("no topic %q on the source: %w", topic, kerr.UnknownTopicOrPartition)
		}
		for p := range count {
			mirror.partitions = append(mirror.partitions, MirrorPartitionStatus{Topic: topic, Partition: p, State: "UNKNOWN",
				SourceHighWatermark: -1, LogEndOffset: -1, LastMirrorEpoch: -1, LastMirrorOffset: -1})
		}
		sort.Slice(mirror.partitions, func(i, j int) bool {
			pi, pj := mirror.partitions[i], mirror.partitions[j]
			return pi.Topic < pj.Topic || pi.Topic == pj.Topic && pi.Partition < pj.Partition
		})
	}
	found := false
	for i := range mirror.partitions {
		if p := &mirror.partitions[i]; p.Topic == topic {
			found = true
			fakeApply(p, change)
		}
	}
	if !found {
		return fmt.Errorf("topic %q is not mirrored: %w", topic, kerr.UnknownTopicOrPartition)
	}
	return nil
}

func fakeApply(p *MirrorPartitionStatus, change TopicsChange) {
	switch change {
	case StartMirroring, ResumeMirroring:
		p.State = "MIRRORING"
	case PauseMirroring:
		p.State = "PAUSED"
	case StopMirroring:
		p.State = "STOPPED"
	case RecoverMirroring:
		if p.State == "FAILED" {
			p.State, p.Error, p.RetryCount = "MIRRORING", "", 0
		}
	}
}

func (a *fakeMirrorAdmin) ListMirrors(context.Context) ([]MirrorListing, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.record("List()")
	if a.fail != nil {
		return nil, a.fail
	}
	var out []MirrorListing
	for _, name := range a.names() {
		mirror := a.mirrors[name]
		out = append(out, MirrorListing{Name: name, SourceBootstrap: mirror.config["bootstrap.servers"], SourceClusterID: mirror.clusterID, Topics: mirror.topics()})
	}
	return out, nil
}

func (a *fakeMirrorAdmin) names() []string {
	var names []string
	for name := range a.mirrors {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (a *fakeMirrorAdmin) DescribeMirrors(_ context.Context, names []string, failedOnly bool) ([]MirrorDescription, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.record("Describe(%v, %v)", names, failedOnly)
	if a.fail != nil {
		return nil, a.fail
	}
	if names == nil {
		names = a.names()
	}
	var out []MirrorDescription
	for _, name := range names {
		mirror := a.mirrors[name]
		if mirror == nil {
			out = append(out, MirrorDescription{Name: name, Err: fmt.Errorf("mirror %q: %w", name, kerr.ResourceNotFound)})
			continue
		}
		description := MirrorDescription{Name: name, SourceBootstrap: mirror.config["bootstrap.servers"], SourceClusterID: mirror.clusterID,
			SourceUnreachableSince: mirror.unreachableSince, SourceError: mirror.sourceError, GroupSync: mirror.groupSync}
		for _, p := range mirror.partitions {
			if !failedOnly || p.State == "FAILED" {
				description.Partitions = append(description.Partitions, p)
			}
		}
		out = append(out, description)
	}
	return out, nil
}

func (a *fakeMirrorAdmin) LastMirrorEpochs(_ context.Context, askingClusterID string, partitions []TopicPartitions) ([]LastMirrorEpoch, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.record("LastMirrorEpochs(%s, %d topics)", askingClusterID, len(partitions))
	if a.fail != nil {
		return nil, a.fail
	}
	var out []LastMirrorEpoch
	for _, topic := range partitions {
		for _, partition := range topic.Partitions {
			epoch, ok := a.epochs[askingClusterID][fakeEpochKey{topic.TopicID, partition}]
			if !ok {
				epoch = LastMirrorEpoch{TopicID: topic.TopicID, Partition: partition, Epoch: -1, Offset: -1}
			}
			out = append(out, epoch)
		}
	}
	return out, nil
}

// setPartition replaces a partition's status (a test's way to make one
// FAILED or give it offsets).
func (a *fakeMirrorAdmin) setPartition(mirror string, status MirrorPartitionStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, p := range a.mirrors[mirror].partitions {
		if p.Topic == status.Topic && p.Partition == status.Partition {
			a.mirrors[mirror].partitions[i] = status
			return
		}
	}
	panic(fmt.Sprintf("no partition %s-%d in mirror %s", status.Topic, status.Partition, mirror))
}

// setUnreachable makes describe report the mirror's source unreachable
// since a time, with an error.
func (a *fakeMirrorAdmin) setUnreachable(mirror string, since time.Time, err string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mirrors[mirror].unreachableSince, a.mirrors[mirror].sourceError = since, err
}

// setGroupSync makes describe report the mirror's group offset sync.
func (a *fakeMirrorAdmin) setGroupSync(mirror string, status *MirrorGroupSync) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mirrors[mirror].groupSync = status
}

// storeEpoch stores a last mirror epoch for lookups from askingClusterID.
func (a *fakeMirrorAdmin) storeEpoch(askingClusterID string, epoch LastMirrorEpoch) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.epochs[askingClusterID] == nil {
		a.epochs[askingClusterID] = map[fakeEpochKey]LastMirrorEpoch{}
	}
	a.epochs[askingClusterID][fakeEpochKey{epoch.TopicID, epoch.Partition}] = epoch
}

func (a *fakeMirrorAdmin) setFail(err error) {
	a.mu.Lock()
	a.fail = err
	a.mu.Unlock()
}
