package netio

// DescribeTopicPartitions, version 0 (KIP-966): paginated topic metadata,
// answered as Kafka's DescribeTopicPartitionsRequestHandler and
// KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse answer it.
// No topics asks for every topic. Topics are deduplicated, sorted by name
// and start at the cursor (the cursor topic from its cursor partition,
// the later ones from partition 0). At most ResponsePartitionLimit
// partitions are answered, clamped to [1, 2000]; when a topic is cut
// short NextCursor names where to go on, and when the limit is reached
// exactly it names the next topic at partition 0. A cursor with a negative
// partition, or (when topics are listed) a cursor topic that is not
// listed, is INVALID_REQUEST for every listed topic. A listed topic that
// does not exist is UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION
// for a name Kafka would refuse; it uses none of the limit. This node
// leads every partition and is its only replica; eligible leader replicas
// are empty. With no authorizer every topic operation is allowed.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// describeTopicPartitionsLimitMax is max.request.partition.size.limit.
	describeTopicPartitionsLimitMax = 2000
	// topicOperationsAll is the bit field of every operation on a topic
	// (AclEntry.supportedOperations(TOPIC)): READ 3, WRITE 4, CREATE 5,
	// DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11.
	topicOperationsAll = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
	// topicNameLengthMax is Kafka's Topic.MAX_NAME_LENGTH.
	topicNameLengthMax = 249
)

func serveDescribeTopicPartitions(_ context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	names, ok := describeTopicNames(c.server.backend, req)
	if !ok {
		for _, rt := range req.Topics {
			st := kmsg.NewDescribeTopicPartitionsResponseTopic()
			st.Topic, st.ErrorCode = &rt.Topic, kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	names, denied := describableTopicNames(c, names, len(req.Topics) == 0)
	remaining := max(min(req.ResponsePartitionLimit, describeTopicPartitionsLimitMax), 1)
	for _, name := range names {
		if remaining == 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: 0}
			break
		}
		start := int32(0)
		if req.Cursor != nil && name == req.Cursor.Topic {
			start = req.Cursor.Partition
		}
		st, next := describeTopic(c, name, start, remaining)
		if st.ErrorCode != 0 && len(req.Topics) == 0 {
			continue // deleted since it was listed
		}
		resp.Topics = append(resp.Topics, st)
		if next >= 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: next}
			break
		}
		remaining -= int32(len(st.Partitions))
	}
	for _, name := range denied {
		st := kmsg.NewDescribeTopicPartitionsResponseTopic()
		st.Topic, st.ErrorCode = &name, kerr.TopicAuthorizationFailed.Code // authorized operations: the default, -2147483648
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// describableTopicNames splits the sorted names into those the client may
// DESCRIBE and, when topics were listed, those it may not, as Kafka's
// DescribeTopicPartitionsRequestHandler does before it paginates: every
// denied topic from the cursor on is answered TOPIC_AUTHORIZATION_FAILED,
// after the described ones, however far the pages go (Kafka adds them
// from a HashSet, in its hash order; here in name order). An all-topics
// request leaves them out.
func describableTopicNames(c *conn, names []string, all bool) (allowed, denied []string) {
	allowed = names[:0:0]
	for _, name := range names {
		switch {
		case all && !c.authorizeQuietly(opDescribe, resourceTopic, name):
		case all || c.authorize(opDescribe, resourceTopic, name):
			allowed = append(allowed, name)
		default:
			denied = append(denied, name)
		}
	}
	return allowed, denied
}

// describeTopicNames returns the sorted topics to describe from the
// cursor on, or false when the cursor is invalid.
func describeTopicNames(backend Backend, req *kmsg.DescribeTopicPartitionsRequest) ([]string, bool) {
	cursorTopic := ""
	if req.Cursor != nil {
		cursorTopic = req.Cursor.Topic
	}
	var names []string
	if len(req.Topics) == 0 {
		for _, t := range backend.Topics() {
			if t.Name >= cursorTopic {
				names = append(names, t.Name)
			}
		}
	} else {
		for _, rt := range req.Topics {
			if rt.Topic >= cursorTopic {
				names = append(names, rt.Topic)
			}
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if req.Cursor != nil && len(req.Topics) > 0 {
		if _, listed := slices.BinarySearch(names, cursorTopic); !listed {
			return nil, false
		}
	}
	if req.Cursor != nil && req.Cursor.Partition < 0 {
		return nil, false
	}
	return names, true
}

// describeTopic answers one topic's partitions from start on, at most
// limit of them, and the partition to continue from (-1 when done).
func describeTopic(c *conn, name string, start, limit int32) (kmsg.DescribeTopicPartitionsResponseTopic, int32) {
	backend := c.server.backend
	st := kmsg.NewDescribeTopicPartitionsResponseTopic()
	st.Topic, st.AuthorizedOperations = &name, topicOperationsAll
	if c.server.cfg.Authorizer != nil {
		st.AuthorizedOperations = c.authorizedOperations(resourceTopic, name)
	}
	t, ok := backend.Topic(name)
	if !ok {
		st.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if !validTopicName(name) {
			st.ErrorCode = kerr.InvalidTopicException.Code
		}
		return st, -1
	}
	st.TopicID, st.IsInternal = t.ID, t.Internal
	node := backend.Cluster().NodeID
	end := t.Partitions
	if int64(start)+int64(limit) < int64(end) {
		end = start + limit
	}
	clustered := c.clusterBackend() != nil
	for i := start; i < end; i++ {
		sp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
		sp.EligibleLeaderReplicas, sp.LastKnownELR = []int32{}, []int32{}
		if clustered {
			// The cluster's view, as Metadata answers it (KRaftMetadataCache
			// describes both from one image).
			mp := metadataPartition(c, name, i, true)
			sp.Partition, sp.ErrorCode, sp.LeaderID, sp.LeaderEpoch = i, mp.ErrorCode, mp.Leader, mp.LeaderEpoch
			sp.Replicas, sp.ISR, sp.OfflineReplicas = mp.Replicas, mp.ISR, mp.OfflineReplicas
			if sp.OfflineReplicas == nil {
				sp.OfflineReplicas = []int32{}
			}
			st.Partitions = append(st.Partitions, sp)
			continue
		}
		sp.Partition, sp.LeaderID = i, node
		sp.Replicas, sp.ISR, sp.OfflineReplicas = []int32{node}, []int32{node}, []int32{}
		if p, err := backend.Partition(name, i); err == nil {
			sp.LeaderEpoch = int32(p.LeaderEpoch())
		} else if sp.ErrorCode = errorCode(c.server.log, err, kerr.UnknownServerError); sp.ErrorCode == kerr.KafkaStorageError.Code {
			// An offline log: no leader, the node offline (as Kafka).
			sp.ErrorCode, sp.LeaderID, sp.OfflineReplicas = 0, -1, []int32{node}
		}
		st.Partitions = append(st.Partitions, sp)
	}
	if end < t.Partitions {
		return st, end
	}
	return st, -1
}

// validTopicName reports whether Kafka would accept name (Topic.validate):
// not empty, not "." or "..", at most 249 characters of ASCII letters,
// digits, '.', '_' and '-'.
func validTopicName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > topicNameLengthMax {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch b := name[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '.', b == '_', b == '-':
		default:
			return false
		}
	}
	return true
}
