// Package engine is the mirrord node behind the Kafka listener: it turns
// the partition logs of a data directory into topics and serves them as
// the netio.Backend.
//
// Built so far:
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
// Mirrors (mirror*.go): a mirror copies the topics it selects from one
// source cluster. A controller goroutine per mirror reads the source's
// metadata, creates each local topic with the source's topic ID and
// partition count (growing it with the source) and gives each source
// broker's fetcher the partitions it leads; a fetcher keeps one fetch
// session per broker and appends exactly the bytes the source sent
// (trailing partial batch cut; framing and CRC checked by the log). It
// follows the source's log start, answers DivergingEpoch by truncating by
// epoch, restarts at the source's log start after OFFSET_OUT_OF_RANGE, and
// keeps the local leader epoch ahead of the source's. Mirror topics refuse
// Produce with READ_ONLY_TOPIC. Mirror definitions persist in
// mirror-<name>.json. The pure per-partition state machine
// (mirror_state*.go) and the mirror config (mirror_config*.go) are built
// and tested; the state machine is not yet driving the fetchers. Partition
// failures and recoveries persist in __mirror_state (mirror_statelog.go),
// an internal log replayed at open.
//
// Not built yet: failover (stop) and failback, consumer group offsets.
//
// Concurrency: the Node's topic map has one RWMutex; each partition
// serializes its writes (a sequence check and the append it guards happen
// under one lock); the transaction coordinator has its own lock and one
// reaper goroutine that Close stops and waits for.
package engine
