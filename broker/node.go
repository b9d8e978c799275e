package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mirrord/mirrord/acl"
	"github.com/mirrord/mirrord/auth"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Config configures a Node.
type Config struct {
	FS      vfs.FS
	DataDir string
	// Identity, when set, is the data directory's cluster and node ID (a
	// node of a cluster): a new directory is formatted with it, one of
	// another identity is refused. Unset: a new directory gets a new
	// cluster ID and node ID 1.
	Identity *logstore.Meta
	// Log is the default partition log configuration.
	Log logstore.Config
	// Host and Port are the advertised address (Metadata answers them).
	Host   string
	Port   int32
	Logger *slog.Logger
	// MessageMaxBytes bounds a produced batch on topics without
	// max.message.bytes (message.max.bytes); 0 means Kafka's default,
	// DefaultMessageMaxBytes.
	MessageMaxBytes int32
	// InternalTopics are the node's own topics (one partition each, made
	// by CreateInternalLog): clients may read them but not create,
	// produce to, delete or grow them.
	InternalTopics []string
	// OffsetsRetention is how long the committed offsets of an Empty group
	// stay (offsets.retention.minutes); 0 means Kafka's default, 7 days.
	OffsetsRetention time.Duration
	// ConsumerSessionTimeout and ConsumerHeartbeatInterval are the
	// consumer groups' (KIP-848) group.consumer.session.timeout.ms and
	// group.consumer.heartbeat.interval.ms; 0 means Kafka's defaults, 45 s
	// and 5 s. The interval must stay below the timeout.
	ConsumerSessionTimeout, ConsumerHeartbeatInterval time.Duration
	// Transactions are the transaction coordinator's settings; a zero
	// field takes Kafka's default (DefaultTransactionConfig).
	Transactions TransactionConfig
	// NumPartitions is the partition count of a topic created without one
	// (num.partitions); 0 means Kafka's default, 1.
	NumPartitions int32
	// RetentionCheckInterval is how often retention by time and size runs
	// on the writable topics (log.retention.check.interval.ms); 0 means
	// Kafka's default, 5 minutes.
	RetentionCheckInterval time.Duration
	// StaticConfigs are the broker configs of the node's config file
	// (server.properties), by Kafka's name, as ApplyServerProperties read
	// them: DescribeConfigs reports them as STATIC_BROKER_CONFIG, and the
	// ones that are topic configs' synonyms are the topics' defaults.
	StaticConfigs map[string]string
	// MirrorConfigFilesDir is mirror.config.files.dir, read by the
	// engine: the directory the ssl.*.location files of mirror configs
	// must lie in; empty: anywhere.
	MirrorConfigFilesDir string
	// AutoCreateTopicsDisable turns off the creation of a topic a
	// Metadata request names (auto.create.topics.enable=false).
	AutoCreateTopicsDisable bool
	// Cleaner is the log cleaner's (DefaultCleanerConfig for zero fields).
	Cleaner CleanerConfig
	// Authorizer is the ACL authorizer's (authorizer.go); none by default.
	Authorizer AuthorizerConfig
	// LogDirReserveBytes is log.dir.reserve.bytes (log_dir_space.go): the
	// free space kept back for the node's own writes; 0 means the default
	// (1% of the file system, at most DefaultLogDirReserveBytesMax),
	// negative none.
	LogDirReserveBytes int64
	// FreeSpace reports the data directory's space; nil: Statfs on vfs.OS,
	// none (no reserve) on another file system.
	FreeSpace FreeSpace
	// ReplicaLagTimeMax is replica.lag.time.max.ms (replica.go): a
	// follower not caught up this long leaves the ISR; 0 means Kafka's
	// default, DefaultReplicaLagTimeMax.
	ReplicaLagTimeMax time.Duration
}

// TransactionConfig is the transaction coordinator's settings, with
// Kafka's broker config names.
type TransactionConfig struct {
	// MaxTimeout is transaction.max.timeout.ms: the longest transaction
	// timeout InitProducerID accepts.
	MaxTimeout time.Duration
	// AbortTimedOutInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms: how
	// often transactions past their timeout are aborted (and unfinished
	// markers retried, idle IDs expired).
	AbortTimedOutInterval time.Duration
	// TransactionalIDExpiration is transactional.id.expiration.ms: a
	// transactional ID without a transaction, unused this long, is
	// forgotten.
	TransactionalIDExpiration time.Duration
	// ProducerIDExpiration is producer.id.expiration.ms: a partition
	// forgets a producer without an open transaction idle this long.
	ProducerIDExpiration time.Duration
}

// DefaultTransactionConfig is Kafka 4.4's defaults.
var DefaultTransactionConfig = TransactionConfig{
	MaxTimeout:                15 * time.Minute,
	AbortTimedOutInterval:     10 * time.Second,
	TransactionalIDExpiration: 7 * 24 * time.Hour,
	ProducerIDExpiration:      24 * time.Hour,
}

// withDefaults fills the zero fields with Kafka's defaults.
func (c TransactionConfig) withDefaults() TransactionConfig {
	d := DefaultTransactionConfig
	for _, f := range []struct{ v, def *time.Duration }{{&c.MaxTimeout, &d.MaxTimeout},
		{&c.AbortTimedOutInterval, &d.AbortTimedOutInterval}, {&c.TransactionalIDExpiration, &d.TransactionalIDExpiration},
		{&c.ProducerIDExpiration, &d.ProducerIDExpiration}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return c
}

// Node is the Kafka node: the partition logs of its data directory and
// the topics they form, served as the netio.Backend.
//
// Concurrency: mu guards the topic map; each partition serializes its own
// writes. Topic and partition objects are never mutated in place after
// creation except a topic's partition list, which only grows (under mu).
type Node struct {
	cfg     Config
	dir     *logstore.Dir
	log     *slog.Logger
	txns    *transactions
	groups  groupCoordinator
	cluster netio.ClusterInfo
	// retention runs retention by time and size (retention.go).
	retention *retention
	cleaner   *cleaner
	// scram is the SCRAM credential store (scram_credentials.go).
	scram *auth.ScramCredentials
	// authorizer holds the ACLs (nil: no authorizer, everything allowed).
	authorizer *acl.Authorizer
	// space is the log directory's free space (nil: unknown, no reserve).
	space *logDirSpace
	// recovery logs and counts what log recovery cut (log_recovery.go).
	recovery *logRecovery
	// isr is the ISR goroutine of a node in a cluster (replica.go).
	isr isrKeeper
	// live is the cluster's live nodes (replica_live.go).
	live liveNodes

	mu     sync.RWMutex
	topics map[string]*topic     // bounded by the partitions on disk
	byID   map[rb.TopicID]*topic // the same topics, by ID
}

type topic struct {
	name       string
	id         rb.TopicID
	partitions []*Partition
	internal   bool // Config.InternalTopics: no produce, delete or DeleteRecords
	// overrides are the topic's configs as Kafka writes them, origin who
	// set them ("" a client), settings what they set on its partitions;
	// changed under Node.mu (topic_configs_alter.go).
	overrides map[string]string
	origin    string
	settings  topicSettings
}

// openedPartition is a partition of the data directory as it opened:
// its log, or why it is offline.
type openedPartition struct {
	logstore.PartitionInfo
	log     *logstore.Log
	offline error
}

// openedPartitions lists the directory's partitions, online and offline,
// sorted by topic and partition.
func openedPartitions(dir *logstore.Dir) []openedPartition {
	var all []openedPartition
	for _, info := range dir.List() {
		log, _, _ := dir.Get(info.TopicPartition)
		all = append(all, openedPartition{PartitionInfo: info, log: log})
	}
	for _, o := range dir.Offline() {
		all = append(all, openedPartition{PartitionInfo: o.PartitionInfo, offline: o.Err})
	}
	sort.Slice(all, func(i, j int) bool { return compareTopicPartitions(all[i].TopicPartition, all[j].TopicPartition) < 0 })
	return all
}

// dropUnfinishedPartition deletes a partition found past a missing one.
// Partitions are created in parallel and acknowledged together, so a crash
// can leave partition 5 of a creation without partition 4; such a
// partition never held a record. One that did, or one that cannot be
// opened to tell, means the directory lost data: an error.
func dropUnfinishedPartition(dir *logstore.Dir, e openedPartition, missing int) error {
	if e.offline != nil {
		return fmt.Errorf("broker: topic %s: partition %d cannot be opened (%w) and partition %d is missing",
			e.Topic, e.Partition, e.offline, missing)
	}
	if e.log.LogEndOffset() != 0 || e.log.LogStartOffset() != 0 {
		return fmt.Errorf("broker: topic %s: partition %d holds offsets up to %d but partition %d is missing",
			e.Topic, e.Partition, e.log.LogEndOffset(), missing)
	}
	if err := dir.Delete(e.TopicPartition); err != nil {
		return fmt.Errorf("broker: remove %s, left by a crash past missing partition %d: %w", e.TopicPartition, missing, err)
	}
	return nil
}

// errInternalTopic refuses a client's write, delete or growth of an
// internal topic.
func errInternalTopic(name string) error {
	return fmt.Errorf("%w: %s is internal: only the node writes it", kerr.InvalidTopicException, name)
}

// Open opens the data directory and every partition log in it. prepare,
// if set, runs before the transaction recovery: what it makes read-only
// (SetReadOnly) keeps its open transactions, which recovery would abort
// as orphans.
func Open(cfg Config, prepare func(*Node) error) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.InternalTopics = append(slices.Clone(cfg.InternalTopics), consumerOffsetsTopic)
	recovery := newLogRecovery(cfg.Logger, cfg.Log.RecoveryTruncated)
	cfg.Log.RecoveryTruncated = recovery.truncated
	if cfg.Identity != nil {
		if err := logstore.FormatDir(cfg.FS, cfg.DataDir, *cfg.Identity); err != nil {
			return nil, err
		}
	}
	dir, err := logstore.OpenDir(cfg.FS, cfg.DataDir, cfg.Log)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, dir: dir, log: cfg.Logger, recovery: recovery, topics: map[string]*topic{}, byID: map[rb.TopicID]*topic{}}
	if n.space, err = openLogDirSpace(cfg, cfg.Logger); err != nil {
		dir.Close()
		return nil, err
	}
	n.cluster = netio.ClusterInfo{ClusterID: dir.ClusterID(), NodeID: dir.NodeID(), Host: cfg.Host, Port: cfg.Port}
	for _, e := range openedPartitions(dir) {
		info := e.PartitionInfo
		t := n.topics[info.Topic]
		have := 0
		if t != nil {
			have = len(t.partitions)
		}
		if int(info.Partition) != have {
			if err := dropUnfinishedPartition(dir, e, have); err != nil {
				dir.Close()
				return nil, err
			}
			n.log.Warn("removed an empty partition a crash left past a missing one", "topic", info.Topic, "partition", info.Partition,
				"missing", have)
			continue
		}
		if t == nil {
			t = &topic{name: info.Topic, id: info.TopicID, internal: slices.Contains(cfg.InternalTopics, info.Topic), settings: n.nodeSettings()}
			if e.log != nil {
				t.settings.log = e.log.Config() // an internal log's is its own
			}
			n.topics[info.Topic] = t
		}
		if t.id == (rb.TopicID{}) { // its first partitions' partition.metadata could not be read
			t.id = info.TopicID
		}
		if e.offline != nil {
			if t.internal {
				dir.Close()
				return nil, fmt.Errorf("broker: internal topic %s cannot be opened: %w", info.Topic, e.offline)
			}
			n.log.Error("partition offline: its log cannot be opened; the node serves the others", "topic", info.Topic, "partition", info.Partition,
				"error", e.offline)
			t.partitions = append(t.partitions, newOfflinePartition(n, info.TopicPartition, e.offline, t.settings.limits))
			continue
		}
		t.partitions = append(t.partitions, newPartition(n, info.TopicPartition, e.log, t.settings.limits))
		t.partitions[len(t.partitions)-1].internal = t.internal
	}
	for _, t := range n.topics {
		if t.id != (rb.TopicID{}) {
			n.byID[t.id] = t
		}
	}
	if err := n.loadTopicConfigs(); err != nil {
		dir.Close()
		return nil, err
	}
	if err := n.openScramCredentials(); err != nil {
		dir.Close()
		return nil, err
	}
	if err := n.openAuthorizer(); err != nil {
		dir.Close()
		return nil, err
	}
	if prepare != nil {
		if err := prepare(n); err != nil {
			dir.Close()
			return nil, err
		}
	}
	if n.txns, err = openTransactions(n); err != nil {
		dir.Close()
		return nil, err
	}
	if err := n.openGroups(); err != nil {
		n.txns.close()
		dir.Close()
		return nil, err
	}
	n.retention = startRetention(n)
	n.cleaner = startCleaner(n, cfg.Cleaner)
	n.space.start()
	return n, nil
}

// Close stops the retention and the transaction reaper and closes every
// partition log.
func (n *Node) Close() error {
	n.isr.close()
	n.cleaner.close()
	n.retention.stop()
	n.space.close()
	n.groups.Close()
	n.txns.close()
	return n.dir.Close()
}

// SetAdvertised sets the address Metadata answers (once the listener's
// port is known).
func (n *Node) SetAdvertised(host string, port int32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cluster.Host, n.cluster.Port = host, port
}

func (n *Node) Cluster() netio.ClusterInfo {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.cluster
}

func (n *Node) Topics() []netio.TopicInfo {
	n.mu.RLock()
	defer n.mu.RUnlock()
	infos := make([]netio.TopicInfo, 0, len(n.topics))
	for _, t := range n.topics {
		infos = append(infos, t.info())
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	return infos
}

// refuseIfReadOnly refuses action while any partition of the topic is
// read-only.
func (t *topic) refuseIfReadOnly(action string) error {
	for _, p := range t.partitions {
		if err := p.refuseIfReadOnly(action); err != nil {
			return err
		}
	}
	return nil
}

func (t *topic) info() netio.TopicInfo {
	return netio.TopicInfo{Name: t.name, ID: t.id, Partitions: int32(len(t.partitions)), Internal: t.internal}
}

// InternalLog is the log of internal topic name, if the node holds it.
func (n *Node) InternalLog(name string) (*logstore.Log, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if t, ok := n.topics[name]; ok && t.internal && len(t.partitions) == 1 {
		return t.partitions[0].log, true
	}
	return nil, false
}

// CreateInternalLog creates internal topic name (of Config.InternalTopics)
// with one partition of log configuration cfg, and returns its log.
func (n *Node) CreateInternalLog(name string, cfg logstore.Config) (*logstore.Log, error) {
	if !slices.Contains(n.cfg.InternalTopics, name) {
		return nil, fmt.Errorf("broker: %s is not an internal topic", name)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.topics[name]; ok {
		return nil, kerr.TopicAlreadyExists
	}
	id := rb.NewTopicID()
	tp := logstore.TopicPartition{Topic: name, Partition: 0}
	log, err := n.dir.Create(tp, id, cfg)
	if err != nil {
		return nil, err
	}
	settings := n.nodeSettings()
	settings.log = cfg
	p := newPartition(n, tp, log, settings.limits)
	p.internal = true
	t := &topic{name: name, id: id, partitions: []*Partition{p}, internal: true, settings: settings}
	n.topics[t.name], n.byID[t.id] = t, t
	return log, nil
}

func (n *Node) Topic(name string) (netio.TopicInfo, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if t, ok := n.topics[name]; ok {
		return t.info(), true
	}
	return netio.TopicInfo{}, false
}

func (n *Node) TopicByID(id rb.TopicID) (netio.TopicInfo, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if t, ok := n.byID[id]; ok {
		return t.info(), true
	}
	return netio.TopicInfo{}, false
}

func (n *Node) Partition(topicName string, index int32) (netio.Partition, error) {
	p, err := n.LocalPartition(topicName, index)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// LocalPartition is one partition of the node, or
// kerr.UnknownTopicOrPartition, or the error of an offline partition
// (ErrPartitionOffline, netio.ErrStorage).
func (n *Node) LocalPartition(topicName string, index int32) (*Partition, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	t, ok := n.topics[topicName]
	if !ok || index < 0 || int(index) >= len(t.partitions) {
		return nil, kerr.UnknownTopicOrPartition
	}
	if err := t.partitions[index].Offline(); err != nil {
		return nil, err
	}
	return t.partitions[index], nil
}

func (n *Node) Transactions() netio.Transactions { return n.txns }

// CreateTopic makes a writable topic of partitions partitions. As Kafka:
// a name that differs from an existing topic's only by '.' against '_'
// collides with it (INVALID_TOPIC_EXCEPTION), since both would name the
// same metrics. The answer carries the partition count and the effective
// configs, for a validate-only request too.
func (n *Node) CreateTopic(_ context.Context, name string, partitions int32, configs map[string]string, validateOnly bool) (netio.TopicInfo, error) {
	if slices.Contains(n.cfg.InternalTopics, name) { // as Kafka refuses its internal topics, also before they exist
		return netio.TopicInfo{}, netio.Errorf(kerr.InvalidRequest, "Creation of internal topic %s is prohibited.", name)
	}
	overrides, settings, err := n.parseTopicConfigs(configs)
	if err != nil {
		return netio.TopicInfo{}, err
	}
	if partitions == -1 {
		partitions = max(n.cfg.NumPartitions, 1)
	}
	if partitions <= 0 {
		return netio.TopicInfo{}, kerr.InvalidPartitions
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.topics[name]; ok {
		return netio.TopicInfo{}, kerr.TopicAlreadyExists
	}
	if err := validTopicName(name); err != nil {
		return netio.TopicInfo{}, err
	}
	if other, ok := n.collidingTopic(name); ok {
		return netio.TopicInfo{}, fmt.Errorf("%w: topic %s collides with existing topic %s ('.' and '_' name the same metrics)", kerr.InvalidTopicException, name, other)
	}
	t := &topic{name: name, id: rb.NewTopicID(), overrides: overrides, settings: settings}
	if validateOnly {
		info := t.info()
		info.Partitions, info.Configs = partitions, createTopicsConfigs(n.topicConfigEntries(overrides, nil), configs)
		return info, nil
	}
	if err := n.space.admit(0); err != nil {
		return netio.TopicInfo{}, err
	}
	if len(overrides) > 0 { // before the partitions: see topic_config_store.go
		if err := n.saveTopicConfigs(name, storedTopicConfigs{id: t.id, overrides: overrides}); err != nil {
			return netio.TopicInfo{}, err
		}
	}
	if err := n.addPartitions(t, partitions, settings.log); err != nil {
		return netio.TopicInfo{}, errors.Join(err, n.removeTopicConfigs(name))
	}
	n.topics[name], n.byID[t.id] = t, t
	n.log.Info("created topic", "topic", name, "id", t.id.String(), "partitions", partitions)
	info := t.info()
	info.Configs = createTopicsConfigs(n.topicConfigEntries(overrides, nil), configs)
	return info, nil
}

// collidingTopic returns an existing topic whose name equals name once
// '.' and '_' are taken as the same character; n.mu is held.
func (n *Node) collidingTopic(name string) (string, bool) {
	unify := func(s string) string { return strings.ReplaceAll(s, ".", "_") }
	want := unify(name)
	for other := range n.topics {
		if unify(other) == want {
			return other, true
		}
	}
	return "", false
}

// addPartitions creates partition logs up to count, all or none; n.mu is
// held.
func (n *Node) addPartitions(t *topic, count int32, cfg logstore.Config) error {
	var tps []logstore.TopicPartition
	for i := int32(len(t.partitions)); i < count; i++ {
		tps = append(tps, logstore.TopicPartition{Topic: t.name, Partition: i})
	}
	logs, err := n.dir.CreateAll(tps, t.id, cfg)
	if err != nil {
		return fmt.Errorf("broker: create %d partitions of %s: %w", len(tps), t.name, err)
	}
	for i, log := range logs {
		t.partitions = append(t.partitions, newPartition(n, tps[i], log, t.settings.limits))
	}
	return nil
}

// EnsureTopic makes a topic with the given topic ID and at least
// partitions partitions (a mirror's: the source's ID and partition count,
// grown when the source grows) and returns its partitions. A topic of
// that name with another ID is refused, as is an internal name.
func (n *Node) EnsureTopic(ctx context.Context, name string, id rb.TopicID, partitions int32) ([]*Partition, error) {
	ensured := n.EnsureTopics(ctx, []EnsuredTopic{{Name: name, ID: id, Partitions: partitions}})
	return ensured[0].Local, ensured[0].Err
}

// CreatePartitions grows a topic to count partitions.
func (n *Node) CreatePartitions(_ context.Context, name string, count int32, validateOnly bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.topics[name]
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	refused := t.refuseIfReadOnly("CreatePartitions") // a mirror's partitions are the source's
	switch {
	case t.internal:
		return errInternalTopic(name)
	case refused != nil:
		return refused
	case count <= int32(len(t.partitions)):
		return kerr.InvalidPartitions
	case validateOnly:
		return nil
	}
	if err := n.space.admit(0); err != nil {
		return err
	}
	return n.addPartitions(t, count, t.settings.log)
}

// DeleteTopic deletes every partition of a topic.
func (n *Node) DeleteTopic(_ context.Context, name string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.topics[name]
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	if t.internal {
		return errInternalTopic(name)
	}
	if err := t.refuseIfReadOnly("DeleteTopics"); err != nil {
		return err // its mirror would recreate it, or fail on a new one of the name
	}
	delete(n.topics, name)
	delete(n.byID, t.id)
	var errs []error
	for _, p := range t.partitions {
		p.wake()
		if err := n.dir.Delete(p.tp); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 { // after the partitions: see topic_config_store.go
		errs = append(errs, n.removeTopicConfigs(name))
	}
	n.log.Info("deleted topic", "topic", name)
	return errors.Join(errs...)
}

func validTopicName(name string) error {
	if err := logstore.ValidateTopicName(name); err != nil {
		return fmt.Errorf("%w: %w", kerr.InvalidTopicException, err)
	}
	return nil
}

// TopicPartitions is a topic and its partitions as they were when listed.
type TopicPartitions struct {
	Name       string
	ID         rb.TopicID
	Partitions []*Partition
}

// TopicsSnapshot lists the node's topics but the internal ones.
func (n *Node) TopicsSnapshot() []TopicPartitions {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]TopicPartitions, 0, len(n.topics))
	for name, t := range n.topics {
		if !t.internal {
			out = append(out, TopicPartitions{name, t.id, append([]*Partition(nil), t.partitions...)})
		}
	}
	return out
}
