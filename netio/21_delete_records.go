package netio

// DeleteRecords, versions 0-2. Moves each partition's log start offset up
// to the requested offset (Partition.DeleteRecords; -1 means the high
// watermark) and answers the new low watermark, as Kafka's
// Partition.deleteRecordsOnLeader: an offset below -1 is
// OFFSET_OUT_OF_RANGE here, one past the high watermark is refused by the
// backend (OFFSET_OUT_OF_RANGE), one below the log start changes nothing
// and answers the current log start. Internal topics are refused with
// INVALID_TOPIC_EXCEPTION (ReplicaManager.deleteRecordsOnLocalLog); a
// compacted topic is refused by the backend (POLICY_VIOLATION). A failed
// partition answers low watermark -1. One node has no followers to wait
// for, so TimeoutMillis is not used.

import (
	"context"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const deleteRecordsToHighWatermark = -1

func serveDeleteRecords(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	backend := c.server.backend
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		t, known := backend.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			var err error
			switch {
			case !c.authorize(opDelete, resourceTopic, rt.Topic):
				err = kerr.TopicAuthorizationFailed
			case !known:
				err = kerr.UnknownTopicOrPartition
			case t.Internal:
				err = kerr.InvalidTopicException
			case rp.Offset < deleteRecordsToHighWatermark:
				err = kerr.OffsetOutOfRange
			default:
				var lowWatermark rb.Offset
				lowWatermark, err = deleteRecords(ctx, backend, rt.Topic, rp)
				sp.LowWatermark = int64(lowWatermark)
			}
			if err != nil {
				sp.LowWatermark = -1
				sp.ErrorCode = errorCode(c.server.log, err, kerr.KafkaStorageError)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func deleteRecords(ctx context.Context, backend Backend, topic string, rp kmsg.DeleteRecordsRequestTopicPartition) (rb.Offset, error) {
	p, err := backend.Partition(topic, rp.Partition)
	if err != nil {
		return -1, err
	}
	return p.DeleteRecords(ctx, rb.Offset(rp.Offset))
}
