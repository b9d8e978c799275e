package engine

// A node of a mirrord cluster (docs/cluster.md): etcd holds the control
// plane (package cluster), this file connects one node to it.
//
//   - OpenClusterNode claims the cluster's ID in etcd (the first node
//     names it) and opens the data directory with that identity.
//   - JoinCluster, once the listeners are bound (their advertised address
//     is what the registry carries), registers the node under its lease,
//     starts the watch cache, runs for the controller, and starts the
//     reconcile loop.
//   - The reconcile loop turns each change of the cache into the node's
//     local state: the partitions placed on it exist locally with the
//     topic's ID; every local partition has the role etcd gives it
//     (broker.Role: leader, follower or not a replica); the followers
//     fetch from their leaders (SetFollowing); partitions of deleted topics
//     go. It never blocks the data path: the cache is read under its own
//     mutex, and etcd is written only by the controller, the ISR writer
//     (the leader's node-level goroutine) and the topic admin calls.
//   - The node's netio.Backend (Backend) answers for the cluster: topics
//     from etcd, Metadata's brokers and leaders from the cache, topic
//     creation and deletion as etcd transactions.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/cluster"
	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
)

// ClusterConfig is a node's membership of a cluster: serve's --node-id and
// --etcd-endpoints, and the server.properties keys of a cluster.
type ClusterConfig struct {
	NodeID    int32
	Endpoints []string // etcd's client URLs or host:port
	// LeaseTTL is how long the node stays registered without renewing
	// (node.lease.ms): the time a dead leader keeps its partitions.
	LeaseTTL time.Duration
	// ReplicationFactor is default.replication.factor, capped by the live
	// nodes when a topic is placed.
	ReplicationFactor int
	Rack              string // broker.rack; "" none
	// DialTimeout bounds the first connection to etcd.
	DialTimeout time.Duration
}

// Defaults of ClusterConfig's zero fields.
const (
	DefaultLeaseTTL          = 10 * time.Second
	defaultClusterDial       = 5 * time.Second
	clusterCreateTopicWait   = 30 * time.Second
	clusterRejoinInterval    = time.Second
	clusterControllerBackoff = time.Second
	// clusterConfigOrigin is the writer of a cluster topic's configs.
	clusterConfigOrigin = "cluster"
)

// clusterNode is the node's link to its cluster.
type clusterNode struct {
	cfg    ClusterConfig
	id     string // the cluster ID
	client *clientv3.Client
	base   *slog.Logger // the node's; log is it with the cluster and node ID
	log    *slog.Logger

	cache  *cluster.Cache
	ctx    context.Context // the cluster goroutines'; cancel ends them
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	reg *cluster.Registration // guarded by mu; nil while not registered

	mirrors clusterMirrorSync // cluster_mirrors.go
}

// OpenClusterNode opens a node of the cluster whose etcd is at
// cc.Endpoints: the data directory takes the cluster's ID (or, for the
// first node, names it) and cc.NodeID; a directory of another cluster or
// node is refused.
func OpenClusterNode(cfg NodeConfig, cc ClusterConfig) (*Node, error) {
	if cc.NodeID < 0 {
		return nil, fmt.Errorf("engine: node ID %d: a cluster node's ID is 0 or more", cc.NodeID)
	}
	if len(cc.Endpoints) == 0 {
		return nil, errors.New("engine: a cluster node needs etcd endpoints")
	}
	if cc.LeaseTTL == 0 {
		cc.LeaseTTL = DefaultLeaseTTL
	}
	if cc.DialTimeout == 0 {
		cc.DialTimeout = defaultClusterDial
	}
	if cc.ReplicationFactor == 0 {
		cc.ReplicationFactor = 1
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	client, err := cluster.NewClient(cc.Endpoints, cc.DialTimeout)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	id, err := claimClusterID(client, cfg, cc)
	if err != nil {
		client.Close()
		return nil, err
	}
	cfg.Identity = &logstore.Meta{ClusterID: id, NodeID: cc.NodeID}
	c := &clusterNode{cfg: cc, id: id, client: client, base: log, log: log.With("cluster", id, "node", cc.NodeID)}
	c.mirrors.epochKicks = make(chan struct{}, 1)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.cache = cluster.StartCache(c.ctx, client, id)
	n, err := openNode(cfg, c) // the mirrors it loads run on the cluster from the start
	if err != nil {
		c.cancel()
		c.cache.Close()
		client.Close()
		return nil, err
	}
	// Until the first reconcile gives them their roles, the local
	// partitions lead nothing: a node must not take writes for partitions
	// the cluster may have given to another while it was away.
	for _, t := range n.TopicsSnapshot() {
		for _, p := range t.Partitions {
			p.SetRole(broker.Role{Leader: cluster.NoLeader})
		}
	}
	n.SetISRWriter(c.writeISR)
	n.SetProducerIDAllocator(c.allocateProducerIDs)
	return n, nil
}

// claimClusterID is the cluster's ID: etcd's, or the one this node names
// it with (its data directory's, or a new one). A node with topics does
// not name a cluster: etcd's empty topic list would have its first
// reconcile delete them all (etcd wiped, or a node alone pointed at a new
// etcd), and a node alone cannot be turned into a member yet.
func claimClusterID(client *clientv3.Client, cfg NodeConfig, cc ClusterConfig) (string, error) {
	proposed := rb.NewTopicID().String()
	meta, haveDir, err := logstore.ReadMeta(cfg.FS, cfg.DataDir)
	if err != nil {
		return "", err
	}
	if haveDir {
		proposed = meta.ClusterID
	}
	ctx, cancel := context.WithTimeout(context.Background(), cc.DialTimeout)
	defer cancel()
	if _, exists, err := cluster.ClusterID(ctx, client); err != nil {
		return "", fmt.Errorf("engine: etcd at %v: %w", cc.Endpoints, err)
	} else if !exists && haveDir {
		if topics, err := logstore.TopicNames(cfg.FS, cfg.DataDir); err != nil {
			return "", err
		} else if len(topics) > 0 {
			return "", fmt.Errorf("engine: %s holds topics %v and etcd at %v holds no cluster: this node would name "+
				"a new cluster and find none of them there (etcd's data lost, or a node alone pointed at a new etcd); "+
				"a node alone cannot join a cluster with its topics yet: start it alone, or restore etcd", cfg.DataDir, topics, cc.Endpoints)
		}
	}
	id, named, err := cluster.ClaimClusterID(ctx, client, proposed)
	if err != nil {
		return "", fmt.Errorf("engine: etcd at %v: %w", cc.Endpoints, err)
	}
	if named {
		cfg.Logger.Info("named the cluster", "cluster", id, "etcd", cc.Endpoints)
	}
	return id, nil
}

// Clustered reports whether the node is one of a cluster.
func (n *Node) Clustered() bool { return n.member != nil }

// JoinCluster registers the node at its advertised address (call it once
// the listeners are bound) and starts the controller candidacy and the
// reconcile loop. A node alone has nothing to join.
func (n *Node) JoinCluster(ctx context.Context) error {
	c := n.member
	if c == nil {
		return nil
	}
	reg, err := c.join(ctx, n.Cluster())
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.reg = reg
	c.mu.Unlock()
	c.wg.Go(func() { c.keepRegistered(c.ctx) })
	c.wg.Go(func() { c.runController(c.ctx) })
	c.wg.Go(func() { n.reconcileLoop(c.ctx) })
	c.wg.Go(func() { n.mirrorLoop(c.ctx) })
	c.wg.Go(func() { n.epochLoop(c.ctx) })
	return nil
}

// join registers the node, waiting out the lease of its previous run (a
// node killed and restarted within the TTL finds its old key still there:
// ErrDuplicateNode until etcd expires it).
func (c *clusterNode) join(ctx context.Context, self netio.ClusterInfo) (*cluster.Registration, error) {
	node := cluster.Node{ID: c.cfg.NodeID, Host: self.Host, Port: self.Port, Rack: c.cfg.Rack}
	deadline := time.Now().Add(2*c.cfg.LeaseTTL + c.cfg.DialTimeout)
	for {
		reg, err := cluster.Join(ctx, c.client, c.id, node, c.cfg.LeaseTTL)
		if err == nil {
			c.log.Info("joined the cluster", "host", self.Host, "port", self.Port)
			return reg, nil
		}
		if !errors.Is(err, cluster.ErrDuplicateNode) || time.Now().After(deadline) {
			return nil, fmt.Errorf("engine: join the cluster: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("engine: join the cluster: %w", ctx.Err())
		case <-time.After(clusterRejoinInterval):
		}
	}
}

// keepRegistered registers the node again whenever its registration is
// lost: on its living lease when etcd was only out of reach (cluster.Rejoin),
// else anew.
func (c *clusterNode) keepRegistered(ctx context.Context) {
	for {
		c.mu.Lock()
		reg := c.reg
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-reg.Lost():
		}
		c.log.Warn("the cluster registration's keep-alive ended: registering again")
		for {
			next, err := cluster.Rejoin(ctx, reg, c.id, c.cfg.LeaseTTL)
			if err == nil {
				c.mu.Lock()
				c.reg = next
				c.mu.Unlock()
				c.log.Info("registered again")
				break
			}
			c.log.Warn("registering again failed", "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(clusterRejoinInterval):
			}
		}
	}
}

// runController campaigns for the controller and runs it while elected,
// for as long as the node runs.
func (c *clusterNode) runController(ctx context.Context) {
	cfg := cluster.ControllerConfig{ReplicationFactor: c.cfg.ReplicationFactor, TTL: c.cfg.LeaseTTL, Logger: c.base} // it adds the cluster and node itself
	for ctx.Err() == nil {
		if err := cluster.RunController(ctx, c.client, c.id, c.cfg.NodeID, cfg); err != nil && ctx.Err() == nil {
			c.log.Warn("controller stopped; campaigning again", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(clusterControllerBackoff):
			}
		}
	}
}

// closeCluster leaves the cluster: the lease is revoked, so the controller
// moves this node's leaderships at once rather than after the TTL.
func (n *Node) closeCluster() {
	c := n.member
	if c == nil {
		return
	}
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	reg := c.reg
	c.mu.Unlock()
	if reg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.DialTimeout)
		if err := reg.Close(ctx); err != nil {
			c.log.Warn("leaving the cluster", "error", err)
		}
		cancel()
	}
	c.cache.Close()
	n.SetFollowing(nil)
	c.client.Close()
}

// writeISR is the leader's ISR writer: a compare-and-swap on the
// partition's key (cluster.AlterISR), answering the role it wrote.
func (c *clusterNode) writeISR(ctx context.Context, tp logstore.TopicPartition, r broker.Role, isr []int32) (broker.Role, error) {
	st, err := cluster.AlterISR(ctx, c.client, c.id, cluster.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}, int32(r.LeaderEpoch), r.PartitionEpoch, isr)
	if err != nil {
		return r, err
	}
	return roleOf(st), nil
}

// allocateProducerIDs takes a block of the cluster's producer IDs.
func (c *clusterNode) allocateProducerIDs(minStart, size int64) (int64, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.DialTimeout)
	defer cancel()
	return cluster.AllocateProducerIDs(ctx, c.client, c.id, minStart, size)
}

// roleOf is a partition's role as etcd has it.
func roleOf(st cluster.PartitionState) broker.Role {
	return broker.Role{Leader: st.Leader, LeaderEpoch: rb.Epoch(st.LeaderEpoch), Replicas: slices.Clone(st.Replicas), ISR: slices.Clone(st.ISR), PartitionEpoch: st.ModRevision}
}

// reconcileLoop reconciles at each change of the cache.
func (n *Node) reconcileLoop(ctx context.Context) {
	c := n.member
	for {
		changed := c.cache.Changed()
		if c.cache.Revision() > 0 { // the first read is done: the cache is the cluster
			n.reconcile(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// reconcile makes the node's local partitions what etcd says: it creates
// the partitions placed here, gives every local partition its role, points
// the followers at their leaders, and deletes the topics etcd no longer has.
func (n *Node) reconcile(ctx context.Context) {
	c := n.member
	self := c.cfg.NodeID
	specs := c.cache.Topics()
	parts, _ := c.cache.Partitions()
	live := map[int32]cluster.Node{}
	var liveIDs []int32
	for _, ln := range c.cache.LiveNodes() {
		live[ln.ID] = ln
		liveIDs = append(liveIDs, ln.ID)
	}
	n.SetLiveNodes(liveIDs) // before the roles: a new ISR's high watermark must not wait on a dead follower

	for _, t := range n.TopicsSnapshot() {
		if spec, ok := specs[t.Name]; !ok || spec.TopicID != t.ID.String() {
			// Deleted (or deleted and created again under a new ID): the
			// local copy goes; a new incarnation is made below.
			if err := n.Node.DeleteTopic(ctx, t.Name); err != nil {
				c.log.Error("deleting a topic etcd no longer has failed", "topic", t.Name, "error", err)
			}
		}
	}

	var ensure []broker.EnsuredTopic
	placedHere := map[string]bool{}
	for tp, st := range parts {
		if slices.Contains(st.Replicas, self) {
			placedHere[tp.Topic] = true
		}
	}
	for name := range placedHere {
		spec, ok := specs[name]
		if !ok {
			continue
		}
		id, err := rb.ParseTopicID(spec.TopicID)
		if err != nil {
			c.log.Error("a topic's ID in etcd is not a UUID", "topic", name, "id", spec.TopicID)
			continue
		}
		ensure = append(ensure, broker.EnsuredTopic{Name: name, ID: id, Partitions: spec.Partitions})
	}
	for _, e := range n.EnsureTopics(ctx, ensure) {
		if e.Err != nil {
			c.log.Error("creating a topic placed on this node failed", "topic", e.Name, "error", e.Err)
			continue
		}
		if mirror := specs[e.Name].Mirror; mirror != "" {
			// A mirror topic's partitions are read-only on every replica
			// until their records say STOPPED or the mirror is deleted
			// (its leader's mirror sets it too).
			_, live := c.cache.MirrorCreateRevision(mirror)
			for i, p := range e.Local {
				record, ok := n.states.get(MirrorStateKey{Mirror: mirror, TopicID: e.ID, Partition: int32(i)})
				if !live || ok && record.State == mirrorstate.Stopped {
					p.SetReadOnly(nil)
				} else {
					p.SetReadOnly(mirrorTopicRefusal(e.Name, mirror))
				}
			}
		}
		// The topic's configs are etcd's (cluster_configs.go): set at
		// creation, and put back when they differ.
		want := specs[e.Name].Configs
		if have, _, err := n.TopicConfigs(e.Name); err == nil && !maps.Equal(have, want) {
			if err := n.SetTopicConfigs(e.Name, want, clusterConfigOrigin); err != nil {
				c.log.Error("setting a topic's configs from etcd failed", "topic", e.Name, "error", err)
			}
		}
	}

	targets := map[logstore.TopicPartition]FollowTarget{}
	ledMirrored := map[logstore.TopicPartition]bool{}
	for _, t := range n.TopicsSnapshot() {
		for i, p := range t.Partitions {
			st, ok := parts[cluster.TopicPartition{Topic: t.Name, Partition: int32(i)}]
			if !ok {
				p.SetRole(broker.Role{Leader: cluster.NoLeader})
				continue
			}
			p.SetRole(roleOf(st))
			if st.Leader == self && specs[t.Name].Mirror != "" {
				ledMirrored[p.Topic()] = true
			}
			if st.Leader == self || st.Leader == cluster.NoLeader || !slices.Contains(st.Replicas, self) {
				continue
			}
			if leader, ok := live[st.Leader]; ok {
				targets[p.Topic()] = FollowTarget{Leader: netio.Broker{NodeID: leader.ID, Host: leader.Host, Port: leader.Port, Rack: leader.Rack}, LeaderEpoch: rb.Epoch(st.LeaderEpoch)}
			}
		}
	}
	n.SetFollowing(targets)
	n.noteMirrorLeaderships(ledMirrored)
}

// Backend is the netio.Backend the node's listeners serve: the node
// itself when alone, and its cluster view in a cluster.
func (n *Node) Backend() netio.Backend {
	if n.member == nil {
		return n
	}
	return clusterBackend{n}
}
