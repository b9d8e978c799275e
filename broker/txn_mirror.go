package broker

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/mirrord/mirrord/netio"
)

// Transactional IDs copied from a mirror's source, so that a
// transactional producer moved here after a failover goes on without a
// restart (issue 16; KIP-1279 copies topics, groups and ACLs, and this
// node copies the transaction coordinator's state too):
//
//   - While the mirror runs, SyncMirroredTransactions keeps, per source
//     transactional ID, the source's producer ID and epoch as this
//     coordinator's state (Empty or Complete*, tagged with the mirror),
//     and whether the source has a transaction open. The copy never moves
//     an ID back: a producer ID it already holds at a higher epoch keeps
//     it, and an ID this node's own clients use (untagged: any transition
//     a client makes unties it from the mirror) is left alone.
//   - The stop (failover) fences, before it aborts the source's open
//     transactions in a partition (Partition.AbortOpenTransactions), every
//     copied ID of the mirror whose source had a transaction open, or
//     whose producer has one open in that partition: its state becomes
//     CompleteAbort at the epoch after that transaction's, with the
//     epoch before kept as the last, as Kafka leaves a transaction its
//     coordinator aborted on timeout. The producer learns it is fenced at
//     its next write (INVALID_PRODUCER_EPOCH), aborts (an EndTxn v5 at the
//     old epoch is answered as a retry, with the new epoch; a KIP-360
//     InitProducerID with the old epoch gets the new one) and goes on; its
//     transaction, of which the source's part was aborted here, is never
//     half committed. A producer idle at the failover goes on at once.
//   - Producer IDs this node hands out stay above every copied one and
//     every one in a mirrored batch (producerIDs.reserveAbove), so a
//     producer moved here never shares its ID with a new one.
//
// A transaction the source opened after the last copy, with no record
// mirrored yet, is not known to be open here: its producer may commit
// here what it writes after the failover, and the source's part, lost with
// the source, is missing from it (the mirror's lag bounds the window, as it
// bounds every record acknowledged by the source and not yet mirrored).

// MirroredTransaction is one transactional ID of a mirror's source.
type MirroredTransaction struct {
	TransactionalID string
	ProducerID      int64
	Epoch           int16
	TimeoutMillis   int32
	// Open is the source's transaction state: Ongoing, Prepare* or
	// PrepareEpochFence (a transaction whose outcome may not be
	// mirrored).
	Open bool
	// Aborted is the source's CompleteAbort (else Empty or CompleteCommit).
	Aborted bool
}

// SyncMirroredTransactions copies the source's transactional IDs for
// mirror and returns how many of them this node now holds as the source
// has them.
func (n *Node) SyncMirroredTransactions(mirror string, txns []MirroredTransaction) (int, error) {
	return n.txns.syncMirrored(mirror, txns)
}

func (t *transactions) syncMirrored(mirror string, txns []MirroredTransaction) (int, error) {
	sort.Slice(txns, func(i, j int) bool { return txns[i].TransactionalID < txns[j].TransactionalID })
	synced := 0
	for _, source := range txns {
		if source.TransactionalID == "" || source.ProducerID < 0 || source.Epoch < 0 || source.TimeoutMillis <= 0 {
			continue // never initialised on the source, or nothing to go on with
		}
		if err := t.ids.reserveAbove(source.ProducerID); err != nil {
			return synced, err
		}
		copied, err := t.syncOne(mirror, source)
		if err != nil {
			return synced, err
		}
		if copied {
			synced++
		}
	}
	return synced, nil
}

// syncOne copies one source transactional ID, and reports whether this
// node holds it as the source has it.
func (t *transactions) syncOne(mirror string, source MirroredTransaction) (bool, error) {
	m := t.lookup(source.TransactionalID)
	fresh := m == nil
	if fresh {
		created := &txnMetadata{txnRecord: txnRecord{id: source.TransactionalID, producerID: -1, lastProducerID: -1, epoch: -1,
			lastEpoch: -1, state: txnEmpty, startMillis: -1, nextProducerID: -1, mirror: mirror}}
		created.mu.Lock() // before it is in the map: no one sees it half made
		t.mu.Lock()
		if t.byID[source.TransactionalID] == nil {
			t.byID[source.TransactionalID] = created
			m = created
		}
		t.mu.Unlock()
		if m == nil {
			return false, nil // a client's InitProducerID came first: it is theirs
		}
	}
	defer m.mu.Unlock()
	switch {
	case m.mirror == "" && !fresh:
		return false, nil // this node's clients use it
	case m.producerID == source.ProducerID && m.epoch > source.Epoch:
		return false, nil // fenced here, or the source lags: never back
	case m.producerID == source.ProducerID && m.epoch == source.Epoch && m.sourceOpen == source.Open &&
		m.timeoutMillis == source.TimeoutMillis && m.state == sourceState(source) && m.mirror == mirror:
		return true, nil
	}
	next := m.persisted()
	next.producerID, next.epoch, next.timeoutMillis, next.state = source.ProducerID, source.Epoch, source.TimeoutMillis, sourceState(source)
	next.lastProducerID, next.lastEpoch, next.partitions, next.startMillis, next.nextProducerID = -1, -1, nil, -1, -1
	next.updateMillis, next.mirror, next.sourceOpen = t.nowMillis(), mirror, source.Open
	if err := t.persist(&next); err != nil {
		if fresh {
			t.forget(m)
		}
		return false, err
	}
	m.apply(&next)
	return true, nil
}

// sourceState is the state a copied ID takes: its source's last outcome
// (an open transaction is fenced at the stop, not here).
func sourceState(source MirroredTransaction) txnState {
	if source.Aborted {
		return txnCompleteAbort
	}
	return txnCompleteCommit
}

// fenceMirrored fences, for a stop of mirror, the copied IDs whose source
// had a transaction open, and those whose producer has one open at an
// epoch in opens (producer ID -> epoch: a partition being stopped). It
// is idempotent: a fenced ID is past the epoch it was fenced for.
func (t *transactions) fenceMirrored(mirror string, opens map[int64]int16) error {
	for _, id := range t.sortedIDs() {
		m := t.lookup(id)
		if m == nil {
			continue
		}
		err := t.fenceOne(m, mirror, opens)
		m.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

func (t *transactions) fenceOne(m *txnMetadata, mirror string, opens map[int64]int16) error {
	if m.mirror != mirror || m.state.prepared() || m.state == txnOngoing {
		return nil // another mirror's, or used by a client here since
	}
	openEpoch, open := opens[m.producerID]
	switch {
	case open && openEpoch >= m.epoch:
	case m.sourceOpen:
		openEpoch = m.epoch
	default:
		return nil
	}
	if openEpoch >= maxProducerEpoch {
		return fmt.Errorf("broker: fence transactional ID %q of mirror %s: epoch %d leaves none to fence with", m.id, mirror, openEpoch)
	}
	next := m.persisted()
	next.state, next.epoch, next.lastEpoch, next.updateMillis, next.mirror = txnCompleteAbort, openEpoch+1, openEpoch, t.nowMillis(), mirror
	if err := t.persist(&next); err != nil {
		return err
	}
	m.apply(&next)
	t.log.Info("fenced a transactional producer of the source at the stop", "mirror", mirror, "transactional.id", m.id,
		"producer.id", m.producerID, "epoch", m.epoch)
	return nil
}

// maxProducerEpoch is the highest producer epoch (Short.MAX_VALUE).
const maxProducerEpoch = 1<<15 - 1

// TransactionStates lists the coordinator's transactional IDs (ids, when
// not nil, selects some), by ID: DescribeTransactions and
// ListTransactions, and so a mirror of this node copies them.
func (t *transactions) TransactionStates(_ context.Context, ids []string) []netio.TransactionState {
	if ids == nil {
		ids = t.sortedIDs()
	} else {
		ids = slices.Clone(ids)
		slices.Sort(ids)
		ids = slices.Compact(ids)
	}
	states := make([]netio.TransactionState, 0, len(ids))
	for _, id := range ids {
		m := t.lookup(id)
		if m == nil {
			continue
		}
		if m.epoch >= 0 { // an ID mid-creation is not there yet
			states = append(states, m.describe())
		}
		m.mu.Unlock()
	}
	return states
}

// describe is m (locked) as DescribeTransactions answers it.
func (m *txnMetadata) describe() netio.TransactionState {
	s := netio.TransactionState{TransactionalID: m.id, ProducerID: m.producerID, ProducerEpoch: m.epoch, State: m.state.String(),
		TimeoutMillis: m.timeoutMillis, StartMillis: m.startMillis}
	for _, tp := range m.partitions { // sorted by topic, then partition
		if n := len(s.Topics); n == 0 || s.Topics[n-1].Topic != tp.Topic {
			s.Topics = append(s.Topics, netio.TransactionTopic{Topic: tp.Topic})
		}
		last := &s.Topics[len(s.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	return s
}
