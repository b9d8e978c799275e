package engine

// Issue 19, disk full: every API that writes answers Kafka's code for a
// storage failure in that API when the disk refuses the write (ENOSPC from
// a fault-injecting vfs.Mem), none UNKNOWN_SERVER_ERROR, and the node
// keeps serving what it acknowledged.

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/mirrorwire"
	"github.com/mirrord/mirrord/netio"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// diskFullCase is one write on a full disk: setup runs with room, request
// is sent once the disk is full, code reads the answer's error code.
type diskFullCase struct {
	name    string
	setup   func(t *testing.T, b *kgo.Broker, e *diskFullEnv)
	request func(e *diskFullEnv) kmsg.Request
	code    func(kmsg.Response) int16
	want    *kerr.Error
	mirror  bool // a mirror admin RPC: sent by a client that knows the private keys
}

func TestDiskFullAnswersKafkaCodes(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	produce := func(e *diskFullEnv) kmsg.Request {
		return produceRequest("t", e.topicID, 0, "on a full disk")
	}
	initTxn := func(t *testing.T, b *kgo.Broker, e *diskFullEnv) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = str("tx"), 60000
		resp := mustRequest[*kmsg.InitProducerIDResponse](t, b, req)
		if resp.ErrorCode != 0 {
			t.Fatalf("init producer ID: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		e.producerID = resp.ProducerID
	}
	addPartition := func(t *testing.T, b *kgo.Broker, e *diskFullEnv) {
		initTxn(t, b, e)
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = "tx", e.producerID, 0
		req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		resp := mustRequest[*kmsg.AddPartitionsToTxnResponse](t, b, req)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("add partitions to txn: %v", kerr.ErrorForCode(code))
		}
	}
	addOffsets := func(t *testing.T, b *kgo.Broker, e *diskFullEnv) {
		initTxn(t, b, e)
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = "tx", e.producerID, 0, "g"
		if resp := mustRequest[*kmsg.AddOffsetsToTxnResponse](t, b, req); resp.ErrorCode != 0 {
			t.Fatalf("add offsets to txn: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	cases := []diskFullCase{
		{name: "Produce", request: produce,
			code: func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode },
			want: kerr.KafkaStorageError},
		{name: "InitProducerId transactional", request: func(e *diskFullEnv) kmsg.Request {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID, req.TransactionTimeoutMillis = str("tx"), 60000
			return req
		}, code: func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }, want: kerr.NotCoordinator},
		{name: "InitProducerId idempotent", request: func(e *diskFullEnv) kmsg.Request { return kmsg.NewPtrInitProducerIDRequest() },
			code: func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }, want: kerr.CoordinatorLoadInProgress},
		{name: "CreateTopics", request: func(e *diskFullEnv) kmsg.Request {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "new", NumPartitions: 1, ReplicationFactor: 1}}
			return req
		}, code: func(r kmsg.Response) int16 { return r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode }, want: kerr.KafkaStorageError},
		{name: "CreatePartitions", request: func(e *diskFullEnv) kmsg.Request {
			req := kmsg.NewPtrCreatePartitionsRequest()
			req.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "t", Count: 3}}
			return req
		}, code: func(r kmsg.Response) int16 { return r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode }, want: kerr.KafkaStorageError},
		{name: "AddPartitionsToTxn", setup: initTxn, request: func(e *diskFullEnv) kmsg.Request {
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch = "tx", e.producerID, 0
			req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0}}}
			return req
		}, code: func(r kmsg.Response) int16 {
			return r.(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode
		}, want: kerr.NotCoordinator},
		{name: "AddOffsetsToTxn", setup: initTxn, request: func(e *diskFullEnv) kmsg.Request {
			req := kmsg.NewPtrAddOffsetsToTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = "tx", e.producerID, 0, "g"
			return req
		}, code: func(r kmsg.Response) int16 { return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode }, want: kerr.NotCoordinator},
		{name: "EndTxn", setup: addPartition, request: func(e *diskFullEnv) kmsg.Request {
			req := kmsg.NewPtrEndTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "tx", e.producerID, 0, true
			return req
		}, code: func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode }, want: kerr.NotCoordinator},
		{name: "OffsetCommit", request: func(e *diskFullEnv) kmsg.Request {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Group, req.Generation = "g", -1
			req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
			return req
		}, code: func(r kmsg.Response) int16 { return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode }, want: kerr.NotCoordinator},
		{name: "TxnOffsetCommit", setup: addOffsets, request: func(e *diskFullEnv) kmsg.Request {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, req.Generation = "tx", e.producerID, 0, "g", -1
			req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
			return req
		}, code: func(r kmsg.Response) int16 {
			return r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		}, want: kerr.NotCoordinator},
		{name: "IncrementalAlterConfigs", request: func(e *diskFullEnv) kmsg.Request {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t",
				Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: str("60000")}}}}
			return req
		}, code: func(r kmsg.Response) int16 { return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode }, want: kerr.KafkaStorageError},
		{name: "AlterConfigs", request: func(e *diskFullEnv) kmsg.Request {
			req := kmsg.NewPtrAlterConfigsRequest()
			req.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t",
				Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: str("60000")}}}}
			return req
		}, code: func(r kmsg.Response) int16 { return r.(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode }, want: kerr.KafkaStorageError},
		{name: "AlterUserScramCredentials", request: func(e *diskFullEnv) kmsg.Request {
			req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: "alice", Mechanism: 1, Iterations: 4096,
				Salt: []byte("salt"), SaltedPassword: make([]byte, 32)}}
			return req
		}, code: func(r kmsg.Response) int16 { return r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode }, want: kerr.KafkaStorageError},
		{name: "CreateClusterMirror", setup: func(t *testing.T, _ *kgo.Broker, e *diskFullEnv) {
			_, e.source = startNode(t, t.TempDir())
		}, request: func(e *diskFullEnv) kmsg.Request {
			return &mirrorwire.CreateClusterMirrorRequest{MirrorName: "m",
				Configs: []mirrorwire.CreateClusterMirrorConfig{{Name: "bootstrap.servers", Value: str(e.source)}}}
		}, code: func(r kmsg.Response) int16 { return r.(*mirrorwire.CreateClusterMirrorResponse).ErrorCode }, want: kerr.KafkaStorageError, mirror: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			checkDiskFullCase(t, c)
		})
	}
}

// checkDiskFullCase runs one case on a node of its own.
func checkDiskFullCase(t *testing.T, c diskFullCase) {
	mem := vfs.NewMem()
	node, addr := startNodeConfig(t, NodeConfig{FS: mem, DataDir: "/data", Log: logstore.DefaultConfig()})
	createTopic(t, node, "t", 1)
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.AddPartitionsToTxn), 3) // v4+ is the brokers' form
	b := newClient(t, addr, kgo.MaxVersions(versions)).Broker(int(node.Cluster().NodeID))
	t.Cleanup(func() { mem.SetFault(nil) }) // before the node closes
	info, _ := node.Topic("t")
	e := &diskFullEnv{topicID: info.ID}
	acked := mustRequest[*kmsg.ProduceResponse](t, b, produceRequest("t", e.topicID, 0, "acknowledged"))
	if code := acked.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce with room: %v", kerr.ErrorForCode(code))
	}
	if c.setup != nil {
		c.setup(t, b, e)
	}
	mem.SetFault(vfs.FailAfter(vfs.OpWrite, 0, syscall.ENOSPC))
	var to requester = b
	if c.mirror {
		to = newClient(t, addr, kgo.MaxVersions(netio.MirrorClientVersions()))
	}
	resp := mustRequest[kmsg.Response](t, to, c.request(e))
	if got := c.code(resp); got != c.want.Code {
		t.Errorf("on a full disk: %v, want %s", kerr.ErrorForCode(got), c.want.Message)
	}
	// The node keeps serving what it acknowledged, disk still full.
	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxWaitMillis, fetch.MaxBytes = 0, 1<<20
	fetch.Topics = []kmsg.FetchRequestTopic{{Topic: "t", TopicID: e.topicID, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}}}
	fr := mustRequest[*kmsg.FetchResponse](t, b, fetch)
	p := fr.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 1 || len(p.RecordBatches) == 0 {
		t.Errorf("fetch on a full disk: %v, high watermark %d, %d bytes; want the acknowledged record",
			kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, len(p.RecordBatches))
	}
}

// requester is a *kgo.Broker or a *kgo.Client.
type requester interface {
	Request(context.Context, kmsg.Request) (kmsg.Response, error)
}

// mustRequest sends req to b and returns its answer as R.
func mustRequest[R kmsg.Response](t *testing.T, b requester, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := b.Request(ctx, req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp.(R)
}

// diskFullEnv is what a case's requests name: topic t's ID (Produce and
// Fetch v13+ name topics by ID) and the producer ID its setup got.
type diskFullEnv struct {
	topicID    [16]byte
	producerID int64
	source     string // a mirror's source node
}

// produceRequest is an acks=all Produce of one record batch to a partition.
func produceRequest(topic string, topicID [16]byte, partition int32, label string) *kmsg.ProduceRequest {
	batch := appendTestBatch(nil, 0, -1, 1, label)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, TopicID: topicID, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: partition, Records: batch}}}}
	return req
}

// TestMirrorWaitsForSpace: a mirror whose appends the node refuses
// because its log directory is below log.dir.reserve.bytes waits for
// space: its partitions stay MIRRORING and spend none of their FAILED
// retries (mirror.failed.retry.max.attempts, which gave up on them after
// minutes of a full disk), and once space returns they catch up byte for
// byte by themselves.
func TestMirrorWaitsForSpace(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	sourceAddr := cluster.ListenAddrs()[0]
	produceMixed(t, sourceAddr, "events", 2, 3)

	const reserve = 1 << 20
	var free atomic.Int64
	free.Store(reserve / 2)
	var log syncBuffer
	target, targetAddr := startNodeConfig(t, NodeConfig{FS: vfs.OS, DataDir: t.TempDir(), Log: logstore.DefaultConfig(),
		LogDirReserveBytes: reserve, FreeSpace: func(string) (int64, int64, error) { return free.Load(), 1 << 30, nil },
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	startMirroringWith(t, target, mirrorConfig(sourceAddr), "events")

	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for !strings.Contains(log.String(), "mirror fetch waits for space") {
		if time.Now().After(deadline) {
			t.Fatalf("the mirror never waited for space; its partitions: %+v", describeMirror(t, target).Partitions)
		}
		<-poll.C
	}
	for _, p := range describeMirror(t, target).Partitions {
		if p.State != "MIRRORING" || p.RetryCount != 0 {
			t.Fatalf("partition %d while the disk is low: %s, %d retries (%s); want MIRRORING, none", p.Partition, p.State, p.RetryCount, p.Error)
		}
	}
	free.Store(1 << 30)
	waitMirrored(t, newClient(t, sourceAddr), newClient(t, targetAddr), "events", 2)
	if !strings.Contains(log.String(), "mirror fetch resumes") {
		t.Errorf("no line says the mirror resumed")
	}
}
