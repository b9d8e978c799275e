package netio

// Metadata, versions 0-13. A node alone is the only broker and leads every
// partition (replicas and ISR are just this node); a cluster node answers
// for the whole cluster (cluster.go). Topic IDs from v10;
// topics may be asked for by ID from v12 (answered by name). A null topic
// list (v1+; an empty list in v0) asks for every topic. Unknown topics are
// created when the request allows auto creation and the backend agrees,
// as a Kafka broker with auto.create.topics.enable does; a name Kafka
// would refuse is INVALID_TOPIC_EXCEPTION and never created. With no
// authorizer every operation is allowed: v8+ answers them all for each
// topic, and (v8-10) for the cluster, when asked (DescribeTopicPartitions
// and DescribeCluster answer the same). With one, DESCRIBE on a topic is
// needed (an all-topics answer leaves the others out; a named one is
// TOPIC_AUTHORIZATION_FAILED), and CREATE on the cluster or the topic to
// auto-create it.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/acl"
)

func serveMetadata(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	backend := c.server.backend
	cluster := c.cluster()
	brokers, controller := c.brokers()
	for _, b := range brokers {
		resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.rack()})
	}
	resp.ClusterID = &cluster.ClusterID
	resp.ControllerID = controller
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = c.describedOperations(resourceCluster, acl.ClusterName)
	}

	all := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0
	if all {
		for _, t := range backend.Topics() {
			if !c.authorizeQuietly(opDescribe, resourceTopic, t.Name) {
				continue // left out, as Kafka leaves out what the client may not describe
			}
			resp.Topics = append(resp.Topics, metadataTopic(c, req, t))
		}
		return resp, nil
	}
	autoCreate := (req.Version < 4 || req.AllowAutoTopicCreation) && !c.server.cfg.NoAutoCreateTopics
	for _, rt := range req.Topics {
		t, err := lookupTopic(backend, rt.Topic, rt.TopicID)
		if denied := metadataDenied(c, rt, t, err, autoCreate); denied != nil {
			resp.Topics = append(resp.Topics, *denied)
			continue
		}
		invalidName := err != nil && rt.Topic != nil && *rt.Topic != "" && !validTopicName(*rt.Topic)
		if err != nil && autoCreate && rt.Topic != nil && !invalidName {
			t, err = backend.CreateTopic(ctx, *rt.Topic, -1, nil, false) // num.partitions
			if err != nil {
				c.server.log.Info("metadata: auto-creating topic failed", "topic", *rt.Topic, "error", err)
			}
		}
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			if req.IncludeTopicAuthorizedOperations {
				mt.AuthorizedOperations = topicOperationsAll
			}
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			switch {
			case rt.Topic == nil:
				mt.ErrorCode = kerr.UnknownTopicID.Code
			case invalidName:
				mt.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, metadataTopic(c, req, t))
	}
	return resp, nil
}

// lookupTopic finds a topic by name, or by ID when the name is null.
// metadataDenied is Kafka's answer to a named topic the client may not
// DESCRIBE, or may not CREATE (on the cluster or the topic) when it does
// not exist and would be auto-created: TOPIC_AUTHORIZATION_FAILED (by ID,
// the name stays null). nil when allowed.
func metadataDenied(c *conn, rt kmsg.MetadataRequestTopic, t TopicInfo, lookupErr error, autoCreate bool) *kmsg.MetadataResponseTopic {
	name := t.Name
	if rt.Topic != nil && *rt.Topic != "" {
		name = *rt.Topic
	} else if lookupErr != nil {
		return nil // an unknown topic ID answers UNKNOWN_TOPIC_ID
	}
	allowed := c.authorize(opDescribe, resourceTopic, name)
	if allowed && lookupErr != nil && autoCreate && validTopicName(name) {
		allowed = c.authorizeQuietly(opCreate, resourceCluster, acl.ClusterName) || c.authorize(opCreate, resourceTopic, name)
	}
	if allowed {
		return nil
	}
	mt := kmsg.NewMetadataResponseTopic()
	// The authorized operations keep their default, -2147483648: Kafka's
	// metadataResponseTopic sets none for a denied topic.
	mt.Topic, mt.TopicID, mt.ErrorCode = rt.Topic, rt.TopicID, kerr.TopicAuthorizationFailed.Code
	return &mt
}

func lookupTopic(backend Backend, name *string, id [16]byte) (TopicInfo, error) {
	var (
		t  TopicInfo
		ok bool
	)
	if name != nil && *name != "" {
		t, ok = backend.Topic(*name)
	} else {
		t, ok = backend.TopicByID(id)
	}
	if !ok {
		if name == nil || *name == "" {
			return t, kerr.UnknownTopicID
		}
		return t, kerr.UnknownTopicOrPartition
	}
	return t, nil
}

func metadataTopic(c *conn, req *kmsg.MetadataRequest, t TopicInfo) kmsg.MetadataResponseTopic {
	name := t.Name
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID, mt.IsInternal = &name, t.ID, t.Internal
	if req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = c.authorizedOperations(resourceTopic, t.Name)
	}
	clustered := c.clusterBackend() != nil
	for i := range t.Partitions {
		mt.Partitions = append(mt.Partitions, metadataPartition(c, t.Name, i, clustered))
	}
	return mt
}

// metadataPartition answers one partition. A node alone reads its own
// partition; a cluster node answers from the cluster's view, so that a
// partition it does not hold is listed with its leader elsewhere.
func metadataPartition(c *conn, topic string, i int32, clustered bool) kmsg.MetadataResponseTopicPartition {
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.Partition = i
	var p Partition
	if !clustered {
		var err error
		if p, err = c.server.backend.Partition(topic, i); err != nil {
			node := c.cluster().NodeID
			mp.Leader, mp.Replicas, mp.ISR = node, []int32{node}, []int32{node}
			if mp.ErrorCode = errorCode(c.server.log, err, kerr.UnknownServerError); mp.ErrorCode == kerr.KafkaStorageError.Code {
				// An offline log: as Kafka's metadata for the only replica in
				// a failed log dir (KRaftMetadataCache.getPartitionMetadata).
				mp.ErrorCode, mp.Leader, mp.OfflineReplicas = kerr.LeaderNotAvailable.Code, -1, []int32{node}
			}
			return mp
		}
	}
	r, ok := c.replication(topic, i, p)
	if !ok {
		mp.ErrorCode, mp.Leader = kerr.LeaderNotAvailable.Code, -1
		return mp
	}
	mp.Leader, mp.LeaderEpoch, mp.Replicas, mp.ISR = r.Leader, int32(r.LeaderEpoch), r.Replicas, r.ISR
	if clustered {
		// As KRaftMetadataCache: a leader that is not live (or none) is
		// LEADER_NOT_AVAILABLE, and replicas not live are offline.
		for _, id := range r.Replicas {
			if _, live := c.brokerByID(id); !live {
				mp.OfflineReplicas = append(mp.OfflineReplicas, id)
			}
		}
		if _, live := c.brokerByID(r.Leader); !live {
			mp.ErrorCode, mp.Leader = kerr.LeaderNotAvailable.Code, -1
		}
	}
	return mp
}
