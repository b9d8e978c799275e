package netio

// Fetch, versions 4-18: the hot path. The record bytes of the response go
// from the segment file to the socket (sendfile.go) around fields this
// package encodes itself (fetch_encode.go); sessions are in fetch_session.go.
//
// Per partition, in request (or session) order, as Kafka's
// ReplicaManager.readFromLog and Partition.fetchRecords do:
//
//   - Topics are named by ID from v13 (unknown: UNKNOWN_TOPIC_ID), by name
//     before (unknown: UNKNOWN_TOPIC_OR_PARTITION).
//   - CurrentLeaderEpoch (v9+, -1 skips the check) below ours is
//     FENCED_LEADER_EPOCH, above ours UNKNOWN_LEADER_EPOCH; from v16 such an
//     answer names the current leader (tag) and its endpoint (top-level tag).
//   - LastFetchedEpoch (v12+, -1 skips the check): EndOffsetForEpoch of it
//     unknown, or a fetch offset below the log start, is OFFSET_OUT_OF_RANGE;
//     an end offset below the fetch offset or an end epoch other than the
//     one asked is answered with DivergingEpoch{epoch, end offset} and no
//     records, so the client truncates.
//   - Records come from Partition.Read bounded by the partition's max bytes
//     and by what is left of the response's (request MaxBytes, capped at
//     fetchResponseBytesMax); the first partition that returns data may
//     exceed both by one batch (KIP-74), the others may not.
//   - read_committed answers the aborted transactions of the range (an
//     empty list, never null); read_uncommitted answers null.
//   - A partition in error answers -1 for every offset and no records.
//   - A partition another node leads (ReplicatedPartition) is
//     NOT_LEADER_OR_FOLLOWER, after the leader epoch check.
//   - Consumers are served up to the high watermark or last stable
//     offset. A follower's fetch (ReplicaID, or ReplicaState.ID from v15,
//     of 0 or more) reads up to the log end through
//     ReplicaPartition.ReadReplica where the partition has it (the fetch
//     offset is the follower's log end, which the leader's ISR and high
//     watermark follow), and is authorized as Kafka's
//     KafkaApis.handleFetchRequest does: CLUSTER_ACTION on the cluster
//     instead of READ on each topic, and without it every partition is
//     TOPIC_AUTHORIZATION_FAILED.
//   - Authorization is decided for every partition of every request, a
//     session's quiet ones included (Kafka authorizes each partition of
//     the fetch context), so a removed ACL takes effect on the next fetch;
//     a quiet partition costs one lock-free decision per run of its topic.
//
// Long poll: the response goes at once when it holds MinBytes of records,
// when a partition is in error or diverged, or when MaxWait (capped at
// fetchWaitMax) is 0. Otherwise the fetch registers with the Watchers of
// every partition it read and waits (fetch_wait.go); a wake-up re-reads
// only the partitions that signalled, and once they make the response due
// (or at MaxWait) every partition is read again for the response. It
// holds no FileRange while waiting, so a truncation that waits for
// readers cannot stall behind a long poll.
//
// Every FileRange read is released exactly once: when a read pass is
// superseded, after the response is written, or on any error.

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// fetchWaitMax bounds a request's MaxWaitMillis.
	fetchWaitMax = 30 * time.Second
	// fetchResponseBytesMax bounds a request's MaxBytes, as Kafka's
	// fetch.max.bytes (55 MiB) does.
	fetchResponseBytesMax = 55 << 20
)

// fetchReply is one Fetch being served: the partitions asked and then
// answered, and the response fields. It writes its own frame.
type fetchReply struct {
	server        *Server
	conn          *conn // asked whether it may READ each topic
	version       int16
	errorCode     int16 // top level: session errors only
	sessionID     int32
	partitions    []fetchPartition
	nodeEndpoints []fetchNodeEndpoint // v16+: the leader named by current_leader tags
	holes         []fetchHole         // filled by appendFetchResponse
	isolation     Isolation
	// follower: the fetch names a replica; followerAllowed: the client
	// may CLUSTER_ACTION, which replaces the topic checks.
	follower, followerAllowed bool
	replicaID                 int32 // the follower's node ID
	nodeID                    int32 // this node's: the leader a fetch must reach
}

func serveFetch(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.FetchRequest)
	isolation, err := fetchIsolation(req.IsolationLevel)
	if err != nil {
		return nil, err
	}
	sessions := c.server.sessions
	f := &fetchReply{server: c.server, conn: c, version: req.Version, isolation: isolation, nodeID: c.server.backend.Cluster().NodeID}
	if replica := fetchReplicaID(req); replica >= 0 {
		f.follower, f.replicaID = true, replica
		f.followerAllowed = c.authorizeCluster(opClusterAction)
	}
	use := sessions.begin(c, req, f)
	if f.errorCode == 0 {
		if err := f.fetch(ctx, req, isolation); err != nil {
			f.releaseRecords()
			return nil, err
		}
	}
	sessions.finish(c, use, f)
	return f, nil
}

// fetchIsolation parses an isolation level; Kafka refuses to parse a
// request with any other value, and so do we.
func fetchIsolation(level int8) (Isolation, error) {
	switch level {
	case 0:
		return ReadUncommitted, nil
	case 1:
		return ReadCommitted, nil
	}
	return 0, fmt.Errorf("%w: fetch isolation level %d", ErrFrame, level)
}

// fetchReplicaID is the replica a fetch names: -1 (or below) for a
// consumer.
func fetchReplicaID(req *kmsg.FetchRequest) int32 {
	if req.Version >= 15 {
		return req.ReplicaState.ID
	}
	return req.ReplicaID
}

// addRequestPartitions makes the request's partitions the ones to fetch.
func (f *fetchReply) addRequestPartitions(req *kmsg.FetchRequest) {
	count := 0
	for _, rt := range req.Topics {
		count += len(rt.Partitions)
	}
	f.partitions = make([]fetchPartition, 0, count)
	for _, rt := range req.Topics {
		topic := rt.Topic
		if req.Version >= 13 {
			topic = "" // resolved from the ID when read
		}
		for _, rp := range rt.Partitions {
			f.partitions = append(f.partitions, fetchPartition{
				topic: topic, topicID: rt.TopicID, partition: rp.Partition,
				fetchOffset: rb.Offset(rp.FetchOffset), currentLeaderEpoch: rb.Epoch(rp.CurrentLeaderEpoch),
				lastFetchedEpoch: rb.Epoch(rp.LastFetchedEpoch), partitionMaxBytes: rp.PartitionMaxBytes,
			})
		}
	}
}

// fetch reads every partition, waiting as the request allows.
func (f *fetchReply) fetch(ctx context.Context, req *kmsg.FetchRequest, isolation Isolation) error {
	wait := min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, fetchWaitMax)
	deadline := time.Now().Add(wait)
	maxBytes := min(max(req.MaxBytes, 0), fetchResponseBytesMax)
	var timer *time.Timer
	var waiter *fetchWaiter
	defer func() {
		if waiter != nil {
			waiter.end()
		}
	}()
	for {
		bytes, respondNow := f.readAll(isolation, maxBytes)
		if respondNow || bytes >= int64(req.MinBytes) || !time.Now().Before(deadline) {
			return nil
		}
		if waiter != nil {
			waiter.end() // the wake-ups counted enough bytes, this pass did not: register anew
		}
		waiter = newFetchWaiter()
		if f.watchAll(waiter) == 0 {
			return nil
		}
		f.releaseRecords()
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
			defer timer.Stop()
		}
		if err := f.waitForBytes(ctx, waiter, timer.C, isolation, maxBytes, bytes, int64(req.MinBytes)); err != nil {
			return err
		}
	}
}

// readAll reads every partition once, releasing what the previous pass
// read. It returns the record bytes read and whether the response must go
// now whatever MinBytes says (an error or a diverging epoch).
func (f *fetchReply) readAll(isolation Isolation, maxBytes int32) (bytes int64, respondNow bool) {
	f.releaseRecords()
	f.nodeEndpoints = f.nodeEndpoints[:0]
	remaining := int64(maxBytes)
	minOneBatch := true
	var lastDecision topicDecision
	for i := range f.partitions {
		p := &f.partitions[i]
		if p.quiet {
			if !isClosed(p.changed) && f.mayStillRead(p, &lastDecision) {
				p.resetResponse()
				p.omit = true // unchanged: an incremental response leaves it out
				continue
			}
			p.quiet = false // it changed while this request waited: read it
		}
		if f.version >= 13 && p.topic == "" && i > 0 && f.partitions[i-1].topicID == p.topicID {
			p.topic = f.partitions[i-1].topic // one TopicByID per run of a topic
		}
		limit := min(remaining, int64(max(p.partitionMaxBytes, 0)))
		f.readPartition(p, isolation, int32(limit), minOneBatch)
		length := p.records.Length
		if length > 0 {
			minOneBatch = false
		}
		remaining = max(0, remaining-length)
		bytes += length
		respondNow = respondNow || p.errorCode != 0 || p.divergingEpoch.set()
	}
	return bytes, respondNow
}

// topicDecision is the last authorization decision of a read pass, kept
// for the next partition of the same topic.
type topicDecision struct {
	topic   string
	allowed bool
}

// mayStillRead reports whether the client may still read a quiet
// session partition: the decision readPartition would take, without
// counting a denial (readPartition, reading it again, counts it).
func (f *fetchReply) mayStillRead(p *fetchPartition, last *topicDecision) bool {
	if f.follower {
		return f.followerAllowed
	}
	if f.server.cfg.Authorizer == nil {
		return true
	}
	if last.topic != p.quietTopic || last.topic == "" {
		*last = topicDecision{topic: p.quietTopic, allowed: p.quietTopic != "" && f.conn.authorizeQuietly(opRead, resourceTopic, p.quietTopic)}
	}
	return last.allowed
}

// deniedAbortedTransactions is a denied partition's aborted transactions:
// an empty array, not null, as KafkaApis.handleFetchRequest answers it
// with FetchResponse.partitionResponse, whose PartitionData keeps the
// schema's default (an empty list).
var deniedAbortedTransactions = []AbortedTransaction{}

// readPartition answers one partition and keeps its Watchers and their
// Changed channel as of the read (nil when there is no such partition).
func (f *fetchReply) readPartition(p *fetchPartition, isolation Isolation, maxBytes int32, minOneBatch bool) {
	p.resetResponse()
	p.watchers, p.changed = nil, nil
	if f.follower && !f.followerAllowed {
		p.errorCode, p.abortedTransactions = kerr.TopicAuthorizationFailed.Code, deniedAbortedTransactions
		return
	}
	backend := f.server.backend
	if f.version >= 13 && p.topic == "" {
		t, ok := backend.TopicByID(p.topicID)
		if !ok {
			p.errorCode = kerr.UnknownTopicID.Code
			return
		}
		p.topic = t.Name
	}
	if !f.follower && !f.conn.authorize(opRead, resourceTopic, p.topic) {
		p.errorCode, p.abortedTransactions = kerr.TopicAuthorizationFailed.Code, deniedAbortedTransactions
		return
	}
	partition, err := backend.Partition(p.topic, p.partition)
	if err != nil {
		p.errorCode = errorCode(f.server.log, err, kerr.KafkaStorageError)
		if f.version >= 16 && p.errorCode == kerr.NotLeaderForPartition.Code {
			f.nameLeader(p, nil) // held elsewhere: the cluster's view names the leader
		}
		return
	}
	p.watchers = partition.Watchers()
	p.changed = p.watchers.Changed()
	if err := f.readRecords(p, partition, isolation, maxBytes, minOneBatch); err != nil {
		p.resetResponse()
		p.errorCode = errorCode(f.server.log, err, kerr.KafkaStorageError)
		if f.version >= 16 && (p.errorCode == kerr.FencedLeaderEpoch.Code || p.errorCode == kerr.NotLeaderForPartition.Code) {
			f.nameLeader(p, partition)
		}
	}
}

// readRecords checks the epochs of p and reads its records.
func (f *fetchReply) readRecords(p *fetchPartition, partition Partition, isolation Isolation, maxBytes int32, minOneBatch bool) error {
	if err := checkLeaderEpoch(p.currentLeaderEpoch, fencingEpoch(partition, f.follower)); err != nil {
		return err
	}
	if err := checkLeader(partition, f.nodeID); err != nil {
		return err
	}
	if p.lastFetchedEpoch >= 0 {
		if diverged, err := checkDivergence(p, partition); err != nil || diverged {
			return err
		}
	}
	read, err := f.read(p, partition, isolation, maxBytes, minOneBatch)
	if err != nil {
		releaseRange(f.server.log, read.Records)
		return err
	}
	if r := read.Records; r.Length < 0 || r.Length > fetchRecordBytesMax || r.Length > 0 && r.File == nil {
		releaseRange(f.server.log, r)
		return fmt.Errorf("netio: fetch %s/%d at %d: the backend read a bad range (%d bytes, file %v)", p.topic, p.partition, p.fetchOffset, r.Length, r.File != nil)
	}
	p.records = read.Records
	p.highWatermark = read.Offsets.HighWatermark
	p.lastStableOffset = read.Offsets.LastStableOffset
	p.logStartOffset = read.Offsets.LogStartOffset
	if isolation == ReadCommitted {
		p.abortedTransactions = read.AbortedTransactions
		if p.abortedTransactions == nil {
			p.abortedTransactions = []AbortedTransaction{}
		}
	}
	return nil
}

// read reads p's records: a follower's through ReadReplica, where the
// partition serves followers.
func (f *fetchReply) read(p *fetchPartition, partition Partition, isolation Isolation, maxBytes int32, minOneBatch bool) (ReadResult, error) {
	if replica, ok := partition.(ReplicaPartition); ok && f.follower {
		return replica.ReadReplica(f.replicaID, p.fetchOffset, maxBytes, minOneBatch)
	}
	return partition.Read(p.fetchOffset, maxBytes, isolation, minOneBatch)
}

// checkLeaderEpoch fences a request's CurrentLeaderEpoch against ours.
func checkLeaderEpoch(requested, current rb.Epoch) error {
	switch {
	case requested < 0:
		return nil
	case requested < current:
		return kerr.FencedLeaderEpoch
	case requested > current:
		return kerr.UnknownLeaderEpoch
	}
	return nil
}

// checkDivergence compares the client's LastFetchedEpoch with our epoch
// history. When the client's log diverged it fills p.divergingEpoch and
// the offsets and reports true; p then carries no records.
func checkDivergence(p *fetchPartition, partition Partition) (bool, error) {
	endEpoch, endOffset := partition.EndOffsetForEpoch(p.lastFetchedEpoch)
	offsets := partition.Offsets()
	switch {
	case endEpoch < 0 || endOffset < 0:
		return false, kerr.OffsetOutOfRange // the epoch is unknown to us
	case p.fetchOffset < offsets.LogStartOffset:
		return false, kerr.OffsetOutOfRange
	case endOffset >= p.fetchOffset && endEpoch == p.lastFetchedEpoch:
		return false, nil
	}
	p.divergingEpoch = fetchEpochEndOffset{epoch: endEpoch, endOffset: endOffset}
	p.highWatermark = offsets.HighWatermark
	p.lastStableOffset = offsets.LastStableOffset
	p.logStartOffset = offsets.LogStartOffset
	return true, nil
}

// nameLeader fills the current_leader tag of p and the endpoint it names
// (KIP-951), once per node; an unknown leader is {-1, -1}. partition is
// nil when this node does not hold it.
func (f *fetchReply) nameLeader(p *fetchPartition, partition Partition) {
	leader, epoch, endpoint, found := f.conn.partitionLeader(p.topic, p.partition, partition)
	if leader >= 0 && partition != nil {
		epoch = fencingEpoch(partition, f.follower) // a follower is told the epoch it is fenced by
	}
	p.currentLeader = fetchLeader{leaderID: leader, leaderEpoch: epoch}
	if !found || slices.ContainsFunc(f.nodeEndpoints, func(e fetchNodeEndpoint) bool { return e.nodeID == leader }) {
		return
	}
	f.nodeEndpoints = append(f.nodeEndpoints, fetchNodeEndpoint{nodeID: endpoint.NodeID, host: endpoint.Host, port: endpoint.Port})
}

// writeFrame writes the response: the encoded fields from c.out, each
// partition's records from its file in between. It releases every range,
// whatever happens.
func (f *fetchReply) writeFrame(c *conn, h RequestHeader) error {
	defer f.releaseRecords()
	out := appendResponseHeader(c.out[:0], h.CorrelationID, f.version >= 12)
	out, recordBytes := appendFetchResponse(out, f)
	c.out = out
	if size := int64(len(out)-4) + recordBytes; size > math.MaxInt32 {
		return fmt.Errorf("netio: fetch response of %d bytes does not fit a frame", size)
	}
	finishFrame(out, recordBytes)
	stats := &c.server.sessions.stats.transfer
	written := 0
	for _, hole := range f.holes {
		if _, err := c.w.Write(out[written:hole.at]); err != nil {
			return err
		}
		written = hole.at
		if err := writeFileRange(c, f.partitions[hole.partition].records, stats); err != nil {
			return err
		}
	}
	if _, err := c.w.Write(out[written:]); err != nil {
		return err
	}
	return c.w.Flush()
}

// releaseRecords releases every range f holds.
func (f *fetchReply) releaseRecords() {
	for i := range f.partitions {
		releaseRange(f.server.log, f.partitions[i].records)
		f.partitions[i].records = FileRange{}
	}
}

// releaseRange releases r; a failure is logged, as there is no one to
// answer it to.
func releaseRange(log *slog.Logger, r FileRange) {
	if r.Release == nil {
		return
	}
	if err := r.Release(); err != nil {
		log.Warn("fetch: releasing a file range failed", "error", err)
	}
}
