package netio

// OffsetForLeaderEpoch, versions 0-4. For each partition, the end offset
// of the requested leader epoch as the epoch cache computes it
// (Partition.EndOffsetForEpoch, Kafka's LeaderEpochFileCache.endOffsetFor):
// the start offset of the first epoch above it, or the log end offset for
// the latest epoch. An epoch above every known one answers epoch -1 and
// offset -1 without an error (Partition.lastOffsetForLeaderEpoch). v1+
// carries the epoch found, which may be lower than the one asked for. CurrentLeaderEpoch (v2+, -1 = unknown)
// fences as in Kafka: older than ours is FENCED_LEADER_EPOCH, newer is
// UNKNOWN_LEADER_EPOCH. ReplicaID (v3+) is ignored: this node leads every
// partition, and a consumer (-1) and a follower get the same answer.

import (
	"context"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// unknownLeaderEpoch is the CurrentLeaderEpoch of a request that does not
// know the leader's epoch (RecordBatch.NO_PARTITION_LEADER_EPOCH).
const unknownLeaderEpoch = -1

func serveOffsetForLeaderEpoch(_ context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			endEpoch, endOffset, err := rb.Epoch(0), rb.Offset(0), error(kerr.TopicAuthorizationFailed)
			if c.authorize(opDescribe, resourceTopic, rt.Topic) {
				endEpoch, endOffset, err = endOffsetForEpoch(c.server.backend, c.server.backend.Cluster().NodeID, rt.Topic, rp)
			}
			if err != nil {
				sp.ErrorCode = errorCode(c.server.log, err, kerr.KafkaStorageError)
			} else {
				sp.LeaderEpoch, sp.EndOffset = int32(endEpoch), int64(endOffset)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func endOffsetForEpoch(backend Backend, self int32, topic string, rp kmsg.OffsetForLeaderEpochRequestTopicPartition) (rb.Epoch, rb.Offset, error) {
	p, err := backend.Partition(topic, rp.Partition)
	if err != nil {
		return -1, -1, err
	}
	if err := leaderEpochFence(rb.Epoch(rp.CurrentLeaderEpoch), p.LeaderEpoch()); err != nil {
		return -1, -1, err
	}
	if err := checkLeader(p, self); err != nil {
		return -1, -1, err // a follower's log may still diverge: the leader answers (Kafka's getLocalLog)
	}
	endEpoch, endOffset := p.EndOffsetForEpoch(rb.Epoch(rp.LeaderEpoch))
	if endOffset < 0 {
		return -1, -1, nil // UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET
	}
	return endEpoch, endOffset, nil
}

// leaderEpochFence checks a request's CurrentLeaderEpoch against the
// partition's (Partition.checkCurrentLeaderEpoch): a request that does not
// know the epoch passes; an older one is fenced, a newer one is ahead of
// this node.
func leaderEpochFence(requestEpoch, partitionEpoch rb.Epoch) error {
	switch {
	case requestEpoch == unknownLeaderEpoch:
		return nil
	case requestEpoch < partitionEpoch:
		return kerr.FencedLeaderEpoch
	case requestEpoch > partitionEpoch:
		return kerr.UnknownLeaderEpoch
	}
	return nil
}
