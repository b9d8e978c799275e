package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// writesPerTxn bounds the partition writes of one controller transaction:
// each write is a compare and a put inside the fence's nested transaction,
// and etcd refuses transactions of more than --max-txn-ops (128) operations.
const writesPerTxn = 64

// Controller is the elected controller of a cluster: it holds the election
// on the controller/ prefix under its own session (a lease of its own TTL)
// and writes assignments and leaders, each write fenced by its election.
type Controller struct {
	client    *clientv3.Client
	clusterID string
	nodeID    int32
	session   *concurrency.Session
	election  *concurrency.Election

	afterBatch func() // a test's hook, run after each transaction apply commits
}

// Campaign blocks until node nodeID is the controller of the cluster (or ctx
// ends, or the session's lease is lost while it waits). The election lives
// with a session of the given TTL: if the node stops renewing it, its
// election key goes and the next candidate wins.
func Campaign(ctx context.Context, client *clientv3.Client, clusterID string, nodeID int32, ttl time.Duration) (*Controller, error) {
	if ttl < time.Second {
		return nil, fmt.Errorf("cluster: session TTL %v is under a second", ttl)
	}
	// The lease is granted here, under ctx, rather than by NewSession under
	// the client's context, so that a campaign against an unreachable etcd
	// ends with ctx.
	seconds := int(ttl / time.Second)
	grant, err := client.Grant(ctx, int64(seconds))
	if err != nil {
		return nil, fmt.Errorf("cluster: node %d: controller lease: %w", nodeID, err)
	}
	session, err := concurrency.NewSession(client, concurrency.WithLease(grant.ID), concurrency.WithTTL(seconds))
	if err != nil {
		if _, revokeErr := client.Revoke(context.WithoutCancel(ctx), grant.ID); revokeErr != nil {
			err = fmt.Errorf("%w (and revoking its lease: %v)", err, revokeErr)
		}
		return nil, fmt.Errorf("cluster: node %d: controller session: %w", nodeID, err)
	}
	// A candidate whose lease expires while it waits has no key left in
	// the election: its campaign ends rather than "winning" without one.
	campaignCtx, cancel := contextUntil(ctx, session.Done())
	defer cancel()
	election := concurrency.NewElection(session, controllerPrefix(clusterID))
	if err := election.Campaign(campaignCtx, strconv.FormatInt(int64(nodeID), 10)); err != nil {
		if closeErr := session.Close(); closeErr != nil {
			err = fmt.Errorf("%w (and closing its session: %v)", err, closeErr)
		}
		return nil, fmt.Errorf("cluster: node %d: campaign: %w", nodeID, err)
	}
	return &Controller{client: client, clusterID: clusterID, nodeID: nodeID, session: session, election: election}, nil
}

// Done is closed when the controller's session has ended (Close, or its
// lease expired): it is no longer the controller.
func (c *Controller) Done() <-chan struct{} { return c.session.Done() }

// Close ends the controller's session, revoking its lease, which deletes its
// election key: the next candidate becomes controller at once.
func (c *Controller) Close() error {
	if err := c.session.Close(); err != nil {
		return fmt.Errorf("cluster: node %d: close controller session: %w", c.nodeID, err)
	}
	return nil
}

// fence is the comparison every controller write carries: the election key
// is still the one this controller created.
func (c *Controller) fence() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(c.election.Key()), "=", c.election.Rev())
}

// Write is one partition's assignment for the controller to write, and the
// ModRevision it was computed from: 0 for a partition that must not exist
// yet.
type Write struct {
	Partition   TopicPartition
	Assignment  Assignment
	ModRevision int64
}

// Apply writes the assignments, writesPerTxn to a transaction, each
// transaction fenced by the election: if this controller has been deposed
// the write is refused with ErrNotController. Inside the fence each write
// compares its partition's ModRevision (or that it does not exist), and if
// any partition changed since it was read the transaction writes nothing
// and Apply returns ErrStaleMetadata: re-read and recompute. The
// transactions before a refused one stay written; each partition's value is
// whole on its own.
func (c *Controller) Apply(ctx context.Context, writes []Write) error {
	ops := make([]partitionOp, len(writes))
	for i, w := range writes {
		ops[i] = partitionOp{Write: w}
	}
	_, err := c.apply(ctx, ops)
	return err
}

// partitionOp is one controller write of a partition: a put of its
// assignment, or its delete, and optionally a guard on its topic's spec.
type partitionOp struct {
	Write
	delete bool // delete the key (at Write.ModRevision) instead of putting Assignment
	// guardSpec adds a compare of the topic spec's ModRevision with
	// specRevision (0: the spec must not exist) to the op's transaction:
	// a placement never outlives a deleted or changed spec.
	guardSpec    bool
	specRevision int64
}

// apply is Apply for puts, deletes and spec guards. It returns the
// revision of its last transaction (0 when ops is empty).
func (c *Controller) apply(ctx context.Context, ops []partitionOp) (int64, error) {
	seen := make(map[TopicPartition]bool, len(ops))
	for _, op := range ops {
		if !op.delete {
			if err := op.Assignment.valid(); err != nil {
				return 0, fmt.Errorf("cluster: write of %s: %w", op.Partition, err)
			}
		} else if op.ModRevision == 0 {
			return 0, fmt.Errorf("cluster: delete of %s without the revision it was read at", op.Partition)
		}
		if seen[op.Partition] {
			return 0, fmt.Errorf("cluster: %s written twice in one Apply", op.Partition)
		}
		seen[op.Partition] = true
	}
	var revision int64
	for batch := range slices.Chunk(ops, writesPerTxn) {
		// At most writesPerTxn partition compares and as many spec
		// compares, under etcd's limit of 128 per transaction level.
		compares := make([]clientv3.Cmp, 0, 2*len(batch))
		writes := make([]clientv3.Op, 0, len(batch))
		guarded := make(map[string]bool)
		for _, op := range batch {
			key := partitionKey(c.clusterID, op.Partition)
			if op.ModRevision == 0 {
				compares = append(compares, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
			} else {
				compares = append(compares, clientv3.Compare(clientv3.ModRevision(key), "=", op.ModRevision))
			}
			if op.guardSpec && !guarded[op.Partition.Topic] {
				guarded[op.Partition.Topic] = true
				compares = append(compares, clientv3.Compare(clientv3.ModRevision(topicKey(c.clusterID, op.Partition.Topic)), "=", op.specRevision))
			}
			if op.delete {
				writes = append(writes, clientv3.OpDelete(key))
			} else {
				writes = append(writes, clientv3.OpPut(key, encodeJSON(op.Assignment)))
			}
		}
		resp, err := c.client.Txn(ctx).
			If(c.fence()).
			Then(clientv3.OpTxn(compares, writes, nil)).
			Commit()
		if err != nil {
			return revision, fmt.Errorf("cluster: controller %d: write: %w", c.nodeID, err)
		}
		if !resp.Succeeded {
			return revision, fmt.Errorf("cluster: node %d: %w", c.nodeID, ErrNotController)
		}
		if !resp.Responses[0].GetResponseTxn().Succeeded {
			return revision, fmt.Errorf("cluster: controller %d: write of %d partitions: %w", c.nodeID, len(batch), ErrStaleMetadata)
		}
		revision = resp.Header.Revision
		if c.afterBatch != nil {
			c.afterBatch()
		}
	}
	return revision, nil
}

// CreatePartitions places the partitions not yet assigned on the live
// nodes (AssignReplicas) and writes them. It returns what it wrote. It is
// the bare write, without a topic spec: a RunController deletes partitions
// that no spec holds, so nodes create topics with CreateTopic instead.
func (c *Controller) CreatePartitions(ctx context.Context, partitions []NewPartition, replicationFactor int) (Assignments, error) {
	state, err := readState(ctx, c.client, c.clusterID)
	if err != nil {
		return nil, err
	}
	placed, err := AssignReplicas(state.liveNodes(), state.assignments(), partitions, replicationFactor)
	if err != nil {
		return nil, err
	}
	writes := make([]Write, 0, len(placed))
	for tp, a := range placed {
		writes = append(writes, Write{Partition: tp, Assignment: a})
	}
	sortWrites(writes)
	return placed, c.Apply(ctx, writes)
}

// ElectLeaders reads the live nodes and the assignments at one revision,
// and writes what ElectLeaders (the placement) changes: lost nodes out of
// the ISR, leaderships moved to in-sync live replicas. It returns what it
// wrote.
func (c *Controller) ElectLeaders(ctx context.Context) (Assignments, error) {
	state, err := readState(ctx, c.client, c.clusterID)
	if err != nil {
		return nil, err
	}
	changed := ElectLeaders(state.liveNodes(), state.assignments())
	writes := make([]Write, 0, len(changed))
	for tp, a := range changed {
		writes = append(writes, Write{Partition: tp, Assignment: a, ModRevision: state.partitions[tp].ModRevision})
	}
	sortWrites(writes)
	return changed, c.Apply(ctx, writes)
}

func sortWrites(writes []Write) {
	slices.SortFunc(writes, func(a, b Write) int { return compareTopicPartition(a.Partition, b.Partition) })
}

// AlterISR is a partition leader's change of its ISR: a compare-and-swap
// that succeeds only if the partition's key is still at modRevision (the
// partition epoch the leader last saw) and its leader epoch is still
// leaderEpoch. A leader deposed by a newer epoch, or one that raced another
// change, gets ErrStaleMetadata and must re-read. The new ISR must be a
// subset of the replicas holding the leader (ErrInvalidISR). It returns the
// partition as written, with its new ModRevision.
func AlterISR(ctx context.Context, client *clientv3.Client, clusterID string, tp TopicPartition, leaderEpoch int32, modRevision int64, isr []int32) (PartitionState, error) {
	key := partitionKey(clusterID, tp)
	resp, err := client.Get(ctx, key)
	if err != nil {
		return PartitionState{}, fmt.Errorf("cluster: AlterISR %s: %w", tp, err)
	}
	if len(resp.Kvs) == 0 {
		return PartitionState{}, fmt.Errorf("cluster: AlterISR %s: %w", tp, ErrUnknownPartition)
	}
	kv := resp.Kvs[0]
	current, err := decodeAssignment(tp, kv.Value)
	if err != nil {
		return PartitionState{}, err
	}
	if kv.ModRevision != modRevision || current.LeaderEpoch != leaderEpoch {
		return PartitionState{}, fmt.Errorf("cluster: AlterISR %s at epoch %d revision %d, the partition is at epoch %d revision %d: %w",
			tp, leaderEpoch, modRevision, current.LeaderEpoch, kv.ModRevision, ErrStaleMetadata)
	}
	next := current
	next.ISR = slices.Clone(isr)
	if err := checkISR(next.Replicas, next.Leader, next.ISR); err != nil || next.Leader == NoLeader {
		return PartitionState{}, fmt.Errorf("cluster: AlterISR %s to %v (leader %d): %w", tp, isr, next.Leader, ErrInvalidISR)
	}
	txn, err := client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", modRevision)).
		Then(clientv3.OpPut(key, encodeJSON(next))).
		Commit()
	if err != nil {
		return PartitionState{}, fmt.Errorf("cluster: AlterISR %s: %w", tp, err)
	}
	if !txn.Succeeded {
		return PartitionState{}, fmt.Errorf("cluster: AlterISR %s at revision %d: %w", tp, modRevision, ErrStaleMetadata)
	}
	return PartitionState{Assignment: next, ModRevision: txn.Header.Revision}, nil
}
