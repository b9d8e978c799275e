package group

import (
	"container/heap"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Sentinel errors of the package.
var (
	// ErrClosed: the coordinator was closed before it answered.
	ErrClosed = errors.New("group: coordinator closed")
	// ErrStoreFailed answers every request once a sync of the group log
	// failed: the groups in memory may be ahead of the disk.
	ErrStoreFailed = errors.New("group: the group log failed")
	// ErrCorruptRecord: a record of the group log does not parse as one of
	// Kafka's classic group records.
	ErrCorruptRecord = errors.New("group: corrupt record")
	// ErrConfig: a Config field is out of range.
	ErrConfig = errors.New("group: bad config")
)

// Config holds the coordinator's settings, named after Kafka's.
type Config struct {
	Clock  Clock        // nil: the wall clock
	Logger *slog.Logger // nil: no logging

	MinSessionTimeout      time.Duration // group.min.session.timeout.ms
	MaxSessionTimeout      time.Duration // group.max.session.timeout.ms
	InitialRebalanceDelay  time.Duration // group.initial.rebalance.delay.ms
	NewMemberJoinTimeout   time.Duration // group.classic.new.member.join.timeout.ms (KIP-394)
	GroupMaxSize           int           // group.max.size (Kafka: unbounded; here a stated bound)
	OffsetMetadataMaxBytes int           // offset.metadata.max.bytes

	ConsumerSessionTimeout    time.Duration // group.consumer.session.timeout.ms
	ConsumerHeartbeatInterval time.Duration // group.consumer.heartbeat.interval.ms
	ConsumerAssignors         []string      // group.consumer.assignors: "uniform", "range"; the first is the default

	// Topics, when set, lists the topics consumer groups (KIP-848) assign
	// partitions of; without it they assign none. It is called from the
	// coordinator's loop and must not block.
	Topics func() []TopicMetadata

	OffsetsRetention              time.Duration // offsets.retention.minutes (retention.go)
	OffsetsRetentionCheckInterval time.Duration // offsets.retention.check.interval.ms

	// Partitions, when set, answers whether a partition exists; OffsetCommit
	// and OffsetDelete answer UNKNOWN_TOPIC_OR_PARTITION for those that do
	// not, as Kafka's KafkaApis does before its coordinator sees them. It is
	// called from the coordinator's loop and must not block.
	Partitions func(topic string, partition int32) bool
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		MinSessionTimeout:      6 * time.Second,
		MaxSessionTimeout:      30 * time.Minute,
		InitialRebalanceDelay:  3 * time.Second,
		NewMemberJoinTimeout:   5 * time.Minute,
		GroupMaxSize:           10000,
		OffsetMetadataMaxBytes: 4096,

		ConsumerSessionTimeout:        45 * time.Second,
		ConsumerHeartbeatInterval:     5 * time.Second,
		ConsumerAssignors:             []string{uniformAssignor, rangeAssignor},
		OffsetsRetention:              7 * 24 * time.Hour,
		OffsetsRetentionCheckInterval: 10 * time.Minute,
	}
}

func (cfg *Config) validate() error {
	switch {
	case cfg.MinSessionTimeout <= 0 || cfg.MaxSessionTimeout < cfg.MinSessionTimeout:
		return fmt.Errorf("%w: session timeouts [%v, %v]", ErrConfig, cfg.MinSessionTimeout, cfg.MaxSessionTimeout)
	case cfg.InitialRebalanceDelay < 0 || cfg.NewMemberJoinTimeout <= 0:
		return fmt.Errorf("%w: initial rebalance delay %v, new member join timeout %v", ErrConfig, cfg.InitialRebalanceDelay, cfg.NewMemberJoinTimeout)
	case cfg.ConsumerSessionTimeout <= 0 || cfg.ConsumerHeartbeatInterval <= 0 || cfg.ConsumerHeartbeatInterval >= cfg.ConsumerSessionTimeout:
		return fmt.Errorf("%w: consumer session timeout %v, heartbeat interval %v", ErrConfig, cfg.ConsumerSessionTimeout, cfg.ConsumerHeartbeatInterval)
	case !validAssignors(cfg.ConsumerAssignors):
		return fmt.Errorf("%w: consumer assignors %q", ErrConfig, cfg.ConsumerAssignors)
	case cfg.GroupMaxSize <= 0 || cfg.OffsetMetadataMaxBytes < 0:
		return fmt.Errorf("%w: group max size %d, offset metadata max bytes %d", ErrConfig, cfg.GroupMaxSize, cfg.OffsetMetadataMaxBytes)
	case cfg.OffsetsRetention <= 0 || cfg.OffsetsRetentionCheckInterval <= 0:
		return fmt.Errorf("%w: offsets retention %v, check interval %v", ErrConfig, cfg.OffsetsRetention, cfg.OffsetsRetentionCheckInterval)
	}
	return nil
}

// Client names the client behind a request (its client.id and address),
// recorded with the members it creates.
type Client struct {
	ID   string
	Host string
}

// callsMax bounds the queue of requests waiting for the loop.
const callsMax = 256

type call struct {
	run  func()
	done chan struct{} // closed by the loop once run returned
}

// Coordinator is the classic group coordinator. Its exported methods are
// safe for concurrent use; one loop goroutine owns every group.
type Coordinator struct {
	cfg     Config
	clock   Clock
	log     *slog.Logger
	store   Store
	calls   chan call
	closing chan struct{}
	stopped chan struct{}

	// Owned by the loop (and by New before the loop starts).
	groups    map[string]*group // every group not Dead; Empty groups leave with their offsets' retention
	deadlines deadlineHeap
	now       time.Time
	pending   pendingOffsets // transactional offsets awaiting their marker (txn_offsets.go)

	nextRetentionCheck time.Time // the first one an interval after New, as Kafka schedules it

	// Group commit (a GroupCommitStore): unsynced, the loop wrote records
	// no Sync has made durable yet; held, the answers that wait for that
	// Sync; failed, a Sync failed: the groups in memory may be ahead of the
	// disk, so every request fails from then on (restart the node).
	unsynced bool
	held     []func(error)
	failed   error
}

// New replays store and starts the coordinator's loop. Close stops it.
func New(cfg Config, store Store) (*Coordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Coordinator{
		cfg:     cfg,
		clock:   cfg.Clock,
		log:     cfg.Logger,
		store:   store,
		calls:   make(chan call, callsMax),
		closing: make(chan struct{}),
		stopped: make(chan struct{}),
		groups:  make(map[string]*group),
		pending: make(pendingOffsets),
		now:     cfg.Clock.Now(),
	}
	c.nextRetentionCheck = c.now.Add(cfg.OffsetsRetentionCheckInterval)
	if err := store.Replay(c.replay); err != nil {
		return nil, fmt.Errorf("group: replay: %w", err)
	}
	c.loaded()
	go c.run()
	return c, nil
}

// Close stops the loop; requests not answered yet return ErrClosed.
func (c *Coordinator) Close() {
	select {
	case <-c.closing:
	default:
		close(c.closing)
	}
	<-c.stopped
}

func (c *Coordinator) run() {
	defer close(c.stopped)
	for {
		c.now = c.clock.Now()
		c.fireDue()
		next := c.expireOffsets()
		if len(c.deadlines) > 0 && c.deadlines[0].at.Before(next) {
			next = c.deadlines[0].at
		}
		timer := c.clock.NewTimer(next.Sub(c.now))
		fire := timer.C()
		select {
		case cl := <-c.calls:
			c.runCall(cl)
			c.drain()
		case <-fire:
		case <-c.closing:
			timer.Stop()
			c.flush()
			return
		}
		timer.Stop()
		c.flush()
	}
}

// runCall runs one request at the clock's time, after what became due.
func (c *Coordinator) runCall(cl call) {
	c.now = c.clock.Now()
	c.fireDue()
	c.expireOffsets()
	cl.run()
	close(cl.done)
}

// drain runs the calls already queued, at most callsMax, so that their
// writes share one Sync (flush).
func (c *Coordinator) drain() {
	for range callsMax {
		select {
		case cl := <-c.calls:
			c.runCall(cl)
		default:
			return
		}
	}
}

// flush makes the loop's writes durable with one Sync and then sends the
// answers that waited for it. A failed Sync fails them and every later
// request: what the groups hold in memory may not be on disk.
func (c *Coordinator) flush() {
	if c.unsynced {
		c.unsynced = false
		if err := c.store.(GroupCommitStore).Sync(); err != nil {
			c.failed = fmt.Errorf("%w: group: sync: %w", ErrStoreFailed, err)
			c.log.Error("group: the group log cannot be synced: the coordinator refuses every request until the node restarts", "err", err)
		}
	}
	held := c.held
	c.held = nil
	for _, answer := range held {
		answer(c.failed)
	}
}

// reply sends an answer now, or after the next Sync while the loop's
// writes wait for one (an answer must not show a change before it is
// durable).
func (c *Coordinator) reply(answer func(error)) {
	if !c.unsynced {
		answer(c.failed)
		return
	}
	c.held = append(c.held, answer)
}

// submit has the loop run fn and returns once it has.
func (c *Coordinator) submit(ctx context.Context, fn func()) error {
	cl := call{run: fn, done: make(chan struct{})}
	select {
	case c.calls <- cl:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closing:
		return ErrClosed
	}
	select {
	case <-cl.done:
		return nil
	case <-c.stopped:
		select {
		case <-cl.done:
			return nil
		default:
			return ErrClosed
		}
	}
}

// result is a request's answer, or why it has none.
type result[T any] struct {
	answer T
	err    error
}

// do runs handle on the loop and waits for the answer it gives, now or
// later (a JoinGroup or SyncGroup waits for the rest of the group; any
// answer waits for the Sync of the writes before it). The answer is sent
// without blocking; a second answer to one request is a bug.
func do[T any](ctx context.Context, c *Coordinator, handle func(reply func(T))) (T, error) {
	results := make(chan result[T], 1)
	var zero T
	send := func(r result[T]) {
		select {
		case results <- r:
		default:
			panic("group: a request answered twice")
		}
	}
	run := func() {
		if c.failed != nil {
			send(result[T]{err: c.failed})
			return
		}
		handle(func(answer T) {
			c.reply(func(err error) {
				if err != nil {
					send(result[T]{err: err})
					return
				}
				send(result[T]{answer: answer})
			})
		})
	}
	if err := c.submit(ctx, run); err != nil {
		return zero, err
	}
	select {
	case r := <-results:
		return r.answer, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-c.stopped:
		select {
		case r := <-results:
			return r.answer, r.err
		default:
			return zero, ErrClosed
		}
	}
}

// JoinGroup answers a JoinGroup request (versions 0-9). The answer may wait
// for the rest of the group, up to the rebalance timeout.
func (c *Coordinator) JoinGroup(ctx context.Context, client Client, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, error) {
	return do(ctx, c, func(reply func(*kmsg.JoinGroupResponse)) { c.join(client, req, reply) })
}

// SyncGroup answers a SyncGroup request (versions 0-5). A follower's answer
// waits for the leader's SyncGroup.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, error) {
	return do(ctx, c, func(reply func(*kmsg.SyncGroupResponse)) { c.sync(req, reply) })
}

// Heartbeat answers a Heartbeat request (versions 0-4).
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) (*kmsg.HeartbeatResponse, error) {
	return do(ctx, c, func(reply func(*kmsg.HeartbeatResponse)) { reply(c.heartbeat(req)) })
}

// LeaveGroup answers a LeaveGroup request (versions 0-5).
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, error) {
	return do(ctx, c, func(reply func(*kmsg.LeaveGroupResponse)) { reply(c.leave(req)) })
}

// OffsetCommit answers an OffsetCommit request (versions 2-9) once the
// commits are in the store.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error) {
	return do(ctx, c, func(reply func(*kmsg.OffsetCommitResponse)) { reply(c.offsetCommit(req)) })
}

// OffsetFetch answers an OffsetFetch request (versions 1-9).
func (c *Coordinator) OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) (*kmsg.OffsetFetchResponse, error) {
	return do(ctx, c, func(reply func(*kmsg.OffsetFetchResponse)) { reply(c.offsetFetch(req)) })
}

// OffsetDelete answers an OffsetDelete request (version 0).
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) (*kmsg.OffsetDeleteResponse, error) {
	return do(ctx, c, func(reply func(*kmsg.OffsetDeleteResponse)) { reply(c.offsetDelete(req)) })
}

// ListGroups answers a ListGroups request (versions 0-5).
func (c *Coordinator) ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) (*kmsg.ListGroupsResponse, error) {
	return do(ctx, c, func(reply func(*kmsg.ListGroupsResponse)) { reply(c.listGroups(req)) })
}

// DescribeGroups answers a DescribeGroups request (versions 0-5).
func (c *Coordinator) DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) (*kmsg.DescribeGroupsResponse, error) {
	return do(ctx, c, func(reply func(*kmsg.DescribeGroupsResponse)) { reply(c.describeGroups(req)) })
}

// DeleteGroups answers a DeleteGroups request (versions 0-2).
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) (*kmsg.DeleteGroupsResponse, error) {
	return do(ctx, c, func(reply func(*kmsg.DeleteGroupsResponse)) { reply(c.deleteGroups(req)) })
}

// newMemberID is Kafka's member ID: the instance ID (static members) or the
// client ID, a dash, and a random UUID.
func newMemberID(clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	var u [16]byte
	rand.Read(u[:]) // never fails (crypto/rand's contract since Go 1.24)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// append writes records to the store, logging a failure; the caller turns
// it into Kafka's answer.
func (c *Coordinator) append(records ...Record) error {
	write, deferred := c.store.Append, false
	if gc, ok := c.store.(GroupCommitStore); ok {
		write, deferred = gc.Write, true
	}
	if err := write(records); err != nil {
		c.log.Warn("group: store append failed", "records", len(records), "err", err)
		return fmt.Errorf("group: append: %w", err)
	}
	c.unsynced = c.unsynced || deferred
	return nil
}

// deadline is an entry of the loop's timer heap: at `at`, look at group.
// Entries can be stale (the group's deadline moved); a stale entry costs
// one look at the group. A group pushes an entry only when its earliest
// deadline moves before the one queued, so the heap holds at most a few
// entries per group.
type deadline struct {
	at    time.Time
	group string
}

type deadlineHeap []deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadline)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// reschedule queues g's earliest deadline if it is before the one queued.
func (c *Coordinator) reschedule(g *group) {
	next := g.nextDeadline()
	if next.IsZero() || (!g.scheduled.IsZero() && !next.Before(g.scheduled)) {
		return
	}
	g.scheduled = next
	heap.Push(&c.deadlines, deadline{at: next, group: g.name})
}

// fireDue runs every deadline that has passed.
func (c *Coordinator) fireDue() {
	for len(c.deadlines) > 0 && !c.deadlines[0].at.After(c.now) {
		d := heap.Pop(&c.deadlines).(deadline)
		g := c.groups[d.group]
		if g == nil {
			continue
		}
		if g.scheduled.Equal(d.at) {
			g.scheduled = time.Time{}
		}
		c.tick(g)
	}
}

// after returns the deadline d from now, at least a millisecond ahead so a
// deadline that fires is always in the past of the next one.
func (c *Coordinator) after(d time.Duration) time.Time {
	return c.now.Add(max(d, time.Millisecond))
}

// done is called after every change to g: it checks g's invariants, drops
// a Dead group and queues g's next deadline.
func (c *Coordinator) done(g *group) {
	g.checkInvariants()
	if g.state == Dead {
		if c.groups[g.name] == g {
			delete(c.groups, g.name)
		}
		return
	}
	c.reschedule(g)
}
