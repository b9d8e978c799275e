package broker

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mirrord/mirrord/logstore"
)

// The coordinator's durable state, and what the coordinator does with it
// at open and on each reaper tick.
//
// One file per transactional ID, <data dir>/transactions/<sha256 of the
// ID in hex>, replaced with logstore.WriteFileAtomic at each transition:
//
//	1                               format version (0: no next.producer.id)
//	transactional.id "<Go-quoted>"
//	producer.id <n>
//	last.producer.id <n>
//	producer.epoch <n>
//	last.producer.epoch <n>
//	timeout.ms <n>
//	state <Empty|Ongoing|PrepareCommit|PrepareAbort|CompleteCommit|CompleteAbort>
//	start.ms <n>
//	update.ms <n>
//	next.producer.id <n>            -1 but in a Prepare* whose epoch was exhausted
//	mirror "<Go-quoted>"            the mirror it was copied from, "" if local
//	mirror.open <true|false>        the source had a transaction open
//	partition <topic> <index>       zero or more, sorted
//
// Cost: two fsyncs (file and directory) per transition, four transitions
// per transaction, plus one fdatasync per partition for its marker.

var errTxnFile = errors.New("broker: corrupt transaction state file")

func encodeTxnRecord(m *txnRecord) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "1\ntransactional.id %s\nproducer.id %d\nlast.producer.id %d\nproducer.epoch %d\nlast.producer.epoch %d\n",
		strconv.Quote(m.id), m.producerID, m.lastProducerID, m.epoch, m.lastEpoch)
	fmt.Fprintf(&b, "timeout.ms %d\nstate %v\nstart.ms %d\nupdate.ms %d\nnext.producer.id %d\nmirror %s\nmirror.open %t\n",
		m.timeoutMillis, m.state, m.startMillis, m.updateMillis, m.nextProducerID, strconv.Quote(m.mirror), m.sourceOpen)
	for _, tp := range m.partitions {
		fmt.Fprintf(&b, "partition %s %d\n", tp.Topic, tp.Partition)
	}
	return b.Bytes()
}

// decodeTxnRecord parses a state file, checking the invariants of
// txnRecord; errors wrap errTxnFile.
func decodeTxnRecord(data []byte) (*txnRecord, error) {
	lines := strings.Split(string(data), "\n")
	fieldCount := map[string]int{"0": 9, "1": 12}[lines[0]]
	if fieldCount == 0 || len(lines) < fieldCount+2 || lines[len(lines)-1] != "" {
		return nil, fmt.Errorf("%w: want version 0 (nine fields) or 1 (twelve), one a line", errTxnFile)
	}
	m := &txnRecord{nextProducerID: -1}
	fields := lines[1 : fieldCount+1]
	value := func(i int, key string) string {
		v, ok := strings.CutPrefix(fields[i], key+" ")
		if !ok {
			return ""
		}
		return v
	}
	var err error
	if m.id, err = strconv.Unquote(value(0, "transactional.id")); err != nil || m.id == "" {
		return nil, fmt.Errorf("%w: line 2: transactional.id", errTxnFile)
	}
	integers := []struct {
		key  string
		bits int
		set  func(int64)
	}{
		{"producer.id", 64, func(n int64) { m.producerID = n }},
		{"last.producer.id", 64, func(n int64) { m.lastProducerID = n }},
		{"producer.epoch", 16, func(n int64) { m.epoch = int16(n) }},
		{"last.producer.epoch", 16, func(n int64) { m.lastEpoch = int16(n) }},
		{"timeout.ms", 32, func(n int64) { m.timeoutMillis = int32(n) }},
	}
	for i, field := range integers {
		n, err := strconv.ParseInt(value(i+1, field.key), 10, field.bits)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %s: %w", errTxnFile, i+3, field.key, err)
		}
		field.set(n)
	}
	state := value(6, "state")
	m.state = -1
	for s, name := range txnStateNames {
		if name == state {
			m.state = txnState(s)
		}
	}
	if m.state < 0 {
		return nil, fmt.Errorf("%w: line 8: state %q", errTxnFile, state)
	}
	if m.startMillis, err = strconv.ParseInt(value(7, "start.ms"), 10, 64); err != nil {
		return nil, fmt.Errorf("%w: line 9: start.ms: %w", errTxnFile, err)
	}
	if m.updateMillis, err = strconv.ParseInt(value(8, "update.ms"), 10, 64); err != nil {
		return nil, fmt.Errorf("%w: line 10: update.ms: %w", errTxnFile, err)
	}
	if fieldCount == 12 {
		if m.nextProducerID, err = strconv.ParseInt(value(9, "next.producer.id"), 10, 64); err != nil {
			return nil, fmt.Errorf("%w: line 11: next.producer.id: %w", errTxnFile, err)
		}
		if m.mirror, err = strconv.Unquote(value(10, "mirror")); err != nil {
			return nil, fmt.Errorf("%w: line 12: mirror", errTxnFile)
		}
		if m.sourceOpen, err = strconv.ParseBool(value(11, "mirror.open")); err != nil || m.sourceOpen && m.mirror == "" {
			return nil, fmt.Errorf("%w: line 13: mirror.open %q of mirror %q", errTxnFile, value(11, "mirror.open"), m.mirror)
		}
	}
	return m, decodePartitions(m, lines[fieldCount+1:len(lines)-1], fieldCount+2)
}

func decodePartitions(m *txnRecord, lines []string, firstLine int) error {
	for i, line := range lines {
		rest, ok := strings.CutPrefix(line, "partition ")
		topic, index, ok2 := strings.Cut(rest, " ")
		n, err := strconv.ParseInt(index, 10, 32)
		if !ok || !ok2 || err != nil || n < 0 || logstore.ValidateTopicName(topic) != nil {
			return fmt.Errorf("%w: line %d: %q", errTxnFile, i+firstLine, line)
		}
		tp := logstore.TopicPartition{Topic: topic, Partition: int32(n)}
		if len(m.partitions) > 0 && compareTopicPartitions(m.partitions[len(m.partitions)-1], tp) >= 0 {
			return fmt.Errorf("%w: line %d: partitions out of order", errTxnFile, i+firstLine)
		}
		m.partitions = append(m.partitions, tp)
	}
	active := m.state == txnOngoing || m.state.prepared()
	switch {
	case m.producerID < 0 || m.epoch < 0 || m.timeoutMillis <= 0:
		return fmt.Errorf("%w: producer ID %d, epoch %d, timeout %d ms", errTxnFile, m.producerID, m.epoch, m.timeoutMillis)
	case m.nextProducerID >= 0 && !m.state.prepared():
		return fmt.Errorf("%w: state %v with next producer ID %d", errTxnFile, m.state, m.nextProducerID)
	case (m.state == txnOngoing) != (len(m.partitions) > 0) && !m.state.prepared() || active && m.startMillis < 0 ||
		m.state == txnEmpty && m.startMillis >= 0:
		return fmt.Errorf("%w: state %v with %d partitions and start %d", errTxnFile, m.state, len(m.partitions), m.startMillis)
	}
	return nil
}

// recover rebuilds every partition's producer state from its log (and
// moves its high watermark to its log end), then
// finishes what a crash interrupted: Prepare* transactions are completed,
// Ongoing ones past their timeout aborted, the others' partitions told
// again that the producer may write (verification), and open
// transactions that no Ongoing transaction accounts for are aborted.
func (t *transactions) recover() error {
	now := t.now()
	partitions := partitionsOf(t.node)
	for _, p := range partitions {
		p.mu.Lock()
		report, err := p.loadProducerState(now.Add(-t.cfg.ProducerIDExpiration).UnixMilli())
		// A writable partition has one replica: its high watermark is its
		// log end, also after a crash (the checkpoint may be behind).
		p.log.SetHighWatermark(p.log.LogEndOffset())
		p.mu.Unlock()
		if err != nil {
			// Only this partition: it goes offline, the node opens.
			t.log.Error("partition offline: its producer state cannot be replayed from its log", "topic", p.tp.Topic, "partition", p.tp.Partition, "error", err)
			p.takeOffline(err)
			continue
		}
		if report.inconsistent != nil {
			t.log.Warn("producer state replayed from an inconsistent log", "topic", p.tp.Topic, "partition", p.tp.Partition, "error", report.inconsistent)
		}
	}
	owners := map[int64]*txnMetadata{} // producer ID -> its Ongoing transaction
	for _, id := range t.sortedIDs() {
		m := t.lookup(id)
		if m == nil {
			continue
		}
		var err error
		switch {
		case m.state.prepared():
			err = t.complete(m)
		case t.expired(m, now):
			err = t.fenceAndAbort(m)
		case m.state == txnOngoing:
			t.reverify(m)
		}
		if m.state == txnOngoing || m.state.prepared() {
			owners[m.producerID] = m // a Prepare* the reaper will finish
		}
		m.mu.Unlock()
		if err != nil {
			t.log.Warn("transaction not completed at open; the reaper retries", "transactional.id", id, "error", err)
		}
	}
	return t.abortOrphans(online(partitions), owners)
}

// expired reports whether m's transaction has run past its timeout (as
// Kafka's timedOutTransactions: strictly).
func (t *transactions) expired(m *txnMetadata, now time.Time) bool {
	return m.state == txnOngoing && now.UnixMilli() > m.startMillis+int64(m.timeoutMillis)
}

// reverify lets m's producer write to its partitions again after a
// restart.
func (t *transactions) reverify(m *txnMetadata) {
	for _, tp := range m.partitions {
		if p, err := t.node.LocalPartition(tp.Topic, tp.Partition); err == nil {
			p.addToTransaction(m.producerID, m.epoch, m.id)
		}
	}
}

// abortOrphans writes an ABORT marker, at the producer's own epoch, for
// every open transaction in a partition that no Ongoing transaction
// accounts for: its coordinator state was lost or has moved on.
func (t *transactions) abortOrphans(partitions []*Partition, owners map[int64]*txnMetadata) error {
	now := t.nowMillis()
	for _, p := range partitions {
		if p.isReadOnly() {
			continue // its transactions are the source's: their markers come from there
		}
		p.mu.Lock()
		type orphan struct {
			producerID int64
			epoch      int16
		}
		var orphans []orphan // bounded by the partition's producers
		for id := range p.producers.ongoing {
			if m := owners[id]; m == nil || !m.hasPartition(p.tp) {
				orphans = append(orphans, orphan{id, p.producers.entry(id).epoch})
			}
		}
		p.mu.Unlock()
		sort.Slice(orphans, func(i, j int) bool { return orphans[i].producerID < orphans[j].producerID })
		for _, o := range orphans {
			t.log.Warn("aborting a transaction without coordinator state", "topic", p.tp.Topic, "partition", p.tp.Partition, "producer.id", o.producerID)
			if _, err := p.writeMarker(o.producerID, o.epoch, false, now); err != nil {
				return err
			}
		}
		if len(orphans) > 0 {
			if err := p.log.Flush(); err != nil {
				return fmt.Errorf("broker: %s: flush markers: %w", p.tp, err)
			}
		}
	}
	return nil
}

// run is the reaper: every cfg.AbortTimedOutInterval it ends transactions past their
// timeout, retries unfinished markers and expires idle transactional and
// producer IDs (Kafka's transaction-abort and expiration tasks).
func (t *transactions) run() {
	defer close(t.done)
	ticker := time.NewTicker(t.cfg.AbortTimedOutInterval)
	defer ticker.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-ticker.C:
			t.reap()
		}
	}
}

// reapResult counts what one reaper tick did.
type reapResult struct {
	completed, aborted, expiredIDs, expiredProducers int
}

// reap is one reaper tick, at t.now(): at most reapTransactionsMax
// transactions completed, aborted or expired, and the producers of at
// most reapPartitionsMax partitions expired.
func (t *transactions) reap() reapResult {
	var result reapResult
	now := t.now()
	work := 0
	for _, c := range t.reapCandidates(now) {
		m := c.m
		if work == reapTransactionsMax {
			break
		}
		if !m.mu.TryLock() {
			continue // busy: next tick
		}
		if m.removed {
			m.mu.Unlock()
			continue
		}
		var err error
		switch {
		case m.state.prepared():
			work++
			if err = t.complete(m); err == nil {
				result.completed++
			}
		case t.expired(m, now):
			work++
			t.log.Info("aborting a transaction past its timeout", "transactional.id", m.id, "timeout.ms", m.timeoutMillis)
			if err = t.fenceAndAbort(m); err == nil {
				result.aborted++
			}
		case t.idle(m, now):
			work++
			if err = t.expireID(m); err == nil {
				result.expiredIDs++
			}
		}
		m.mu.Unlock()
		if err != nil {
			t.log.Warn("transaction reaper", "transactional.id", c.id, "error", err)
		}
	}
	result.expiredProducers = t.expireProducers(now)
	return result
}

// reapCandidate is a transaction reap may act on, with its ID (the map's
// key: m's fields may be read only under m.mu).
type reapCandidate struct {
	id string
	m  *txnMetadata
}

// reapCandidates lists, in ID order, the transactions reap may act on.
func (t *transactions) reapCandidates(now time.Time) []reapCandidate {
	t.mu.Lock()
	defer t.mu.Unlock()
	var found []reapCandidate
	for id, m := range t.byID {
		if !m.mu.TryLock() {
			found = append(found, reapCandidate{id, m}) // busy now; reap tries again
			continue
		}
		if m.state.prepared() || t.expired(m, now) || t.idle(m, now) {
			found = append(found, reapCandidate{id, m})
		}
		m.mu.Unlock()
	}
	sort.Slice(found, func(i, j int) bool { return found[i].id < found[j].id })
	return found
}

// idle reports whether m is a transactional ID without a transaction,
// unused for cfg.TransactionalIDExpiration.
func (t *transactions) idle(m *txnMetadata, now time.Time) bool {
	return (m.state == txnEmpty || m.state == txnCompleteCommit || m.state == txnCompleteAbort) &&
		now.UnixMilli() >= m.updateMillis+t.cfg.TransactionalIDExpiration.Milliseconds()
}

// expireID forgets m (locked) and deletes its file.
func (t *transactions) expireID(m *txnMetadata) error {
	name := path.Join(t.dir, txnFileName(m.id))
	if err := t.fs.Remove(name); err != nil {
		return fmt.Errorf("broker: expire transactional ID %q: %w", m.id, err)
	}
	if err := t.fs.SyncDir(t.dir); err != nil {
		return fmt.Errorf("broker: expire transactional ID %q: %w", m.id, err)
	}
	t.forget(m)
	return nil
}

// expireProducers drops idle producers in the next reapPartitionsMax
// partitions, round robin.
func (t *transactions) expireProducers(now time.Time) int {
	partitions := partitionsOf(t.node)
	if len(partitions) == 0 {
		return 0
	}
	t.mu.Lock()
	start := t.sweepCursor % len(partitions)
	t.sweepCursor = start + min(reapPartitionsMax, len(partitions))
	t.mu.Unlock()
	cutoff := now.Add(-t.cfg.ProducerIDExpiration).UnixMilli()
	expired := 0
	for i := range min(reapPartitionsMax, len(partitions)) {
		p := partitions[(start+i)%len(partitions)]
		p.mu.Lock()
		expired += p.producers.expire(cutoff)
		p.mu.Unlock()
	}
	return expired
}
