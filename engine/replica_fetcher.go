package engine

// The follower's fetchers (docs/cluster.md, data plane): for the
// partitions this node follows, one goroutine per leader node fetches
// over one connection (mirror_fetch_conn.go's fetchConn, answers read in
// place by fetchwire) with Kafka's follower Fetch, as Kafka's
// ReplicaFetcherThread and AbstractFetcherThread do:
//
//   - Fetch v17, ReplicaState{ID: this node, Epoch: -1}, read_uncommitted,
//     sessionless; per partition FetchOffset = the log end offset,
//     CurrentLeaderEpoch = the target's, LastFetchedEpoch = the log's
//     latest epoch, LogStartOffset = the log's;
//   - records are appended as sent (AppendReplica), whole batches only,
//     and the high watermark follows min(leader's, log end); the log
//     start follows the leader's;
//   - DivergingEpoch: truncate to where the logs agree (Kafka's
//     follower rule, Partition.Divergence) and fetch on from there;
//   - OFFSET_OUT_OF_RANGE: below the leader's log start (asked with
//     ListOffsets), the log restarts there; otherwise the partition
//     pauses;
//   - FENCED_LEADER_EPOCH: this node's view is older than the leader's:
//     the partition pauses until the next SetFollowing;
//     NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH (the leader has not
//     seen its role yet) and unknown topics are retried after
//     replicaFetchBackoff, as Kafka retries partitions with errors.
//
// Connections are PLAINTEXT to the leader's registered address: cluster
// security (TLS, SASL between nodes) is a later step.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/engine/fetchwire"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
)

// FollowTarget is the leader a partition follows and its leader epoch.
type FollowTarget struct {
	Leader      netio.Broker
	LeaderEpoch rb.Epoch
}

// Kafka's replica fetcher defaults.
const (
	replicaFetchVersion      = 17
	replicaFetchWaitMax      = 500 * time.Millisecond // replica.fetch.wait.max.ms
	replicaFetchPartitionMax = 1 << 20                // replica.fetch.max.bytes
	replicaFetchResponseMax  = 10 << 20               // replica.fetch.response.max.bytes
	replicaFetchBackoff      = time.Second            // replica.fetch.backoff.ms
	// replicaFetchRoleBackoff is the retry after the leader answered that
	// it does not lead at the follower's epoch yet: the leader applies the
	// role etcd gave it within a watch round, and every acks=all produce
	// waits for this follower meanwhile.
	replicaFetchRoleBackoff      = 50 * time.Millisecond
	replicaSocketTimeout         = 30 * time.Second // replica.socket.timeout.ms
	replicaDialTimeout           = 10 * time.Second
	replicaFetchConnBackoffStart = 100 * time.Millisecond
)

// replicaFetchers are the node's follower fetchers, by leader node ID.
type replicaFetchers struct {
	mu       sync.Mutex
	byLeader map[int32]*replicaFetcher // bounded by the cluster's nodes
}

// SetFollowing makes this node follow exactly targets (the whole set; it
// replaces the previous one). A leader's fetcher whose partitions and
// address are unchanged keeps its connection, and its paused partitions
// fetch again; any other is stopped and started anew.
func (n *Node) SetFollowing(targets map[logstore.TopicPartition]FollowTarget) {
	byLeader := map[int32]map[logstore.TopicPartition]FollowTarget{}
	for tp, target := range targets {
		if byLeader[target.Leader.NodeID] == nil {
			byLeader[target.Leader.NodeID] = map[logstore.TopicPartition]FollowTarget{}
		}
		byLeader[target.Leader.NodeID][tp] = target
	}
	f := &n.followers
	f.mu.Lock()
	defer f.mu.Unlock()
	for leader, fetcher := range f.byLeader {
		if want, ok := byLeader[leader]; ok && fetcher.follows(want) {
			fetcher.resume()
			delete(byLeader, leader)
			continue
		}
		fetcher.stop()
		delete(f.byLeader, leader)
	}
	for leader, want := range byLeader {
		if f.byLeader == nil {
			f.byLeader = map[int32]*replicaFetcher{}
		}
		f.byLeader[leader] = startReplicaFetcher(n, want)
	}
}

// stopFollowing stops every follower fetcher (Node.Close).
func (n *Node) stopFollowing() { n.SetFollowing(nil) }

// replicaFetcher fetches the partitions one leader leads.
type replicaFetcher struct {
	node    *Node
	log     *slog.Logger
	leader  netio.Broker
	targets map[logstore.TopicPartition]FollowTarget // never changed
	// partitions are the targets' states, owned by the goroutine but
	// for their paused flags, which resume clears.
	partitions []*followedPartition
	wake       chan struct{} // capacity 1
	cancel     context.CancelFunc
	done       chan struct{}
}

// followedPartition is one partition a fetcher follows.
type followedPartition struct {
	tp      logstore.TopicPartition
	epoch   rb.Epoch
	local   *broker.Partition // nil until the local topic exists
	topicID rb.TopicID
	paused  atomic.Bool // until the next SetFollowing
	delayed time.Time   // retried from then on (owned by the goroutine)
}

func startReplicaFetcher(n *Node, targets map[logstore.TopicPartition]FollowTarget) *replicaFetcher {
	ctx, cancel := context.WithCancel(context.Background())
	f := &replicaFetcher{node: n, targets: targets, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	for tp, target := range targets {
		f.leader = target.Leader
		f.partitions = append(f.partitions, &followedPartition{tp: tp, epoch: target.LeaderEpoch})
	}
	f.log = n.log.With("leader", f.leader.NodeID)
	go func() {
		defer close(f.done)
		f.run(ctx)
	}()
	return f
}

// follows reports whether the fetcher follows exactly targets.
func (f *replicaFetcher) follows(targets map[logstore.TopicPartition]FollowTarget) bool {
	return maps.Equal(f.targets, targets)
}

// resume lets the paused partitions fetch again.
func (f *replicaFetcher) resume() {
	for _, fp := range f.partitions {
		fp.paused.Store(false)
	}
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *replicaFetcher) stop() {
	f.cancel()
	<-f.done
}

func (f *replicaFetcher) run(ctx context.Context) {
	dialer := &sourceDialer{dialTimeout: replicaDialTimeout, requestTimeout: replicaSocketTimeout}
	addr := net.JoinHostPort(f.leader.Host, strconv.Itoa(int(f.leader.Port)))
	var conn *fetchConn
	defer func() {
		if conn != nil {
			conn.close()
		}
	}()
	backoff := replicaFetchConnBackoffStart
	for ctx.Err() == nil {
		req, next := f.request(time.Now())
		if len(req.Topics) == 0 {
			f.idle(ctx, next)
			continue
		}
		if conn == nil {
			c, err := dialer.dial(ctx, addr)
			if err != nil {
				f.log.Warn("replica fetcher: cannot connect to the leader", "address", addr, "error", err)
				f.pause(ctx, backoff)
				backoff = min(2*backoff, replicaFetchBackoff)
				continue
			}
			conn = c
		}
		if err := f.fetch(conn, req); err != nil {
			if ctx.Err() == nil {
				f.log.Warn("replica fetcher: fetch failed", "address", addr, "error", err)
			}
			conn.close()
			conn = nil
			f.pause(ctx, backoff)
			backoff = min(2*backoff, replicaFetchBackoff)
			continue
		}
		backoff = replicaFetchConnBackoffStart
	}
}

// idle waits for a resume, or until next (zero: no partition is delayed).
func (f *replicaFetcher) idle(ctx context.Context, next time.Time) {
	var timeout <-chan time.Time
	if !next.IsZero() {
		timer := time.NewTimer(time.Until(next))
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case <-ctx.Done():
	case <-f.wake:
	case <-timeout:
	}
}

// pause waits d, or until ctx ends.
func (f *replicaFetcher) pause(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// request builds the next Fetch over the partitions ready now, and
// returns when the first delayed one is due (zero: none).
func (f *replicaFetcher) request(now time.Time) (*kmsg.FetchRequest, time.Time) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = replicaFetchVersion
	req.ReplicaID = -1
	req.ReplicaState.ID, req.ReplicaState.Epoch = f.node.Cluster().NodeID, -1
	req.MaxWaitMillis = int32(replicaFetchWaitMax.Milliseconds())
	req.MinBytes, req.MaxBytes = 1, replicaFetchResponseMax
	req.SessionID, req.SessionEpoch = 0, -1
	var next time.Time
	topics := map[rb.TopicID]int{}
	for _, fp := range f.partitions {
		if fp.paused.Load() {
			continue
		}
		if fp.delayed.After(now) {
			if next.IsZero() || fp.delayed.Before(next) {
				next = fp.delayed
			}
			continue
		}
		if fp.local == nil && !f.resolve(fp) {
			fp.delayed = now.Add(replicaFetchBackoff)
			next = fp.delayed
			continue
		}
		i, ok := topics[fp.topicID]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.TopicID, t.Topic = fp.topicID, fp.tp.Topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topics[fp.topicID] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = fp.tp.Partition
		rp.CurrentLeaderEpoch = int32(fp.epoch)
		rp.FetchOffset = int64(fp.local.LogEndOffset())
		rp.LastFetchedEpoch = int32(fp.local.LatestEpoch())
		rp.LogStartOffset = int64(fp.local.LogStartOffset())
		rp.PartitionMaxBytes = replicaFetchPartitionMax
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req, next
}

// resolve finds the local partition of fp (its topic is made locally
// by whoever set the role).
func (f *replicaFetcher) resolve(fp *followedPartition) bool {
	info, ok := f.node.Topic(fp.tp.Topic)
	if !ok {
		return false
	}
	local, err := f.node.LocalPartition(fp.tp.Topic, fp.tp.Partition)
	if err != nil || local.Offline() != nil {
		return false
	}
	fp.local, fp.topicID = local, info.ID
	return true
}

// fetch sends req and applies its answer; an error is the connection's.
func (f *replicaFetcher) fetch(conn *fetchConn, req *kmsg.FetchRequest) error {
	body, buffer, err := conn.roundTrip(req, replicaFetchWaitMax)
	if err != nil {
		return err
	}
	defer fetchBuffers.release(buffer)
	resp, err := fetchwire.Parse(body)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("engine: replica fetch: %w", err)
	}
	byKey := make(map[logstore.TopicPartition]*followedPartition, len(f.partitions))
	byID := map[rb.TopicID]string{}
	for _, fp := range f.partitions {
		byKey[fp.tp] = fp
		byID[fp.topicID] = fp.tp.Topic
	}
	for topics := resp.Topics(); ; {
		topic, ok := topics.Next()
		if !ok {
			break
		}
		name, known := byID[topic.TopicID]
		for partitions := topic.Partitions(); known; {
			rp, ok := partitions.Next()
			if !ok {
				break
			}
			if fp := byKey[logstore.TopicPartition{Topic: name, Partition: rp.Partition}]; fp != nil && fp.local != nil {
				f.apply(conn, fp, &rp)
			}
		}
	}
	return nil
}

// apply takes one partition's answer.
func (f *replicaFetcher) apply(conn *fetchConn, fp *followedPartition, rp *fetchwire.Partition) {
	log := f.log.With("topic", fp.tp.Topic, "partition", fp.tp.Partition)
	switch err := kerr.ErrorForCode(rp.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.FencedLeaderEpoch):
		log.Info("replica fetcher: fenced by the leader's newer epoch; paused until the next role", "epoch", fp.epoch)
		fp.paused.Store(true)
		return
	case errors.Is(err, kerr.OffsetOutOfRange):
		f.outOfRange(conn, fp, log)
		return
	case errors.Is(err, kerr.UnknownLeaderEpoch), errors.Is(err, kerr.NotLeaderForPartition):
		log.Debug("replica fetcher: the leader is behind the role etcd gave it; retried soon", "error", err)
		fp.delayed = time.Now().Add(replicaFetchRoleBackoff)
		return
	default:
		log.Debug("replica fetcher: retried later", "error", err)
		fp.delayed = time.Now().Add(replicaFetchBackoff)
		return
	}
	if rp.DivergingEpoch.Epoch >= 0 && rp.DivergingEpoch.EndOffset >= 0 {
		offset, _ := fp.local.Divergence(rb.Epoch(rp.DivergingEpoch.Epoch), rb.Offset(rp.DivergingEpoch.EndOffset))
		log.Info("replica fetcher: truncating where the leader's log diverges", "epoch", rp.DivergingEpoch.Epoch,
			"leaderEndOffset", rp.DivergingEpoch.EndOffset, "to", offset, "logEndOffset", fp.local.LogEndOffset())
		if err := fp.local.TruncateReplica(offset); err != nil {
			f.failed(fp, log, fmt.Errorf("truncate to %d: %w", offset, err))
		}
		return
	}
	if err := fp.local.FollowSourceStart(rb.Offset(rp.LogStartOffset)); err != nil {
		f.failed(fp, log, fmt.Errorf("follow the leader's log start %d: %w", rp.LogStartOffset, err))
		return
	}
	if _, err := fp.local.AppendReplica(wholeBatches(rp.RecordBatches), rb.Offset(rp.HighWatermark)); err != nil {
		f.failed(fp, log, err)
	}
}

// failed delays a partition whose write failed (the disk, a bad batch).
func (f *replicaFetcher) failed(fp *followedPartition, log *slog.Logger, err error) {
	log.Warn("replica fetcher: write failed; retried later", "error", err)
	fp.delayed = time.Now().Add(replicaFetchBackoff)
}

// outOfRange handles OFFSET_OUT_OF_RANGE as Kafka's follower does when
// the leader's log start passed this log's end (retention, DeleteRecords
// while this node was away): the log restarts at the leader's log start.
// A log end above the leader's (its log lost records without a new
// epoch) is not recovered here: the partition pauses.
func (f *replicaFetcher) outOfRange(conn *fetchConn, fp *followedPartition, log *slog.Logger) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 7
	req.ReplicaID = f.node.Cluster().NodeID
	topic := kmsg.NewListOffsetsRequestTopic()
	topic.Topic = fp.tp.Topic
	partition := kmsg.NewListOffsetsRequestTopicPartition()
	partition.Partition, partition.CurrentLeaderEpoch, partition.Timestamp = fp.tp.Partition, int32(fp.epoch), -2
	topic.Partitions = append(topic.Partitions, partition)
	req.Topics = append(req.Topics, topic)
	resp := kmsg.NewPtrListOffsetsResponse()
	err := conn.request1(req, resp)
	start := rb.Offset(-1)
	if err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
		answer := resp.Topics[0].Partitions[0]
		err, start = kerr.ErrorForCode(answer.ErrorCode), rb.Offset(answer.Offset)
	}
	switch end := fp.local.LogEndOffset(); {
	case err != nil:
		log.Warn("replica fetcher: offset out of range, and the leader's log start is unknown; retried later", "error", err)
		fp.delayed = time.Now().Add(replicaFetchBackoff)
	case end < start:
		log.Info("replica fetcher: the leader's log starts past this log's end: restarting the log there", "logEndOffset", end, "leaderLogStartOffset", start)
		if err := fp.local.RestartAt(start); err != nil {
			f.failed(fp, log, err)
		}
	default:
		log.Error("replica fetcher: offset out of range above the leader's log start: paused until the next role", "logEndOffset", end, "leaderLogStartOffset", start)
		fp.paused.Store(true)
	}
}
