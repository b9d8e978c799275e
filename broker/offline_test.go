package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offlineCorruptions are the corruptions of one partition that made the
// whole node refuse to start (issue 19); each now takes only that
// partition offline.
var offlineCorruptions = []struct {
	name    string
	corrupt func(t *testing.T, partitionDir string)
	cause   string // in the offline partition's error
}{
	{"bad batch length mid-segment of a sealed segment", func(t *testing.T, partitionDir string) {
		// The batch length of the third batch of the first (sealed)
		// segment: larger than anything the segment holds.
		overwriteBatchField(t, firstSegment(t, partitionDir), 2, 8, binary.BigEndian.AppendUint32(nil, 0x7fff0000))
	}, "corrupt"},
	{"bad magic", func(t *testing.T, partitionDir string) {
		overwriteBatchField(t, firstSegment(t, partitionDir), 2, 16, []byte{7})
	}, "corrupt"},
	{"junk partition.metadata", func(t *testing.T, partitionDir string) {
		if err := os.WriteFile(filepath.Join(partitionDir, "partition.metadata"), []byte("version: 0\ntopic_id: not-a-topic-id\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}, "partition.metadata"},
}

// firstSegment is the path of the lowest segment file of a partition.
func firstSegment(t *testing.T, partitionDir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(partitionDir, "*.log"))
	if err != nil || len(logs) < 2 {
		t.Fatalf("want at least two segments in %s (one sealed), got %v (%v)", partitionDir, logs, err)
	}
	sort.Strings(logs)
	return logs[0]
}

// overwriteBatchField writes value at offset within the index-th batch
// of a segment file (Kafka's v2 batch: baseOffset int64, batchLength
// int32, partitionLeaderEpoch int32, magic int8, ...).
func overwriteBatchField(t *testing.T, segment string, index, offset int, value []byte) {
	t.Helper()
	data, err := os.ReadFile(segment)
	if err != nil {
		t.Fatal(err)
	}
	position := 0
	for range index {
		if position+12 > len(data) {
			t.Fatalf("%s holds fewer than %d batches", segment, index+1)
		}
		position += 12 + int(binary.BigEndian.Uint32(data[position+8:]))
	}
	if position+offset+len(value) > len(data) {
		t.Fatalf("%s holds fewer than %d batches", segment, index+1)
	}
	copy(data[position+offset:], value)
	if err := os.WriteFile(segment, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOneCorruptPartitionIsNotTheNode: a node of several topics whose one
// partition's log cannot be opened starts; that partition is offline
// (KAFKA_STORAGE_ERROR in every API that names it, Metadata's
// LEADER_NOT_AVAILABLE with the node in offline_replicas, as Kafka
// answers for a replica in a failed log dir), the others serve.
func TestOneCorruptPartitionIsNotTheNode(t *testing.T) {
	for _, c := range offlineCorruptions {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			writeCorruptionFixture(t, dir)
			c.corrupt(t, filepath.Join(dir, "victim-1"))

			node, addr := startSmallSegmentNode(t, dir)
			offline := node.OfflinePartitions()
			if len(offline) != 1 || offline[0].Topic != "victim" || offline[0].Partition != 1 {
				t.Fatalf("offline partitions %v, want victim-1 alone", offline)
			}
			if !strings.Contains(offline[0].Err.Error(), c.cause) {
				t.Errorf("offline victim-1 error %q does not say %q", offline[0].Err, c.cause)
			}
			checkServes(t, addr, "orders", 0)
			checkServes(t, addr, "orders", 1)
			checkServes(t, addr, "victim", 0)
			checkStorageErrors(t, addr, "victim", 1)

			// The operator's way out for a writable topic: delete it.
			if err := node.DeleteTopic(context.Background(), "victim"); err != nil {
				t.Fatalf("delete the topic of an offline partition: %v", err)
			}
			if offline := node.OfflinePartitions(); len(offline) != 0 {
				t.Errorf("offline partitions after the topic's deletion: %v", offline)
			}
			if _, err := os.Stat(filepath.Join(dir, "victim-1")); !os.IsNotExist(err) {
				t.Errorf("victim-1 still on disk after the topic's deletion (%v)", err)
			}
		})
	}
}

const fixtureRecords = 40

// writeCorruptionFixture makes a data directory of topics orders (2
// partitions) and victim (3), each partition holding several segments.
func writeCorruptionFixture(t *testing.T, dir string) {
	t.Helper()
	node, addr, stop := serveSmallSegmentNode(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range []struct {
		name       string
		partitions int32
	}{{"orders", 2}, {"victim", 3}} {
		if _, err := node.CreateTopic(ctx, topic.name, topic.partitions, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for i := range fixtureRecords {
		for _, tp := range []struct {
			topic     string
			partition int32
		}{{"orders", 0}, {"orders", 1}, {"victim", 0}, {"victim", 1}, {"victim", 2}} {
			r := &kgo.Record{Topic: tp.topic, Partition: tp.partition, Value: []byte(strings.Repeat(fmt.Sprint(i), 100))}
			if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %s-%d: %v", tp.topic, tp.partition, err)
			}
		}
	}
	client.Close()
	stop()
}

func smallSegmentConfig() logstore.Config {
	cfg := logstore.DefaultConfig()
	cfg.SegmentBytes, cfg.IndexIntervalBytes = 4096, 256
	return cfg
}

func startSmallSegmentNode(t *testing.T, dir string) (*Node, string) {
	n, addr, _ := serveSmallSegmentNode(t, dir)
	return n, addr
}

// checkServes produces one record to a partition and reads the partition
// back from offset 0: the fixture's records and the new one.
func checkServes(t *testing.T, addr, topic string, partition int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(0)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: partition, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce to %s-%d beside the offline partition: %v", topic, partition, err)
	}
	got := 0
	for polls := 0; got < fixtureRecords+1 && polls < 100; polls++ {
		fetches := client.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%s-%d: read %d of %d records: %v", topic, partition, got, fixtureRecords+1, err)
		}
		fetches.EachError(func(topic string, partition int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, partition, err) })
		got += fetches.NumRecords()
	}
	if got != fixtureRecords+1 {
		t.Fatalf("%s-%d: read %d records, want %d", topic, partition, got, fixtureRecords+1)
	}
}

// checkStorageErrors sends every API that names one partition, raw, and
// checks each answers KAFKA_STORAGE_ERROR for the offline partition, and
// Metadata and DescribeTopicPartitions as Kafka's for a replica in an
// offline log dir: no leader, the node in offline_replicas.
func checkStorageErrors(t *testing.T, addr, topic string, partition int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	want := kerr.KafkaStorageError.Code
	check := func(api string, code int16) {
		t.Helper()
		if code != want {
			t.Errorf("%s of offline %s-%d answered %v, want KAFKA_STORAGE_ERROR", api, topic, partition, kerr.ErrorForCode(code))
		}
	}

	metadata := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	metadata.Topics = append(metadata.Topics, mt)
	described, err := metadata.RequestWith(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if len(described.Topics) != 1 || described.Topics[0].ErrorCode != 0 {
		t.Fatalf("Metadata of %s: %+v", topic, described.Topics)
	}
	node := described.Brokers[0].NodeID
	for _, mp := range described.Topics[0].Partitions {
		if mp.Partition != partition {
			if mp.ErrorCode != 0 || mp.Leader != node || len(mp.OfflineReplicas) != 0 {
				t.Errorf("Metadata of online %s-%d: error %d, leader %d, offline replicas %v", topic, mp.Partition, mp.ErrorCode, mp.Leader, mp.OfflineReplicas)
			}
			continue
		}
		if mp.ErrorCode != kerr.LeaderNotAvailable.Code || mp.Leader != -1 || fmt.Sprint(mp.OfflineReplicas) != fmt.Sprint([]int32{node}) ||
			fmt.Sprint(mp.Replicas) != fmt.Sprint([]int32{node}) {
			t.Errorf("Metadata of offline %s-%d: error %v, leader %d, replicas %v, offline replicas %v; want LEADER_NOT_AVAILABLE, -1, [%d], [%d]",
				topic, partition, kerr.ErrorForCode(mp.ErrorCode), mp.Leader, mp.Replicas, mp.OfflineReplicas, node, node)
		}
	}
	if len(described.Topics[0].Partitions) != 3 {
		t.Errorf("Metadata lists %d partitions of %s, want 3", len(described.Topics[0].Partitions), topic)
	}
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dt0 := kmsg.NewDescribeTopicPartitionsRequestTopic()
	dt0.Topic = topic
	dtp.Topics = append(dtp.Topics, dt0)
	dtpResp, err := dtp.RequestWith(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range dtpResp.Topics[0].Partitions {
		if offline := sp.Partition == partition; offline != (sp.LeaderID == -1) || offline != (len(sp.OfflineReplicas) == 1) || sp.ErrorCode != 0 {
			t.Errorf("DescribeTopicPartitions of %s-%d (offline %t): error %d, leader %d, offline replicas %v", topic, sp.Partition, offline,
				sp.ErrorCode, sp.LeaderID, sp.OfflineReplicas)
		}
	}

	// Straight to the node: the client's own routing finds no leader.
	broker := client.Broker(int(node))
	id := described.Topics[0].TopicID

	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = -1
	produce.TimeoutMillis = 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic, pt.TopicID = topic, id
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = partition, dataBatch(-1, -1, -1, 1, false)
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	produced, err := produce.RequestWith(ctx, broker)
	if err != nil {
		t.Fatal(err)
	}
	check("Produce", produced.Topics[0].Partitions[0].ErrorCode)

	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxWaitMillis, fetch.MaxBytes, fetch.SessionEpoch = 0, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = partition, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fetched, err := fetch.RequestWith(ctx, broker)
	if err != nil {
		t.Fatal(err)
	}
	check("Fetch", fetched.Topics[0].Partitions[0].ErrorCode)

	list := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = partition, -1, -1
	lt.Partitions = append(lt.Partitions, lp)
	list.Topics = append(list.Topics, lt)
	listed, err := list.RequestWith(ctx, broker)
	if err != nil {
		t.Fatal(err)
	}
	check("ListOffsets", listed.Topics[0].Partitions[0].ErrorCode)

	epochs := kmsg.NewPtrOffsetForLeaderEpochRequest()
	epochs.ReplicaID = -1
	et := kmsg.NewOffsetForLeaderEpochRequestTopic()
	et.Topic = topic
	ep := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	ep.Partition, ep.CurrentLeaderEpoch, ep.LeaderEpoch = partition, -1, 0
	et.Partitions = append(et.Partitions, ep)
	epochs.Topics = append(epochs.Topics, et)
	epoched, err := epochs.RequestWith(ctx, broker)
	if err != nil {
		t.Fatal(err)
	}
	check("OffsetForLeaderEpoch", epoched.Topics[0].Partitions[0].ErrorCode)

	deletes := kmsg.NewPtrDeleteRecordsRequest()
	deletes.TimeoutMillis = 5000
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = topic
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Partition, dp.Offset = partition, 1
	dt.Partitions = append(dt.Partitions, dp)
	deletes.Topics = append(deletes.Topics, dt)
	deleted, err := deletes.RequestWith(ctx, broker)
	if err != nil {
		t.Fatal(err)
	}
	check("DeleteRecords", deleted.Topics[0].Partitions[0].ErrorCode)

}

func serveSmallSegmentNode(t *testing.T, dir string) (*Node, string, func()) {
	t.Helper()
	return serveNodeWith(t, dir, smallSegmentConfig())
}
