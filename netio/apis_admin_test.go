package netio

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestFindCoordinator(t *testing.T) {
	backend := newStubBackend()
	raw := startStubServer(t, backend)
	cluster := backend.Cluster()
	for version := int16(0); version <= 6; version++ {
		for _, c := range []struct {
			kind int8
			code int16
		}{
			{0, 0},
			{1, 0},
			{2, kerr.InvalidRequest.Code}, // share coordinators are not served
			{9, kerr.InvalidRequest.Code},
		} {
			if version == 0 && c.kind != 0 {
				continue // v0 has no coordinator type
			}
			t.Run(fmt.Sprintf("v%d type %d", version, c.kind), func(t *testing.T) {
				req := kmsg.NewPtrFindCoordinatorRequest()
				req.Version, req.CoordinatorType = version, c.kind
				req.CoordinatorKey, req.CoordinatorKeys = "g", []string{"g", "h"}
				resp := raw.do(req).(*kmsg.FindCoordinatorResponse)
				type answer struct {
					key        string
					code       int16
					node, port int32
					host       string
				}
				var got, want []answer
				wantNode, wantHost, wantPort := cluster.NodeID, cluster.Host, cluster.Port
				if c.code != 0 {
					wantNode, wantHost, wantPort = -1, "", -1
				}
				if version >= 4 {
					for _, sc := range resp.Coordinators {
						got = append(got, answer{sc.Key, sc.ErrorCode, sc.NodeID, sc.Port, sc.Host})
					}
					want = []answer{{"g", c.code, wantNode, wantPort, wantHost}, {"h", c.code, wantNode, wantPort, wantHost}}
				} else {
					got = []answer{{"", resp.ErrorCode, resp.NodeID, resp.Port, resp.Host}}
					want = []answer{{"", c.code, wantNode, wantPort, wantHost}}
					if version >= 1 && (resp.ErrorMessage == nil || (c.code == 0) != (*resp.ErrorMessage == "NONE")) {
						t.Errorf("error message %v", resp.ErrorMessage)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("got %+v, want %+v", got, want)
				}
			})
		}
	}
}

func TestDescribeCluster(t *testing.T) {
	backend := newStubBackend()
	raw := startStubServer(t, backend)
	cluster := backend.Cluster()
	for _, c := range []struct {
		version    int16
		endpoint   int8
		operations bool
		code       int16
	}{
		{0, 1, false, 0},
		{0, 1, true, 0},
		{1, 1, true, 0},
		{1, 2, false, kerr.MismatchedEndpointType.Code},
		{1, 3, false, kerr.UnsupportedEndpointType.Code},
		{2, 1, false, 0},
	} {
		t.Run(fmt.Sprintf("v%d endpoint %d operations %v", c.version, c.endpoint, c.operations), func(t *testing.T) {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.Version, req.EndpointType, req.IncludeClusterAuthorizedOperations = c.version, c.endpoint, c.operations
			req.IncludeFencedBrokers = true
			resp := raw.do(req).(*kmsg.DescribeClusterResponse)
			if resp.ErrorCode != c.code {
				t.Fatalf("error %s, want %s", errName(resp.ErrorCode), errName(c.code))
			}
			if c.code != 0 {
				if resp.ErrorMessage == nil || len(resp.Brokers) != 0 {
					t.Errorf("error answer: message %v, brokers %+v", resp.ErrorMessage, resp.Brokers)
				}
				return
			}
			if resp.ClusterID != cluster.ClusterID || resp.ControllerID != cluster.NodeID || len(resp.Brokers) != 1 {
				t.Fatalf("cluster %q controller %d brokers %+v", resp.ClusterID, resp.ControllerID, resp.Brokers)
			}
			b := resp.Brokers[0]
			if b.NodeID != cluster.NodeID || b.Host != cluster.Host || b.Port != cluster.Port || b.Rack != nil || b.IsFenced {
				t.Errorf("broker %+v", b)
			}
			wantOperations := int32(-2147483648)
			if c.operations {
				wantOperations = 8096 // CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
			}
			if resp.ClusterAuthorizedOperations != wantOperations {
				t.Errorf("authorized operations %d, want %d", resp.ClusterAuthorizedOperations, wantOperations)
			}
		})
	}
}

type deletedTopic struct {
	name string // "<nil>" when null
	id   TopicID
	code int16
}

func TestDeleteTopics(t *testing.T) {
	backend := newStubBackend()
	raw := startStubServer(t, backend)
	name := func(s *string) string {
		if s == nil {
			return "<nil>"
		}
		return *s
	}
	t.Run("v1-5 by name", func(t *testing.T) {
		mustCreateTopic(t, backend.memBackend, "a", 1)
		mustCreateTopic(t, backend.memBackend, "dup", 1)
		for version := int16(1); version <= 5; version++ {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.Version, req.TopicNames = version, []string{"a", "missing", "dup", "dup"}
			resp := raw.do(req).(*kmsg.DeleteTopicsResponse)
			var got []deletedTopic
			for _, st := range resp.Topics {
				got = append(got, deletedTopic{name(st.Topic), st.TopicID, st.ErrorCode})
				if version >= 5 && (st.ErrorCode != 0) != (st.ErrorMessage != nil) {
					t.Errorf("v%d %s: error %s with message %v", version, name(st.Topic), errName(st.ErrorCode), st.ErrorMessage)
				}
			}
			want := []deletedTopic{
				{"a", TopicID{}, 0}, // v1-5 answers carry no ID
				{"missing", TopicID{}, kerr.UnknownTopicOrPartition.Code},
				{"dup", TopicID{}, kerr.InvalidRequest.Code},
			}
			if version > 1 {
				want[0].code = kerr.UnknownTopicOrPartition.Code // deleted by v1
			}
			if !slices.Equal(got, want) {
				t.Errorf("v%d: got %+v, want %+v", version, got, want)
			}
		}
		if _, ok := backend.Topic("a"); ok {
			t.Error("topic a still exists")
		}
		if _, ok := backend.Topic("dup"); !ok {
			t.Error("topic dup, listed twice, was deleted")
		}
	})
	t.Run("v6 by name and ID", func(t *testing.T) {
		b := mustCreateTopic(t, backend.memBackend, "b", 1)
		c := mustCreateTopic(t, backend.memBackend, "c", 1)
		d := mustCreateTopic(t, backend.memBackend, "d", 1)
		dup := backend.topicID(t, "dup")
		unknown := TopicID{1, 2, 3}
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version = 6
		entries := []struct {
			name *string
			id   TopicID
		}{
			{kmsg.StringPtr("b"), TopicID{}}, // by name
			{nil, c.ID},                      // by ID
			{nil, unknown},                   // unknown ID
			{nil, TopicID{}},                 // neither
			{kmsg.StringPtr("d"), d.ID},      // both
			{kmsg.StringPtr("dup"), TopicID{}},
			{nil, d.ID}, // d by ID, and by name below
			{kmsg.StringPtr("d"), TopicID{}},
		}
		for _, e := range entries {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic, rt.TopicID = e.name, e.id
			req.Topics = append(req.Topics, rt)
		}
		resp := raw.do(req).(*kmsg.DeleteTopicsResponse)
		var got []deletedTopic
		for _, st := range resp.Topics {
			got = append(got, deletedTopic{name(st.Topic), st.TopicID, st.ErrorCode})
		}
		want := []deletedTopic{
			{"b", b.ID, 0},
			{"c", c.ID, 0},
			{"<nil>", unknown, kerr.UnknownTopicID.Code},
			{"<nil>", TopicID{}, kerr.InvalidRequest.Code},
			{"d", d.ID, kerr.InvalidRequest.Code},
			{"dup", dup, 0},
			{"d", d.ID, kerr.InvalidRequest.Code},
			{"d", d.ID, kerr.InvalidRequest.Code},
		}
		if !slices.Equal(got, want) {
			t.Errorf("got  %+v\nwant %+v", got, want)
		}
		for topic, exists := range map[string]bool{"b": false, "c": false, "d": true, "dup": false} {
			if _, ok := backend.Topic(topic); ok != exists {
				t.Errorf("topic %s exists: %v, want %v", topic, ok, exists)
			}
		}
	})
}

func (b *stubBackend) topicID(t *testing.T, name string) TopicID {
	t.Helper()
	info, ok := b.Topic(name)
	if !ok {
		t.Fatalf("no topic %s", name)
	}
	return info.ID
}

func TestCreatePartitions(t *testing.T) {
	backend := newStubBackend()
	raw := startStubServer(t, backend)
	mustCreateTopic(t, backend.memBackend, "t", 1)
	node := backend.Cluster().NodeID
	type topic struct {
		name        string
		count       int32
		assignments [][]int32 // nil: no assignment
	}
	for _, c := range []struct {
		name         string
		validateOnly bool
		topics       []topic
		codes        []int16
		message      string // in the first answer
		partitions   int32  // of t afterwards
	}{
		{"validate only", true, []topic{{"t", 3, nil}}, []int16{0}, "", 1},
		{"grow", false, []topic{{"t", 2, nil}}, []int16{0}, "", 2},
		{"same count", false, []topic{{"t", 2, nil}}, []int16{kerr.InvalidPartitions.Code}, "Topic already has 2 partition(s).", 2},
		{"fewer", false, []topic{{"t", 1, nil}}, []int16{kerr.InvalidPartitions.Code}, "The topic t currently has 2 partition(s); 1 would not be an increase.", 2},
		{"unknown", false, []topic{{"nope", 3, nil}}, []int16{kerr.UnknownTopicOrPartition.Code}, "", 2},
		{"duplicate", false, []topic{{"t", 3, nil}, {"t", 4, nil}}, []int16{kerr.InvalidRequest.Code}, "Duplicate topic name.", 2},
		{"assignment count", false, []topic{{"t", 4, [][]int32{{node}}}}, []int16{kerr.InvalidReplicaAssignment.Code},
			"Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.", 2},
		{"assignment other broker", false, []topic{{"t", 3, [][]int32{{node + 1}}}}, []int16{kerr.InvalidReplicaAssignment.Code}, "", 2},
		{"assignment two replicas", false, []topic{{"t", 3, [][]int32{{node, node}}}}, []int16{kerr.InvalidReplicaAssignment.Code}, "", 2},
		{"assignment", false, []topic{{"t", 4, [][]int32{{node}, {node}}}}, []int16{0}, "", 4},
		{"too many", false, []topic{{"t", 4 + maxPartitionsPerRequest + 1, nil}}, []int16{kerr.PolicyViolation.Code},
			"Unable to perform excessively large batch operation.", 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			for version := int16(0); version <= 3; version++ {
				if version > 0 && c.codes[0] == 0 {
					break // a success changes the topic; run it once
				}
				req := kmsg.NewPtrCreatePartitionsRequest()
				req.Version, req.ValidateOnly = version, c.validateOnly
				for _, tc := range c.topics {
					rt := kmsg.NewCreatePartitionsRequestTopic()
					rt.Topic, rt.Count = tc.name, tc.count
					for _, replicas := range tc.assignments {
						rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: replicas})
					}
					req.Topics = append(req.Topics, rt)
				}
				resp := raw.do(req).(*kmsg.CreatePartitionsResponse)
				var codes []int16
				for _, st := range resp.Topics {
					codes = append(codes, st.ErrorCode)
					if (st.ErrorCode != 0) != (st.ErrorMessage != nil) {
						t.Errorf("v%d: error %s with message %v", version, errName(st.ErrorCode), st.ErrorMessage)
					}
				}
				if !slices.Equal(codes, c.codes) {
					t.Fatalf("v%d: codes %v, want %v", version, codes, c.codes)
				}
				if c.message != "" && *resp.Topics[0].ErrorMessage != c.message {
					t.Errorf("v%d: message %q, want %q", version, *resp.Topics[0].ErrorMessage, c.message)
				}
			}
			if info, _ := backend.Topic("t"); info.Partitions != c.partitions {
				t.Errorf("t has %d partitions, want %d", info.Partitions, c.partitions)
			}
		})
	}
}

// describeTopicPartitions sends one DescribeTopicPartitions request.
func describeTopicPartitions(raw *rawConn, topics []string, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor) *kmsg.DescribeTopicPartitionsResponse {
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit, req.Cursor = limit, cursor
	for _, name := range topics {
		req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: name})
	}
	return raw.do(req).(*kmsg.DescribeTopicPartitionsResponse)
}

// summary is "topic:partitions,... -> cursor" for one response.
func summary(resp *kmsg.DescribeTopicPartitionsResponse) string {
	var parts []string
	for _, st := range resp.Topics {
		s := *st.Topic
		if st.ErrorCode != 0 {
			s += "!" + kerr.ErrorForCode(st.ErrorCode).(*kerr.Error).Message
		}
		for _, sp := range st.Partitions {
			s += fmt.Sprintf(":%d", sp.Partition)
		}
		parts = append(parts, s)
	}
	out := strings.Join(parts, " ")
	if resp.NextCursor != nil {
		out += fmt.Sprintf(" -> %s:%d", resp.NextCursor.Topic, resp.NextCursor.Partition)
	}
	return out
}

func TestDescribeTopicPartitions(t *testing.T) {
	backend := newStubBackend()
	raw := startStubServer(t, backend)
	for name, partitions := range map[string]int32{"c": 2, "a": 3, "b": 1} {
		mustCreateTopic(t, backend.memBackend, name, partitions)
	}
	backend.topics["c"].partitions[1].leaderEpoch = 7
	cursor := func(topic string, partition int32) *kmsg.DescribeTopicPartitionsRequestCursor {
		return &kmsg.DescribeTopicPartitionsRequestCursor{Topic: topic, Partition: partition}
	}
	for _, c := range []struct {
		name   string
		topics []string
		limit  int32
		cursor *kmsg.DescribeTopicPartitionsRequestCursor
		want   string
	}{
		{"all", nil, 2000, nil, "a:0:1:2 b:0 c:0:1"},
		{"first page", nil, 2, nil, "a:0:1 -> a:2"},
		{"second page", nil, 2, cursor("a", 2), "a:2 b:0 -> c:0"},
		{"last page", nil, 2, cursor("c", 0), "c:0:1"},
		{"limit exactly at the end", nil, 6, nil, "a:0:1:2 b:0 c:0:1"},
		{"limit below one", nil, 0, nil, "a:0 -> a:1"},
		{"cursor past the partitions", nil, 5, cursor("a", 9), "a b:0 c:0:1"},
		{"cursor between topics", nil, 5, cursor("bb", 0), "c:0:1"},
		{"listed, sorted, deduplicated", []string{"c", "a", "c", "no", "bad/name"}, 2000, nil,
			"a:0:1:2 bad/name!INVALID_TOPIC_EXCEPTION c:0:1 no!UNKNOWN_TOPIC_OR_PARTITION"},
		{"unknown topics use no limit", []string{"a", "aa", "b", "c"}, 4, nil, "a:0:1:2 aa!UNKNOWN_TOPIC_OR_PARTITION b:0 -> c:0"},
		{"limit reached before an unknown topic", []string{"a", "aa"}, 3, nil, "a:0:1:2 -> aa:0"},
		{"listed with cursor", []string{"a", "b", "c"}, 2, cursor("b", 0), "b:0 c:0 -> c:1"},
		{"cursor not listed", []string{"a", "c"}, 2, cursor("b", 0), "a!INVALID_REQUEST c!INVALID_REQUEST"},
		{"negative cursor partition", []string{"a"}, 2, cursor("a", -1), "a!INVALID_REQUEST"},
		{"negative cursor partition, all topics", nil, 2, cursor("a", -1), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := summary(describeTopicPartitions(raw, c.topics, c.limit, c.cursor)); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	resp := describeTopicPartitions(raw, []string{"c"}, 10, nil)
	st := resp.Topics[0]
	info, _ := backend.Topic("c")
	node := backend.Cluster().NodeID
	if st.TopicID != info.ID || st.IsInternal || st.AuthorizedOperations != 3576 {
		t.Errorf("topic c: id %x internal %v operations %d", st.TopicID, st.IsInternal, st.AuthorizedOperations)
	}
	for _, sp := range st.Partitions {
		wantEpoch := int32(0)
		if sp.Partition == 1 {
			wantEpoch = 7
		}
		if sp.ErrorCode != 0 || sp.LeaderID != node || sp.LeaderEpoch != wantEpoch || !slices.Equal(sp.Replicas, []int32{node}) ||
			!slices.Equal(sp.ISR, []int32{node}) || sp.EligibleLeaderReplicas == nil || len(sp.EligibleLeaderReplicas) != 0 || len(sp.OfflineReplicas) != 0 {
			t.Errorf("partition %+v", sp)
		}
	}
}

// TestDescribeTopicPartitionsPages walks every topic in pages of random
// sizes and checks that the pages add up to every partition, in order,
// each once.
func TestDescribeTopicPartitionsPages(t *testing.T) {
	backend := newStubBackend()
	raw := startStubServer(t, backend)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	random := rand.New(rand.NewPCG(seed, 0))
	var want []string
	for i := range 12 {
		name := fmt.Sprintf("topic-%02d", i)
		partitions := int32(random.IntN(7)) + 1
		mustCreateTopic(t, backend.memBackend, name, partitions)
		for p := range partitions {
			want = append(want, fmt.Sprintf("%s/%d", name, p))
		}
	}
	var got []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for page := 0; ; page++ {
		if page > len(want) {
			t.Fatalf("more than %d pages", page)
		}
		limit := int32(random.IntN(9)) + 1
		resp := describeTopicPartitions(raw, nil, limit, cursor)
		count := 0
		for _, st := range resp.Topics {
			for _, sp := range st.Partitions {
				got = append(got, fmt.Sprintf("%s/%d", *st.Topic, sp.Partition))
				count++
			}
		}
		if count > int(limit) {
			t.Fatalf("page of %d partitions with limit %d", count, limit)
		}
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	if !slices.Equal(got, want) {
		t.Errorf("pages gave\n%v\nwant\n%v", got, want)
	}
}
