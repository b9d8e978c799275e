package mirrorwire

// Tests of the mirror admin messages: every message encodes and decodes
// back to itself, the encoding matches hand-written bytes and franz-go's
// kbin reader, bad input is refused.

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
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
		req := NewRequest(key)
		requests = append(requests, req)
		responses = append(responses, req.ResponseKind())
	}
	return append(requests, responses...)
}

func strPtr(s string) *string { return &s }

// mirrorSamples are messages of every kind with every field set.
func mirrorSamples() []mirrorMessage {
	head := ErrorHead{ThrottleMillis: 5, ErrorCode: kerr.InvalidConfig.Code, ErrorMessage: strPtr("unknown mirror config \"x\"")}
	topicsRequest := func(change TopicsChange) *MirrorTopicsRequest {
		return &MirrorTopicsRequest{Change: change, MirrorName: "m", Topics: []MirrorTopicsRequestTopic{{"orders"}, {""}},
			IncludePatterns: []string{"pay-.*"}, ExcludePatterns: []string{"tmp-.*", ""}}
	}
	topicsResponse := func(change TopicsChange) *MirrorTopicsResponse {
		return &MirrorTopicsResponse{Change: change, ErrorHead: ErrorHead{ThrottleMillis: 1},
			Topics: []MirrorTopicsResponseTopic{{TopicName: "orders"}, {TopicName: "x", ErrorCode: 3, ErrorMessage: strPtr("no x")}}}
	}
	partition := DescribeClusterMirrorsPartition{PartitionIndex: 2, StateValue: "FAILED", ErrorMessage: strPtr("source topic deleted"),
		RetryAttempt: -1, SourceOffset: 1 << 40, DestinationOffset: 7, Lag: 1<<40 - 7, LastMirrorEpoch: 9, LastMirrorOffset: 3,
		LagMillis: 12, SourceOffsetAgeMillis: 40, LeaderEpoch: 9, SourceLeaderEpoch: 11, Leader: 2, ISR: []int32{2, 3, 1}}
	stale := DescribeClusterMirrorsPartition{PartitionIndex: 3, StateValue: "MIRRORING", SourceOffset: 10, DestinationOffset: 4, Lag: -1,
		LastMirrorEpoch: -1, LastMirrorOffset: -1, LagMillis: 180000, SourceOffsetAgeMillis: 180000, LagLowerBound: 6,
		LeaderEpoch: -1, SourceLeaderEpoch: 0, Leader: -1, ISR: []int32{0}}
	var unset DescribeClusterMirrorsPartition
	unset.Default()
	return []mirrorMessage{
		&CreateClusterMirrorRequest{MirrorName: "m", Configs: []CreateClusterMirrorConfig{{"bootstrap.servers", strPtr("a:9092,b:9092")}, {"x", nil}}},
		&DeleteClusterMirrorRequest{MirrorName: "m"},
		topicsRequest(StartMirroring), topicsRequest(StopMirroring), topicsRequest(PauseMirroring),
		topicsRequest(ResumeMirroring), topicsRequest(RecoverMirroring),
		&ListClusterMirrorsRequest{IncludeTopicNames: true},
		&DescribeClusterMirrorsRequest{MirrorNames: []string{"m", "n"}, IncludeAuthorizedOperations: true, ClusterID: strPtr("c1"),
			LastMirrorEpochLookups: []DescribeClusterMirrorsLookup{{[16]byte{1, 2}, []int32{0, 5}}, {[16]byte{3}, nil}}, FailedOnly: true},
		&DescribeClusterMirrorsRequest{MirrorNames: []string{}},
		&DescribeClusterMirrorsRequest{},
		&CreateClusterMirrorResponse{ErrorHead: head},
		&DeleteClusterMirrorResponse{ErrorHead: head},
		topicsResponse(StartMirroring), topicsResponse(StopMirroring), topicsResponse(PauseMirroring),
		topicsResponse(ResumeMirroring), topicsResponse(RecoverMirroring),
		&ListClusterMirrorsResponse{Mirrors: []ListClusterMirrorsResponseMirror{
			{MirrorName: "m", SourceBootstrap: "a:9092", SourceClusterID: "src", TopicCount: 2, TopicNames: []string{"orders", "pay"}},
			{MirrorName: "n", SourceBootstrap: "b:9092", TopicNames: []string{}},
			{MirrorName: "o"},
		}},
		&DescribeClusterMirrorsResponse{ErrorHead: head, Mirrors: []DescribeClusterMirrorsMirror{
			{MirrorName: "m", SourceBootstrap: strPtr("a:9092"), SourceClusterID: strPtr("src"), AuthorizedOperations: AuthorizedOperationsUnknown,
				Topics:                       []DescribeClusterMirrorsTopic{{TopicName: "orders", Partitions: []DescribeClusterMirrorsPartition{partition, unset, stale}}, {TopicName: "empty"}},
				SourceUnreachableSinceMillis: 1_780_000_000_000, SourceError: strPtr("fetch from broker 1: connection refused"),
				GroupSync: &DescribeClusterMirrorsGroupSync{LastSyncMillis: 1_780_000_000_500, DurationMillis: 12, GroupsSynced: 2, GroupsSkipped: 1,
					FailedRounds: 3, ErrorMessage: strPtr("fetch the offsets of group c: NOT_COORDINATOR"),
					Groups: []DescribeClusterMirrorsGroupSyncGroup{{GroupID: "app", OffsetLag: 500}, {GroupID: "b"}, {GroupID: "live", OffsetLag: -1, Skipped: true}}},
				ACLSync: &DescribeClusterMirrorsACLSync{LastSyncMillis: 1_780_000_000_700, DurationMillis: 9, ACLsSynced: 40, FailedRounds: 2,
					ErrorMessage: strPtr("describe the source's ACLs: SECURITY_DISABLED")}},
			{MirrorName: "new", AuthorizedOperations: AuthorizedOperationsUnknown, SourceUnreachableSinceMillis: -1,
				GroupSync: &DescribeClusterMirrorsGroupSync{LastSyncMillis: -1}, ACLSync: &DescribeClusterMirrorsACLSync{LastSyncMillis: -1}},
			{MirrorName: "gone", ErrorCode: kerr.ResourceNotFound.Code, ErrorMessage: strPtr("no mirror gone"), SourceUnreachableSinceMillis: -1},
		}, LastMirrorEpochs: []DescribeClusterMirrorsEpochTopic{
			{TopicID: [16]byte{1, 2}, Partitions: []DescribeClusterMirrorsEpochPartition{{PartitionIndex: 0, LastMirrorEpoch: 4, LastMirrorOffset: 100}, {5, 3, -1, -1}}},
		}, OfflinePartitions: []DescribeClusterMirrorsOfflinePartition{
			{TopicName: "orders", PartitionIndex: 1, ErrorMessage: "logstore: corrupt: /data/orders-1/partition.metadata: ..."}, {TopicName: "pay"},
		}},
	}
}

// decodeLike decodes b into a new message of m's kind.
func decodeLike(t *testing.T, m mirrorMessage, b []byte) (mirrorMessage, error) {
	t.Helper()
	var fresh mirrorMessage
	switch m := m.(type) {
	case kmsg.Request:
		fresh = NewRequest(m.Key())
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
		if versioned.MaxVersion() != 0 || !versioned.IsFlexible() || KeyName(m.Key()) == "" {
			t.Errorf("%T: max version %d, flexible %v, name %q", m, versioned.MaxVersion(), versioned.IsFlexible(), KeyName(m.Key()))
		}
		versioned.SetVersion(0)
		if versioned.GetVersion() != 0 {
			t.Errorf("%T: version %d after SetVersion(0)", m, versioned.GetVersion())
		}
	}
	if (&MirrorTopicsRequest{}).Key() != -1 || NewRequest(3) != nil || NewRequest(999) != nil {
		t.Error("NewRequest: unset change or other keys answered wrongly")
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
		{&MirrorTopicsResponse{Change: PauseMirroring, ErrorHead: ErrorHead{ErrorCode: 40}, Topics: []MirrorTopicsResponseTopic{{TopicName: "t"}}},
			[]byte{0, 0, 0, 0, 0, 40, 0, 2, 2, 't', 0, 0, 0, 0, 0}},
		// One mirror: error 0, message null, name "m", bootstrap and
		// cluster ID null, operations, no topics; one tag: 2 (size 47:
		// last sync 1000, took 7, 1 synced, 0 skipped, 0 failed rounds,
		// error null, one group ("g", lag 5, not skipped, no tags), no
		// tags); then the response's own tags: none.
		{&DescribeClusterMirrorsResponse{Mirrors: []DescribeClusterMirrorsMirror{{MirrorName: "m", AuthorizedOperations: 1, SourceUnreachableSinceMillis: -1,
			GroupSync: &DescribeClusterMirrorsGroupSync{LastSyncMillis: 1000, DurationMillis: 7, GroupsSynced: 1,
				Groups: []DescribeClusterMirrorsGroupSyncGroup{{GroupID: "g", OffsetLag: 5}}}}}},
			[]byte{0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2, 'm', 0, 0, 0, 0, 0, 1, 1,
				1, 2, 47,
				0, 0, 0, 0, 0, 0, 0x03, 0xe8, // last sync
				0, 0, 0, 0, 0, 0, 0, 7, // took
				0, 0, 0, 1, 0, 0, 0, 0, // synced, skipped
				0, 0, 0, 0, 0, 0, 0, 0, 0, // failed rounds, error null
				2, 2, 'g', 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, // one group
				0, // the group sync's tags
				0}},
		// One mirror (as above, no group sync), one topic "t" with one
		// partition: index 0, state "", error null, retry 0, the offsets,
		// lag and last mirror epoch and offset -1; two tags: 3 (size 4:
		// leader epoch 3) and 4 (size 4: source leader epoch 4); then the
		// topic's, the mirror's and the response's tags: none.
		{&DescribeClusterMirrorsResponse{Mirrors: []DescribeClusterMirrorsMirror{{MirrorName: "m", AuthorizedOperations: 1, SourceUnreachableSinceMillis: -1,
			Topics: []DescribeClusterMirrorsTopic{{TopicName: "t", Partitions: []DescribeClusterMirrorsPartition{{SourceOffset: -1, DestinationOffset: -1,
				Lag: -1, LastMirrorEpoch: -1, LastMirrorOffset: -1, LagMillis: -1, SourceOffsetAgeMillis: -1, LagLowerBound: -1, LeaderEpoch: 3, SourceLeaderEpoch: 4, Leader: -1}}}}}}},
			[]byte{0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2, 'm', 0, 0, 0, 0, 0, 1,
				2, 2, 't', 2, // one topic "t", one partition
				0, 0, 0, 0, 1, 0, 0, 0, // index, state, error, retry
				0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // source offset
				0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // destination offset
				0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // lag
				0xff, 0xff, 0xff, 0xff, // last mirror epoch
				0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // last mirror offset
				2, 3, 4, 0, 0, 0, 3, 4, 4, 0, 0, 0, 4, // the partition's tags
				0, 0, 0}},
	} {
		if got := tc.message.AppendTo(nil); !bytes.Equal(got, tc.want) {
			t.Errorf("%T: % x, want % x", tc.message, got, tc.want)
		}
	}
}

// TestMirrorMessagesReadByKbin reads a ListClusterMirrorsResponse with
// franz-go's own primitives, field by field as the schema says.
func TestMirrorMessagesReadByKbin(t *testing.T) {
	resp := &ListClusterMirrorsResponse{ErrorHead: ErrorHead{ThrottleMillis: 3, ErrorCode: 0},
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
		{"empty", &DeleteClusterMirrorRequest{}, nil, kbin.ErrNotEnoughData},
		{"null name", &DeleteClusterMirrorRequest{}, []byte{0, 0}, errNull},
		{"short name", &DeleteClusterMirrorRequest{}, []byte{5, 'a'}, kbin.ErrNotEnoughData},
		{"trailing", &DeleteClusterMirrorRequest{}, []byte{2, 'a', 0, 9}, errTrailing},
		{"null topics", &MirrorTopicsRequest{Change: StopMirroring}, []byte{2, 'm', 0, 1, 1, 0}, errNull},
		{"huge count", &MirrorTopicsRequest{Change: StopMirroring}, []byte{2, 'm', 0xff, 0xff, 0xff, 0xff, 0x0f, 0}, errCount},
		{"count past input", &CreateClusterMirrorRequest{}, []byte{2, 'm', 3, 2, 'k', 0, 0}, errCount},
		{"too many tags", &ListClusterMirrorsRequest{}, []byte{0, 65}, errTags},
		{"tag past input", &ListClusterMirrorsRequest{}, []byte{0, 1, 0, 9, 0}, kbin.ErrNotEnoughData},
		{"long tag value", &DescribeClusterMirrorsRequest{}, []byte{0, 0, 1, 2, 2, 1, 0}, errTrailing},
		{"varint over 32 bits", &DeleteClusterMirrorRequest{}, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, kbin.ErrNotEnoughData},
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

// TestDescribedMirrorUnknownTag: a client reads a described mirror's
// tagged fields it does not know as absent, here the group sync under a
// tag number no reader knows; the rest reads the same.
func TestDescribedMirrorUnknownTag(t *testing.T) {
	groupSync := &DescribeClusterMirrorsGroupSync{LastSyncMillis: 1000, GroupsSkipped: 1,
		Groups: []DescribeClusterMirrorsGroupSyncGroup{{GroupID: "live", OffsetLag: -1, Skipped: true}}}
	mirror := DescribeClusterMirrorsMirror{MirrorName: "m", AuthorizedOperations: AuthorizedOperationsUnknown,
		SourceUnreachableSinceMillis: 5, GroupSync: groupSync}
	encoded := appendDescribedMirror(nil, &mirror)
	// The fields before the tags: error code 2, message 1, name 2,
	// bootstrap 1, cluster ID 1, operations 4, topics 1; then the tag
	// count, tag 0 (id, size, 8 bytes), and tag 2's id.
	at := 2 + 1 + 2 + 1 + 1 + 4 + 1 + 1 + 10
	if encoded[at] != 2 {
		t.Fatalf("byte %d is %d, want the group sync's tag 2: % x", at, encoded[at], encoded)
	}
	encoded[at] = 9
	d := newReader(encoded)
	got := readDescribedMirror(&d)
	if err := d.complete(); err != nil {
		t.Fatal(err)
	}
	want := mirror
	want.GroupSync = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read\n%+v\nwant\n%+v", got, want)
	}
}
