package netio

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/acl"
	"github.com/mirrord/mirrord/auth"
	"github.com/mirrord/mirrord/broker/group"
	"github.com/mirrord/mirrord/mirrorwire"
)

// The per-topic checks of the group, transaction and fetch APIs (Kafka's
// KafkaApis checks each topic of a request, not only its group): a
// principal "bob" with a partial grant against the super user "admin".

// topicAuthorization is a server with topics "t" and "u" (two partitions
// each), a group coordinator and mirror "m", and an authorizer with
// super user admin.
type topicAuthorization struct {
	authorizer *acl.Authorizer
	backend    *mirrorMemBackend
	addr       string
	mu         sync.Mutex
	next       []auth.Principal // the principals of the next connections, in accept order
}

func startTopicAuthorization(t *testing.T) *topicAuthorization {
	t.Helper()
	authorizer, err := acl.Open(&acl.MemStore{}, acl.Config{SuperUsers: []auth.Principal{auth.User("admin")}})
	if err != nil {
		t.Fatal(err)
	}
	backend := newMirrorMemBackend()
	mustCreateTopic(t, backend.memBackend, "t", 2)
	mustCreateTopic(t, backend.memBackend, "u", 2)
	if err := backend.admin.CreateMirror(context.Background(), "m", map[string]string{"bootstrap.servers": "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	cfg := group.DefaultConfig()
	cfg.InitialRebalanceDelay = 0
	cfg.Partitions = func(topic string, partition int32) bool {
		_, err := backend.Partition(topic, partition)
		return err == nil
	}
	cfg.Topics = func() []group.TopicMetadata {
		var topics []group.TopicMetadata
		for _, name := range []string{"t", "u"} {
			info := backend.topics[name].info
			topics = append(topics, group.TopicMetadata{Name: name, ID: info.ID, Partitions: info.Partitions})
		}
		return topics
	}
	coordinator, err := group.New(cfg, &group.MemoryStore{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(coordinator.Close)
	backend.groups = coordinatorGroups{coordinator}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ta := &topicAuthorization{authorizer: authorizer, backend: backend, addr: ln.Addr().String()}
	s := NewServer(Config{Backend: backend, Authorizer: authorizer})
	s.principalOf = func(net.Conn) auth.Principal {
		ta.mu.Lock()
		defer ta.mu.Unlock()
		p := ta.next[0]
		ta.next = ta.next[1:]
		return p
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ta
}

// dial connects as principal; the ApiVersions round trip makes sure the
// server accepted this connection before the next one is dialed.
func (ta *topicAuthorization) dial(t *testing.T, principal auth.Principal) *rawConn {
	t.Helper()
	ta.mu.Lock()
	ta.next = append(ta.next, principal)
	ta.mu.Unlock()
	r := dialRaw(t, ta.addr)
	r.do(kmsg.NewPtrApiVersionsRequest())
	return r
}

// allow grants bob op on a literal resource.
func (ta *topicAuthorization) allow(t *testing.T, resourceType kmsg.ACLResourceType, name string, op kmsg.ACLOperation) {
	t.Helper()
	b := acl.Binding{ResourceType: resourceType, ResourceName: name, PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: auth.User("bob").String(), Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
	if errs, err := ta.authorizer.Create([]acl.Binding{b}); err != nil || errs[0] != nil {
		t.Fatalf("create %v: %v %v", b, err, errs)
	}
}

// revoke deletes what allow granted.
func (ta *topicAuthorization) revoke(t *testing.T, resourceType kmsg.ACLResourceType, name string, op kmsg.ACLOperation) {
	t.Helper()
	b := acl.Binding{ResourceType: resourceType, ResourceName: name, PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: auth.User("bob").String(), Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
	deleted, errs, err := ta.authorizer.Delete([]acl.Filter{b.Exact()})
	if err != nil || errs[0] != nil || len(deleted[0]) != 1 {
		t.Fatalf("delete %v: %v %v, %d deleted", b, err, errs, len(deleted[0]))
	}
}

// topicCodes is each topic's partition codes, in answer order.
type topicCodes struct {
	topic string
	codes []int16
}

func TestOffsetCommitAuthorizesEachTopic(t *testing.T) {
	ta := startTopicAuthorization(t)
	ta.allow(t, resourceGroup, "g", opRead)
	ta.allow(t, resourceTopic, "t", opRead)
	ta.allow(t, resourceTransactional, "tx", opWrite)
	bob := ta.dial(t, auth.User("bob"))

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "g", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}},
		{Topic: "u", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}, {Partition: 1, Offset: 5, LeaderEpoch: -1}}},
	}
	var got []topicCodes
	for _, st := range bob.do(commit).(*kmsg.OffsetCommitResponse).Topics {
		tc := topicCodes{topic: st.Topic}
		for _, sp := range st.Partitions {
			tc.codes = append(tc.codes, sp.ErrorCode)
		}
		got = append(got, tc)
	}
	want := []topicCodes{{"u", []int16{29, 29}}, {"t", []int16{0}}} // denied first, as Kafka's OffsetCommitResponse.Builder
	assertTopicCodes(t, "OffsetCommit", got, want)

	// Every topic denied: the coordinator is not asked (an unknown
	// member would be UNKNOWN_MEMBER_ID otherwise).
	commit.Topics, commit.MemberID, commit.Generation = commit.Topics[1:], "nobody", 3
	resp := bob.do(commit).(*kmsg.OffsetCommitResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("OffsetCommit of u only: %+v, want TOPIC_AUTHORIZATION_FAILED", resp.Topics)
	}

	txnCommit := kmsg.NewPtrTxnOffsetCommitRequest()
	txnCommit.Version, txnCommit.TransactionalID, txnCommit.Group, txnCommit.ProducerID, txnCommit.ProducerEpoch = 3, "tx", "g", 1, 0
	txnCommit.Generation = -1
	txnCommit.Topics = []kmsg.TxnOffsetCommitRequestTopic{
		{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}},
		{Topic: "u", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 1, Offset: 5, LeaderEpoch: -1}}},
	}
	got = nil
	for _, st := range bob.do(txnCommit).(*kmsg.TxnOffsetCommitResponse).Topics {
		tc := topicCodes{topic: st.Topic}
		for _, sp := range st.Partitions {
			tc.codes = append(tc.codes, sp.ErrorCode)
		}
		got = append(got, tc)
	}
	if len(got) != 2 || got[0].topic != "u" || got[0].codes[0] != kerr.TopicAuthorizationFailed.Code || got[1].topic != "t" || got[1].codes[0] == kerr.TopicAuthorizationFailed.Code {
		t.Errorf("TxnOffsetCommit: %+v, want u TOPIC_AUTHORIZATION_FAILED first, then t answered by the coordinator", got)
	}
}

func TestOffsetFetchHidesDeniedTopics(t *testing.T) {
	ta := startTopicAuthorization(t)
	admin := ta.dial(t, auth.User("admin"))
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "g", -1
	for _, topic := range []string{"t", "u"} {
		commit.Topics = append(commit.Topics, kmsg.OffsetCommitRequestTopic{Topic: topic,
			Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7, LeaderEpoch: -1}}})
	}
	for _, st := range admin.do(commit).(*kmsg.OffsetCommitResponse).Topics {
		if st.Partitions[0].ErrorCode != 0 {
			t.Fatalf("admin commit %s: %s", st.Topic, errName(st.Partitions[0].ErrorCode))
		}
	}
	ta.allow(t, resourceGroup, "g", opDescribe)
	ta.allow(t, resourceTopic, "t", opDescribe)
	bob := ta.dial(t, auth.User("bob"))

	fetch := func(version int16, topics []string) []topicCodes {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = version
		var got []topicCodes
		add := func(topic string, codes []int16, offsets []int64) {
			for i, code := range codes {
				if code != 0 && offsets[i] != -1 {
					t.Errorf("v%d %s: denied partition answers offset %d, want -1", version, topic, offsets[i])
				}
			}
			got = append(got, topicCodes{topic, codes})
		}
		if version >= offsetFetchGroupsVersion {
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = "g"
			for _, topic := range topics {
				g.Topics = append(g.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: topic, Partitions: []int32{0}})
			}
			req.Groups = []kmsg.OffsetFetchRequestGroup{g}
			for _, st := range bob.do(req).(*kmsg.OffsetFetchResponse).Groups[0].Topics {
				var codes []int16
				var offsets []int64
				for _, sp := range st.Partitions {
					codes, offsets = append(codes, sp.ErrorCode), append(offsets, sp.Offset)
				}
				add(st.Topic, codes, offsets)
			}
			return got
		}
		req.Group = "g"
		for _, topic := range topics {
			req.Topics = append(req.Topics, kmsg.OffsetFetchRequestTopic{Topic: topic, Partitions: []int32{0}})
		}
		for _, st := range bob.do(req).(*kmsg.OffsetFetchResponse).Topics {
			var codes []int16
			var offsets []int64
			for _, sp := range st.Partitions {
				codes, offsets = append(codes, sp.ErrorCode), append(offsets, sp.Offset)
			}
			add(st.Topic, codes, offsets)
		}
		return got
	}
	for _, version := range []int16{7, 8} {
		assertTopicCodes(t, "OffsetFetch named", fetch(version, []string{"u", "t"}), []topicCodes{{"t", []int16{0}}, {"u", []int16{29}}})
		assertTopicCodes(t, "OffsetFetch all", fetch(version, nil), []topicCodes{{"t", []int16{0}}})
	}
}

func assertTopicCodes(t *testing.T, what string, got, want []topicCodes) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %+v, want %+v", what, got, want)
		return
	}
	for i := range want {
		if got[i].topic != want[i].topic || len(got[i].codes) != len(want[i].codes) {
			t.Errorf("%s: %+v, want %+v", what, got, want)
			return
		}
		for j := range want[i].codes {
			if got[i].codes[j] != want[i].codes[j] {
				t.Errorf("%s: %+v, want %+v", what, got, want)
				return
			}
		}
	}
}

func TestConsumerGroupHeartbeatAuthorizesSubscription(t *testing.T) {
	ta := startTopicAuthorization(t)
	ta.allow(t, resourceGroup, "g", opRead)
	ta.allow(t, resourceTopic, "t", opDescribe)
	bob := ta.dial(t, auth.User("bob"))
	heartbeat := func(topics ...string) *kmsg.ConsumerGroupHeartbeatResponse {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis, r.SubscribedTopicNames = 1, "g", "member-0000000000001", 0, 10000, topics
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return bob.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	if resp := heartbeat("t", "u"); resp.ErrorCode != kerr.TopicAuthorizationFailed.Code || resp.ErrorMessage != nil {
		t.Errorf("subscribed to t and u: %s %v, want TOPIC_AUTHORIZATION_FAILED without a message", errName(resp.ErrorCode), resp.ErrorMessage)
	}
	resp := heartbeat("t")
	if resp.ErrorCode != 0 {
		t.Fatalf("subscribed to t: %s", errName(resp.ErrorCode))
	}

	// The group now assigns t; bob may describe it, and the group.
	ta.allow(t, resourceGroup, "g", opDescribe)
	describe := kmsg.NewPtrConsumerGroupDescribeRequest()
	describe.Groups = []string{"g", "other"}
	groups := bob.do(describe).(*kmsg.ConsumerGroupDescribeResponse).Groups
	if len(groups) != 2 || groups[0].Group != "other" || groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code || groups[1].ErrorCode != 0 || len(groups[1].Members) != 1 {
		t.Fatalf("describe as bob: %+v, want other denied first, then g with its member", groups)
	}
	// Without DESCRIBE on t, the group's assignment hides it whole.
	ta.revoke(t, resourceTopic, "t", opDescribe)
	groups = bob.do(describe).(*kmsg.ConsumerGroupDescribeResponse).Groups
	if g := groups[1]; g.ErrorCode != kerr.TopicAuthorizationFailed.Code || g.ErrorMessage == nil || *g.ErrorMessage != describedTopicsDenied || len(g.Members) != 0 {
		t.Errorf("describe without DESCRIBE on t: %+v, want TOPIC_AUTHORIZATION_FAILED, Kafka's message, no members", g)
	}
}

// sessionFetch is a v12 fetch of t/0 and t/1 in a session.
func sessionFetch(id, epoch int32) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.MaxBytes, r.MaxWaitMillis, r.SessionID, r.SessionEpoch = 12, 1<<20, 0, id, epoch
	if epoch == 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		for partition := range int32(2) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = []kmsg.FetchRequestTopic{rt}
	}
	return r
}

// TestFetchSessionReauthorizesQuietPartitions: a partition that stays
// quiet in an incremental session is authorized on every fetch, so a
// removed ACL denies the next fetch.
func TestFetchSessionReauthorizesQuietPartitions(t *testing.T) {
	ta := startTopicAuthorization(t)
	ta.allow(t, resourceTopic, "t", opRead)
	bob := ta.dial(t, auth.User("bob"))
	full := bob.do(sessionFetch(0, 0)).(*kmsg.FetchResponse)
	if full.SessionID == 0 || len(full.Topics) != 1 || len(full.Topics[0].Partitions) != 2 {
		t.Fatalf("full fetch: session %d, %d topics", full.SessionID, len(full.Topics))
	}
	if quiet := bob.do(sessionFetch(full.SessionID, 1)).(*kmsg.FetchResponse); len(quiet.Topics) != 0 {
		t.Fatalf("incremental fetch of idle partitions answers %d topics, want none", len(quiet.Topics))
	}
	ta.revoke(t, resourceTopic, "t", opRead)
	denied := bob.do(sessionFetch(full.SessionID, 2)).(*kmsg.FetchResponse)
	if len(denied.Topics) != 1 || len(denied.Topics[0].Partitions) != 2 {
		t.Fatalf("incremental fetch after the ACL's removal answers %+v, want both partitions", denied.Topics)
	}
	for _, p := range denied.Topics[0].Partitions {
		if p.ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Errorf("partition %d: %s, want TOPIC_AUTHORIZATION_FAILED", p.Partition, errName(p.ErrorCode))
		}
	}
}

// TestFollowerFetchNeedsClusterAction: a fetch naming a replica needs
// CLUSTER_ACTION on the cluster, whatever the topic ACLs.
func TestFollowerFetchNeedsClusterAction(t *testing.T) {
	ta := startTopicAuthorization(t)
	ta.allow(t, resourceTopic, "t", opRead)
	bob := ta.dial(t, auth.User("bob"))
	for _, version := range []int16{12, 15} {
		codes := func() []int16 {
			r := sessionFetch(0, -1)
			r.Version = version
			r.Topics = sessionFetch(0, 0).Topics
			if version >= 13 {
				r.Topics[0].TopicID = ta.backend.topics["t"].info.ID
			}
			if version >= 15 {
				r.ReplicaState.ID = 1
			} else {
				r.ReplicaID = 1
			}
			var out []int16
			for _, st := range bob.do(r).(*kmsg.FetchResponse).Topics {
				for _, p := range st.Partitions {
					out = append(out, p.ErrorCode)
				}
			}
			return out
		}
		for _, code := range codes() {
			if code != kerr.TopicAuthorizationFailed.Code {
				t.Errorf("v%d follower fetch without CLUSTER_ACTION: %s", version, errName(code))
			}
		}
		ta.allow(t, resourceCluster, clusterResourceName, opClusterAction)
		for _, code := range codes() {
			if code != 0 {
				t.Errorf("v%d follower fetch with CLUSTER_ACTION: %s", version, errName(code))
			}
		}
		ta.revoke(t, resourceCluster, clusterResourceName, opClusterAction)
	}
}

// TestCreateTopicsConfigsNeedDescribeConfigs: a topic created without
// DESCRIBE_CONFIGS answers no configs and TOPIC_AUTHORIZATION_FAILED in
// its config error code.
func TestCreateTopicsConfigsNeedDescribeConfigs(t *testing.T) {
	ta := startTopicAuthorization(t)
	ta.allow(t, resourceTopic, "new", opCreate)
	ta.allow(t, resourceTopic, "new2", opCreate)
	ta.allow(t, resourceTopic, "new2", opDescribeConfigs)
	bob := ta.dial(t, auth.User("bob"))
	r := kmsg.NewPtrCreateTopicsRequest()
	r.Version, r.TimeoutMillis = 7, 1000
	for _, name := range []string{"new", "new2", "denied"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		r.Topics = append(r.Topics, rt)
	}
	topics := bob.do(r).(*kmsg.CreateTopicsResponse).Topics
	if len(topics) != 3 {
		t.Fatalf("%d topics answered", len(topics))
	}
	if got := topics[0]; got.ErrorCode != 0 || got.ConfigErrorCode != kerr.TopicAuthorizationFailed.Code || len(got.Configs) != 0 || got.NumPartitions != -1 || got.ReplicationFactor != -1 {
		t.Errorf("new (no DESCRIBE_CONFIGS): %+v", got)
	}
	if got := topics[1]; got.ErrorCode != 0 || got.ConfigErrorCode != 0 {
		t.Errorf("new2 (DESCRIBE_CONFIGS): error %s, config error %s", errName(got.ErrorCode), errName(got.ConfigErrorCode))
	}
	if got := topics[2]; got.ErrorCode != kerr.TopicAuthorizationFailed.Code || got.ErrorMessage == nil || *got.ErrorMessage != "Authorization failed." {
		t.Errorf("denied: %s %v", errName(got.ErrorCode), got.ErrorMessage)
	}
}

// TestLastMirrorEpochLookupsNeedTopicDescribe: a lookup answers a topic's
// data, so it needs DESCRIBE on the topic its ID names.
func TestLastMirrorEpochLookupsNeedTopicDescribe(t *testing.T) {
	ta := startTopicAuthorization(t)
	ta.allow(t, resourceTopic, "t", opDescribe)
	bob := ta.dial(t, auth.User("bob"))
	cluster := "asking"
	req := &mirrorwire.DescribeClusterMirrorsRequest{MirrorNames: []string{}, ClusterID: &cluster, LastMirrorEpochLookups: []mirrorwire.DescribeClusterMirrorsLookup{
		{TopicID: ta.backend.topics["t"].info.ID, Partitions: []int32{0}},
		{TopicID: ta.backend.topics["u"].info.ID, Partitions: []int32{0, 1}},
	}}
	resp := bob.do(req).(*mirrorwire.DescribeClusterMirrorsResponse)
	if resp.ErrorCode != 0 || len(resp.LastMirrorEpochs) != 2 {
		t.Fatalf("describe: %s, %d lookups answered", errName(resp.ErrorCode), len(resp.LastMirrorEpochs))
	}
	for _, topic := range resp.LastMirrorEpochs {
		denied := topic.TopicID == ta.backend.topics["u"].info.ID
		for _, p := range topic.Partitions {
			if got := p.ErrorCode == kerr.TopicAuthorizationFailed.Code; got != denied {
				t.Errorf("topic %x partition %d: %s (denied %v)", topic.TopicID, p.PartitionIndex, errName(p.ErrorCode), denied)
			}
		}
	}
}

// TestDeleteTopicsHidesWhatIsDenied checks DeleteTopics v6 as Kafka's
// ControllerApis.deleteTopics answers a client short of DELETE: by name,
// the zero topic ID (and TOPIC_AUTHORIZATION_FAILED for an unknown name
// it may not describe); by ID, the request's ID and the name only when it
// may DESCRIBE the topic.
func TestDeleteTopicsHidesWhatIsDenied(t *testing.T) {
	ta := startTopicAuthorization(t)
	ta.allow(t, resourceTopic, "u", opDescribe)
	ta.allow(t, resourceTopic, "known-elsewhere", opDescribe)
	idT, idU := ta.backend.topics["t"].info.ID, ta.backend.topics["u"].info.ID
	bob := ta.dial(t, auth.User("bob"))
	r := kmsg.NewPtrDeleteTopicsRequest()
	r.Version, r.TimeoutMillis = 6, 1000
	r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("t")}, {Topic: kmsg.StringPtr("missing")}, {Topic: kmsg.StringPtr("known-elsewhere")},
		{TopicID: idT}, {TopicID: idU}}
	type answer struct {
		name *string
		id   [16]byte
		code int16
	}
	want := []answer{
		{kmsg.StringPtr("t"), [16]byte{}, kerr.TopicAuthorizationFailed.Code},
		{kmsg.StringPtr("missing"), [16]byte{}, kerr.TopicAuthorizationFailed.Code},
		{kmsg.StringPtr("known-elsewhere"), [16]byte{}, kerr.UnknownTopicOrPartition.Code},
		{nil, idT, kerr.TopicAuthorizationFailed.Code},
		{kmsg.StringPtr("u"), idU, kerr.TopicAuthorizationFailed.Code},
	}
	topics := bob.do(r).(*kmsg.DeleteTopicsResponse).Topics
	if len(topics) != len(want) {
		t.Fatalf("%d topics answered, want %d", len(topics), len(want))
	}
	for i, w := range want {
		got := topics[i]
		sameName := (got.Topic == nil) == (w.name == nil) && (got.Topic == nil || *got.Topic == *w.name)
		if !sameName || got.TopicID != w.id || got.ErrorCode != w.code {
			t.Errorf("entry %d: name %v, ID %x, %s; want %v, %x, %s", i, got.Topic, got.TopicID, errName(got.ErrorCode), w.name, w.id, errName(w.code))
		}
		if w.code == kerr.TopicAuthorizationFailed.Code && (got.ErrorMessage == nil || *got.ErrorMessage != "Topic authorization failed.") {
			t.Errorf("entry %d: message %v, want Kafka's Errors.message()", i, got.ErrorMessage)
		}
	}
	if _, ok := ta.backend.Topic("t"); !ok {
		t.Error("t deleted without DELETE")
	}
}
