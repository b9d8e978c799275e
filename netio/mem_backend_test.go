package netio

import (
	"bytes"
	"context"
	"crypto/rand"
	"maps"
	"net"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

// memBackend is an in-memory Backend for netio's tests: partitions keep
// their batches in one byte slice and assign offsets on Produce. It knows
// nothing of transactions beyond handing out producer IDs.
type memBackend struct {
	mu           sync.Mutex
	topics       map[string]*memTopic
	nextProducer int64
	cluster      ClusterInfo
	groups       GroupCoordinator // nil: every group request fails (groups_test.go)
}

type memTopic struct {
	info       TopicInfo
	partitions []*memPartition
	configs    map[string]string // memConfigs
}

type memPartition struct {
	mu          sync.Mutex
	data        []byte
	positions   []int64            // batch start positions
	start       recordbatch.Offset // log start offset
	end         recordbatch.Offset // log end offset
	leaderEpoch recordbatch.Epoch
	watchers    Watchers
	reads       int // Read calls, for tests of what a fetch reads
}

func newMemBackend() *memBackend {
	return &memBackend{topics: map[string]*memTopic{}, cluster: ClusterInfo{ClusterID: "mem-cluster", NodeID: 1, Host: "127.0.0.1", Port: 9092}}
}

func (b *memBackend) Cluster() ClusterInfo { return b.cluster }

func (b *memBackend) Topics() []TopicInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []TopicInfo
	for _, t := range b.topics {
		out = append(out, t.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (b *memBackend) Topic(name string) (TopicInfo, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[name]
	if !ok {
		return TopicInfo{}, false
	}
	return t.info, true
}

func (b *memBackend) TopicByID(id TopicID) (TopicInfo, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.topics {
		if t.info.ID == id {
			return t.info, true
		}
	}
	return TopicInfo{}, false
}

func (b *memBackend) CreateTopic(_ context.Context, name string, partitions int32, _ map[string]string, validateOnly bool) (TopicInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.topics[name]; ok {
		return TopicInfo{}, kerr.TopicAlreadyExists
	}
	if partitions == -1 {
		partitions = 1 // num.partitions
	}
	var id TopicID
	rand.Read(id[:])
	t := &memTopic{info: TopicInfo{Name: name, ID: id, Partitions: partitions}}
	for range partitions {
		t.partitions = append(t.partitions, &memPartition{})
	}
	if !validateOnly {
		b.topics[name] = t
	}
	return t.info, nil
}

func (b *memBackend) DeleteTopic(_ context.Context, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.topics[name]; !ok {
		return kerr.UnknownTopicOrPartition
	}
	delete(b.topics, name)
	return nil
}

func (b *memBackend) CreatePartitions(_ context.Context, name string, count int32, validateOnly bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[name]
	switch {
	case !ok:
		return kerr.UnknownTopicOrPartition
	case count <= t.info.Partitions:
		return kerr.InvalidPartitions
	case validateOnly:
		return nil
	}
	for int32(len(t.partitions)) < count {
		t.partitions = append(t.partitions, &memPartition{})
	}
	t.info.Partitions = count
	return nil
}

func (b *memBackend) Partition(topic string, partition int32) (Partition, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[topic]
	if !ok || partition < 0 || partition >= int32(len(t.partitions)) {
		return nil, kerr.UnknownTopicOrPartition
	}
	return t.partitions[partition], nil
}

func (b *memBackend) Transactions() Transactions { return memTransactions{b} }

func (b *memBackend) Groups() GroupCoordinator {
	if b.groups == nil {
		return noGroups{}
	}
	return b.groups
}

type memTransactions struct{ b *memBackend }

func (t memTransactions) InitProducerID(context.Context, string, int32, int64, int16) (int64, int16, error) {
	t.b.mu.Lock()
	defer t.b.mu.Unlock()
	t.b.nextProducer++
	return t.b.nextProducer, 0, nil
}

func (memTransactions) AddPartitions(_ context.Context, _ string, _ int64, _ int16, _ string, partitions []int32) []error {
	return make([]error, len(partitions))
}

func (memTransactions) TransactionStates(context.Context, []string) []TransactionState { return nil }

func (memTransactions) VerifyPartitions(_ context.Context, _ string, _ int64, _ int16, _ string, partitions []int32) []error {
	return make([]error, len(partitions))
}

func (memTransactions) EndTransaction(_ context.Context, _ string, producerID int64, epoch int16, _, tv2 bool) (int64, int16, error) {
	if !tv2 {
		return -1, -1, nil
	}
	return producerID, epoch + 1, nil
}

func (memTransactions) AddOffsets(context.Context, string, int64, int16, string) error { return nil }

func (p *memPartition) LeaderEpoch() recordbatch.Epoch {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaderEpoch
}

func (p *memPartition) Offsets() Offsets {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Offsets{LogStartOffset: p.start, HighWatermark: p.end, LastStableOffset: p.end, LogEndOffset: p.end}
}

func (p *memPartition) Produce(_ context.Context, batches []byte, _ ProduceRequest) (ProduceResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	base := p.end
	it := recordbatch.NewIter(batches, true)
	for it.Next() {
		b := it.Batch()
		b.SetBaseOffset(p.end)
		b.SetLeaderEpoch(p.leaderEpoch)
		p.positions = append(p.positions, int64(len(p.data))+int64(it.Position()))
		p.end = b.NextOffset()
	}
	if it.Err() != nil {
		p.end = base
		return ProduceResult{}, kerr.CorruptMessage
	}
	p.data = append(p.data, batches...)
	p.watchers.Notify()
	return ProduceResult{BaseOffset: base, LogAppendTime: -1, LogStartOffset: p.start}, nil
}

func (p *memPartition) Read(offset recordbatch.Offset, maxBytes int32, _ Isolation, minOneBatch bool) (ReadResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
	offsets := Offsets{LogStartOffset: p.start, HighWatermark: p.end, LastStableOffset: p.end, LogEndOffset: p.end}
	if offset < p.start || offset > p.end {
		return ReadResult{Offsets: offsets}, kerr.OffsetOutOfRange
	}
	for _, position := range p.positions {
		b, _ := recordbatch.Parse(p.data[position:])
		if b.LastOffset() < offset {
			continue
		}
		length := min(int64(len(p.data))-position, int64(maxBytes))
		if minOneBatch {
			length = max(length, int64(len(b)))
		}
		file := memFile{bytes.NewReader(bytes.Clone(p.data))}
		return ReadResult{Records: FileRange{File: file, Position: position, Length: length}, Offsets: offsets}, nil
	}
	return ReadResult{Offsets: offsets}, nil
}

type memFile struct{ *bytes.Reader }

func (memFile) Fd() uintptr { return ^uintptr(0) }

func (p *memPartition) Watchers() *Watchers { return &p.watchers }

func (p *memPartition) ListOffset(timestamp int64, _ Isolation) (recordbatch.Offset, int64, recordbatch.Epoch, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch timestamp {
	case -2:
		return p.start, -1, p.leaderEpoch, nil
	case -1:
		return p.end, -1, p.leaderEpoch, nil
	}
	return -1, -1, -1, nil
}

func (p *memPartition) EndOffsetForEpoch(epoch recordbatch.Epoch) (recordbatch.Epoch, recordbatch.Offset) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch > p.leaderEpoch {
		return -1, -1
	}
	return p.leaderEpoch, p.end
}

func (p *memPartition) DeleteRecords(_ context.Context, offset recordbatch.Offset) (recordbatch.Offset, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if offset == -1 {
		offset = p.end
	}
	if offset > p.end {
		return 0, kerr.OffsetOutOfRange
	}
	p.start = max(p.start, offset)
	return p.start, nil
}

// startServer serves backend on a loopback port until the test ends.
func startServer(t *testing.T, backend Backend) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if mem, ok := backend.(*memBackend); ok {
		addr := ln.Addr().(*net.TCPAddr)
		mem.cluster.Host, mem.cluster.Port = addr.IP.String(), int32(addr.Port)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewServer(Config{Backend: backend}).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func (b *memBackend) Configs() Configs { return memConfigs{b} }

// memConfigs keeps each topic's overrides as they are given: a topic's
// describe lists them as DYNAMIC_TOPIC_CONFIG, sorted.
type memConfigs struct{ b *memBackend }

func (c memConfigs) DescribeConfigs(resource ConfigResource, names []string) ([]ConfigEntry, error) {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	t, ok := c.b.topics[resource.Name]
	if resource.Type != ConfigResourceTopic || !ok {
		return nil, kerr.UnknownTopicOrPartition
	}
	entries := []ConfigEntry{}
	for name, value := range t.configs {
		if names == nil || slices.Contains(names, name) {
			entries = append(entries, ConfigEntry{Name: name, Value: &value, Source: ConfigSourceTopic, Type: ConfigTypeString,
				Synonyms: []ConfigSynonym{{Name: name, Value: &value, Source: ConfigSourceTopic}}})
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return entries, nil
}

func (c memConfigs) AlterConfigs(_ context.Context, resource ConfigResource, changes []ConfigChange, incremental, validateOnly bool) error {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	t, ok := c.b.topics[resource.Name]
	if resource.Type != ConfigResourceTopic || !ok {
		return kerr.UnknownTopicOrPartition
	}
	configs := map[string]string{}
	if incremental {
		maps.Copy(configs, t.configs)
	}
	for _, change := range changes {
		switch change.Op {
		case ConfigSet:
			configs[change.Name] = *change.Value
		case ConfigDelete:
			delete(configs, change.Name)
		default:
			return kerr.InvalidConfig
		}
	}
	if !validateOnly {
		t.configs = configs
	}
	return nil
}
