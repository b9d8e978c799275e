// Package broker is the Kafka node: the partition logs of a data
// directory, the topics they form, and what a Kafka broker answers about
// them, served as the netio.Backend (engine.Node embeds it and adds the
// mirrors). Alone, this node leads every partition.
//
// Built so far:
//   - Node: topics and partitions over logstore.Dir; CreateTopic,
//     CreatePartitions, DeleteTopic; producer IDs reserved in persisted
//     blocks (producer-id-block) so they stay unique across restarts.
//   - Produce: records validated as Kafka's LogValidator does
//     (recordbatch/records), offsets and the leader epoch assigned by the
//     log; the high watermark follows the log end (one replica).
//   - Idempotent producers (producer_state.go): per producer the epoch and
//     the last five batches; duplicates answer the original offset.
//   - Transactions (transactions.go, txn_state.go): the coordinator state
//     machine of transaction versions 1 and 2 (KIP-890), persisted per
//     transactional ID before markers are written; the coordinator's check
//     of every transactional write; COMMIT/ABORT control batches; a
//     reaper for timed-out transactions. Transactional IDs copied from a
//     mirror's source, fenced at the stop (txn_mirror.go).
//   - Last stable offset and the aborted-transaction index (txn_index.go)
//     for read_committed readers.
//   - Recovery at open: producer state, open transactions and the aborted
//     index are rebuilt by walking each log's batches; prepared commits and
//     aborts are completed; orphaned open transactions are aborted.
//   - Internal topics (Config.InternalTopics, made by CreateInternalLog):
//     readable, never created, written, deleted or grown by clients.
//   - The partition API a replication engine writes a mirror through
//     (mirrored.go): a read-only mark whose refusal the writer supplies
//     (SetReadOnly), appends of a source's batches as they are
//     (AppendMirrored), the truncations and log start moves that follow a
//     source, and a failover's steps (RaiseLeaderEpoch,
//     AbortOpenTransactions, WriteMirrorPIDReset). The node knows nothing
//     of mirrors beyond "this partition is read-only".
//   - A partition's role in a cluster (replica.go): SetRole from etcd;
//     a leader moves its high watermark by the ISR (Kafka's maximal-ISR
//     rule), serves followers (ReadReplica), proposes ISR changes through
//     the node's ISR writer (SetISRWriter) and answers acks=-1 as Kafka;
//     a follower refuses clients (NOT_LEADER_OR_FOLLOWER) and is written
//     by the replica fetcher (AppendReplica, TruncateReplica). No role:
//     the node alone leads, as before.
//   - group/: the classic consumer group coordinator.
//   - Topic configs (config_model.go over the generated
//     kafka_config_defs.go, topic_configs*.go): every Kafka 4.4 topic
//     config parsed and validated as Kafka's ConfigDef does, persisted per
//     topic (topic_config_store.go), applied to the logs and Produce
//     checks, served as netio.Configs; SetTopicConfigs for a mirror's
//     config sync. The node's broker configs from a server.properties
//     (server_properties.go). Retention by time and size on a schedule
//     (retention.go).
//
// Not built yet: authentication and ACLs, more than one node.
//
// Concurrency: the Node's topic map has one RWMutex; each partition
// serializes its writes (a sequence check and the append it guards happen
// under one lock); the transaction coordinator has its own lock and one
// reaper goroutine that Close stops and waits for.
package broker
