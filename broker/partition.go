package broker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

// partition is one partition log served as a netio.Partition. This node
// leads it; its leader epoch is the latest epoch in its log (0 for a new
// log), as a single-replica Kafka partition keeps its epoch.
//
// Writes (produce, delete records) are serialized by mu, which also
// guards the producer state: a sequence check and the append
// it guards happen under one lock.
type Partition struct {
	tp  logstore.TopicPartition
	log *logstore.Log
	// node is the node the partition belongs to: its transaction
	// coordinator verifies transactional produces (nil in tests of a
	// partition alone: the partition's own verification guard decides).
	node *Node

	// readOnly, while set, refuses produce, DeleteRecords and the topic's
	// CreatePartitions and DeleteTopics (SetReadOnly: a mirror writes it).
	readOnly atomic.Pointer[func(action string) error]
	// internal is set on the node's internal topics: produce and
	// DeleteRecords are refused.
	internal bool
	// localEpoch is the leader epoch this node claims beyond the epochs
	// in its log (a mirror keeps it ahead of the source's); 0 otherwise.
	localEpoch atomic.Int32
	// limits are the topic's Produce checks; now is the clock the
	// timestamps are checked against.
	limits atomic.Pointer[produceLimits]
	now    func() time.Time
	// offline holds the error of a partition whose log could not be
	// opened (offline.go); log is not to be touched while it is set.
	offline atomic.Pointer[error]

	// replication is the partition's role in a cluster (replica.go).
	replication replication

	mu sync.Mutex
	// watchers are the fetches waiting on the partition; notify signals them.
	watchers  netio.Watchers
	producers *producerStates
}

func newPartition(n *Node, tp logstore.TopicPartition, log *logstore.Log, limits produceLimits) *Partition {
	p := &Partition{tp: tp, log: log, node: n, producers: newProducerStates(), now: time.Now}
	p.limits.Store(&limits)
	return p
}

// notify wakes long polls; mu is held.
func (p *Partition) notify() {
	p.watchers.Notify()
}

// wake wakes long polls on a change the offsets do not show: the
// partition was deleted (readers find it gone), or its leader epoch rose
// (a fetch naming the old one is now fenced). mu must not be held.
func (p *Partition) wake() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notify()
}

func (p *Partition) Watchers() *netio.Watchers { return &p.watchers }

func (p *Partition) LeaderEpoch() rb.Epoch {
	return p.roleLeaderEpoch(max(p.LatestEpoch(), rb.Epoch(p.localEpoch.Load()), 0))
}

func (p *Partition) Offsets() netio.Offsets {
	start, hw, end := p.log.LogStartOffset(), p.log.HighWatermark(), p.log.LogEndOffset()
	return netio.Offsets{LogStartOffset: start, HighWatermark: hw, LastStableOffset: p.lastStableOffset(start, hw), LogEndOffset: end}
}

func (p *Partition) Read(offset rb.Offset, maxBytes int32, isolation netio.Isolation, minOneBatch bool) (netio.ReadResult, error) {
	if err := p.refuseUnlessLeader(); err != nil {
		return netio.ReadResult{}, err
	}
	offsets := p.Offsets()
	result := netio.ReadResult{Offsets: offsets}
	limit := offsets.HighWatermark
	if isolation == netio.ReadCommitted {
		limit = offsets.LastStableOffset
	}
	slice, err := p.log.Read(offset, int64(maxBytes), limit, minOneBatch)
	if err != nil {
		return result, readError(err)
	}
	if slice.Length > 0 {
		result.Records = netio.FileRange{File: slice.File, Position: slice.Position, Length: slice.Length, Release: slice.Release}
	}
	if isolation == netio.ReadCommitted && slice.Length > 0 {
		result.AbortedTransactions = p.abortedTransactions(offset, limit)
	}
	return result, nil
}

func readError(err error) error {
	switch {
	case errors.Is(err, logstore.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange
	case errors.Is(err, logstore.ErrClosed):
		return kerr.UnknownTopicOrPartition
	}
	return err
}

// EndOffsetForEpoch answers as Kafka's leader epoch cache
// (LeaderEpochFileCache.endOffsetFor) over the log's epochs and the
// leader epoch: a Kafka leader enters its epoch in the cache at the log
// end offset when it becomes leader, before any record carries it, so a
// new partition answers epoch 0 with offset 0. Here that entry is implied
// while no batch carries the leader epoch (see leaderEpochAhead).
func (p *Partition) EndOffsetForEpoch(requested rb.Epoch) (rb.Epoch, rb.Offset) {
	latest, leader, ahead := p.leaderEpochAhead()
	if !ahead || requested == rb.NoEpoch || requested > leader || latest >= 0 && requested <= latest {
		return p.log.EndOffsetForEpoch(requested)
	}
	end := p.log.LogEndOffset()
	if requested == leader || latest < 0 {
		return requested, end
	}
	return latest, end
}

// leaderEpochAhead returns the log's latest epoch (-1 for none) and the
// leader epoch, and whether the leader epoch is above every epoch in the
// log: then it starts at the log end offset. A mirrored partition serves
// the source's epochs, as the source's follower would: the local epoch it
// keeps ahead of them only fences, and is never ahead here.
func (p *Partition) leaderEpochAhead() (latest, leader rb.Epoch, ahead bool) {
	latest, leader = p.log.LatestEpoch(), p.LeaderEpoch()
	return latest, leader, leader > latest && !p.isReadOnly()
}

// servedLatestEpoch is the latest epoch of ListOffsets latest: Kafka's
// leader answers the latest epoch of its cache, which holds its own epoch
// from when it was elected; a mirror answers the source's latest.
func (p *Partition) servedLatestEpoch() rb.Epoch {
	latest, leader, ahead := p.leaderEpochAhead()
	if ahead {
		return leader
	}
	return latest
}

// ListOffset answers ListOffsets: -2 earliest, -1 latest (high watermark,
// or last stable offset for read_committed), -3 the first record with the
// largest timestamp, else the first batch whose max timestamp reaches the
// target (narrowed to the record where the batch can be decoded).
func (p *Partition) ListOffset(timestamp int64, isolation netio.Isolation) (rb.Offset, int64, rb.Epoch, error) {
	if err := p.refuseUnlessLeader(); err != nil {
		return -1, -1, -1, err
	}
	offsets := p.Offsets()
	switch timestamp {
	case -2, -4: // earliest, earliest-local (no tiered storage here)
		return offsets.LogStartOffset, -1, p.epochAt(offsets.LogStartOffset), nil
	case -1, -5: // latest, latest-tiered
		latest := offsets.HighWatermark
		if isolation == netio.ReadCommitted {
			latest = offsets.LastStableOffset
		}
		return latest, -1, p.servedLatestEpoch(), nil
	case -3: // max timestamp
		// Kafka answers the first record carrying the largest timestamp, in
		// the first batch that reached it (DefaultRecordBatch
		// offsetOfMaxTimestamp), not that batch's base offset.
		ts, offset, ok := p.log.MaxTimestamp()
		if !ok {
			return -1, -1, -1, nil
		}
		recordOffset, _, epoch, err := p.refineTimestamp(offset, ts, 0)
		if err != nil {
			return -1, -1, -1, readError(err)
		}
		return recordOffset, ts, epoch, nil
	}
	offset, ok, err := p.log.OffsetForTimestamp(timestamp)
	if err != nil {
		return -1, -1, -1, readError(err)
	}
	if !ok {
		return -1, -1, -1, nil
	}
	recordOffset, recordTimestamp, epoch, err := p.refineTimestamp(offset, timestamp, offsets.LogStartOffset)
	if err != nil {
		return -1, -1, -1, readError(err)
	}
	return recordOffset, recordTimestamp, epoch, nil
}

// epochAt is the leader epoch of the batch holding offset (the latest
// epoch for the log end offset; the leader epoch there when no batch
// carries it yet, see EndOffsetForEpoch), or -1.
func (p *Partition) epochAt(offset rb.Offset) rb.Epoch {
	entries := p.log.Epochs()
	epoch := rb.NoEpoch
	for _, e := range entries {
		if e.StartOffset <= offset {
			epoch = e.Epoch
		}
	}
	if _, leader, ahead := p.leaderEpochAhead(); ahead && offset >= p.log.LogEndOffset() {
		return leader
	}
	return epoch
}

// DeleteRecords moves the log start offset; -1 means the high watermark.
func (p *Partition) DeleteRecords(_ context.Context, offset rb.Offset) (rb.Offset, error) {
	if p.internal {
		return -1, errInternalTopic(p.tp.Topic)
	}
	if err := p.refuseUnlessLeader(); err != nil {
		return -1, err
	}
	if err := p.refuseIfReadOnly("DeleteRecords"); err != nil {
		return -1, err // the mirror follows the source's log start
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	hw := p.log.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, kerr.OffsetOutOfRange
	}
	if err := p.log.AdvanceLogStart(offset); err != nil {
		return -1, err
	}
	p.logStartAdvanced()
	p.notify()
	return p.log.LogStartOffset(), nil
}
