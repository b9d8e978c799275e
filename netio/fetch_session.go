package netio

// Fetch sessions (KIP-227). A client fetching many partitions opens a
// session with a full request; later requests are incremental: they name
// only the partitions whose fetch position changed, and partitions to
// forget, and the response leaves out every partition with nothing new
// (no records, and the same high watermark, last stable offset and log
// start offset as last answered, no error, no diverging epoch).
//
//	request (id, epoch)   served as
//	versions 4-6          sessionless: the request's partitions, session ID 0
//	(0, -1)               sessionless
//	(X, -1)               close X, then sessionless
//	(0, 0)                full: the request's partitions; the response opens a session
//	(X, 0)                close X, then full
//	(X, E>0)              incremental: every partition of X, after the request's
//	                      changes; FETCH_SESSION_ID_NOT_FOUND if X is unknown,
//	                      INVALID_FETCH_SESSION_EPOCH unless E is X's next epoch
//	                      (1 after the full request, then 2, ..., MaxInt32, 1),
//	                      FETCH_SESSION_TOPIC_ID_ERROR if X began with topic
//	                      IDs (v13+) and this request has none, or the reverse
//
// An incremental request that forgets every partition closes its session
// and is answered sessionless. Partitions that returned records move to
// the end of the session's order, so that a MaxBytes-bound response
// reaches every partition in turn (Kafka does so after incremental
// fetches; here the response that opens the session does it too).
//
// Bounds: at most sessionsMax sessions and partitionsMax partitions over
// all of them. Room for a new or growing session is made by evicting the
// least recently used other sessions. A full request too big for the
// whole budget is answered sessionless; an incremental request that grows
// its session past it closes the session (FETCH_SESSION_ID_NOT_FOUND: the
// client starts again with a full request).
//
// Sessions are the server's, held by the connection that used each last:
// forgetConn drops a closed connection's sessions at once rather than
// leaving them to eviction. Clients do not carry a session to a new
// connection (kgo and the Java client both start over after a connection
// error), so this frees memory and costs no round trip.
//
// Locking: one mutex guards every session. begin and finish hold it for
// time linear in the partitions of the request or session, never while
// reading records or waiting.

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	fetchSessionsMax          = 1000    // Kafka's max.incremental.fetch.session.cache.slots
	fetchSessionPartitionsMax = 1 << 20 // partitions over all sessions
	fetchSessionIDTries       = 16      // random draws for an unused session ID
)

// fetchSessions is the server's fetch state: its sessions and counters.
type fetchSessions struct {
	mu            sync.Mutex
	byID          map[int32]*fetchSession // len(byID) <= sessionsMax
	partitions    int                     // sum of len(order) over byID, <= partitionsMax
	sessionsMax   int
	partitionsMax int
	clock         uint64 // counts session uses; lastUsed orders eviction

	stats fetchStats
}

// fetchStats counts what Fetch did, for tests and metrics.
type fetchStats struct {
	sessionless, full, incremental, sessionErrors atomic.Int64 // requests, by how they were served
	waiting                                       atomic.Int64 // long polls waiting now
	waits                                         atomic.Int64 // waits begun
	transfer                                      fetchTransferStats
}

func newFetchSessions() *fetchSessions {
	return &fetchSessions{
		byID:          map[int32]*fetchSession{},
		sessionsMax:   fetchSessionsMax,
		partitionsMax: fetchSessionPartitionsMax,
	}
}

// fetchSession is one session. Guarded by fetchSessions.mu.
type fetchSession struct {
	id       int32
	epoch    int32 // the epoch the next request must carry
	topicIDs bool  // opened at v13+: partitions are keyed by topic ID
	owner    *conn // the connection that used it last
	lastUsed uint64
	order    []*sessionPartition              // fetch order
	index    map[sessionKey]*sessionPartition // the same partitions, len(index) == len(order)
}

// sessionKey names a session partition: by topic ID from v13, by name before.
type sessionKey struct {
	topic     string
	topicID   TopicID
	partition int32
}

// sessionPartition is what a session remembers of one partition: what to
// fetch, and what it last answered (a high watermark of -1 after an error,
// so that the partition is answered again once the error is gone).
type sessionPartition struct {
	key                sessionKey
	fetchOffset        rb.Offset
	currentLeaderEpoch rb.Epoch
	lastFetchedEpoch   rb.Epoch
	partitionMaxBytes  int32
	highWatermark      rb.Offset
	lastStableOffset   rb.Offset
	logStartOffset     rb.Offset
	sentRecords        bool // scratch for finish
	// quiet is the partition's Changed channel when its last read found
	// nothing to answer and nothing left to read at fetchOffset: until the
	// channel closes or a request names the partition again, reading it
	// would answer the same, so incremental fetches skip it. This is what
	// keeps a session of 10,000 mostly idle partitions cheap to serve.
	quiet <-chan struct{}
	// watchers are the quiet partition's, for a long poll to wait on.
	watchers *Watchers
	// name is the topic's name as last read: from v13 the key has only
	// its ID, and a quiet partition is authorized by name.
	name string
}

// fetchSessionUse is how begin served a request, for finish.
type fetchSessionUse struct {
	kind    fetchSessionKind
	session *fetchSession // incremental only
}

type fetchSessionKind int8

const (
	sessionless fetchSessionKind = iota
	sessionFull
	sessionIncremental
	sessionFailed
)

// begin resolves req's session and fills f with the partitions to fetch,
// or sets f.errorCode to a session error.
func (s *fetchSessions) begin(c *conn, req *kmsg.FetchRequest, f *fetchReply) fetchSessionUse {
	if req.Version < 7 || req.SessionEpoch == 0 || req.SessionEpoch == -1 {
		if req.Version >= 7 && req.SessionID != 0 {
			s.close(req.SessionID)
		}
		f.addRequestPartitions(req)
		if req.Version < 7 || req.SessionEpoch == -1 {
			s.stats.sessionless.Add(1)
			return fetchSessionUse{kind: sessionless}
		}
		s.stats.full.Add(1)
		return fetchSessionUse{kind: sessionFull}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	session := s.byID[req.SessionID]
	switch {
	case session == nil:
		f.errorCode = kerr.FetchSessionIDNotFound.Code
	case req.SessionEpoch != session.epoch:
		f.errorCode = kerr.InvalidFetchSessionEpoch.Code
	case session.topicIDs != (req.Version >= 13):
		f.errorCode = kerr.FetchSessionTopicIDError.Code
	}
	if f.errorCode == 0 {
		s.partitions += session.update(req)
		if !s.makeRoom(false, 0, session) {
			s.removeLocked(session)
			f.errorCode = kerr.FetchSessionIDNotFound.Code
		}
	}
	if f.errorCode != 0 {
		s.stats.sessionErrors.Add(1)
		return fetchSessionUse{kind: sessionFailed}
	}
	if len(session.order) == 0 {
		s.removeLocked(session)
		s.stats.sessionless.Add(1)
		return fetchSessionUse{kind: sessionless}
	}
	session.epoch = nextFetchSessionEpoch(session.epoch)
	session.owner = c
	s.touch(session)
	f.addSessionPartitions(session)
	s.stats.incremental.Add(1)
	return fetchSessionUse{kind: sessionIncremental, session: session}
}

// finish sets f's session ID once its partitions are read: it opens the
// session of a full request, and leaves out of an incremental response
// what has not changed.
func (s *fetchSessions) finish(c *conn, use fetchSessionUse, f *fetchReply) {
	switch use.kind {
	case sessionFull:
		f.sessionID = s.open(c, f)
	case sessionIncremental:
		f.sessionID = use.session.id
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.byID[use.session.id] == use.session { // else evicted meanwhile: answer everything
			use.session.filter(f)
		}
	}
}

// open makes a session of a full request's partitions and returns its ID,
// or 0 when there is no room (the client goes on without a session).
func (s *fetchSessions) open(c *conn, f *fetchReply) int32 {
	if len(f.partitions) == 0 || len(f.partitions) > s.partitionsMax {
		return 0
	}
	session := &fetchSession{epoch: 1, topicIDs: f.version >= 13, owner: c, index: make(map[sessionKey]*sessionPartition, len(f.partitions))}
	for i := range f.partitions {
		p := &f.partitions[i]
		key := session.keyOf(p)
		sp := session.index[key]
		if sp == nil {
			sp = &sessionPartition{key: key}
			session.index[key] = sp
			session.order = append(session.order, sp)
		}
		sp.fetchOffset, sp.currentLeaderEpoch, sp.lastFetchedEpoch, sp.partitionMaxBytes = p.fetchOffset, p.currentLeaderEpoch, p.lastFetchedEpoch, p.partitionMaxBytes
		sp.remember(p)
		sp.quiet, sp.watchers, sp.name = f.quietAfter(p), p.watchers, p.topic
		sp.sentRecords = p.records.Length > 0
	}
	session.moveSentToEnd()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.makeRoom(true, len(session.order), nil) {
		return 0
	}
	for range fetchSessionIDTries {
		id := rand.Int32N(math.MaxInt32) + 1
		if s.byID[id] == nil {
			session.id = id
			s.byID[id] = session
			s.partitions += len(session.order)
			s.touch(session)
			return id
		}
	}
	return 0
}

// update applies an incremental request's partitions and forgotten topics
// to the session and returns how many partitions it gained (negative when
// it lost some).
func (session *fetchSession) update(req *kmsg.FetchRequest) int {
	before := len(session.order)
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			key := session.requestKey(rt.Topic, rt.TopicID, rp.Partition)
			sp := session.index[key]
			if sp == nil {
				sp = &sessionPartition{key: key, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1}
				session.index[key] = sp
				session.order = append(session.order, sp)
			}
			sp.fetchOffset, sp.currentLeaderEpoch, sp.lastFetchedEpoch, sp.partitionMaxBytes = rb.Offset(rp.FetchOffset), rb.Epoch(rp.CurrentLeaderEpoch), rb.Epoch(rp.LastFetchedEpoch), rp.PartitionMaxBytes
			sp.quiet, sp.watchers = nil, nil
		}
	}
	forgot := false
	for _, ft := range req.ForgottenTopics {
		for _, partition := range ft.Partitions {
			key := session.requestKey(ft.Topic, ft.TopicID, partition)
			if _, ok := session.index[key]; ok {
				delete(session.index, key)
				forgot = true
			}
		}
	}
	if forgot {
		session.order = slices.DeleteFunc(session.order, func(sp *sessionPartition) bool { return session.index[sp.key] != sp })
	}
	return len(session.order) - before
}

// addSessionPartitions makes the session's partitions the ones to fetch.
func (f *fetchReply) addSessionPartitions(session *fetchSession) {
	f.partitions = make([]fetchPartition, 0, len(session.order))
	for _, sp := range session.order {
		f.partitions = append(f.partitions, fetchPartition{
			topic: sp.key.topic, topicID: sp.key.topicID, partition: sp.key.partition,
			fetchOffset: sp.fetchOffset, currentLeaderEpoch: sp.currentLeaderEpoch,
			lastFetchedEpoch: sp.lastFetchedEpoch, partitionMaxBytes: sp.partitionMaxBytes,
			quiet: sp.quiet != nil && !isClosed(sp.quiet), changed: sp.quiet, watchers: sp.watchers, quietTopic: sp.name,
		})
	}
}

// isClosed reports whether c is closed, without waiting.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// quietAfter is the channel to keep as a session partition's quiet after
// p was read: its Changed channel when the answer carried nothing to act
// on and the fetch offset is at the end a reader of f's isolation may
// read (so no byte limit held records back); else nil.
func (f *fetchReply) quietAfter(p *fetchPartition) <-chan struct{} {
	end := p.highWatermark
	if f.isolation == ReadCommitted {
		end = p.lastStableOffset
	}
	if p.changed == nil || p.records.Length > 0 || p.errorCode != 0 || p.divergingEpoch.set() || p.fetchOffset < end {
		return nil
	}
	return p.changed
}

// filter marks the partitions of an incremental response that have
// nothing new as omitted, remembers what the others answer, and moves the
// partitions that returned records to the end of the session's order.
func (session *fetchSession) filter(f *fetchReply) {
	for i := range f.partitions {
		p := &f.partitions[i]
		sp := session.index[session.keyOf(p)]
		if sp == nil {
			continue // forgotten by a request served meanwhile: answer it anyway
		}
		if p.quiet {
			continue // not read, and omitted: nothing changed since it was
		}
		p.omit = !sp.remember(p)
		sp.quiet, sp.watchers, sp.name = f.quietAfter(p), p.watchers, p.topic
		sp.sentRecords = sp.sentRecords || p.records.Length > 0
	}
	session.moveSentToEnd()
}

// moveSentToEnd moves the partitions marked sentRecords to the end of the
// session's order, keeping the order within both groups, and clears the marks.
func (session *fetchSession) moveSentToEnd() {
	var sent []*sessionPartition
	kept := 0
	for _, sp := range session.order {
		if sp.sentRecords {
			sp.sentRecords = false
			sent = append(sent, sp)
			continue
		}
		session.order[kept] = sp
		kept++
	}
	session.order = append(session.order[:kept], sent...)
}

// remember records what p answers and reports whether it differs from
// what was last answered, or must be sent anyway.
func (sp *sessionPartition) remember(p *fetchPartition) bool {
	changed := p.records.Length > 0 || p.errorCode != 0 || p.divergingEpoch.set() ||
		sp.highWatermark != p.highWatermark || sp.lastStableOffset != p.lastStableOffset || sp.logStartOffset != p.logStartOffset
	sp.highWatermark, sp.lastStableOffset, sp.logStartOffset = p.highWatermark, p.lastStableOffset, p.logStartOffset
	return changed
}

func (session *fetchSession) requestKey(topic string, topicID TopicID, partition int32) sessionKey {
	if session.topicIDs {
		return sessionKey{topicID: topicID, partition: partition}
	}
	return sessionKey{topic: topic, partition: partition}
}

func (session *fetchSession) keyOf(p *fetchPartition) sessionKey {
	return session.requestKey(p.topic, p.topicID, p.partition)
}

func nextFetchSessionEpoch(epoch int32) int32 {
	if epoch == math.MaxInt32 {
		return 1
	}
	return epoch + 1
}

// makeRoom evicts least recently used sessions other than keep until a
// new session (when newSession) with newPartitions more partitions fits
// both bounds. It reports false when even evicting all would not do.
func (s *fetchSessions) makeRoom(newSession bool, newPartitions int, keep *fetchSession) bool {
	sessions := len(s.byID)
	if newSession {
		sessions++
	}
	for sessions > s.sessionsMax || s.partitions+newPartitions > s.partitionsMax {
		var victim *fetchSession
		for _, session := range s.byID {
			if session != keep && (victim == nil || session.lastUsed < victim.lastUsed) {
				victim = session
			}
		}
		if victim == nil {
			return false
		}
		s.removeLocked(victim)
		sessions--
	}
	return true
}

func (s *fetchSessions) touch(session *fetchSession) {
	s.clock++
	session.lastUsed = s.clock
}

func (s *fetchSessions) removeLocked(session *fetchSession) {
	delete(s.byID, session.id)
	s.partitions -= len(session.order)
}

// close drops session id, if there is one.
func (s *fetchSessions) close(id int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if session := s.byID[id]; session != nil {
		s.removeLocked(session)
	}
}

// forgetConn drops the sessions c used last; c is closed.
func (s *fetchSessions) forgetConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, session := range s.byID {
		if session.owner == c {
			s.removeLocked(session)
		}
	}
}

// count is the number of open sessions.
func (s *fetchSessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}
