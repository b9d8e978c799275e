// Package group is the classic consumer group coordinator of a mirrord
// node: Kafka's group protocol (JoinGroup 0-9, SyncGroup 0-5, Heartbeat
// 0-4, LeaveGroup 0-5) and the group offset and admin APIs (OffsetCommit
// 2-9, OffsetFetch 1-9, OffsetDelete 0, ListGroups 0-5, DescribeGroups
// 0-5, DeleteGroups 0-2), with the semantics of Kafka's GroupMetadataManager
// and ClassicGroup (group-coordinator module, Kafka 4). Requests come in
// and answers go out as kmsg types, so the network handlers only check the
// version and call the Coordinator method of the same name. It imports
// nothing of the module (deps_test.go).
//
// # States
//
//	            +--------------------------- leave / expiry of the last member ---+
//	            v                                                                  |
//	Empty --join--> PreparingRebalance --all joined or rebalance timeout--> CompletingRebalance
//	                    ^   ^                                                   |
//	                    |   +---- join of a new or changed member, leave -------+ leader's SyncGroup
//	                    |                                                       v  (written first)
//	                    +-------- join, leave, session or sync expiry ------- Stable
//	any --DeleteGroups (Empty only)--> Dead (dropped)
//
// A group leaving Empty waits group.initial.rebalance.delay.ms for more
// members, longer while new ones keep coming, up to the rebalance timeout.
// JoinGroup v4+ without a member ID answers MEMBER_ID_REQUIRED with one:
// the member is pending (it holds up the rebalance) until it joins with
// that ID or its session timeout passes. Static members (group.instance.id,
// KIP-345) keep their assignment over a restart: a new join with the same
// instance ID fences the old member ID (FENCED_INSTANCE_ID) and, in a
// Stable group whose protocol would not change, rebalances nobody.
// Members that miss their session timeout are removed, except members
// awaiting a JoinGroup or SyncGroup answer, who need not heartbeat (new
// members excepted: they expire after the new member join timeout).
//
// # Concurrency and time
//
// One loop goroutine owns every group (Coordinator.run); the exported
// methods queue a call on a bounded channel and wait for the answer,
// which for JoinGroup and SyncGroup may come later, when the rest of the
// group has arrived. Deadlines (session, rebalance, sync, initial delay)
// live in the groups; the loop keeps a heap of each group's earliest one
// and arms one Timer of the Clock for the first. Time is read once per
// event from the Clock, so tests drive it with a ManualClock and no sleeps.
//
// # Durability
//
// The records are Kafka's __consumer_offsets records, so Kafka's tools can
// read them (GroupCoordinatorRecordHelpers):
//
//	key   OffsetCommitKey   v1: int16 version=1, string group, string topic, int32 partition
//	value OffsetCommitValue v3: int16 version=3, int64 offset, int32 leaderEpoch,
//	                            string metadata, int64 commitTimestamp
//	                        v1 (when the commit carried a retention time): ... int64 expireTimestamp
//	key   GroupMetadataKey  v2: int16 version=2, string group
//	value GroupMetadataValue v3: protocolType, generation, protocol, leader,
//	                            currentStateTimestamp, members (memberId,
//	                            groupInstanceId, clientId, clientHost,
//	                            rebalanceTimeout, sessionTimeout,
//	                            subscription, assignment)
//	a nil value is a tombstone: the offset, or the group, is deleted
//
// An offset commit is appended to the Store before it is answered; a
// generation's assignment is appended before any member gets it (the
// leader's SyncGroup); a group that becomes Empty, a new group, a static
// member's new member ID and a deleted group (its offsets first) are
// appended too. A failed append answers NOT_COORDINATOR (Kafka's answer to
// a log storage error) and changes nothing. New replays the Store: groups
// with members come back Stable in their generation, each member with a
// full session timeout to heartbeat again, and committed offsets with
// their leader epoch and metadata.
//
// # The consumer protocol (KIP-848)
//
// ConsumerGroupHeartbeat 0-1 and ConsumerGroupDescribe 0-1 (consumer.go)
// serve GroupMetadataManager.consumerGroupHeartbeat: a group epoch bumped
// by a new member, a subscription change, a change of the subscribed
// topics (Config.Topics) or a member leaving; a target assignment computed
// at the group epoch by the assignor most members ask for ("uniform" or
// "range", consumer_assign.go); and each member moved towards its target
// by CurrentAssignmentBuilder's rules: partitions are revoked (the member
// reports it no longer owns them) before another member gets them. A
// classic and a consumer group share the ID space: a joining member takes
// an empty group of the other kind over, a non-empty one answers
// GROUP_ID_NOT_FOUND (heartbeat) or INCONSISTENT_GROUP_PROTOCOL (JoinGroup).
// Kafka's consumer group records (consumer_records.go) are written before
// the answer and replayed at open. Not built: classic members in consumer
// groups (online migration), OffsetFetch's member epoch check, KIP-1251's
// per-partition assignment epochs for offset commits (a commit must carry
// the member's current epoch), rack-aware assignment.
//
// # Transactions
//
// TxnOffsetCommit (0-4) writes its offsets as a transactional batch of the
// producer (Record.Transactional); they stay pending until the
// transaction's marker, which the node's transaction coordinator writes to
// the store and reports with CompleteTransaction (and which replay finds
// in the log): COMMIT makes them committed, ABORT drops them. Meanwhile
// OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for their
// partitions (txn_offsets.go).
//
// # Not built here
//
// KIP-496's expiry of unsubscribed topics' offsets in groups with members
// (offsets.retention.minutes is applied to Empty groups: retention.go)
// and OffsetCommit v10 (topic IDs). The Store over the node's log
// store, __consumer_offsets, is the engine's (engine/group_store.go).
package group
