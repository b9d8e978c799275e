package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// resyncBackoff is how long the cache waits before reading again after a
// failed read, so that an unreachable etcd is not spun on.
const resyncBackoff = 200 * time.Millisecond

// errWatchEnded: the watch stopped (compacted, canceled, or lost its etcd
// leader) and the cache must read the prefix again.
var errWatchEnded = errors.New("cluster: watch ended")

// Cache is a node's copy of the cluster's registry, drain marks, controller
// election, topic specs and partition assignments: one Get of the cluster prefix at a revision, then a Watch
// from the next revision applied event by event. When the watch ends
// (compaction of the revisions it needed, cancellation, a lost etcd leader)
// the cache reads the prefix again and watches from there: a resync. While
// etcd is unreachable the cache keeps the last state it had, so readers on
// the data path never wait on etcd.
//
// One goroutine, started by StartCache and waited for by Close, owns the
// updates; readers take copies under the mutex.
type Cache struct {
	client    *clientv3.Client
	clusterID string
	cancel    context.CancelFunc
	done      chan struct{}

	mu      sync.Mutex
	state   clusterState  // guarded by mu; state.revision is the last applied
	changed chan struct{} // guarded by mu; closed and replaced at each change of state.revision
	resyncs int           // guarded by mu; whole reads that replaced a state
	err     error         // guarded by mu; the last read, watch or decode error, nil after a good read
}

// StartCache starts the cache of a cluster; Close stops it.
func StartCache(ctx context.Context, client *clientv3.Client, clusterID string) *Cache {
	return startCache(ctx, client, clusterID, clusterState{})
}

// startCache starts a cache from state: the zero state reads the prefix
// first; a state read earlier (its revision set) is watched from its next
// revision, as after a read.
func startCache(ctx context.Context, client *clientv3.Client, clusterID string, from clusterState) *Cache {
	ctx, cancel := context.WithCancel(ctx)
	c := &Cache{
		client:    client,
		clusterID: clusterID,
		cancel:    cancel,
		done:      make(chan struct{}),
		state:     newClusterState(),
		changed:   make(chan struct{}),
	}
	go func() {
		defer close(c.done)
		c.run(ctx, from)
	}()
	return c
}

// Close stops the cache's goroutine and waits for it.
func (c *Cache) Close() {
	c.cancel()
	<-c.done
}

// Revision returns the etcd revision the cache has applied up to.
func (c *Cache) Revision() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.revision
}

// LiveNodes returns the registered nodes, by ID.
func (c *Cache) LiveNodes() []Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.liveNodes()
}

// Partitions returns a copy of the partitions and the revision they are of.
func (c *Cache) Partitions() (map[TopicPartition]PartitionState, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.state.partitions), c.state.revision
}

// Partition returns one partition's state.
func (c *Cache) Partition(tp TopicPartition) (PartitionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.state.partitions[tp]
	return p, ok
}

// Topics returns a copy of the topic specs, by name.
func (c *Cache) Topics() map[string]TopicSpec {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]TopicSpec, len(c.state.topics))
	for name, t := range c.state.topics {
		out[name] = t.TopicSpec.clone()
	}
	return out
}

// TopicIDs returns every topic's ID (as the spec holds it) and partition
// count, by name: what a Metadata of every topic lists, without copying
// the specs' configs.
func (c *Cache) TopicIDs() map[string]TopicIDCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]TopicIDCount, len(c.state.topics))
	for name, t := range c.state.topics {
		out[name] = TopicIDCount{TopicID: t.TopicID, Partitions: t.Partitions}
	}
	return out
}

// TopicIDCount is a topic's ID and partition count.
type TopicIDCount struct {
	TopicID    string
	Partitions int32
}

// Topic returns one topic's spec and the ModRevision it was written at.
func (c *Cache) Topic(name string) (TopicState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.state.topics[name]
	t.TopicSpec = t.TopicSpec.clone()
	return t, ok
}

// Drained returns the node IDs with a drain mark, live or not, in order.
func (c *Cache) Drained() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.state.drained))
}

// ControllerID returns the node ID of the elected controller (the
// election's candidate with the lowest create revision), or NoLeader when
// no node campaigns. It is the election's view: a controller whose session
// has just expired is listed until etcd deletes its key.
func (c *Cache) ControllerID() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.controllerID()
}

// snapshot returns a copy of the whole state, for the controller.
func (c *Cache) snapshot() clusterState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.clone()
}

// Err returns the last error the cache met (nil after a good read).
func (c *Cache) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Changed returns a channel closed at the cache's next change (a watch
// event or a resync): a reader, such as the controller watching the live
// nodes, waits on it and then reads the cache again.
func (c *Cache) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// WaitRevision returns once the cache has applied revision (that of a write
// under the cluster's prefix), or ctx's error.
func (c *Cache) WaitRevision(ctx context.Context, revision int64) error {
	for {
		changed := c.Changed()
		if c.Revision() >= revision {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("cluster: cache at revision %d, waiting for %d: %w", c.Revision(), revision, ctx.Err())
		}
	}
}

// WaitTopicPlaced returns once every partition of topic's spec has an
// assignment of the spec's topic ID in the cache (the controller placed
// them), ErrUnknownTopic if the spec is not (or no longer) there, or ctx's
// error. revision is that of the caller's write of the spec
// (TopicState.ModRevision), so that the cache has seen it. A node that wrote a spec with CreateTopic or GrowTopic waits here
// before it answers, as Kafka's CreateTopics answers once its controller
// has committed the partitions.
func (c *Cache) WaitTopicPlaced(ctx context.Context, topic string, revision int64) error {
	if err := c.WaitRevision(ctx, revision); err != nil {
		return err
	}
	for {
		changed := c.Changed()
		placed, err := c.topicPlaced(topic)
		if placed || err != nil {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for topic %s to be placed: %w", topic, ctx.Err())
		}
	}
}

func (c *Cache) topicPlaced(topic string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	spec, ok := c.state.topics[topic]
	if !ok {
		return false, fmt.Errorf("cluster: topic %s: %w", topic, ErrUnknownTopic)
	}
	for n := range spec.Partitions {
		p, ok := c.state.partitions[TopicPartition{Topic: topic, Partition: n}]
		if !ok || p.TopicID != spec.TopicID {
			return false, nil
		}
	}
	return true, nil
}

// run watches from state (if it has a revision; else it reads first), and
// reads and watches again each time the watch ends, until ctx ends.
func (c *Cache) run(ctx context.Context, state clusterState) {
	for ctx.Err() == nil {
		if state.revision == 0 {
			var err error
			if state, err = readState(ctx, c.client, c.clusterID); err != nil {
				c.setErr(err)
				select {
				case <-ctx.Done():
				case <-time.After(resyncBackoff):
				}
				continue
			}
		}
		c.replace(state)
		c.setErr(c.follow(ctx, state.revision+1))
		state = clusterState{}
	}
}

// follow applies the watch's events from revision from until the watch
// ends; it returns why.
func (c *Cache) follow(ctx context.Context, from int64) error {
	watchCtx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	events := c.client.Watch(watchCtx, clusterPrefix(c.clusterID), clientv3.WithPrefix(), clientv3.WithRev(from))
	for resp := range events {
		if resp.CompactRevision != 0 {
			return fmt.Errorf("%w: revision %d compacted (needed %d)", errWatchEnded, resp.CompactRevision, from)
		}
		if err := resp.Err(); err != nil || resp.Canceled {
			return fmt.Errorf("%w: %v", errWatchEnded, err)
		}
		if err := c.applyEvents(resp.Events, resp.Header.Revision); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("%w: channel closed", errWatchEnded)
}

// applyEvents applies one watch response. A value that does not decode
// ends the watch (a resync reads it again and reports it) rather than
// leaving the cache quietly wrong.
func (c *Cache) applyEvents(events []*clientv3.Event, revision int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range events {
		key := string(ev.Kv.Key)
		var err error
		if ev.Type == mvccpb.DELETE {
			err = c.state.remove(c.clusterID, key)
		} else {
			err = c.state.put(c.clusterID, key, ev.Kv.Value, ev.Kv.CreateRevision, ev.Kv.ModRevision)
		}
		if err != nil {
			return err
		}
	}
	if revision > c.state.revision {
		c.state.revision = revision
		close(c.changed)
		c.changed = make(chan struct{})
	}
	return nil
}

// replace puts a whole read of the prefix in place of the state; after the
// first, that is a resync.
func (c *Cache) replace(state clusterState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.revision != 0 {
		c.resyncs++
	}
	c.state = state
	c.err = nil
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *Cache) setErr(err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}
