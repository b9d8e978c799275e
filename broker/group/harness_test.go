package group

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// answerWait bounds how long a test waits, in real time, for an answer the
// coordinator owes; only a bug makes a test wait that long.
const answerWait = 10 * time.Second

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// harness is a Coordinator over a MemoryStore on a ManualClock.
type harness struct {
	t     *testing.T
	cfg   Config
	clock *ManualClock
	store *MemoryStore
	c     *Coordinator
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Clock = NewManualClock(epoch)
	if mutate != nil {
		mutate(&cfg)
	}
	h := &harness{t: t, cfg: cfg, clock: cfg.Clock.(*ManualClock), store: &MemoryStore{}}
	h.open()
	return h
}

func (h *harness) open() {
	h.t.Helper()
	c, err := New(h.cfg, h.store)
	if err != nil {
		h.t.Fatalf("New: %v", err)
	}
	h.c = c
	h.t.Cleanup(c.Close)
}

// restart closes the coordinator and opens a new one over the same store,
// as a node restart does.
func (h *harness) restart() {
	h.t.Helper()
	h.c.Close()
	h.open()
}

func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), answerWait)
	h.t.Cleanup(cancel)
	return ctx
}

// barrier returns once the loop has run every deadline due at the clock's
// current time and every call queued before it.
func (h *harness) barrier() {
	h.t.Helper()
	if err := h.c.submit(h.ctx(), func() {}); err != nil {
		h.t.Fatalf("barrier: %v", err)
	}
}

// advance moves the clock and waits for the loop to run what became due.
func (h *harness) advance(d time.Duration) {
	h.clock.Advance(d)
	h.barrier()
}

// joinAsync queues a JoinGroup and returns once the loop has handled it;
// the answer arrives on the channel, now or later.
func (h *harness) joinAsync(client string, req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	h.t.Helper()
	replies := make(chan *kmsg.JoinGroupResponse, 1)
	if err := h.c.submit(h.ctx(), func() { h.c.join(Client{ID: client, Host: "/127.0.0.1"}, req, replier(replies)) }); err != nil {
		h.t.Fatalf("join: %v", err)
	}
	return replies
}

func (h *harness) syncAsync(req *kmsg.SyncGroupRequest) <-chan *kmsg.SyncGroupResponse {
	h.t.Helper()
	replies := make(chan *kmsg.SyncGroupResponse, 1)
	if err := h.c.submit(h.ctx(), func() { h.c.sync(req, replier(replies)) }); err != nil {
		h.t.Fatalf("sync: %v", err)
	}
	return replies
}

// untilAnswered advances the clock by step until ch has an answer, at most
// 100 steps.
func untilAnsweredSteps[T any](h *harness, ch <-chan T, step time.Duration) T {
	h.t.Helper()
	for range 100 {
		select {
		case r := <-ch:
			return r
		default:
		}
		h.advance(step)
	}
	h.t.Fatalf("no answer after 100 steps of %v", step)
	var zero T
	return zero
}

func (h *harness) untilAnswered(ch <-chan *kmsg.JoinGroupResponse, step time.Duration) *kmsg.JoinGroupResponse {
	h.t.Helper()
	return untilAnsweredSteps(h, ch, step)
}

// await returns the answer on ch, failing the test if none comes.
func await[T any](h *harness, ch <-chan T) T {
	h.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(answerWait):
		h.t.Fatalf("no answer within %v", answerWait)
	}
	var zero T
	return zero
}

// pending fails the test if ch has an answer once the loop is idle.
func pending[T any](h *harness, ch <-chan T, what string) {
	h.t.Helper()
	h.barrier()
	select {
	case r := <-ch:
		h.t.Fatalf("%s: answered too early: %+v", what, r)
	default:
	}
}

func (h *harness) join(client string, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	h.t.Helper()
	return await(h, h.joinAsync(client, req))
}

func (h *harness) sync(req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	h.t.Helper()
	return await(h, h.syncAsync(req))
}

func (h *harness) heartbeat(group, member string, generation int32) int16 {
	h.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 4, group, member, generation
	resp, err := h.c.Heartbeat(h.ctx(), req)
	if err != nil {
		h.t.Fatalf("heartbeat: %v", err)
	}
	return resp.ErrorCode
}

func (h *harness) describe(group string) kmsg.DescribeGroupsResponseGroup {
	h.t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version, req.Groups = 5, []string{group}
	resp, err := h.c.DescribeGroups(h.ctx(), req)
	if err != nil {
		h.t.Fatalf("describe: %v", err)
	}
	return resp.Groups[0]
}

func (h *harness) state(group string) string {
	h.t.Helper()
	return h.describe(group).State
}

// consumerMetadata is a ConsumerProtocolSubscription v0 of topics.
func consumerMetadata(topics ...string) []byte {
	m := kmsg.ConsumerMemberMetadata{Version: 0, Topics: topics}
	return m.AppendTo(nil)
}

// joinRequest is a JoinGroup v9 of the consumer protocol type, 10s session
// and 60s rebalance timeouts, offering protocols in order.
func joinRequest(group, memberID string, protocols ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.MemberID = 9, group, memberID
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 60000
	req.ProtocolType = "consumer"
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	for _, p := range protocols {
		req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: consumerMetadata("orders")})
	}
	return req
}

func syncRequest(group, memberID string, generation int32, assignments map[string]string) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 5, group, memberID, generation
	for id, a := range assignments {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(a)})
	}
	return req
}

// memberID gets a member ID the v4+ way: a first JoinGroup answered
// MEMBER_ID_REQUIRED.
func (h *harness) memberID(client string, req *kmsg.JoinGroupRequest) string {
	h.t.Helper()
	first := *req
	first.MemberID = ""
	resp := h.join(client, &first)
	expectCode(h.t, "first join", resp.ErrorCode, kerr.MemberIDRequired.Code)
	if resp.MemberID == "" {
		h.t.Fatal("MEMBER_ID_REQUIRED without a member ID")
	}
	return resp.MemberID
}

func expectCode(t *testing.T, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: error %s, want %s", what, codeName(got), codeName(want))
	}
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

// stableGroup brings a new group of the given clients to Stable in
// generation 1, the first the
// leader, each assigned its client name. It returns the member IDs.
func (h *harness) stableGroup(group string, clients ...string) []string {
	h.t.Helper()
	ids := make([]string, len(clients))
	joins := make([]<-chan *kmsg.JoinGroupResponse, len(clients))
	for i, client := range clients {
		ids[i] = h.memberID(client, joinRequest(group, ""))
		joins[i] = h.joinAsync(client, joinRequest(group, ids[i]))
	}
	// The initial rebalance delay runs again while new members come.
	first := h.untilAnswered(joins[0], h.cfg.InitialRebalanceDelay)
	assignments := make(map[string]string)
	for i := range clients {
		resp := first
		if i > 0 {
			resp = await(h, joins[i])
		}
		expectCode(h.t, "join", resp.ErrorCode, 0)
		if resp.Generation != 1 || resp.LeaderID != ids[0] {
			h.t.Fatalf("join answer %+v, want generation 1 led by %s", resp, ids[0])
		}
		assignments[ids[i]] = clients[i]
	}
	syncs := make([]<-chan *kmsg.SyncGroupResponse, len(clients))
	for i := len(clients) - 1; i >= 0; i-- { // the leader last: followers wait for it
		a := map[string]string(nil)
		if i == 0 {
			a = assignments
		}
		syncs[i] = h.syncAsync(syncRequest(group, ids[i], 1, a))
	}
	for i := range clients {
		resp := await(h, syncs[i])
		expectCode(h.t, "sync", resp.ErrorCode, 0)
		if string(resp.MemberAssignment) != clients[i] {
			h.t.Fatalf("member %d assigned %q, want %q", i, resp.MemberAssignment, clients[i])
		}
	}
	if s := h.state(group); s != "Stable" {
		h.t.Fatalf("state %s after sync, want Stable", s)
	}
	return ids
}

// replier is the answer function of a request the test submits to the
// loop itself: the answer goes to replies at once (MemoryStore syncs every
// write, so no answer waits for a group commit); a second answer fails.
func replier[T any](replies chan T) func(T) {
	return func(r T) {
		select {
		case replies <- r:
		default:
			panic("group test: a request answered twice")
		}
	}
}
