package netio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Framing. Every request and response is a big-endian int32 size followed
// by that many bytes. A request starts with its header:
//
//	int16   api key
//	int16   api version
//	int32   correlation id
//	string  client id (int16 length, -1 = null)    header v1+, every API we serve
//	tags    tagged fields (uvarint count, then      header v2, flexible versions
//	        uvarint tag, uvarint size, bytes)
//
// A response starts with the correlation id, then (flexible versions, but
// never for ApiVersions) an empty tagged-field section: one zero byte.

// ErrFrame marks a request that cannot be framed or parsed; the
// connection that sent it is closed.
var ErrFrame = errors.New("netio: malformed request")

// RequestHeader is the parsed header of a request.
type RequestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
}

// readFrame reads one size-prefixed frame into buf (grown as needed),
// refusing frames larger than limit. A Server's connections read theirs
// with conn.readRequest, which reserves the frame's bytes first.
func readFrame(r io.Reader, buf []byte, limit int32) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return buf, err
	}
	n, err := frameSize(size, limit)
	if err != nil {
		return buf, err
	}
	return readBody(r, buf, n)
}

// frameSize is the size a frame's first four bytes declare, refused
// outside [8, limit].
func frameSize(size [4]byte, limit int32) (int32, error) {
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 8 || n > limit {
		return 0, fmt.Errorf("%w: frame size %d outside [8, %d]", ErrFrame, n, limit)
	}
	return n, nil
}

// readBody reads the n bytes of a frame's body into buf, or into a new
// buffer of exactly n bytes when buf is smaller: the bytes were reserved
// from the request memory before (requestMemory), so one allocation of
// the declared size is within the budget, and a body grown step by step
// would leave its smaller copies behind as garbage.
func readBody(r io.Reader, buf []byte, n int32) ([]byte, error) {
	buf = frameBuffer(buf, n)
	_, err := io.ReadFull(r, buf)
	return buf, err
}

// frameBuffer is buf with length n, or a new buffer of n bytes when buf
// is smaller.
func frameBuffer(buf []byte, n int32) []byte {
	if cap(buf) < int(n) {
		return make([]byte, n)
	}
	return buf[:n]
}

// parseHeader splits a request frame into its header and body. flexible
// reports whether the header carries tagged fields, which depends on the
// key and version (the caller knows them from the first four bytes).
func parseHeader(frame []byte, flexible func(key, version int16) (bool, bool)) (RequestHeader, []byte, error) {
	r := kbin.Reader{Src: frame}
	h := RequestHeader{Key: r.Int16(), Version: r.Int16(), CorrelationID: r.Int32()}
	if clientID := r.NullableString(); clientID != nil {
		h.ClientID = *clientID
	}
	if err := r.Complete(); err != nil {
		return h, nil, fmt.Errorf("%w: header: %w", ErrFrame, err)
	}
	isFlexible, known := flexible(h.Key, h.Version)
	if !known {
		return h, r.Src, nil // the caller answers or closes; the body is not parsed
	}
	if isFlexible {
		if err := skipTags(&r); err != nil {
			return h, nil, fmt.Errorf("%w: header tags: %w", ErrFrame, err)
		}
	}
	return h, r.Src, nil
}

// appendResponseHeader starts a response frame in dst: a size placeholder
// (filled by finishFrame), the correlation id and, for flexible responses,
// the empty tag section.
func appendResponseHeader(dst []byte, correlationID int32, flexibleHeader bool) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if flexibleHeader {
		dst = append(dst, 0)
	}
	return dst
}

// finishFrame writes the size of frame (everything after its first four
// bytes) plus extra bytes that will follow it on the wire.
func finishFrame(frame []byte, extra int64) {
	binary.BigEndian.PutUint32(frame, uint32(int64(len(frame)-4)+extra))
}

// errTooManyTags refuses a header with more tagged fields than maxTags.
var errTooManyTags = errors.New("netio: too many tagged fields")

// maxTags bounds the tagged fields of a header (Kafka defines none for
// request headers but the client-id tag; a bound keeps a hostile count
// from spinning).
const maxTags = 64

// skipTags reads past a tagged-field section.
func skipTags(r *kbin.Reader) error {
	count := r.Uvarint()
	if count > maxTags {
		return errTooManyTags
	}
	for range count {
		r.Uvarint() // tag
		r.Span(int(r.Uvarint()))
	}
	return r.Complete()
}
