package logstore

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

var (
	// ErrExists: Create of a partition the directory already holds.
	ErrExists = errors.New("logstore: partition exists")
	// ErrNotFound: a partition the directory does not hold.
	ErrNotFound = errors.New("logstore: partition not found")
	// ErrInvalidName: a topic name Kafka would not accept.
	ErrInvalidName = errors.New("logstore: invalid topic name")
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// PartitionInfo describes one partition log of a Dir.
type PartitionInfo struct {
	TopicPartition
	TopicID rb.TopicID
}

type partition struct {
	info PartitionInfo
	log  *Log // nil while the partition is offline
	// offline is why the log could not be opened (nil: online). The
	// topic ID is zero when partition.metadata was what failed.
	offline error
}

// OfflinePartition is a partition whose log could not be opened: the
// rest of the directory serves, this partition answers nothing until
// Rebuild replaces it (Kafka takes a replica in a failed log dir
// offline the same way).
type OfflinePartition struct {
	PartitionInfo
	// Path is the partition's directory; Err says what failed, naming
	// the file.
	Path string
	Err  error
}

// Dir is a data directory: meta.properties (cluster.id, node.id) and one
// directory per partition, named <topic>-<partition> as Kafka names them,
// holding partition.metadata (the topic ID) and the log. A partition
// whose partition.metadata or log cannot be opened is offline (Offline):
// the rest of the directory opens. Rebuild moves such a partition aside,
// to failed/<topic>-<partition>.<unix ms>, and starts it empty. Deleted
// partitions are renamed to <name>.<random>-delete first, so a crash
// mid-delete is finished at the next open.
//
// With FlushInterval, Dir owns one goroutine that flushes every log each
// interval; Close stops it and waits.
type Dir struct {
	fs        vfs.FS
	path      string
	cfg       Config
	clusterID string
	nodeID    int32

	files      *fileCache // bounds the open files of every log (files.go)
	mu         sync.Mutex
	partitions map[TopicPartition]*partition
	closed     bool

	stopFlusher chan struct{}
	flusherDone chan struct{}
}

const (
	metaPropertiesName      = "meta.properties"
	partitionMetadataName   = "partition.metadata"
	deletedSuffix           = "-delete"
	maxTopicNameLength      = 249
	defaultNodeID           = 1
	partitionMetadataFormat = "version: 0\ntopic_id: %s\n"
	// FailedDir is the data directory's folder of partition directories
	// Rebuild moved aside, kept for the operator.
	FailedDir = "failed"
)

// OpenDir opens (creating if needed) the data directory at dirPath and every
// partition log in it. cfg is the default for Create.
func OpenDir(fs vfs.FS, dirPath string, cfg Config) (*Dir, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := fs.MkdirAll(dirPath); err != nil {
		return nil, err
	}
	d := &Dir{fs: fs, path: dirPath, cfg: cfg, partitions: map[TopicPartition]*partition{}, files: newFileCache(cfg)}
	d.cfg.files = d.files
	if err := d.loadMeta(); err != nil {
		return nil, err
	}
	if err := d.loadPartitions(); err != nil {
		d.closeLogs()
		return nil, err
	}
	if cfg.Flush == FlushInterval {
		d.stopFlusher, d.flusherDone = make(chan struct{}), make(chan struct{})
		go d.flushEvery(cfg.FlushInterval)
	}
	return d, nil
}

// loadMeta reads meta.properties, writing a new cluster ID at first start.
func (d *Dir) loadMeta() error {
	meta, ok, err := ReadMeta(d.fs, d.path)
	if err != nil {
		return err
	}
	if !ok {
		meta = Meta{ClusterID: rb.NewTopicID().String(), NodeID: defaultNodeID}
		if err := FormatDir(d.fs, d.path, meta); err != nil {
			return err
		}
	}
	d.clusterID, d.nodeID = meta.ClusterID, meta.NodeID
	return nil
}

// Meta is a data directory's identity, as meta.properties holds it.
type Meta struct {
	ClusterID string // Kafka's base64 UUID form
	NodeID    int32
}

// ReadMeta reads the meta.properties of the data directory at dirPath;
// ok is false when there is none (the directory was never opened).
func ReadMeta(fs vfs.FS, dirPath string) (meta Meta, ok bool, err error) {
	name := path.Join(dirPath, metaPropertiesName)
	data, ok, err := ReadFile(fs, name)
	if err != nil || !ok {
		return Meta{}, false, err
	}
	meta.NodeID = defaultNodeID
	for i, line := range bytes.Split(data, []byte("\n")) {
		key, value, _ := strings.Cut(string(line), "=")
		switch key {
		case "cluster.id":
			meta.ClusterID = value
		case "node.id":
			n, err := strconv.ParseInt(value, 10, 32)
			if err != nil {
				return Meta{}, false, fmt.Errorf("%w: %s line %d: node.id %q", ErrCorrupt, name, i+1, value)
			}
			meta.NodeID = int32(n)
		}
	}
	if _, err := rb.ParseTopicID(meta.ClusterID); err != nil {
		return Meta{}, false, fmt.Errorf("%w: %s: cluster.id %q", ErrCorrupt, name, meta.ClusterID)
	}
	return meta, true, nil
}

// FormatDir gives the data directory at dirPath its identity (Kafka's
// kafka-storage format): it writes meta.properties when there is none,
// and refuses a directory that already has another identity, as a Kafka
// broker refuses a log dir of another cluster or node.
func FormatDir(fs vfs.FS, dirPath string, meta Meta) error {
	if _, err := rb.ParseTopicID(meta.ClusterID); err != nil {
		return fmt.Errorf("logstore: cluster ID %q: %w", meta.ClusterID, err)
	}
	have, ok, err := ReadMeta(fs, dirPath)
	if err != nil {
		return err
	}
	if ok {
		if have != meta {
			return fmt.Errorf("logstore: %s belongs to cluster %s as node %d, not to cluster %s as node %d", dirPath, have.ClusterID, have.NodeID, meta.ClusterID, meta.NodeID)
		}
		return nil
	}
	if err := fs.MkdirAll(dirPath); err != nil {
		return err
	}
	data := fmt.Appendf(nil, "version=1\ncluster.id=%s\nnode.id=%d\n", meta.ClusterID, meta.NodeID)
	return WriteFileAtomic(fs, dirPath, metaPropertiesName, data)
}

func (d *Dir) loadPartitions() error {
	names, err := d.fs.List(d.path)
	if err != nil {
		return err
	}
	var tps []TopicPartition
	var dirs []string
	for _, name := range names {
		full := path.Join(d.path, name)
		if strings.HasSuffix(name, deletedSuffix) {
			if err := d.fs.RemoveAll(full); err != nil {
				return err
			}
			continue
		}
		if tp, ok := parsePartitionDirName(name); ok {
			tps, dirs = append(tps, tp), append(dirs, full)
		}
	}
	// The partitions open logsAtOnce at a time: each is a few small reads
	// and maps (and after a crash a recovery of its active segment), whose
	// waits overlap.
	opened := make([]*partition, len(tps))
	errs := make([]error, len(tps))
	eachAtOnce(len(tps), func(i int) { opened[i], errs[i] = d.loadPartition(tps[i], dirs[i]) })
	for i, p := range opened {
		if p != nil {
			d.partitions[tps[i]] = p
		}
	}
	return errors.Join(errs...)
}

// loadPartition opens the directory full of partition tp; nil, and no
// error, when Create crashed before it existed (the directory is removed).
func (d *Dir) loadPartition(tp TopicPartition, full string) (*partition, error) {
	data, ok, err := ReadFile(d.fs, path.Join(full, partitionMetadataName))
	if err == nil && !ok {
		// Create crashed before the partition existed: nothing in it
		// was ever acknowledged.
		return nil, d.fs.RemoveAll(full)
	}
	return d.openPartition(tp, full, data, err), nil
}

// openPartition opens the log of one partition directory whose
// partition.metadata read gave data and readErr. What fails takes this
// partition offline, not the directory.
func (d *Dir) openPartition(tp TopicPartition, full string, data []byte, readErr error) *partition {
	p := &partition{info: PartitionInfo{TopicPartition: tp}}
	if readErr != nil {
		p.offline = fmt.Errorf("logstore: %s: %w", path.Join(full, partitionMetadataName), readErr)
		return p
	}
	id, err := decodePartitionMetadata(data)
	if err != nil {
		p.offline = fmt.Errorf("%w: %s: %w", ErrCorrupt, path.Join(full, partitionMetadataName), err)
		return p
	}
	p.info.TopicID = id
	p.log, p.offline = Open(d.fs, full, d.cfg)
	return p
}

// TopicNames lists the topics with a partition directory in the data
// directory at dirPath, sorted, but the internal ones (named "__...").
func TopicNames(fs vfs.FS, dirPath string) ([]string, error) {
	names, err := fs.List(dirPath)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var topics []string
	for _, name := range names {
		if tp, ok := parsePartitionDirName(name); ok && !strings.HasPrefix(tp.Topic, "__") && !seen[tp.Topic] {
			seen[tp.Topic] = true
			topics = append(topics, tp.Topic)
		}
	}
	sort.Strings(topics)
	return topics, nil
}

func parsePartitionDirName(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return TopicPartition{}, false
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || n < 0 || ValidateTopicName(name[:i]) != nil {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(n)}, true
}

func decodePartitionMetadata(data []byte) (rb.TopicID, error) {
	var encoded string
	if _, err := fmt.Sscanf(string(data), partitionMetadataFormat, &encoded); err != nil {
		return rb.TopicID{}, fmt.Errorf("want %q: %w", partitionMetadataFormat, err)
	}
	return rb.ParseTopicID(encoded)
}

// ValidateTopicName applies Kafka's rule: 1-249 of [a-zA-Z0-9._-], not "." or "..".
func ValidateTopicName(topic string) error {
	if topic == "" || topic == "." || topic == ".." || len(topic) > maxTopicNameLength {
		return fmt.Errorf("%w: %q", ErrInvalidName, topic)
	}
	for _, c := range []byte(topic) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q: character %q", ErrInvalidName, topic, c)
		}
	}
	return nil
}

// FileCacheStats is what the logs hold open and how the bound on it does.
func (d *Dir) FileCacheStats() FileCacheStats { return d.files.stats() }

// ClusterID is this data directory's cluster ID, made at first start.
func (d *Dir) ClusterID() string { return d.clusterID }

// NodeID is this data directory's node ID.
func (d *Dir) NodeID() int32 { return d.nodeID }

// Create makes an empty partition log with cfg. The partition is durable
// when Create returns.
func (d *Dir) Create(tp TopicPartition, id rb.TopicID, cfg Config) (*Log, error) {
	logs, err := d.CreateAll([]TopicPartition{tp}, id, cfg)
	if err != nil {
		return nil, err
	}
	return logs[0], nil
}

// logsAtOnce is how many partitions Close closes at once: their file and
// directory syncs overlap (the file system commits them together), which
// is most of the time closing takes.
const logsAtOnce = 8

// CreateAll makes empty partition logs of one topic with cfg, durable when
// it returns, in the order of tps (CreateMany).
func (d *Dir) CreateAll(tps []TopicPartition, id rb.TopicID, cfg Config) ([]*Log, error) {
	news := make([]NewPartition, len(tps))
	for i, tp := range tps {
		news[i] = NewPartition{PartitionInfo: PartitionInfo{TopicPartition: tp, TopicID: id}, Config: cfg}
	}
	return d.CreateMany(news)
}

// Get returns the log of tp.
func (d *Dir) Get(tp TopicPartition) (*Log, PartitionInfo, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.partitions[tp]
	if !ok || p.offline != nil {
		return nil, PartitionInfo{}, false
	}
	return p.log, p.info, true
}

// List returns every online partition, sorted by topic and partition.
func (d *Dir) List() []PartitionInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	infos := make([]PartitionInfo, 0, len(d.partitions))
	for _, p := range d.partitions {
		if p.offline == nil {
			infos = append(infos, p.info)
		}
	}
	sortPartitions(infos, func(i int) TopicPartition { return infos[i].TopicPartition })
	return infos
}

// Offline returns the partitions whose log could not be opened, sorted by
// topic and partition.
func (d *Dir) Offline() []OfflinePartition {
	d.mu.Lock()
	defer d.mu.Unlock()
	var offline []OfflinePartition
	for _, p := range d.partitions {
		if p.offline != nil {
			offline = append(offline, OfflinePartition{PartitionInfo: p.info, Path: path.Join(d.path, p.info.String()), Err: p.offline})
		}
	}
	sortPartitions(offline, func(i int) TopicPartition { return offline[i].TopicPartition })
	return offline
}

func sortPartitions[T any](s []T, tp func(i int) TopicPartition) {
	sort.Slice(s, func(i, j int) bool {
		a, b := tp(i), tp(j)
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
}

// Rebuild replaces partition tp, online or offline, by an empty log of
// topic ID id: its directory is moved aside to the failed folder (kept for
// the operator, never deleted here) and a new one is created. It returns
// the new log and where the old directory went. Durable when it returns.
func (d *Dir) Rebuild(tp TopicPartition, id rb.TopicID, cfg Config) (*Log, string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, "", ErrClosed
	}
	p, ok := d.partitions[tp]
	if !ok {
		return nil, "", fmt.Errorf("%w: %s", ErrNotFound, tp)
	}
	if p.log != nil {
		if err := p.log.Close(); err != nil && !errors.Is(err, ErrClosed) {
			return nil, "", err
		}
	}
	delete(d.partitions, tp) // offline until the new log is made
	failed := path.Join(d.path, FailedDir)
	if err := d.fs.MkdirAll(failed); err != nil {
		return nil, "", err
	}
	aside := path.Join(failed, fmt.Sprintf("%s.%d", tp, time.Now().UnixMilli()))
	if err := d.fs.Rename(path.Join(d.path, tp.String()), aside); err != nil {
		d.partitions[tp] = &partition{info: p.info, offline: fmt.Errorf("logstore: %s: move aside: %w", tp, err)}
		return nil, "", err
	}
	if err := errors.Join(d.fs.SyncDir(failed), d.fs.SyncDir(d.path)); err != nil {
		d.partitions[tp] = &partition{info: p.info, offline: fmt.Errorf("logstore: %s: moved to %s: %w", tp, aside, err)}
		return nil, aside, err
	}
	logs, err := d.makePartitions([]NewPartition{{PartitionInfo: PartitionInfo{TopicPartition: tp, TopicID: id}, Config: cfg}})
	if err != nil {
		d.partitions[tp] = &partition{info: p.info, offline: fmt.Errorf("logstore: %s: moved to %s, recreate: %w", tp, aside, err)}
		return nil, aside, err
	}
	d.partitions[tp] = &partition{info: PartitionInfo{TopicPartition: tp, TopicID: id}, log: logs[0]}
	return logs[0], aside, nil
}

// Delete closes and removes the partition tp. It is durable when it
// returns: the rename to a -delete name is synced before anything is removed.
func (d *Dir) Delete(tp TopicPartition) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.partitions[tp]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, tp)
	}
	delete(d.partitions, tp)
	if p.log != nil {
		if err := p.log.Close(); err != nil && !errors.Is(err, ErrClosed) {
			return err
		}
	}
	full := path.Join(d.path, tp.String())
	var suffix [8]byte
	rand.Read(suffix[:])
	doomed := fmt.Sprintf("%s.%x%s", full, suffix, deletedSuffix)
	if err := d.fs.Rename(full, doomed); err != nil {
		return err
	}
	if err := d.fs.SyncDir(d.path); err != nil {
		return err
	}
	return d.fs.RemoveAll(doomed)
}

// Close stops the flusher and closes every log.
func (d *Dir) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	d.closed = true
	d.mu.Unlock()
	if d.stopFlusher != nil {
		close(d.stopFlusher)
		<-d.flusherDone
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closeLogs()
}

// closeLogs closes every log, logsAtOnce at a time: each close syncs
// its segment, indexes and checkpoints, and the syncs of different logs
// overlap. It returns the first error.
func (d *Dir) closeLogs() error {
	logs := make([]*Log, 0, len(d.partitions))
	for _, p := range d.partitions {
		if p.log != nil {
			logs = append(logs, p.log)
		}
	}
	errs := make([]error, len(logs))
	eachAtOnce(len(logs), func(i int) { errs[i] = logs[i].Close() })
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// eachAtOnce runs fn(i) for every i in [0, n), logsAtOnce at a time, and
// returns when all have returned.
func eachAtOnce(n int, fn func(i int)) { eachAtOnceN(logsAtOnce, n, fn) }

// eachAtOnceN is eachAtOnce with workers at a time.
func eachAtOnceN(workers, n int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// flushEvery runs on the flusher goroutine.
func (d *Dir) flushEvery(interval time.Duration) {
	defer close(d.flusherDone)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-d.stopFlusher:
			return
		case <-ticker.C:
		}
		d.flushAll()
	}
}

// flushAll flushes every log, logsAtOnce at a time: the syncs of different
// logs overlap, so a tick over many partitions takes less than their
// syncs one after another. A failed flush marks that log failed (its
// next write returns the error); the others go on.
func (d *Dir) flushAll() {
	d.mu.Lock()
	logs := make([]*Log, 0, len(d.partitions))
	for _, p := range d.partitions {
		if p.log != nil {
			logs = append(logs, p.log)
		}
	}
	d.mu.Unlock()
	eachAtOnce(len(logs), func(i int) { _ = logs[i].Flush() })
}
