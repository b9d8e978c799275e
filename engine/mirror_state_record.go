package engine

import (
	"errors"
	"fmt"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kbin"
)

// The records of __mirror_state, the internal compacted log holding the
// state of every mirrored partition: one record per change, keyed by
// (mirror, topic ID, partition), the latest per key wins. Both key and
// value start with a version byte; integers are big-endian, as in Kafka;
// a string is an int16 length and its bytes.
//
//	key, version 0
//	+---------+-------------+----------------+----------+------------+
//	| version | mirror len  | mirror         | topic ID | partition  |
//	| int8 0  | int16 1-249 | [a-zA-Z0-9._-] | 16 bytes | int32 >= 0 |
//	+---------+-------------+----------------+----------+------------+
//
//	value, version 0 (55 bytes and the error text)
//	 0 version            int8   0
//	 1 state              int8   mirrorstate.State, never UNKNOWN
//	 2 previous state     int8   mirrorstate.State
//	 3 stop step          int8   mirrorstate.StopStep
//	 4 retryable          int8   0 or 1
//	 5 state epoch        int64  >= 1
//	13 leader epoch       int32  >= 0
//	17 source epoch       int32  >= -1 (-1: not known)
//	21 retry count        int32  >= 0
//	25 next retry at      int64  unix ms; -1 unless retryable
//	33 last mirror epoch  int32  >= -1
//	37 last mirror offset int64  >= -1 (-1: never stopped)
//	45 truncate to        int64  ULE_RECOVERY's offset; -1 in other states
//	53 error              int16 length <= 1024, bytes
//
// Decoding checks every invariant of the machine's fields (mirrorstate.Record.Validate),
// so a decoded value re-encodes to the same bytes and mirrorstate.Restore can trust
// it. Errors wrap ErrMirrorStateCorrupt.

// ErrMirrorStateCorrupt marks a __mirror_state record that cannot be
// decoded or breaks the invariants.
var ErrMirrorStateCorrupt = errors.New("engine: corrupt __mirror_state record")

const (
	mirrorStateVersion       = 0
	mirrorNameMax            = 249
	mirrorStateValueFixedLen = 55 // up to and with the error length
)

// MirrorStateKey is the key of a __mirror_state record.
type MirrorStateKey struct {
	Mirror    string // 1-249 bytes of [a-zA-Z0-9._-]
	TopicID   netio.TopicID
	Partition int32 // >= 0
}

// validateMirrorStateValue checks the invariants of the machine's fields
// (mirrorstate.Record.Validate) on a value read or about to be written.
func validateMirrorStateValue(v mirrorstate.Record) error {
	if err := v.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrMirrorStateCorrupt, err)
	}
	return nil
}

func (k MirrorStateKey) validate() error {
	if len(k.Mirror) == 0 || len(k.Mirror) > mirrorNameMax || k.Partition < 0 {
		return fmt.Errorf("%w: key %q partition %d", ErrMirrorStateCorrupt, k.Mirror, k.Partition)
	}
	for i := range len(k.Mirror) {
		c := k.Mirror[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: mirror name %q: byte %d", ErrMirrorStateCorrupt, k.Mirror, i)
		}
	}
	return nil
}

// EncodeMirrorStateRecord encodes a record. Invalid input is a bug and
// panics (it is checked again when read).
func EncodeMirrorStateRecord(key MirrorStateKey, value mirrorstate.Record) (keyBytes, valueBytes []byte) {
	if err := errors.Join(key.validate(), validateMirrorStateValue(value)); err != nil {
		panic(fmt.Sprintf("engine: EncodeMirrorStateRecord: %v", err))
	}
	keyBytes = make([]byte, 0, 1+2+len(key.Mirror)+16+4)
	keyBytes = kbin.AppendInt8(keyBytes, mirrorStateVersion)
	keyBytes = kbin.AppendString(keyBytes, key.Mirror)
	keyBytes = kbin.AppendUuid(keyBytes, key.TopicID)
	keyBytes = kbin.AppendInt32(keyBytes, key.Partition)

	b := make([]byte, 0, mirrorStateValueFixedLen+len(value.Error))
	b = append(b, mirrorStateVersion, byte(value.State), byte(value.Previous), byte(value.StopStep))
	b = kbin.AppendBool(b, value.Retryable)
	b = kbin.AppendInt64(b, int64(value.StateEpoch))
	b = kbin.AppendInt32(b, int32(value.LeaderEpoch))
	b = kbin.AppendInt32(b, int32(value.SourceLeaderEpoch))
	b = kbin.AppendInt32(b, value.RetryCount)
	b = kbin.AppendInt64(b, value.NextRetryAtMillis)
	b = kbin.AppendInt32(b, int32(value.LastMirrorEpoch))
	b = kbin.AppendInt64(b, int64(value.LastMirrorOffset))
	b = kbin.AppendInt64(b, int64(value.TruncateTo))
	return keyBytes, kbin.AppendString(b, value.Error)
}

// DecodeMirrorStateRecord decodes a record written by
// EncodeMirrorStateRecord. A tombstone (nil value) is for
// DecodeMirrorStateKey alone.
func DecodeMirrorStateRecord(keyBytes, valueBytes []byte) (MirrorStateKey, mirrorstate.Record, error) {
	key, err := DecodeMirrorStateKey(keyBytes)
	if err != nil {
		return key, mirrorstate.Record{}, err
	}
	value, err := decodeMirrorStateValue(valueBytes)
	return key, value, err
}

// DecodeMirrorStateKey decodes the key of a record.
func DecodeMirrorStateKey(b []byte) (MirrorStateKey, error) {
	r := mirrorStateReader{Reader: kbin.Reader{Src: b}}
	r.version()
	key := MirrorStateKey{Mirror: r.string(mirrorNameMax)}
	key.TopicID = r.Uuid()
	key.Partition = r.Int32()
	if err := r.finish("key"); err != nil {
		return MirrorStateKey{}, err
	}
	return key, key.validate()
}

func decodeMirrorStateValue(b []byte) (mirrorstate.Record, error) {
	r := mirrorStateReader{Reader: kbin.Reader{Src: b}}
	r.version()
	v := mirrorstate.Record{State: mirrorstate.State(r.Int8()), Previous: mirrorstate.State(r.Int8()), StopStep: mirrorstate.StopStep(r.Int8())}
	switch retryable := r.Int8(); retryable {
	case 0, 1:
		v.Retryable = retryable == 1
	default:
		r.fail(fmt.Sprintf("retryable byte %d", retryable))
	}
	v.StateEpoch = mirrorstate.StateEpoch(r.Int64())
	v.LeaderEpoch, v.SourceLeaderEpoch = rb.Epoch(r.Int32()), rb.Epoch(r.Int32())
	v.RetryCount = r.Int32()
	v.NextRetryAtMillis = r.Int64()
	v.LastMirrorEpoch, v.LastMirrorOffset = rb.Epoch(r.Int32()), rb.Offset(r.Int64())
	v.TruncateTo = rb.Offset(r.Int64())
	v.Error = r.string(mirrorstate.ErrorTextMax)
	if err := r.finish("value"); err != nil {
		return mirrorstate.Record{}, err
	}
	return v, validateMirrorStateValue(v)
}

// mirrorStateReader is a kbin.Reader (big-endian fields, a sticky error:
// after the first failure every read returns zero) that also keeps the
// first refusal of a field kbin reads without complaint; finish reports
// either.
type mirrorStateReader struct {
	kbin.Reader
	refused error
}

// fail records what is wrong and invalidates the kbin reader (a negative
// span is its only way in).
func (r *mirrorStateReader) fail(what string) {
	if r.refused == nil && r.Ok() {
		r.refused = fmt.Errorf("%w: %s", ErrMirrorStateCorrupt, what)
	}
	r.Span(-1)
}

func (r *mirrorStateReader) version() {
	if v := r.Int8(); v != mirrorStateVersion && r.Ok() {
		r.fail(fmt.Sprintf("version %d, want %d", v, mirrorStateVersion))
	}
}

// string reads an int16 length (0 to limit) and that many bytes.
func (r *mirrorStateReader) string(limit int) string {
	n := r.Int16()
	if n < 0 || int(n) > limit {
		r.fail(fmt.Sprintf("string length %d, limit %d", n, limit))
		return ""
	}
	return string(r.Span(int(n)))
}

func (r *mirrorStateReader) finish(what string) error {
	switch {
	case r.refused != nil:
		return fmt.Errorf("%s: %w", what, r.refused)
	case r.Complete() != nil:
		return fmt.Errorf("%s: %w: truncated: %w", what, ErrMirrorStateCorrupt, r.Complete())
	case len(r.Src) != 0:
		return fmt.Errorf("%s: %w: %d trailing bytes", what, ErrMirrorStateCorrupt, len(r.Src))
	}
	return nil
}
