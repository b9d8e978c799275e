package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mirrord/mirrord/cluster"
	"github.com/mirrord/mirrord/engine/mirrorstate"
	rb "github.com/mirrord/mirrord/recordbatch"
)

// mirrorStates is where a node keeps its mirror partitions' records:
// __mirror_state on a node alone (stateLog), etcd on a cluster
// (clusterStates), so that a partition's new leader resumes the machine
// where the old one left it. The owner's rule is the same on both: a
// round's records are durable (putAll returned nil) before any action of
// the round runs.
type mirrorStates interface {
	// get returns the stored record of key.
	get(key MirrorStateKey) (mirrorstate.Record, bool)
	// putAll stores the records, each fenced by its state epoch (above
	// the stored one), or none of a group it fails on.
	putAll(entries []stateEntry) error
	// stoppedEpochs is, by topic ID and partition (Mirror empty), the
	// greatest last mirror epoch of the STOPPED records of every mirror.
	stoppedEpochs() map[MirrorStateKey]stoppedLME
}

// clusterStateWriteTimeout bounds one write of records to etcd: past it
// the round fails, the mirror halts and reloads after a backoff (as after
// a failed sync of __mirror_state).
const clusterStateWriteTimeout = 5 * time.Second

// clusterStates keeps the records in etcd, one key per partition
// (cluster.PutMirrorStates), read from the node's cache. A write compares
// the key's ModRevision with the one its record was read at, so a node
// that did not see another's write (a leader moved while its cache was
// behind) fails in etcd; its mirror halts and reloads from the cache.
//
// The cache may not show the node's own last write yet: written keeps it,
// with its revision, until the cache's revision reaches it.
type clusterStates struct {
	c *clusterNode

	mu      sync.Mutex
	written map[MirrorStateKey]writtenRecord // bounded by the partitions this node wrote since its cache caught up
}

type writtenRecord struct {
	record   mirrorstate.Record
	revision int64
}

func newClusterStates(c *clusterNode) *clusterStates {
	return &clusterStates{c: c, written: map[MirrorStateKey]writtenRecord{}}
}

func mirrorPartitionOf(key MirrorStateKey) cluster.MirrorPartition {
	return cluster.MirrorPartition{Mirror: key.Mirror, TopicID: rb.TopicID(key.TopicID).String(), Partition: key.Partition}
}

// lookup is key's record and the ModRevision a write of it compares
// with (0: none).
func (s *clusterStates) lookup(key MirrorStateKey) (mirrorstate.Record, int64, bool) {
	seen := s.c.cache.Revision() // first: a record read after it is at least as new
	s.mu.Lock()
	w, mine := s.written[key]
	if mine && w.revision <= seen {
		delete(s.written, key)
		mine = false
	}
	s.mu.Unlock()
	if mine {
		return w.record, w.revision, true
	}
	stored, ok := s.c.cache.MirrorPartitionState(mirrorPartitionOf(key))
	if !ok {
		return mirrorstate.Record{}, 0, false
	}
	record, err := decodeMirrorStateValue(stored.Value)
	if err != nil {
		// As a corrupt record of __mirror_state: skipped, loudly. The
		// next write replaces it (its revision still fences it).
		s.c.log.Error("skipped a corrupt mirror partition record in etcd", "partition", mirrorPartitionOf(key).String(), "error", err)
		return mirrorstate.Record{}, stored.ModRevision, false
	}
	return record, stored.ModRevision, true
}

func (s *clusterStates) get(key MirrorStateKey) (mirrorstate.Record, bool) {
	record, _, ok := s.lookup(key)
	return record, ok
}

func (s *clusterStates) putAll(entries []stateEntry) error {
	if err := checkStateEntries(entries); err != nil {
		return err
	}
	type pending struct {
		key    MirrorStateKey
		record mirrorstate.Record
		write  cluster.MirrorStateWrite
	}
	byMirror := map[string][]pending{}
	var order []string
	for _, e := range entries {
		stored, revision, ok := s.lookup(e.key)
		if ok && e.value.StateEpoch <= stored.StateEpoch {
			return fmt.Errorf("engine: mirror %s %s-%d: state epoch %d fenced by the stored %d", e.key.Mirror,
				rb.TopicID(e.key.TopicID), e.key.Partition, e.value.StateEpoch, stored.StateEpoch)
		}
		_, value := EncodeMirrorStateRecord(e.key, e.value)
		if _, seen := byMirror[e.key.Mirror]; !seen {
			order = append(order, e.key.Mirror)
		}
		byMirror[e.key.Mirror] = append(byMirror[e.key.Mirror], pending{e.key, e.value,
			cluster.MirrorStateWrite{Partition: mirrorPartitionOf(e.key), Value: value, ModRevision: revision}})
	}
	for _, name := range order {
		incarnation, ok := s.c.cache.MirrorCreateRevision(name)
		if !ok {
			return fmt.Errorf("engine: mirror %s: not in etcd: %w", name, cluster.ErrUnknownMirror)
		}
		for rest := byMirror[name]; len(rest) > 0; { // bounded: each pass writes up to MaxMirrorStateWrites
			chunk := rest[:min(len(rest), cluster.MaxMirrorStateWrites)]
			rest = rest[len(chunk):]
			writes := make([]cluster.MirrorStateWrite, len(chunk))
			for i, p := range chunk {
				writes[i] = p.write
			}
			ctx, cancel := context.WithTimeout(s.c.ctx, clusterStateWriteTimeout)
			revision, err := cluster.PutMirrorStates(ctx, s.c.client, s.c.id, name, incarnation, writes)
			cancel()
			if err != nil {
				return fmt.Errorf("engine: %w", err)
			}
			s.mu.Lock()
			for _, p := range chunk {
				s.written[p.key] = writtenRecord{record: p.record, revision: revision}
			}
			s.mu.Unlock()
		}
	}
	return nil
}

func (s *clusterStates) stoppedEpochs() map[MirrorStateKey]stoppedLME {
	out := map[MirrorStateKey]stoppedLME{}
	for p := range s.c.cache.MirrorPartitionStates() {
		id, err := rb.ParseTopicID(p.TopicID)
		if err != nil {
			continue
		}
		key := MirrorStateKey{Mirror: p.Mirror, TopicID: id, Partition: p.Partition}
		if record, ok := s.get(key); ok {
			addStopped(out, key, record)
		}
	}
	return out
}
