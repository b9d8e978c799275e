package group

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one record of the group log, as Kafka writes it to
// __consumer_offsets: Key and Value are the bytes of Kafka's
// OffsetCommitKey/Value or GroupMetadataKey/Value (each led by its int16
// version). A nil Value is a tombstone. A record of a transaction
// (TxnOffsetCommit) is Transactional with its producer's ID and epoch, and
// is written in a transactional batch of that producer; at replay the
// transaction's marker comes as a Record with Marker set and no key
// (txn_offsets.go).
type Record struct {
	Key   []byte
	Value []byte

	Transactional bool
	ProducerID    int64 // of a Transactional record or a marker
	ProducerEpoch int16
	Marker        Marker // a transaction marker, at replay only
}

// Store keeps the group log. The coordinator appends the records of a
// change before it answers the request that made it, and replays the whole
// log once when it opens. A compacted log keeps the last record of each key;
// replaying every record in order gives the same state.
type Store interface {
	// Append makes records durable, in order, or returns an error and
	// appends none of them. It is called from the coordinator's loop.
	Append(records []Record) error
	// Replay calls apply for each record in log order and stops at the
	// first error apply returns, returning it.
	Replay(apply func(Record) error) error
}

// GroupCommitStore is a Store that can make many writes durable with one
// sync. Write appends records, in order, visible to Replay after a
// restart only once a Sync returned (or none of them on an error); Sync
// makes every Write before it durable. The coordinator writes the changes
// of every request waiting in its queue, syncs once, and only then
// answers them (a group commit): a commit costs a share of one sync, not
// one each. Append is Write and Sync.
type GroupCommitStore interface {
	Store
	Write(records []Record) error
	Sync() error
}

// MemoryStore is a Store in memory, for tests: a restart is a new
// Coordinator over the same MemoryStore.
type MemoryStore struct {
	mu          sync.Mutex
	records     []Record
	appendError error
}

// Append keeps copies of records, or fails with the error SetAppendError set.
func (s *MemoryStore) Append(records []Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.appendError != nil {
		return s.appendError
	}
	for _, r := range records {
		r.Key, r.Value = clone(r.Key), clone(r.Value)
		s.records = append(s.records, r)
	}
	return nil
}

// Replay calls apply on each record in order.
func (s *MemoryStore) Replay(apply func(Record) error) error {
	for _, r := range s.Records() {
		if err := apply(r); err != nil {
			return err
		}
	}
	return nil
}

// Records returns a copy of the records appended so far.
func (s *MemoryStore) Records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.records...)
}

// SetAppendError makes every later Append fail with err (nil: succeed).
func (s *MemoryStore) SetAppendError(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appendError = err
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// The record versions Kafka writes (GroupCoordinatorRecordHelpers with
// MetadataVersion >= 2.3): OffsetCommitKey v1, GroupMetadataKey v2,
// OffsetCommitValue v3 (v1 when the commit carries an expire timestamp),
// GroupMetadataValue v3. Keys v0 and v1 are both offset commits.
const (
	offsetCommitKeyVersion        = 1
	groupMetadataKeyVersion       = 2
	offsetCommitValueVersion      = 3
	offsetCommitValueVersionOld   = 1 // with expireTimestamp
	groupMetadataValueVersion     = 3
	offsetCommitValueVersionMax   = 4
	groupMetadataValueVersionMax  = 4
	noExpireTimestamp             = -1
	noLeaderEpoch                 = -1
	recordKeyVersionFieldBytesLen = 2
)

// committed is one committed offset of a group.
type committed struct {
	offset          int64
	leaderEpoch     int32 // -1: none
	metadata        string
	commitTimestamp int64 // ms since the epoch
	expireTimestamp int64 // ms since the epoch; -1: none (offsets.retention.minutes applies)
	// sequence orders a group's commits as their records are in the log
	// (Kafka compares record offsets): a transactional offset replaces the
	// committed one at COMMIT only if it was written after it. 0: not set.
	sequence uint64
}

func offsetCommitRecord(group, topic string, partition int32, c committed) Record {
	key := kmsg.OffsetCommitKey{Version: offsetCommitKeyVersion, Group: group, Topic: topic, Partition: partition}
	value := kmsg.OffsetCommitValue{
		Version:         offsetCommitValueVersion,
		Offset:          c.offset,
		LeaderEpoch:     c.leaderEpoch,
		Metadata:        c.metadata,
		CommitTimestamp: c.commitTimestamp,
		ExpireTimestamp: c.expireTimestamp,
	}
	if c.expireTimestamp != noExpireTimestamp {
		value.Version = offsetCommitValueVersionOld
	}
	return Record{Key: key.AppendTo(nil), Value: value.AppendTo(nil)}
}

func offsetTombstone(group, topic string, partition int32) Record {
	key := kmsg.OffsetCommitKey{Version: offsetCommitKeyVersion, Group: group, Topic: topic, Partition: partition}
	return Record{Key: key.AppendTo(nil)}
}

func groupMetadataRecord(group string, value *kmsg.GroupMetadataValue) Record {
	key := kmsg.GroupMetadataKey{Version: groupMetadataKeyVersion, Group: group}
	value.Version = groupMetadataValueVersion
	return Record{Key: key.AppendTo(nil), Value: value.AppendTo(nil)}
}

func groupTombstone(group string) Record {
	key := kmsg.GroupMetadataKey{Version: groupMetadataKeyVersion, Group: group}
	return Record{Key: key.AppendTo(nil)}
}

// decoded is one record of the log, parsed: exactly one of offsetKey and
// groupKey is set; value is nil for a tombstone.
type decoded struct {
	offsetKey   *kmsg.OffsetCommitKey
	offsetValue *kmsg.OffsetCommitValue
	groupKey    *kmsg.GroupMetadataKey
	groupValue  *kmsg.GroupMetadataValue
}

func decodeRecord(r Record) (decoded, error) {
	var d decoded
	if len(r.Key) < recordKeyVersionFieldBytesLen {
		return d, fmt.Errorf("%w: key of %d bytes", ErrCorruptRecord, len(r.Key))
	}
	switch version := int16(binary.BigEndian.Uint16(r.Key)); version {
	case 0, 1:
		d.offsetKey = new(kmsg.OffsetCommitKey)
		if err := d.offsetKey.ReadFrom(r.Key); err != nil {
			return d, fmt.Errorf("%w: offset commit key: %v", ErrCorruptRecord, err)
		}
		if r.Value == nil {
			return d, nil
		}
		d.offsetValue = new(kmsg.OffsetCommitValue)
		if err := d.offsetValue.ReadFrom(r.Value); err != nil {
			return d, fmt.Errorf("%w: offset commit value of %s: %v", ErrCorruptRecord, d.offsetKey.Group, err)
		}
		if v := d.offsetValue.Version; v < 0 || v > offsetCommitValueVersionMax {
			return d, fmt.Errorf("%w: offset commit value version %d", ErrCorruptRecord, v)
		}
		if d.offsetValue.Version < 3 {
			d.offsetValue.LeaderEpoch = noLeaderEpoch
		}
		if d.offsetValue.Version != 1 {
			d.offsetValue.ExpireTimestamp = noExpireTimestamp
		}
	case 2:
		d.groupKey = new(kmsg.GroupMetadataKey)
		if err := d.groupKey.ReadFrom(r.Key); err != nil {
			return d, fmt.Errorf("%w: group metadata key: %v", ErrCorruptRecord, err)
		}
		if r.Value == nil {
			return d, nil
		}
		d.groupValue = new(kmsg.GroupMetadataValue)
		if err := d.groupValue.ReadFrom(r.Value); err != nil {
			return d, fmt.Errorf("%w: group metadata value of %s: %v", ErrCorruptRecord, d.groupKey.Group, err)
		}
		if v := d.groupValue.Version; v < 0 || v > groupMetadataValueVersionMax {
			return d, fmt.Errorf("%w: group metadata value version %d", ErrCorruptRecord, v)
		}
	default:
		// Versions 3 and up are the KIP-848 consumer group and share group
		// records, which this coordinator does not write.
		return d, fmt.Errorf("%w: key version %d is not a classic group record", ErrCorruptRecord, version)
	}
	return d, nil
}
