package group

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func commitRequest(version int16, group, member string, generation int32, offsets map[int32]int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = version, group, member, generation
	topic := kmsg.OffsetCommitRequestTopic{Topic: "orders"}
	for p := int32(0); p < int32(len(offsets)); p++ {
		topic.Partitions = append(topic.Partitions, kmsg.OffsetCommitRequestTopicPartition{
			Partition: p, Offset: offsets[p], LeaderEpoch: 7, Metadata: kmsg.StringPtr("m"),
		})
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{topic}
	return req
}

func (h *harness) commit(req *kmsg.OffsetCommitRequest) []int16 {
	h.t.Helper()
	resp, err := h.c.OffsetCommit(h.ctx(), req)
	if err != nil {
		h.t.Fatal(err)
	}
	var codes []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	return codes
}

// fetch returns the committed offset of orders/partition in group, -1 if
// none, with its leader epoch and metadata.
func (h *harness) fetch(group string, partition int32) (int64, int32, string) {
	h.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 9
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: []int32{partition}}}}}
	resp, err := h.c.OffsetFetch(h.ctx(), req)
	if err != nil {
		h.t.Fatal(err)
	}
	p := resp.Groups[0].Topics[0].Partitions[0]
	return p.Offset, p.LeaderEpoch, *p.Metadata
}

// TestOffsetCommit: who may commit to a group, and what is kept.
func TestOffsetCommit(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.OffsetMetadataMaxBytes = 8
		cfg.Partitions = func(topic string, partition int32) bool { return topic == "orders" && partition < 2 }
	})
	ids := h.stableGroup("g", "a", "b")
	completing := h.memberID("c", joinRequest("c", ""))
	h.untilAnswered(h.joinAsync("c", joinRequest("c", completing)), h.cfg.InitialRebalanceDelay) // group "c": CompletingRebalance

	one := map[int32]int64{0: 10}
	tests := []struct {
		name string
		req  *kmsg.OffsetCommitRequest
		want int16
	}{
		{"empty group ID", commitRequest(9, "", "", -1, one), kerr.InvalidGroupID.Code},
		{"simple consumer, new group", commitRequest(9, "simple", "", -1, one), 0},
		{"simple consumer, same group again", commitRequest(2, "simple", "", -1, one), 0},
		{"generation for a group that does not exist, v8", commitRequest(8, "none", "m", 1, one), kerr.IllegalGeneration.Code},
		{"generation for a group that does not exist, v9", commitRequest(9, "none", "m", 1, one), kerr.GroupIDNotFound.Code},
		{"member in its generation", commitRequest(9, "g", ids[1], 1, one), 0},
		{"member in an old generation", commitRequest(9, "g", ids[1], 0, one), kerr.IllegalGeneration.Code},
		{"unknown member", commitRequest(9, "g", "x", 1, one), kerr.UnknownMemberID.Code},
		{"no member, no generation, live group", commitRequest(9, "g", "", -1, one), kerr.UnknownMemberID.Code},
		{"member of a group completing its rebalance", commitRequest(9, "c", completing, 1, one), kerr.RebalanceInProgress.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			records := len(h.store.Records())
			codes := h.commit(tt.req)
			expectCode(t, tt.name, codes[0], tt.want)
			if wrote := len(h.store.Records()) - records; (tt.want == 0) != (wrote == 1) {
				t.Fatalf("%d records written", wrote)
			}
		})
	}

	// Per partition: unknown partitions, metadata too large; the rest
	// commits, with its leader epoch and metadata.
	req := commitRequest(9, "g", ids[0], 1, map[int32]int64{0: 100, 1: 101, 2: 102})
	req.Topics[0].Partitions[1].Metadata = kmsg.StringPtr(strings.Repeat("x", 9))
	req.Topics = append(req.Topics, kmsg.OffsetCommitRequestTopic{Topic: "gone", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0}}})
	codes := h.commit(req)
	want := []int16{0, kerr.OffsetMetadataTooLarge.Code, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code}
	for i := range want {
		expectCode(t, "partition", codes[i], want[i])
	}
	if offset, epoch, metadata := h.fetch("g", 0); offset != 100 || epoch != 7 || metadata != "m" {
		t.Fatalf("fetched %d epoch %d %q, want 100 epoch 7 \"m\"", offset, epoch, metadata)
	}
	if offset, _, _ := h.fetch("g", 1); offset != -1 {
		t.Fatalf("partition 1 committed %d despite its metadata", offset)
	}

	// Before v6 there is no leader epoch; a nil metadata is kept as "".
	old := commitRequest(5, "simple", "", -1, one)
	old.Topics[0].Partitions[0].Metadata = nil
	h.commit(old)
	if offset, epoch, metadata := h.fetch("simple", 0); offset != 10 || epoch != -1 || metadata != "" {
		t.Fatalf("v5 commit fetched as %d epoch %d %q", offset, epoch, metadata)
	}

	// A commit the store refuses is not answered as done and not kept.
	h.store.SetAppendError(errors.New("disk full"))
	expectCode(t, "refused commit", h.commit(commitRequest(9, "g", ids[0], 1, one))[0], kerr.NotCoordinator.Code)
	expectCode(t, "refused commit to a new group", h.commit(commitRequest(9, "new", "", -1, one))[0], kerr.NotCoordinator.Code)
	h.store.SetAppendError(nil)
	if offset, _, _ := h.fetch("g", 0); offset != 100 {
		t.Fatalf("offset %d after a refused commit, want 100", offset)
	}
	if s := h.state("new"); s != "Dead" {
		t.Fatalf("refused commit created group new (%s)", s)
	}
}

// TestOffsetFetchVersions: one group (v1-7, with all topics from v2),
// several groups (v8+).
func TestOffsetFetchVersions(t *testing.T) {
	h := newHarness(t, nil)
	h.commit(commitRequest(9, "g1", "", -1, map[int32]int64{0: 5, 1: 6}))
	h.commit(commitRequest(9, "g2", "", -1, map[int32]int64{0: 7}))

	v1 := kmsg.NewPtrOffsetFetchRequest()
	v1.Version, v1.Group = 1, "g1"
	v1.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "orders", Partitions: []int32{1, 9}}}
	resp, err := h.c.OffsetFetch(h.ctx(), v1)
	if err != nil {
		t.Fatal(err)
	}
	if ps := resp.Topics[0].Partitions; len(ps) != 2 || ps[0].Offset != 6 || ps[1].Offset != -1 || ps[1].ErrorCode != 0 {
		t.Fatalf("v1 fetch: %+v", resp)
	}

	all := kmsg.NewPtrOffsetFetchRequest()
	all.Version, all.Group, all.RequireStable = 7, "g1", true
	resp, err = h.c.OffsetFetch(h.ctx(), all)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 || resp.Topics[0].Partitions[1].Offset != 6 {
		t.Fatalf("v7 fetch of all topics: %+v", resp)
	}

	many := kmsg.NewPtrOffsetFetchRequest()
	many.Version = 8
	many.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g2"}, {Group: "missing"}, {Group: ""}, {Group: "missing", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: []int32{0}}}}}
	resp, err = h.c.OffsetFetch(h.ctx(), many)
	if err != nil {
		t.Fatal(err)
	}
	g := resp.Groups
	if len(g) != 4 || g[0].Topics[0].Partitions[0].Offset != 7 || len(g[1].Topics) != 0 || g[2].ErrorCode != kerr.InvalidGroupID.Code || g[3].Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("v8 fetch of several groups: %+v", resp)
	}
}

// TestOffsetDelete: Empty groups and consumer groups for topics they do
// not consume.
func TestOffsetDelete(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stableGroup("g", "a") // subscribed to orders
	h.commit(commitRequest(9, "g", ids[0], 1, map[int32]int64{0: 1}))
	other := commitRequest(9, "g", ids[0], 1, map[int32]int64{0: 2})
	other.Topics[0].Topic = "payments"
	h.commit(other)
	h.commit(commitRequest(9, "simple", "", -1, map[int32]int64{0: 3}))

	del := func(group, topic string) (int16, int16) {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = group
		req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		resp, err := h.c.OffsetDelete(h.ctx(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			return resp.ErrorCode, 0
		}
		return 0, resp.Topics[0].Partitions[0].ErrorCode
	}
	for _, tt := range []struct {
		name, group, topic string
		top, partition     int16
	}{
		{"empty group ID", "", "orders", kerr.InvalidGroupID.Code, 0},
		{"unknown group", "none", "orders", kerr.GroupIDNotFound.Code, 0},
		{"subscribed topic", "g", "orders", 0, kerr.GroupSubscribedToTopic.Code},
		{"topic not consumed", "g", "payments", 0, 0},
		{"empty group", "simple", "orders", 0, 0},
	} {
		top, partition := del(tt.group, tt.topic)
		expectCode(t, tt.name, top, tt.top)
		expectCode(t, tt.name, partition, tt.partition)
	}
	if offset, _, _ := h.fetch("simple", 0); offset != -1 {
		t.Fatalf("deleted offset still fetched: %d", offset)
	}
	if offset, _, _ := h.fetch("g", 0); offset != 1 {
		t.Fatalf("subscribed offset gone: %d", offset)
	}

	// A live group of another protocol type may not delete offsets.
	connect := newHarness(t, nil)
	req := joinRequest("w", "")
	req.ProtocolType = "connect"
	id := connect.memberID("a", req)
	req.MemberID = id
	connect.untilAnswered(connect.joinAsync("a", req), 3e9)
	connect.commit(commitRequest(9, "w", id, 1, map[int32]int64{0: 1}))
	dr := kmsg.NewPtrOffsetDeleteRequest()
	dr.Group = "w"
	resp, err := connect.c.OffsetDelete(connect.ctx(), dr)
	if err != nil {
		t.Fatal(err)
	}
	expectCode(t, "connect group", resp.ErrorCode, kerr.NonEmptyGroup.Code)
}

// TestListDescribeDeleteGroups: the admin view of groups.
func TestListDescribeDeleteGroups(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stableGroup("live", "a")
	h.commit(commitRequest(9, "simple", "", -1, map[int32]int64{0: 3, 1: 4}))

	list := func(states, types []string) []string {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.StatesFilter, req.TypesFilter = 5, states, types
		resp, err := h.c.ListGroups(h.ctx(), req)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, g := range resp.Groups {
			names = append(names, g.Group+":"+g.GroupState+":"+g.ProtocolType+":"+g.GroupType)
		}
		return names
	}
	for _, tt := range []struct {
		states, types []string
		want          string
	}{
		{nil, nil, "live:Stable:consumer:classic simple:Empty::classic"},
		{[]string{"stable"}, nil, "live:Stable:consumer:classic"},
		{[]string{"Empty", "Dead"}, []string{"Classic"}, "simple:Empty::classic"},
		{nil, []string{"consumer"}, ""},
	} {
		if got := strings.Join(list(tt.states, tt.types), " "); got != tt.want {
			t.Fatalf("list %v %v: %q, want %q", tt.states, tt.types, got, tt.want)
		}
	}

	d := h.describe("live")
	if d.State != "Stable" || d.Protocol != "range" || d.ProtocolType != "consumer" || len(d.Members) != 1 ||
		d.Members[0].MemberID != ids[0] || d.Members[0].ClientID != "a" || string(d.Members[0].MemberAssignment) != "a" ||
		string(d.Members[0].ProtocolMetadata) != string(consumerMetadata("orders")) || d.ErrorCode != 0 {
		t.Fatalf("describe live: %+v", d)
	}
	if d := h.describe("missing"); d.State != "Dead" || d.ErrorCode != 0 {
		t.Fatalf("describe missing: %+v", d)
	}

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"live", "missing", "simple", ""}
	resp, err := h.c.DeleteGroups(h.ctx(), del)
	if err != nil {
		t.Fatal(err)
	}
	want := []int16{kerr.NonEmptyGroup.Code, kerr.GroupIDNotFound.Code, 0, kerr.InvalidGroupID.Code}
	for i, g := range resp.Groups {
		expectCode(t, "delete "+g.Group, g.ErrorCode, want[i])
	}
	if offset, _, _ := h.fetch("simple", 1); offset != -1 {
		t.Fatalf("offset of a deleted group: %d", offset)
	}
	if got := strings.Join(list(nil, nil), " "); got != "live:Stable:consumer:classic" {
		t.Fatalf("list after delete: %q", got)
	}
	// The deletion is in the store: tombstones of both offsets, then of
	// the group.
	records := h.store.Records()
	tail := records[len(records)-3:]
	for i, r := range tail {
		d, err := decodeRecord(r)
		if err != nil || r.Value != nil || (i < 2) != (d.offsetKey != nil) {
			t.Fatalf("record %d of the deletion: %+v %v", i, d, err)
		}
	}
}
