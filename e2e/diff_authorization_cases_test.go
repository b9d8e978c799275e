package e2e

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The topics, ACLs and cases of TestDifferentialAuthorization. bob has no
// ACL; carol has partial grants: READ on authz-t (not authz-u) and on
// groups authz-g and authz-classic-g, WRITE on transactional ID authz-tx,
// DESCRIBE on transactional ID diff-txn-warm-up (which ListTransactions
// then lists: awaitTxnCoordinators initialised it on both servers),
// CREATE (without DESCRIBE_CONFIGS) on authz-new, DESCRIBE on authz-u.

const (
	authzTopicT = "authz-t"
	authzTopicU = "authz-u"
	authzGroup  = "authz-g"
	authzTxn    = "authz-tx"
	authzMember = "authz-member-00000002" // a classic member the group has not seen

	// authzClassicGroup is the classic group APIs' group: authz-g is a
	// consumer group once ConsumerGroupHeartbeat has run, and a classic
	// member joining it is KIP-848's online migration, which mirrord does
	// not build (broker/group.classicJoinToConsumerGroup).
	authzClassicGroup = "authz-classic-g"
)

// authzSetup creates the topics and carol's ACLs, as the super user.
func authzSetup() []kmsg.Request {
	topics := createTopicsRequest(false, createTopic{name: authzTopicT, partitions: 2, replicas: 1}, createTopic{name: authzTopicU, partitions: 1, replicas: 1})(diffServer{})
	topics.SetVersion(7)
	acls := kmsg.NewPtrCreateACLsRequest()
	acls.Version = 3
	grant := func(resourceType kmsg.ACLResourceType, name string, op kmsg.ACLOperation) {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = resourceType, name, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:carol", "*", op, kmsg.ACLPermissionTypeAllow
		acls.Creations = append(acls.Creations, c)
	}
	grant(kmsg.ACLResourceTypeTopic, authzTopicT, kmsg.ACLOperationRead)
	grant(kmsg.ACLResourceTypeTopic, authzTopicU, kmsg.ACLOperationDescribe)
	grant(kmsg.ACLResourceTypeGroup, authzGroup, kmsg.ACLOperationRead)
	grant(kmsg.ACLResourceTypeGroup, authzClassicGroup, kmsg.ACLOperationRead)
	grant(kmsg.ACLResourceTypeTransactionalId, authzTxn, kmsg.ACLOperationWrite)
	grant(kmsg.ACLResourceTypeTransactionalId, txnWarmUpID, kmsg.ACLOperationDescribe)
	grant(kmsg.ACLResourceTypeTopic, "authz-new", kmsg.ACLOperationCreate)
	return []kmsg.Request{topics, acls}
}

func authzCases() []authzCase {
	var cases []authzCase
	for _, user := range authzUsers {
		for _, c := range authzRequests() {
			c.user = user
			cases = append(cases, c)
		}
	}
	return cases
}

func authzRequests() []authzCase {
	produce := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrProduceRequest()
		r.Acks, r.TimeoutMillis = -1, 5000
		for _, topic := range []string{authzTopicT, authzTopicU} {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	fetch := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrFetchRequest()
		r.MaxBytes, r.MaxWaitMillis, r.SessionEpoch = 1<<20, 0, -1
		for _, topic := range []string{authzTopicT, authzTopicU} {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			rt.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	followerFetch := func(s diffServer) kmsg.Request {
		r := fetch(s).(*kmsg.FetchRequest)
		r.ReplicaID = 1
		return r
	}
	listOffsets := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrListOffsetsRequest()
		for _, topic := range []string{authzTopicT, authzTopicU} {
			rt := kmsg.NewListOffsetsRequestTopic()
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Topic, rt.Partitions = topic, []kmsg.ListOffsetsRequestTopicPartition{rp}
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	metadata := func(names ...string) func(diffServer) kmsg.Request {
		return func(diffServer) kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			r.IncludeTopicAuthorizedOperations = true
			if names != nil {
				r.Topics = []kmsg.MetadataRequestTopic{}
			}
			for _, name := range names {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(name)
				r.Topics = append(r.Topics, rt)
			}
			return r
		}
	}
	offsetCommit := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation = authzGroup, -1
		for _, topic := range []string{authzTopicT, authzTopicU} {
			r.Topics = append(r.Topics, kmsg.OffsetCommitRequestTopic{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0, LeaderEpoch: -1}}})
		}
		return r
	}
	offsetFetch := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrOffsetFetchRequest()
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = authzGroup
		for _, topic := range []string{authzTopicT, authzTopicU} {
			g.Topics = append(g.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: topic, Partitions: []int32{0}})
		}
		r.Groups = []kmsg.OffsetFetchRequestGroup{g}
		return r
	}
	findCoordinator := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorKeys = []string{authzGroup}
		return r
	}
	createTopics := func(diffServer) kmsg.Request {
		r := createTopicsRequest(true, createTopic{name: "authz-new", partitions: 1, replicas: 1}, createTopic{name: "authz-other", partitions: 1, replicas: 1})(diffServer{})
		return r
	}
	deleteTopics := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrDeleteTopicsRequest()
		r.TopicNames = []string{authzTopicU}
		r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr(authzTopicU)}}
		r.TimeoutMillis = 5000
		return r
	}
	deleteRecords := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrDeleteRecordsRequest()
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic, rt.Partitions = authzTopicT, []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}
		r.Topics, r.TimeoutMillis = []kmsg.DeleteRecordsRequestTopic{rt}, 5000
		return r
	}
	initTransactional := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrInitProducerIDRequest()
		r.TransactionalID, r.TransactionTimeoutMillis = kmsg.StringPtr("authz-other-tx"), 60000
		return r
	}
	initIdempotent := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrInitProducerIDRequest()
		r.TransactionTimeoutMillis = 60000
		return r
	}
	addPartitions := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrAddPartitionsToTxnRequest()
		r.TransactionalID, r.ProducerID, r.ProducerEpoch = authzTxn, 1, 0
		r.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: authzTopicT, Partitions: []int32{0}}, {Topic: authzTopicU, Partitions: []int32{0}}}
		return r
	}
	addOffsets := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrAddOffsetsToTxnRequest()
		r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = authzTxn, 1, 0, "authz-other-g"
		return r
	}
	txnOffsetCommit := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrTxnOffsetCommitRequest()
		r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch, r.Generation = authzTxn, authzGroup, 1, 0, -1
		for _, topic := range []string{authzTopicT, authzTopicU} {
			r.Topics = append(r.Topics, kmsg.TxnOffsetCommitRequestTopic{Topic: topic, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0, LeaderEpoch: -1}}})
		}
		return r
	}
	describeConfigs := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrDescribeConfigsRequest()
		r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: authzTopicT, ConfigNames: []string{"cleanup.policy"}}}
		return r
	}
	incrementalAlterConfigs := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r.ValidateOnly = true
		r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: authzTopicT,
			Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: 0, Value: kmsg.StringPtr("1000")}}},
			{ResourceType: kmsg.ConfigResourceTypeBroker, Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "log.cleaner.threads", Op: 0, Value: kmsg.StringPtr("2")}}}}
		return r
	}
	createPartitions := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrCreatePartitionsRequest()
		r.ValidateOnly, r.TimeoutMillis = true, 5000
		r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: authzTopicT, Count: 3}}
		return r
	}
	deleteGroups := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Groups = []string{authzGroup}
		return r
	}
	describeCluster := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrDescribeClusterRequest()
		r.IncludeClusterAuthorizedOperations = true
		return r
	}
	describeTransactions := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrDescribeTransactionsRequest()
		r.TransactionalIDs = []string{authzTxn}
		return r
	}
	heartbeat := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = authzGroup, "authz-member-00000001", 0, 10000
		r.SubscribedTopicNames, r.Topics = []string{authzTopicT, authzTopicU}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return r
	}
	describeTopicPartitions := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrDescribeTopicPartitionsRequest()
		r.Topics, r.ResponsePartitionLimit = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: authzTopicU}, {Topic: "authz-missing"}, {Topic: authzTopicT}}, 100
		return r
	}
	describeACLs := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrDescribeACLsRequest()
		r.ResourceType, r.ResourcePatternType, r.Operation, r.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		return r
	}
	describeScram := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		r.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{} // every user, as kafka-configs --describe --entity-type users asks
		return r
	}
	alterScram := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		r.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "nobody", Mechanism: 2}, {Name: "carol", Mechanism: 2}}
		return r
	}
	joinGroup := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Group, r.MemberID, r.ProtocolType = authzClassicGroup, authzMember, "consumer"
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 10000
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 3, 0, 0, 0, 0, 0, 0, 0, 0}}}
		return r
	}
	syncGroup := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrSyncGroupRequest()
		r.Group, r.Generation, r.MemberID = authzClassicGroup, 1, authzMember
		r.ProtocolType, r.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
		return r
	}
	classicHeartbeat := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.Generation, r.MemberID = authzClassicGroup, 1, authzMember
		return r
	}
	leaveGroup := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrLeaveGroupRequest()
		r.Group = authzClassicGroup
		r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: authzMember}}
		return r
	}
	alterConfigs := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrAlterConfigsRequest()
		r.ValidateOnly = true
		r.Resources = []kmsg.AlterConfigsRequestResource{
			{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: authzTopicT, Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}},
			{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "", Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "log.cleaner.threads", Value: kmsg.StringPtr("2")}}},
		}
		return r
	}
	offsetDelete := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = authzGroup
		for _, topic := range []string{authzTopicT, authzTopicU} {
			r.Topics = append(r.Topics, kmsg.OffsetDeleteRequestTopic{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}})
		}
		return r
	}
	listTransactions := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrListTransactionsRequest()
		r.DurationFilterMillis = -1
		return r
	}
	endTxn := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrEndTxnRequest()
		r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit = authzTxn, 1, 0, true
		return r
	}
	createACLs := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrCreateACLsRequest()
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, authzTopicU, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:bob", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		r.Creations = []kmsg.CreateACLsRequestCreation{c}
		return r
	}
	deleteACLs := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrDeleteACLsRequest()
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		r.Filters = []kmsg.DeleteACLsRequestFilter{f}
		return r
	}
	describeClientQuotas := func(diffServer) kmsg.Request {
		r := kmsg.NewPtrDescribeClientQuotasRequest()
		r.Components = []kmsg.DescribeClientQuotasRequestComponent{}
		return r
	}
	return []authzCase{
		{name: "Produce", version: 9, request: produce},
		{name: "Fetch", version: 12, request: fetch},
		{name: "Fetch from a follower", version: 12, request: followerFetch},
		{name: "ListOffsets", version: 7, request: listOffsets},
		{name: "Metadata named", version: 12, request: metadata(authzTopicT, authzTopicU, "authz-missing")},
		{name: "OffsetCommit", version: 8, request: offsetCommit},
		{name: "OffsetFetch", version: 8, request: offsetFetch},
		{name: "FindCoordinator", version: 4, request: findCoordinator},
		{name: "CreateTopics", version: 7, request: createTopics},
		{name: "DeleteTopics", version: 6, request: deleteTopics},
		{name: "DeleteRecords", version: 2, request: deleteRecords},
		{name: "InitProducerId transactional", version: 4, request: initTransactional},
		{name: "InitProducerId idempotent", version: 4, request: initIdempotent},
		{name: "AddPartitionsToTxn", version: 3, request: addPartitions},
		{name: "AddOffsetsToTxn", version: 3, request: addOffsets},
		{name: "TxnOffsetCommit", version: 3, request: txnOffsetCommit},
		{name: "DescribeConfigs", version: 4, request: describeConfigs},
		{name: "IncrementalAlterConfigs", version: 1, request: incrementalAlterConfigs},
		{name: "CreatePartitions", version: 3, request: createPartitions},
		{name: "DeleteGroups", version: 2, request: deleteGroups},
		{name: "DescribeCluster", version: 1, request: describeCluster},
		{name: "DescribeTransactions", version: 0, request: describeTransactions},
		{name: "ConsumerGroupHeartbeat", version: 0, request: heartbeat},
		{name: "DescribeTopicPartitions", version: 0, request: describeTopicPartitions},
		{name: "DescribeAcls", version: 3, request: describeACLs},
		{name: "DescribeUserScramCredentials", version: 0, request: describeScram},
		{name: "AlterUserScramCredentials", version: 0, request: alterScram},
		{name: "JoinGroup", version: 9, request: joinGroup},
		{name: "SyncGroup", version: 5, request: syncGroup},
		{name: "Heartbeat", version: 4, request: classicHeartbeat},
		{name: "LeaveGroup", version: 5, request: leaveGroup},
		{name: "AlterConfigs", version: 2, request: alterConfigs},
		{name: "OffsetDelete", version: 0, request: offsetDelete},
		{name: "ListTransactions", version: 1, request: listTransactions},
		{name: "EndTxn", version: 4, request: endTxn},
		{name: "CreateAcls", version: 3, request: createACLs},
		{name: "DeleteAcls", version: 3, request: deleteACLs},
		{name: "Metadata all topics", version: 12, request: metadata()},
		{name: "DescribeClientQuotas", version: 1, request: describeClientQuotas},
	}
}
