package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// mirrorConfig is a mirror config tuned for tests: fast metadata
// refreshes and short long polls.
func mirrorConfig(bootstrap string) map[string]string {
	return map[string]string{
		"bootstrap.servers":                      bootstrap,
		"mirror.metadata.refresh.interval.ms":    "200",
		"fetch.wait.max.ms":                      "100",
		"mirror.failed.retry.initial.backoff.ms": "20",
		"mirror.failed.retry.max.backoff.ms":     "500",
	}
}

// produceMixed writes records to every partition of topic through kgo:
// each codec, idempotent, and transactions that commit and abort.
func produceMixed(t *testing.T, addr, topic string, partitions int32, rounds int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	for i, codec := range codecs {
		client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		for r := range rounds {
			for p := range partitions {
				value := fmt.Appendf(nil, "codec %d round %d partition %d %s", i, r, p, bytes.Repeat([]byte("x"), 200))
				if err := client.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Key: []byte{byte(r)}, Value: value}).FirstErr(); err != nil {
					t.Fatalf("produce: %v", err)
				}
			}
		}
		client.Close()
	}
	txn, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("mirror-test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	for _, commit := range []bool{true, false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range partitions {
			if err := txn.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "txn commit=%v", commit)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
}

// rawPartition fetches every batch of a partition from its log start to
// its high watermark, exactly as the server sends them, with the topic ID
// and the log start and high watermark.
func rawPartition(t *testing.T, client *kgo.Client, topic string, partition int32) ([]byte, [16]byte, [2]int64) {
	t.Helper()
	raw, id, offsets, err := fetchRaw(client, topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	return raw, id, offsets
}

// fetchRaw is rawPartition returning its failure (an unknown topic, a
// partition without a leader yet) instead of failing the test.
func fetchRaw(client *kgo.Client, topic string, partition int32) ([]byte, [16]byte, [2]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = &topic
	meta.Topics = append(meta.Topics, mt)
	kresp, err := client.Request(ctx, meta)
	if err != nil {
		return nil, [16]byte{}, [2]int64{}, err
	}
	mresp := kresp.(*kmsg.MetadataResponse)
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 {
		return nil, [16]byte{}, [2]int64{}, fmt.Errorf("metadata of %s: no such topic", topic)
	}
	id := mresp.Topics[0].TopicID
	leader := int32(-1)
	for _, p := range mresp.Topics[0].Partitions {
		if p.Partition == partition {
			leader = p.Leader
		}
	}
	if leader < 0 {
		return nil, id, [2]int64{}, fmt.Errorf("%s-%d has no leader", topic, partition)
	}
	offset, err := earliestOffset(ctx, client, leader, topic, partition)
	if err != nil {
		return nil, id, [2]int64{}, err
	}
	var out []byte
	start := offset
	for round := 0; round < 10000; round++ {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 13
		req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 0, 8<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID, rt.Topic = id, topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = partition, offset, -1, -1, -1, 8<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := client.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			return nil, id, [2]int64{}, err
		}
		resp := kresp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if resp.ErrorCode != 0 {
			return nil, id, [2]int64{}, fmt.Errorf("fetch %s-%d at %d: error %d", topic, partition, offset, resp.ErrorCode)
		}
		whole := wholeBatches(resp.RecordBatches)
		if len(whole) == 0 {
			return out, id, [2]int64{start, resp.HighWatermark}, nil
		}
		out = append(out, whole...)
		it := rb.NewIter(whole, false)
		for it.Next() {
			offset = int64(it.Batch().NextOffset())
		}
	}
	return nil, id, [2]int64{}, fmt.Errorf("fetch %s-%d did not end", topic, partition)
}

// listOffset asks a partition's leader for an offset by timestamp (-2
// earliest, -1 latest).
func listOffset(t *testing.T, client *kgo.Client, leader int32, topic string, partition int32, timestamp int64) int64 {
	t.Helper()
	offset, err := offsetAt(context.Background(), client, leader, topic, partition, timestamp)
	if err != nil {
		t.Fatal(err)
	}
	return offset
}

func earliestOffset(ctx context.Context, client *kgo.Client, leader int32, topic string, partition int32) (int64, error) {
	return offsetAt(ctx, client, leader, topic, partition, -2)
}

func offsetAt(ctx context.Context, client *kgo.Client, leader int32, topic string, partition int32, timestamp int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, timestamp, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := client.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return -1, err
	}
	answer := kresp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if answer.ErrorCode != 0 {
		return -1, fmt.Errorf("list offsets %s-%d: error %d", topic, partition, answer.ErrorCode)
	}
	return answer.Offset, nil
}

// waitMirrored polls until the mirror holds exactly the source's bytes in
// every partition of topic, or fails at the deadline.
func waitMirrored(t *testing.T, source, target *kgo.Client, topic string, partitions int32) {
	t.Helper()
	all := make([]int32, partitions)
	for p := range all {
		all[p] = int32(p)
	}
	waitMirroredPartitions(t, source, target, topic, all...)
}

// waitMirroredPartitions is waitMirrored for some partitions of topic.
func waitMirroredPartitions(t *testing.T, source, target *kgo.Client, topic string, partitions ...int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		var differ string
		for _, p := range partitions {
			want, wantID, wantHW := rawPartition(t, source, topic, p)
			got, gotID, gotHW, err := fetchRaw(target, topic, p)
			switch {
			case err != nil:
				differ = fmt.Sprintf("partition %d: %v", p, err)
			case wantID != gotID:
				differ = fmt.Sprintf("partition %d: topic ID %x, source %x", p, gotID, wantID)
			case gotHW != wantHW || !bytes.Equal(got, want):
				differ = fmt.Sprintf("partition %d: %d bytes in offsets %v, source %d bytes in %v", p, len(got), gotHW, len(want), wantHW)
			}
			if differ != "" {
				break
			}
		}
		if differ == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mirror did not converge: %s", differ)
		}
		<-poll.C
	}
}

func startMirroring(t *testing.T, node *Node, source string, topics ...string) {
	t.Helper()
	startMirroringWith(t, node, mirrorConfig(source), topics...)
}

// startMirroringWith is startMirroring with the mirror's config.
func startMirroringWith(t *testing.T, node *Node, config map[string]string, topics ...string) {
	t.Helper()
	ctx := context.Background()
	if err := node.Mirrors().CreateMirror(ctx, "m", config); err != nil {
		t.Fatal(err)
	}
	results, err := node.Mirrors().SetTopicsDesiredState(ctx, "m", netio.StartMirroring, netio.TopicSelection{Names: topics})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("start %s: %v", r.Topic, r.Err)
		}
	}
}

func TestMirrorFromMirrord(t *testing.T) {
	sourceNode, sourceAddr := startNode(t, filepath.Join(t.TempDir(), "source"))
	target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
	source := newClient(t, sourceAddr)
	createTopic(t, sourceNode, "orders", 3)
	produceMixed(t, sourceAddr, "orders", 3, 4)
	startMirroring(t, target, sourceAddr, "orders")
	targetClient := newClient(t, targetAddr)
	waitMirrored(t, source, targetClient, "orders", 3)

	// More data at the source is followed; the mirror topic refuses writes.
	produceMixed(t, sourceAddr, "orders", 3, 1)
	waitMirrored(t, source, targetClient, "orders", 3)
	if code := rawProduceError(t, targetClient, "orders"); code != ErrReadOnlyTopic.Code {
		t.Fatalf("produce to a mirror topic: error code %d, want %s (%d)", code, ErrReadOnlyTopic.Message, ErrReadOnlyTopic.Code)
	}
	checkMirrorTopicGuarded(t, target, "orders", true)

	// After a stop (failover) the topic is the operator's again.
	results, err := target.Mirrors().SetTopicsDesiredState(context.Background(), "m", netio.StopMirroring, netio.TopicSelection{Names: []string{"orders"}})
	if err != nil || len(results) != 1 || results[0].Err != nil {
		t.Fatalf("stop: %v %+v", err, results)
	}
	checkMirrorTopicGuarded(t, target, "orders", false)
}

// checkMirrorTopicGuarded: while a topic is mirrored, every call that
// would change it (its partitions, its log start, the topic itself) is
// refused with ErrReadOnlyTopic and a message naming the mirror, and the
// topic is left as it was; once stopped, the same calls succeed.
func checkMirrorTopicGuarded(t *testing.T, node *Node, topic string, guarded bool) {
	t.Helper()
	ctx := context.Background()
	before, _ := node.Topic(topic)
	p, err := node.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"CreatePartitions", func() error { return node.CreatePartitions(ctx, topic, before.Partitions+1, false) }},
		{"DeleteRecords", func() error { _, err := p.DeleteRecords(ctx, 1); return err }},
		{"DeleteTopics", func() error { return node.DeleteTopic(ctx, topic) }},
	}
	for _, c := range calls {
		err := c.call()
		if !guarded {
			if err != nil {
				t.Errorf("%s on stopped mirror topic %s: %v", c.name, topic, err)
			}
			continue
		}
		var answer *netio.Error
		if !errors.Is(err, ErrReadOnlyTopic) || !errors.As(err, &answer) || !strings.Contains(answer.Message, "mirror m") || !strings.Contains(answer.Message, c.name) {
			t.Errorf("%s on mirror topic %s: %v, want %s naming mirror m and the call", c.name, topic, err, ErrReadOnlyTopic.Message)
		}
	}
	if !guarded {
		return
	}
	after, ok := node.Topic(topic)
	if !ok || after.ID != before.ID || after.Partitions != before.Partitions || p.Offsets().LogStartOffset != 0 {
		t.Errorf("mirror topic %s changed by refused calls: %+v -> %+v (exists %v), log start %d", topic, before, after, ok, p.Offsets().LogStartOffset)
	}
}

// rawProduceError sends one record to partition 0 of topic and returns
// the partition's error code (clients map codes they do not know to
// UNKNOWN_SERVER_ERROR, so the code is read from the response).
func rawProduceError(t *testing.T, client *kgo.Client, topic string) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	_, id, _ := rawPartition(t, client, topic, 0)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = rb.Append(nil, rb.Spec{ProducerID: -1, Records: []rb.Record{{Value: []byte("no")}}})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := client.Request(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return kresp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

func TestMirrorFromKfake(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	sourceAddr := cluster.ListenAddrs()[0]
	target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
	produceMixed(t, sourceAddr, "events", 3, 3)
	startMirroring(t, target, sourceAddr, "events")
	source, targetClient := newClient(t, sourceAddr), newClient(t, targetAddr)
	waitMirrored(t, source, targetClient, "events", 3)

	// A leader moved mid-stream: the mirror follows it.
	leader := cluster.LeaderFor("events", 0)
	if err := cluster.MoveTopicPartition("events", 0, (leader+1)%3); err != nil {
		t.Fatal(err)
	}
	produceMixed(t, sourceAddr, "events", 3, 1)
	waitMirrored(t, source, targetClient, "events", 3)
}

// The mirror follows the source: DeleteRecords moves the log start, a
// topic created later that matches an include pattern is mirrored, and a
// partition added at the source is added here.
func TestMirrorFollowsSourceChanges(t *testing.T) {
	sourceNode, sourceAddr := startNode(t, filepath.Join(t.TempDir(), "source"))
	target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
	createTopic(t, sourceNode, "logs-a", 2)
	produceMixed(t, sourceAddr, "logs-a", 2, 2)
	ctx := context.Background()
	if err := target.Mirrors().CreateMirror(ctx, "m", mirrorConfig(sourceAddr)); err != nil {
		t.Fatal(err)
	}
	if _, err := target.Mirrors().SetTopicsDesiredState(ctx, "m", netio.StartMirroring, netio.TopicSelection{Include: []string{"logs-.*"}}); err != nil {
		t.Fatal(err)
	}
	source, targetClient := newClient(t, sourceAddr), newClient(t, targetAddr)
	waitMirrored(t, source, targetClient, "logs-a", 2)

	p, err := sourceNode.Partition("logs-a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DeleteRecords(ctx, 7); err != nil {
		t.Fatal(err)
	}
	createTopic(t, sourceNode, "logs-b", 1)
	if err := sourceNode.CreatePartitions(ctx, "logs-a", 3, false); err != nil {
		t.Fatal(err)
	}
	produceMixed(t, sourceAddr, "logs-a", 3, 1)
	produceMixed(t, sourceAddr, "logs-b", 1, 1)
	waitMirrored(t, source, targetClient, "logs-a", 3)
	waitMirrored(t, source, targetClient, "logs-b", 1)
	if _, _, offsets := rawPartition(t, targetClient, "logs-a", 0); offsets[0] != 7 {
		t.Fatalf("mirror log start %d, source 7", offsets[0])
	}
}

// A source topic deleted under a mirror fails its partitions, waiting
// for recover, with a message that says why.
func TestMirrorSourceTopicDeleted(t *testing.T) {
	sourceNode, sourceAddr := startNode(t, filepath.Join(t.TempDir(), "source"))
	target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
	createTopic(t, sourceNode, "gone", 2)
	produceMixed(t, sourceAddr, "gone", 2, 1)
	startMirroring(t, target, sourceAddr, "gone")
	waitMirrored(t, newClient(t, sourceAddr), newClient(t, targetAddr), "gone", 2)
	if err := sourceNode.DeleteTopic(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		descriptions, err := target.Mirrors().DescribeMirrors(context.Background(), []string{"m"}, true)
		if err != nil {
			t.Fatal(err)
		}
		failed := descriptions[0].Partitions
		if len(failed) == 2 {
			for _, p := range failed {
				if p.RetryCount != -1 || !bytes.Contains([]byte(p.Error), []byte("was deleted")) {
					t.Fatalf("partition %d: retry count %d, error %q; want waiting for recover, \"was deleted\"", p.Partition, p.RetryCount, p.Error)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("partitions not failed after the source topic was deleted: %+v", failed)
		}
		<-poll.C
	}
}

// A source too old for topic IDs (here kfake speaking Kafka 2.6) is
// refused at creation with the reason.
func TestMirrorRefusesSourceWithoutTopicIDs(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "old"), kfake.MaxVersions(kversion.V2_6_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	target, _ := startNode(t, filepath.Join(t.TempDir(), "target"))
	err = target.Mirrors().CreateMirror(context.Background(), "m", mirrorConfig(cluster.ListenAddrs()[0]))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("without topic IDs")) {
		t.Fatalf("create a mirror of a Kafka 2.6 source: %v, want a refusal naming topic IDs", err)
	}
}
