package fetchwire

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Version is the Fetch version this package reads.
const Version = 13

// ErrMalformed marks a response whose bytes do not hold a Fetch v13 body.
var ErrMalformed = errors.New("fetchwire: malformed Fetch response")

// Smallest encodings, to bound a count by the bytes left before trusting
// it: a topic (uuid, empty partitions, no tags), a partition (fixed
// fields, null aborted transactions, null records, no tags), an aborted
// transaction (two int64, no tags).
const (
	topicBytesMin     = 16 + 1 + 1
	partitionBytesMin = 4 + 2 + 8 + 8 + 8 + 1 + 4 + 1 + 1
	abortedBytesMin   = 8 + 8 + 1
)

// Response is a parsed Fetch response: its top-level fields and a cursor
// over its topics. It holds the body's bytes.
type Response struct {
	ThrottleMillis int32
	ErrorCode      int16
	SessionID      int32
	topics         []byte // from the topics' first byte; checked
	topicCount     int
}

// Topics returns a cursor over the response's topics.
func (r *Response) Topics() Topics {
	return Topics{rest: r.topics, left: r.topicCount}
}

// Topics is a cursor over a response's topics, in the order sent.
type Topics struct {
	rest []byte
	left int
}

// Len is the number of topics not read yet.
func (t *Topics) Len() int { return t.left }

// Next reads the next topic; false after the last.
func (t *Topics) Next() (Topic, bool) {
	if t.left == 0 {
		return Topic{}, false
	}
	t.left--
	b := kbin.Reader{Src: t.rest}
	var topic Topic
	topic.TopicID = [16]byte(b.Span(16))
	topic.partitionCount = int(b.Uvarint()) - 1
	topic.partitions = b.Src
	for range max(topic.partitionCount, 0) {
		skipPartition(&b)
	}
	skipTags(&b)
	t.rest = b.Src
	return topic, true
}

// Topic is one topic of a response.
type Topic struct {
	TopicID        [16]byte
	partitions     []byte
	partitionCount int // -1: null
}

// Partitions returns a cursor over the topic's partitions.
func (t Topic) Partitions() Partitions {
	return Partitions{rest: t.partitions, left: max(t.partitionCount, 0)}
}

// Partitions is a cursor over a topic's partitions.
type Partitions struct {
	rest []byte
	left int
}

// Len is the number of partitions not read yet.
func (p *Partitions) Len() int { return p.left }

// Next reads the next partition; false after the last.
func (p *Partitions) Next() (Partition, bool) {
	if p.left == 0 {
		return Partition{}, false
	}
	p.left--
	b := kbin.Reader{Src: p.rest}
	part := readPartition(&b)
	p.rest = b.Src
	return part, true
}

// Partition is one partition of a response, with kmsg's names.
type Partition struct {
	Partition            int32
	ErrorCode            int16
	HighWatermark        int64
	LastStableOffset     int64
	LogStartOffset       int64
	AbortedTransactions  AbortedTransactions
	PreferredReadReplica int32
	// RecordBatches is a sub-slice of the response's bytes (nil when
	// the source sent null).
	RecordBatches  []byte
	DivergingEpoch DivergingEpoch
	CurrentLeader  CurrentLeader
	SnapshotID     SnapshotID
}

// DivergingEpoch is tagged field 0: the epoch the fetcher's log diverges
// in and where the source's log of that epoch ends (-1, -1: absent).
type DivergingEpoch struct {
	Epoch     int32
	EndOffset int64
}

// CurrentLeader is tagged field 1 (-1, -1: absent).
type CurrentLeader struct {
	LeaderID    int32
	LeaderEpoch int32
}

// SnapshotID is tagged field 2 (-1, -1: absent).
type SnapshotID struct {
	EndOffset int64
	Epoch     int32
}

// AbortedTransactions is a cursor over a partition's aborted
// transactions.
type AbortedTransactions struct {
	rest []byte
	left int
	null bool
}

// Null reports whether the source sent a null array (kmsg: nil).
func (a *AbortedTransactions) Null() bool { return a.null }

// Len is the number of aborted transactions not read yet.
func (a *AbortedTransactions) Len() int { return a.left }

// Next reads the next aborted transaction; false after the last.
func (a *AbortedTransactions) Next() (AbortedTransaction, bool) {
	if a.left == 0 {
		return AbortedTransaction{}, false
	}
	a.left--
	b := kbin.Reader{Src: a.rest}
	txn := AbortedTransaction{ProducerID: b.Int64(), FirstOffset: b.Int64()}
	skipTags(&b)
	a.rest = b.Src
	return txn, true
}

// AbortedTransaction is one aborted transaction of a partition.
type AbortedTransaction struct {
	ProducerID  int64
	FirstOffset int64
}

// Parse checks body, a Fetch v13 response body (after the response
// header), and returns the response over it. Nothing is copied: the
// response and everything read from it hold body.
func Parse(body []byte) (Response, error) {
	b := kbin.Reader{Src: body}
	r := Response{ThrottleMillis: b.Int32(), ErrorCode: b.Int16(), SessionID: b.Int32()}
	count, ok := arrayLength(&b, topicBytesMin)
	if !ok {
		return Response{}, fmt.Errorf("%w: topics", ErrMalformed)
	}
	r.topics, r.topicCount = b.Src, max(count, 0)
	for topic := range r.topicCount {
		b.Span(16)
		partitions, ok := arrayLength(&b, partitionBytesMin)
		if !ok {
			return Response{}, fmt.Errorf("%w: topic %d: partitions", ErrMalformed, topic)
		}
		for partition := range max(partitions, 0) {
			if !checkPartition(&b) {
				return Response{}, fmt.Errorf("%w: topic %d: partition %d", ErrMalformed, topic, partition)
			}
		}
		if !skipTags(&b) {
			return Response{}, fmt.Errorf("%w: topic %d: tagged fields", ErrMalformed, topic)
		}
	}
	if !skipTags(&b) {
		return Response{}, fmt.Errorf("%w: tagged fields", ErrMalformed)
	}
	return r, nil
}

// arrayLength reads a compact array's length (-1: null), bounded by the
// bytes left at elementBytesMin each.
func arrayLength(b *kbin.Reader, elementBytesMin int) (int, bool) {
	count := int64(b.Uvarint()) - 1
	if !b.Ok() || count*int64(elementBytesMin) > int64(len(b.Src)) {
		return 0, false
	}
	return int(count), true
}

// checkPartition reads one partition as readPartition does, checking
// what readPartition trusts.
func checkPartition(b *kbin.Reader) bool {
	b.Span(4 + 2 + 8 + 8 + 8)
	aborted, ok := arrayLength(b, abortedBytesMin)
	if !ok {
		return false
	}
	for range max(aborted, 0) {
		b.Span(16)
		if !skipTags(b) {
			return false
		}
	}
	b.Span(4)
	nullableBytes(b)
	return checkPartitionTags(b)
}

// checkPartitionTags reads a partition's tagged fields: a known one must
// be exactly its fields and their own (skipped) tagged fields, as kmsg
// requires.
func checkPartitionTags(b *kbin.Reader) bool {
	for n := b.Uvarint(); n > 0 && b.Ok(); n-- {
		tag := b.Uvarint()
		field := kbin.Reader{Src: b.Span(int(b.Uvarint()))}
		if !b.Ok() {
			return false
		}
		switch tag {
		case 0:
			field.Span(4 + 8)
		case 1:
			field.Span(4 + 4)
		case 2:
			field.Span(8 + 4)
		default:
			continue
		}
		if !skipTags(&field) {
			return false
		}
	}
	return b.Ok()
}

// readPartition reads one checked partition.
func readPartition(b *kbin.Reader) Partition {
	p := Partition{
		Partition:        b.Int32(),
		ErrorCode:        b.Int16(),
		HighWatermark:    b.Int64(),
		LastStableOffset: b.Int64(),
		LogStartOffset:   b.Int64(),
		DivergingEpoch:   DivergingEpoch{-1, -1},
		CurrentLeader:    CurrentLeader{-1, -1},
		SnapshotID:       SnapshotID{-1, -1},
	}
	aborted := int(b.Uvarint()) - 1
	p.AbortedTransactions = AbortedTransactions{rest: b.Src, left: max(aborted, 0), null: aborted < 0}
	for range max(aborted, 0) {
		b.Span(16)
		skipTags(b)
	}
	p.PreferredReadReplica = b.Int32()
	p.RecordBatches = nullableBytes(b)
	for n := b.Uvarint(); n > 0; n-- {
		tag := b.Uvarint()
		field := kbin.Reader{Src: b.Span(int(b.Uvarint()))}
		switch tag {
		case 0:
			p.DivergingEpoch = DivergingEpoch{Epoch: field.Int32(), EndOffset: field.Int64()}
		case 1:
			p.CurrentLeader = CurrentLeader{LeaderID: field.Int32(), LeaderEpoch: field.Int32()}
		case 2:
			p.SnapshotID = SnapshotID{EndOffset: field.Int64(), Epoch: field.Int32()}
		}
	}
	return p
}

// skipPartition steps over one checked partition.
func skipPartition(b *kbin.Reader) {
	b.Span(4 + 2 + 8 + 8 + 8)
	for n := int(b.Uvarint()) - 1; n > 0; n-- {
		b.Span(16)
		skipTags(b)
	}
	b.Span(4)
	nullableBytes(b)
	skipTags(b)
}

// nullableBytes reads compact nullable bytes (nil: null).
func nullableBytes(b *kbin.Reader) []byte {
	length := int(b.Uvarint()) - 1
	if length < 0 {
		return nil
	}
	return b.Span(length)
}

// skipTags steps over a tagged-field section; false if it does not fit.
func skipTags(b *kbin.Reader) bool {
	for n := b.Uvarint(); n > 0 && b.Ok(); n-- {
		b.Uvarint()
		b.Span(int(b.Uvarint()))
	}
	return b.Ok()
}
