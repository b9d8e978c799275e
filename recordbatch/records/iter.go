package records

import (
	"fmt"

	"github.com/mirrord/mirrord/recordbatch"
)

// Record is one record as read by Iter. Its slices alias the records
// section it was read from.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte // nil when null
	Value          []byte // nil when null
	HeaderCount    int32
	// Headers are the HeaderCount encoded headers after the count, each
	// checked to be well formed but not split.
	Headers []byte
}

// Iter walks the records of a decompressed records section:
//
//	it := records.NewIter(section)
//	for it.Next() { r := it.Record() }
//	if err := it.Err(); err != nil { ... }
//
// It stops at the end of the section or at the first malformed record.
// It does not know the batch, so it checks no counts or offset deltas;
// Validate does.
type Iter struct {
	c      cursor
	index  int // records read so far
	record Record
	err    error
}

// NewIter iterates over the records in section.
func NewIter(section []byte) Iter { return Iter{c: cursor{buf: section}} }

// Next reads the next record; false at the end of the section or at an
// error (see Err).
func (it *Iter) Next() bool {
	if it.err != nil || it.c.pos == len(it.c.buf) {
		return false
	}
	start := it.c.pos
	if !it.c.record(&it.record) {
		it.err = fmt.Errorf("%w: record %d at byte %d of %d: %s",
			recordbatch.ErrCorrupt, it.index, start, len(it.c.buf), it.c.failure())
		return false
	}
	it.index++
	return true
}

// Record is the record Next read.
func (it *Iter) Record() Record { return it.record }

// Index is the number of records Next has read, counting the current one.
func (it *Iter) Index() int { return it.index }

// Position is the byte position in the section just after the records
// read so far.
func (it *Iter) Position() int { return it.c.pos }

// Err is nil at a clean end of the section, else wraps recordbatch.ErrCorrupt.
func (it *Iter) Err() error { return it.err }

// cursor reads varints and byte strings with a sticky failure: after the
// first one every read returns zero, so a parser reads straight through
// and checks once at the end. Failures are recorded as constant strings
// so that the good path allocates nothing.
type cursor struct {
	buf   []byte
	pos   int
	field string // field being read at the first failure
	why   string // "" while nothing failed
	value int64  // the offending value, when why names one
}

func (c *cursor) fail(field, why string, value int64) {
	if c.why == "" {
		c.field, c.why, c.value = field, why, value
	}
}

func (c *cursor) failed() bool { return c.why != "" }

func (c *cursor) failure() string {
	if c.value != 0 {
		return fmt.Sprintf("%s: %s (%d)", c.field, c.why, c.value)
	}
	return c.field + ": " + c.why
}

// uvarint reads at most maxBytes bytes; the last one may carry at most
// lastMax, so that the value fits in 32 (5 bytes, 0x0f) or 64 (10 bytes,
// 0x01) bits.
func (c *cursor) uvarint(field string, maxBytes int, lastMax byte) uint64 {
	if c.failed() {
		return 0
	}
	var x uint64
	for i := range maxBytes {
		if c.pos == len(c.buf) {
			c.fail(field, "truncated varint", 0)
			return 0
		}
		b := c.buf[c.pos]
		c.pos++
		if b < 0x80 {
			if i == maxBytes-1 && b > lastMax {
				break
			}
			return x | uint64(b)<<(7*i)
		}
		x |= uint64(b&0x7f) << (7 * i)
	}
	c.fail(field, "varint overflows", 0)
	return 0
}

// varint reads a zig-zag int32 (Kafka's varint).
func (c *cursor) varint(field string) int32 {
	x := uint32(c.uvarint(field, 5, 0x0f))
	return int32(x>>1) ^ -int32(x&1)
}

// varlong reads a zig-zag int64 (Kafka's varlong).
func (c *cursor) varlong(field string) int64 {
	x := c.uvarint(field, 10, 0x01)
	return int64(x>>1) ^ -int64(x&1)
}

func (c *cursor) int8(field string) int8 {
	if c.failed() {
		return 0
	}
	if c.pos == len(c.buf) {
		c.fail(field, "truncated", 0)
		return 0
	}
	c.pos++
	return int8(c.buf[c.pos-1])
}

// take returns the next n bytes.
func (c *cursor) take(field string, n int32) []byte {
	if c.failed() {
		return nil
	}
	if int(n) > len(c.buf)-c.pos {
		c.fail(field, "length past the end of the record", int64(n))
		return nil
	}
	c.pos += int(n)
	return c.buf[c.pos-int(n) : c.pos : c.pos]
}

// nullable reads a varint length and that many bytes; a negative length is
// null, as in Kafka's DefaultRecord.readFrom.
func (c *cursor) nullable(field string) []byte {
	n := c.varint(field)
	if n < 0 {
		return nil
	}
	return c.take(field, n)
}

// record reads one record into r, confining its reads to the length the
// record declares and requiring that it be used exactly.
func (c *cursor) record(r *Record) bool {
	length := c.varint("length")
	if !c.failed() && (length < 0 || int(length) > len(c.buf)-c.pos) {
		c.fail("length", "beyond the records section", int64(length))
	}
	if c.failed() {
		return false
	}
	body := cursor{buf: c.buf[:c.pos+int(length)], pos: c.pos}
	r.Attributes = body.int8("attributes")
	r.TimestampDelta = body.varlong("timestamp delta")
	r.OffsetDelta = body.varint("offset delta")
	r.Key = body.nullable("key")
	r.Value = body.nullable("value")
	r.HeaderCount, r.Headers = body.headers()
	if !body.failed() && body.pos != len(body.buf) {
		body.fail("length", "bytes left after the headers", int64(len(body.buf)-body.pos))
	}
	if body.failed() {
		c.field, c.why, c.value = body.field, body.why, body.value
		return false
	}
	c.pos = body.pos
	return true
}

// headers reads the header count and checks each header. Every header
// takes at least two bytes, which bounds the loop by the record's length.
func (c *cursor) headers() (int32, []byte) {
	count := c.varint("header count")
	if c.failed() {
		return 0, nil
	}
	if count < 0 || int(count) > (len(c.buf)-c.pos)/2 {
		c.fail("header count", "out of range", int64(count))
		return 0, nil
	}
	start := c.pos
	for range count {
		keyLength := c.varint("header key length")
		if !c.failed() && keyLength < 0 {
			c.fail("header key length", "null header key", int64(keyLength))
		}
		c.take("header key", keyLength)
		c.nullable("header value")
		if c.failed() {
			return 0, nil
		}
	}
	return count, c.buf[start:c.pos:c.pos]
}
