package netio

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func oneRecordBatch() []byte {
	return rb.Append(nil, rb.Spec{BaseTimestamp: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: []rb.Record{{Value: []byte("v")}}})
}

// TestProduceBatchFraming checks the records of a partition against
// Kafka's ProduceRequest.validateRecords and its batch iterator, as Kafka
// 4.4 answered the same bytes.
func TestProduceBatchFraming(t *testing.T) {
	batch := oneRecordBatch()
	withMagic := func(magic byte) []byte {
		b := append([]byte(nil), batch...)
		b[magicPosition] = magic
		return b
	}
	withLength := func(length uint32) []byte {
		b := append([]byte(nil), batch...)
		binary.BigEndian.PutUint32(b[8:], length)
		return b
	}
	zstd := append([]byte(nil), batch...)
	zstd[22] |= byte(rb.CodecZstd)
	for _, tc := range []struct {
		name    string
		records []byte
		version int16
		want    *kerr.Error
		size    int // of the batch kept, when accepted
	}{
		{"one batch", batch, 12, nil, len(batch)},
		{"one batch and bytes short of another", append(append([]byte(nil), batch...), 1, 2, 3, 4, 5), 12, nil, len(batch)},
		{"one batch and a truncated one", append(append([]byte(nil), batch...), batch[:len(batch)-1]...), 12, nil, len(batch)},
		{"two batches", append(append([]byte(nil), batch...), batch...), 12, kerr.InvalidRecord, 0},
		{"no bytes", nil, 12, kerr.InvalidRecord, 0},
		{"a truncated batch", batch[:len(batch)-1], 12, kerr.InvalidRecord, 0},
		{"magic 1", withMagic(1), 12, kerr.InvalidRecord, 0},
		{"magic 0", withMagic(0), 3, kerr.InvalidRecord, 0},
		{"magic 3", withMagic(3), 12, kerr.CorruptMessage, 0},
		{"a length below a legacy message's overhead", withLength(13), 12, kerr.CorruptMessage, 0},
		{"zstd at v6", zstd, 6, kerr.UnsupportedCompressionType, 0},
		{"zstd at v7", zstd, 7, nil, len(batch)},
	} {
		got, err := produceBatch(tc.records, tc.version)
		if tc.want == nil {
			if err != nil || len(got) != tc.size {
				t.Fatalf("%s: %d bytes, %v; want %d bytes", tc.name, len(got), err, tc.size)
			}
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %s", tc.name, err, tc.want.Message)
		}
	}
}

// refusingPartition refuses every Produce with err.
type refusingPartition struct {
	Partition
	err error
}

func (p refusingPartition) Produce(context.Context, []byte, ProduceRequest) (ProduceResult, error) {
	return ProduceResult{}, p.err
}

func produceRequest(version, acks int16, topic string, partitions ...int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks, req.TimeoutMillis = acks, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, oneRecordBatch()
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func TestProduceAnswers(t *testing.T) {
	backend := newStubBackend()
	mustCreateTopic(t, backend.memBackend, "t", 3)
	timestamps := &RecordsError{Err: fmt.Errorf("%w: out of range", kerr.InvalidTimestamp), LogStartOffset: 7,
		Records: []RecordError{{BatchIndex: 2, Message: "Timestamp 5 of message with offset 2 is out of range."}}, Message: "kafka's words"}
	backend.partitions[topicPartition{"t", 1}] = &stubPartition{Partition: refusingPartition{err: timestamps}}
	backend.partitions[topicPartition{"t", 2}] = &stubPartition{Partition: refusingPartition{err: fmt.Errorf("%w: t is mirrored", kerr.PolicyViolation)}}
	conn := startStubServer(t, backend)

	type answer struct {
		code           int16
		baseOffset     int64
		logStartOffset int64
		message        string // "null" for none
		records        string
	}
	answers := func(resp kmsg.Response) []answer {
		var got []answer
		for _, rt := range resp.(*kmsg.ProduceResponse).Topics {
			for _, sp := range rt.Partitions {
				message := "null"
				if sp.ErrorMessage != nil {
					message = *sp.ErrorMessage
				}
				records := ""
				for _, r := range sp.ErrorRecords {
					records += fmt.Sprintf("%d:%s;", r.RelativeOffset, *r.ErrorMessage)
				}
				got = append(got, answer{sp.ErrorCode, sp.BaseOffset, sp.LogStartOffset, message, records})
			}
		}
		return got
	}
	for _, tc := range []struct {
		name string
		req  *kmsg.ProduceRequest
		want []answer
	}{
		{"v12", produceRequest(12, -1, "t", 0, 1, 2), []answer{
			{0, 0, 0, "null", ""},
			{kerr.InvalidTimestamp.Code, -1, 7, "kafka's words", "2:Timestamp 5 of message with offset 2 is out of range.;"},
			{kerr.PolicyViolation.Code, -1, -1, kerr.PolicyViolation.Error() + ": t is mirrored", ""},
		}},
		{"v7 has no messages", produceRequest(7, 1, "t", 1, 2), []answer{
			{kerr.InvalidTimestamp.Code, -1, 7, "null", ""},
			{kerr.PolicyViolation.Code, -1, -1, "null", ""},
		}},
		{"unknown topic", produceRequest(12, -1, "nope", 0), []answer{{kerr.UnknownTopicOrPartition.Code, -1, -1, "null", ""}}},
		{"acks 2", produceRequest(12, 2, "t", 0), []answer{{kerr.InvalidRequiredAcks.Code, -1, -1, "null", ""}}},
		{"acks -2", produceRequest(12, -2, "t", 0), []answer{{kerr.InvalidRequiredAcks.Code, -1, -1, "null", ""}}},
	} {
		got := answers(conn.do(tc.req))
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Fatalf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
	if end := backend.memBackend.topics["t"].partitions[0].Offsets().LogEndOffset; end != 1 {
		t.Fatalf("log end %d of t-0, want 1: only the acks=-1 batch appended", end)
	}
}

// TestProduceAcksZero checks that an acks=0 Produce gets no answer, and
// that one of which a partition failed closes the connection, as Kafka's
// does, after appending the partitions that did not fail.
func TestProduceAcksZero(t *testing.T) {
	backend := newMemBackend()
	mustCreateTopic(t, backend, "t", 1)
	addr := startServer(t, backend)
	versions := kmsg.NewPtrApiVersionsRequest()

	conn := dialRaw(t, addr)
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("produce-test"))
	conn.send(formatter.AppendRequest(nil, produceRequest(12, 0, "t", 0), 1))
	conn.correlation = 1
	conn.do(versions) // answered: the produce got none, the connection lives
	if end := backend.topics["t"].partitions[0].Offsets().LogEndOffset; end != 1 {
		t.Fatalf("log end %d after an acks=0 produce, want 1", end)
	}

	for _, tc := range []struct {
		name string
		req  *kmsg.ProduceRequest
	}{
		{"unknown topic", produceRequest(12, 0, "nope", 0)},
		{"a good and an unknown partition", produceRequest(12, 0, "t", 0, 5)},
	} {
		conn := dialRaw(t, addr)
		// One write: the server may close before a second one.
		conn.send(formatter.AppendRequest(formatter.AppendRequest(nil, tc.req, 1), versions, 2))
		conn.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, _, err := conn.receive(); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("%s: %v after an acks=0 produce that failed, want the connection closed", tc.name, err)
		}
	}
	if end := backend.topics["t"].partitions[0].Offsets().LogEndOffset; end != 2 {
		t.Fatalf("log end %d, want 2: the good partition of the failed request appended", end)
	}
}
