package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// controllerRetryBackoff is how long the controller loop waits after a
	// failed campaign or a failed write (etcd unreachable) before it tries
	// again, unless the cache changes first.
	controllerRetryBackoff = 500 * time.Millisecond
	// staleAttempts bounds the re-reads of one reconciliation whose writes
	// keep finding partitions changed (ISR changes racing it).
	staleAttempts = 5
)

// ControllerConfig configures RunController.
type ControllerConfig struct {
	// ReplicationFactor is default.replication.factor: the replicas of a
	// partition whose spec names none, capped by the live nodes.
	ReplicationFactor int
	// TTL is the controller session's lease: a controller that stops
	// renewing it is replaced after it.
	TTL    time.Duration
	Logger *slog.Logger // nil: discard

	afterBatch func(nodeID int32) // a test's hook after each committed transaction
}

// RunController is a node's controller duty until ctx ends: it campaigns
// (Campaign), and while elected it keeps the partitions in etcd in line with
// the topic specs and the live nodes, reacting to its cache's changes (the
// watch; it never polls):
//
//   - partitions of a spec that have no assignment are placed on the live
//     nodes that are not drained (AssignReplicas; the replication factor is
//     the spec's, or ReplicationFactor, capped by those nodes);
//   - a partition whose leader is lost or drained gets a new leader from its
//     live ISR with the leader epoch + 1, lost nodes leave the ISR, and a
//     partition with no live in-sync replica is leaderless (ElectLeaders);
//   - partitions whose spec is gone (or is of another topic ID) are
//     deleted.
//
// Every write is fenced by the election (Controller.Apply). A write that
// finds a partition changed (ErrStaleMetadata) reads the cluster again and
// recomputes; a refused fence, or the session's end, sends the node back to
// campaigning. It returns nil when ctx ends, and an error only for a bad
// configuration.
func RunController(ctx context.Context, client *clientv3.Client, clusterID string, nodeID int32, cfg ControllerConfig) error {
	if cfg.ReplicationFactor < 1 {
		return fmt.Errorf("cluster: controller replication factor %d", cfg.ReplicationFactor)
	}
	if cfg.TTL < time.Second {
		return fmt.Errorf("cluster: controller session TTL %v is under a second", cfg.TTL)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("node", nodeID, "cluster", clusterID)
	for ctx.Err() == nil {
		c, err := Campaign(ctx, client, clusterID, nodeID, cfg.TTL)
		if err != nil {
			if ctx.Err() == nil {
				logger.Warn("controller campaign failed", "err", err)
				sleepCtx(ctx, controllerRetryBackoff)
			}
			continue
		}
		if cfg.afterBatch != nil {
			c.afterBatch = func() { cfg.afterBatch(nodeID) }
		}
		logger.Info("elected controller", "electionRevision", c.election.Rev())
		err = c.control(ctx, cfg.ReplicationFactor, logger)
		select {
		case <-c.Done(): // the session is gone already, and its lease with it
		default:
			// A refused fence means the lease is usually gone too.
			if closeErr := c.Close(); closeErr != nil && !errors.Is(closeErr, rpctypes.ErrLeaseNotFound) {
				logger.Warn("closing the controller session", "err", closeErr)
			}
		}
		logger.Info("no longer the controller", "err", err)
	}
	return nil
}

// control is one term: it reconciles on each change of a cache of its own
// until the session ends, the fence refuses a write, or ctx ends.
func (c *Controller) control(ctx context.Context, replicationFactor int, logger *slog.Logger) error {
	ctx, cancel := contextUntil(ctx, c.Done())
	defer cancel()
	cache := StartCache(ctx, c.client, c.clusterID)
	defer cache.Close()
	var retry <-chan time.Time
	for {
		changed := cache.Changed()
		// Act only on a state read after the election was won: it holds
		// everything the previous controller wrote.
		if state := cache.snapshot(); state.revision >= c.election.Rev() && retry == nil {
			revision, err := c.reconcile(ctx, state, replicationFactor, logger)
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, ErrNotController):
				return err
			case err != nil:
				logger.Warn("controller write failed; retrying", "err", err)
				retry = time.After(controllerRetryBackoff)
			case revision > 0:
				if err := cache.WaitRevision(ctx, revision); err != nil {
					return nil // ctx ended
				}
				continue
			}
		}
		select {
		case <-changed:
		case <-retry:
			retry = nil
		case <-ctx.Done():
			return nil
		}
	}
}

// reconcile writes what planControl computes from state; on
// ErrStaleMetadata it reads the cluster again and recomputes, at most
// staleAttempts times. It returns the revision of its last write (0 if it
// wrote nothing).
func (c *Controller) reconcile(ctx context.Context, state clusterState, replicationFactor int, logger *slog.Logger) (int64, error) {
	for range staleAttempts {
		plan, err := planControl(state, replicationFactor)
		if err != nil {
			return 0, err
		}
		if plan.unplaced > 0 {
			logger.Warn("partitions wait for a live node that is not drained", "partitions", plan.unplaced)
		}
		if len(plan.ops) == 0 {
			return 0, nil
		}
		revision, err := c.apply(ctx, plan.ops)
		if !errors.Is(err, ErrStaleMetadata) {
			if err == nil {
				logger.Info("controller wrote partitions", "elected", plan.elected, "placed", plan.placed, "deleted", plan.deleted, "revision", revision)
			}
			return revision, err
		}
		if state, err = readState(ctx, c.client, c.clusterID); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("cluster: controller %d: partitions changed under %d attempts: %w", c.nodeID, staleAttempts, ErrStaleMetadata)
}

// controlPlan is what the controller writes for one state.
type controlPlan struct {
	ops                      []partitionOp // elections, then placements, then deletes, each in partition order
	elected, placed, deleted int           // the ops of each kind
	unplaced                 int           // partitions of specs with no node to go to
}

// planControl is the controller's decision for one state, pure: partitions
// of gone specs deleted, leaders elected (ElectLeaders), missing partitions
// of specs placed (AssignReplicas), each spec's replication factor or
// replicationFactor.
func planControl(state clusterState, replicationFactor int) (controlPlan, error) {
	var plan controlPlan
	live := state.liveNodes()
	kept := make(Assignments, len(state.partitions))
	var deletes []partitionOp
	for tp, p := range state.partitions {
		spec, ok := state.topics[tp.Topic]
		if ok && spec.TopicID == p.TopicID && tp.Partition < spec.Partitions {
			kept[tp] = p.Assignment
			continue
		}
		deletes = append(deletes, partitionOp{
			Write:     Write{Partition: tp, ModRevision: p.ModRevision},
			delete:    true,
			guardSpec: true, specRevision: spec.ModRevision, // 0 when the spec is gone
		})
	}
	for tp, a := range ElectLeaders(live, kept) {
		plan.ops = append(plan.ops, partitionOp{Write: Write{Partition: tp, Assignment: a, ModRevision: state.partitions[tp].ModRevision}})
		kept[tp] = a
	}
	plan.elected = len(plan.ops)
	sortOps(plan.ops)

	// New partitions, grouped by replication factor, counted against what
	// is placed so far so that leaders and replicas stay spread.
	byFactor := make(map[int][]NewPartition)
	specRevisions := make(map[string]int64)
	for topic, spec := range state.topics {
		for n := range spec.Partitions {
			tp := TopicPartition{Topic: topic, Partition: n}
			if _, ok := kept[tp]; ok {
				continue
			}
			if _, ok := state.partitions[tp]; ok {
				continue // deleted above (another topic ID): placed once the delete is seen
			}
			rf := cmp.Or(spec.ReplicationFactor, replicationFactor)
			byFactor[rf] = append(byFactor[rf], NewPartition{TopicPartition: tp, TopicID: spec.TopicID})
			specRevisions[topic] = spec.ModRevision
		}
	}
	var placements []partitionOp
	for _, rf := range slices.Sorted(maps.Keys(byFactor)) {
		placed, err := AssignReplicas(live, kept, byFactor[rf], rf)
		if errors.Is(err, ErrNoLiveNodes) {
			plan.unplaced += len(byFactor[rf])
			continue
		}
		if err != nil {
			return controlPlan{}, err
		}
		for tp, a := range placed {
			kept[tp] = a
			placements = append(placements, partitionOp{
				Write:     Write{Partition: tp, Assignment: a},
				guardSpec: true, specRevision: specRevisions[tp.Topic],
			})
		}
	}
	sortOps(placements)
	sortOps(deletes)
	plan.placed, plan.deleted = len(placements), len(deletes)
	plan.ops = append(append(plan.ops, placements...), deletes...)
	return plan, nil
}

func sortOps(ops []partitionOp) {
	slices.SortFunc(ops, func(a, b partitionOp) int { return compareTopicPartition(a.Partition, b.Partition) })
}

// contextUntil returns a context that ends with ctx or when done closes.
func contextUntil(ctx context.Context, done <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
