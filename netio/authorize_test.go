package netio

import (
	"context"
	"net"
	"reflect"
	"sort"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/acl"
	"github.com/mirrord/mirrord/auth"
	"github.com/mirrord/mirrord/mirrorwire"
)

// authorizationCodes are the codes a denial answers.
var authorizationCodes = map[int16]bool{
	kerr.TopicAuthorizationFailed.Code: true, kerr.GroupAuthorizationFailed.Code: true,
	kerr.ClusterAuthorizationFailed.Code: true, kerr.TransactionalIDAuthorizationFailed.Code: true,
	ErrClusterMirrorAuthorizationFailed.Code: true,
}

// errorCodes collects every ErrorCode field of a response.
func errorCodes(v reflect.Value, into map[int16]bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			errorCodes(v.Elem(), into)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).Name == "ErrorCode" && v.Field(i).Kind() == reflect.Int16 {
				into[int16(v.Field(i).Int())] = true
			}
			errorCodes(v.Field(i), into)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			errorCodes(v.Index(i), into)
		}
	}
}

// startAuthorizedServer serves a mirror backend with topic "t" and mirror
// "m", deciding by authorizer; every connection acts as principal.
func startAuthorizedServer(t *testing.T, authorizer *acl.Authorizer, principal auth.Principal) *rawConn {
	t.Helper()
	backend := newMirrorMemBackend()
	mustCreateTopic(t, backend.memBackend, "t", 1)
	if err := backend.admin.CreateMirror(context.Background(), "m", map[string]string{"bootstrap.servers": "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Config{Backend: backend, Authorizer: authorizer})
	s.principalOf = func(net.Conn) auth.Principal { return principal }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return dialRaw(t, ln.Addr().String())
}

// authorizationCase is one API's request and the denial Kafka answers an
// unauthorized client (nil: the API checks nothing that fails, or only
// filters; check then says what the denied client sees).
type authorizationCase struct {
	request func() kmsg.Request
	denial  *kerr.Error
	check   func(t *testing.T, denied kmsg.Response)
}

func str(s string) *string { return &s }

func authorizationMatrix() map[int16]authorizationCase {
	v := func(r kmsg.Request, version int16) kmsg.Request { r.SetVersion(version); return r }
	topicPartitions := func() []kmsg.ProduceRequestTopic {
		p := kmsg.NewProduceRequestTopicPartition()
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.Partitions = "t", []kmsg.ProduceRequestTopicPartition{p}
		return []kmsg.ProduceRequestTopic{rt}
	}
	return map[int16]authorizationCase{
		0: {func() kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Acks, r.TimeoutMillis, r.Topics = -1, 1000, topicPartitions()
			return v(r, 9)
		}, kerr.TopicAuthorizationFailed, nil},
		1: {func() kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.Partitions = "t", []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
			r.Topics, r.MaxBytes, r.MaxWaitMillis = []kmsg.FetchRequestTopic{rt}, 1<<20, 0
			r.SessionEpoch = -1
			return v(r, 12)
		}, kerr.TopicAuthorizationFailed, nil},
		2: {func() kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			rt := kmsg.NewListOffsetsRequestTopic()
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Topic, rt.Partitions = "t", []kmsg.ListOffsetsRequestTopicPartition{rp}
			r.Topics = []kmsg.ListOffsetsRequestTopic{rt}
			return v(r, 7)
		}, kerr.TopicAuthorizationFailed, nil},
		3: {func() kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = str("t")
			r.Topics = []kmsg.MetadataRequestTopic{rt}
			return v(r, 12)
		}, kerr.TopicAuthorizationFailed, nil},
		8: {func() kmsg.Request {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Group, r.Generation = "g", -1
			r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0}}}}
			return v(r, 8)
		}, kerr.GroupAuthorizationFailed, nil},
		9: {func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = "g"
			r.Groups = []kmsg.OffsetFetchRequestGroup{g}
			return v(r, 8)
		}, kerr.GroupAuthorizationFailed, nil},
		10: {func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorKeys = []string{"g"}
			return v(r, 4)
		}, kerr.GroupAuthorizationFailed, nil},
		11: {func() kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Group, r.ProtocolType, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
			r.MemberID = "m"
			r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
			return v(r, 5)
		}, kerr.GroupAuthorizationFailed, func(t *testing.T, denied kmsg.Response) {
			if id := denied.(*kmsg.JoinGroupResponse).MemberID; id != "" {
				t.Errorf("denied JoinGroup's member ID %q, want none (JoinGroupRequest.getErrorResponse)", id)
			}
		}},
		12: {func() kmsg.Request { r := kmsg.NewPtrHeartbeatRequest(); r.Group = "g"; return v(r, 4) }, kerr.GroupAuthorizationFailed, nil},
		13: {func() kmsg.Request { r := kmsg.NewPtrLeaveGroupRequest(); r.Group = "g"; return v(r, 0) }, kerr.GroupAuthorizationFailed, nil},
		14: {func() kmsg.Request { r := kmsg.NewPtrSyncGroupRequest(); r.Group = "g"; return v(r, 3) }, kerr.GroupAuthorizationFailed, nil},
		15: {func() kmsg.Request { r := kmsg.NewPtrDescribeGroupsRequest(); r.Groups = []string{"g"}; return v(r, 5) }, kerr.GroupAuthorizationFailed, nil},
		16: {func() kmsg.Request { return v(kmsg.NewPtrListGroupsRequest(), 4) }, nil, nil},    // filters: no group is described
		17: {func() kmsg.Request { return v(kmsg.NewPtrSASLHandshakeRequest(), 1) }, nil, nil}, // authentication, not authorization
		18: {func() kmsg.Request { return v(kmsg.NewPtrApiVersionsRequest(), 3) }, nil, nil},   // Kafka checks nothing
		19: {func() kmsg.Request {
			r := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "new", 1, 1
			r.Topics, r.TimeoutMillis = []kmsg.CreateTopicsRequestTopic{rt}, 1000
			return v(r, 5)
		}, kerr.TopicAuthorizationFailed, nil},
		20: {func() kmsg.Request {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.TopicNames = []string{"t"}
			return v(r, 4)
		}, kerr.TopicAuthorizationFailed, nil},
		21: {func() kmsg.Request {
			r := kmsg.NewPtrDeleteRecordsRequest()
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic, rt.Partitions = "t", []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}
			r.Topics = []kmsg.DeleteRecordsRequestTopic{rt}
			return v(r, 2)
		}, kerr.TopicAuthorizationFailed, nil},
		22: {func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionalID, r.TransactionTimeoutMillis = str("tx"), 60000
			return v(r, 4)
		}, kerr.TransactionalIDAuthorizationFailed, nil},
		23: {func() kmsg.Request {
			r := kmsg.NewPtrOffsetForLeaderEpochRequest()
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic, rt.Partitions = "t", []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: -1, LeaderEpoch: 0}}
			r.ReplicaID, r.Topics = -1, []kmsg.OffsetForLeaderEpochRequestTopic{rt}
			return v(r, 4)
		}, kerr.TopicAuthorizationFailed, nil},
		24: {func() kmsg.Request {
			r := kmsg.NewPtrAddPartitionsToTxnRequest()
			r.TransactionalID, r.Topics = "tx", []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0}}}
			return v(r, 3)
		}, kerr.TransactionalIDAuthorizationFailed, nil},
		25: {func() kmsg.Request {
			r := kmsg.NewPtrAddOffsetsToTxnRequest()
			r.TransactionalID, r.Group = "tx", "g"
			return v(r, 3)
		}, kerr.TransactionalIDAuthorizationFailed, nil},
		26: {func() kmsg.Request { r := kmsg.NewPtrEndTxnRequest(); r.TransactionalID = "tx"; return v(r, 3) }, kerr.TransactionalIDAuthorizationFailed, nil},
		28: {func() kmsg.Request {
			r := kmsg.NewPtrTxnOffsetCommitRequest()
			r.TransactionalID, r.Group = "tx", "g"
			r.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0}}}}
			return v(r, 3)
		}, kerr.TransactionalIDAuthorizationFailed, nil},
		29: {func() kmsg.Request {
			r := kmsg.NewPtrDescribeACLsRequest()
			r.ResourceType, r.ResourcePatternType, r.Operation, r.PermissionType = 1, 1, 1, 1
			return v(r, 3)
		}, kerr.ClusterAuthorizationFailed, nil},
		30: {func() kmsg.Request {
			r := kmsg.NewPtrCreateACLsRequest()
			r.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: resourceTopic, ResourceName: "t", ResourcePatternType: 3, Principal: "User:x", Host: "*", Operation: opRead, PermissionType: 3}}
			return v(r, 3)
		}, kerr.ClusterAuthorizationFailed, func(t *testing.T, denied kmsg.Response) {
			expectMessage(t, denied.(*kmsg.CreateACLsResponse).Results[0].ErrorMessage, "Request CreateACLs needs ALTER permission.")
		}},
		31: {func() kmsg.Request {
			r := kmsg.NewPtrDeleteACLsRequest()
			r.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: 1, ResourcePatternType: 1, Operation: 1, PermissionType: 1}}
			return v(r, 3)
		}, kerr.ClusterAuthorizationFailed, func(t *testing.T, denied kmsg.Response) {
			expectMessage(t, denied.(*kmsg.DeleteACLsResponse).Results[0].ErrorMessage, "Request DeleteACLs needs ALTER permission.")
		}},
		32: {func() kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: 2, ResourceName: "t"}}
			return v(r, 4)
		}, kerr.TopicAuthorizationFailed, nil},
		33: {func() kmsg.Request {
			r := kmsg.NewPtrAlterConfigsRequest()
			r.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: 4, ResourceName: ""}}
			return v(r, 2)
		}, kerr.ClusterAuthorizationFailed, func(t *testing.T, denied kmsg.Response) {
			if m := denied.(*kmsg.AlterConfigsResponse).Resources[0].ErrorMessage; m != nil {
				t.Errorf("denied BROKER resource's message %q, want none (ApiError.fromThrowable)", *m)
			}
		}},
		36: {func() kmsg.Request { return v(kmsg.NewPtrSASLAuthenticateRequest(), 2) }, nil, nil}, // authentication, not authorization
		37: {func() kmsg.Request {
			r := kmsg.NewPtrCreatePartitionsRequest()
			r.Topics, r.TimeoutMillis = []kmsg.CreatePartitionsRequestTopic{{Topic: "t", Count: 2}}, 1000
			return v(r, 3)
		}, kerr.TopicAuthorizationFailed, nil},
		42: {func() kmsg.Request { r := kmsg.NewPtrDeleteGroupsRequest(); r.Groups = []string{"g"}; return v(r, 2) }, kerr.GroupAuthorizationFailed, nil},
		44: {func() kmsg.Request {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: 2, ResourceName: "t"}}
			return v(r, 1)
		}, kerr.TopicAuthorizationFailed, nil},
		47: {func() kmsg.Request { r := kmsg.NewPtrOffsetDeleteRequest(); r.Group = "g"; return v(r, 0) }, kerr.GroupAuthorizationFailed, nil},
		48: {func() kmsg.Request { return v(kmsg.NewPtrDescribeClientQuotasRequest(), 1) }, kerr.ClusterAuthorizationFailed, func(t *testing.T, denied kmsg.Response) {
			if m := denied.(*kmsg.DescribeClientQuotasResponse).ErrorMessage; m != nil {
				t.Errorf("denied DescribeClientQuotas' message %q, want none (ApiError.fromThrowable)", *m)
			}
		}},
		50: {func() kmsg.Request { return v(kmsg.NewPtrDescribeUserSCRAMCredentialsRequest(), 0) }, kerr.ClusterAuthorizationFailed, nil},
		51: {func() kmsg.Request {
			r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			r.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "carol", Mechanism: 2}}
			return v(r, 0)
		}, kerr.ClusterAuthorizationFailed, nil},
		60: {func() kmsg.Request {
			r := kmsg.NewPtrDescribeClusterRequest()
			r.IncludeClusterAuthorizedOperations = true
			return v(r, 1)
		}, nil, func(t *testing.T, denied kmsg.Response) {
			if ops := denied.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations; ops != 0 {
				t.Errorf("denied client's ClusterAuthorizedOperations = %b, want 0", ops)
			}
		}},
		65: {func() kmsg.Request {
			r := kmsg.NewPtrDescribeTransactionsRequest()
			r.TransactionalIDs = []string{"tx"}
			return v(r, 0)
		}, kerr.TransactionalIDAuthorizationFailed, nil},
		66: {func() kmsg.Request { return v(kmsg.NewPtrListTransactionsRequest(), 1) }, nil, nil}, // filters
		68: {func() kmsg.Request {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Group, r.MemberEpoch, r.RebalanceTimeoutMillis, r.SubscribedTopicNames = "g", 0, 10000, []string{"t"}
			return v(r, 0)
		}, kerr.GroupAuthorizationFailed, nil},
		69: {func() kmsg.Request {
			r := kmsg.NewPtrConsumerGroupDescribeRequest()
			r.Groups = []string{"g"}
			return v(r, 0)
		}, kerr.GroupAuthorizationFailed, nil},
		75: {func() kmsg.Request {
			r := kmsg.NewPtrDescribeTopicPartitionsRequest()
			r.Topics, r.ResponsePartitionLimit = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "t"}}, 100
			return v(r, 0)
		}, kerr.TopicAuthorizationFailed, nil},
		mirrorwire.CreateClusterMirrorKey: {func() kmsg.Request {
			return &mirrorwire.CreateClusterMirrorRequest{MirrorName: "m2", Configs: []mirrorwire.CreateClusterMirrorConfig{{Name: "bootstrap.servers", Value: str("127.0.0.1:1")}}}
		}, ErrClusterMirrorAuthorizationFailed, nil},
		mirrorwire.DeleteClusterMirrorKey: {func() kmsg.Request { return &mirrorwire.DeleteClusterMirrorRequest{MirrorName: "m"} }, ErrClusterMirrorAuthorizationFailed, nil},
		mirrorwire.StartMirrorTopicsKey:   {mirrorTopics(mirrorwire.StartMirroring), ErrClusterMirrorAuthorizationFailed, nil},
		mirrorwire.StopMirrorTopicsKey:    {mirrorTopics(mirrorwire.StopMirroring), ErrClusterMirrorAuthorizationFailed, nil},
		mirrorwire.PauseMirrorTopicsKey:   {mirrorTopics(mirrorwire.PauseMirroring), ErrClusterMirrorAuthorizationFailed, nil},
		mirrorwire.ResumeMirrorTopicsKey:  {mirrorTopics(mirrorwire.ResumeMirroring), ErrClusterMirrorAuthorizationFailed, nil},
		mirrorwire.RecoverMirrorTopicsKey: {mirrorTopics(mirrorwire.RecoverMirroring), ErrClusterMirrorAuthorizationFailed, nil},
		mirrorwire.ListClusterMirrorsKey: {func() kmsg.Request { return &mirrorwire.ListClusterMirrorsRequest{} }, nil, func(t *testing.T, denied kmsg.Response) {
			if mirrors := denied.(*mirrorwire.ListClusterMirrorsResponse).Mirrors; len(mirrors) != 0 {
				t.Errorf("denied client lists %d mirrors, want none", len(mirrors))
			}
		}},
		mirrorwire.DescribeClusterMirrorsKey: {func() kmsg.Request {
			return &mirrorwire.DescribeClusterMirrorsRequest{MirrorNames: []string{"m"}, IncludeAuthorizedOperations: true}
		}, ErrClusterMirrorAuthorizationFailed, nil},
	}
}

func mirrorTopics(change mirrorwire.TopicsChange) func() kmsg.Request {
	return func() kmsg.Request {
		return &mirrorwire.MirrorTopicsRequest{Change: change, MirrorName: "m", Topics: []mirrorwire.MirrorTopicsRequestTopic{{TopicName: "t"}}}
	}
}

// TestAuthorizationMatrix: for every API the server serves (the dispatch
// tables, so a new API without a case fails), a principal without ACLs
// gets Kafka's denial on an open connection, and a super user does not.
func TestAuthorizationMatrix(t *testing.T) {
	matrix := authorizationMatrix()
	var keys []int16
	for key := range apis {
		keys = append(keys, key)
	}
	for key := range mirrorAPIs {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	authorizer, err := acl.Open(&acl.MemStore{}, acl.Config{SuperUsers: []auth.Principal{auth.User("admin")}})
	if err != nil {
		t.Fatal(err)
	}
	denied := startAuthorizedServer(t, authorizer, auth.User("bob"))
	allowed := startAuthorizedServer(t, authorizer, auth.User("admin"))
	for _, key := range keys {
		c, ok := matrix[key]
		if !ok {
			t.Errorf("api key %d (%s) has no authorization case", key, apiName(key))
			continue
		}
		t.Run(apiName(key), func(t *testing.T) {
			got := map[int16]bool{}
			resp := denied.do(c.request())
			errorCodes(reflect.ValueOf(resp), got)
			if c.denial != nil && !got[c.denial.Code] {
				t.Errorf("denied principal: codes %v, want %s", got, c.denial.Message)
			}
			if c.check != nil {
				c.check(t, resp)
			}
			got = map[int16]bool{}
			errorCodes(reflect.ValueOf(allowed.do(c.request())), got)
			for code := range got {
				if authorizationCodes[code] {
					t.Errorf("super user: %s", errName(code))
				}
			}
		})
	}
}

// TestAnonymousMirrorAdminRefused: once an authorizer is on, an anonymous
// client may neither stop a mirror's topics nor delete the mirror, and the
// mirror is still there.
func TestAnonymousMirrorAdminRefused(t *testing.T) {
	authorizer, err := acl.Open(&acl.MemStore{}, acl.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := startAuthorizedServer(t, authorizer, auth.Anonymous)
	stop := r.do(mirrorTopics(mirrorwire.StopMirroring)()).(*mirrorwire.MirrorTopicsResponse)
	if stop.ErrorCode != ErrClusterMirrorAuthorizationFailed.Code {
		t.Fatalf("anonymous StopMirrorTopics: %s, want CLUSTER_MIRROR_AUTHORIZATION_FAILED", errName(stop.ErrorCode))
	}
	del := r.do(&mirrorwire.DeleteClusterMirrorRequest{MirrorName: "m"}).(*mirrorwire.DeleteClusterMirrorResponse)
	if del.ErrorCode != ErrClusterMirrorAuthorizationFailed.Code {
		t.Fatalf("anonymous DeleteClusterMirror: %s, want CLUSTER_MIRROR_AUTHORIZATION_FAILED", errName(del.ErrorCode))
	}
	// With ALTER on the mirror granted to ANONYMOUS, the same connection may.
	if _, err := authorizer.Create([]acl.Binding{{ResourceType: acl.ResourceClusterMirror, ResourceName: "m", PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: auth.Anonymous.String(), Host: "*", Operation: opAlter, Permission: kmsg.ACLPermissionTypeAllow}}); err != nil {
		t.Fatal(err)
	}
	del = r.do(&mirrorwire.DeleteClusterMirrorRequest{MirrorName: "m"}).(*mirrorwire.DeleteClusterMirrorResponse)
	if del.ErrorCode != 0 {
		t.Fatalf("DeleteClusterMirror with ALTER granted: %s", errName(del.ErrorCode))
	}
}

// expectMessage checks an error message field.
func expectMessage(t *testing.T, got *string, want string) {
	t.Helper()
	if got == nil || *got != want {
		t.Errorf("message %s, want %q", fmtMessage(got), want)
	}
}

func fmtMessage(s *string) string {
	if s == nil {
		return "null"
	}
	return strconv.Quote(*s)
}
