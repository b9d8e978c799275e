package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinel errors of the package; test them with errors.Is.
var (
	// ErrNotController: a controller write was refused because the writer
	// no longer holds the election (its fence failed).
	ErrNotController = errors.New("cluster: not the controller")
	// ErrStaleMetadata: a compare-and-swap found the partition changed
	// since it was read (another ISR change, a new leader epoch).
	ErrStaleMetadata = errors.New("cluster: stale metadata")
	// ErrDuplicateNode: a node ID is already registered under a live lease.
	ErrDuplicateNode = errors.New("cluster: node ID already registered")
	// ErrNoLiveNodes: replicas cannot be placed without a live node.
	ErrNoLiveNodes = errors.New("cluster: no live nodes")
	// ErrInvalidISR: an ISR that is not a subset of the replicas, has
	// duplicates, or leaves out the leader.
	ErrInvalidISR = errors.New("cluster: invalid ISR")
	// ErrUnknownPartition: the partition has no assignment in etcd.
	ErrUnknownPartition = errors.New("cluster: unknown partition")
	// ErrTopicExists: a topic spec of that name is already in etcd.
	ErrTopicExists = errors.New("cluster: topic already exists")
	// ErrUnknownTopic: no topic spec of that name is in etcd.
	ErrUnknownTopic = errors.New("cluster: unknown topic")
	// ErrInvalidTopic: a topic name that cannot be a key (empty, or with a
	// '/'), or a spec without a topic ID. Kafka's name rule is the
	// receiving node's to apply before it writes a spec.
	ErrInvalidTopic = errors.New("cluster: invalid topic")
	// ErrInvalidPartitions: a partition count below 1, or a growth that
	// does not raise the count (Kafka's INVALID_PARTITIONS).
	ErrInvalidPartitions = errors.New("cluster: invalid partition count")
)

// NoLeader is the leader of a partition that has none (Kafka's -1).
const NoLeader int32 = -1

// Node is one mirrord node of the registry: its ID (from the key) and where
// clients reach it.
type Node struct {
	ID   int32  `json:"-"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	Rack string `json:"rack,omitempty"` // broker.rack; empty when not set
	// Drained is set from the node's drain/<nodeID> mark (Drain), not
	// from its registry value: the controller leads nothing on a drained
	// node that another in-sync replica can lead, and places nothing new
	// on it.
	Drained bool `json:"-"`
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Assignment is one partition's value in etcd.
//
// Invariants (checked by valid): Replicas are distinct; ISR is a non-empty
// subset of Replicas without duplicates; Leader is NoLeader or a member of
// ISR; LeaderEpoch >= 0 and never decreases across writes of the key.
type Assignment struct {
	TopicID     string  `json:"topicID"` // Kafka's topic ID, as its base64 string
	Replicas    []int32 `json:"replicas"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leaderEpoch"`
	ISR         []int32 `json:"isr"`
}

// PartitionState is an assignment with the etcd ModRevision it was read at:
// the partition epoch a compare-and-swap compares.
type PartitionState struct {
	Assignment
	ModRevision int64
}

// Assignments maps partitions to their assignment.
type Assignments map[TopicPartition]Assignment

// valid reports whether a holds the invariants of Assignment.
func (a Assignment) valid() error {
	if len(a.Replicas) == 0 {
		return fmt.Errorf("%w: no replicas", ErrInvalidISR)
	}
	if hasDuplicate(a.Replicas) {
		return fmt.Errorf("%w: duplicate replica in %v", ErrInvalidISR, a.Replicas)
	}
	return checkISR(a.Replicas, a.Leader, a.ISR)
}

func checkISR(replicas []int32, leader int32, isr []int32) error {
	if len(isr) == 0 || hasDuplicate(isr) {
		return fmt.Errorf("%w: %v", ErrInvalidISR, isr)
	}
	for _, id := range isr {
		if !containsID(replicas, id) {
			return fmt.Errorf("%w: %d in %v is not a replica of %v", ErrInvalidISR, id, isr, replicas)
		}
	}
	if leader != NoLeader && !containsID(isr, leader) {
		return fmt.Errorf("%w: leader %d not in %v", ErrInvalidISR, leader, isr)
	}
	return nil
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func hasDuplicate(ids []int32) bool {
	for i := range ids {
		for j := i + 1; j < len(ids); j++ {
			if ids[i] == ids[j] {
				return true
			}
		}
	}
	return false
}

// Keys of one cluster, as doc.go lays them out.

func clusterPrefix(clusterID string) string { return "/mirrord/" + clusterID + "/" }

func nodesPrefix(clusterID string) string { return clusterPrefix(clusterID) + "nodes/" }

func nodeKey(clusterID string, id int32) string {
	return nodesPrefix(clusterID) + strconv.FormatInt(int64(id), 10)
}

// controllerPrefix is the election's prefix; concurrency.NewElection adds
// the trailing '/'.
func controllerPrefix(clusterID string) string { return clusterPrefix(clusterID) + "controller" }

func topicsPrefix(clusterID string) string { return clusterPrefix(clusterID) + "topics/" }

// topicKey is a topic's spec; its partitions are under
// partitionsPrefix, which ends in '/' so that it never matches a longer
// topic name.
func topicKey(clusterID, topic string) string { return topicsPrefix(clusterID) + topic }

func partitionsPrefix(clusterID, topic string) string {
	return topicKey(clusterID, topic) + "/partitions/"
}

func partitionKey(clusterID string, tp TopicPartition) string {
	return partitionsPrefix(clusterID, tp.Topic) + strconv.FormatInt(int64(tp.Partition), 10)
}

func drainPrefix(clusterID string) string { return clusterPrefix(clusterID) + "drain/" }

func drainKey(clusterID string, id int32) string {
	return drainPrefix(clusterID) + strconv.FormatInt(int64(id), 10)
}

// parseNodeKey returns the node ID of a key under nodesPrefix.
func parseNodeKey(clusterID, key string) (int32, error) {
	rest, ok := strings.CutPrefix(key, nodesPrefix(clusterID))
	if !ok {
		return 0, fmt.Errorf("cluster: %q is not a node key", key)
	}
	id, err := parseNodeID(rest)
	if err != nil {
		return 0, fmt.Errorf("cluster: node key %q: %w", key, err)
	}
	return id, nil
}

// parseDrainKey returns the node ID of a key under drainPrefix.
func parseDrainKey(clusterID, key string) (int32, error) {
	rest, ok := strings.CutPrefix(key, drainPrefix(clusterID))
	if !ok {
		return 0, fmt.Errorf("cluster: %q is not a drain key", key)
	}
	id, err := parseNodeID(rest)
	if err != nil {
		return 0, fmt.Errorf("cluster: drain key %q: %w", key, err)
	}
	return id, nil
}

func parseNodeID(s string) (int32, error) {
	id, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, err
	}
	return int32(id), nil
}

// parseTopicKey splits a key under topicsPrefix: topics/<topic> is a
// topic's spec (isPartition false), topics/<topic>/partitions/<n> one of
// its partitions.
func parseTopicKey(clusterID, key string) (topic string, tp TopicPartition, isPartition bool, err error) {
	rest, ok := strings.CutPrefix(key, topicsPrefix(clusterID))
	if !ok {
		return "", TopicPartition{}, false, fmt.Errorf("cluster: %q is not a topic key", key)
	}
	if !strings.Contains(rest, "/") {
		if rest == "" {
			return "", TopicPartition{}, false, fmt.Errorf("cluster: topic key %q has no topic", key)
		}
		return rest, TopicPartition{}, false, nil
	}
	topic, number, ok := strings.Cut(rest, "/partitions/")
	if !ok || topic == "" {
		return "", TopicPartition{}, false, fmt.Errorf("cluster: partition key %q has no topic", key)
	}
	n, err := strconv.ParseInt(number, 10, 32)
	if err != nil || n < 0 {
		return "", TopicPartition{}, false, fmt.Errorf("cluster: partition key %q: bad partition number", key)
	}
	return topic, TopicPartition{Topic: topic, Partition: int32(n)}, true, nil
}

func decodeNode(clusterID, key string, value []byte) (Node, error) {
	id, err := parseNodeKey(clusterID, key)
	if err != nil {
		return Node{}, err
	}
	var n Node
	if err := json.Unmarshal(value, &n); err != nil {
		return Node{}, fmt.Errorf("cluster: node %d: %w", id, err)
	}
	n.ID = id
	return n, nil
}

func decodeAssignment(tp TopicPartition, value []byte) (Assignment, error) {
	var a Assignment
	if err := json.Unmarshal(value, &a); err != nil {
		return Assignment{}, fmt.Errorf("cluster: partition %s: %w", tp, err)
	}
	if err := a.valid(); err != nil {
		return Assignment{}, fmt.Errorf("cluster: partition %s: %w", tp, err)
	}
	return a, nil
}

func encodeJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("cluster: encoding %T: %v", v, err)) // plain structs of strings and ints always encode
	}
	return string(b)
}
