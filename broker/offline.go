package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Offline partitions: a partition whose log cannot be opened (its
// partition.metadata or a segment fails its checks where recovery cannot
// cut a tail, or its producer state cannot be replayed) does not stop the
// node, as Kafka takes the replicas of a failed log dir offline and serves
// the rest. The partition stays in its topic, with its index, holding the
// error: every API that names it answers KAFKA_STORAGE_ERROR (Metadata:
// no leader, the node in offline_replicas), and nothing in the node reads
// or writes it (retention, the cleaner, transaction recovery skip it).
// It stays offline until RebuildPartition replaces it by an empty log
// (the engine does for a mirrored partition on --recover, re-fetching it
// from the source); the broken directory is kept under the data
// directory's failed/ folder.

// ErrPartitionOffline marks the error of a partition whose log could not
// be opened; it also wraps netio.ErrStorage and the cause.
var ErrPartitionOffline = errors.New("broker: partition offline")

// OfflinePartition is a partition that is offline and why.
type OfflinePartition struct {
	logstore.TopicPartition
	TopicID rb.TopicID // zero when the topic's ID could not be read
	Err     error
}

// offlineError is what an offline partition answers: its text is the
// partition and the cause; it wraps ErrPartitionOffline, netio.ErrStorage
// (the network edge answers KAFKA_STORAGE_ERROR) and the cause.
type offlineError struct {
	tp    logstore.TopicPartition
	cause error
}

func (e *offlineError) Error() string { return fmt.Sprintf("broker: %s is offline: %v", e.tp, e.cause) }
func (e *offlineError) Unwrap() []error {
	return []error{ErrPartitionOffline, netio.ErrStorage, e.cause}
}

// newOfflinePartition is a partition of the node whose log could not be
// opened.
func newOfflinePartition(n *Node, tp logstore.TopicPartition, cause error, limits produceLimits) *Partition {
	p := newPartition(n, tp, nil, limits)
	p.takeOffline(cause)
	return p
}

// takeOffline marks p offline; only while the node opens, before anyone
// else holds p.
func (p *Partition) takeOffline(cause error) {
	var err error = &offlineError{p.tp, cause}
	p.offline.Store(&err)
}

// Offline is nil for a partition that serves, or the error (wrapping
// ErrPartitionOffline, netio.ErrStorage and the cause) of one whose
// log could not be opened. Nothing may touch the log of an offline
// partition.
func (p *Partition) Offline() error {
	if err := p.offline.Load(); err != nil {
		return *err
	}
	return nil
}

// OfflinePartitions lists the offline partitions, sorted by topic and
// partition.
func (n *Node) OfflinePartitions() []OfflinePartition {
	n.mu.RLock()
	defer n.mu.RUnlock()
	var out []OfflinePartition
	for _, t := range n.topics {
		for _, p := range t.partitions {
			if err := p.Offline(); err != nil {
				out = append(out, OfflinePartition{TopicPartition: p.tp, TopicID: t.id, Err: err})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return compareTopicPartitions(out[i].TopicPartition, out[j].TopicPartition) < 0 })
	return out
}

// online filters the partitions that serve out of ps.
func online(ps []*Partition) []*Partition {
	out := ps[:0:0]
	for _, p := range ps {
		if p.Offline() == nil {
			out = append(out, p)
		}
	}
	return out
}

// RebuildPartition replaces an offline partition by an empty log of
// topic ID id (the topic's, or the one to adopt when the topic's could
// not be read): its directory is moved aside to the data directory's
// failed/ folder, kept for the operator. The partition object stays the
// same and serves again from offset 0; its writer (a mirror) fills it.
// It returns where the broken directory went.
func (n *Node) RebuildPartition(_ context.Context, topic string, index int32, id rb.TopicID) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.topics[topic]
	if !ok || index < 0 || int(index) >= len(t.partitions) {
		return "", kerr.UnknownTopicOrPartition
	}
	p := t.partitions[index]
	cause := p.Offline()
	if cause == nil {
		return "", fmt.Errorf("broker: rebuild %s: the partition is online", p.tp)
	}
	switch {
	case t.id == rb.TopicID{}:
		if other, taken := n.byID[id]; taken {
			return "", fmt.Errorf("broker: rebuild %s: topic ID %s is topic %s's", p.tp, id, other.name)
		}
		t.id, n.byID[id] = id, t
	case t.id != id:
		return "", fmt.Errorf("broker: rebuild %s: topic %s has topic ID %s, not %s", p.tp, topic, t.id, id)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	log, aside, err := n.dir.Rebuild(p.tp, t.id, t.settings.log)
	if err != nil {
		return aside, fmt.Errorf("broker: rebuild %s: %w", p.tp, err)
	}
	p.log, p.producers = log, newProducerStates()
	p.offline.Store(nil) // after p.log: who sees it online sees the new log
	p.notify()
	n.log.Warn("rebuilt an offline partition empty; its broken directory is kept", "topic", p.tp.Topic, "partition", p.tp.Partition,
		"moved_to", aside, "was", cause)
	return aside, nil
}

// OfflineLogs lists the offline partitions for the network edge
// (netio.OfflineLister).
func (n *Node) OfflineLogs() []netio.OfflineLog {
	offline := n.OfflinePartitions()
	out := make([]netio.OfflineLog, len(offline))
	for i, p := range offline {
		out[i] = netio.OfflineLog{Topic: p.Topic, Partition: p.Partition, Error: p.Err.Error()}
	}
	return out
}

// offlineOr is read() of an online partition, or otherwise for an offline
// one (its log is not to be touched).
func offlineOr[T any](p *Partition, otherwise T, read func() T) T {
	if p.Offline() != nil {
		return otherwise
	}
	return read()
}
