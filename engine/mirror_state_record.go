package engine

import (
	"errors"
	"fmt"

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
//	 1 state              int8   MirrorState, never UNKNOWN
//	 2 previous state     int8   MirrorState
//	 3 stop step          int8   StopStep
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
// Decoding checks every invariant of PartitionMirror's fields (validate),
// so a decoded value re-encodes to the same bytes and RestorePartitionMirror can trust
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

// MirrorStateValue is a __mirror_state record: PartitionMirror's
// persisted fields (see their comments for the meanings and invariants).
type MirrorStateValue struct {
	State             MirrorState
	Previous          MirrorState
	StopStep          StopStep
	StateEpoch        StateEpoch
	LeaderEpoch       rb.Epoch
	SourceLeaderEpoch rb.Epoch
	RetryCount        int32
	Retryable         bool
	NextRetryAtMillis int64 // -1 unless Retryable
	Error             string
	LastMirrorEpoch   rb.Epoch
	LastMirrorOffset  rb.Offset
	TruncateTo        rb.Offset
}

func (v MirrorStateValue) String() string {
	s := fmt.Sprintf("%v (from %v, state epoch %d, leader epoch %d)", v.State, v.Previous, v.StateEpoch, v.LeaderEpoch)
	if v.StopStep != StopNone {
		s += " at stop step " + v.StopStep.String()
	}
	if v.Error != "" {
		s += fmt.Sprintf(", %d retries, error %q", v.RetryCount, v.Error)
	}
	return s
}

// validate checks the invariants a persisted value keeps (those of
// PartitionMirror's field comments).
func (v MirrorStateValue) validate() error {
	for _, check := range []struct {
		ok   bool
		what string
	}{
		{v.State > MirrorUnknown && v.State < mirrorStateCount, "state out of range or UNKNOWN"},
		{v.Previous >= 0 && v.Previous < mirrorStateCount && v.Previous != v.State, "previous state out of range or the state itself"},
		{v.State != MirrorFailed || mirrorFailable(v.Previous), "FAILED from a state without an action"},
		{v.StopStep >= 0 && v.StopStep < stopStepCount, "stop step out of range"},
		{(v.StopStep != StopNone) == (v.State == MirrorStopping || v.State == MirrorFailed && v.Previous == MirrorStopping), "stop step outside a stop"},
		{v.StateEpoch >= 1, "state epoch below 1"},
		{v.LeaderEpoch >= 0 && v.SourceLeaderEpoch >= rb.NoEpoch && v.LastMirrorEpoch >= rb.NoEpoch, "negative epoch"},
		{v.State != MirrorMirroring || !mirrorEpochsNeedFencing(v.LeaderEpoch, v.SourceLeaderEpoch), "MIRRORING with a leader epoch too close to the source's"},
		{v.RetryCount >= 0, "negative retry count"},
		{!v.Retryable || v.State == MirrorFailed, "retryable outside FAILED"},
		{(v.NextRetryAtMillis >= 0) == v.Retryable && v.NextRetryAtMillis >= -1, "next retry time without a retry"},
		{len(v.Error) <= mirrorErrorTextMax, "error text too long"},
		{v.Error != "" || v.State != MirrorFailed && v.RetryCount == 0, "FAILED or retrying without an error"},
		{v.LastMirrorOffset >= -1, "last mirror offset below -1"},
		{v.LastMirrorOffset >= 0 || v.State != MirrorStopped && v.StopStep <= StopRemoveFromFetcher, "stopped without a last mirror offset"},
		{(v.TruncateTo >= 0) == (v.State == MirrorULERecovery) && v.TruncateTo >= -1, "truncation offset outside ULE_RECOVERY"},
	} {
		if !check.ok {
			return fmt.Errorf("%w: %s: %v", ErrMirrorStateCorrupt, check.what, v)
		}
	}
	return nil
}

func mirrorEpochsNeedFencing(leader, source rb.Epoch) bool {
	return source != rb.NoEpoch && int64(leader) < int64(source)+mirrorEpochGapMin
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
func EncodeMirrorStateRecord(key MirrorStateKey, value MirrorStateValue) (keyBytes, valueBytes []byte) {
	if err := errors.Join(key.validate(), value.validate()); err != nil {
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
func DecodeMirrorStateRecord(keyBytes, valueBytes []byte) (MirrorStateKey, MirrorStateValue, error) {
	key, err := DecodeMirrorStateKey(keyBytes)
	if err != nil {
		return key, MirrorStateValue{}, err
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

func decodeMirrorStateValue(b []byte) (MirrorStateValue, error) {
	r := mirrorStateReader{Reader: kbin.Reader{Src: b}}
	r.version()
	v := MirrorStateValue{State: MirrorState(r.Int8()), Previous: MirrorState(r.Int8()), StopStep: StopStep(r.Int8())}
	switch retryable := r.Int8(); retryable {
	case 0, 1:
		v.Retryable = retryable == 1
	default:
		r.fail(fmt.Sprintf("retryable byte %d", retryable))
	}
	v.StateEpoch = StateEpoch(r.Int64())
	v.LeaderEpoch, v.SourceLeaderEpoch = rb.Epoch(r.Int32()), rb.Epoch(r.Int32())
	v.RetryCount = r.Int32()
	v.NextRetryAtMillis = r.Int64()
	v.LastMirrorEpoch, v.LastMirrorOffset = rb.Epoch(r.Int32()), rb.Offset(r.Int64())
	v.TruncateTo = rb.Offset(r.Int64())
	v.Error = r.string(mirrorErrorTextMax)
	if err := r.finish("value"); err != nil {
		return MirrorStateValue{}, err
	}
	return v, v.validate()
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
