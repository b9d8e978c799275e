package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/engine/fetchwire"
	"github.com/mirrord/mirrord/engine/mirrorstate"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetcher mirrors the partitions one source broker leads, in one fetch
// session (KIP-227): READ_UNCOMMITTED, ReplicaID -1, topic IDs,
// CurrentLeaderEpoch from the source's metadata, LastFetchedEpoch from the
// local epoch cache. It is one goroutine, owned by its mirror, which
// replaces its partition set through assign and stops it by cancelling
// its context.
type fetcher struct {
	mirror *mirror
	broker int32
	log    *slog.Logger
	assign chan []*mirrorPartition // capacity 1: the latest set wins

	partitions []*mirrorPartition // assigned, sorted
	ready      []*mirrorPartition // fetched this round: assigned and not waiting to retry
	fetched    []*mirrorPartition // the last round's ready set, for the session
	session    fetchSession
	// sent is what the session's source holds for each partition: the
	// fields last sent. An incremental request names only partitions whose
	// fields changed since (KIP-227); a full one names all and refills it.
	sent map[*mirrorPartition]sentPartition
	// lowSpace is set by apply when the node refused an append because
	// its log directory is below log.dir.reserve.bytes: the fetcher waits
	// for space (waitForSpace) instead of failing the partitions.
	lowSpace atomic.Bool

	// conn is the connection to the source broker (nil: dial before the
	// next Fetch).
	conn *fetchConn
	// The lookups of an answer, kept across rounds: byID is rebuilt when
	// the ready set changes; answered and withRecords are emptied.
	byID        map[[16]byte]map[int32]*mirrorPartition
	answered    map[*mirrorPartition]bool
	withRecords []appliedPartition
}

// sentPartition is the fields of a partition in a Fetch request that
// change between rounds.
type sentPartition struct {
	fetchOffset        int64
	lastFetchedEpoch   int32
	currentLeaderEpoch int32
}

// fetchSession is the client side of a fetch session.
type fetchSession struct {
	id    int32
	epoch int32 // 0 starts a full session; -1 means sessionless
}

func newFetcher(m *mirror, broker int32) *fetcher {
	return &fetcher{mirror: m, broker: broker, log: m.log.With("source_broker", broker), assign: make(chan []*mirrorPartition, 1)}
}

// setPartitions hands the fetcher its new partition set.
func (f *fetcher) setPartitions(partitions []*mirrorPartition) {
	select {
	case <-f.assign: // drop a set it has not taken yet
	default:
	}
	f.assign <- partitions
}

// run fetches until ctx is done. A failed Fetch (no answer, or an error
// for the whole request) waits reconnectBackoff before the next, with a
// new session and a metadata refresh; an answer resets the backoff.
func (f *fetcher) run(ctx context.Context) {
	defer f.mirror.metrics.fetcherStopped(f)
	defer f.mirror.health.forget(fetchPath(f.broker))
	defer f.take(nil)
	defer f.closeConn()
	var failures int32 // in a row
	for ctx.Err() == nil {
		select {
		case set := <-f.assign:
			// Every metadata refresh hands the set over again; selectReady
			// starts a new full session only when it changed.
			f.take(set)
		default:
		}
		if idle, handover := f.selectReady(); idle {
			// Nothing to fetch until the owner hands a new set, or until
			// the fetcher that had a partition before lets go of it.
			var recheck <-chan time.Time
			if handover {
				recheck = time.After(handoverRecheck)
			}
			select {
			case <-ctx.Done():
				return
			case set := <-f.assign:
				f.take(set)
			case <-recheck:
			}
			continue
		}
		err := f.fetchOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if f.lowSpace.Swap(false) && !f.waitForSpace(ctx) {
			return
		}
		f.mirror.health.observe(fetchPath(f.broker), err)
		if err == nil {
			failures = 0
			continue
		}
		failures = min(failures+1, reconnectAttemptsMax)
		backoff := reconnectBackoff.Backoff(failures, processJitter{})
		f.log.Info("mirror fetch failed; retrying", "error", err, "backoff", backoff, "failures", failures)
		f.session = fetchSession{}
		f.closeConn()
		f.mirror.refreshSoon()
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// lowSpaceRecheck is how often a fetcher waiting for space looks again.
const lowSpaceRecheck = time.Second

// waitForSpace waits until the node's log directory is above its reserve
// again (false: ctx ended first). The disk filling is the node's state,
// not the partitions': they stay MIRRORING, lag growing, and spend none
// of their FAILED retries (mirror.failed.retry.max.attempts would give up
// on them after minutes of a full disk); the status page and
// mirrord_log_dir_low_space say why. What the refused append held is
// fetched again from the log end once writes resume.
func (f *fetcher) waitForSpace(ctx context.Context) bool {
	f.log.Warn("mirror fetch waits for space in the log directory", "log_dir_reserve_bytes", f.mirror.node.LogDirSpace().ReserveBytes)
	ticker := time.NewTicker(lowSpaceRecheck)
	defer ticker.Stop()
	for f.mirror.node.LogDirSpace().Low {
		select {
		case <-ctx.Done():
			return false
		case <-ticker.C:
		}
	}
	f.log.Info("mirror fetch resumes: the log directory has space again")
	return true
}

// take makes set the fetcher's partitions, letting go of those it had
// and no longer has: another fetcher may fetch them now (the source
// leader moved).
func (f *fetcher) take(set []*mirrorPartition) {
	for _, mp := range f.partitions {
		if !slices.Contains(set, mp) {
			mp.fetcher.CompareAndSwap(f, nil)
		}
	}
	f.partitions = set
}

// handoverRecheck is how often an idle fetcher looks whether a partition
// handed to it is free of the fetcher it came from (which lets go between
// two fetches).
const handoverRecheck = 20 * time.Millisecond

// selectReady picks the partitions to fetch this round into f.ready: those
// whose machines fetch them (a failure or a divergence stops a partition
// at once, before its machine hears of it) and that no other fetcher
// holds: a partition is in one fetcher's requests at a time. A change of
// the set starts a new full fetch session. idle means none is ready;
// handover, that some wait for another fetcher to let go.
func (f *fetcher) selectReady() (idle, handover bool) {
	ready := f.ready[:0]
	for _, mp := range f.partitions {
		if !mp.fetching.Load() {
			continue
		}
		if !mp.fetcher.CompareAndSwap(nil, f) && mp.fetcher.Load() != f {
			handover = true
			continue
		}
		ready = append(ready, mp)
	}
	if !samePartitions(ready, f.fetched) || f.byID == nil {
		f.session = fetchSession{}
		f.fetched = append(f.fetched[:0], ready...)
		f.byID = make(map[[16]byte]map[int32]*mirrorPartition, len(ready))
		for _, mp := range ready {
			if f.byID[mp.topicID] == nil {
				f.byID[mp.topicID] = map[int32]*mirrorPartition{}
			}
			f.byID[mp.topicID][mp.partition] = mp
		}
	}
	f.ready = ready
	return len(ready) == 0, handover
}

func samePartitions(a, b []*mirrorPartition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// fetchOnce sends one Fetch and applies its answer.
func (f *fetcher) fetchOnce(ctx context.Context) error {
	req := f.request()
	started := time.Now()
	body, buffer, err := f.roundTrip(ctx, req)
	if err != nil {
		return err
	}
	// The answer's records are applied from the buffer, before it goes
	// back to the pool.
	defer fetchBuffers.release(buffer)
	f.mirror.metrics.observeFetch(f, time.Since(started))
	resp, err := fetchwire.Parse(body)
	if err != nil {
		f.closeConn()
		return fmt.Errorf("fetch from broker %d: %w", f.broker, err)
	}
	switch err := kerr.ErrorForCode(resp.ErrorCode); {
	case errors.Is(err, kerr.FetchSessionIDNotFound), errors.Is(err, kerr.InvalidFetchSessionEpoch):
		f.session = fetchSession{}
		return nil
	case err != nil:
		return fmt.Errorf("fetch from broker %d: %w", f.broker, err)
	}
	incremental := req.SessionEpoch > 0
	f.advanceSession(resp.SessionID)
	if f.answered == nil {
		f.answered = make(map[*mirrorPartition]bool, len(f.ready))
	}
	clear(f.answered)
	withRecords := f.withRecords[:0]
	for topics := resp.Topics(); ; {
		rt, ok := topics.Next()
		if !ok {
			break
		}
		for partitions := rt.Partitions(); ; {
			rp, ok := partitions.Next()
			if !ok {
				break
			}
			mp := f.byID[rt.TopicID][rp.Partition]
			switch {
			case mp == nil:
				continue
			case len(rp.RecordBatches) > 0:
				withRecords = append(withRecords, appliedPartition{mp, rp})
			default:
				f.apply(ctx, mp, &rp, started)
			}
			f.answered[mp] = true
		}
	}
	if incremental {
		// An incremental answer leaves out the partitions of the session
		// with nothing new: their high watermark is unchanged as of now.
		// Those it names are dated again as they are applied, or keep
		// their date on an error.
		for _, mp := range f.ready {
			if !f.answered[mp] {
				mp.confirmHighWatermark(started)
			}
		}
	}
	f.applyAll(ctx, withRecords, started)
	clear(withRecords) // the records are the buffer's, released on return
	f.withRecords = withRecords[:0]
	return nil
}

// roundTrip sends req over the fetcher's connection, dialing the source
// broker first if it has none (or its SASL session ends soon), and
// returns the answer's body and the pooled buffer holding it. An error
// closes the connection.
func (f *fetcher) roundTrip(ctx context.Context, req *kmsg.FetchRequest) ([]byte, *[]byte, error) {
	if f.conn != nil && f.conn.expired(time.Now()) {
		f.closeConn()
	}
	if f.conn == nil {
		addr, ok := f.mirror.sourceBrokerAddr(f.broker)
		if !ok {
			return nil, nil, fmt.Errorf("fetch from broker %d: %w", f.broker, errSourceBrokerUnknown)
		}
		conn, err := f.mirror.dialer.dial(ctx, addr)
		if err != nil {
			return nil, nil, fmt.Errorf("fetch from broker %d at %s: %w", f.broker, addr, err)
		}
		f.conn = conn
	}
	body, buffer, err := f.conn.roundTrip(req, time.Duration(req.MaxWaitMillis)*time.Millisecond)
	if err != nil {
		f.closeConn()
		return nil, nil, fmt.Errorf("fetch from broker %d: %w", f.broker, err)
	}
	return body, buffer, nil
}

// errSourceBrokerUnknown: the source's metadata has not named the broker
// (yet, or any more).
var errSourceBrokerUnknown = errors.New("engine: the source broker is not in the source's metadata")

func (f *fetcher) closeConn() {
	if f.conn != nil {
		f.conn.close()
		f.conn = nil
	}
}

// applyParallel is how many partitions of one answer are appended at once:
// their CRC checks and writes use every core, and the syncs of partitions
// seeing their first batch or a new epoch overlap.
const applyParallel = 4

type appliedPartition struct {
	mp *mirrorPartition
	rp fetchwire.Partition
}

// applyAll applies the partitions of an answer that carry records,
// applyParallel at a time; each partition is applied by one goroutine,
// and all are done when it returns, before the next Fetch is built.
func (f *fetcher) applyAll(ctx context.Context, parts []appliedPartition, sent time.Time) {
	if len(parts) == 1 {
		f.apply(ctx, parts[0].mp, &parts[0].rp, sent)
		return
	}
	next := make(chan appliedPartition)
	var wg sync.WaitGroup
	for range min(applyParallel, len(parts)) {
		wg.Go(func() {
			for part := range next {
				f.apply(ctx, part.mp, &part.rp, sent)
			}
		})
	}
	for _, part := range parts {
		next <- part
	}
	close(next)
	wg.Wait()
}

func (f *fetcher) advanceSession(id int32) {
	switch {
	case id == 0:
		f.session = fetchSession{id: 0, epoch: 0} // the source keeps no session: stay full
	case f.session.id != id:
		f.session = fetchSession{id: id, epoch: 1}
	default:
		f.session.epoch++
	}
}

// request builds the next Fetch: a full one names every ready partition;
// an incremental one (session epoch above 0) only those whose fetch
// offset or epochs changed since they were last sent, so an idle round
// over 10,000 partitions sends none and the source parses none.
func (f *fetcher) request() *kmsg.FetchRequest {
	c := f.mirror.config
	req := kmsg.NewPtrFetchRequest()
	req.Version = 13 // topic IDs; every Kafka since 3.1 and every mirrord serves it
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(c.FetchWaitMax.Milliseconds())
	req.MinBytes = c.FetchMinBytes
	req.MaxBytes = c.FetchResponseMaxBytes
	req.IsolationLevel = 0
	req.SessionID, req.SessionEpoch = f.session.id, f.session.epoch
	incremental := f.session.epoch > 0
	if !incremental || f.sent == nil {
		f.sent = make(map[*mirrorPartition]sentPartition, len(f.ready))
	}
	topics := map[[16]byte]int{}
	for _, mp := range f.ready {
		fields := sentPartition{int64(mp.local.LogEndOffset()), int32(mp.local.LatestEpoch()), mp.sourceLeaderEpoch.Load()}
		if last, ok := f.sent[mp]; incremental && ok && last == fields {
			continue
		}
		f.sent[mp] = fields
		i, ok := topics[mp.topicID]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.TopicID, t.Topic = mp.topicID, mp.topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topics[mp.topicID] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = mp.partition
		rp.CurrentLeaderEpoch = fields.currentLeaderEpoch
		rp.FetchOffset = fields.fetchOffset
		rp.LastFetchedEpoch = fields.lastFetchedEpoch
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = c.FetchPartitionMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

// apply takes one partition's answer to the Fetch sent at sent: append
// its whole batches, follow a divergence or the source's log start, or
// note the error. The high watermark of an answer without error is
// learned, dated sent, once its batches are in (an error answer's, -1
// from Kafka, is not: the last one known keeps its date). It holds the
// partition's gate, and drops the answer of a partition no longer
// fetched.
func (f *fetcher) apply(ctx context.Context, mp *mirrorPartition, rp *fetchwire.Partition, sent time.Time) {
	mp.gate.Lock()
	defer mp.gate.Unlock()
	if !mp.fetching.Load() {
		return
	}
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		f.partitionError(ctx, mp, err)
		return
	}
	if rp.HighWatermark >= 0 {
		defer mp.learnHighWatermark(rp.HighWatermark, sent)
	}
	if rp.DivergingEpoch.Epoch >= 0 && rp.DivergingEpoch.EndOffset >= 0 {
		f.diverged(mp, rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset)
		return
	}
	if err := mp.local.FollowSourceStart(rb.Offset(rp.LogStartOffset)); err != nil {
		f.fail(mp, fmt.Errorf("follow the source log start %d: %w", rp.LogStartOffset, err), true)
		return
	}
	if whole := wholeBatches(rp.RecordBatches); len(whole) > 0 {
		info, err := mp.local.AppendMirrored(whole)
		if errors.Is(err, broker.ErrLogDirLowSpace) {
			f.lowSpace.Store(true)
			return
		}
		if err != nil {
			f.fail(mp, err, true)
			f.mirror.refreshSoon()
			return
		}
		f.mirror.metrics.observeAppend(mp, info)
		if latest := int32(mp.local.LatestEpoch()); latest > mp.reported.Load() {
			// Batches of a source epoch the metadata has not shown yet:
			// the machine keeps the local epoch ahead of it.
			mp.reported.Store(latest)
			f.mirror.inbox.post(mp, mirrorstate.SourceEpochChanged{Epoch: rb.Epoch(latest)})
		}
	}
	if mp.reportSuccess.CompareAndSwap(true, false) {
		f.mirror.inbox.post(mp, mirrorstate.FetchSucceeded{})
	}
}

// fail stops fetching mp and tells its machine (mp.gate held).
func (f *fetcher) fail(mp *mirrorPartition, err error, retryable bool) {
	mp.fetching.Store(false)
	f.mirror.inbox.post(mp, mirrorstate.FetchFailed{Err: err, Retryable: retryable, Now: time.Now()})
}

// wholeBatches cuts a trailing partial batch (a fetch stops at a byte
// limit, not at a batch boundary). Framing and CRC are the log's to check.
func wholeBatches(buf []byte) []byte {
	it := rb.NewIter(buf, false)
	for it.Next() {
	}
	return buf[:it.Consumed()]
}

// diverged handles a DivergingEpoch: the source no longer holds records
// the mirror copied (a mirror reads only below the source's high
// watermark, so only an unclean leader election on the source takes them
// away). With mirror.support.unclean.leader.election the machine goes
// ULE_RECOVERY and truncates to where the logs agree; without it the
// partition fails until --recover (mp.gate held).
func (f *fetcher) diverged(mp *mirrorPartition, epoch int32, endOffset int64) {
	offset, done := mp.local.Divergence(rb.Epoch(epoch), rb.Offset(endOffset))
	f.log.Warn("the source diverged from the mirrored log", "topic", mp.topic, "partition", mp.partition,
		"source_epoch", epoch, "source_end_offset", endOffset, "truncate_to", offset, "done", done)
	f.uncleanElection(mp, offset, fmt.Sprintf("the source's epoch %d ends at offset %d", epoch, endOffset))
}

// uncleanElection reports that the local log must be cut to offset to
// follow the source (mp.gate held).
func (f *fetcher) uncleanElection(mp *mirrorPartition, offset rb.Offset, why string) {
	if !f.mirror.config.SupportUncleanLeaderElection {
		f.fail(mp, fmt.Errorf("%w: the source lost records this mirror copied (%s; the local log would be cut to %d): "+
			"set mirror.support.unclean.leader.election=true to truncate and follow the new source leader, then --recover",
			errUncleanElection, why, offset), false)
		return
	}
	mp.fetching.Store(false)
	f.mirror.inbox.post(mp, mirrorstate.DivergenceDetected{TruncateTo: offset})
}

// errUncleanElection marks the failure of a partition whose source lost
// records it mirrored, while the mirror does not follow unclean leader
// elections.
var errUncleanElection = errors.New("unclean leader election on the source")

// partitionError handles a partition's fetch error: leadership moves and
// unknown epochs refresh metadata; out of range realigns with the source
// (mp.gate held).
func (f *fetcher) partitionError(ctx context.Context, mp *mirrorPartition, err error) {
	switch {
	case errors.Is(err, kerr.OffsetOutOfRange):
		f.realign(ctx, mp)
	case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.FencedLeaderEpoch),
		errors.Is(err, kerr.UnknownLeaderEpoch), errors.Is(err, kerr.UnknownTopicID),
		errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.LeaderNotAvailable):
		f.mirror.refreshSoon()
	default:
		f.fail(mp, fmt.Errorf("fetch: %w", err), kgo.IsRetryableBrokerErr(err) || kerr.IsRetriable(err))
	}
}

// realign answers OFFSET_OUT_OF_RANGE: below the source's log start the
// local log restarts there; past the source's end the source lost records
// the mirror copied, as after a divergence (mp.gate held).
func (f *fetcher) realign(ctx context.Context, mp *mirrorPartition) {
	m := f.mirror
	start, err := m.sourceOffset(ctx, mp, -2)
	if err == nil {
		var end int64
		if end, err = m.sourceOffset(ctx, mp, -1); err == nil {
			leo := int64(mp.local.LogEndOffset())
			switch {
			case leo < start:
				m.log.Info("source log start passed the local log end: restarting there", "topic", mp.topic, "partition", mp.partition, "source_start", start, "local_end", leo)
				err = mp.local.RestartAt(rb.Offset(start))
			case leo > end:
				f.uncleanElection(mp, rb.Offset(end), fmt.Sprintf("the source's log ends at %d, the mirror's at %d", end, leo))
				return
			default:
				// Inside the source's range and still out of range: the
				// source did not accept our last fetched epoch. Back off
				// rather than ask again at once.
				err = fmt.Errorf("offset %d is inside the source's range [%d, %d] but the source answered OFFSET_OUT_OF_RANGE", leo, start, end)
			}
		}
	}
	if err != nil {
		f.fail(mp, fmt.Errorf("realign after OFFSET_OUT_OF_RANGE: %w", err), true)
	}
}
