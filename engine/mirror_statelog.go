package engine

import (
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/logstore"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
	"github.com/mirrord/mirrord/vfs"
)

// mirrorStateTopic is the internal topic holding the state of every
// mirrored partition (DESIGN.md, "The partition state machine"). It has
// one partition.
const mirrorStateTopic = "__mirror_state"

// Compaction at open: the log is rewritten when it holds more than
// stateLogCompactRatio records per live key and more than
// stateLogCompactMin records.
const (
	stateLogCompactRatio = 4
	stateLogCompactMin   = 1000
	stateLogBatchRecords = 500 // live records per batch when rewriting
	// stateLogAppendBytes bounds one append of putAll (or half the
	// segment size, when smaller).
	stateLogAppendBytes = 4 << 20
)

// stateLog is __mirror_state partition 0: the persisted state of every
// mirrored partition, one record per state change, keyed by (mirror,
// topic ID, partition), the latest per key winning. At open it is
// replayed into live (the latest value per key); put appends one record
// and syncs it before returning, so a state change is durable before it
// is acted on. The topic is created at the first put.
//
// Every put is fenced: its state epoch must be above the stored one for
// its key, so a stale writer (an older incarnation of the partition's
// state machine) cannot overwrite a newer state.
//
// Compaction is by rewrite, at open, not Kafka's log cleaner: when the
// log holds more than stateLogCompactRatio times as many records as live
// keys (and more than stateLogCompactMin), the live set is appended again
// at the end in a new segment, synced, and then the log start is moved to
// it, which deletes the older segments. A crash midway leaves either the
// old log (the start not moved) or the rewritten one: both replay to the
// same live set.
//
// Concurrency: mu guards log creation, live and the appends (one put at
// a time). It is taken under a mirrorPartition's mu and takes no other
// lock of the engine but, at the first put, the node's (logs.CreateInternalLog).
type stateLog struct {
	logs internalLogs
	cfg  logstore.Config

	mu      sync.Mutex
	log     *logstore.Log                         // nil until the first put
	live    map[MirrorStateKey]mirrorstate.Record // bounded by the mirrored partitions
	records int                                   // records replayed or appended since open
	scratch []byte                                // the batch being built
}

func stateLogTP() logstore.TopicPartition {
	return logstore.TopicPartition{Topic: mirrorStateTopic, Partition: 0}
}

// internalLogs is the node's internal topics (one partition each): the
// log of one, and its creation.
type internalLogs interface {
	InternalLog(topic string) (*logstore.Log, bool)
	CreateInternalLog(topic string, cfg logstore.Config) (*logstore.Log, error)
}

// openStateLog replays __mirror_state if the node holds it, and compacts
// it when it has grown (see stateLog). The topic is created at the first
// put. A batch or record that cannot be
// read does not stop the node: it is skipped, kept raw under
// quarantine/__mirror_state-0/ in the data directory, and returned in
// skipped for the caller to report loudly.
func openStateLog(fs vfs.FS, dataDir string, logs internalLogs, cfg logstore.Config) (s *stateLog, skipped []error, err error) {
	cfg.Flush = logstore.FlushEveryAppend
	s = &stateLog{logs: logs, cfg: cfg, live: map[MirrorStateKey]mirrorstate.Record{}}
	log, ok := logs.InternalLog(mirrorStateTopic)
	if !ok {
		return s, nil, nil
	}
	s.log = log
	quarantine := func(b rb.Batch, cause error) {
		if len(skipped) == stateLogSkippedMax {
			skipped = append(skipped, fmt.Errorf("%w: more corrupt batches not listed", ErrMirrorStateCorrupt))
		}
		if len(skipped) > stateLogSkippedMax {
			return
		}
		if file, err := quarantineBatch(fs, dataDir, b); err != nil {
			cause = fmt.Errorf("%w (not kept: %v)", cause, err)
		} else {
			cause = fmt.Errorf("%w (kept in %s)", cause, file)
		}
		skipped = append(skipped, cause)
	}
	if err := s.replay(quarantine); err != nil {
		return nil, skipped, err
	}
	if s.records > stateLogCompactMin && s.records > stateLogCompactRatio*len(s.live) {
		if err := s.rewrite(); err != nil {
			return nil, skipped, fmt.Errorf("engine: compact %s: %w", mirrorStateTopic, err)
		}
	}
	return s, skipped, nil
}

// stateLogSkippedMax bounds the corrupt batches openStateLog lists (and
// keeps in quarantine/): past it they are skipped and counted as one.
const stateLogSkippedMax = 64

// quarantineDir is the data directory's folder of internal records that
// could not be read, kept raw for the operator.
const quarantineDir = "quarantine"

// quarantineBatch keeps a batch of __mirror_state that could not be
// replayed in quarantine/__mirror_state-0/<base offset>.batch.
func quarantineBatch(fs vfs.FS, dataDir string, b rb.Batch) (string, error) {
	dir := path.Join(dataDir, quarantineDir, stateLogTP().String())
	if err := fs.MkdirAll(dir); err != nil {
		return "", err
	}
	name := fmt.Sprintf("%d.batch", b.BaseOffset())
	if err := logstore.WriteFileAtomic(fs, dir, name, b); err != nil {
		return "", err
	}
	return path.Join(dir, name), nil
}

// replay reads every record from the log start into live. A batch that
// cannot be replayed whole goes to quarantine (its readable records
// before the bad one are applied, as they were written). (WalkBatches
// gives header views only; the records are read with ReadBytes.)
func (s *stateLog) replay(quarantine func(rb.Batch, error)) error {
	end := s.log.LogEndOffset()
	var buf []byte
	for offset := s.log.LogStartOffset(); offset < end; {
		var err error
		if buf, err = s.log.ReadBytes(buf[:0], offset, 1<<20, end, true); err != nil {
			return fmt.Errorf("engine: read %s at offset %d: %w", mirrorStateTopic, offset, err)
		}
		if len(buf) == 0 {
			break
		}
		it := rb.NewIter(buf, true)
		for it.Next() {
			b := it.Batch()
			offset = b.NextOffset()
			if err := s.replayBatch(b); err != nil {
				quarantine(b, err)
			}
		}
		if err := it.Err(); err != nil {
			// The log store checked every batch's framing and CRC when it
			// recovered: a batch it cannot frame now is past finding.
			return fmt.Errorf("%w: %s at offset %d: %w", ErrMirrorStateCorrupt, mirrorStateTopic, offset, err)
		}
	}
	return nil
}

func (s *stateLog) replayBatch(b rb.Batch) error {
	if b.Control() {
		return nil
	}
	if b.Codec() != rb.CodecNone {
		return fmt.Errorf("%w: batch at offset %d is compressed (%v)", ErrMirrorStateCorrupt, b.BaseOffset(), b.Codec())
	}
	it := records.NewIter(b.Records())
	n := int32(0)
	for it.Next() {
		r := it.Record()
		offset := b.BaseOffset() + rb.Offset(r.OffsetDelta)
		n++
		s.records++
		if r.Value == nil { // a tombstone
			key, err := DecodeMirrorStateKey(r.Key)
			if err != nil {
				return fmt.Errorf("engine: %s offset %d: %w", mirrorStateTopic, offset, err)
			}
			delete(s.live, key)
			continue
		}
		key, value, err := DecodeMirrorStateRecord(r.Key, r.Value)
		if err != nil {
			return fmt.Errorf("engine: %s offset %d: %w", mirrorStateTopic, offset, err)
		}
		s.live[key] = value
	}
	if err := it.Err(); err != nil || n != b.RecordCount() {
		return fmt.Errorf("%w: %s batch at offset %d: %d of %d records readable: %v", ErrMirrorStateCorrupt, mirrorStateTopic, b.BaseOffset(), n, b.RecordCount(), it.Err())
	}
	return nil
}

// rewrite appends the live set in a new segment and moves the log start
// to it (compaction by rewrite; see stateLog).
func (s *stateLog) rewrite() error {
	if err := s.log.Roll(); err != nil {
		return err
	}
	start := s.log.LogEndOffset()
	var batches []byte
	recs := make([]rb.Record, 0, stateLogBatchRecords)
	flush := func() {
		if len(recs) > 0 {
			batches = rb.Append(batches, rb.Spec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: time.Now().UnixMilli(), Records: recs})
			recs = recs[:0]
		}
	}
	for key, value := range s.live {
		k, v := EncodeMirrorStateRecord(key, value)
		recs = append(recs, rb.Record{Key: k, Value: v})
		if len(recs) == stateLogBatchRecords {
			flush()
		}
	}
	flush()
	if len(batches) > 0 {
		if _, err := s.log.AppendAssign(batches, max(s.log.LatestEpoch(), 0)); err != nil {
			return err
		}
		if err := s.log.Flush(); err != nil {
			return err
		}
	}
	s.log.SetHighWatermark(s.log.LogEndOffset())
	if err := s.log.AdvanceLogStart(start); err != nil {
		return err
	}
	s.records = len(s.live)
	return nil
}

// get returns the stored value of key.
func (s *stateLog) get(key MirrorStateKey) (mirrorstate.Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.live[key]
	return v, ok
}

// put appends value for key and syncs it. A value whose state epoch is
// not above the stored one is refused (fencing).
func (s *stateLog) put(key MirrorStateKey, value mirrorstate.Record) error {
	return s.putAll([]stateEntry{{key, value}})
}

// stateEntry is one record of a putAll.
type stateEntry struct {
	key   MirrorStateKey
	value mirrorstate.Record
}

// putAll appends the entries in batches of at most stateLogBatchRecords
// records, all in one append up to stateLogAppendBytes, and syncs once (a group commit: a stop of many partitions costs
// one sync per step, not one per partition). Every entry is checked
// (valid, keys distinct, not fenced) before any is written. After an I/O
// error part of them may be in the log (replayed at open) but none is
// live: the caller takes the write as failed and retries it.
func (s *stateLog) putAll(entries []stateEntry) error {
	if err := checkStateEntries(entries); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		if stored, ok := s.live[e.key]; ok && e.value.StateEpoch <= stored.StateEpoch {
			return fmt.Errorf("engine: %s: %s %s-%d: state epoch %d fenced by the stored %d", mirrorStateTopic,
				e.key.Mirror, e.key.TopicID, e.key.Partition, e.value.StateEpoch, stored.StateEpoch)
		}
	}
	if s.log == nil {
		log, err := s.logs.CreateInternalLog(mirrorStateTopic, s.cfg)
		if err != nil {
			return fmt.Errorf("engine: create %s: %w", mirrorStateTopic, err)
		}
		s.log = log
	}
	// The batches go out in as few appends as fit stateLogAppendBytes
	// (with FlushEveryAppend, a sync each): one for a stop of 10,000
	// partitions.
	s.scratch = s.scratch[:0]
	for rest := entries; len(rest) > 0; { // bounded: each pass takes up to stateLogBatchRecords
		chunk := rest[:min(len(rest), stateLogBatchRecords)]
		rest = rest[len(chunk):]
		recs := make([]rb.Record, 0, len(chunk))
		for _, e := range chunk {
			k, v := EncodeMirrorStateRecord(e.key, e.value)
			recs = append(recs, rb.Record{Key: k, Value: v})
		}
		s.scratch = rb.Append(s.scratch, rb.Spec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
			BaseTimestamp: time.Now().UnixMilli(), Records: recs})
		if len(rest) > 0 && int64(len(s.scratch)) < min(stateLogAppendBytes, s.cfg.SegmentBytes/2) {
			continue
		}
		if _, err := s.log.AppendAssign(s.scratch, max(s.log.LatestEpoch(), 0)); err != nil {
			return fmt.Errorf("engine: %s: %w", mirrorStateTopic, err)
		}
		s.scratch = s.scratch[:0]
	}
	if err := s.log.Flush(); err != nil { // a no-op after FlushEveryAppend
		return fmt.Errorf("engine: %s: %w", mirrorStateTopic, err)
	}
	s.log.SetHighWatermark(s.log.LogEndOffset())
	for _, e := range entries {
		s.live[e.key] = e.value
	}
	s.records += len(entries)
	return nil
}

// checkStateEntries checks the records of one write: each valid, no key
// twice.
func checkStateEntries(entries []stateEntry) error {
	seen := make(map[MirrorStateKey]bool, len(entries))
	for _, e := range entries {
		if err := errors.Join(e.key.validate(), validateMirrorStateValue(e.value)); err != nil {
			return fmt.Errorf("engine: %s: refusing an invalid record: %w", mirrorStateTopic, err)
		}
		if seen[e.key] {
			return fmt.Errorf("engine: %s: %s %s-%d twice in one write", mirrorStateTopic, e.key.Mirror, e.key.TopicID, e.key.Partition)
		}
		seen[e.key] = true
	}
	return nil
}

// stoppedLME is a last mirror epoch a stop stored.
type stoppedLME struct {
	epoch  rb.Epoch
	offset rb.Offset
}

// stoppedEpochs returns, by topic ID and partition (Mirror empty in the
// key), the greatest last mirror epoch of the STOPPED records of every
// mirror.
func (s *stateLog) stoppedEpochs() map[MirrorStateKey]stoppedLME {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[MirrorStateKey]stoppedLME{}
	for key, v := range s.live {
		addStopped(out, key, v)
	}
	return out
}

// addStopped keeps in out, by topic ID and partition, the greater of its
// last mirror epoch and v's if v is a STOPPED record.
func addStopped(out map[MirrorStateKey]stoppedLME, key MirrorStateKey, v mirrorstate.Record) {
	if v.State != mirrorstate.Stopped || v.LastMirrorOffset < 0 {
		return
	}
	k := MirrorStateKey{TopicID: key.TopicID, Partition: key.Partition}
	lme, seen := out[k]
	if !seen || v.LastMirrorEpoch > lme.epoch || v.LastMirrorEpoch == lme.epoch && v.LastMirrorOffset > lme.offset {
		out[k] = stoppedLME{v.LastMirrorEpoch, v.LastMirrorOffset}
	}
}
