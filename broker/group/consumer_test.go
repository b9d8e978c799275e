package group

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The topics the consumer group tests assign: a (4 partitions), b (2) and
// an internal topic no regex matches.
var consumerTestTopics = []TopicMetadata{
	{Name: "a", ID: topicID{'a'}, Partitions: 4},
	{Name: "b", ID: topicID{'b'}, Partitions: 2},
	{Name: "__consumer_offsets", ID: topicID{'_'}, Partitions: 1, Internal: true},
}

func topicName(id topicID) string {
	for _, t := range consumerTestTopics {
		if t.ID == id {
			return t.Name
		}
	}
	return "?"
}

// hb is one step of a consumer group story: a heartbeat (or leave) of a
// member and what it must answer, or a move of the clock, or a restart.
type hb struct {
	advance  time.Duration
	restart  bool
	member   string
	epoch    int32
	instance string
	names    []string           // epoch 0: nil means ["a"]
	regex    string             // epoch 0: subscribe by regex instead
	assignor string             // "": none asked
	owned    map[string][]int32 // epoch > 0: nil is not sent
	code     *kerr.Error
	want     int32              // the member epoch answered
	assigned map[string][]int32 // nil: no assignment expected in the answer
	// groupEpoch and state, when set, are checked with ConsumerGroupDescribe.
	groupEpoch int32
	state      string
}

func (h *harness) consumerStep(t *testing.T, i int, s hb) {
	t.Helper()
	switch {
	case s.restart:
		h.restart()
		return
	case s.advance > 0:
		h.advance(s.advance)
		return
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = "g", s.member, s.epoch
	req.RebalanceTimeoutMillis = -1
	if s.instance != "" {
		req.InstanceID = &s.instance
	}
	if s.assignor != "" {
		req.ServerAssignor = &s.assignor
	}
	if s.epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		switch {
		case s.regex != "":
			req.SubscribedTopicRegex = &s.regex
		case s.names != nil:
			req.SubscribedTopicNames = s.names
		default:
			req.SubscribedTopicNames = []string{"a"}
		}
	} else if s.owned != nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, name := range slices.Sorted(maps.Keys(s.owned)) {
			for _, tm := range consumerTestTopics {
				if tm.Name == name {
					req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tm.ID, Partitions: s.owned[name]})
				}
			}
		}
	}
	resp, err := h.c.ConsumerGroupHeartbeat(h.ctx(), Client{ID: "client", Host: "/127.0.0.1"}, req)
	if err != nil {
		t.Fatalf("step %d: %v", i, err)
	}
	want := int16(0)
	if s.code != nil {
		want = s.code.Code
	}
	expectCode(t, "step "+string(rune('0'+i)), resp.ErrorCode, want)
	if s.code != nil {
		return
	}
	if resp.MemberEpoch != s.want {
		t.Fatalf("step %d: member %s epoch %d, want %d", i, s.member, resp.MemberEpoch, s.want)
	}
	switch {
	case s.assigned == nil && resp.Assignment != nil && s.epoch >= 0:
		t.Fatalf("step %d: unexpected assignment %v", i, resp.Assignment.Topics)
	case s.assigned != nil:
		if resp.Assignment == nil {
			t.Fatalf("step %d: no assignment, want %v", i, s.assigned)
		}
		got := map[string][]int32{}
		for _, at := range resp.Assignment.Topics {
			got[topicName(at.TopicID)] = at.Partitions
		}
		if !maps.EqualFunc(got, s.assigned, slices.Equal) {
			t.Fatalf("step %d: member %s assigned %v, want %v", i, s.member, got, s.assigned)
		}
	}
	if s.groupEpoch != 0 || s.state != "" {
		d, err := h.c.ConsumerGroupDescribe(h.ctx(), &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}})
		if err != nil {
			t.Fatal(err)
		}
		g := d.Groups[0]
		if (s.groupEpoch != 0 && g.Epoch != s.groupEpoch) || (s.state != "" && g.State != s.state) {
			t.Fatalf("step %d: group epoch %d state %s, want %d %s", i, g.Epoch, g.State, s.groupEpoch, s.state)
		}
	}
}

type parts = map[string][]int32

func TestConsumerGroupHeartbeat(t *testing.T) {
	none := parts{}
	for _, tc := range []struct {
		name  string
		steps []hb
	}{
		{"join, assignment, revocation before reassignment", []hb{
			{member: "m1", epoch: 0, want: 1, assigned: parts{"a": {0, 1, 2, 3}}, groupEpoch: 1, state: "Stable"},
			{member: "m2", epoch: 0, want: 2, assigned: none, groupEpoch: 2, state: "Reconciling"},
			// m1 must give up two partitions first: it stays in epoch 1.
			{member: "m1", epoch: 1, owned: parts{"a": {0, 1, 2, 3}}, want: 1, assigned: parts{"a": {0, 1}}},
			// m2 waits: the partitions are not released yet.
			{member: "m2", epoch: 2, owned: none, want: 2},
			{member: "m1", epoch: 1, owned: parts{"a": {0, 1}}, want: 2},
			{member: "m2", epoch: 2, owned: none, want: 2, assigned: parts{"a": {2, 3}}, state: "Stable"},
			// Heartbeats with nothing new carry no assignment.
			{member: "m1", epoch: 2, want: 2},
		}},
		{"fencing and unknown members", []hb{
			{member: "m1", epoch: 0, want: 1, assigned: parts{"a": {0, 1, 2, 3}}},
			{member: "m1", epoch: 5, owned: none, code: kerr.FencedMemberEpoch},
			{member: "zz", epoch: 1, owned: none, code: kerr.UnknownMemberID},
			{member: "m2", epoch: 0, want: 2, assigned: none},
			// m1 already let 2 and 3 go: it goes to epoch 2 at once.
			{member: "m1", epoch: 1, owned: parts{"a": {0, 1}}, want: 2, assigned: parts{"a": {0, 1}}},
			// The answer that bumped it was lost: with what it owns inside
			// its assignment the previous epoch is fine, a wider claim not.
			{member: "m1", epoch: 1, owned: parts{"a": {0, 1}}, want: 2},
			{member: "m1", epoch: 1, owned: parts{"a": {0, 1, 2}}, code: kerr.FencedMemberEpoch},
			{member: "m1", epoch: 0, names: []string{"a"}, assignor: "nope", code: kerr.UnsupportedAssignor},
			{member: "m3", epoch: 0, regex: "(", code: kerr.InvalidRegularExpression},
		}},
		{"session expiry hands the partitions over", []hb{
			{member: "m1", epoch: 0, want: 1, assigned: parts{"a": {0, 1, 2, 3}}},
			{member: "m2", epoch: 0, want: 2, assigned: none},
			{member: "m1", epoch: 1, owned: parts{"a": {0, 1}}, want: 2, assigned: parts{"a": {0, 1}}},
			{member: "m2", epoch: 2, owned: none, want: 2, assigned: parts{"a": {2, 3}}},
			{advance: 30 * time.Second},
			{member: "m2", epoch: 2, owned: parts{"a": {2, 3}}, want: 2},
			{advance: 16 * time.Second}, // m1's 45 s session is over
			{member: "m2", epoch: 2, owned: parts{"a": {2, 3}}, want: 3, assigned: parts{"a": {0, 1, 2, 3}}, groupEpoch: 3},
			{member: "m1", epoch: 2, owned: none, code: kerr.UnknownMemberID},
		}},
		{"leave with epoch -1", []hb{
			{member: "m1", epoch: 0, want: 1, assigned: parts{"a": {0, 1, 2, 3}}},
			{member: "m2", epoch: 0, want: 2, assigned: none},
			{member: "m2", epoch: -1, want: -1, groupEpoch: 3, state: "Assigning"},
			{member: "m1", epoch: 1, owned: parts{"a": {0, 1, 2, 3}}, want: 3, state: "Stable"},
		}},
		{"static member leaves with -2 and its instance rejoins", []hb{
			{member: "s1", instance: "i1", epoch: 0, want: 1, assigned: parts{"a": {0, 1, 2, 3}}},
			{member: "s2", instance: "i1", epoch: 0, code: kerr.UnreleasedInstanceID},
			{member: "s1", instance: "i1", epoch: -2, want: -2, groupEpoch: 1},
			{member: "s2", instance: "i1", epoch: 0, want: 1, assigned: parts{"a": {0, 1, 2, 3}}, groupEpoch: 1},
			{member: "s1", instance: "i1", epoch: 1, owned: none, code: kerr.UnknownMemberID},
		}},
		// franz-go's keepalive heartbeats leave the instance ID out, as
		// Kafka allows: the member stays static, so its next full
		// heartbeat, its -2 leave and its successor still find it.
		{"static member heartbeats without its instance ID", []hb{
			{member: "s1", instance: "i1", epoch: 0, want: 1, assigned: parts{"a": {0, 1, 2, 3}}},
			{member: "s1", epoch: 1, want: 1},
			{member: "s2", instance: "i2", epoch: 0, want: 2, assigned: none},
			{member: "s1", instance: "i1", epoch: 1, owned: parts{"a": {0, 1, 2, 3}}, want: 1, assigned: parts{"a": {0, 1}}},
			{member: "s1", epoch: 1, owned: parts{"a": {0, 1}}, want: 2},
			{member: "s1", epoch: -2, code: kerr.InvalidRequest},
			{restart: true},
			{member: "s1", instance: "i1", epoch: -2, want: -2},
			{restart: true},
			{member: "s3", instance: "i1", epoch: 0, want: 2, assigned: parts{"a": {0, 1}}, groupEpoch: 2},
		}},
		// Kafka's consumerGroupStaticMemberGroupLeave drops the partitions
		// pending revocation: they go to their new owner at once.
		{"static member leaving with -2 releases what it was revoking", []hb{
			{member: "s1", instance: "i1", epoch: 0, want: 1, assigned: parts{"a": {0, 1, 2, 3}}},
			{member: "m2", epoch: 0, want: 2, assigned: none},
			{member: "s1", instance: "i1", epoch: 1, owned: parts{"a": {0, 1, 2, 3}}, want: 1, assigned: parts{"a": {0, 1}}},
			{member: "s1", instance: "i1", epoch: -2, want: -2},
			{member: "m2", epoch: 2, owned: none, want: 2, assigned: parts{"a": {2, 3}}},
		}},
		{"regex subscriptions skip internal topics", []hb{
			{member: "m1", epoch: 0, regex: ".*", want: 1, assigned: parts{"a": {0, 1, 2, 3}, "b": {0, 1}}},
		}},
		{"range assignor", []hb{
			{member: "m1", epoch: 0, assignor: "range", names: []string{"a", "b"}, want: 1, assigned: parts{"a": {0, 1, 2, 3}, "b": {0, 1}}},
			{member: "m2", epoch: 0, assignor: "range", names: []string{"a", "b"}, want: 2, assigned: none},
			{member: "m1", epoch: 1, owned: parts{"a": {0, 1, 2, 3}, "b": {0, 1}}, want: 1, assigned: parts{"a": {0, 1}, "b": {0}}},
			{member: "m1", epoch: 1, owned: parts{"a": {0, 1}, "b": {0}}, want: 2},
			{member: "m2", epoch: 2, owned: none, want: 2, assigned: parts{"a": {2, 3}, "b": {1}}},
		}},
		{"restart keeps members, epochs and assignments", []hb{
			{member: "m1", epoch: 0, want: 1, assigned: parts{"a": {0, 1, 2, 3}}},
			{member: "m2", epoch: 0, want: 2, assigned: none},
			{member: "m1", epoch: 1, owned: parts{"a": {0, 1, 2, 3}}, want: 1, assigned: parts{"a": {0, 1}}},
			{restart: true},
			{member: "m2", epoch: 2, owned: none, want: 2, groupEpoch: 2, state: "Reconciling"},
			{member: "m1", epoch: 1, owned: parts{"a": {0, 1}}, want: 2},
			{member: "m2", epoch: 2, owned: none, want: 2, assigned: parts{"a": {2, 3}}, state: "Stable"},
			{restart: true},
			{member: "m1", epoch: 2, owned: parts{"a": {0, 1}}, want: 2, groupEpoch: 2, state: "Stable"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(cfg *Config) { cfg.Topics = func() []TopicMetadata { return consumerTestTopics } })
			for i, s := range tc.steps {
				h.consumerStep(t, i, s)
			}
		})
	}
}

// A consumer group and a classic group share the group ID space.
func TestConsumerGroupMeetsClassicGroup(t *testing.T) {
	h := newHarness(t, func(cfg *Config) { cfg.Topics = func() []TopicMetadata { return consumerTestTopics } })
	h.consumerStep(t, 0, hb{member: "m1", epoch: 0, want: 1, assigned: parts{"a": {0, 1, 2, 3}}})
	resp := h.join("c1", joinRequest("g", "", "range"))
	expectCode(t, "classic join to a consumer group", resp.ErrorCode, kerr.InconsistentGroupProtocol.Code)

	list, err := h.c.ListGroups(h.ctx(), &kmsg.ListGroupsRequest{Version: 5})
	if err != nil || len(list.Groups) != 1 || list.Groups[0].GroupType != "consumer" || list.Groups[0].GroupState != "Stable" {
		t.Fatalf("ListGroups: %+v %v", list, err)
	}

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.MemberID, commit.Generation = 9, "g", "m1", 0
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "a", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}
	got, err := h.c.OffsetCommit(h.ctx(), commit)
	if err != nil {
		t.Fatal(err)
	}
	expectCode(t, "commit at a stale member epoch", got.Topics[0].Partitions[0].ErrorCode, kerr.StaleMemberEpoch.Code)
	commit.Generation = 1
	got, _ = h.c.OffsetCommit(h.ctx(), commit)
	expectCode(t, "commit at the member epoch", got.Topics[0].Partitions[0].ErrorCode, 0)

	// A non-empty classic group is not a consumer group.
	h2 := newHarness(t, nil)
	h2.stableGroup("g", "c1")
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.RebalanceTimeoutMillis = 1, "g", "m1", 30000
	req.SubscribedTopicNames, req.Topics = []string{"a"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	hbResp, err := h2.c.ConsumerGroupHeartbeat(h2.ctx(), Client{}, req)
	if err != nil {
		t.Fatal(err)
	}
	expectCode(t, "consumer heartbeat to a classic group", hbResp.ErrorCode, kerr.GroupIDNotFound.Code)
}
