package netio

// Tests of the mirror admin RPCs: every message encodes and decodes back
// to itself, the encoding matches hand-written bytes and franz-go's kbin
// reader, bad input is refused, the keys are served and advertised only
// for a MirrorBackend, and a kgo client drives every RPC against the
// fake admin (mirror_fake_test.go).

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// mirrorMessage is what requests and responses share.
type mirrorMessage interface {
	Key() int16
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
}

// mirrorMessageKinds returns an empty message of every kind: the requests,
// then their responses, in key order.
func mirrorMessageKinds() []mirrorMessage {
	var requests, responses []mirrorMessage
	for key := CreateClusterMirrorKey; key <= DescribeClusterMirrorsKey; key++ {
		req := newMirrorRequest(key)
		requests = append(requests, req)
		responses = append(responses, req.ResponseKind())
	}
	return append(requests, responses...)
}

func strPtr(s string) *string { return &s }

// mirrorSamples are messages of every kind with every field set.
func mirrorSamples() []mirrorMessage {
	head := mirrorErrorHead{ThrottleMillis: 5, ErrorCode: kerr.InvalidConfig.Code, ErrorMessage: strPtr("unknown mirror config \"x\"")}
	topicsRequest := func(change TopicsChange) *MirrorTopicsRequest {
		return &MirrorTopicsRequest{Change: change, MirrorName: "m", Topics: []MirrorTopicsRequestTopic{{"orders"}, {""}},
			IncludePatterns: []string{"pay-.*"}, ExcludePatterns: []string{"tmp-.*", ""}}
	}
	topicsResponse := func(change TopicsChange) *MirrorTopicsResponse {
		return &MirrorTopicsResponse{Change: change, mirrorErrorHead: mirrorErrorHead{ThrottleMillis: 1},
			Topics: []MirrorTopicsResponseTopic{{TopicName: "orders"}, {TopicName: "x", ErrorCode: 3, ErrorMessage: strPtr("no x")}}}
	}
	partition := DescribeClusterMirrorsPartition{PartitionIndex: 2, StateValue: "FAILED", ErrorMessage: strPtr("source topic deleted"),
		RetryAttempt: -1, SourceOffset: 1 << 40, DestinationOffset: 7, Lag: 1<<40 - 7, LastMirrorEpoch: 9, LastMirrorOffset: 3,
		LagMillis: 12, SourceOffsetAgeMillis: 40}
	stale := DescribeClusterMirrorsPartition{PartitionIndex: 3, StateValue: "MIRRORING", SourceOffset: 10, DestinationOffset: 4, Lag: -1,
		LastMirrorEpoch: -1, LastMirrorOffset: -1, LagMillis: 180000, SourceOffsetAgeMillis: 180000, LagLowerBound: 6}
	var unset DescribeClusterMirrorsPartition
	unset.Default()
	return []mirrorMessage{
		&CreateClusterMirrorRequest{MirrorName: "m", Configs: []CreateClusterMirrorConfig{{"bootstrap.servers", strPtr("a:9092,b:9092")}, {"x", nil}}},
		&DeleteClusterMirrorRequest{MirrorName: "m"},
		topicsRequest(StartMirroring), topicsRequest(StopMirroring), topicsRequest(PauseMirroring),
		topicsRequest(ResumeMirroring), topicsRequest(RecoverMirroring),
		&ListClusterMirrorsRequest{IncludeTopicNames: true},
		&DescribeClusterMirrorsRequest{MirrorNames: []string{"m", "n"}, IncludeAuthorizedOperations: true, ClusterID: strPtr("c1"),
			LastMirrorEpochLookups: []DescribeClusterMirrorsLookup{{TopicID{1, 2}, []int32{0, 5}}, {TopicID{3}, nil}}, FailedOnly: true},
		&DescribeClusterMirrorsRequest{MirrorNames: []string{}},
		&DescribeClusterMirrorsRequest{},
		&CreateClusterMirrorResponse{mirrorErrorHead: head},
		&DeleteClusterMirrorResponse{mirrorErrorHead: head},
		topicsResponse(StartMirroring), topicsResponse(StopMirroring), topicsResponse(PauseMirroring),
		topicsResponse(ResumeMirroring), topicsResponse(RecoverMirroring),
		&ListClusterMirrorsResponse{Mirrors: []ListClusterMirrorsResponseMirror{
			{MirrorName: "m", SourceBootstrap: "a:9092", SourceClusterID: "src", TopicCount: 2, TopicNames: []string{"orders", "pay"}},
			{MirrorName: "n", SourceBootstrap: "b:9092", TopicNames: []string{}},
			{MirrorName: "o"},
		}},
		&DescribeClusterMirrorsResponse{mirrorErrorHead: head, Mirrors: []DescribeClusterMirrorsMirror{
			{MirrorName: "m", SourceBootstrap: strPtr("a:9092"), SourceClusterID: strPtr("src"), AuthorizedOperations: authorizedOperationsUnknown,
				Topics:                       []DescribeClusterMirrorsTopic{{TopicName: "orders", Partitions: []DescribeClusterMirrorsPartition{partition, unset, stale}}, {TopicName: "empty"}},
				SourceUnreachableSinceMillis: 1_780_000_000_000, SourceError: strPtr("fetch from broker 1: connection refused")},
			{MirrorName: "gone", ErrorCode: kerr.ResourceNotFound.Code, ErrorMessage: strPtr("no mirror gone"), SourceUnreachableSinceMillis: -1},
		}, LastMirrorEpochs: []DescribeClusterMirrorsEpochTopic{
			{TopicID: TopicID{1, 2}, Partitions: []DescribeClusterMirrorsEpochPartition{{PartitionIndex: 0, LastMirrorEpoch: 4, LastMirrorOffset: 100}, {5, 3, -1, -1}}},
		}},
	}
}

// decodeLike decodes b into a new message of m's kind.
func decodeLike(t *testing.T, m mirrorMessage, b []byte) (mirrorMessage, error) {
	t.Helper()
	var fresh mirrorMessage
	switch m := m.(type) {
	case kmsg.Request:
		fresh = newMirrorRequest(m.Key())
	case kmsg.Response:
		fresh = m.RequestKind().ResponseKind()
	}
	if fresh == nil || fresh.Key() != m.Key() {
		t.Fatalf("no fresh message of key %d", m.Key())
	}
	return fresh, fresh.ReadFrom(b)
}

func TestMirrorMessagesRoundTrip(t *testing.T) {
	for _, sample := range mirrorSamples() {
		encoded := sample.AppendTo([]byte{0xee}) // AppendTo appends
		if encoded[0] != 0xee {
			t.Fatalf("key %d: AppendTo overwrote dst", sample.Key())
		}
		decoded, err := decodeLike(t, sample, encoded[1:])
		if err != nil {
			t.Fatalf("key %d (%T): %v", sample.Key(), sample, err)
		}
		if !reflect.DeepEqual(decoded, sample) {
			t.Errorf("key %d (%T): decoded\n%+v\nwant\n%+v", sample.Key(), sample, decoded, sample)
		}
	}
}

func TestMirrorMessagesAreKmsgTypes(t *testing.T) {
	for _, m := range mirrorMessageKinds() {
		var versioned interface {
			MaxVersion() int16
			GetVersion() int16
			SetVersion(int16)
			IsFlexible() bool
		}
		switch m := m.(type) {
		case kmsg.Request:
			versioned = m
			if m.ResponseKind().Key() != m.Key() {
				t.Errorf("key %d: response kind has key %d", m.Key(), m.ResponseKind().Key())
			}
		case kmsg.Response:
			versioned = m
			if m.RequestKind().Key() != m.Key() {
				t.Errorf("key %d: request kind has key %d", m.Key(), m.RequestKind().Key())
			}
		default:
			t.Fatalf("%T is neither a kmsg.Request nor a kmsg.Response", m)
		}
		if versioned.MaxVersion() != 0 || !versioned.IsFlexible() || MirrorKeyName(m.Key()) == "" {
			t.Errorf("%T: max version %d, flexible %v, name %q", m, versioned.MaxVersion(), versioned.IsFlexible(), MirrorKeyName(m.Key()))
		}
		versioned.SetVersion(0)
		if versioned.GetVersion() != 0 {
			t.Errorf("%T: version %d after SetVersion(0)", m, versioned.GetVersion())
		}
	}
	if (&MirrorTopicsRequest{}).Key() != -1 || requestForKey(3).Key() != 3 || newMirrorRequest(999) != nil {
		t.Error("requestForKey: unset change or Kafka keys answered wrongly")
	}
}

// TestMirrorMessagesGolden pins the encoding to bytes written by hand.
func TestMirrorMessagesGolden(t *testing.T) {
	for _, tc := range []struct {
		message mirrorMessage
		want    []byte
	}{
		// MirrorNames null, IncludeAuthorizedOperations false, two tags:
		// 0 (size 2: "c"), 2 (size 1: true).
		{&DescribeClusterMirrorsRequest{ClusterID: strPtr("c"), FailedOnly: true}, []byte{0, 0, 2, 0, 2, 2, 'c', 2, 1, 1}},
		// name "m", one config (name "k", value null, no tags), no tags.
		{&CreateClusterMirrorRequest{MirrorName: "m", Configs: []CreateClusterMirrorConfig{{Name: "k"}}}, []byte{2, 'm', 2, 2, 'k', 0, 0, 0}},
		// throttle 0, error 40, message null, one topic ("t", 0, null), no tags.
		{&MirrorTopicsResponse{Change: PauseMirroring, mirrorErrorHead: mirrorErrorHead{ErrorCode: 40}, Topics: []MirrorTopicsResponseTopic{{TopicName: "t"}}},
			[]byte{0, 0, 0, 0, 0, 40, 0, 2, 2, 't', 0, 0, 0, 0, 0}},
	} {
		if got := tc.message.AppendTo(nil); !bytes.Equal(got, tc.want) {
			t.Errorf("%T: % x, want % x", tc.message, got, tc.want)
		}
	}
}

// TestMirrorMessagesReadByKbin reads a ListClusterMirrorsResponse with
// franz-go's own primitives, field by field as the schema says.
func TestMirrorMessagesReadByKbin(t *testing.T) {
	resp := &ListClusterMirrorsResponse{mirrorErrorHead: mirrorErrorHead{ThrottleMillis: 3, ErrorCode: 0},
		Mirrors: []ListClusterMirrorsResponseMirror{{MirrorName: "m", SourceBootstrap: "a:1", SourceClusterID: "id", TopicCount: 1, TopicNames: []string{"orders"}}}}
	b := kbin.Reader{Src: resp.AppendTo(nil)}
	got := []any{b.Int32(), b.Int16(), b.CompactNullableString(), b.CompactArrayLen(), b.CompactString(), b.CompactString(),
		b.CompactString(), b.Int32(), b.CompactArrayLen(), b.CompactString(), b.Uvarint(), b.Uvarint()}
	want := []any{int32(3), int16(0), (*string)(nil), int32(1), "m", "a:1", "id", int32(1), int32(1), "orders", uint32(0), uint32(0)}
	if err := b.Complete(); err != nil || len(b.Src) != 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("kbin read %v (err %v, %d left), want %v", got, err, len(b.Src), want)
	}
}

func TestMirrorMessagesRefuseBadInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		message mirrorMessage
		input   []byte
		want    error
	}{
		{"empty", &DeleteClusterMirrorRequest{}, nil, errVarint},
		{"null name", &DeleteClusterMirrorRequest{}, []byte{0, 0}, errMirrorNull},
		{"short name", &DeleteClusterMirrorRequest{}, []byte{5, 'a'}, errShort},
		{"trailing", &DeleteClusterMirrorRequest{}, []byte{2, 'a', 0, 9}, errMirrorTrailing},
		{"null topics", &MirrorTopicsRequest{Change: StopMirroring}, []byte{2, 'm', 0, 1, 1, 0}, errMirrorNull},
		{"huge count", &MirrorTopicsRequest{Change: StopMirroring}, []byte{2, 'm', 0xff, 0xff, 0xff, 0xff, 0x0f, 0}, errMirrorCount},
		{"count past input", &CreateClusterMirrorRequest{}, []byte{2, 'm', 3, 2, 'k', 0, 0}, errMirrorCount},
		{"too many tags", &ListClusterMirrorsRequest{}, []byte{0, 65}, errMirrorTags},
		{"tag past input", &ListClusterMirrorsRequest{}, []byte{0, 1, 0, 9, 0}, errShort},
		{"long tag value", &DescribeClusterMirrorsRequest{}, []byte{0, 0, 1, 2, 2, 1, 0}, errMirrorTrailing},
		{"varint over 32 bits", &DeleteClusterMirrorRequest{}, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, errVarint},
	} {
		if err := tc.message.ReadFrom(tc.input); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// An unknown tag is skipped.
	var req ListClusterMirrorsRequest
	if err := req.ReadFrom([]byte{1, 1, 7, 2, 0xaa, 0xbb}); err != nil || !req.IncludeTopicNames {
		t.Errorf("unknown tag: %v, %+v", err, req)
	}
}

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
	mirrors := newMirrorMemBackend()
	withMirrors := dialRaw(t, startServerConfig(t, Config{Backend: mirrors}, mirrors.memBackend))
	plainBackend := newMemBackend()
	plainAddr := startServerConfig(t, Config{Backend: plainBackend}, plainBackend)
	for _, version := range []int16{0, 3} {
		keys := apiVersionsKeys(t, withMirrors, version)
		plain := apiVersionsKeys(t, dialRaw(t, plainAddr), version)
		for key := CreateClusterMirrorKey; key <= DescribeClusterMirrorsKey; key++ {
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
	if err != nil || resp.ReadFrom(body) != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code || resp.ApiKeys[len(resp.ApiKeys)-1].ApiKey != DescribeClusterMirrorsKey {
		t.Errorf("fallback: err %v, code %d, keys %v", err, resp.ErrorCode, resp.ApiKeys)
	}
	// To a plain backend a mirror key is unknown: the connection closes.
	plain := dialRaw(t, plainAddr)
	plain.send(kmsg.NewRequestFormatter().AppendRequest(nil, &ListClusterMirrorsRequest{}, 1))
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

func topicResults(resp *MirrorTopicsResponse) string {
	var out []string
	for _, topic := range resp.Topics {
		out = append(out, topic.TopicName+"="+codeName(topic.ErrorCode))
	}
	return strings.Join(out, " ")
}

func TestMirrorAdminCreateDeleteList(t *testing.T) {
	client, admin := mirrorClient(t, Config{})
	create := func(name string, configs ...CreateClusterMirrorConfig) *CreateClusterMirrorResponse {
		return request[*CreateClusterMirrorResponse](t, client, &CreateClusterMirrorRequest{MirrorName: name, Configs: configs})
	}
	source := CreateClusterMirrorConfig{"bootstrap.servers", strPtr("src:9092")}
	resp := create("m", source)
	wantCode(t, "create", resp.ErrorCode, resp.ErrorMessage, nil, "")
	resp = create("m", source)
	wantCode(t, "create again", resp.ErrorCode, resp.ErrorMessage, kerr.DuplicateResource, `mirror "m" exists`)
	resp = create("n", source, CreateClusterMirrorConfig{"bogus", strPtr("1")})
	wantCode(t, "unknown key", resp.ErrorCode, resp.ErrorMessage, kerr.InvalidConfig, `unknown mirror config "bogus"`)
	resp = create("n", source, source)
	wantCode(t, "duplicate key", resp.ErrorCode, resp.ErrorMessage, kerr.InvalidRequest, `Duplicate mirror config "bootstrap.servers"`)
	resp = create("n", CreateClusterMirrorConfig{"bootstrap.servers", nil})
	wantCode(t, "null value", resp.ErrorCode, resp.ErrorMessage, kerr.InvalidConfig, "null value")
	if calls := admin.takeCalls(); calls != "Create(m) Create(m) Create(n)" {
		t.Errorf("calls %q", calls)
	}
	create("n", CreateClusterMirrorConfig{"bootstrap.servers", strPtr("other:1")})

	list := request[*ListClusterMirrorsResponse](t, client, &ListClusterMirrorsRequest{IncludeTopicNames: true})
	want := []ListClusterMirrorsResponseMirror{
		{MirrorName: "m", SourceBootstrap: "src:9092", SourceClusterID: "source-m", TopicNames: []string{}},
		{MirrorName: "n", SourceBootstrap: "other:1", SourceClusterID: "source-n", TopicNames: []string{}},
	}
	if list.ErrorCode != 0 || !reflect.DeepEqual(list.Mirrors, want) {
		t.Errorf("list: %s %+v", errName(list.ErrorCode), list.Mirrors)
	}
	deleted := request[*DeleteClusterMirrorResponse](t, client, &DeleteClusterMirrorRequest{MirrorName: "n"})
	wantCode(t, "delete", deleted.ErrorCode, deleted.ErrorMessage, nil, "")
	deleted = request[*DeleteClusterMirrorResponse](t, client, &DeleteClusterMirrorRequest{MirrorName: "n"})
	wantCode(t, "delete again", deleted.ErrorCode, deleted.ErrorMessage, kerr.ResourceNotFound, `mirror "n"`)
	list = request[*ListClusterMirrorsResponse](t, client, &ListClusterMirrorsRequest{})
	if len(list.Mirrors) != 1 || list.Mirrors[0].TopicNames != nil {
		t.Errorf("list without names: %+v", list.Mirrors)
	}
}

func TestMirrorAdminTopicStates(t *testing.T) {
	client, admin := mirrorClient(t, Config{})
	request[*CreateClusterMirrorResponse](t, client, &CreateClusterMirrorRequest{MirrorName: "m",
		Configs: []CreateClusterMirrorConfig{{"bootstrap.servers", strPtr("src:9092")}}})
	admin.takeCalls()
	change := func(change TopicsChange, names []string, include, exclude []string) *MirrorTopicsResponse {
		req := &MirrorTopicsRequest{Change: change, MirrorName: "m", IncludePatterns: include, ExcludePatterns: exclude}
		for _, name := range names {
			req.Topics = append(req.Topics, MirrorTopicsRequestTopic{name})
		}
		return request[*MirrorTopicsResponse](t, client, req)
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
		if resp.ErrorCode != 0 || topicResults(resp) != tc.want || resp.Key() != mirrorTopicsKeys[tc.change] {
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
	resp = request[*MirrorTopicsResponse](t, client, &MirrorTopicsRequest{Change: StopMirroring, MirrorName: "x", Topics: []MirrorTopicsRequestTopic{{"t"}}})
	wantCode(t, "unknown mirror", resp.ErrorCode, resp.ErrorMessage, kerr.ResourceNotFound, `mirror "x"`)
	if len(resp.Topics) != 0 {
		t.Errorf("unknown mirror answered topics %v", resp.Topics)
	}
}

func TestMirrorAdminDescribe(t *testing.T) {
	client, admin := mirrorClient(t, Config{})
	request[*CreateClusterMirrorResponse](t, client, &CreateClusterMirrorRequest{MirrorName: "m",
		Configs: []CreateClusterMirrorConfig{{"bootstrap.servers", strPtr("src:9092")}}})
	request[*MirrorTopicsResponse](t, client, &MirrorTopicsRequest{Change: StartMirroring, MirrorName: "m", Topics: []MirrorTopicsRequestTopic{{"orders"}}})
	admin.setPartition("m", MirrorPartitionStatus{Topic: "orders", Partition: 0, State: "MIRRORING", SourceHighWatermark: 120, LogEndOffset: 100, LastMirrorEpoch: -1, LastMirrorOffset: -1})
	admin.setPartition("m", MirrorPartitionStatus{Topic: "orders", Partition: 1, State: "FAILED", Error: "source topic deleted", RetryCount: -1,
		SourceHighWatermark: -1, SourceHighWatermarkAge: -1, LogEndOffset: 50, LastMirrorEpoch: 3, LastMirrorOffset: 40})
	request[*MirrorTopicsResponse](t, client, &MirrorTopicsRequest{Change: StartMirroring, MirrorName: "m", Topics: []MirrorTopicsRequestTopic{{"pay-eu"}}})
	admin.setPartition("m", MirrorPartitionStatus{Topic: "pay-eu", Partition: 0, State: "MIRRORING", SourceHighWatermark: 90, LogEndOffset: 60,
		SourceHighWatermarkAge: 3 * time.Minute, Stale: true, LastMirrorEpoch: -1, LastMirrorOffset: -1, LagTime: 3 * time.Minute})
	since := time.UnixMilli(1_780_000_000_123)
	admin.setUnreachable("m", since, "fetch from broker 1: connection refused")
	admin.takeCalls()

	resp := request[*DescribeClusterMirrorsResponse](t, client, &DescribeClusterMirrorsRequest{})
	if resp.ErrorCode != 0 || len(resp.Mirrors) != 1 || len(resp.Mirrors[0].Topics) != 2 {
		t.Fatalf("describe: %s %+v", errName(resp.ErrorCode), resp.Mirrors)
	}
	m := resp.Mirrors[0]
	if m.MirrorName != "m" || *m.SourceBootstrap != "src:9092" || *m.SourceClusterID != "source-m" || m.AuthorizedOperations != authorizedOperationsUnknown ||
		m.SourceUnreachableSinceMillis != since.UnixMilli() || m.SourceError == nil || *m.SourceError != "fetch from broker 1: connection refused" {
		t.Errorf("mirror %+v", m)
	}
	// A stale source high watermark: Lag -1 (older clients show it
	// unknown), the lower bound and the age beside it.
	wantPartitions := []DescribeClusterMirrorsPartition{
		{PartitionIndex: 0, StateValue: "MIRRORING", SourceOffset: 120, DestinationOffset: 100, Lag: 20, LastMirrorEpoch: -1, LastMirrorOffset: -1, LagLowerBound: -1},
		{PartitionIndex: 1, StateValue: "FAILED", ErrorMessage: strPtr("source topic deleted"), RetryAttempt: -1,
			SourceOffset: -1, DestinationOffset: 50, Lag: -1, LastMirrorEpoch: 3, LastMirrorOffset: 40, SourceOffsetAgeMillis: -1, LagLowerBound: -1},
	}
	if got := m.Topics[0].Partitions; m.Topics[0].TopicName != "orders" || !reflect.DeepEqual(got, wantPartitions) {
		t.Errorf("partitions\n%+v\nwant\n%+v", got, wantPartitions)
	}
	wantStale := []DescribeClusterMirrorsPartition{{PartitionIndex: 0, StateValue: "MIRRORING", SourceOffset: 90, DestinationOffset: 60, Lag: -1,
		LastMirrorEpoch: -1, LastMirrorOffset: -1, LagMillis: 180000, SourceOffsetAgeMillis: 180000, LagLowerBound: 30}}
	if got := m.Topics[1].Partitions; m.Topics[1].TopicName != "pay-eu" || !reflect.DeepEqual(got, wantStale) {
		t.Errorf("stale partition\n%+v\nwant\n%+v", got, wantStale)
	}

	resp = request[*DescribeClusterMirrorsResponse](t, client, &DescribeClusterMirrorsRequest{MirrorNames: []string{"m", "x", "m"}, FailedOnly: true})
	if len(resp.Mirrors) != 2 || len(resp.Mirrors[0].Topics[0].Partitions) != 1 || resp.Mirrors[0].Topics[0].Partitions[0].PartitionIndex != 1 {
		t.Errorf("failed only: %+v", resp.Mirrors)
	}
	wantCode(t, "unknown mirror", resp.Mirrors[1].ErrorCode, resp.Mirrors[1].ErrorMessage, kerr.ResourceNotFound, `mirror "x"`)
	if calls := admin.takeCalls(); calls != "Describe([], false) Describe([m x], true)" {
		t.Errorf("calls %q", calls)
	}
}

func TestMirrorAdminLastMirrorEpochLookups(t *testing.T) {
	client, admin := mirrorClient(t, Config{})
	admin.storeEpoch("old-primary", LastMirrorEpoch{TopicID: TopicID{7}, Partition: 1, Epoch: 12, Offset: 3400})
	admin.storeEpoch("old-primary", LastMirrorEpoch{TopicID: TopicID{8}, Partition: 0, Epoch: -1, Offset: -1, Err: kerr.UnknownTopicID})
	lookups := []DescribeClusterMirrorsLookup{{TopicID{7}, []int32{0, 1}}, {TopicID{8}, []int32{0}}}
	resp := request[*DescribeClusterMirrorsResponse](t, client, &DescribeClusterMirrorsRequest{
		MirrorNames: []string{}, ClusterID: strPtr("old-primary"), LastMirrorEpochLookups: lookups})
	want := []DescribeClusterMirrorsEpochTopic{
		{TopicID: TopicID{7}, Partitions: []DescribeClusterMirrorsEpochPartition{{0, 0, -1, -1}, {1, 0, 12, 3400}}},
		{TopicID: TopicID{8}, Partitions: []DescribeClusterMirrorsEpochPartition{{0, kerr.UnknownTopicID.Code, -1, -1}}},
	}
	if resp.ErrorCode != 0 || resp.Mirrors != nil || !reflect.DeepEqual(resp.LastMirrorEpochs, want) {
		t.Errorf("lookups: %s, mirrors %v, epochs\n%+v\nwant\n%+v", errName(resp.ErrorCode), resp.Mirrors, resp.LastMirrorEpochs, want)
	}
	if calls := admin.takeCalls(); calls != "LastMirrorEpochs(old-primary, 2 topics)" {
		t.Errorf("calls %q", calls)
	}
	resp = request[*DescribeClusterMirrorsResponse](t, client, &DescribeClusterMirrorsRequest{LastMirrorEpochLookups: lookups})
	wantCode(t, "no cluster ID", resp.ErrorCode, resp.ErrorMessage, kerr.InvalidRequest, "ClusterId")
	if resp.Mirrors != nil || resp.LastMirrorEpochs != nil {
		t.Errorf("refused lookup answered %+v", resp)
	}
}

func TestMirrorAdminBackendFailure(t *testing.T) {
	var logs lockedBuffer
	client, admin := mirrorClient(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	admin.setFail(errors.New("disk on fire"))
	create := request[*CreateClusterMirrorResponse](t, client, &CreateClusterMirrorRequest{MirrorName: "m"})
	wantCode(t, "create", create.ErrorCode, create.ErrorMessage, kerr.UnknownServerError, "disk on fire")
	list := request[*ListClusterMirrorsResponse](t, client, &ListClusterMirrorsRequest{})
	wantCode(t, "list", list.ErrorCode, list.ErrorMessage, kerr.UnknownServerError, "disk on fire")
	describe := request[*DescribeClusterMirrorsResponse](t, client, &DescribeClusterMirrorsRequest{})
	wantCode(t, "describe", describe.ErrorCode, describe.ErrorMessage, kerr.UnknownServerError, "disk on fire")
	lookup := request[*DescribeClusterMirrorsResponse](t, client, &DescribeClusterMirrorsRequest{MirrorNames: []string{},
		ClusterID: strPtr("c"), LastMirrorEpochLookups: []DescribeClusterMirrorsLookup{{TopicID{1}, []int32{0}}}})
	wantCode(t, "lookup", lookup.ErrorCode, lookup.ErrorMessage, kerr.UnknownServerError, "disk on fire")
	if !strings.Contains(logs.String(), "disk on fire") {
		t.Errorf("failure not logged: %q", logs.String())
	}
}
