package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The records of a mirror's partition state machines on a cluster
// (docs/cluster.md, "Mirrors on a cluster"): one key per
// partition, mirrors/<name>/state/<topicID>/<partition>, whose value is
// the engine's record (the bytes __mirror_state holds on a node alone;
// this package does not read them). The partition's leader writes it, at
// each state change and before it acts on it, by compare-and-swap on the
// key's ModRevision, so that a leader that took over resumes the machine
// where the one before it left it, and a writer that did not see the
// other's write fails in etcd.

// ErrMirrorStateConflict is a write of mirror partition records that lost
// its compare: another node wrote one of the keys since the writer read
// it, or the mirror was deleted or created again.
var ErrMirrorStateConflict = errors.New("cluster: a mirror partition's record changed since it was read")

// MaxMirrorStateWrites bounds the records of one PutMirrorStates: one
// compare and one put each, under etcd's default max-txn-ops (128).
const MaxMirrorStateWrites = 100

// MirrorPartition names the record of one partition of one mirror.
type MirrorPartition struct {
	Mirror    string
	TopicID   string // the topic ID as a UUID string
	Partition int32
}

func (p MirrorPartition) String() string {
	return fmt.Sprintf("%s/%s-%d", p.Mirror, p.TopicID, p.Partition)
}

// MirrorPartitionRecord is one record as etcd holds it: the engine's
// bytes and the key's ModRevision.
type MirrorPartitionRecord struct {
	Value       []byte
	ModRevision int64
}

// MirrorStateWrite is one record to write, with the ModRevision the
// writer read it at (0: it read none).
type MirrorStateWrite struct {
	Partition   MirrorPartition
	Value       []byte
	ModRevision int64
}

func mirrorStateKey(clusterID string, p MirrorPartition) string {
	return mirrorKey(clusterID, p.Mirror) + "/state/" + p.TopicID + "/" + strconv.Itoa(int(p.Partition))
}

// parseMirrorStateKey names the record of a key below mirrors/; false for
// any other key.
func parseMirrorStateKey(clusterID, key string) (MirrorPartition, bool) {
	rest := strings.TrimPrefix(key, mirrorsPrefix(clusterID))
	name, rest, ok := strings.Cut(rest, "/state/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return MirrorPartition{}, false
	}
	id, partition, ok := strings.Cut(rest, "/")
	if !ok || id == "" {
		return MirrorPartition{}, false
	}
	n, err := strconv.ParseInt(partition, 10, 32)
	if err != nil || n < 0 {
		return MirrorPartition{}, false
	}
	return MirrorPartition{Mirror: name, TopicID: id, Partition: int32(n)}, true
}

// PutMirrorStates writes records of one mirror's partitions in one
// transaction: each key's ModRevision must be the one its writer read (0:
// the key must not exist), and the mirror must be the incarnation created
// at mirrorCreateRevision; else nothing is written and the error wraps
// ErrMirrorStateConflict. It returns the revision of the write.
func PutMirrorStates(ctx context.Context, client *clientv3.Client, clusterID, mirror string, mirrorCreateRevision int64, writes []MirrorStateWrite) (int64, error) {
	if err := validMirrorKey(mirror); err != nil {
		return 0, err
	}
	if len(writes) == 0 || len(writes) > MaxMirrorStateWrites {
		return 0, fmt.Errorf("cluster: mirror %s: %d partition records in one write, want 1-%d", mirror, len(writes), MaxMirrorStateWrites)
	}
	compares := make([]clientv3.Cmp, 0, len(writes)+1)
	puts := make([]clientv3.Op, 0, len(writes))
	compares = append(compares, clientv3.Compare(clientv3.CreateRevision(mirrorKey(clusterID, mirror)), "=", mirrorCreateRevision))
	for _, w := range writes {
		if w.Partition.Mirror != mirror {
			return 0, fmt.Errorf("cluster: mirror %s: a record of mirror %s in its write", mirror, w.Partition.Mirror)
		}
		key := mirrorStateKey(clusterID, w.Partition)
		compares = append(compares, clientv3.Compare(clientv3.ModRevision(key), "=", w.ModRevision))
		puts = append(puts, clientv3.OpPut(key, string(w.Value)))
	}
	resp, err := client.Txn(ctx).If(compares...).Then(puts...).Commit()
	if err != nil {
		return 0, fmt.Errorf("cluster: mirror %s: write %d partition records: %w", mirror, len(writes), err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("cluster: mirror %s: write %d partition records (the first %s): %w", mirror, len(writes), writes[0].Partition, ErrMirrorStateConflict)
	}
	return resp.Header.Revision, nil
}

// MirrorPartitionState returns the record of one mirror partition.
func (c *Cache) MirrorPartitionState(p MirrorPartition) (MirrorPartitionRecord, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.state.mirrorStates[p]
	return r, ok
}

// MirrorPartitionStates returns the records of every mirror's partitions
// (the values are shared: read-only).
func (c *Cache) MirrorPartitionStates() map[MirrorPartition]MirrorPartitionRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[MirrorPartition]MirrorPartitionRecord, len(c.state.mirrorStates))
	for p, r := range c.state.mirrorStates {
		out[p] = r
	}
	return out
}

// MirrorTopics returns the specs of the topics a mirror made, by name.
func (c *Cache) MirrorTopics(mirror string) map[string]TopicState {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]TopicState{}
	for name, t := range c.state.topics {
		if t.Mirror == mirror {
			t.TopicSpec = t.TopicSpec.clone()
			out[name] = t
		}
	}
	return out
}
