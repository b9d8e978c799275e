package netio

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	rb "github.com/mirrord/mirrord/recordbatch"
)

// Backend is the node behind the listener. netio knows nothing of how it
// stores data: the engine supplies a Backend over its log store.
//
// Errors: methods return the kerr errors of github.com/twmb/franz-go/pkg/kerr
// where Kafka has a code for the failure (kerr.UnknownTopicOrPartition,
// kerr.OutOfOrderSequenceNumber, ...); any other error answers
// KAFKA_STORAGE_ERROR for data calls and UNKNOWN_SERVER_ERROR otherwise,
// and is logged.
type Backend interface {
	// Cluster describes this node for Metadata and DescribeCluster.
	Cluster() ClusterInfo
	// Topics lists the topics, sorted by name.
	Topics() []TopicInfo
	Topic(name string) (TopicInfo, bool)
	TopicByID(id TopicID) (TopicInfo, bool)
	// CreateTopic makes a writable topic; configs are Kafka topic configs;
	// partitions -1 is the node's default (num.partitions).
	CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string, validateOnly bool) (TopicInfo, error)
	DeleteTopic(ctx context.Context, name string) error
	// CreatePartitions grows a topic to count partitions.
	CreatePartitions(ctx context.Context, name string, count int32, validateOnly bool) error
	// Partition returns one partition, or kerr.UnknownTopicOrPartition.
	Partition(topic string, partition int32) (Partition, error)
	// Transactions is the producer ID and transaction coordinator.
	Transactions() Transactions
	// Groups is the classic consumer group coordinator.
	Groups() GroupCoordinator
	// Configs is the topics' and the node's configs.
	Configs() Configs
}

// Broker is one node of a cluster as Metadata, DescribeCluster and the
// KIP-951 leader hints name it. Rack is "" when broker.rack is not set.
type Broker struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   string
}

// ClusterBackend is a Backend that is one node of several (a mirrord
// cluster): Metadata and DescribeCluster list every live node, and the
// controller it names. A Backend without it is alone: it is the only
// broker, the controller, and leads every partition.
type ClusterBackend interface {
	// Brokers are the live nodes, sorted by node ID, this one included,
	// at their addresses for the named listener ("" for the default).
	Brokers(listener string) []Broker
	// ControllerID is the node that is the controller now, -1 when none.
	ControllerID() int32
	// Replication is one partition as the cluster has it (its leader,
	// leader epoch, replicas and ISR), whichever nodes hold it; ok is
	// false when the cluster has not placed it.
	Replication(topic string, partition int32) (r Replication, ok bool)
	// CreateReplicatedTopic is CreateTopic with a replication factor (-1:
	// default.replication.factor), which the caller checked against the
	// live brokers; the TopicInfo answered carries the one placed.
	CreateReplicatedTopic(ctx context.Context, name string, partitions int32, replicationFactor int16, configs map[string]string, validateOnly bool) (TopicInfo, error)
	// Coordinator is the node coordinating a group or transactional ID
	// (FindCoordinator); ok is false when there is none (no live node).
	Coordinator(coordinatorType int8, key string) (b Broker, ok bool)
}

// Replication is one partition's leader (-1: none, the partition is
// offline), leader epoch, replicas (the preferred leader first) and ISR.
type Replication struct {
	Leader      int32
	LeaderEpoch rb.Epoch
	Replicas    []int32
	ISR         []int32
}

// ReplicatedPartition is a Partition with replicas on several nodes.
// A Partition without it is led by this node alone (replicas and ISR
// are this node).
type ReplicatedPartition interface {
	// Replication is the partition's leader (-1: none, the partition is
	// offline), its replicas (the preferred leader first) and its ISR, as
	// Metadata answers them.
	Replication() (leader int32, replicas, isr []int32)
}

// ReplicaPartition is a partition that serves followers' fetches (Fetch
// naming a ReplicaID of 0 or more): records up to its log end rather
// than the high watermark, and each fetch offset is the follower's log
// end offset, which the leader's ISR and high watermark follow.
type ReplicaPartition interface {
	ReadReplica(replicaID int32, offset rb.Offset, maxBytes int32, minOneBatch bool) (ReadResult, error)
}

// TopicID is recordbatch's TopicID under netio's name, kept for the mirror
// admin wire files that spell it unqualified.
type TopicID = rb.TopicID

// ClusterInfo is this node's identity and advertised address.
type ClusterInfo struct {
	ClusterID string
	NodeID    int32
	Host      string
	Port      int32
}

// TopicInfo describes a topic.
type TopicInfo struct {
	Name       string
	ID         TopicID
	Partitions int32
	Internal   bool
	// ReplicationFactor is the replicas of each partition; 0 is a node
	// alone's one.
	ReplicationFactor int16
	// Configs are the topic's effective configs, sorted by name; only
	// CreateTopic fills them (CreateTopics v5+ answers them).
	Configs []TopicConfig
}

// TopicConfig is one effective topic config and where its value is from.
type TopicConfig struct {
	Name, Value string
	Source      ConfigSource
}

// ConfigSource is a DescribeConfigs config source, as Kafka numbers them.
type ConfigSource int8

const (
	ConfigSourceTopic          ConfigSource = 1 // DYNAMIC_TOPIC_CONFIG: set on the topic
	ConfigSourceClusterDefault ConfigSource = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG: the cluster's default
	ConfigSourceStaticBroker   ConfigSource = 4 // STATIC_BROKER_CONFIG: the node's config file
	ConfigSourceDefault        ConfigSource = 5 // DEFAULT_CONFIG: Kafka's default
)

// Offsets are a partition's offsets, as Kafka names them.
type Offsets struct {
	LogStartOffset   rb.Offset
	HighWatermark    rb.Offset
	LastStableOffset rb.Offset
	LogEndOffset     rb.Offset
}

// Isolation is a Fetch or ListOffsets isolation level.
type Isolation int8

const (
	ReadUncommitted Isolation = 0
	ReadCommitted   Isolation = 1
)

// Partition is one partition of a topic on this node.
type Partition interface {
	LeaderEpoch() rb.Epoch
	Offsets() Offsets
	// Produce appends batches (whole v2 batches, as received) and returns
	// the base offset assigned. Read-only (mirror) partitions answer
	// kerr.ReadOnlyTopic... or the closest code the engine chooses.
	Produce(ctx context.Context, batches []byte, request ProduceRequest) (ProduceResult, error)
	// Read returns the records from offset on, bounded by maxBytes and by
	// the high watermark (ReadUncommitted) or last stable offset
	// (ReadCommitted). An offset outside [logStart, logEnd] is
	// kerr.OffsetOutOfRange.
	Read(offset rb.Offset, maxBytes int32, isolation Isolation, minOneBatch bool) (ReadResult, error)
	// Watchers are the partition's waiting fetches (fetch_wait.go): the
	// partition calls their Notify at every change of anything a Fetch of
	// it answers: its offsets (an append, a high watermark, last stable
	// offset or log start move, a truncation), its leader epoch, or its
	// deletion. Long polls wait on them, and fetch sessions skip reading
	// a partition while its Changed channel stays open, so a change that
	// does not notify is not seen by a session's fetches.
	Watchers() *Watchers
	// ListOffset answers ListOffsets for one timestamp (-1 latest,
	// -2 earliest, -3 max timestamp, else the first record at or after it):
	// the offset, the record's timestamp (-1 where Kafka gives -1) and
	// the leader epoch of that offset. Not found: offset -1.
	ListOffset(timestamp int64, isolation Isolation) (offset rb.Offset, recordTimestamp int64, leaderEpoch rb.Epoch, err error)
	// EndOffsetForEpoch answers OffsetForLeaderEpoch.
	EndOffsetForEpoch(epoch rb.Epoch) (endEpoch rb.Epoch, endOffset rb.Offset)
	// DeleteRecords moves the log start offset (-1: to the high
	// watermark) and returns the new low watermark.
	DeleteRecords(ctx context.Context, offset rb.Offset) (rb.Offset, error)
}

// ProduceRequest is what a Produce request says about one partition's batches.
type ProduceRequest struct {
	Version         int16 // the Produce version: v12+ is transaction version 2
	Acks            int16
	TransactionalID string // "" when not transactional
}

// ProduceResult is the outcome of a Produce for one partition.
type ProduceResult struct {
	BaseOffset     rb.Offset
	LogAppendTime  int64 // -1 unless the topic uses LogAppendTime
	LogStartOffset rb.Offset
}

// ReadResult is what Read found.
type ReadResult struct {
	Records             FileRange
	Offsets             Offsets
	AbortedTransactions []AbortedTransaction // ReadCommitted only
}

// FileRange is a range of a file holding record batches (the last may be
// partial); Release must be called once it is sent.
type FileRange struct {
	File     RangeFile // nil when the range is empty
	Position int64
	Length   int64
	Release  func() error // nil when there is nothing to release
}

// RangeFile is the file behind a FileRange: sendfile uses Fd, the
// fallback ReadAt.
type RangeFile interface {
	ReadAt(p []byte, off int64) (int, error)
	// Fd is the descriptor for sendfile, or ^uintptr(0) when there is none.
	Fd() uintptr
}

// AbortedTransaction is an entry of a Fetch response's aborted list.
type AbortedTransaction struct {
	ProducerID  int64
	FirstOffset rb.Offset
}

// Transactions is the producer ID allocator and transaction coordinator.
type Transactions interface {
	// InitProducerID returns a producer ID and epoch; transactional ones
	// are fenced per transactional ID (an ongoing transaction is aborted).
	InitProducerID(ctx context.Context, transactionalID string, timeoutMillis int32, producerID int64, producerEpoch int16) (int64, int16, error)
	AddPartitions(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, topic string, partitions []int32) []error
	// VerifyPartitions answers, per partition, whether it is in the
	// producer's ongoing transaction (nil, or TRANSACTION_ABORTABLE):
	// AddPartitionsToTxn v4+ with VerifyOnly.
	VerifyPartitions(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, topic string, partitions []int32) []error
	// EndTransaction commits or aborts; under transaction version 2
	// (tv2: EndTxn v5+) it bumps the epoch and returns the producer ID
	// and epoch to go on with, else -1 and -1.
	EndTransaction(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, commit, tv2 bool) (int64, int16, error)
	// AddOffsets adds the group's __consumer_offsets partition to the
	// transaction, as AddPartitions adds a partition.
	AddOffsets(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, group string) error
	// TransactionStates returns the coordinator's transactional IDs, by
	// ID; ids, when not nil, selects some (an unknown one is left out).
	TransactionStates(ctx context.Context, ids []string) []TransactionState
}

// TransactionState is one transactional ID as the coordinator has it
// (DescribeTransactions, ListTransactions).
type TransactionState struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	State           string // Kafka's name: Empty, Ongoing, PrepareCommit, ...
	TimeoutMillis   int32
	StartMillis     int64 // when the transaction began, -1 if none
	Topics          []TransactionTopic
}

// TransactionTopic is the partitions of one topic in a transaction.
type TransactionTopic struct {
	Topic      string
	Partitions []int32
}

// GroupCoordinator is the classic consumer group coordinator: each method
// answers the request of its name, whole, at the request's version (the
// handlers check only the version). JoinGroup and SyncGroup may wait for
// the rest of the group, up to its rebalance timeout. An error means no
// answer (the coordinator closed, ctx done): the handler answers
// COORDINATOR_NOT_AVAILABLE, which clients retry.
type GroupCoordinator interface {
	JoinGroup(ctx context.Context, client GroupClient, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, error)
	SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, error)
	Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) (*kmsg.HeartbeatResponse, error)
	LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, error)
	OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error)
	OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) (*kmsg.OffsetFetchResponse, error)
	OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) (*kmsg.OffsetDeleteResponse, error)
	ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) (*kmsg.ListGroupsResponse, error)
	DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) (*kmsg.DescribeGroupsResponse, error)
	DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) (*kmsg.DeleteGroupsResponse, error)
	// TxnOffsetCommit commits offsets in the producer's transaction: they
	// become visible when it commits.
	TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, error)
	// The consumer protocol (KIP-848).
	ConsumerGroupHeartbeat(ctx context.Context, client GroupClient, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, error)
	ConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) (*kmsg.ConsumerGroupDescribeResponse, error)
}

// GroupClient names the client of a JoinGroup: its client.id and its
// address as Kafka prints it ("/127.0.0.1").
type GroupClient struct {
	ID   string
	Host string
}

// ErrNotBuilt answers requests for parts of the API that are not built.
var ErrNotBuilt = errors.New("netio: not built")
