package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mirrord/mirrord/broker"
	"github.com/twmb/franz-go/pkg/kadm"
)

// Transactional ID sync: with each consumer group offset sync round
// (mirror.group.offsets.sync.interval.ms) a mirror copies its source's
// transactional IDs (ListTransactions on every source broker, then
// DescribeTransactions at their coordinators) into this node's
// transaction coordinator: producer ID, epoch, timeout and whether a
// transaction is open (broker/txn_mirror.go says what the coordinator
// keeps and how the stop fences). A transactional producer moved here
// after a failover then finds its transactional ID, producer ID and epoch
// known, and goes on without a restart, as it would after its own
// coordinator moved within the source cluster.

// SyncStatus is the outcome of a mirror's last round of a sync that
// copies whole items (transactional IDs, topic configs).
type SyncStatus struct {
	At       time.Time     // when the last round ended (zero: none yet)
	Duration time.Duration // how long it took
	Synced   int           // items held as the source has them after the round
	Err      string        // the round's failure, if any
	Errors   int64         // rounds failed since the mirror started
}

// syncStatus holds a sync's status for reports and metrics.
type syncStatus struct {
	mu     sync.Mutex
	status SyncStatus
}

func (s *syncStatus) get() SyncStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// runRound runs one round of the sync named what and records its
// outcome.
func (s *syncStatus) runRound(ctx context.Context, m *mirror, what string, round func(context.Context) (int, error)) {
	started := time.Now()
	synced, err := round(ctx)
	if ctx.Err() != nil {
		return
	}
	status := SyncStatus{At: time.Now(), Duration: time.Since(started), Synced: synced}
	if err != nil {
		status.Err = err.Error()
		m.log.Warn(what+" failed", "error", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	status.Errors = s.status.Errors
	if status.Err != "" {
		status.Errors++
	}
	s.status = status
}

// syncTransactions runs one transactional ID sync round.
func (m *mirror) syncTransactions(ctx context.Context) {
	m.txnSync.runRound(ctx, m, "transactional ID sync", m.syncTransactionsRound)
}

// syncTransactionsRound describes the source's transactional IDs and
// copies them; IDs the source could not describe are left as they were.
func (m *mirror) syncTransactionsRound(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, m.config.RequestTimeout)
	defer cancel()
	described, err := kadm.NewClient(m.client).DescribeTransactions(ctx)
	if err != nil && len(described) == 0 {
		return 0, fmt.Errorf("describe the source's transactions: %w", err)
	}
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("describe the source's transactions: %w", err))
	}
	txns := make([]broker.MirroredTransaction, 0, len(described))
	for _, d := range described.Sorted() {
		if d.Err != nil {
			errs = append(errs, fmt.Errorf("describe transactional ID %s: %w", d.TxnID, d.Err))
			continue
		}
		switch d.State {
		case "Dead":
			continue // being expired on the source
		case "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
			txns = append(txns, broker.MirroredTransaction{TransactionalID: d.TxnID, ProducerID: d.ProducerID, Epoch: d.ProducerEpoch,
				TimeoutMillis: d.TimeoutMillis, Open: true})
		default: // Empty, CompleteCommit, CompleteAbort
			txns = append(txns, broker.MirroredTransaction{TransactionalID: d.TxnID, ProducerID: d.ProducerID, Epoch: d.ProducerEpoch,
				TimeoutMillis: d.TimeoutMillis, Aborted: d.State == "CompleteAbort"})
		}
	}
	synced, err := m.node.SyncMirroredTransactions(m.name, txns)
	if err != nil {
		errs = append(errs, err)
	}
	return synced, errors.Join(errs...)
}
