package netio

import (
	"bytes"
	"fmt"
	"sort"
	"testing"

	"github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestFetchLeaderEpochFencing(t *testing.T) {
	mem := newMemBackend()
	addr, _ := startFetchServer(t, mem, nil, nil)
	info := fetchTestTopic(t, mem, "fenced", 1, []string{"x"})
	setLeaderEpoch(t, mem, "fenced", 0, 5)
	client := dialFetchTest(t, addr)
	for _, version := range []int16{9, 12, 15, 16, 18} {
		for _, test := range []struct {
			epoch int32
			code  int16
		}{{-1, 0}, {5, 0}, {4, kerr.FencedLeaderEpoch.Code}, {6, kerr.UnknownLeaderEpoch.Code}} {
			part := at(0, 0)
			part.currentLeaderEpoch = test.epoch
			resp := client.fetch(fetchTestRequest(version, info, part))
			rp := fetchTestOnly(t, resp)
			if rp.ErrorCode != test.code {
				t.Fatalf("v%d epoch %d: error %d, want %d", version, test.epoch, rp.ErrorCode, test.code)
			}
			if test.code != 0 {
				if rp.HighWatermark != -1 || len(rp.RecordBatches) != 0 {
					t.Fatalf("v%d epoch %d: fenced partition answers HW %d and %d record bytes", version, test.epoch, rp.HighWatermark, len(rp.RecordBatches))
				}
			} else if len(fetchTestBatches(t, rp.RecordBatches)) != 1 {
				t.Fatalf("v%d epoch %d: no records", version, test.epoch)
			}
			namesLeader := version >= 16 && test.code == kerr.FencedLeaderEpoch.Code
			if got := rp.CurrentLeader.LeaderID == 1 && rp.CurrentLeader.LeaderEpoch == 5 && len(resp.Brokers) == 1 && resp.Brokers[0].Port == mem.cluster.Port; got != namesLeader {
				t.Fatalf("v%d epoch %d: current leader %+v, brokers %+v; want named: %v", version, test.epoch, rp.CurrentLeader, resp.Brokers, namesLeader)
			}
		}
	}
}

// epochPartition answers EndOffsetForEpoch from a scripted epoch history.
type epochPartition struct {
	Partition
	leaderEpoch recordbatch.Epoch
	starts      []fetchEpochEndOffset // epoch and its start offset, ascending
}

func (p epochPartition) LeaderEpoch() recordbatch.Epoch { return p.leaderEpoch }

func (p epochPartition) EndOffsetForEpoch(epoch recordbatch.Epoch) (recordbatch.Epoch, recordbatch.Offset) {
	i := sort.Search(len(p.starts), func(i int) bool { return p.starts[i].epoch > epoch })
	if i == 0 || epoch > p.leaderEpoch {
		return -1, -1
	}
	if i == len(p.starts) {
		return p.starts[i-1].epoch, p.Offsets().LogEndOffset
	}
	return p.starts[i-1].epoch, p.starts[i].endOffset
}

func TestFetchDivergingEpoch(t *testing.T) {
	mem := newMemBackend()
	backend := &wrapBackend{mem, func(_ string, _ int32, p Partition) Partition {
		// epoch 1 holds offsets [0, 4), epoch 3 holds [4, 10).
		return epochPartition{Partition: p, leaderEpoch: 3, starts: []fetchEpochEndOffset{{1, 0}, {3, 4}}}
	}}
	addr, _ := startFetchServer(t, mem, backend, nil)
	info := fetchTestTopic(t, mem, "diverge", 1, []string{"0", "1", "2", "3"}, []string{"4", "5", "6", "7", "8", "9"})
	client := dialFetchTest(t, addr)
	tests := []struct {
		lastFetchedEpoch int32
		offset           int64
		code             int16
		diverging        fetchEpochEndOffset // -1, -1: none, records expected
	}{
		{3, 6, 0, fetchEpochEndOffset{-1, -1}},
		{1, 3, 0, fetchEpochEndOffset{-1, -1}},
		{1, 4, 0, fetchEpochEndOffset{-1, -1}},
		{1, 6, 0, fetchEpochEndOffset{1, 4}}, // epoch 1 ended at 4, before the fetch offset
		{2, 6, 0, fetchEpochEndOffset{1, 4}}, // epoch 2 unknown here: epoch 1 is the answer
		{2, 4, 0, fetchEpochEndOffset{1, 4}}, // same end offset but another epoch
		{7, 6, kerr.OffsetOutOfRange.Code, fetchEpochEndOffset{-1, -1}},
		{0, 2, kerr.OffsetOutOfRange.Code, fetchEpochEndOffset{-1, -1}},
	}
	for _, version := range []int16{12, 13, 18} {
		for _, test := range tests {
			part := at(0, test.offset)
			part.lastFetchedEpoch = test.lastFetchedEpoch
			rp := fetchTestOnly(t, client.fetch(fetchTestRequest(version, info, part)))
			got := fetchEpochEndOffset{recordbatch.Epoch(rp.DivergingEpoch.Epoch), recordbatch.Offset(rp.DivergingEpoch.EndOffset)}
			if rp.ErrorCode != test.code || got != test.diverging {
				t.Fatalf("v%d last fetched epoch %d at %d: error %d, diverging %+v; want %d, %+v",
					version, test.lastFetchedEpoch, test.offset, rp.ErrorCode, got, test.code, test.diverging)
			}
			batches := fetchTestBatches(t, rp.RecordBatches)
			switch {
			case test.code != 0:
			case test.diverging.set() && (len(batches) != 0 || rp.HighWatermark != 10):
				t.Fatalf("v%d: diverging answer carries %d batches, HW %d; want none, 10", version, len(batches), rp.HighWatermark)
			case !test.diverging.set() && len(batches) == 0:
				t.Fatalf("v%d last fetched epoch %d at %d: no records", version, test.lastFetchedEpoch, test.offset)
			}
		}
	}
	// Before v12 there is no LastFetchedEpoch: the same request reads records.
	part := at(0, 6)
	part.lastFetchedEpoch = 2
	if rp := fetchTestOnly(t, client.fetch(fetchTestRequest(11, info, part))); rp.ErrorCode != 0 || len(rp.RecordBatches) == 0 {
		t.Fatalf("v11: error %d, %d record bytes", rp.ErrorCode, len(rp.RecordBatches))
	}
}

func TestFetchUnknownTopicsAndOffsets(t *testing.T) {
	mem := newMemBackend()
	addr, _ := startFetchServer(t, mem, nil, nil)
	info := fetchTestTopic(t, mem, "known", 2, []string{"a", "b"})
	client := dialFetchTest(t, addr)
	unknownID := TopicInfo{Name: "nope", ID: TopicID{0xde, 0xad}}
	for version := int16(4); version <= 18; version++ {
		tests := []struct {
			name  string
			topic TopicInfo
			part  fetchTestPart
			code  int16
		}{
			{"unknown topic", unknownID, at(0, 0), kerr.UnknownTopicOrPartition.Code},
			{"unknown partition", info, at(7, 0), kerr.UnknownTopicOrPartition.Code},
			{"offset past the end", info, at(0, 3), kerr.OffsetOutOfRange.Code},
			{"negative offset", info, at(0, -1), kerr.OffsetOutOfRange.Code},
			{"at the end", info, at(1, 2), 0},
		}
		if version >= 13 {
			tests[0].code = kerr.UnknownTopicID.Code
		}
		for _, test := range tests {
			resp := client.fetch(fetchTestRequest(version, test.topic, test.part))
			rp := fetchTestOnly(t, resp)
			if rp.ErrorCode != test.code {
				t.Fatalf("v%d %s: error %d, want %d", version, test.name, rp.ErrorCode, test.code)
			}
			if version >= 13 && resp.Topics[0].TopicID != test.topic.ID || version < 13 && resp.Topics[0].Topic != test.topic.Name {
				t.Fatalf("v%d %s: answered for topic %q %x", version, test.name, resp.Topics[0].Topic, resp.Topics[0].TopicID)
			}
			wantHW := int64(-1)
			if test.code == 0 {
				wantHW = 2
			}
			if rp.HighWatermark != wantHW || len(rp.RecordBatches) != 0 {
				t.Fatalf("v%d %s: HW %d and %d record bytes, want HW %d and none", version, test.name, rp.HighWatermark, len(rp.RecordBatches), wantHW)
			}
		}
	}
}

// Request MaxBytes bounds the response, partition max bytes each
// partition, and only the first partition with data may exceed them by
// one batch (KIP-74).
func TestFetchMaxBytes(t *testing.T) {
	mem := newMemBackend()
	addr, _ := startFetchServer(t, mem, nil, nil)
	big := string(bytes.Repeat([]byte("v"), 1000))
	info := fetchTestTopic(t, mem, "sized", 3, []string{big}, []string{big})
	p, _ := mem.Partition("sized", 0)
	read, _ := p.Read(0, 1, ReadUncommitted, true)
	batchBytes := int(read.Records.Length)
	client := dialFetchTest(t, addr)
	parts := func(maxBytes int32) []fetchTestPart {
		out := []fetchTestPart{at(0, 0), at(1, 0), at(2, 0)}
		for i := range out {
			out[i].maxBytes = maxBytes
		}
		return out
	}
	tests := []struct {
		name              string
		maxBytes          int
		partitionMaxBytes int
		want              []int // record bytes per partition
	}{
		{"response bound below a batch", 500, 1 << 20, []int{batchBytes, 0, 0}},
		{"partition bound below a batch", 1 << 20, 100, []int{batchBytes, 100, 100}},
		{"response bound after the first", batchBytes + 50, 1 << 20, []int{batchBytes + 50, 0, 0}},
		{"both", 2*batchBytes + 10, batchBytes + 5, []int{batchBytes + 5, batchBytes + 5, 0}},
		{"zero", 0, 0, []int{batchBytes, 0, 0}},
	}
	for _, test := range tests {
		req := fetchTestRequest(18, info, parts(int32(test.partitionMaxBytes))...)
		req.MaxBytes = int32(test.maxBytes)
		resp := client.fetch(req)
		var got []int
		for _, rp := range resp.Topics[0].Partitions {
			if rp.ErrorCode != 0 || rp.HighWatermark != 2 {
				t.Fatalf("%s: partition %d error %d, HW %d", test.name, rp.Partition, rp.ErrorCode, rp.HighWatermark)
			}
			got = append(got, len(rp.RecordBatches))
		}
		if fmt.Sprint(got) != fmt.Sprint(test.want) {
			t.Fatalf("%s: record bytes %v, want %v (a batch is %d bytes)", test.name, got, test.want, batchBytes)
		}
	}
}

// abortedPartition answers an aborted transaction to read_committed reads.
type abortedPartition struct{ Partition }

func (p abortedPartition) Read(offset recordbatch.Offset, maxBytes int32, isolation Isolation, minOneBatch bool) (ReadResult, error) {
	read, err := p.Partition.Read(offset, maxBytes, isolation, minOneBatch)
	if isolation == ReadCommitted {
		read.AbortedTransactions = []AbortedTransaction{{ProducerID: 42, FirstOffset: 1}}
	}
	return read, err
}

func TestFetchIsolation(t *testing.T) {
	mem := newMemBackend()
	backend := &wrapBackend{mem, func(_ string, _ int32, p Partition) Partition { return abortedPartition{p} }}
	addr, _ := startFetchServer(t, mem, backend, nil)
	info := fetchTestTopic(t, mem, "txn", 1, []string{"a", "b"})
	client := dialFetchTest(t, addr)
	for _, version := range []int16{4, 11, 12, 18} {
		for _, isolation := range []int8{0, 1} {
			req := fetchTestRequest(version, info, at(0, 0))
			req.IsolationLevel = isolation
			rp := fetchTestOnly(t, client.fetch(req))
			want := []kmsg.FetchResponseTopicPartitionAbortedTransaction(nil)
			if isolation == 1 {
				want = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 42, FirstOffset: 1}}
			}
			if fmt.Sprint(rp.AbortedTransactions) != fmt.Sprint(want) || (rp.AbortedTransactions == nil) != (want == nil) {
				t.Fatalf("v%d isolation %d: aborted %v, want %v", version, isolation, rp.AbortedTransactions, want)
			}
		}
	}
	// An isolation level Kafka cannot parse closes the connection.
	req := fetchTestRequest(18, info, at(0, 0))
	req.IsolationLevel = 2
	if _, err := client.roundTrip(req); err == nil {
		t.Fatal("isolation level 2 answered; want the connection closed")
	}
}
