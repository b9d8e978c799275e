package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupLifecycle drives three members through join, sync, heartbeats,
// a leave, a session expiry and the last leave, on the manual clock.
func TestGroupLifecycle(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stableGroup("g", "a", "b", "c")
	a, b, c := ids[0], ids[1], ids[2]

	// Heartbeats keep everyone in for longer than a session timeout.
	for range 3 {
		h.advance(6 * time.Second)
		for _, id := range ids {
			expectCode(t, "heartbeat", h.heartbeat("g", id, 1), 0)
		}
	}

	// c leaves: the group rebalances and the others learn it from their
	// heartbeats.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 5, "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: c}}
	resp, err := h.c.LeaveGroup(h.ctx(), leave)
	if err != nil || resp.ErrorCode != 0 || len(resp.Members) != 1 || resp.Members[0].ErrorCode != 0 {
		t.Fatalf("leave: %+v, %v", resp, err)
	}
	if s := h.state("g"); s != "PreparingRebalance" {
		t.Fatalf("state %s after a leave, want PreparingRebalance", s)
	}
	expectCode(t, "heartbeat during rebalance", h.heartbeat("g", a, 1), kerr.RebalanceInProgress.Code)
	expectCode(t, "heartbeat of the leaver", h.heartbeat("g", c, 1), kerr.UnknownMemberID.Code)

	// a and b rejoin: generation 2 completes as soon as both are in, with
	// no initial delay (the group was not Empty).
	joinA := h.joinAsync("a", joinRequest("g", a))
	pending(h, joinA, "join of a while b has not rejoined")
	joinB := h.joinAsync("b", joinRequest("g", b))
	ra, rb := await(h, joinA), await(h, joinB)
	if ra.Generation != 2 || rb.Generation != 2 || ra.LeaderID != a || len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("generation 2 answers: %+v / %+v", ra, rb)
	}
	if *ra.Protocol != "range" || *ra.ProtocolType != "consumer" {
		t.Fatalf("protocol %v/%v", *ra.ProtocolType, *ra.Protocol)
	}
	expectCode(t, "old generation heartbeat", h.heartbeat("g", a, 1), kerr.IllegalGeneration.Code)
	expectCode(t, "heartbeat while completing", h.heartbeat("g", b, 2), 0)
	syncB := h.syncAsync(syncRequest("g", b, 2, nil))
	pending(h, syncB, "follower sync before the leader's")
	sa := h.sync(syncRequest("g", a, 2, map[string]string{a: "a2", b: "b2"}))
	if sb := await(h, syncB); string(sa.MemberAssignment) != "a2" || string(sb.MemberAssignment) != "b2" || sb.ErrorCode != 0 {
		t.Fatalf("generation 2 assignments %q %q (%d)", sa.MemberAssignment, sb.MemberAssignment, sb.ErrorCode)
	}

	// b stops heartbeating: after its session timeout (10s) it is gone.
	h.advance(9 * time.Second)
	expectCode(t, "heartbeat of a", h.heartbeat("g", a, 2), 0)
	h.advance(1 * time.Second)
	if d := h.describe("g"); d.State != "PreparingRebalance" || len(d.Members) != 1 || d.Members[0].MemberID != a {
		t.Fatalf("after b's session timeout: %+v", d)
	}
	expectCode(t, "heartbeat of the expired member", h.heartbeat("g", b, 2), kerr.UnknownMemberID.Code)
	ra = h.join("a", joinRequest("g", a))
	if ra.Generation != 3 || len(ra.Members) != 1 {
		t.Fatalf("generation 3: %+v", ra)
	}
	h.sync(syncRequest("g", a, 3, map[string]string{a: "all"}))

	// The last member leaves (LeaveGroup v0): the group is Empty, in a
	// generation of its own, written to the store.
	leave0 := kmsg.NewPtrLeaveGroupRequest()
	leave0.Version, leave0.Group, leave0.MemberID = 0, "g", a
	if resp, err := h.c.LeaveGroup(h.ctx(), leave0); err != nil || resp.ErrorCode != 0 || resp.Members != nil {
		t.Fatalf("leave v0: %+v, %v", resp, err)
	}
	if s := h.state("g"); s != "Empty" {
		t.Fatalf("state %s after the last leave, want Empty", s)
	}
	last := lastGroupMetadata(t, h.store, "g")
	if last.Generation != 4 || len(last.Members) != 0 || last.Protocol != nil || last.ProtocolType != "consumer" {
		t.Fatalf("last group record %+v", last)
	}
}

// lastGroupMetadata returns the group's last GroupMetadataValue in the
// store.
func lastGroupMetadata(t *testing.T, store *MemoryStore, group string) *kmsg.GroupMetadataValue {
	t.Helper()
	var last *kmsg.GroupMetadataValue
	for _, r := range store.Records() {
		d, err := decodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		if d.groupKey != nil && d.groupKey.Group == group {
			last = d.groupValue
		}
	}
	if last == nil {
		t.Fatalf("no group metadata of %s in the store", group)
	}
	return last
}

// TestInitialRebalanceDelay: a new group waits the delay, longer while
// members keep coming, but never past the rebalance timeout.
func TestInitialRebalanceDelay(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.InitialRebalanceDelay = 3 * time.Second })
	req := joinRequest("g", "")
	req.RebalanceTimeoutMillis = 7000 // remaining after the first delay: 4s
	a := h.memberID("a", req)
	req.MemberID = a
	joinA := h.joinAsync("a", req)
	h.advance(2 * time.Second)
	pending(h, joinA, "join before the delay")

	// b arrives at 2s: at 3s the delay is extended by 3s (4s remain).
	breq := joinRequest("g", "")
	breq.RebalanceTimeoutMillis = 7000
	breq.MemberID = h.memberID("b", breq)
	joinB := h.joinAsync("b", breq)
	h.advance(1 * time.Second)
	pending(h, joinA, "join at the first delay's end with a new member")
	// c arrives at 4s: at 6s the delay is extended once more, by
	// min(3s, 1s remaining) = 1s.
	h.advance(1 * time.Second)
	creq := joinRequest("g", "")
	creq.RebalanceTimeoutMillis = 7000
	creq.MemberID = h.memberID("c", creq)
	joinC := h.joinAsync("c", creq)
	h.advance(2 * time.Second)
	pending(h, joinA, "join at the second delay's end with a new member")
	h.advance(1 * time.Second) // 7s: the rebalance timeout
	for _, ch := range []<-chan *kmsg.JoinGroupResponse{joinA, joinB, joinC} {
		if r := await(h, ch); r.ErrorCode != 0 || r.Generation != 1 {
			t.Fatalf("join answer %+v", r)
		}
	}
	if d := h.describe("g"); d.State != "CompletingRebalance" || len(d.Members) != 3 {
		t.Fatalf("after the delay: %+v", d)
	}
}

// TestRebalanceTimeoutRemovesMembersThatDidNotRejoin: when a rebalance
// starts, dynamic members that do not rejoin within the rebalance timeout
// are dropped, and the rebalance completes without them.
func TestRebalanceTimeoutRemovesMembersThatDidNotRejoin(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stableGroup("g", "a", "b")
	// a rejoins with other protocols: a rebalance starts; b keeps
	// heartbeating (told REBALANCE_IN_PROGRESS) but never rejoins.
	joinA := h.joinAsync("a", joinRequest("g", ids[0], "range", "roundrobin"))
	for range 6 {
		h.advance(9 * time.Second)
		expectCode(t, "heartbeat of b", h.heartbeat("g", ids[1], 1), kerr.RebalanceInProgress.Code)
		pending(h, joinA, "join of a before the rebalance timeout")
	}
	h.advance(6 * time.Second) // 60s: the rebalance timeout
	ra := await(h, joinA)
	if ra.ErrorCode != 0 || ra.Generation != 2 || len(ra.Members) != 1 || *ra.Protocol != "range" {
		t.Fatalf("join after the rebalance timeout: %+v", ra)
	}
	expectCode(t, "heartbeat of b", h.heartbeat("g", ids[1], 1), kerr.UnknownMemberID.Code)
}

// TestPendingMemberHoldsRebalance: a member given an ID by
// MEMBER_ID_REQUIRED holds up the rebalance of a non-empty group until it
// joins or its session timeout passes.
func TestPendingMemberHoldsRebalance(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stableGroup("g", "a")
	h.memberID("b", joinRequest("g", "")) // pending, never comes back
	joinA := h.joinAsync("a", joinRequest("g", ids[0]))
	h.advance(9 * time.Second)
	pending(h, joinA, "join while a member is pending")
	expectCode(t, "heartbeat", h.heartbeat("g", ids[0], 1), kerr.RebalanceInProgress.Code)
	h.advance(1 * time.Second) // b's 10s session timeout
	if ra := await(h, joinA); ra.ErrorCode != 0 || ra.Generation != 2 || len(ra.Members) != 1 {
		t.Fatalf("join after the pending member expired: %+v", ra)
	}
}

// TestPendingSyncExpiry: a member that got its JoinGroup answer but never
// sends SyncGroup is removed after the rebalance timeout.
func TestPendingSyncExpiry(t *testing.T) {
	h := newHarness(t, nil)
	a := h.memberID("a", joinRequest("g", ""))
	b := h.memberID("b", joinRequest("g", ""))
	joinA, joinB := h.joinAsync("a", joinRequest("g", a)), h.joinAsync("b", joinRequest("g", b))
	h.untilAnswered(joinA, 3*time.Second)
	await(h, joinB)
	h.sync(syncRequest("g", a, 1, map[string]string{a: "x", b: "y"}))
	// b heartbeats but never syncs; at 60s its time is up.
	for range 6 {
		h.advance(9 * time.Second)
		expectCode(t, "heartbeat of a", h.heartbeat("g", a, 1), 0)
		expectCode(t, "heartbeat of b", h.heartbeat("g", b, 1), 0)
	}
	h.advance(6 * time.Second)
	expectCode(t, "heartbeat of a", h.heartbeat("g", a, 1), kerr.RebalanceInProgress.Code)
	if d := h.describe("g"); d.State != "PreparingRebalance" || len(d.Members) != 1 {
		t.Fatalf("after the sync timeout: %+v", d)
	}
	expectCode(t, "heartbeat of b", h.heartbeat("g", b, 1), kerr.UnknownMemberID.Code)
}

// TestProtocolSelection: the protocol every member lists that most members
// prefer wins.
func TestProtocolSelection(t *testing.T) {
	h := newHarness(t, nil)
	offers := [][]string{{"sticky", "range"}, {"range", "sticky", "roundrobin"}, {"range", "sticky"}}
	var joins []<-chan *kmsg.JoinGroupResponse
	for i, offer := range offers {
		client := string(rune('a' + i))
		id := h.memberID(client, joinRequest("g", "", offer...))
		joins = append(joins, h.joinAsync(client, joinRequest("g", id, offer...)))
	}
	r := h.untilAnswered(joins[0], 3*time.Second)
	if *r.Protocol != "range" {
		t.Fatalf("selected %s, want range (two votes of three)", *r.Protocol)
	}
	// A newcomer offering none of the group's protocols is refused.
	req := joinRequest("g", "", "roundrobin")
	expectCode(t, "inconsistent join", h.join("d", req).ErrorCode, kerr.InconsistentGroupProtocol.Code)
	req.ProtocolType = "connect"
	req.Protocols[0].Name = "range"
	expectCode(t, "join of another protocol type", h.join("d", req).ErrorCode, kerr.InconsistentGroupProtocol.Code)
}

// TestStaticMembership: a static member restarting (a new member ID, the
// same instance ID) takes its old place without a rebalance; the old
// member ID is fenced.
func TestStaticMembership(t *testing.T) {
	h := newHarness(t, nil)
	static := func(id, instance string) *kmsg.JoinGroupRequest {
		req := joinRequest("g", id)
		req.InstanceID = &instance
		return req
	}
	// Static members join without MEMBER_ID_REQUIRED.
	joinA := h.joinAsync("a", static("", "ia"))
	joinB := h.joinAsync("b", static("", "ib"))
	ra := h.untilAnswered(joinA, 3*time.Second)
	rb := await(h, joinB)
	expectCode(t, "static join", ra.ErrorCode, 0)
	syncB := h.syncAsync(syncRequest("g", rb.MemberID, 1, nil))
	h.sync(syncRequest("g", ra.MemberID, 1, map[string]string{ra.MemberID: "A", rb.MemberID: "B"}))
	await(h, syncB)

	// b restarts: same instance, no member ID.
	rb2 := h.join("b", static("", "ib"))
	if rb2.ErrorCode != 0 || rb2.MemberID == rb.MemberID || rb2.Generation != 1 || rb2.SkipAssignment {
		t.Fatalf("static rejoin: %+v", rb2)
	}
	if s := h.state("g"); s != "Stable" {
		t.Fatalf("state %s after a static rejoin, want Stable (no rebalance)", s)
	}
	sb := h.sync(syncRequest("g", rb2.MemberID, 1, nil))
	if string(sb.MemberAssignment) != "B" {
		t.Fatalf("static member's assignment after rejoin %q, want B", sb.MemberAssignment)
	}
	fenced := kmsg.NewPtrHeartbeatRequest()
	fenced.Version, fenced.Group, fenced.MemberID, fenced.Generation, fenced.InstanceID = 4, "g", rb.MemberID, 1, kmsg.StringPtr("ib")
	if resp, err := h.c.Heartbeat(h.ctx(), fenced); err != nil || resp.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("old member ID heartbeat: %+v, %v", resp, err)
	}

	// The leader restarts with v9: told to skip the assignment; with v8:
	// told it is not the leader.
	ra2 := h.join("a", static("", "ia"))
	if !ra2.SkipAssignment || ra2.LeaderID != ra2.MemberID || len(ra2.Members) != 2 {
		t.Fatalf("static leader rejoin v9: %+v", ra2)
	}
	old := static("", "ia")
	old.Version = 8
	ra3 := h.join("a", old)
	if ra3.SkipAssignment || ra3.LeaderID != ra2.MemberID || ra3.MemberID == ra2.MemberID || len(ra3.Members) != 0 {
		t.Fatalf("static leader rejoin v8: %+v", ra3)
	}
	// Static members are written to the store with their new IDs.
	last := lastGroupMetadata(t, h.store, "g")
	if len(last.Members) != 2 || last.Members[0].MemberID != ra3.MemberID || *last.Members[0].InstanceID != "ia" || *last.Leader != ra3.MemberID {
		t.Fatalf("group record after static rejoins: %+v", last)
	}

	// A static member that leaves by instance ID alone (the admin way).
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 4, "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: kmsg.StringPtr("ib")}, {InstanceID: kmsg.StringPtr("nobody")}, {MemberID: rb.MemberID, InstanceID: kmsg.StringPtr("ia")}}
	resp, err := h.c.LeaveGroup(h.ctx(), leave)
	if err != nil {
		t.Fatal(err)
	}
	expectCode(t, "leave by instance ID", resp.Members[0].ErrorCode, 0)
	expectCode(t, "leave of an unknown instance", resp.Members[1].ErrorCode, kerr.UnknownMemberID.Code)
	expectCode(t, "leave with a fenced member ID", resp.Members[2].ErrorCode, kerr.FencedInstanceID.Code)
	if d := h.describe("g"); d.State != "PreparingRebalance" || len(d.Members) != 1 {
		t.Fatalf("after the static leave: %+v", d)
	}
}
