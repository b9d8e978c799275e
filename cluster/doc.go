// Package cluster is the control plane of a mirrord cluster: the metadata
// that several mirrord nodes share, kept in etcd (go.etcd.io/etcd/client/v3)
// rather than in a consensus of our own. It owns the node registry, the
// election of one controller and its loop, the topic specs, the placement
// of partition replicas and leaders, drain marks, the leader's ISR changes,
// and a watch-based cache of all of it that nodes read from, so that
// nothing on the data path waits on etcd.
//
// A node of a cluster (engine/cluster.go) uses it to join, to run for
// controller and to keep its cache; `mirrord nodes` reads it (Read) and
// drains nodes. The design it follows, with the failure cases of the
// whole cluster, is docs/cluster.md.
//
// # Keys in etcd
//
// Everything of one cluster lives under the prefix /mirrord/<clusterID>/:
//
//		/mirrord/<clusterID>/
//		    nodes/<nodeID>                    {"host","port","rack"}        put by the node, with its lease
//		    drain/<nodeID>                    {}                            the operator's drain mark (Drain)
//		    controller/<lease ID in hex>      the node ID of the candidate  concurrency.Election's keys
//		    topics/<topic>                    {"topicID","partitions","replicationFactor","configs","mirror"}
//		    topics/<topic>/partitions/<n>     {"topicID","replicas","leader","leaderEpoch","isr"}
//		    mirrors/<name>                    {"config","changes"}          a mirror and its topic admin changes (mirrors.go)
//		    mirrors/<name>/state/<id>/<n>     the engine's record bytes     a mirror partition's machine, by its leader (mirror_states.go)
//
//	  - nodes/<nodeID> is the registry. A node puts its key with a lease it
//	    keeps alive (Join); when the node stops or is cut off for the lease's
//	    TTL, etcd deletes the key, and that deletion is the node's loss for
//	    the controller. A node ID is registered at most once: a second Join of
//	    the same ID while the first's lease lives fails (ErrDuplicateNode).
//	  - controller/ is the prefix of etcd's concurrency.Election. The
//	    candidate whose key has the lowest create revision is the controller;
//	    its key lives with its session's lease.
//	  - drain/<nodeID> marks a node drained: the controller moves its
//	    leaderships to other in-sync replicas and places nothing new on it.
//	    It is a key of its own, not in the node's registry value, so that it
//	    outlives the node's lease (a node drained for maintenance stays
//	    drained when it restarts) and can be set while the node is down.
//	  - topics/<topic> is a topic's spec, written by whichever node receives
//	    the request (CreateTopic: one transaction comparing the key's
//	    CreateRevision with 0, so two creates of one name cannot both win;
//	    GrowTopic: a compare-and-swap on its ModRevision; DeleteTopic: the
//	    spec and its partitions in one transaction). The controller places
//	    its partitions. The cache's ControllerID is the node ID of the
//	    election's oldest candidate.
//	  - topics/<topic>/partitions/<n> is one partition's assignment: its
//	    replicas (node IDs, the preferred leader first), its leader (-1 when
//	    none), its leader epoch and its in-sync replicas (ISR). Topic names
//	    are Kafka's ([a-zA-Z0-9._-]), so they never contain a '/'.
//
// # Who writes what, and the fencing rule
//
// The controller writes assignments and leaders; a partition's leader writes
// that partition's ISR; DeleteTopic deletes a topic's partitions with its
// spec; nothing else writes a partition key.
//
//   - Every controller write is one etcd transaction fenced by its
//     election: If(Compare(CreateRevision(election.Key()), "=",
//     election.Rev())). A deposed controller (its session expired or
//     closed, so its election key is gone or was re-created by someone
//     else) fails that comparison and its write is refused with
//     ErrNotController. Inside the fence, each partition write compares the
//     key's ModRevision with the one the controller read (or its
//     CreateRevision with 0 for a new partition), so a concurrent ISR change
//     is never overwritten: that case returns ErrStaleMetadata and the
//     controller re-reads and recomputes.
//   - A partition leader changes only its partition's ISR, by AlterISR: a
//     compare-and-swap on the key's ModRevision (the partition epoch the
//     leader last saw, as Kafka's AlterPartition carries it) that also
//     requires the stored leader epoch to be the one the leader holds. A
//     leader deposed by a new leader epoch, or one that raced another
//     change, gets ErrStaleMetadata.
//
// # The controller loop
//
// RunController campaigns and, while elected, reacts to a cache of its own
// (never polling): each change of the cache computes a plan from its state
// (planControl, pure) and writes it fenced. Partitions whose spec is gone
// (or is of another topic ID) are deleted; partitions whose leader is lost
// or drained are given a new leader (ElectLeaders); the missing partitions
// of each spec are placed (AssignReplicas). Placements and deletes also
// compare their spec's ModRevision, so that none outlives a deleted or
// re-created spec. A write that meets a changed partition
// (ErrStaleMetadata) reads etcd again and recomputes; a refused fence or
// the session's end sends the node back to campaigning.
//
// # Placement
//
// Placement (placement.go) is pure: live nodes and the current assignments
// in, the assignments to write out. New partitions get min(replication
// factor, live nodes) distinct replicas, leaders and replicas spread evenly
// over the live nodes and over racks when nodes have one. When nodes are
// lost, the partitions they led move to the first live replica (in replica
// order) that is in the ISR, with the leader epoch bumped; lost nodes leave
// the ISR, except that the ISR never becomes empty: a partition with no
// in-sync live replica keeps its last ISR and stays leaderless (leader -1)
// until one of those replicas returns. An out-of-sync replica is never
// elected (no unclean leader election).
//
// # Failure cases
//
//   - A node stops or is partitioned from etcd: its lease expires after its
//     TTL, its registry key goes, and the controller moves its leaderships.
//     Until then its partitions keep their leader: the cost of a loss is up
//     to one TTL without a leader for those partitions.
//   - The controller is lost: its session's lease expires, the next
//     candidate becomes controller, and any write the old one still makes
//     is refused by the fence. Nothing is lost; decisions wait up to a TTL.
//   - etcd is unavailable: the caches keep the last metadata and the data
//     path goes on with the current leaders; no leadership moves until etcd
//     answers again, and the caches then resync (a compacted watch is
//     resynced by a fresh read).
package cluster
