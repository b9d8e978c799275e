package group

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestJoinGroupErrors: Kafka's answers to JoinGroups it refuses, against a
// Stable group "g" of one member.
func TestJoinGroupErrors(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.GroupMaxSize = 2 })
	member := h.stableGroup("g", "a")[0]
	tests := []struct {
		name   string
		mutate func(*kmsg.JoinGroupRequest)
		want   int16
	}{
		{"empty group ID", func(r *kmsg.JoinGroupRequest) { r.Group = "" }, kerr.InvalidGroupID.Code},
		{"session timeout below the minimum", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 5999 }, kerr.InvalidSessionTimeout.Code},
		{"session timeout above the maximum", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 1800001 }, kerr.InvalidSessionTimeout.Code},
		{"member ID for a group that does not exist", func(r *kmsg.JoinGroupRequest) { r.Group, r.MemberID = "other", "x" }, kerr.UnknownMemberID.Code},
		{"unknown member ID", func(r *kmsg.JoinGroupRequest) { r.MemberID = "x" }, kerr.UnknownMemberID.Code},
		{"v4 new member", func(r *kmsg.JoinGroupRequest) { r.Group, r.Version = "new", 4 }, kerr.MemberIDRequired.Code},
		{"new group with no protocol type", func(r *kmsg.JoinGroupRequest) { r.Group, r.ProtocolType = "new2", "" }, kerr.InconsistentGroupProtocol.Code},
		{"new group with no protocols", func(r *kmsg.JoinGroupRequest) { r.Group, r.Protocols = "new3", nil }, kerr.InconsistentGroupProtocol.Code},
		{"protocol type of another group", func(r *kmsg.JoinGroupRequest) { r.MemberID, r.ProtocolType = member, "connect" }, kerr.InconsistentGroupProtocol.Code},
		{"member ID with an unknown instance ID", func(r *kmsg.JoinGroupRequest) { r.MemberID, r.InstanceID = member, kmsg.StringPtr("i") }, kerr.UnknownMemberID.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := joinRequest("g", "")
			tt.mutate(req)
			resp := h.join("c", req)
			expectCode(t, tt.name, resp.ErrorCode, tt.want)
			if resp.Version != req.Version {
				t.Fatalf("answer version %d, want %d", resp.Version, req.Version)
			}
		})
	}
	// The member itself still heartbeats in generation 1: nothing above
	// touched it.
	expectCode(t, "heartbeat", h.heartbeat("g", member, 1), 0)

	// A full group refuses newcomers, and (as Kafka) unknown member IDs
	// with the same error.
	full := newHarness(t, func(cfg *Config) { cfg.GroupMaxSize = 1 })
	full.stableGroup("g", "a")
	v3 := joinRequest("g", "")
	v3.Version = 3
	expectCode(t, "join of a full group", full.join("b", v3).ErrorCode, kerr.GroupMaxSizeReached.Code)
	expectCode(t, "unknown member of a full group", full.join("b", joinRequest("g", "x")).ErrorCode, kerr.GroupMaxSizeReached.Code)
}

// TestJoinGroupOldVersions: before v4 a new member joins at once with a
// generated ID; before v7 the protocol name is never null.
func TestJoinGroupOldVersions(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.InitialRebalanceDelay = 0 })
	req := joinRequest("g", "")
	req.Version = 0
	req.RebalanceTimeoutMillis = 0 // not in v0: the session timeout is used
	resp := h.join("a", req)
	if resp.ErrorCode != 0 || resp.MemberID == "" || resp.Generation != 1 || resp.Protocol == nil || *resp.Protocol != "range" {
		t.Fatalf("v0 join: %+v", resp)
	}
	empty := joinRequest("g", "")
	empty.Version, empty.Group, empty.SessionTimeoutMillis = 6, "", 1
	if resp := h.join("a", empty); resp.Protocol == nil || *resp.Protocol != "" || resp.Generation != -1 {
		t.Fatalf("v6 error answer: %+v", resp)
	}
}

// TestJoinGroupRepeated: a member that lost its JoinGroup answer gets the
// same generation again while CompletingRebalance; a changed offer
// rebalances.
func TestJoinGroupRepeated(t *testing.T) {
	h := newHarness(t, nil)
	a := h.memberID("a", joinRequest("g", ""))
	first := h.untilAnswered(h.joinAsync("a", joinRequest("g", a)), 3*time.Second)
	again := h.join("a", joinRequest("g", a))
	if again.Generation != first.Generation || again.LeaderID != a || len(again.Members) != 1 {
		t.Fatalf("repeated join: %+v", again)
	}
	// An offer with no protocol the current members all list is refused,
	// even from the only member (as Kafka: its old offer counts).
	expectCode(t, "new protocols only", h.join("a", joinRequest("g", a, "sticky")).ErrorCode, kerr.InconsistentGroupProtocol.Code)
	changed := h.join("a", joinRequest("g", a, "sticky", "range"))
	if changed.Generation != 2 || *changed.Protocol != "sticky" {
		t.Fatalf("changed join: %+v", changed)
	}
}

// TestSyncGroupErrors: SyncGroup refusals, against a group "g" Stable in
// generation 1 with members a (leader) and b.
func TestSyncGroupErrors(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stableGroup("g", "a", "b")
	tests := []struct {
		name   string
		mutate func(*kmsg.SyncGroupRequest)
		want   int16
	}{
		{"empty group ID", func(r *kmsg.SyncGroupRequest) { r.Group = "" }, kerr.InvalidGroupID.Code},
		{"unknown group", func(r *kmsg.SyncGroupRequest) { r.Group = "other" }, kerr.UnknownMemberID.Code},
		{"unknown member", func(r *kmsg.SyncGroupRequest) { r.MemberID = "x" }, kerr.UnknownMemberID.Code},
		{"fenced instance", func(r *kmsg.SyncGroupRequest) { r.InstanceID = kmsg.StringPtr("i") }, kerr.UnknownMemberID.Code},
		{"old generation", func(r *kmsg.SyncGroupRequest) { r.Generation = 0 }, kerr.IllegalGeneration.Code},
		{"protocol type", func(r *kmsg.SyncGroupRequest) { r.ProtocolType = kmsg.StringPtr("connect") }, kerr.InconsistentGroupProtocol.Code},
		{"protocol name", func(r *kmsg.SyncGroupRequest) { r.Protocol = kmsg.StringPtr("sticky") }, kerr.InconsistentGroupProtocol.Code},
		{"stable: the assignment again", func(r *kmsg.SyncGroupRequest) {
			r.ProtocolType, r.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := syncRequest("g", ids[1], 1, nil)
			tt.mutate(req)
			resp := h.sync(req)
			expectCode(t, tt.name, resp.ErrorCode, tt.want)
			if tt.want == 0 && (string(resp.MemberAssignment) != "b" || *resp.Protocol != "range") {
				t.Fatalf("stable sync: %+v", resp)
			}
		})
	}
	// During a rebalance: REBALANCE_IN_PROGRESS.
	h.joinAsync("a", joinRequest("g", ids[0]))
	expectCode(t, "sync while preparing", h.sync(syncRequest("g", ids[1], 1, nil)).ErrorCode, kerr.RebalanceInProgress.Code)
}

// TestSyncGroupStoreFailure: a leader's assignment the store refuses goes
// to nobody; members are told NOT_COORDINATOR and the group rebalances.
func TestSyncGroupStoreFailure(t *testing.T) {
	h := newHarness(t, nil)
	a := h.memberID("a", joinRequest("g", ""))
	b := h.memberID("b", joinRequest("g", ""))
	joinA, joinB := h.joinAsync("a", joinRequest("g", a)), h.joinAsync("b", joinRequest("g", b))
	h.untilAnswered(joinA, 3*time.Second)
	await(h, joinB)
	syncB := h.syncAsync(syncRequest("g", b, 1, nil))
	h.store.SetAppendError(errors.New("disk full"))
	sa := h.sync(syncRequest("g", a, 1, map[string]string{a: "x", b: "y"}))
	sb := await(h, syncB)
	expectCode(t, "leader sync", sa.ErrorCode, kerr.NotCoordinator.Code)
	expectCode(t, "follower sync", sb.ErrorCode, kerr.NotCoordinator.Code)
	if len(sa.MemberAssignment) != 0 || len(sb.MemberAssignment) != 0 {
		t.Fatalf("assignments given out: %q %q", sa.MemberAssignment, sb.MemberAssignment)
	}
	if s := h.state("g"); s != "PreparingRebalance" {
		t.Fatalf("state %s, want PreparingRebalance", s)
	}
}

// TestHeartbeatErrors: Heartbeat answers by state and identity.
func TestHeartbeatErrors(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stableGroup("g", "a")
	tests := []struct {
		name       string
		group      string
		member     string
		instance   *string
		generation int32
		want       int16
	}{
		{"empty group ID", "", ids[0], nil, 1, kerr.InvalidGroupID.Code},
		{"unknown group", "other", ids[0], nil, 1, kerr.UnknownMemberID.Code},
		{"unknown member", "g", "x", nil, 1, kerr.UnknownMemberID.Code},
		{"unknown instance", "g", ids[0], kmsg.StringPtr("i"), 1, kerr.UnknownMemberID.Code},
		{"illegal generation", "g", ids[0], nil, 2, kerr.IllegalGeneration.Code},
		{"stable", "g", ids[0], nil, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrHeartbeatRequest()
			req.Version, req.Group, req.MemberID, req.Generation, req.InstanceID = 4, tt.group, tt.member, tt.generation, tt.instance
			resp, err := h.c.Heartbeat(h.ctx(), req)
			if err != nil {
				t.Fatal(err)
			}
			expectCode(t, tt.name, resp.ErrorCode, tt.want)
		})
	}
}

// TestLeaveGroupErrors: LeaveGroup answers, per member from v3.
func TestLeaveGroupErrors(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stableGroup("g", "a", "b")
	pendingID := h.memberID("c", joinRequest("g", ""))

	for _, tt := range []struct {
		name    string
		version int16
		group   string
		want    int16
	}{
		{"empty group ID", 3, "", kerr.InvalidGroupID.Code},
		{"v1 unknown group", 1, "other", kerr.UnknownMemberID.Code},
		{"v3 unknown group", 3, "other", 0}, // the members' own codes, below
		{"v1 unknown member", 1, "g", kerr.UnknownMemberID.Code},
	} {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version, req.Group, req.MemberID = tt.version, tt.group, "x"
		resp, err := h.c.LeaveGroup(h.ctx(), req)
		if err != nil {
			t.Fatal(err)
		}
		expectCode(t, tt.name, resp.ErrorCode, tt.want)
	}

	unknown := kmsg.NewPtrLeaveGroupRequest()
	unknown.Version, unknown.Group = 5, "other"
	unknown.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "x"}, {InstanceID: kmsg.StringPtr("i")}}
	resp, err := h.c.LeaveGroup(h.ctx(), unknown)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || len(resp.Members) != 2 {
		t.Fatalf("unknown group v5: error %d, %d members, want NONE and 2 (Kafka's \"Group was not found.\")", resp.ErrorCode, len(resp.Members))
	}
	for _, m := range resp.Members {
		expectCode(t, "unknown group member", m.ErrorCode, kerr.UnknownMemberID.Code)
	}

	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group = 5, "g"
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: pendingID}, {MemberID: "x"}, {MemberID: ids[1]}, {}}
	resp, err = h.c.LeaveGroup(h.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := []int16{0, kerr.UnknownMemberID.Code, 0, kerr.UnknownMemberID.Code}
	for i, m := range resp.Members {
		expectCode(t, "member "+m.MemberID, m.ErrorCode, want[i])
	}
	// Only a is left, and the rebalance already completed without
	// waiting for anyone else.
	if d := h.describe("g"); d.State != "PreparingRebalance" || len(d.Members) != 1 {
		t.Fatalf("after leave: %+v", d)
	}
	ra := h.join("a", joinRequest("g", ids[0]))
	if ra.Generation != 2 || len(ra.Members) != 1 {
		t.Fatalf("rejoin: %+v", ra)
	}
}
