// Package engine is the replication engine of a mirrord node: the
// mirrors that copy topics from source clusters into the Kafka node it
// wraps (broker.Node), byte for byte. Node (node.go) is the node the
// listener serves: broker.Node with the mirror administration (Mirrors)
// and the internal topic __mirror_state.
//
// Mirrors (mirror*.go): a mirror copies the topics it selects from one
// source cluster. Its controller goroutine owns the partitions' state
// machines (engine/mirrorstate; mirror_owner.go steps them and performs
// their actions, each round's Persists group-committed first): it reads
// the source's metadata, creates each local topic with the source's topic
// ID and partition count (growing it with the source) and gives each
// source broker's fetcher the partitions it leads whose machines fetch; a
// fetcher keeps one fetch session per broker, over a connection of its
// own (mirror_fetch_conn.go: kgo serves metadata and the rest), reads each
// answer into a buffer it keeps and parses it in place (engine/fetchwire),
// and appends exactly the bytes the source sent from that buffer (trailing
// partial batch cut; framing and CRC checked by the log). It follows the source's log start and restarts at
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
// batches are quarantined rather than stopping the node; on a cluster, in
// etcd (cluster_mirror_states.go, behind the same mirrorStates interface),
// so that a partition's new leader resumes its machine.
//
// Each mirror also syncs its source's consumer group offsets, transactional
// IDs and topic configs (mirror_groups.go, mirror_txns.go,
// mirror_configs.go) and, on a node with an authorizer, its ACLs
// (mirror_acls.go: the ACLs a mirror owns persist in
// acls-mirror-<name>.json; ClusterMirror, operator and other mirrors'
// ACLs are never deleted).
//
// In a cluster the partitions this node follows are fetched from their
// leaders by one replica fetcher per leader node (replica_fetcher.go,
// SetFollowing), over the same connection code and in-place parser as a
// mirror's, with Kafka's follower Fetch.
//
// Concurrency: each mirror's controller goroutine owns its partitions'
// machines; fetchers post to it (an inbox) and admin calls hand it work
// (mirror.do). Lock order: the Node's mirrorsMu, a mirror's adminMu, its
// mu, a partition's mu; a partition's gate is held by its fetcher while
// an answer is applied.
package engine
