package netio

import (
	"context"
	"errors"
	"testing"

	"github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func epochPtr(epoch int32) *int32 { return &epoch }

// newOffsetsStub serves topic "t" with two partitions; partition 0 is a
// stub at leader epoch 5 with log start 2, last stable offset 8, high
// watermark 10 and log end 12.
func newOffsetsStub(t *testing.T) (*rawConn, *stubPartition) {
	backend := newStubBackend()
	mustCreateTopic(t, backend.memBackend, "t", 2)
	stub := &stubPartition{
		epoch:     5,
		offsets:   Offsets{LogStartOffset: 2, HighWatermark: 10, LastStableOffset: 8, LogEndOffset: 12},
		epochEnds: map[int32][2]int64{3: {3, 100}, 4: {3, 100}, 5: {5, 150}},
		listOffset: func(timestamp int64, isolation Isolation) (recordbatch.Offset, int64, recordbatch.Epoch, error) {
			switch timestamp {
			case -1:
				if isolation == ReadCommitted {
					return 8, -1, 5, nil
				}
				return 10, -1, 5, nil
			case -2:
				return 2, -1, 3, nil
			case -3:
				return 9, 5000, 4, nil
			case 1000:
				return 4, 1000, 4, nil
			case 2000:
				return 10, 2000, 5, nil
			case 3000:
				return -1, -1, -1, errors.New("disk on fire")
			case 4000:
				return -1, -1, -1, kerr.OffsetNotAvailable
			}
			return -1, -1, -1, nil
		},
	}
	backend.partitions[topicPartition{"t", 0}] = stub
	return startStubServer(t, backend), stub
}

func TestListOffsets(t *testing.T) {
	raw, stub := newOffsetsStub(t)
	for _, c := range []struct {
		name      string
		version   int16
		replica   int32
		isolation int8
		partition int32
		timestamp int64
		current   *int32
		code      *kerr.Error
		offset    int64
		recordTs  int64
		epoch     int32
		calls     string
	}{
		{name: "latest v1", version: 1, replica: -1, timestamp: -1, offset: 10, recordTs: -1, epoch: -1, calls: "ListOffset(-1, 0)"},
		{name: "latest read_committed", version: 4, replica: -1, isolation: 1, timestamp: -1, offset: 8, recordTs: -1, epoch: 5, calls: "ListOffset(-1, 1)"},
		{name: "latest debug replica", version: 4, replica: -2, isolation: 1, timestamp: -1, offset: 12, recordTs: -1, epoch: 5},
		{name: "latest follower", version: 4, replica: 3, timestamp: -1, offset: 12, recordTs: -1, epoch: 5},
		{name: "earliest", version: 4, replica: -1, timestamp: -2, offset: 2, recordTs: -1, epoch: 3, calls: "ListOffset(-2, 0)"},
		{name: "earliest local v8", version: 8, replica: -1, timestamp: -4, offset: 2, recordTs: -1, epoch: 3, calls: "ListOffset(-2, 0)"},
		{name: "earliest local v7", version: 7, replica: -1, timestamp: -4, code: kerr.UnsupportedVersion, offset: -1, recordTs: -1, epoch: -1},
		{name: "max timestamp v6", version: 6, replica: -1, timestamp: -3, code: kerr.UnsupportedVersion, offset: -1, recordTs: -1, epoch: -1},
		{name: "max timestamp v7", version: 7, replica: -1, timestamp: -3, offset: 9, recordTs: 5000, epoch: 4, calls: "ListOffset(-3, 0)"},
		{name: "max timestamp past lso", version: 7, replica: -1, isolation: 1, timestamp: -3, offset: -1, recordTs: -1, epoch: -1, calls: "ListOffset(-3, 1)"},
		{name: "latest tiered v9", version: 9, replica: -1, timestamp: -5, offset: -1, recordTs: -1, epoch: -1},
		{name: "latest tiered v8", version: 8, replica: -1, timestamp: -5, code: kerr.UnsupportedVersion, offset: -1, recordTs: -1, epoch: -1},
		{name: "earliest pending v11", version: 11, replica: -1, timestamp: -6, offset: -1, recordTs: -1, epoch: -1},
		{name: "earliest pending v10", version: 10, replica: -1, timestamp: -6, code: kerr.UnsupportedVersion, offset: -1, recordTs: -1, epoch: -1},
		{name: "no such special", version: 11, replica: -1, timestamp: -7, code: kerr.UnsupportedVersion, offset: -1, recordTs: -1, epoch: -1},
		{name: "timestamp", version: 4, replica: -1, timestamp: 1000, offset: 4, recordTs: 1000, epoch: 4, calls: "ListOffset(1000, 0)"},
		{name: "timestamp v1", version: 1, replica: -1, timestamp: 1000, offset: 4, recordTs: 1000, epoch: -1, calls: "ListOffset(1000, 0)"},
		{name: "timestamp at high watermark", version: 4, replica: -1, timestamp: 2000, offset: -1, recordTs: -1, epoch: -1, calls: "ListOffset(2000, 0)"},
		{name: "timestamp debug replica", version: 4, replica: -2, timestamp: 2000, offset: 10, recordTs: 2000, epoch: 5, calls: "ListOffset(2000, 0)"},
		{name: "storage error", version: 4, replica: -1, timestamp: 3000, code: kerr.KafkaStorageError, offset: -1, recordTs: -1, epoch: -1, calls: "ListOffset(3000, 0)"},
		{name: "offset not available v4", version: 4, replica: -1, timestamp: 4000, code: kerr.LeaderNotAvailable, offset: -1, recordTs: -1, epoch: -1, calls: "ListOffset(4000, 0)"},
		{name: "offset not available v5", version: 5, replica: -1, timestamp: 4000, code: kerr.OffsetNotAvailable, offset: -1, recordTs: -1, epoch: -1, calls: "ListOffset(4000, 0)"},
		{name: "fenced", version: 4, replica: -1, timestamp: -1, current: epochPtr(4), code: kerr.FencedLeaderEpoch, offset: -1, recordTs: -1, epoch: -1},
		{name: "epoch ahead", version: 11, replica: -1, timestamp: -1, current: epochPtr(6), code: kerr.UnknownLeaderEpoch, offset: -1, recordTs: -1, epoch: -1},
		{name: "epoch current", version: 4, replica: -1, timestamp: -1, current: epochPtr(5), offset: 10, recordTs: -1, epoch: 5, calls: "ListOffset(-1, 0)"},
		{name: "epoch not sent v3", version: 3, replica: -1, timestamp: -1, current: epochPtr(4), offset: 10, recordTs: -1, epoch: -1, calls: "ListOffset(-1, 0)"},
		{name: "unknown partition", version: 4, replica: -1, partition: 9, timestamp: -1, code: kerr.UnknownTopicOrPartition, offset: -1, recordTs: -1, epoch: -1},
		{name: "memory partition", version: 4, replica: -1, partition: 1, timestamp: -1, offset: 0, recordTs: -1, epoch: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := kmsg.NewPtrListOffsetsRequest()
			req.Version, req.ReplicaID, req.IsolationLevel = c.version, c.replica, c.isolation
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = c.partition, c.timestamp
			if c.current != nil {
				rp.CurrentLeaderEpoch = *c.current
			}
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := raw.do(req).(*kmsg.ListOffsetsResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].Topic != "t" || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("response %+v", resp.Topics)
			}
			sp := resp.Topics[0].Partitions[0]
			wantCode := int16(0)
			if c.code != nil {
				wantCode = c.code.Code
			}
			if sp.Partition != c.partition || sp.ErrorCode != wantCode || sp.Offset != c.offset || sp.Timestamp != c.recordTs || sp.LeaderEpoch != c.epoch {
				t.Errorf("got partition %d %s offset %d timestamp %d epoch %d, want %d %s %d %d %d",
					sp.Partition, errName(sp.ErrorCode), sp.Offset, sp.Timestamp, sp.LeaderEpoch,
					c.partition, errName(wantCode), c.offset, c.recordTs, c.epoch)
			}
			if got := stub.calls(); got != c.calls {
				t.Errorf("backend asked %q, want %q", got, c.calls)
			}
		})
	}
}

func TestListOffsetsDuplicatePartition(t *testing.T) {
	raw, stub := newOffsetsStub(t)
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 7
	for _, partitions := range [][]int32{{0, 1}, {0}} {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		for _, partition := range partitions {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = partition, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := raw.do(req).(*kmsg.ListOffsetsResponse)
	want := [][]int16{{kerr.InvalidRequest.Code, 0}, {kerr.InvalidRequest.Code}}
	for i, st := range resp.Topics {
		for j, sp := range st.Partitions {
			if sp.ErrorCode != want[i][j] {
				t.Errorf("topic entry %d partition %d: %s, want %s", i, sp.Partition, errName(sp.ErrorCode), errName(want[i][j]))
			}
		}
	}
	if got := stub.calls(); got != "" {
		t.Errorf("backend asked %q for a duplicated partition", got)
	}
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	raw, stub := newOffsetsStub(t)
	for _, c := range []struct {
		name      string
		version   int16
		replica   int32
		partition int32
		current   *int32
		requested int32
		code      *kerr.Error
		epoch     int32
		offset    int64
		calls     string
	}{
		{name: "lower epoch found", version: 2, requested: 4, epoch: 3, offset: 100, calls: "EndOffsetForEpoch(4)"},
		{name: "current epoch", version: 2, current: epochPtr(5), requested: 5, epoch: 5, offset: 150, calls: "EndOffsetForEpoch(5)"},
		{name: "fenced", version: 2, current: epochPtr(4), requested: 3, code: kerr.FencedLeaderEpoch, epoch: -1, offset: -1},
		{name: "epoch ahead", version: 3, current: epochPtr(6), requested: 3, code: kerr.UnknownLeaderEpoch, epoch: -1, offset: -1},
		{name: "unknown epoch", version: 4, current: epochPtr(-1), requested: 9, epoch: -1, offset: -1, calls: "EndOffsetForEpoch(9)"},
		{name: "replica id ignored", version: 4, replica: 3, current: epochPtr(5), requested: 5, epoch: 5, offset: 150, calls: "EndOffsetForEpoch(5)"},
		{name: "unknown partition", version: 4, partition: 7, requested: 5, code: kerr.UnknownTopicOrPartition, epoch: -1, offset: -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			req.Version = c.version
			if c.replica != 0 {
				req.ReplicaID = c.replica
			}
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.CurrentLeaderEpoch = c.partition, c.requested, -1
			if c.current != nil {
				rp.CurrentLeaderEpoch = *c.current
			}
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := raw.do(req).(*kmsg.OffsetForLeaderEpochResponse)
			sp := resp.Topics[0].Partitions[0]
			wantCode := int16(0)
			if c.code != nil {
				wantCode = c.code.Code
			}
			if sp.Partition != c.partition || sp.ErrorCode != wantCode || sp.LeaderEpoch != c.epoch || sp.EndOffset != c.offset {
				t.Errorf("got %d %s epoch %d offset %d, want %d %s %d %d", sp.Partition, errName(sp.ErrorCode), sp.LeaderEpoch, sp.EndOffset,
					c.partition, errName(wantCode), c.epoch, c.offset)
			}
			if got := stub.calls(); got != c.calls {
				t.Errorf("backend asked %q, want %q", got, c.calls)
			}
		})
	}
}

// produceRecords appends count one-record batches to a memory partition.
func produceRecords(t *testing.T, backend Backend, topic string, partition int32, count int) {
	t.Helper()
	p, err := backend.Partition(topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	for i := range count {
		batch := recordbatch.Append(nil, recordbatch.Spec{ProducerID: -1, BaseSequence: -1, BaseTimestamp: int64(1000 + i),
			Records: []recordbatch.Record{{Value: []byte{byte(i)}}}})
		if _, err := p.Produce(context.Background(), batch, ProduceRequest{Acks: -1}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDeleteRecords(t *testing.T) {
	backend := newStubBackend()
	mustCreateTopic(t, backend.memBackend, "t", 1)
	mustCreateTopic(t, backend.memBackend, "__internal", 1)
	backend.topics["__internal"].info.Internal = true
	produceRecords(t, backend, "t", 0, 10)
	raw := startStubServer(t, backend)
	for _, c := range []struct {
		name         string
		version      int16
		topic        string
		partition    int32
		offset       int64
		code         *kerr.Error
		lowWatermark int64
	}{
		{name: "to 3", version: 0, topic: "t", offset: 3, lowWatermark: 3},
		{name: "below the log start", version: 1, topic: "t", offset: 1, lowWatermark: 3},
		{name: "past the high watermark", version: 2, topic: "t", offset: 11, code: kerr.OffsetOutOfRange, lowWatermark: -1},
		{name: "negative", version: 2, topic: "t", offset: -2, code: kerr.OffsetOutOfRange, lowWatermark: -1},
		{name: "to the high watermark", version: 2, topic: "t", offset: -1, lowWatermark: 10},
		{name: "internal topic", version: 2, topic: "__internal", offset: 0, code: kerr.InvalidTopicException, lowWatermark: -1},
		{name: "unknown topic", version: 2, topic: "nope", offset: 0, code: kerr.UnknownTopicOrPartition, lowWatermark: -1},
		{name: "unknown partition", version: 2, topic: "t", partition: 4, offset: 0, code: kerr.UnknownTopicOrPartition, lowWatermark: -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := kmsg.NewPtrDeleteRecordsRequest()
			req.Version = c.version
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = c.topic
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = c.partition, c.offset
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := raw.do(req).(*kmsg.DeleteRecordsResponse)
			sp := resp.Topics[0].Partitions[0]
			wantCode := int16(0)
			if c.code != nil {
				wantCode = c.code.Code
			}
			if resp.Topics[0].Topic != c.topic || sp.Partition != c.partition || sp.ErrorCode != wantCode || sp.LowWatermark != c.lowWatermark {
				t.Errorf("got %s/%d %s low watermark %d, want %s %d", resp.Topics[0].Topic, sp.Partition, errName(sp.ErrorCode), sp.LowWatermark,
					errName(wantCode), c.lowWatermark)
			}
		})
	}
	if got := backend.memBackend.topics["t"].partitions[0].Offsets().LogStartOffset; got != 10 {
		t.Errorf("log start offset %d after deleting to the high watermark, want 10", got)
	}
}
