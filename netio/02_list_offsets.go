package netio

// ListOffsets, versions 1-11 (v0's MaxNumOffsets and segment-time offsets
// are not served). One offset per partition, for a timestamp or one of
// the special values, answered as a Kafka broker without tiered storage
// answers them (UnifiedLog.fetchOffsetByTimestamp, Partition.
// fetchOffsetForTimestamp, ReplicaManager.fetchOffset):
//
//	-1 latest           the last fetchable offset: the high watermark, or
//	                    the last stable offset under read_committed; the
//	                    log end offset for a request that is not a
//	                    consumer's (ReplicaID != -1); the current leader epoch
//	-2 earliest         the log start offset                     (v1+)
//	-3 max timestamp    the record with the largest timestamp    (v7+)
//	-4 earliest local   the log start offset: all of the log is local (v8+)
//	-5 latest tiered    offset -1, epoch -1: nothing is tiered   (v9+)
//	-6 earliest pending offset -1, epoch -1: nothing is tiered   (v11+)
//	t >= 0              the first record with a timestamp >= t
//
// Any other negative timestamp, or a special value below the version that
// added it, is UNSUPPORTED_VERSION for that partition; a partition listed
// twice is INVALID_REQUEST. A timestamp lookup (-3 and t >= 0) that finds
// a record at or past the last fetchable offset answers as if nothing was
// found (offset -1), so read_committed never sees an open transaction.
// CurrentLeaderEpoch (v4+, -1 = unknown) fences: older than ours is
// FENCED_LEADER_EPOCH, newer is UNKNOWN_LEADER_EPOCH. The response carries
// the leader epoch of the offset from v4. OFFSET_NOT_AVAILABLE is
// LEADER_NOT_AVAILABLE below v5, as in Kafka.

import (
	"context"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	listOffsetsLatest          = -1
	listOffsetsEarliest        = -2
	listOffsetsMaxTimestamp    = -3
	listOffsetsEarliestLocal   = -4
	listOffsetsLatestTiered    = -5
	listOffsetsEarliestPending = -6

	consumerReplicaID = -1
)

// listOffsetsMinVersion is the first request version that may carry each
// special timestamp (ReplicaManager.timestampMinSupportedVersion).
var listOffsetsMinVersion = map[int64]int16{
	listOffsetsLatest:          1,
	listOffsetsEarliest:        1,
	listOffsetsMaxTimestamp:    7,
	listOffsetsEarliestLocal:   8,
	listOffsetsLatestTiered:    9,
	listOffsetsEarliestPending: 11,
}

type topicPartition struct {
	topic     string
	partition int32
}

func serveListOffsets(_ context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	seen := make(map[topicPartition]int, len(req.Topics)) // bounded by the request
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			seen[topicPartition{rt.Topic, rp.Partition}]++
		}
	}
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			var err error
			switch minVersion, special := listOffsetsMinVersion[rp.Timestamp]; {
			case !c.authorize(opDescribe, resourceTopic, rt.Topic):
				err = kerr.TopicAuthorizationFailed
			case seen[topicPartition{rt.Topic, rp.Partition}] > 1:
				err = kerr.InvalidRequest
			case rp.Timestamp < 0 && (!special || req.Version < minVersion):
				err = kerr.UnsupportedVersion
			default:
				var offset rb.Offset
				var epoch rb.Epoch
				offset, sp.Timestamp, epoch, err = listOffset(c.server.backend, req, rt.Topic, rp)
				sp.Offset, sp.LeaderEpoch = int64(offset), int32(epoch)
			}
			if err != nil {
				sp.Offset, sp.Timestamp, sp.LeaderEpoch = -1, -1, -1
				sp.ErrorCode = errorCode(c.server.log, err, kerr.KafkaStorageError)
				if sp.ErrorCode == kerr.OffsetNotAvailable.Code && req.Version < 5 {
					sp.ErrorCode = kerr.LeaderNotAvailable.Code
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// listOffset answers one partition: offset, record timestamp and leader
// epoch, each -1 where there is no answer.
func listOffset(backend Backend, req *kmsg.ListOffsetsRequest, topic string, rp kmsg.ListOffsetsRequestTopicPartition) (rb.Offset, int64, rb.Epoch, error) {
	p, err := backend.Partition(topic, rp.Partition)
	if err != nil {
		return -1, -1, -1, err
	}
	if err := leaderEpochFence(rb.Epoch(rp.CurrentLeaderEpoch), p.LeaderEpoch()); err != nil {
		return -1, -1, -1, err
	}
	consumer := req.ReplicaID == consumerReplicaID
	isolation := ReadUncommitted
	if consumer && req.IsolationLevel == int8(ReadCommitted) {
		isolation = ReadCommitted
	}
	timestamp := rp.Timestamp
	switch timestamp {
	case listOffsetsLatestTiered, listOffsetsEarliestPending:
		return -1, -1, -1, nil
	case listOffsetsEarliestLocal:
		timestamp = listOffsetsEarliest
	case listOffsetsLatest:
		if !consumer {
			epoch := p.LeaderEpoch()
			return p.Offsets().LogEndOffset, -1, epoch, nil
		}
	}
	offset, recordTimestamp, epoch, err := p.ListOffset(timestamp, isolation)
	if err != nil {
		return -1, -1, -1, err
	}
	if timestamp == listOffsetsLatest || timestamp == listOffsetsEarliest {
		return offset, -1, epoch, nil
	}
	if offset >= lastFetchableOffset(p.Offsets(), consumer, isolation) {
		return -1, -1, -1, nil
	}
	return offset, recordTimestamp, epoch, nil
}

// lastFetchableOffset bounds what a timestamp lookup may answer
// (Partition.fetchOffsetForTimestamp).
func lastFetchableOffset(offsets Offsets, consumer bool, isolation Isolation) rb.Offset {
	switch {
	case !consumer:
		return offsets.LogEndOffset
	case isolation == ReadCommitted:
		return offsets.LastStableOffset
	}
	return offsets.HighWatermark
}
