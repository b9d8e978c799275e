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
// source cluster. Its controller goroutine owns the partitions' state
// machines (engine/mirrorstate; mirror_owner.go steps them and performs
// their actions, each round's Persists group-committed first): it reads
// the source's metadata, creates each local topic with the source's topic
// ID and partition count (growing it with the source) and gives each
// source broker's fetcher the partitions it leads whose machines fetch; a
// fetcher keeps one fetch session per broker and appends exactly the
// bytes the source sent (trailing partial batch cut; framing and CRC
// checked by the log). It follows the source's log start and restarts at
// it after OFFSET_OUT_OF_RANGE. A DivergingEpoch means the source lost
// records the mirror copied (an unclean leader election): with
// mirror.support.unclean.leader.election the partition goes ULE_RECOVERY
// and truncates by epoch, keeping what it removes; without, FAILED until
// --recover. EPOCH_FENCING keeps the local leader epoch ahead of the
// source's. A prober keeps each
// partition's source high watermark fresh apart from the fetch path, so
// lag is never reported better than known (mirror_source.go). Mirror
// topics refuse Produce, CreatePartitions, DeleteRecords and DeleteTopics
// (ErrReadOnlyTopic, POLICY_VIOLATION with a message naming the mirror).
// Failover (mirror_failover.go: stop, each step persisted before it runs)
// and failback (mirror_align.go: truncation to the last mirror epoch the
// new source stored, mirror loops refused) are built. Mirror definitions
// persist in mirror-<name>.json; partition states in __mirror_state
// (mirror_statelog.go), an internal log replayed at open, whose unreadable
// batches are quarantined rather than stopping the node.
//
// Not built yet: the node side (topics, partitions, produce,
// transactions) in a package of its own apart from the replication
// engine; consumer group offset sync; topic config and ACL sync.
//
// Concurrency: the Node's topic map has one RWMutex; each partition
// serializes its writes (a sequence check and the append it guards happen
// under one lock); the transaction coordinator has its own lock and one
// reaper goroutine that Close stops and waits for.
package engine
