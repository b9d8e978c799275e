package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mirrord/mirrord/broker/group"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerOffsetsTopic is the group coordinator's internal topic: Kafka's
// __consumer_offsets records (broker/group's doc.go has the format), in
// one partition, since this node is the coordinator of every group.
const consumerOffsetsTopic = "__consumer_offsets"

// Compaction at open, as __mirror_state's (stateLog): the log is
// rewritten when it holds more than groupLogCompactRatio records per live
// key and more than groupLogCompactMin records.
const (
	groupLogCompactRatio = 4
	groupLogCompactMin   = 1000
	groupLogBatchRecords = 500 // records per batch when rewriting
)

// groupStore is broker/group's Store over __consumer_offsets partition 0:
// Append writes one batch and syncs it before returning; the topic is
// created at the first Append. At open the whole log is read once: the
// records are kept for the coordinator's Replay (then dropped), and when
// the log has grown past groupLogCompactRatio times its live keys, the
// last record of each live key is appended again, in log order, in a new
// segment, synced, and the log start moved to it (compaction by rewrite,
// as stateLog: a crash midway leaves either log, and both replay to the
// same groups and offsets, since the coordinator's state is the last
// record of each key). Tombstones are dropped by the rewrite.
//
// Concurrency: the coordinator's loop calls Append and Replay, one at a
// time; mu guards log against Close-time readers all the same. The first
// Append takes the node's mu (CreateInternalLog).
type groupStore struct {
	node *Node
	cfg  logstore.Config

	mu       sync.Mutex
	log      *logstore.Log  // nil until the first Append
	replayed []group.Record // read at open, handed to Replay once
	scratch  []byte         // the batch being built
}

// openGroupStore reads __consumer_offsets if the directory holds it, and
// compacts it when it has grown. A batch that cannot be read fails the
// open: the committed offsets would be lost silently otherwise.
func openGroupStore(n *Node, cfg logstore.Config) (*groupStore, error) {
	cfg.Flush = logstore.FlushOS // the coordinator syncs (Sync), once per batch of requests
	s := &groupStore{node: n, cfg: cfg}
	log, ok := n.InternalLog(consumerOffsetsTopic)
	if !ok {
		return s, nil
	}
	s.log = log
	all, err := readGroupLog(log)
	if err != nil {
		return nil, err
	}
	plain, open := resolveTransactions(all)
	live := liveGroupRecords(plain)
	if !open && len(all) > groupLogCompactMin && len(all) > groupLogCompactRatio*len(live) {
		if err := s.rewrite(live); err != nil {
			return nil, fmt.Errorf("broker: compact %s: %w", consumerOffsetsTopic, err)
		}
		all = live
	}
	s.replayed = all
	return s, nil
}

// readGroupLog returns every record of the log, in order, copied out of
// the read buffer.
func readGroupLog(log *logstore.Log) ([]group.Record, error) {
	var out []group.Record
	var buf []byte
	end := log.LogEndOffset()
	for offset := log.LogStartOffset(); offset < end; { // each pass reads at least one batch
		var err error
		if buf, err = log.ReadBytes(buf[:0], offset, 1<<20, end, true); err != nil {
			return nil, fmt.Errorf("broker: read %s at offset %d: %w", consumerOffsetsTopic, offset, err)
		}
		if len(buf) == 0 {
			break
		}
		it := rb.NewIter(buf, true)
		for it.Next() {
			b := it.Batch()
			offset = b.NextOffset()
			if b.Control() {
				if b.Transactional() {
					marker, err := markerRecord(b)
					if err != nil {
						return nil, fmt.Errorf("broker: %s marker at offset %d: %w", consumerOffsetsTopic, b.BaseOffset(), err)
					}
					out = append(out, marker)
				}
				continue
			}
			if b.Codec() != rb.CodecNone {
				return nil, fmt.Errorf("broker: %s batch at offset %d is compressed (%v)", consumerOffsetsTopic, b.BaseOffset(), b.Codec())
			}
			recs := records.NewIter(b.Records())
			n := int32(0)
			for recs.Next() {
				r := recs.Record()
				out = append(out, group.Record{Key: cloneBytes(r.Key), Value: cloneBytes(r.Value),
					Transactional: b.Transactional(), ProducerID: b.ProducerID(), ProducerEpoch: b.ProducerEpoch()})
				n++
			}
			if err := recs.Err(); err != nil || n != b.RecordCount() {
				return nil, fmt.Errorf("broker: %s batch at offset %d: %d of %d records readable: %v", consumerOffsetsTopic, b.BaseOffset(), n, b.RecordCount(), recs.Err())
			}
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("broker: %s at offset %d: %w", consumerOffsetsTopic, offset, err)
		}
	}
	return out, nil
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// liveGroupRecords returns the last record of each key that is not a
// tombstone, in log order.
func liveGroupRecords(all []group.Record) []group.Record {
	last := make(map[string]int, len(all))
	for i, r := range all {
		last[string(r.Key)] = i
	}
	var live []group.Record
	for i, r := range all {
		if last[string(r.Key)] == i && r.Value != nil {
			live = append(live, r)
		}
	}
	return live
}

// rewrite appends live in a new segment, syncs it, and moves the log
// start to it.
func (s *groupStore) rewrite(live []group.Record) error {
	if err := s.log.Roll(); err != nil {
		return err
	}
	start := s.log.LogEndOffset()
	for rest := live; len(rest) > 0; { // bounded: each pass takes up to groupLogBatchRecords
		chunk := rest[:min(len(rest), groupLogBatchRecords)]
		rest = rest[len(chunk):]
		if err := s.appendBatch(chunk); err != nil {
			return err
		}
	}
	if err := s.log.Flush(); err != nil {
		return err
	}
	s.log.SetHighWatermark(s.log.LogEndOffset())
	return s.log.AdvanceLogStart(start)
}

// appendBatch appends recs as one batch through the partition, which
// keeps its producer state (transactional records, group_txn.go).
func (s *groupStore) appendBatch(recs []group.Record) error {
	p, err := s.node.LocalPartition(consumerOffsetsTopic, 0)
	if err != nil {
		return err
	}
	s.scratch = groupBatch(s.scratch[:0], recs, time.Now().UnixMilli())
	return p.appendCoordinatorBatch(s.scratch)
}

// ensureLog creates __consumer_offsets if the node has none; s.mu is held.
func (s *groupStore) ensureLog() error {
	if s.log != nil {
		return nil
	}
	log, err := s.node.CreateInternalLog(consumerOffsetsTopic, s.cfg)
	if err != nil {
		return fmt.Errorf("broker: create %s: %w", consumerOffsetsTopic, err)
	}
	s.log = log
	return nil
}

// Append writes records as one batch and syncs it (group.Store).
func (s *groupStore) Append(recs []group.Record) error {
	if err := s.Write(recs); err != nil {
		return err
	}
	return s.Sync()
}

// Write appends records as one batch, not synced (group.GroupCommitStore:
// the coordinator syncs once for every request it drained). A
// transactional batch fails with the transaction check's kerr error when
// the producer did not add the partition at its epoch.
func (s *groupStore) Write(recs []group.Record) error {
	if len(recs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ensureLog(); err != nil {
		return err
	}
	if err := s.appendBatch(recs); err != nil {
		return fmt.Errorf("broker: %s: %w", consumerOffsetsTopic, err)
	}
	return nil
}

// Sync makes every Write before it durable (group.GroupCommitStore).
func (s *groupStore) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return nil
	}
	if err := s.log.Flush(); err != nil {
		return fmt.Errorf("broker: %s: %w", consumerOffsetsTopic, err)
	}
	return nil
}

// Replay hands the records read at open to apply, once (group.Store).
func (s *groupStore) Replay(apply func(group.Record) error) error {
	s.mu.Lock()
	recs := s.replayed
	s.replayed = nil
	s.mu.Unlock()
	for _, r := range recs {
		if err := apply(r); err != nil {
			return fmt.Errorf("broker: %s: %w", consumerOffsetsTopic, err)
		}
	}
	return nil
}

// groupCoordinator serves broker/group's coordinator as netio's
// GroupCoordinator: JoinGroup takes netio's name for the client.
type groupCoordinator struct {
	*group.Coordinator
	store *groupStore
}

func (g groupCoordinator) JoinGroup(ctx context.Context, client netio.GroupClient, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, error) {
	return g.Coordinator.JoinGroup(ctx, group.Client{ID: client.ID, Host: client.Host}, req)
}

func (g groupCoordinator) ConsumerGroupHeartbeat(ctx context.Context, client netio.GroupClient, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	return g.Coordinator.ConsumerGroupHeartbeat(ctx, group.Client{ID: client.ID, Host: client.Host}, req)
}

// openGroups opens __consumer_offsets and the coordinator over it.
func (n *Node) openGroups() error {
	store, err := openGroupStore(n, n.cfg.Log)
	if err != nil {
		return err
	}
	cfg := group.DefaultConfig()
	cfg.Logger = n.log
	if n.cfg.OffsetsRetention > 0 {
		cfg.OffsetsRetention = n.cfg.OffsetsRetention
	}
	if n.cfg.ConsumerSessionTimeout > 0 {
		cfg.ConsumerSessionTimeout = n.cfg.ConsumerSessionTimeout
	}
	if n.cfg.ConsumerHeartbeatInterval > 0 {
		cfg.ConsumerHeartbeatInterval = n.cfg.ConsumerHeartbeatInterval
	}
	cfg.Partitions = func(topic string, partition int32) bool {
		_, err := n.LocalPartition(topic, partition)
		return err == nil
	}
	cfg.Topics = func() []group.TopicMetadata {
		topics := n.Topics()
		out := make([]group.TopicMetadata, 0, len(topics))
		for _, t := range topics {
			out = append(out, group.TopicMetadata{Name: t.Name, ID: t.ID, Partitions: t.Partitions, Internal: t.Internal})
		}
		return out
	}
	coordinator, err := group.New(cfg, store)
	if err != nil {
		return fmt.Errorf("broker: open the group coordinator: %w", err)
	}
	n.groups = groupCoordinator{coordinator, store}
	n.txns.start(coordinator) // the reaper's markers now reach the coordinator
	return nil
}

// Groups is the classic group coordinator (netio.Backend).
func (n *Node) Groups() netio.GroupCoordinator { return n.groups }
