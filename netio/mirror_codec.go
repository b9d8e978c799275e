package netio

// The flexible (KIP-482) encoding of the mirror admin messages
// (mirror_messages.go): big-endian integers, and compact forms for the
// variable-length fields, each length an unsigned varint:
//
//	string            uvarint(len+1) bytes           (0 = null, nullable only)
//	array             uvarint(count+1) elements      (0 = null, nullable only)
//	uuid              16 bytes
//	tagged fields     uvarint(count) { uvarint(tag) uvarint(size) size bytes }
//
// Every struct, the message itself included, ends with a tagged-field
// section. The writer emits known tags in ascending order and omits a
// tagged field that holds its default; the reader skips unknown tags and
// reads a known one from exactly its size.
//
// Decoding keeps a sticky error: after the first failure every read
// returns zero values and the error stays, so a message is decoded
// straight through and checked once (complete). Counts are bounded by the
// bytes left (an element takes at least one byte, more for most) and by
// mirrorArrayMax, so a hostile count cannot make the decoder allocate
// more than a few times the input.

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var (
	errMirrorNull     = errors.New("null in a non-nullable field")
	errMirrorCount    = errors.New("array count out of range")
	errMirrorTrailing = errors.New("trailing bytes")
	errMirrorTags     = errors.New("too many tagged fields")
)

// mirrorArrayMax bounds the elements of one array in a mirror message.
const mirrorArrayMax = 1 << 20

// mirrorTagsMax bounds the tagged fields of one struct.
const mirrorTagsMax = 64

// mirrorWriter appends fields to buf.
type mirrorWriter struct {
	buf []byte
}

func (w *mirrorWriter) int16(v int16)  { w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(v)) }
func (w *mirrorWriter) int32(v int32)  { w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(v)) }
func (w *mirrorWriter) int64(v int64)  { w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v)) }
func (w *mirrorWriter) uvarint(v int)  { w.buf = binary.AppendUvarint(w.buf, uint64(v)) }
func (w *mirrorWriter) uuid(v TopicID) { w.buf = append(w.buf, v[:]...) }
func (w *mirrorWriter) noTags()        { w.buf = append(w.buf, 0) }

func (w *mirrorWriter) bool(v bool) {
	if v {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

func (w *mirrorWriter) string(s string) {
	w.uvarint(len(s) + 1)
	w.buf = append(w.buf, s...)
}

func (w *mirrorWriter) nullableString(s *string) {
	if s == nil {
		w.uvarint(0)
		return
	}
	w.string(*s)
}

func (w *mirrorWriter) strings(ss []string) {
	w.uvarint(len(ss) + 1)
	for _, s := range ss {
		w.string(s)
	}
}

// nullableStrings writes nil as null and an empty non-nil slice as an
// empty array.
func (w *mirrorWriter) nullableStrings(ss []string) {
	if ss == nil {
		w.uvarint(0)
		return
	}
	w.strings(ss)
}

// tag writes one tagged field whose value body appends.
func (w *mirrorWriter) tag(tag int, body func(*mirrorWriter)) {
	value := mirrorWriter{}
	body(&value)
	w.uvarint(tag)
	w.uvarint(len(value.buf))
	w.buf = append(w.buf, value.buf...)
}

// writeMirrorArray writes a non-nullable array of structs.
func writeMirrorArray[T any](w *mirrorWriter, items []T, write func(*mirrorWriter, *T)) {
	w.uvarint(len(items) + 1)
	for i := range items {
		write(w, &items[i])
	}
}

// mirrorReader decodes fields from buf with a sticky error.
type mirrorReader struct {
	buf []byte
	err error
}

func (r *mirrorReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.buf = nil
}

func (r *mirrorReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.buf) {
		r.fail(errShort)
		return nil
	}
	b := r.buf[:n:n]
	r.buf = r.buf[n:]
	return b
}

func (r *mirrorReader) int16() int16 {
	if b := r.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *mirrorReader) int32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *mirrorReader) int64() int64 {
	if b := r.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// bool reads a boolean: 0 is false, anything else true (as Kafka reads
// it); the writer only writes 0 and 1.
func (r *mirrorReader) bool() bool {
	if b := r.take(1); b != nil {
		return b[0] != 0
	}
	return false
}

func (r *mirrorReader) uuid() TopicID {
	var id TopicID
	copy(id[:], r.take(16))
	return id
}

// uvarint reads an unsigned varint of at most 32 bits, as Kafka's are.
func (r *mirrorReader) uvarint() int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf)
	if n <= 0 || v > 1<<32-1 {
		r.fail(errVarint)
		return 0
	}
	r.buf = r.buf[n:]
	return int(v)
}

// length reads a compact length: -1 for null, else the length.
func (r *mirrorReader) length() int {
	return r.uvarint() - 1
}

func (r *mirrorReader) string() string {
	n := r.length()
	if n < 0 && r.err == nil {
		r.fail(errMirrorNull)
	}
	return string(r.take(max(n, 0)))
}

func (r *mirrorReader) nullableString() *string {
	n := r.length()
	if n < 0 || r.err != nil {
		return nil
	}
	s := string(r.take(n))
	if r.err != nil {
		return nil
	}
	return &s
}

// count reads a compact array count, -1 for null, refusing a count whose
// elements (minBytes each at least) cannot fit in what is left.
func (r *mirrorReader) count(minBytes int) int {
	n := r.length()
	if r.err != nil || n < 0 {
		return n
	}
	if n > mirrorArrayMax || n > len(r.buf)/minBytes {
		r.fail(errMirrorCount)
		return 0
	}
	return n
}

func (r *mirrorReader) strings() []string {
	return readMirrorArray(r, 1, func(r *mirrorReader) string { return r.string() })
}

// nullableStrings reads null as nil and an empty array as an empty non-nil
// slice.
func (r *mirrorReader) nullableStrings() []string {
	n := r.count(1)
	if r.err != nil || n < 0 {
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, r.string())
	}
	return out
}

// tags reads a tagged-field section. field reads the value of a tag it
// knows from its own reader and reports whether it knew the tag; unknown
// tags are skipped. A known tag's value must be read exactly.
func (r *mirrorReader) tags(field func(tag int, value *mirrorReader) bool) {
	n := r.uvarint()
	if n > mirrorTagsMax {
		r.fail(errMirrorTags)
		return
	}
	for range n {
		tag := r.uvarint()
		body := r.take(r.uvarint())
		if r.err != nil {
			return
		}
		value := mirrorReader{buf: body}
		if field != nil && field(tag, &value) {
			if err := value.complete(); err != nil {
				r.fail(fmt.Errorf("tag %d: %w", tag, err))
			}
		}
	}
}

func (r *mirrorReader) skipTags() { r.tags(nil) }

// complete reports the first decoding error, or trailing bytes.
func (r *mirrorReader) complete() error {
	if r.err != nil {
		return r.err
	}
	if len(r.buf) > 0 {
		return fmt.Errorf("%w: %d", errMirrorTrailing, len(r.buf))
	}
	return nil
}

// readMirrorArray reads a non-nullable array of elements of at least
// minBytes each. An empty array is read as nil.
func readMirrorArray[T any](r *mirrorReader, minBytes int, read func(*mirrorReader) T) []T {
	n := r.count(minBytes)
	if n < 0 && r.err == nil {
		r.fail(errMirrorNull)
	}
	if r.err != nil || n <= 0 {
		return nil
	}
	out := make([]T, 0, n)
	for range n {
		if r.err != nil {
			return nil
		}
		out = append(out, read(r))
	}
	return out
}
