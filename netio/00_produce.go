package netio

// Produce, versions 3-13 (v3 is the first with v2 record batches; v13
// names topics by ID). Each partition's records go to Partition.Produce
// as received; the backend validates them (framing, CRC, compression,
// producer sequence) and assigns offsets. acks=0 gets no response, as in
// Kafka; acks=1 and acks=-1 are the same on a single node.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveProduce(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	produce := ProduceRequest{Acks: req.Acks}
	if req.TransactionID != nil {
		produce.TransactionalID = *req.TransactionID
	}
	for _, rt := range req.Topics {
		topicName := rt.Topic
		t, topicErr := lookupTopic(c.server.backend, &topicName, rt.TopicID)
		if req.Version >= 13 {
			t, topicErr = lookupTopic(c.server.backend, nil, rt.TopicID)
		}
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			err := topicErr
			if err == nil {
				var result ProduceResult
				result, err = produceOne(ctx, c.server.backend, t.Name, rp.Partition, rp.Records, produce)
				sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = result.BaseOffset, result.LogAppendTime, result.LogStartOffset
			}
			if err != nil {
				sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
				sp.ErrorCode = errorCode(c.server.log, err, kerr.KafkaStorageError)
				sp.ErrorMessage = errorMessage(err) // v8+: why, for the client to print
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Acks == 0 {
		return nil, nil
	}
	return resp, nil
}

func produceOne(ctx context.Context, backend Backend, topic string, partition int32, records []byte, request ProduceRequest) (ProduceResult, error) {
	if len(records) == 0 {
		return ProduceResult{}, kerr.CorruptMessage
	}
	p, err := backend.Partition(topic, partition)
	if err != nil {
		return ProduceResult{}, err
	}
	return p.Produce(ctx, records, request)
}
