package netio

// The Fetch response encoder. kmsg's FetchResponse.AppendTo copies the
// record bytes into the frame; this encoder writes every other field and
// leaves a hole where each partition's records go, so they can be sent
// from the segment file (sendfile.go). The bytes on the wire equal
// kmsg's for every version this server serves (fetch_encode_test.go).
//
// Layout, versions 4-18 (flexible from v12: compact arrays, strings and
// bytes as uvarint length+1, and a tagged-field section after each struct):
//
//	int32   throttle_ms
//	int16   error_code                      v7+
//	int32   session_id                      v7+
//	array   topics
//	  string  topic                         v4-12
//	  uuid    topic_id                      v13+
//	  array   partitions
//	    int32   partition
//	    int16   error_code
//	    int64   high_watermark
//	    int64   last_stable_offset
//	    int64   log_start_offset            v5+
//	    array?  aborted_transactions        null unless read_committed
//	      int64   producer_id
//	      int64   first_offset
//	      tags                              v12+
//	    int32   preferred_read_replica      v11+
//	    bytes?  records                     <- the hole: length here, bytes from the file
//	    tags                                v12+: 0 diverging_epoch {int32 epoch, int64 end_offset}
//	                                              1 current_leader {int32 leader_id, int32 leader_epoch}
//	                                              2 snapshot_id {int64 end_offset, int32 epoch}
//	  tags                                  v12+
//	tags                                    v12+: 0 node_endpoints (v16+) [{int32 node_id,
//	                                              string host, int32 port, string? rack, tags}]
//
// A tagged field is sent only when it differs from its default (-1 for
// every number above, empty for node_endpoints), as kmsg does.

import (
	"encoding/binary"
	"fmt"
	"math"

	rb "github.com/mirrord/mirrord/recordbatch"
)

// fetchPartition is one partition of a Fetch: what the request (or the
// session) asks, then what the response answers.
type fetchPartition struct {
	topic              string  // "" until resolved from topicID (v13+)
	topicID            TopicID // zero before v13
	partition          int32
	fetchOffset        rb.Offset
	currentLeaderEpoch rb.Epoch // -1: not checked
	lastFetchedEpoch   rb.Epoch // -1: not checked (always -1 before v12)
	partitionMaxBytes  int32

	// quiet: an incremental session's partition not read this pass, as
	// nothing it would answer has changed since it was last read (its
	// changed channel is still open); the response leaves it out.
	quiet bool
	// quietTopic is a session partition's topic name as last read (its
	// topic is "" from v13 until resolved), to authorize it while quiet.
	quietTopic string
	// watchers are the partition's, and changed their Changed channel as
	// of its last read (nil when there is no such partition).
	watchers *Watchers
	changed  <-chan struct{}
	// waitBytes is what the partition's last read found, while the fetch
	// waits (fetch_wait.go).
	waitBytes int64

	omit                 bool // an incremental session response leaves it out
	errorCode            int16
	highWatermark        rb.Offset
	lastStableOffset     rb.Offset
	logStartOffset       rb.Offset
	abortedTransactions  []AbortedTransaction // nil encodes null
	preferredReadReplica int32
	records              FileRange // Length 0 encodes empty (never null)
	divergingEpoch       fetchEpochEndOffset
	currentLeader        fetchLeader
	snapshotID           fetchEpochEndOffset // KRaft only; always unset here
}

// fetchEpochEndOffset is an epoch and its end offset; -1, -1 is unset.
type fetchEpochEndOffset struct {
	epoch     rb.Epoch
	endOffset rb.Offset
}

func (e fetchEpochEndOffset) set() bool { return e.epoch != -1 || e.endOffset != -1 }

// fetchLeader is a partition's leader (KIP-951); -1, -1 is unset.
type fetchLeader struct {
	leaderID    int32
	leaderEpoch rb.Epoch
}

func (l fetchLeader) set() bool { return l.leaderID != -1 || l.leaderEpoch != -1 }

// fetchNodeEndpoint is a broker named by a current_leader tag (v16+).
type fetchNodeEndpoint struct {
	nodeID int32
	host   string
	port   int32
}

// resetResponse clears what a previous read answered, keeping what is asked.
func (p *fetchPartition) resetResponse() {
	p.omit = false
	p.errorCode = 0
	p.highWatermark, p.lastStableOffset, p.logStartOffset = -1, -1, -1
	p.abortedTransactions = nil
	p.preferredReadReplica = -1
	p.records = FileRange{}
	p.divergingEpoch = fetchEpochEndOffset{-1, -1}
	p.currentLeader = fetchLeader{-1, -1}
	p.snapshotID = fetchEpochEndOffset{-1, -1}
}

// fetchHole is where one partition's record bytes go in an encoded response.
type fetchHole struct {
	at        int // byte position in the encoded response
	partition int // index in fetchReply.partitions
}

// fetchEncoder appends Kafka's primitive types, in their compact forms
// when flexible.
type fetchEncoder struct {
	buf      []byte
	flexible bool
}

func (e *fetchEncoder) int16(v int16)    { e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(v)) }
func (e *fetchEncoder) int32(v int32)    { e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(v)) }
func (e *fetchEncoder) int64(v int64)    { e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v)) }
func (e *fetchEncoder) uvarint(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *fetchEncoder) uuid(v TopicID)   { e.buf = append(e.buf, v[:]...) }

func (e *fetchEncoder) arrayLen(n int) {
	if e.flexible {
		e.uvarint(uint64(n) + 1)
		return
	}
	e.int32(int32(n))
}

func (e *fetchEncoder) nullableArrayLen(n int, null bool) {
	switch {
	case !null:
		e.arrayLen(n)
	case e.flexible:
		e.uvarint(0)
	default:
		e.int32(-1)
	}
}

// bytesLen is the length prefix of a non-null bytes field.
func (e *fetchEncoder) bytesLen(n int64) {
	if e.flexible {
		e.uvarint(uint64(n) + 1)
		return
	}
	e.int32(int32(n))
}

func (e *fetchEncoder) string(s string) {
	if e.flexible {
		e.uvarint(uint64(len(s)) + 1)
	} else {
		e.int16(int16(len(s)))
	}
	e.buf = append(e.buf, s...)
}

// noTags is an empty tagged-field section (flexible versions only).
func (e *fetchEncoder) noTags() {
	if e.flexible {
		e.buf = append(e.buf, 0)
	}
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// Sizes of the tagged structs, each ending in its own empty tag section.
const (
	fetchEpochEndOffsetTagBytes = 4 + 8 + 1
	fetchLeaderTagBytes         = 4 + 4 + 1
	fetchSnapshotIDTagBytes     = 8 + 4 + 1
)

// fetchRecordBytesMax bounds one partition's records: the length of a
// bytes field and of the whole frame are int32.
const fetchRecordBytesMax = math.MaxInt32

// appendFetchResponse appends the response body of f (after the response
// header) to dst, recording in f.holes where each non-empty record set
// goes. It returns the grown buffer and the record bytes that will fill
// the holes. It does not allocate once dst and f.holes have grown.
func appendFetchResponse(dst []byte, f *fetchReply) ([]byte, int64) {
	e := fetchEncoder{buf: dst, flexible: f.version >= 12}
	f.holes = f.holes[:0]
	e.int32(0) // throttle_ms
	if f.version >= 7 {
		e.int16(f.errorCode)
		e.int32(f.sessionID)
	}
	e.arrayLen(f.topicCount())
	var recordBytes int64
	for start := f.nextIncluded(0); start < len(f.partitions); {
		end, count := f.topicRun(start)
		first := &f.partitions[start]
		if f.version <= 12 {
			e.string(first.topic)
		} else {
			e.uuid(first.topicID)
		}
		e.arrayLen(count)
		for i := start; i < end; i = f.nextIncluded(i + 1) {
			recordBytes += e.partition(f, i)
		}
		e.noTags()
		start = f.nextIncluded(end)
	}
	e.responseTags(f)
	return e.buf, recordBytes
}

// partition appends partition i of f and returns its record bytes.
func (e *fetchEncoder) partition(f *fetchReply, i int) int64 {
	p := &f.partitions[i]
	e.int32(p.partition)
	e.int16(p.errorCode)
	e.int64(int64(p.highWatermark))
	e.int64(int64(p.lastStableOffset))
	if f.version >= 5 {
		e.int64(int64(p.logStartOffset))
	}
	e.nullableArrayLen(len(p.abortedTransactions), p.abortedTransactions == nil)
	for _, a := range p.abortedTransactions {
		e.int64(a.ProducerID)
		e.int64(int64(a.FirstOffset))
		e.noTags()
	}
	if f.version >= 11 {
		e.int32(p.preferredReadReplica)
	}
	length := p.records.Length
	if length < 0 || length > fetchRecordBytesMax {
		panic(fmt.Sprintf("netio: fetch: record range of %d bytes reached the encoder", length))
	}
	e.bytesLen(length)
	if length > 0 {
		f.holes = append(f.holes, fetchHole{at: len(e.buf), partition: i})
	}
	if e.flexible {
		e.partitionTags(p)
	}
	return length
}

func (e *fetchEncoder) partitionTags(p *fetchPartition) {
	count := 0
	for _, set := range [...]bool{p.divergingEpoch.set(), p.currentLeader.set(), p.snapshotID.set()} {
		if set {
			count++
		}
	}
	e.uvarint(uint64(count))
	if p.divergingEpoch.set() {
		e.uvarint(0)
		e.uvarint(fetchEpochEndOffsetTagBytes)
		e.int32(int32(p.divergingEpoch.epoch))
		e.int64(int64(p.divergingEpoch.endOffset))
		e.noTags()
	}
	if p.currentLeader.set() {
		e.uvarint(1)
		e.uvarint(fetchLeaderTagBytes)
		e.int32(p.currentLeader.leaderID)
		e.int32(int32(p.currentLeader.leaderEpoch))
		e.noTags()
	}
	if p.snapshotID.set() {
		e.uvarint(2)
		e.uvarint(fetchSnapshotIDTagBytes)
		e.int64(int64(p.snapshotID.endOffset))
		e.int32(int32(p.snapshotID.epoch))
		e.noTags()
	}
}

// responseTags appends the top-level tag section: node_endpoints, v16+.
func (e *fetchEncoder) responseTags(f *fetchReply) {
	if !e.flexible {
		return
	}
	if f.version < 16 || len(f.nodeEndpoints) == 0 {
		e.uvarint(0)
		return
	}
	size := uvarintLen(uint64(len(f.nodeEndpoints)) + 1)
	for _, n := range f.nodeEndpoints {
		size += 4 + uvarintLen(uint64(len(n.host))+1) + len(n.host) + 4 + 1 + 1 // rack null, no tags
	}
	e.uvarint(1)
	e.uvarint(0)
	e.uvarint(uint64(size))
	e.arrayLen(len(f.nodeEndpoints))
	for _, n := range f.nodeEndpoints {
		e.int32(n.nodeID)
		e.string(n.host)
		e.int32(n.port)
		e.uvarint(0) // rack: null
		e.noTags()
	}
}

// nextIncluded returns the index of the first partition at or after i
// that the response includes, or len(f.partitions).
func (f *fetchReply) nextIncluded(i int) int {
	for i < len(f.partitions) && f.partitions[i].omit {
		i++
	}
	return i
}

// sameTopic reports whether two partitions belong in one topic entry.
func (f *fetchReply) sameTopic(a, b *fetchPartition) bool {
	if f.version >= 13 {
		return a.topicID == b.topicID
	}
	return a.topic == b.topic
}

// topicRun returns the end of the run of included partitions of the
// topic of partition start (the index after its last member) and the
// run's length. Omitted partitions inside a run do not break it.
func (f *fetchReply) topicRun(start int) (end, count int) {
	first := &f.partitions[start]
	end = start
	for i := start; i < len(f.partitions) && f.sameTopic(first, &f.partitions[i]); i = f.nextIncluded(i + 1) {
		end, count = i+1, count+1
	}
	return end, count
}

// topicCount is the number of topic entries the response holds: runs of
// consecutive included partitions of one topic.
func (f *fetchReply) topicCount() int {
	count := 0
	for start := f.nextIncluded(0); start < len(f.partitions); {
		end, _ := f.topicRun(start)
		count++
		start = f.nextIncluded(end)
	}
	return count
}
