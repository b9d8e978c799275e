package engine

import (
	"log/slog"
	"slices"
	"sync"

	"github.com/mirrord/mirrord/broker"
)

// NodeConfig configures a Node: the Kafka node's configuration (the
// engine adds its internal topic, __mirror_state).
type NodeConfig = broker.Config

// Node is one mirrord node: the Kafka node (broker.Node: topics,
// partitions, produce, transactions) and the mirrors that write into it.
// It is the netio.Backend the Kafka listener serves, with the mirror
// administration (Mirrors).
type Node struct {
	*broker.Node
	cfg     NodeConfig
	log     *slog.Logger
	metrics *mirrorMetrics
	states  mirrorStates // __mirror_state alone; etcd on a cluster (cluster_mirror_states.go)

	// mirrorsMu guards mirrors; it is taken before a mirror's mu, never
	// after.
	mirrorsMu sync.Mutex
	mirrors   map[string]*mirror // bounded by the mirrors an operator created
	// acls is which ACLs each mirror owns (mirror_acls.go).
	acls aclOwnership
	// followers fetch the partitions this node follows in a cluster
	// (replica_fetcher.go).
	followers replicaFetchers
	// member is the node's link to its cluster (cluster.go); nil alone.
	member *clusterNode
}

// OpenNode opens the Kafka node of the data directory, replays
// __mirror_state, and starts the mirrors persisted there. The topics the
// mirrors write are made read-only before the node's transaction recovery
// runs: their open transactions are the source's, whose markers the
// mirror will copy, and recovery must not abort them as orphans.
func OpenNode(cfg NodeConfig) (*Node, error) { return openNode(cfg, nil) }

// openNode is OpenNode for a node alone (member nil) or of a cluster: the
// mirrors it starts know it from the start.
func openNode(cfg NodeConfig, member *clusterNode) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.InternalTopics = append(slices.Clone(cfg.InternalTopics), mirrorStateTopic)
	n := &Node{cfg: cfg, log: cfg.Logger, metrics: &mirrorMetrics{}, mirrors: map[string]*mirror{}, member: member}
	b, err := broker.Open(cfg, func(b *broker.Node) error {
		n.Node = b
		states, skipped, err := openStateLog(cfg.FS, cfg.DataDir, b, cfg.Log)
		for _, cause := range skipped {
			n.log.Error("skipped a corrupt record of an internal log: the mirror states it held are lost", "topic", mirrorStateTopic, "error", cause)
		}
		if err != nil {
			return err
		}
		n.states = states
		if member != nil {
			// A cluster's records are etcd's: a partition's leader may
			// change, and the new one resumes its machine.
			n.states = newClusterStates(member)
		}
		return n.markPersistedMirrors()
	})
	if err != nil {
		return nil, err
	}
	n.Node = b
	n.mirrorsMu.Lock()
	err = n.loadMirrors()
	n.mirrorsMu.Unlock()
	if err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// Close leaves the cluster (if any), stops every mirror, then closes the
// Kafka node.
func (n *Node) Close() error {
	n.closeCluster()
	n.stopFollowing()
	n.mirrorsMu.Lock()
	for name, m := range n.mirrors {
		m.stop()
		delete(n.mirrors, name)
	}
	n.mirrorsMu.Unlock()
	return n.Node.Close()
}

// DefaultMessageMaxBytes is Kafka's message.max.bytes default: the
// largest batch a Produce may carry on a topic without max.message.bytes.
const DefaultMessageMaxBytes = broker.DefaultMessageMaxBytes

// TransactionConfig is the transaction coordinator's settings
// (NodeConfig.Transactions), with Kafka's defaults in
// DefaultTransactionConfig.
type TransactionConfig = broker.TransactionConfig

// DefaultTransactionConfig is Kafka 4.4's transaction settings.
var DefaultTransactionConfig = broker.DefaultTransactionConfig

// DefaultConsumerGroupTimings is Kafka 4.4's
// group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms.
var DefaultConsumerGroupTimings = broker.DefaultConsumerGroupTimings

// ServerPropertyNames are the broker configs a node's config file may
// set (NodeConfig.ApplyServerProperties takes them).
func ServerPropertyNames() []string { return broker.ServerPropertyNames() }

// CleanerConfig is the log cleaner's settings (NodeConfig.Cleaner), with
// Kafka's defaults in DefaultCleanerConfig.
type CleanerConfig = broker.CleanerConfig

// DefaultCleanerConfig is Kafka 4.4's log cleaner settings.
var DefaultCleanerConfig = broker.DefaultCleanerConfig
