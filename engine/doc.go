// Package engine is the mirrord node behind the Kafka listener: it turns
// the partition logs of a data directory into topics and serves them as
// the netio.Backend.
//
// Built so far (writable topics):
//   - Node: topics and partitions over logstore.Dir; CreateTopic (Kafka
//     topic configs mapped to log settings, unknown ones refused),
//     CreatePartitions, DeleteTopic; producer IDs reserved in persisted
//     blocks (producer-id-block) so they stay unique across restarts.
//   - Produce: records validated as Kafka's LogValidator does
//     (recordbatch/records), offsets and the leader epoch assigned by the
//     log; the high watermark follows the log end (one replica).
//   - Idempotent producers (producer_state.go): per producer the epoch and
//     the last five batches; duplicates answer the original offset.
//   - Transactions (transactions.go, txn_state.go): the coordinator state
//     machine, persisted per transactional ID before markers are written;
//     COMMIT/ABORT control batches; a reaper for timed-out transactions.
//   - Last stable offset and the aborted-transaction index (txn_index.go)
//     for read_committed readers.
//   - Recovery at open: producer state, open transactions and the aborted
//     index are rebuilt by walking each log's batches; prepared commits and
//     aborts are completed; orphaned open transactions are aborted.
//
// Not built yet: mirrors (the partition state machine, fetchers from a
// source, failover and failback) and consumer group offsets; see
// ../shared/DESIGN.md and README.md.
//
// Concurrency: the Node's topic map has one RWMutex; each partition
// serializes its writes (a sequence check and the append it guards happen
// under one lock); the transaction coordinator has its own lock and one
// reaper goroutine that Close stops and waits for.
package engine
