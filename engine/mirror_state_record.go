package engine

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
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
	keyBytes = append(keyBytes, mirrorStateVersion)
	keyBytes = binary.BigEndian.AppendUint16(keyBytes, uint16(len(key.Mirror)))
	keyBytes = append(keyBytes, key.Mirror...)
	keyBytes = append(keyBytes, key.TopicID[:]...)
	keyBytes = binary.BigEndian.AppendUint32(keyBytes, uint32(key.Partition))

	b := make([]byte, 0, mirrorStateValueFixedLen+len(value.Error))
	b = append(b, mirrorStateVersion, byte(value.State), byte(value.Previous), byte(value.StopStep), boolByte(value.Retryable))
	b = binary.BigEndian.AppendUint64(b, uint64(value.StateEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(value.LeaderEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(value.SourceLeaderEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(value.RetryCount))
	b = binary.BigEndian.AppendUint64(b, uint64(value.NextRetryAtMillis))
	b = binary.BigEndian.AppendUint32(b, uint32(value.LastMirrorEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(value.LastMirrorOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(value.TruncateTo))
	b = binary.BigEndian.AppendUint16(b, uint16(len(value.Error)))
	return keyBytes, append(b, value.Error...)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
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
	r := mirrorStateReader{b: b}
	r.version()
	key := MirrorStateKey{Mirror: r.string(mirrorNameMax)}
	copy(key.TopicID[:], r.bytes(len(key.TopicID)))
	key.Partition = r.int32()
	if err := r.finish("key"); err != nil {
		return MirrorStateKey{}, err
	}
	return key, key.validate()
}

func decodeMirrorStateValue(b []byte) (MirrorStateValue, error) {
	r := mirrorStateReader{b: b}
	r.version()
	v := MirrorStateValue{State: MirrorState(r.int8()), Previous: MirrorState(r.int8()), StopStep: StopStep(r.int8())}
	switch retryable := r.int8(); retryable {
	case 0, 1:
		v.Retryable = retryable == 1
	default:
		r.fail(fmt.Sprintf("retryable byte %d", retryable))
	}
	v.StateEpoch = StateEpoch(r.int64())
	v.LeaderEpoch, v.SourceLeaderEpoch = rb.Epoch(r.int32()), rb.Epoch(r.int32())
	v.RetryCount = r.int32()
	v.NextRetryAtMillis = r.int64()
	v.LastMirrorEpoch, v.LastMirrorOffset = rb.Epoch(r.int32()), rb.Offset(r.int64())
	v.TruncateTo = rb.Offset(r.int64())
	v.Error = r.string(mirrorErrorTextMax)
	if err := r.finish("value"); err != nil {
		return MirrorStateValue{}, err
	}
	return v, v.validate()
}

// mirrorStateReader reads big-endian fields with a sticky error: after the
// first failure every read returns zero, and finish reports it.
type mirrorStateReader struct {
	b   []byte
	err error
}

func (r *mirrorStateReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrMirrorStateCorrupt, what)
	}
	r.b = nil
}

func (r *mirrorStateReader) bytes(n int) []byte {
	if r.err != nil || n > len(r.b) {
		r.fail(fmt.Sprintf("%d bytes wanted, %d left", n, len(r.b)))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *mirrorStateReader) int8() int8 {
	if b := r.bytes(1); b != nil {
		return int8(b[0])
	}
	return 0
}

func (r *mirrorStateReader) int16() int16 {
	if b := r.bytes(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *mirrorStateReader) int32() int32 {
	if b := r.bytes(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *mirrorStateReader) int64() int64 {
	if b := r.bytes(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *mirrorStateReader) version() {
	if v := r.int8(); v != mirrorStateVersion && r.err == nil {
		r.fail(fmt.Sprintf("version %d, want %d", v, mirrorStateVersion))
	}
}

// string reads an int16 length (0 to limit) and that many bytes.
func (r *mirrorStateReader) string(limit int) string {
	n := r.int16()
	if n < 0 || int(n) > limit {
		r.fail(fmt.Sprintf("string length %d, limit %d", n, limit))
		return ""
	}
	return string(r.bytes(int(n)))
}

func (r *mirrorStateReader) finish(what string) error {
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Sprintf("%d trailing bytes", len(r.b)))
	}
	if r.err != nil {
		return fmt.Errorf("%s: %w", what, r.err)
	}
	return nil
}
