package netio

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/broker/group"
)

// coordinatorGroups serves broker/group's coordinator as netio's
// GroupCoordinator (the engine has its own adapter; netio itself does not
// import broker/group, only its tests do).
type coordinatorGroups struct{ *group.Coordinator }

func (g coordinatorGroups) JoinGroup(ctx context.Context, client GroupClient, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, error) {
	return g.Coordinator.JoinGroup(ctx, group.Client{ID: client.ID, Host: client.Host}, req)
}

// noGroups is the memBackend's coordinator when a test gives none: every
// call fails as a closed coordinator's would.
type noGroups struct{}

var errNoGroups = errors.New("netio test: no group coordinator")

func (noGroups) JoinGroup(context.Context, GroupClient, *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, error) {
	return nil, errNoGroups
}
func (noGroups) SyncGroup(context.Context, *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, error) {
	return nil, errNoGroups
}
func (noGroups) Heartbeat(context.Context, *kmsg.HeartbeatRequest) (*kmsg.HeartbeatResponse, error) {
	return nil, errNoGroups
}
func (noGroups) LeaveGroup(context.Context, *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, error) {
	return nil, errNoGroups
}
func (noGroups) TxnOffsetCommit(context.Context, *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, error) {
	return nil, errNoGroups
}
func (noGroups) OffsetCommit(context.Context, *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error) {
	return nil, errNoGroups
}
func (noGroups) OffsetFetch(context.Context, *kmsg.OffsetFetchRequest) (*kmsg.OffsetFetchResponse, error) {
	return nil, errNoGroups
}
func (noGroups) OffsetDelete(context.Context, *kmsg.OffsetDeleteRequest) (*kmsg.OffsetDeleteResponse, error) {
	return nil, errNoGroups
}
func (noGroups) ListGroups(context.Context, *kmsg.ListGroupsRequest) (*kmsg.ListGroupsResponse, error) {
	return nil, errNoGroups
}
func (noGroups) DescribeGroups(context.Context, *kmsg.DescribeGroupsRequest) (*kmsg.DescribeGroupsResponse, error) {
	return nil, errNoGroups
}
func (g coordinatorGroups) ConsumerGroupHeartbeat(ctx context.Context, client GroupClient, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	return g.Coordinator.ConsumerGroupHeartbeat(ctx, group.Client{ID: client.ID, Host: client.Host}, req)
}
func (noGroups) ConsumerGroupHeartbeat(context.Context, GroupClient, *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	return nil, errNoGroups
}
func (noGroups) ConsumerGroupDescribe(context.Context, *kmsg.ConsumerGroupDescribeRequest) (*kmsg.ConsumerGroupDescribeResponse, error) {
	return nil, errNoGroups
}
func (noGroups) DeleteGroups(context.Context, *kmsg.DeleteGroupsRequest) (*kmsg.DeleteGroupsResponse, error) {
	return nil, errNoGroups
}

// startGroupServer serves a memBackend with topic "t" (two partitions) and
// a broker/group coordinator over a MemoryStore, without the initial
// rebalance delay.
func startGroupServer(t *testing.T) (*kgo.Client, *group.MemoryStore) {
	t.Helper()
	mem := newMemBackend()
	if _, err := mem.CreateTopic(context.Background(), "t", 2, nil, false); err != nil {
		t.Fatal(err)
	}
	cfg := group.DefaultConfig()
	cfg.InitialRebalanceDelay = 0
	cfg.Partitions = func(topic string, partition int32) bool {
		_, err := mem.Partition(topic, partition)
		return err == nil
	}
	store := &group.MemoryStore{}
	coordinator, err := group.New(cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(coordinator.Close)
	mem.groups = coordinatorGroups{coordinator}
	client, err := kgo.NewClient(kgo.SeedBrokers(startServer(t, mem)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client, store
}

func groupRequest[T kmsg.Response](t *testing.T, client *kgo.Client, req kmsg.Request) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := client.Request(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp.(T)
}

func expectGroupCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var wantCode int16
	if want != nil {
		wantCode = want.Code
	}
	if got != wantCode {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// TestGroupAPIs: one member's life in a group over the wire, each answer
// from the coordinator behind Backend.Groups, at the client's versions.
func TestGroupAPIs(t *testing.T) {
	client, store := startGroupServer(t)

	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "g", 10000, 10000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{1}}}
	first := groupRequest[*kmsg.JoinGroupResponse](t, client, join)
	expectGroupCode(t, "first join", first.ErrorCode, kerr.MemberIDRequired)
	join.MemberID = first.MemberID
	joined := groupRequest[*kmsg.JoinGroupResponse](t, client, join)
	expectGroupCode(t, "join", joined.ErrorCode, nil)
	if joined.Generation != 1 || joined.LeaderID != join.MemberID || len(joined.Members) != 1 {
		t.Fatalf("join: generation %d, leader %q, %d members; want 1, %q, 1", joined.Generation, joined.LeaderID, len(joined.Members), join.MemberID)
	}

	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation, sync.MemberID = "g", 1, join.MemberID
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: join.MemberID, MemberAssignment: []byte("both")}}
	synced := groupRequest[*kmsg.SyncGroupResponse](t, client, sync)
	expectGroupCode(t, "sync", synced.ErrorCode, nil)
	if string(synced.MemberAssignment) != "both" {
		t.Fatalf("sync: assignment %q, want %q", synced.MemberAssignment, "both")
	}

	heartbeat := kmsg.NewPtrHeartbeatRequest()
	heartbeat.Group, heartbeat.Generation, heartbeat.MemberID = "g", 1, join.MemberID
	expectGroupCode(t, "heartbeat", groupRequest[*kmsg.HeartbeatResponse](t, client, heartbeat).ErrorCode, nil)

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation, commit.MemberID = "g", 1, join.MemberID
	commit.Topics = []kmsg.OffsetCommitRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 42, LeaderEpoch: 3, Metadata: kmsg.StringPtr("m")}}},
		{Topic: "missing", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}},
	}
	committed := groupRequest[*kmsg.OffsetCommitResponse](t, client, commit)
	if len(committed.Topics) != 2 {
		t.Fatalf("commit: %d topics answered, want 2", len(committed.Topics))
	}
	for _, topic := range committed.Topics {
		want := (*kerr.Error)(nil)
		if topic.Topic == "missing" {
			want = kerr.UnknownTopicOrPartition
		}
		expectGroupCode(t, "commit "+topic.Topic, topic.Partitions[0].ErrorCode, want)
	}
	if len(store.Records()) == 0 {
		t.Fatal("the commit was answered but nothing was appended to the store")
	}

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0, 1}}}}}
	fetched := groupRequest[*kmsg.OffsetFetchResponse](t, client, fetch)
	if len(fetched.Groups) != 1 || len(fetched.Groups[0].Topics) != 1 || len(fetched.Groups[0].Topics[0].Partitions) != 2 {
		t.Fatalf("fetch: %+v", fetched)
	}
	for _, p := range fetched.Groups[0].Topics[0].Partitions {
		want := struct {
			offset int64
			epoch  int32
		}{-1, -1}
		if p.Partition == 1 {
			want.offset, want.epoch = 42, 3
		}
		if p.Offset != want.offset || p.LeaderEpoch != want.epoch || p.ErrorCode != 0 {
			t.Fatalf("fetch partition %d: offset %d epoch %d error %d; want %d %d 0", p.Partition, p.Offset, p.LeaderEpoch, p.ErrorCode, want.offset, want.epoch)
		}
	}

	listed := groupRequest[*kmsg.ListGroupsResponse](t, client, kmsg.NewPtrListGroupsRequest())
	if len(listed.Groups) != 1 || listed.Groups[0].Group != "g" || listed.Groups[0].GroupState != "Stable" {
		t.Fatalf("list: %+v", listed.Groups)
	}
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Groups = []string{"g"}
	described := groupRequest[*kmsg.DescribeGroupsResponse](t, client, describe)
	if len(described.Groups) != 1 || len(described.Groups[0].Members) != 1 {
		t.Fatalf("describe: %+v", described.Groups)
	}
	if host := described.Groups[0].Members[0].ClientHost; host != "/127.0.0.1" {
		t.Fatalf("describe: client host %q, want /127.0.0.1 (Kafka's InetAddress form)", host)
	}

	deleteGroups := kmsg.NewPtrDeleteGroupsRequest()
	deleteGroups.Groups = []string{"g"}
	expectGroupCode(t, "delete a Stable group", groupRequest[*kmsg.DeleteGroupsResponse](t, client, deleteGroups).Groups[0].ErrorCode, kerr.NonEmptyGroup)

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: join.MemberID}}
	expectGroupCode(t, "leave", groupRequest[*kmsg.LeaveGroupResponse](t, client, leave).ErrorCode, nil)

	offsetDelete := kmsg.NewPtrOffsetDeleteRequest()
	offsetDelete.Group = "g"
	offsetDelete.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 1}}}}
	deleted := groupRequest[*kmsg.OffsetDeleteResponse](t, client, offsetDelete)
	expectGroupCode(t, "offset delete", deleted.ErrorCode, nil)
	expectGroupCode(t, "offset delete partition", deleted.Topics[0].Partitions[0].ErrorCode, nil)
	expectGroupCode(t, "delete the Empty group", groupRequest[*kmsg.DeleteGroupsResponse](t, client, deleteGroups).Groups[0].ErrorCode, nil)
	if listed := groupRequest[*kmsg.ListGroupsResponse](t, client, kmsg.NewPtrListGroupsRequest()); len(listed.Groups) != 0 {
		t.Fatalf("list after delete: %+v", listed.Groups)
	}
}

// TestGroupAPIsWithoutCoordinator: a coordinator that gives no answer
// (closed) is COORDINATOR_NOT_AVAILABLE, in each API's shape.
func TestGroupAPIsWithoutCoordinator(t *testing.T) {
	raw := dialRaw(t, startServer(t, newMemBackend()))
	unavailable := kerr.CoordinatorNotAvailable
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType, join.SessionTimeoutMillis = 9, "g", "consumer", 10000
	joined := raw.do(join).(*kmsg.JoinGroupResponse)
	expectGroupCode(t, "join", joined.ErrorCode, unavailable)
	if joined.Generation != -1 {
		t.Fatalf("join: generation %d, want -1", joined.Generation)
	}
	sync, heartbeat, leave := kmsg.NewPtrSyncGroupRequest(), kmsg.NewPtrHeartbeatRequest(), kmsg.NewPtrLeaveGroupRequest()
	sync.Version, heartbeat.Version, leave.Version = 5, 4, 5
	expectGroupCode(t, "sync", raw.do(sync).(*kmsg.SyncGroupResponse).ErrorCode, unavailable)
	expectGroupCode(t, "heartbeat", raw.do(heartbeat).(*kmsg.HeartbeatResponse).ErrorCode, unavailable)
	expectGroupCode(t, "leave", raw.do(leave).(*kmsg.LeaveGroupResponse).ErrorCode, unavailable)
	list := kmsg.NewPtrListGroupsRequest()
	list.Version = 5
	expectGroupCode(t, "list", raw.do(list).(*kmsg.ListGroupsResponse).ErrorCode, unavailable)
	expectGroupCode(t, "offset delete", raw.do(kmsg.NewPtrOffsetDeleteRequest()).(*kmsg.OffsetDeleteResponse).ErrorCode, unavailable)

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group = 9, "g"
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0}, {Partition: 1}}}}
	committed := raw.do(commit).(*kmsg.OffsetCommitResponse)
	if len(committed.Topics) != 1 || len(committed.Topics[0].Partitions) != 2 {
		t.Fatalf("commit: %+v", committed.Topics)
	}
	for _, p := range committed.Topics[0].Partitions {
		expectGroupCode(t, "commit", p.ErrorCode, unavailable)
	}
	for _, version := range []int16{1, 7, 8, 9} { // partitions only, then the top level too, then groups
		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.Version, fetch.Group = version, "g"
		fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
		resp := raw.do(fetch).(*kmsg.OffsetFetchResponse)
		switch {
		case version >= 8:
			expectGroupCode(t, "fetch groups", resp.Groups[0].ErrorCode, unavailable)
		case version >= 2:
			expectGroupCode(t, "fetch", resp.ErrorCode, unavailable)
			fallthrough
		default:
			expectGroupCode(t, "fetch partition", resp.Topics[0].Partitions[0].ErrorCode, unavailable)
		}
	}
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Version, describe.Groups = 5, []string{"a", "b"}
	described := raw.do(describe).(*kmsg.DescribeGroupsResponse)
	if len(described.Groups) != 2 {
		t.Fatalf("describe: %d groups answered, want 2", len(described.Groups))
	}
	for _, g := range described.Groups {
		expectGroupCode(t, "describe "+g.Group, g.ErrorCode, unavailable)
	}
	deleteGroups := kmsg.NewPtrDeleteGroupsRequest()
	deleteGroups.Version, deleteGroups.Groups = 2, []string{"a"}
	expectGroupCode(t, "delete", raw.do(deleteGroups).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, unavailable)
}
