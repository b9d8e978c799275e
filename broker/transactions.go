package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mirrord/mirrord/broker/group"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The transaction coordinator, as Kafka's TransactionCoordinator, for a
// node that leads every partition and coordinates every transactional ID
// (its coordinator epoch is always 0).
//
// Per transactional ID a txnMetadata walks Kafka's states:
//
//	Empty, CompleteCommit, CompleteAbort --AddPartitionsToTxn, or a write of version 2--> Ongoing
//	Ongoing --EndTxn--> PrepareCommit | PrepareAbort --markers--> CompleteCommit | CompleteAbort
//	Ongoing --InitProducerID, or its timeout (reaper)--> epoch bump, PrepareAbort (fence)
//	Empty, Complete* --InitProducerID--> Empty with the epoch bumped (or a new producer ID)
//	Empty, Complete* --EndTxn v5 abort--> PrepareAbort with no partition
//
// Transaction version 2 (KIP-890 part 2: Produce v12+, EndTxn v5+,
// TxnOffsetCommit v5+) adds a partition when the producer first writes to
// it (verifyTransaction) and bumps the epoch at every EndTxn, writing the
// markers at the new epoch. Which version applies is the request's, as in
// Kafka: one coordinator serves both.
//
// Each transition is persisted before it takes effect (file format in
// txn_state.go): a crash leaves the old state or the new. Markers go to
// the partitions after Prepare* is durable and are flushed before
// Complete* is written, so a completed transaction's markers survive any
// crash. At open, Prepare* transactions are completed (markers already in
// a partition are skipped, see producerStates.needsMarker), Ongoing ones
// past their timeout are aborted, and open transactions in a partition
// that no Ongoing transaction accounts for are aborted.
//
// Locks: transactions.mu guards the map only. Each txnMetadata's mu is
// held across its persistence and marker writes. Order: txnMetadata.mu,
// then transactions.mu or a partition's mu; transactions.mu is never held
// while waiting for a txnMetadata.mu (the reaper uses TryLock).
type transactions struct {
	node *Node
	ids  *producerIDs
	fs   vfs.FS
	dir  string // <data dir>/transactions
	log  *slog.Logger
	now  func() time.Time
	cfg  TransactionConfig // with Kafka's defaults filled in

	mu   sync.Mutex
	byID map[string]*txnMetadata // bounded by the IDs used within cfg.TransactionalIDExpiration
	// sweepCursor is the next partition index the reaper expires
	// producers in (round robin).
	sweepCursor int

	// groups is the group coordinator told of markers written to
	// __consumer_offsets (group_txn.go); nil until start.
	groups    atomic.Pointer[group.Coordinator]
	started   atomic.Bool
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

const (
	// reapTransactionsMax bounds the transactions one reaper tick ends or
	// expires; reapPartitionsMax the partitions whose producers it
	// expires (round robin).
	reapTransactionsMax = 64
	reapPartitionsMax   = 64
	// transactionsDirName is the coordinator's directory in the data dir
	// (no '-': it is never taken for a partition directory).
	transactionsDirName = "transactions"
)

// txnState is a transaction state, named as in Kafka.
type txnState int8

const (
	txnEmpty txnState = iota
	txnOngoing
	txnPrepareCommit
	txnPrepareAbort
	txnCompleteCommit
	txnCompleteAbort
)

var txnStateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}

func (s txnState) String() string {
	if int(s) < len(txnStateNames) {
		return txnStateNames[s]
	}
	return fmt.Sprintf("txnState(%d)", int8(s))
}

func (s txnState) prepared() bool { return s == txnPrepareCommit || s == txnPrepareAbort }

// txnMetadata is one transactional ID's coordinator state (Kafka's
// TransactionMetadata): its lock and its persisted txnRecord.
type txnMetadata struct {
	mu      sync.Mutex
	removed bool // expired and out of the map: look it up again
	txnRecord
}

// txnRecord is what is persisted of a transactional ID. Invariants:
// partitions is sorted, non-empty in Ongoing, empty in Empty and
// Complete* (a Prepare* may have none: a transaction version 2 abort
// without a transaction); startMillis >= 0 in Ongoing and Prepare*, -1
// in Empty, and Complete* keeps the start of the transaction it ended
// (Kafka's prepareComplete: DescribeTransactions answers it).
type txnRecord struct {
	id             string
	producerID     int64
	lastProducerID int64
	epoch          int16 // -1 until the first InitProducerID is persisted
	lastEpoch      int16
	timeoutMillis  int32
	state          txnState
	partitions     []logstore.TopicPartition
	startMillis    int64 // when the transaction began (first AddPartitionsToTxn), or -1
	updateMillis   int64 // last transition, for expiration
	// nextProducerID is the producer ID a Prepare* of transaction
	// version 2 moves to at Complete*, its epoch exhausted; else -1.
	nextProducerID int64
	// mirror names the mirror whose source this state was copied from
	// (txn_mirror.go), "" for a transactional ID of this node's clients;
	// sourceOpen says the source had a transaction open at the last copy.
	mirror     string
	sourceOpen bool
}

// persisted is a copy of m's record, to prepare a transition.
// A transition makes the ID this node's: a copy from a mirror's source
// (txn_mirror.go) sets the mirror again, and the stop's fence keeps it.
func (m *txnMetadata) persisted() txnRecord {
	next := m.txnRecord
	next.partitions = slices.Clone(m.partitions)
	next.mirror, next.sourceOpen = "", false
	return next
}

// apply completes a transition whose new record is durable.
func (m *txnMetadata) apply(next *txnRecord) { m.txnRecord = *next }

func (m *txnMetadata) hasPartition(tp logstore.TopicPartition) bool {
	_, found := slices.BinarySearchFunc(m.partitions, tp, compareTopicPartitions)
	return found
}

func compareTopicPartitions(a, b logstore.TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

// epochExhausted is Kafka's TransactionMetadata.isEpochExhausted: the last
// epoch is kept so that a producer can always be fenced.
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// openTransactions loads the coordinator state, rebuilds every
// partition's producer state from its log, finishes what a crash
// interrupted, and starts the reaper (stopped by close).
func openTransactions(n *Node) (*transactions, error) {
	ids, err := openProducerIDs(n.cfg.FS, n.cfg.DataDir)
	if err != nil {
		return nil, err
	}
	t := &transactions{node: n, ids: ids, fs: n.cfg.FS, dir: path.Join(n.cfg.DataDir, transactionsDirName), log: n.log,
		now: n.cfg.Log.Now, cfg: n.cfg.Transactions.withDefaults(), byID: map[string]*txnMetadata{}}
	if t.now == nil {
		t.now = time.Now
	}
	if err := t.load(); err != nil {
		return nil, err
	}
	if err := t.recover(); err != nil {
		return nil, err
	}
	t.stop, t.done = make(chan struct{}), make(chan struct{})
	return t, nil
}

// start starts the reaper once the group coordinator, which it tells of
// the markers it writes to __consumer_offsets, is open.
func (t *transactions) start(groups *group.Coordinator) {
	t.groups.Store(groups)
	if t.started.CompareAndSwap(false, true) {
		go t.run()
	}
}

// close stops the reaper and waits for it; later calls do nothing.
func (t *transactions) close() {
	t.closeOnce.Do(func() {
		close(t.stop)
		if t.started.Load() {
			<-t.done
		}
	})
}

// load reads every transactional ID's state file.
func (t *transactions) load() error {
	if err := t.fs.MkdirAll(t.dir); err != nil {
		return fmt.Errorf("broker: %s: %w", t.dir, err)
	}
	if err := t.fs.SyncDir(t.node.cfg.DataDir); err != nil {
		return fmt.Errorf("broker: %s: %w", t.node.cfg.DataDir, err)
	}
	names, err := t.fs.List(t.dir)
	if err != nil {
		return fmt.Errorf("broker: %s: %w", t.dir, err)
	}
	for _, name := range names {
		full := path.Join(t.dir, name)
		if path.Ext(name) == ".tmp" { // a WriteFileAtomic a crash interrupted
			if err := t.fs.Remove(full); err != nil {
				return fmt.Errorf("broker: %w", err)
			}
			continue
		}
		data, ok, err := logstore.ReadFile(t.fs, full)
		if err != nil {
			return fmt.Errorf("broker: read %s: %w", full, err)
		}
		if !ok {
			continue
		}
		record, err := decodeTxnRecord(data)
		if err != nil {
			return fmt.Errorf("broker: %s: %w", full, err)
		}
		if txnFileName(record.id) != name {
			return fmt.Errorf("broker: %s: holds transactional ID %q, whose file is %s", full, record.id, txnFileName(record.id))
		}
		t.byID[record.id] = &txnMetadata{txnRecord: *record}
	}
	return nil
}

// txnFileName names a transactional ID's state file: IDs are any string,
// file names are not.
func txnFileName(transactionalID string) string {
	sum := sha256.Sum256([]byte(transactionalID))
	return hex.EncodeToString(sum[:])
}

// persist makes next the durable state of its transactional ID.
func (t *transactions) persist(next *txnRecord) error {
	if err := logstore.WriteFileAtomic(t.fs, t.dir, txnFileName(next.id), encodeTxnRecord(next)); err != nil {
		return fmt.Errorf("broker: persist transactional ID %q: %w", next.id, err)
	}
	return nil
}

func (t *transactions) nowMillis() int64 { return t.now().UnixMilli() }

// lookup returns the transactional ID's metadata, locked, or nil.
func (t *transactions) lookup(transactionalID string) *txnMetadata {
	for range 2 { // removed at most once between the map and the lock
		t.mu.Lock()
		m := t.byID[transactionalID]
		t.mu.Unlock()
		if m == nil {
			return nil
		}
		m.mu.Lock()
		if !m.removed {
			return m
		}
		m.mu.Unlock()
	}
	return nil
}

// lookupOrCreate returns the transactional ID's metadata, locked; a new
// one gets a producer ID, epoch -1 and state Empty, and stays in memory
// only until its first transition is persisted (forget removes it if that
// fails).
func (t *transactions) lookupOrCreate(transactionalID string, timeoutMillis int32) (*txnMetadata, bool, error) {
	if m := t.lookup(transactionalID); m != nil {
		return m, false, nil
	}
	id, err := t.ids.next()
	if err != nil {
		return nil, false, err
	}
	fresh := &txnMetadata{txnRecord: txnRecord{id: transactionalID, producerID: id, lastProducerID: -1, epoch: -1, lastEpoch: -1,
		timeoutMillis: timeoutMillis, state: txnEmpty, startMillis: -1, updateMillis: t.nowMillis(), nextProducerID: -1}}
	t.mu.Lock()
	m, raced := t.byID[transactionalID]
	if !raced {
		m = fresh
		t.byID[transactionalID] = m
	}
	t.mu.Unlock()
	m.mu.Lock()
	if m.removed {
		m.mu.Unlock()
		return nil, false, fmt.Errorf("%w: transactional ID %q expired meanwhile", kerr.ConcurrentTransactions, transactionalID)
	}
	return m, !raced, nil
}

// forget removes m (locked) from the map.
func (t *transactions) forget(m *txnMetadata) {
	m.removed = true
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[m.id] == m {
		delete(t.byID, m.id)
	}
}

// InitProducerID hands out a producer ID and epoch: a fresh ID for an
// idempotent producer; for a transactional ID, its producer ID with the
// epoch bumped, fencing older producers of the ID (Kafka's
// handleInitProducerId with KIP-360's expected ID and epoch). An ongoing
// transaction is aborted first and the client told CONCURRENT_TRANSACTIONS
// to retry.
func (t *transactions) InitProducerID(_ context.Context, transactionalID string, timeoutMillis int32, producerID int64, producerEpoch int16) (int64, int16, error) {
	if transactionalID == "" {
		id, err := t.ids.next()
		return id, 0, err
	}
	expected := producerID != -1 || producerEpoch != -1
	if timeoutMillis <= 0 || time.Duration(timeoutMillis)*time.Millisecond > t.cfg.MaxTimeout {
		return -1, -1, fmt.Errorf("%w: %d ms, at most %v", kerr.InvalidTransactionTimeout, timeoutMillis, t.cfg.MaxTimeout)
	}
	m, fresh, err := t.lookupOrCreate(transactionalID, timeoutMillis)
	if err != nil {
		return -1, -1, err
	}
	defer m.mu.Unlock()
	validID := m.epoch == noProducerEpoch || producerID == m.producerID ||
		producerID == m.lastProducerID && epochExhausted(producerEpoch)
	switch {
	case expected && !validID:
		return -1, -1, fmt.Errorf("%w: producer ID %d is not transactional ID %q's", kerr.ProducerFenced, producerID, transactionalID)
	case m.state.prepared():
		return -1, -1, fmt.Errorf("%w: transactional ID %q is completing a transaction", kerr.ConcurrentTransactions, transactionalID)
	case m.state == txnOngoing:
		if err := t.fenceAndAbort(m); err != nil {
			return -1, -1, err
		}
		return -1, -1, fmt.Errorf("%w: transactional ID %q had an ongoing transaction, aborted", kerr.ConcurrentTransactions, transactionalID)
	}
	next, err := t.nextEpoch(m, expected, producerEpoch, timeoutMillis)
	if err == nil {
		err = t.persist(&next)
	}
	if err != nil {
		if fresh {
			t.forget(m)
		}
		return -1, -1, err
	}
	m.apply(&next)
	return m.producerID, m.epoch, nil
}

// nextEpoch prepares InitProducerID's transition from Empty or Complete*
// (Kafka's prepareIncrementProducerEpoch and prepareProducerIdRotation).
func (t *transactions) nextEpoch(m *txnMetadata, expected bool, expectedEpoch int16, timeoutMillis int32) (txnRecord, error) {
	next := m.persisted()
	next.lastProducerID, next.state, next.partitions = m.producerID, txnEmpty, nil
	next.timeoutMillis, next.startMillis, next.updateMillis = timeoutMillis, -1, t.nowMillis()
	switch {
	case epochExhausted(m.epoch) && (!expected || expectedEpoch == m.epoch):
		id, err := t.ids.next()
		if err != nil {
			return next, err
		}
		next.producerID, next.epoch, next.lastEpoch = id, 0, noProducerEpoch
		if expected {
			next.lastEpoch = m.epoch
		}
	case !expected:
		next.epoch, next.lastEpoch = m.epoch+1, noProducerEpoch
	case m.epoch == noProducerEpoch || expectedEpoch == m.epoch:
		next.epoch, next.lastEpoch = m.epoch+1, m.epoch
	case expectedEpoch == m.lastEpoch:
		// A retry of an InitProducerID whose answer was lost: the same epoch.
	default:
		return next, fmt.Errorf("%w: epoch %d is neither the current %d nor the last %d", kerr.ProducerFenced, expectedEpoch, m.epoch, m.lastEpoch)
	}
	return next, nil
}

// AddPartitions adds partitions of topic to the producer's transaction,
// starting it (Kafka's handleAddPartitionsToTransaction). When one of
// them does not exist, none is added: the others answer
// OPERATION_NOT_ATTEMPTED, as Kafka.
func (t *transactions) AddPartitions(_ context.Context, transactionalID string, producerID int64, producerEpoch int16, topic string, partitions []int32) []error {
	errs, resolved, m := t.producerTransaction(transactionalID, producerID, producerEpoch, topic, partitions)
	if m == nil {
		return errs
	}
	defer m.mu.Unlock()
	return fill(errs, t.addLocked(m, resolved))
}

// VerifyPartitions answers, per partition, whether it is in the
// producer's ongoing transaction: nil, or TRANSACTION_ABORTABLE (Kafka's
// handleVerifyPartitionsInTransaction, AddPartitionsToTxn v4+ with
// VerifyOnly). The producer checks fail every partition alike.
func (t *transactions) VerifyPartitions(_ context.Context, transactionalID string, producerID int64, producerEpoch int16, topic string, partitions []int32) []error {
	errs, resolved, m := t.producerTransaction(transactionalID, producerID, producerEpoch, topic, partitions)
	if m == nil {
		return errs
	}
	defer m.mu.Unlock()
	for i, p := range resolved {
		if m.state != txnOngoing || !m.hasPartition(p.tp) {
			errs[i] = kerr.TransactionAbortable
		}
	}
	return errs
}

// producerTransaction resolves the partitions of an add or a verify and
// checks the producer: it returns the transactional ID's metadata,
// locked, or nil and every partition's error.
func (t *transactions) producerTransaction(transactionalID string, producerID int64, producerEpoch int16, topic string, partitions []int32) ([]error, []*Partition, *txnMetadata) {
	errs, resolved := t.resolvePartitions(transactionalID, topic, partitions)
	if resolved == nil {
		return errs, nil, nil
	}
	m := t.lookup(transactionalID)
	if m == nil {
		return fill(errs, kerr.InvalidProducerIDMapping), nil, nil
	}
	err := checkProducer(m, producerID, producerEpoch)
	if err == nil && m.state.prepared() {
		err = kerr.ConcurrentTransactions
	}
	if err != nil {
		m.mu.Unlock()
		return fill(errs, err), nil, nil
	}
	return errs, resolved, m
}

// resolvePartitions finds the partitions of an add or verify; when one is
// unknown or read-only it returns the errors (OPERATION_NOT_ATTEMPTED for
// the others) and no partitions.
func (t *transactions) resolvePartitions(transactionalID, topic string, partitions []int32) ([]error, []*Partition) {
	errs := make([]error, len(partitions))
	if transactionalID == "" {
		return fill(errs, kerr.InvalidRequest), nil
	}
	resolved, unknown := make([]*Partition, len(partitions)), false
	for i, index := range partitions {
		var err error
		if resolved[i], err = t.node.LocalPartition(topic, index); err != nil {
			errs[i], unknown = err, true
		} else if errs[i] = resolved[i].refuseIfReadOnly("AddPartitionsToTxn"); errs[i] != nil {
			unknown = true // a mirror topic takes no writes, markers included
		}
	}
	if unknown {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = kerr.OperationNotAttempted
			}
		}
		return errs, nil
	}
	return errs, resolved
}

// fill sets every element of errs to err and returns errs.
func fill(errs []error, err error) []error {
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// addLocked adds partitions to m's transaction (m is locked, checked, and
// not Prepare*), starting it if m has none, and lets the producer write
// there (the partitions' verification guards).
func (t *transactions) addLocked(m *txnMetadata, partitions []*Partition) error {
	next := m.persisted()
	for _, p := range partitions {
		if i, found := slices.BinarySearchFunc(next.partitions, p.tp, compareTopicPartitions); !found {
			next.partitions = slices.Insert(next.partitions, i, p.tp)
		}
	}
	if m.state != txnOngoing || len(next.partitions) != len(m.partitions) {
		if m.state != txnOngoing {
			next.startMillis = t.nowMillis()
		}
		next.state, next.updateMillis = txnOngoing, t.nowMillis()
		if err := t.persist(&next); err != nil {
			return err
		}
		m.apply(&next)
	}
	for _, p := range partitions {
		p.addToTransaction(m.producerID, m.epoch, m.id)
	}
	return nil
}

// txnOperation is what a transactional write does when its partition is
// not in the producer's transaction, by the request's version (Kafka's
// TransactionSupportedOperation).
type txnOperation int8

const (
	// txnDefaultError answers INVALID_TXN_STATE (Produce v3-10,
	// TxnOffsetCommit v0-3).
	txnDefaultError txnOperation = iota
	// txnGenericError answers TRANSACTION_ABORTABLE, which the client
	// takes as "abort and go on" (Produce v11, TxnOffsetCommit v4).
	txnGenericError
	// txnAddPartition adds the partition: transaction.version 2 (Produce
	// v12+, TxnOffsetCommit v5+, KIP-890 part 2).
	txnAddPartition
)

// produceTxnOperation is Kafka's produceRequestVersionToTransactionSupportedOperation.
func produceTxnOperation(version int16) txnOperation {
	switch {
	case version >= 12:
		return txnAddPartition
	case version == 11:
		return txnGenericError
	}
	return txnDefaultError
}

// errNotInTransaction is Kafka's answer to a write, below
// transaction.version 2, to a partition the producer did not add.
var errNotInTransaction = &netio.Error{Code: kerr.InvalidTxnState, Message: "Partition was not added to the transaction"}

// verifyTransaction is Kafka's transaction verification of a
// transactional write of producerID at producerEpoch to p (the
// AddPartitionsToTxnManager asking the coordinator): unless the producer
// already has an open transaction in p at this epoch, the coordinator
// checks the producer
// (INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH for a fenced or a
// future epoch, CONCURRENT_TRANSACTIONS while a transaction completes)
// and then, as op says, adds p or refuses the write.
func (t *transactions) verifyTransaction(transactionalID string, producerID int64, producerEpoch int16, p *Partition, op txnOperation) error {
	if p.inTransaction(producerID, producerEpoch) {
		return nil // as Kafka, whatever the transactional ID
	}
	m := t.lookup(transactionalID)
	if m == nil {
		return fmt.Errorf("%w: transactional ID %q is unknown", kerr.InvalidProducerIDMapping, transactionalID)
	}
	defer m.mu.Unlock()
	if err := checkProducer(m, producerID, producerEpoch); err != nil {
		if errors.Is(err, kerr.ProducerFenced) {
			return fmt.Errorf("%w: %w", kerr.InvalidProducerEpoch, err) // as Kafka answers a write
		}
		return err
	}
	switch {
	case m.state.prepared():
		return fmt.Errorf("%w: transactional ID %q is completing a transaction", kerr.ConcurrentTransactions, m.id)
	case m.state == txnOngoing && m.hasPartition(p.tp), op == txnAddPartition:
		return t.addLocked(m, []*Partition{p})
	case op == txnGenericError:
		return fmt.Errorf("%w: %s is not in transactional ID %q's transaction", kerr.TransactionAbortable, p.tp, m.id)
	}
	return errNotInTransaction
}

// checkProducer is the producer check of AddPartitionsToTxn and EndTxn.
func checkProducer(m *txnMetadata, producerID int64, producerEpoch int16) error {
	switch {
	case m.producerID != producerID:
		return fmt.Errorf("%w: producer ID %d is not transactional ID %q's", kerr.InvalidProducerIDMapping, producerID, m.id)
	case m.epoch != producerEpoch:
		return fmt.Errorf("%w: epoch %d, transactional ID %q is at %d", kerr.ProducerFenced, producerEpoch, m.id, m.epoch)
	}
	return nil
}

// EndTransaction commits or aborts the producer's transaction (Kafka's
// handleEndTransaction): Prepare* is persisted, the markers written and
// flushed, Complete* persisted. Once Prepare* is durable the answer is
// success even if a marker write fails: the reaper retries, and until it
// is done the transactional ID answers CONCURRENT_TRANSACTIONS.
//
// Under transaction version 1 (EndTxn v0-4) the epoch stays, a retry of a
// completed EndTxn succeeds, and the answer carries no producer. Under
// version 2 (EndTxn v5+, tv2) every EndTxn bumps the epoch and answers the
// producer ID and epoch to go on with (a new producer ID at epoch 0 once
// the epoch is exhausted); a retry comes with the epoch before the bump;
// an abort with no transaction bumps the epoch too (Kafka's table in
// TransactionCoordinator.endTransaction).
func (t *transactions) EndTransaction(_ context.Context, transactionalID string, producerID int64, producerEpoch int16, commit, tv2 bool) (int64, int16, error) {
	if transactionalID == "" {
		return -1, -1, kerr.InvalidRequest
	}
	m := t.lookup(transactionalID)
	if m == nil {
		return -1, -1, kerr.InvalidProducerIDMapping
	}
	defer m.mu.Unlock()
	var err error
	if tv2 {
		err = t.endV2(m, producerID, producerEpoch, commit)
	} else {
		err = t.endV1(m, producerID, producerEpoch, commit)
	}
	if err != nil || !tv2 {
		return -1, -1, err
	}
	return m.producerID, m.epoch, nil
}

// endV1 is EndTransaction under transaction version 1.
func (t *transactions) endV1(m *txnMetadata, producerID int64, producerEpoch int16, commit bool) error {
	if err := checkProducer(m, producerID, producerEpoch); err != nil {
		return err
	}
	switch m.state {
	case txnOngoing:
		next := m.persisted()
		next.state = preparedState(commit)
		return t.end(m, &next)
	case txnCompleteCommit, txnCompleteAbort:
		if commit == (m.state == txnCompleteCommit) {
			return nil
		}
	case txnPrepareCommit, txnPrepareAbort:
		if commit == (m.state == txnPrepareCommit) {
			return kerr.ConcurrentTransactions
		}
	}
	return invalidTransition(m, commit)
}

// endV2 is EndTransaction under transaction version 2.
func (t *transactions) endV2(m *txnMetadata, producerID int64, producerEpoch int16, commit bool) error {
	retryOnOverflow := m.lastProducerID == producerID && producerEpoch == math.MaxInt16-1 && m.epoch == 0 && m.producerID != producerID
	retryOnBump := m.epoch == producerEpoch+1
	retry := retryOnBump || retryOnOverflow
	var validEpoch bool
	switch m.state {
	case txnOngoing, txnEmpty:
		validEpoch = producerEpoch == m.epoch
	case txnPrepareCommit, txnPrepareAbort:
		validEpoch = retryOnBump
	case txnCompleteCommit, txnCompleteAbort:
		validEpoch = retry || producerEpoch == m.epoch
	}
	switch {
	case m.producerID != producerID && !retryOnOverflow:
		return fmt.Errorf("%w: producer ID %d is not transactional ID %q's", kerr.InvalidProducerIDMapping, producerID, m.id)
	case !validEpoch:
		return fmt.Errorf("%w: epoch %d, transactional ID %q is at %d (%v)", kerr.ProducerFenced, producerEpoch, m.id, m.epoch, m.state)
	}
	bump := func(commit bool) error {
		next := m.persisted()
		next.state, next.epoch, next.lastEpoch = preparedState(commit), m.epoch+1, m.epoch
		if m.state != txnOngoing {
			next.startMillis = t.nowMillis() // an abort with no partition added
		}
		if epochExhausted(m.epoch) {
			id, err := t.ids.next()
			if err != nil {
				return err
			}
			next.nextProducerID = id
		}
		return t.end(m, &next)
	}
	switch m.state {
	case txnOngoing:
		return bump(commit)
	case txnEmpty:
		if !commit {
			return bump(false)
		}
	case txnCompleteCommit, txnCompleteAbort:
		done := commit == (m.state == txnCompleteCommit)
		switch {
		case retry && done:
			return nil
		case !retry && !commit:
			return bump(false)
		}
	case txnPrepareCommit, txnPrepareAbort:
		if commit == (m.state == txnPrepareCommit) {
			return kerr.ConcurrentTransactions
		}
	}
	return invalidTransition(m, commit)
}

func preparedState(commit bool) txnState {
	if commit {
		return txnPrepareCommit
	}
	return txnPrepareAbort
}

func invalidTransition(m *txnMetadata, commit bool) error {
	return fmt.Errorf("%w: transactional ID %q is %v, asked to commit=%v", kerr.InvalidTxnState, m.id, m.state, commit)
}

// fenceAndAbort aborts m's ongoing transaction with the epoch bumped, so
// that its producer is fenced (Kafka's prepareFenceProducerEpoch). The
// epoch before the fence is kept as the last epoch: the fenced producer
// may re-initialise with it (KIP-360), after a timeout say, and go on at
// the bumped epoch.
func (t *transactions) fenceAndAbort(m *txnMetadata) error {
	if m.epoch == math.MaxInt16 {
		panic(fmt.Sprintf("broker: transactional ID %q: an ongoing transaction at epoch %d", m.id, m.epoch))
	}
	next := m.persisted()
	next.state, next.epoch, next.lastEpoch = txnPrepareAbort, m.epoch+1, m.epoch
	return t.end(m, &next)
}

// end persists next (PrepareCommit or PrepareAbort) and completes it.
// Errors after Prepare* is durable are logged, not returned: the reaper
// completes the transaction.
func (t *transactions) end(m *txnMetadata, next *txnRecord) error {
	next.updateMillis = t.nowMillis()
	if err := t.persist(next); err != nil {
		return err
	}
	m.apply(next)
	if err := t.complete(m); err != nil {
		t.log.Warn("transaction markers not all written; retrying later", "transactional.id", m.id, "state", m.state.String(), "error", err)
	}
	return nil
}

// complete writes m's markers (m is Prepare*), flushes every partition of
// the transaction and persists Complete* (with the next producer ID, at
// epoch 0, when the epoch was exhausted). On error m stays Prepare*, to
// be completed again: markers already written are skipped then.
func (t *transactions) complete(m *txnMetadata) error {
	if !m.state.prepared() {
		panic(fmt.Sprintf("broker: complete transactional ID %q in state %v", m.id, m.state))
	}
	commit := m.state == txnPrepareCommit
	now := t.nowMillis()
	var errs []error
	for _, tp := range m.partitions {
		p, err := t.node.LocalPartition(tp.Topic, tp.Partition)
		if errors.Is(err, ErrPartitionOffline) {
			errs = append(errs, err) // retried, as Kafka retries a marker on KAFKA_STORAGE_ERROR
			continue
		}
		if err != nil {
			continue // deleted: nowhere to write, as in Kafka
		}
		if _, err := p.writeMarker(m.producerID, m.epoch, commit, now); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := p.log.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("broker: %s: flush markers: %w", tp, err))
			continue
		}
		if tp.Topic == consumerOffsetsTopic {
			t.groupsTransactionCompleted(m.producerID, commit)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	next := m.persisted()
	next.state, next.partitions, next.updateMillis = txnCompleteAbort, nil, now
	if commit {
		next.state = txnCompleteCommit
	}
	if m.nextProducerID >= 0 {
		next.lastProducerID, next.producerID, next.epoch, next.nextProducerID = m.producerID, m.nextProducerID, 0, -1
	}
	if err := t.persist(&next); err != nil {
		return err
	}
	m.apply(&next)
	return nil
}

// sortedIDs returns the transactional IDs, sorted, for a deterministic
// walk.
func (t *transactions) sortedIDs() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make([]string, 0, len(t.byID))
	for id := range t.byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// partitionsOf lists the node's online partitions, sorted by topic and
// index.
func partitionsOf(n *Node) []*Partition {
	n.mu.RLock()
	defer n.mu.RUnlock()
	var all []*Partition
	for _, t := range n.topics {
		all = append(all, online(t.partitions)...)
	}
	sort.Slice(all, func(i, j int) bool { return compareTopicPartitions(all[i].tp, all[j].tp) < 0 })
	return all
}
