package mirrorwire

// The flexible (KIP-482) encoding of the mirror admin messages
// (messages.go): big-endian integers, and compact forms for the
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
// The primitives are franz-go's: kbin.AppendXxx writes, kbin.Reader reads
// with a sticky error (after the first failure every read returns zero
// values), so a message is decoded straight through and checked once
// (complete). reader adds what kbin does not check: a null where none is
// allowed, an array count beyond the bytes left (an element takes at least
// one byte, more for most) or above arrayMax, too many tagged fields, and
// trailing bytes.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

var (
	errNull     = errors.New("mirrorwire: null in a non-nullable field")
	errCount    = errors.New("mirrorwire: array count out of range")
	errTrailing = errors.New("mirrorwire: trailing bytes")
	errTags     = errors.New("mirrorwire: too many tagged fields")
)

// arrayMax bounds the elements of one array in a mirror message.
const arrayMax = 1 << 20

// tagsMax bounds the tagged fields of one struct.
const tagsMax = 64

func appendNoTags(dst []byte) []byte { return append(dst, 0) }

func appendStrings(dst []byte, ss []string) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(ss))
	for _, s := range ss {
		dst = kbin.AppendCompactString(dst, s)
	}
	return dst
}

// appendNullableStrings writes nil as null and an empty non-nil slice as
// an empty array.
func appendNullableStrings(dst []byte, ss []string) []byte {
	if ss == nil {
		return kbin.AppendCompactNullableArrayLen(dst, 0, true)
	}
	return appendStrings(dst, ss)
}

// appendTag writes one tagged field whose value body appends.
func appendTag(dst []byte, tag uint32, body func([]byte) []byte) []byte {
	value := body(nil)
	dst = kbin.AppendUvarint(dst, tag)
	dst = kbin.AppendUvarint(dst, uint32(len(value)))
	return append(dst, value...)
}

// appendArray writes a non-nullable array of items.
func appendArray[T any](dst []byte, items []T, appendItem func([]byte, *T) []byte) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(items))
	for i := range items {
		dst = appendItem(dst, &items[i])
	}
	return dst
}

// reader is a kbin.Reader that also keeps the first refusal of a value
// kbin reads without complaint (a null, a count, trailing bytes).
type reader struct {
	kbin.Reader
	refused error
}

func newReader(src []byte) reader { return reader{Reader: kbin.Reader{Src: src}} }

// refuse records err and invalidates the kbin reader (a negative span is
// its only way in), so every later read returns zero values.
func (r *reader) refuse(err error) {
	if r.refused == nil && r.Ok() {
		r.refused = err
	}
	r.Span(-1)
}

// string reads a non-nullable compact string.
func (r *reader) string() string {
	n := int64(r.Uvarint()) - 1
	if n < 0 {
		if r.Ok() {
			r.refuse(errNull)
		}
		return ""
	}
	return string(r.Span(int(n)))
}

func (r *reader) nullableString() *string {
	s := r.CompactNullableString()
	if !r.Ok() {
		return nil
	}
	return s
}

// count reads a compact array count, -1 for null, refusing a count whose
// elements (minBytes each at least) cannot fit in what is left.
func (r *reader) count(minBytes int) int {
	n := int64(r.Uvarint()) - 1
	if !r.Ok() {
		return 0
	}
	if n < 0 {
		return -1
	}
	if n > arrayMax || n > int64(len(r.Src)/minBytes) {
		r.refuse(errCount)
		return 0
	}
	return int(n)
}

func (r *reader) strings() []string {
	return readArray(r, 1, (*reader).string)
}

// nullableStrings reads null as nil and an empty array as an empty non-nil
// slice.
func (r *reader) nullableStrings() []string {
	n := r.count(1)
	if !r.Ok() || n < 0 {
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
func (r *reader) tags(field func(tag uint32, value *reader) bool) {
	n := r.Uvarint()
	if n > tagsMax {
		r.refuse(errTags)
		return
	}
	for range n {
		tag := r.Uvarint()
		size := r.Uvarint()
		body := r.Span(int(size))
		if !r.Ok() {
			return
		}
		value := newReader(body)
		if field != nil && field(tag, &value) {
			if err := value.complete(); err != nil {
				r.refuse(fmt.Errorf("tag %d: %w", tag, err))
			}
		}
	}
}

func (r *reader) skipTags() { r.tags(nil) }

// complete reports the first decoding error, or trailing bytes.
func (r *reader) complete() error {
	if r.refused != nil {
		return r.refused
	}
	if err := r.Complete(); err != nil {
		return fmt.Errorf("mirrorwire: %w", err)
	}
	if len(r.Src) > 0 {
		return fmt.Errorf("%w: %d", errTrailing, len(r.Src))
	}
	return nil
}

// readArray reads a non-nullable array of elements of at least minBytes
// each. An empty array is read as nil.
func readArray[T any](r *reader, minBytes int, read func(*reader) T) []T {
	n := r.count(minBytes)
	if n < 0 && r.Ok() {
		r.refuse(errNull)
	}
	if !r.Ok() || n <= 0 {
		return nil
	}
	out := make([]T, 0, n)
	for range n {
		if !r.Ok() {
			return nil
		}
		out = append(out, read(r))
	}
	return out
}
