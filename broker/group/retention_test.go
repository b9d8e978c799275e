package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	testRetention     = 10 * time.Minute
	testRetentionTick = time.Minute
	testStep          = 5 * time.Second // under joinRequest's 10s session timeout
)

func retentionHarness(t *testing.T) *harness {
	return newHarness(t, func(cfg *Config) {
		cfg.OffsetsRetention, cfg.OffsetsRetentionCheckInterval = testRetention, testRetentionTick
	})
}

// advanceBy moves the clock in steps of testStep (each runs the retention
// check that became due), heartbeating members of group.
func (h *harness) advanceBy(d time.Duration, group string, generation int32, members ...string) {
	h.t.Helper()
	for range int(d / testStep) { // bounded by d
		h.advance(testStep)
		for _, m := range members {
			expectCode(h.t, "heartbeat", h.heartbeat(group, m, generation), 0)
		}
	}
}

// TestOffsetRetention: offsets expire as Kafka 3+ expires them, on the
// coordinator's clock: a commit-only group's offsets retention after the
// commit, an Empty group's retention after it became Empty (also across
// a restart: the time is in its group record), an explicit retention time
// (OffsetCommit v2-4) at its expiry; a group with members keeps its
// offsets however old; a group left without offsets is deleted.
func TestOffsetRetention(t *testing.T) {
	t.Run("commit-only group", func(t *testing.T) {
		h := retentionHarness(t)
		expectCode(t, "commit", h.commit(commitRequest(9, "simple", "", -1, map[int32]int64{0: 5}))[0], 0)
		h.advanceBy(testRetention-testRetentionTick, "", 0)
		if got, _, _ := h.fetch("simple", 0); got != 5 {
			t.Fatalf("offset %d a tick before its retention, want 5", got)
		}
		h.advanceBy(testRetentionTick, "", 0)
		if got, _, _ := h.fetch("simple", 0); got != -1 {
			t.Fatalf("offset %d after its retention, want none (-1)", got)
		}
		if s := h.state("simple"); s != "Dead" {
			t.Fatalf("state %s once the last offset expired, want Dead (deleted)", s)
		}
		h.restart() // the tombstones are in the store
		if got, _, _ := h.fetch("simple", 0); got != -1 {
			t.Fatalf("offset %d after a restart, want none (-1)", got)
		}
	})

	t.Run("explicit retention time", func(t *testing.T) {
		h := retentionHarness(t)
		req := commitRequest(2, "old", "", -1, map[int32]int64{0: 5})
		req.RetentionTimeMillis = (3 * time.Minute).Milliseconds()
		expectCode(t, "commit v2", h.commit(req)[0], 0)
		h.advanceBy(2*time.Minute, "", 0)
		if got, _, _ := h.fetch("old", 0); got != 5 {
			t.Fatalf("offset %d before its expire timestamp, want 5", got)
		}
		h.advanceBy(testRetentionTick, "", 0)
		if got, _, _ := h.fetch("old", 0); got != -1 {
			t.Fatalf("offset %d at its expire timestamp, want none (-1)", got)
		}
	})

	t.Run("group with members, then Empty", func(t *testing.T) {
		h := retentionHarness(t)
		ids := h.stableGroup("g", "a")
		expectCode(t, "commit", h.commit(commitRequest(9, "g", ids[0], 1, map[int32]int64{0: 5, 1: 6}))[0], 0)
		h.advanceBy(3*testRetention, "g", 1, ids[0]) // heartbeats keep the member
		if got, _, _ := h.fetch("g", 0); got != 5 {
			t.Fatalf("offset %d of a group with a member after 3 retentions, want 5", got)
		}
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Version, leave.Group = 5, "g"
		leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ids[0]}}
		if resp, err := h.c.LeaveGroup(h.ctx(), leave); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("leave: %+v, %v", resp, err)
		}
		if s := h.state("g"); s != "Empty" {
			t.Fatalf("state %s after the last member left, want Empty", s)
		}
		h.advanceBy(testRetention/2, "", 0)
		h.restart() // the time the group became Empty survives
		h.advanceBy(testRetention/2-testRetentionTick, "", 0)
		if got, _, _ := h.fetch("g", 1); got != 6 {
			t.Fatalf("offset %d a tick before the retention after Empty, want 6", got)
		}
		h.advanceBy(testRetentionTick, "", 0)
		for p := range int32(2) {
			if got, _, _ := h.fetch("g", p); got != -1 {
				t.Fatalf("partition %d: offset %d after the retention after Empty, want none (-1)", p, got)
			}
		}
		if s := h.state("g"); s != "Dead" {
			t.Fatalf("state %s once the offsets expired, want Dead (deleted)", s)
		}
	})
}

// A consumer group (KIP-848) with members is never expired by the
// retention check, however long it runs; once its members are gone, its
// group without offsets goes as Kafka's does. (Its classic state, never
// moved, once made every consumer group look empty to the check.)
func TestConsumerGroupRetention(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.OffsetsRetention, cfg.OffsetsRetentionCheckInterval = testRetention, testRetentionTick
		cfg.Topics = func() []TopicMetadata { return consumerTestTopics }
	})
	h.consumerStep(t, 0, hb{member: "m1", epoch: 0, want: 1, assigned: parts{"a": {0, 1, 2, 3}}})
	for i := range int(2 * testRetention / testStep) { // two retentions, bounded
		h.consumerStep(t, i+1, hb{advance: testStep})
		h.consumerStep(t, i+1, hb{member: "m1", epoch: 1, want: 1})
	}
	h.consumerStep(t, 0, hb{member: "m1", epoch: -1, want: -1})
	h.advanceBy(testRetentionTick+testStep, "", 0)
	h.consumerStep(t, 0, hb{member: "m1", epoch: 1, code: kerr.GroupIDNotFound})
}
