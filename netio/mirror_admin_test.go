package netio

// Tests of the mirror admin RPCs (their messages are mirrorwire's, tested
// there): the keys are served and advertised only for a MirrorBackend,
// and a kgo client drives every RPC against the fake admin
// (mirror_fake_test.go).

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/mirrorwire"
)

func strPtr(s string) *string { return &s }

// apiVersionsKeys returns the keys an ApiVersions response lists at v0.
func apiVersionsKeys(t *testing.T, r *rawConn, version int16) map[int16][2]int16 {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = version
	resp := r.do(req).(*kmsg.ApiVersionsResponse)
	keys := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		keys[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return keys
}

func TestMirrorKeysServedOnlyForMirrorBackend(t *testing.T) {
	if requestForKey(3).Key() != 3 || requestForKey(mirrorwire.DeleteClusterMirrorKey).Key() != mirrorwire.DeleteClusterMirrorKey {
		t.Error("requestForKey: a Kafka key or a mirror key answered wrongly")
	}
	mirrors := newMirrorMemBackend()
	withMirrors := dialRaw(t, startServerConfig(t, Config{Backend: mirrors}, mirrors.memBackend))
	plainBackend := newMemBackend()
	plainAddr := startServerConfig(t, Config{Backend: plainBackend}, plainBackend)
	for _, version := range []int16{0, 3} {
		keys := apiVersionsKeys(t, withMirrors, version)
		plain := apiVersionsKeys(t, dialRaw(t, plainAddr), version)
		for key := mirrorwire.FirstKey; key <= mirrorwire.LastKey; key++ {
			if keys[key] != [2]int16{0, 0} {
				t.Errorf("v%d: key %d advertised as %v", version, key, keys[key])
			}
			if _, ok := plain[key]; ok {
				t.Errorf("v%d: plain backend advertises key %d", version, key)
			}
			delete(keys, key)
		}
		if !reflect.DeepEqual(keys, plain) {
			t.Errorf("v%d: Kafka keys differ with mirrors: %v vs %v", version, keys, plain)
		}
	}
	// A version above ApiVersions' own gets the v0 fallback, mirror keys too.
	fallback := kmsg.NewPtrApiVersionsRequest()
	fallback.Version = 9
	withMirrors.correlation++
	withMirrors.send(kmsg.NewRequestFormatter(kmsg.FormatterClientID("t")).AppendRequest(nil, fallback, withMirrors.correlation))
	_, body, err := withMirrors.receive()
	resp := kmsg.NewPtrApiVersionsResponse()
	if err != nil || resp.ReadFrom(body) != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code || resp.ApiKeys[len(resp.ApiKeys)-1].ApiKey != mirrorwire.DescribeClusterMirrorsKey {
		t.Errorf("fallback: err %v, code %d, keys %v", err, resp.ErrorCode, resp.ApiKeys)
	}
	// To a plain backend a mirror key is unknown: the connection closes.
	plain := dialRaw(t, plainAddr)
	plain.send(kmsg.NewRequestFormatter().AppendRequest(nil, &mirrorwire.ListClusterMirrorsRequest{}, 1))
	if _, _, err := plain.receive(); err == nil {
		t.Error("plain backend answered a mirror key")
	}
}

// mirrorClient is a kgo client of a server over a fake mirror admin.
func mirrorClient(t *testing.T, cfg Config) (*kgo.Client, *fakeMirrorAdmin) {
	t.Helper()
	backend := newMirrorMemBackend()
	cfg.Backend = backend
	addr := startServerConfig(t, cfg, backend.memBackend)
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(MirrorClientVersions()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client, backend.admin
}

// request sends req with client and returns its response.
func request[R kmsg.Response](t *testing.T, client *kgo.Client, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client.Request(ctx, req)
	if err != nil {
		t.Fatalf("key %d: %v", req.Key(), err)
	}
	return resp.(R)
}

func wantCode(t *testing.T, what string, code int16, message *string, want *kerr.Error, wantMessage string) {
	t.Helper()
	got := ""
	if message != nil {
		got = *message
	}
	wantCode := int16(0)
	if want != nil {
		wantCode = want.Code
	}
	if code != wantCode || !strings.Contains(got, wantMessage) {
		t.Errorf("%s: %s %q, want %s containing %q", what, errName(code), got, errName(wantCode), wantMessage)
	}
}

// codeName is a Kafka error code's name, NONE for 0.
func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).(*kerr.Error).Message
}

func topicResults(resp *mirrorwire.MirrorTopicsResponse) string {
	var out []string
	for _, topic := range resp.Topics {
		out = append(out, topic.TopicName+"="+codeName(topic.ErrorCode))
	}
	return strings.Join(out, " ")
}

func TestMirrorAdminCreateDeleteList(t *testing.T) {
	client, admin := mirrorClient(t, Config{})
	create := func(name string, configs ...mirrorwire.CreateClusterMirrorConfig) *mirrorwire.CreateClusterMirrorResponse {
		return request[*mirrorwire.CreateClusterMirrorResponse](t, client, &mirrorwire.CreateClusterMirrorRequest{MirrorName: name, Configs: configs})
	}
	source := mirrorwire.CreateClusterMirrorConfig{Name: "bootstrap.servers", Value: strPtr("src:9092")}
	resp := create("m", source)
	wantCode(t, "create", resp.ErrorCode, resp.ErrorMessage, nil, "")
	resp = create("m", source)
	wantCode(t, "create again", resp.ErrorCode, resp.ErrorMessage, kerr.DuplicateResource, `mirror "m" exists`)
	resp = create("n", source, mirrorwire.CreateClusterMirrorConfig{Name: "bogus", Value: strPtr("1")})
	wantCode(t, "unknown key", resp.ErrorCode, resp.ErrorMessage, kerr.InvalidConfig, `unknown mirror config "bogus"`)
	resp = create("n", source, source)
	wantCode(t, "duplicate key", resp.ErrorCode, resp.ErrorMessage, kerr.InvalidRequest, `Duplicate mirror config "bootstrap.servers"`)
	resp = create("n", mirrorwire.CreateClusterMirrorConfig{Name: "bootstrap.servers", Value: nil})
	wantCode(t, "null value", resp.ErrorCode, resp.ErrorMessage, kerr.InvalidConfig, "null value")
	if calls := admin.takeCalls(); calls != "Create(m) Create(m) Create(n)" {
		t.Errorf("calls %q", calls)
	}
	create("n", mirrorwire.CreateClusterMirrorConfig{Name: "bootstrap.servers", Value: strPtr("other:1")})

	list := request[*mirrorwire.ListClusterMirrorsResponse](t, client, &mirrorwire.ListClusterMirrorsRequest{IncludeTopicNames: true})
	want := []mirrorwire.ListClusterMirrorsResponseMirror{
		{MirrorName: "m", SourceBootstrap: "src:9092", SourceClusterID: "source-m", TopicNames: []string{}},
		{MirrorName: "n", SourceBootstrap: "other:1", SourceClusterID: "source-n", TopicNames: []string{}},
	}
	if list.ErrorCode != 0 || !reflect.DeepEqual(list.Mirrors, want) {
		t.Errorf("list: %s %+v", errName(list.ErrorCode), list.Mirrors)
	}
	deleted := request[*mirrorwire.DeleteClusterMirrorResponse](t, client, &mirrorwire.DeleteClusterMirrorRequest{MirrorName: "n"})
	wantCode(t, "delete", deleted.ErrorCode, deleted.ErrorMessage, nil, "")
	deleted = request[*mirrorwire.DeleteClusterMirrorResponse](t, client, &mirrorwire.DeleteClusterMirrorRequest{MirrorName: "n"})
	wantCode(t, "delete again", deleted.ErrorCode, deleted.ErrorMessage, kerr.ResourceNotFound, `mirror "n"`)
	list = request[*mirrorwire.ListClusterMirrorsResponse](t, client, &mirrorwire.ListClusterMirrorsRequest{})
	if len(list.Mirrors) != 1 || list.Mirrors[0].TopicNames != nil {
		t.Errorf("list without names: %+v", list.Mirrors)
	}
}

func TestMirrorAdminTopicStates(t *testing.T) {
	client, admin := mirrorClient(t, Config{})
	request[*mirrorwire.CreateClusterMirrorResponse](t, client, &mirrorwire.CreateClusterMirrorRequest{MirrorName: "m",
		Configs: []mirrorwire.CreateClusterMirrorConfig{{Name: "bootstrap.servers", Value: strPtr("src:9092")}}})
	admin.takeCalls()
	change := func(change TopicsChange, names []string, include, exclude []string) *mirrorwire.MirrorTopicsResponse {
		req := &mirrorwire.MirrorTopicsRequest{Change: change, MirrorName: "m", IncludePatterns: include, ExcludePatterns: exclude}
		for _, name := range names {
			req.Topics = append(req.Topics, mirrorwire.MirrorTopicsRequestTopic{TopicName: name})
		}
		return request[*mirrorwire.MirrorTopicsResponse](t, client, req)
	}
	for _, tc := range []struct {
		change                 TopicsChange
		names, include, exclud []string
		want                   string
	}{
		{StartMirroring, []string{"orders", "orders"}, []string{"pay-.*"}, []string{"pay-us"}, "orders=NONE pay-eu=NONE"},
		{StartMirroring, []string{"nope"}, nil, nil, "nope=UNKNOWN_TOPIC_OR_PARTITION"},
		{PauseMirroring, nil, []string{".*"}, nil, "orders=NONE pay-eu=NONE"},
		{ResumeMirroring, []string{"pay-eu"}, nil, nil, "pay-eu=NONE"},
		{StopMirroring, []string{"orders", "tmp-1"}, nil, nil, "orders=NONE tmp-1=UNKNOWN_TOPIC_OR_PARTITION"},
		{RecoverMirroring, []string{"orders"}, nil, nil, "orders=NONE"},
	} {
		resp := change(tc.change, tc.names, tc.include, tc.exclud)
		if resp.ErrorCode != 0 || topicResults(resp) != tc.want || resp.Key() != tc.change.Key() {
			t.Errorf("%s: %s, topics %q, want %q", tc.change, errName(resp.ErrorCode), topicResults(resp), tc.want)
		}
	}
	wantCalls := "start(m, [orders], [pay-.*], [pay-us]) start(m, [nope], [], []) pause(m, [], [.*], []) " +
		"resume(m, [pay-eu], [], []) stop(m, [orders tmp-1], [], []) recover(m, [orders], [], [])"
	if calls := admin.takeCalls(); calls != wantCalls {
		t.Errorf("calls\n%s\nwant\n%s", calls, wantCalls)
	}
	resp := change(PauseMirroring, nil, nil, []string{"x"})
	wantCode(t, "no topics", resp.ErrorCode, resp.ErrorMessage, kerr.InvalidRequest, "No topic named")
	resp = change(PauseMirroring, nil, []string{"("}, nil)
	wantCode(t, "bad pattern", resp.ErrorCode, resp.ErrorMessage, kerr.InvalidRegularExpression, `pattern "("`)
	resp = request[*mirrorwire.MirrorTopicsResponse](t, client, &mirrorwire.MirrorTopicsRequest{Change: StopMirroring, MirrorName: "x", Topics: []mirrorwire.MirrorTopicsRequestTopic{{TopicName: "t"}}})
	wantCode(t, "unknown mirror", resp.ErrorCode, resp.ErrorMessage, kerr.ResourceNotFound, `mirror "x"`)
	if len(resp.Topics) != 0 {
		t.Errorf("unknown mirror answered topics %v", resp.Topics)
	}
}

func TestMirrorAdminDescribe(t *testing.T) {
	client, admin := mirrorClient(t, Config{})
	request[*mirrorwire.CreateClusterMirrorResponse](t, client, &mirrorwire.CreateClusterMirrorRequest{MirrorName: "m",
		Configs: []mirrorwire.CreateClusterMirrorConfig{{Name: "bootstrap.servers", Value: strPtr("src:9092")}}})
	request[*mirrorwire.MirrorTopicsResponse](t, client, &mirrorwire.MirrorTopicsRequest{Change: StartMirroring, MirrorName: "m", Topics: []mirrorwire.MirrorTopicsRequestTopic{{TopicName: "orders"}}})
	admin.setPartition("m", MirrorPartitionStatus{Topic: "orders", Partition: 0, State: "MIRRORING", SourceHighWatermark: 120, LogEndOffset: 100, LastMirrorEpoch: -1, LastMirrorOffset: -1,
		LeaderEpoch: 5, SourceLeaderEpoch: 6, Leader: 2, ISR: []int32{2, 1, 3}})
	admin.setPartition("m", MirrorPartitionStatus{Topic: "orders", Partition: 1, State: "FAILED", Error: "source topic deleted", RetryCount: -1,
		SourceHighWatermark: -1, SourceHighWatermarkAge: -1, LogEndOffset: 50, LastMirrorEpoch: 3, LastMirrorOffset: 40})
	request[*mirrorwire.MirrorTopicsResponse](t, client, &mirrorwire.MirrorTopicsRequest{Change: StartMirroring, MirrorName: "m", Topics: []mirrorwire.MirrorTopicsRequestTopic{{TopicName: "pay-eu"}}})
	admin.setPartition("m", MirrorPartitionStatus{Topic: "pay-eu", Partition: 0, State: "MIRRORING", SourceHighWatermark: 90, LogEndOffset: 60,
		SourceHighWatermarkAge: 3 * time.Minute, Stale: true, LastMirrorEpoch: -1, LastMirrorOffset: -1, LagTime: 3 * time.Minute})
	since := time.UnixMilli(1_780_000_000_123)
	admin.setUnreachable("m", since, "fetch from broker 1: connection refused")
	admin.takeCalls()

	resp := request[*mirrorwire.DescribeClusterMirrorsResponse](t, client, &mirrorwire.DescribeClusterMirrorsRequest{})
	if resp.ErrorCode != 0 || len(resp.Mirrors) != 1 || len(resp.Mirrors[0].Topics) != 2 {
		t.Fatalf("describe: %s %+v", errName(resp.ErrorCode), resp.Mirrors)
	}
	m := resp.Mirrors[0]
	if m.MirrorName != "m" || *m.SourceBootstrap != "src:9092" || *m.SourceClusterID != "source-m" || m.AuthorizedOperations != mirrorwire.AuthorizedOperationsUnknown ||
		m.SourceUnreachableSinceMillis != since.UnixMilli() || m.SourceError == nil || *m.SourceError != "fetch from broker 1: connection refused" ||
		m.GroupSync != nil {
		t.Errorf("mirror %+v", m)
	}
	// A stale source high watermark: Lag -1 (older clients show it
	// unknown), the lower bound and the age beside it. The leader goes
	// only beside an ISR (a cluster's partition): partition 1's zero
	// Leader, without one, is a node alone's.
	wantPartitions := []mirrorwire.DescribeClusterMirrorsPartition{
		{PartitionIndex: 0, StateValue: "MIRRORING", SourceOffset: 120, DestinationOffset: 100, Lag: 20, LastMirrorEpoch: -1, LastMirrorOffset: -1, LagLowerBound: -1,
			LeaderEpoch: 5, SourceLeaderEpoch: 6, Leader: 2, ISR: []int32{2, 1, 3}},
		{PartitionIndex: 1, StateValue: "FAILED", ErrorMessage: strPtr("source topic deleted"), RetryAttempt: -1,
			SourceOffset: -1, DestinationOffset: 50, Lag: -1, LastMirrorEpoch: 3, LastMirrorOffset: 40, SourceOffsetAgeMillis: -1, LagLowerBound: -1, Leader: -1},
	}
	if got := m.Topics[0].Partitions; m.Topics[0].TopicName != "orders" || !reflect.DeepEqual(got, wantPartitions) {
		t.Errorf("partitions\n%+v\nwant\n%+v", got, wantPartitions)
	}
	wantStale := []mirrorwire.DescribeClusterMirrorsPartition{{PartitionIndex: 0, StateValue: "MIRRORING", SourceOffset: 90, DestinationOffset: 60, Lag: -1,
		LastMirrorEpoch: -1, LastMirrorOffset: -1, LagMillis: 180000, SourceOffsetAgeMillis: 180000, LagLowerBound: 30, Leader: -1}}
	if got := m.Topics[1].Partitions; m.Topics[1].TopicName != "pay-eu" || !reflect.DeepEqual(got, wantStale) {
		t.Errorf("stale partition\n%+v\nwant\n%+v", got, wantStale)
	}

	resp = request[*mirrorwire.DescribeClusterMirrorsResponse](t, client, &mirrorwire.DescribeClusterMirrorsRequest{MirrorNames: []string{"m", "x", "m"}, FailedOnly: true})
	if len(resp.Mirrors) != 2 || len(resp.Mirrors[0].Topics[0].Partitions) != 1 || resp.Mirrors[0].Topics[0].Partitions[0].PartitionIndex != 1 {
		t.Errorf("failed only: %+v", resp.Mirrors)
	}
	wantCode(t, "unknown mirror", resp.Mirrors[1].ErrorCode, resp.Mirrors[1].ErrorMessage, kerr.ResourceNotFound, `mirror "x"`)
	if calls := admin.takeCalls(); calls != "Describe([], false) Describe([m x], true)" {
		t.Errorf("calls %q", calls)
	}
}

// The group offset sync's last round reaches the wire: its time and
// duration in milliseconds, the counts, the error, each group's lag or
// skip; before the first round, LastSyncMillis -1.
func TestMirrorAdminDescribeGroupSync(t *testing.T) {
	client, admin := mirrorClient(t, Config{})
	request[*mirrorwire.CreateClusterMirrorResponse](t, client, &mirrorwire.CreateClusterMirrorRequest{MirrorName: "m",
		Configs: []mirrorwire.CreateClusterMirrorConfig{{Name: "bootstrap.servers", Value: strPtr("src:9092")}}})
	describe := func() *mirrorwire.DescribeClusterMirrorsGroupSync {
		t.Helper()
		resp := request[*mirrorwire.DescribeClusterMirrorsResponse](t, client, &mirrorwire.DescribeClusterMirrorsRequest{})
		if resp.ErrorCode != 0 || len(resp.Mirrors) != 1 {
			t.Fatalf("describe: %s %+v", errName(resp.ErrorCode), resp.Mirrors)
		}
		return resp.Mirrors[0].GroupSync
	}

	admin.setGroupSync("m", &MirrorGroupSync{})
	if got, want := describe(), (&mirrorwire.DescribeClusterMirrorsGroupSync{LastSyncMillis: -1}); !reflect.DeepEqual(got, want) {
		t.Errorf("before the first round: %+v, want %+v", got, want)
	}

	at := time.UnixMilli(1_780_000_000_456)
	admin.setGroupSync("m", &MirrorGroupSync{At: at, Duration: 12*time.Millisecond + 700*time.Microsecond, Synced: 2, Skipped: 1, FailedRounds: 4,
		Error:  "fetch the offsets of group c: NOT_COORDINATOR",
		Groups: []MirrorGroupSyncGroup{{Group: "app", OffsetLag: 500}, {Group: "b"}, {Group: "live", OffsetLag: -1, Skipped: true}}})
	want := &mirrorwire.DescribeClusterMirrorsGroupSync{LastSyncMillis: at.UnixMilli(), DurationMillis: 12, GroupsSynced: 2, GroupsSkipped: 1,
		FailedRounds: 4, ErrorMessage: strPtr("fetch the offsets of group c: NOT_COORDINATOR"),
		Groups: []mirrorwire.DescribeClusterMirrorsGroupSyncGroup{{GroupID: "app", OffsetLag: 500}, {GroupID: "b"}, {GroupID: "live", OffsetLag: -1, Skipped: true}}}
	if got := describe(); !reflect.DeepEqual(got, want) {
		t.Errorf("group sync\n%+v\nwant\n%+v", got, want)
	}

	// A round that succeeded: no error on the wire.
	admin.setGroupSync("m", &MirrorGroupSync{At: at, Synced: 1, Groups: []MirrorGroupSyncGroup{{Group: "app", OffsetLag: 0}}})
	if got := describe(); got == nil || got.ErrorMessage != nil || got.GroupsSynced != 1 || len(got.Groups) != 1 {
		t.Errorf("a round without error: %+v", got)
	}
}

func TestMirrorAdminLastMirrorEpochLookups(t *testing.T) {
	client, admin := mirrorClient(t, Config{})
	admin.storeEpoch("old-primary", LastMirrorEpoch{TopicID: TopicID{7}, Partition: 1, Epoch: 12, Offset: 3400})
	admin.storeEpoch("old-primary", LastMirrorEpoch{TopicID: TopicID{8}, Partition: 0, Epoch: -1, Offset: -1, Err: kerr.UnknownTopicID})
	lookups := []mirrorwire.DescribeClusterMirrorsLookup{{TopicID: TopicID{7}, Partitions: []int32{0, 1}}, {TopicID: TopicID{8}, Partitions: []int32{0}}}
	resp := request[*mirrorwire.DescribeClusterMirrorsResponse](t, client, &mirrorwire.DescribeClusterMirrorsRequest{
		MirrorNames: []string{}, ClusterID: strPtr("old-primary"), LastMirrorEpochLookups: lookups})
	want := []mirrorwire.DescribeClusterMirrorsEpochTopic{
		{TopicID: TopicID{7}, Partitions: []mirrorwire.DescribeClusterMirrorsEpochPartition{{PartitionIndex: 0, ErrorCode: 0, LastMirrorEpoch: -1, LastMirrorOffset: -1}, {PartitionIndex: 1, ErrorCode: 0, LastMirrorEpoch: 12, LastMirrorOffset: 3400}}},
		{TopicID: TopicID{8}, Partitions: []mirrorwire.DescribeClusterMirrorsEpochPartition{{PartitionIndex: 0, ErrorCode: kerr.UnknownTopicID.Code, LastMirrorEpoch: -1, LastMirrorOffset: -1}}},
	}
	if resp.ErrorCode != 0 || resp.Mirrors != nil || !reflect.DeepEqual(resp.LastMirrorEpochs, want) {
		t.Errorf("lookups: %s, mirrors %v, epochs\n%+v\nwant\n%+v", errName(resp.ErrorCode), resp.Mirrors, resp.LastMirrorEpochs, want)
	}
	if calls := admin.takeCalls(); calls != "LastMirrorEpochs(old-primary, 2 topics)" {
		t.Errorf("calls %q", calls)
	}
	resp = request[*mirrorwire.DescribeClusterMirrorsResponse](t, client, &mirrorwire.DescribeClusterMirrorsRequest{LastMirrorEpochLookups: lookups})
	wantCode(t, "no cluster ID", resp.ErrorCode, resp.ErrorMessage, kerr.InvalidRequest, "ClusterId")
	if resp.Mirrors != nil || resp.LastMirrorEpochs != nil {
		t.Errorf("refused lookup answered %+v", resp)
	}
}

func TestMirrorAdminBackendFailure(t *testing.T) {
	var logs lockedBuffer
	client, admin := mirrorClient(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	admin.setFail(errors.New("disk on fire"))
	create := request[*mirrorwire.CreateClusterMirrorResponse](t, client, &mirrorwire.CreateClusterMirrorRequest{MirrorName: "m"})
	wantCode(t, "create", create.ErrorCode, create.ErrorMessage, kerr.UnknownServerError, "disk on fire")
	list := request[*mirrorwire.ListClusterMirrorsResponse](t, client, &mirrorwire.ListClusterMirrorsRequest{})
	wantCode(t, "list", list.ErrorCode, list.ErrorMessage, kerr.UnknownServerError, "disk on fire")
	describe := request[*mirrorwire.DescribeClusterMirrorsResponse](t, client, &mirrorwire.DescribeClusterMirrorsRequest{})
	wantCode(t, "describe", describe.ErrorCode, describe.ErrorMessage, kerr.UnknownServerError, "disk on fire")
	lookup := request[*mirrorwire.DescribeClusterMirrorsResponse](t, client, &mirrorwire.DescribeClusterMirrorsRequest{MirrorNames: []string{},
		ClusterID: strPtr("c"), LastMirrorEpochLookups: []mirrorwire.DescribeClusterMirrorsLookup{{TopicID: TopicID{1}, Partitions: []int32{0}}}})
	wantCode(t, "lookup", lookup.ErrorCode, lookup.ErrorMessage, kerr.UnknownServerError, "disk on fire")
	if !strings.Contains(logs.String(), "disk on fire") {
		t.Errorf("failure not logged: %q", logs.String())
	}
}
