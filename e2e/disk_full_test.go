package e2e

// Issue 19, disk full: mirrord with its data directory on a 32 MiB tmpfs.
// Needs root (mount); skips with the reason otherwise.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mirrord/mirrord/mirrordtest"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// mountTmpfs mounts a tmpfs of size under a temporary directory and
// unmounts it at cleanup (after the cleanups registered later).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs for the disk-full run (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// startServerIn is startServer with the data directory dataDir.
func startServerIn(t *testing.T, dataDir string, args ...string) *server {
	t.Helper()
	s := &server{t: t, dataDir: dataDir}
	s.proc = &mirrordtest.Server{Binary: mirrordBinary, DataDir: dataDir, LogPath: filepath.Join(t.TempDir(), "mirrord.log"), Args: args}
	t.Cleanup(s.printLogOnFailure)
	t.Cleanup(s.checkNoRace)
	t.Cleanup(s.proc.Close)
	s.start()
	return s
}

func TestDiskFullWritableTopic(t *testing.T) {
	t.Parallel()
	fs := mountTmpfs(t, "32m")
	node := startServerIn(t, filepath.Join(fs, "data"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := newClient(t, node.addr, kgo.MaxVersions(kversion.V3_0_0())) // Produce and Fetch by topic name
	request := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := client.SeedBrokers()[0].Request(ctx, req) // no retries: the answer as sent
		if err != nil {
			t.Fatalf("%T: %v", req, err)
		}
		return resp
	}
	createTopics := func(name string) int16 {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: name, NumPartitions: 1, ReplicationFactor: 1}}
		return request(req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
	}
	if code := createTopics("t"); code != 0 {
		t.Fatalf("create topic: %v", kerr.ErrorForCode(code))
	}
	ballast := filepath.Join(fs, "ballast") // freed at the end: the space an operator gives back
	if err := os.WriteFile(ballast, make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 64<<10)
	var acked int64
	produce := func() int16 {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: rb.Append(nil, rb.Spec{BaseTimestamp: time.Now().UnixMilli(),
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: []rb.Record{{Value: value}}})}}}}
		p := request(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if p.ErrorCode == 0 {
			acked++
		}
		return p.ErrorCode
	}
	var refused int16
	for range 1000 { // 32 MiB / 64 KiB = 512 at most
		if refused = produce(); refused != 0 {
			break
		}
	}
	if refused != kerr.KafkaStorageError.Code {
		t.Fatalf("producing until refused on a 32 MiB tmpfs: %v after %d acknowledged, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(refused), acked)
	}
	t.Logf("refused after %d acknowledged records of %d bytes", acked, len(value))
	value = value[:1]
	for range 1 << 16 { // up to the reserve itself
		if refused = produce(); refused != 0 {
			break
		}
	}
	if code := createTopics("u"); code != kerr.KafkaStorageError.Code {
		t.Errorf("CreateTopics below the reserve: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
	// Fill what the reserve kept back: now the node's own writes fail too.
	filler := filepath.Join(fs, "filler")
	fillUp(t, filler)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("disk-full"), 60000
	if code := request(init).(*kmsg.InitProducerIDResponse).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Errorf("InitProducerId on a full disk: %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
	checkReadable(t, request, acked)

	for _, path := range []string{filler, ballast} {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	if code := produce(); code != 0 { // resumes by itself: a refused write looks at the disk again
		t.Fatalf("produce after space returned: %v", kerr.ErrorForCode(code))
	}
	checkReadable(t, request, acked)
	node.stop()
	node.start()
	client = newClient(t, node.addr, kgo.MaxVersions(kversion.V3_0_0()))
	checkReadable(t, request, acked)
}

// fillUp writes path until the file system is full.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for range 1 << 14 { // 1 GiB at most
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatal("the file system did not fill")
}

// checkReadable fetches partition t-0 from offset 0 and requires want
// records below a high watermark of want.
func checkReadable(t *testing.T, request func(kmsg.Request) kmsg.Response, want int64) {
	t.Helper()
	var next int64
	for range want + 1 {
		fetch := kmsg.NewPtrFetchRequest()
		fetch.MaxWaitMillis, fetch.MaxBytes = 0, 4<<20
		fetch.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: next, PartitionMaxBytes: 4 << 20}}}}
		p := request(fetch).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark < want {
			t.Fatalf("fetch at %d: %v, high watermark %d, want >= %d acknowledged", next, kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, want)
		}
		batches := p.RecordBatches
		for len(batches) >= 61 {
			var b kmsg.RecordBatch
			if err := b.ReadFrom(batches); err != nil {
				break
			}
			next = b.FirstOffset + int64(b.LastOffsetDelta) + 1
			batches = batches[12+int(b.Length):]
		}
		if next >= want {
			return
		}
	}
	t.Fatalf("read up to %d, want %d acknowledged records", next, want)
}

// TestDiskFullMirrorTopic: a mirror whose node's data directory fills up
// (a 32 MiB tmpfs, 16 MiB of it ballast) stops at the reserve with its
// partition still MIRRORING (no FAILED retries spent) and the node saying
// why in its log; when the operator frees the ballast it catches up by
// itself, byte for byte.
func TestDiskFullMirrorTopic(t *testing.T) {
	t.Parallel()
	fs := mountTmpfs(t, "32m")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	source := startServer(t)
	topics := map[string]int32{"full": 1}
	createTopics(ctx, t, source.addr, topics)
	tps := topicPartitions(topics)
	producer := newClient(t, source.addr, kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := make([]byte, 64<<10)
	const records = 320 // 20 MiB: more than the tmpfs holds beside the ballast
	for i := range records {
		value[0], value[1] = byte(i), byte(i>>8)
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "full", Value: value}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	ballast := filepath.Join(fs, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 16<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	target := startServerIn(t, filepath.Join(fs, "data"))
	runMirrorsOK(ctx, t, target.addr, "--create", "--mirror", "m", "--mirror-config", writeMirrorConfig(t, source.addr))
	runMirrorsOK(ctx, t, target.addr, "--start", "--mirror", "m", "--topics", "full")

	reason := pollUntil(ctx, 60*time.Second, func(context.Context) string {
		text, err := os.ReadFile(target.proc.LogPath)
		if err != nil {
			return err.Error()
		}
		if !bytes.Contains(text, []byte("mirror fetch waits for space")) {
			return "the mirror has not waited for space"
		}
		return ""
	})
	if reason != "" {
		failWithDescribe(ctx, t, target.addr, "%s", reason)
	}
	ends, err := endOffsets(ctx, target.addr, tps)
	if err != nil {
		t.Fatal(err)
	}
	if ends[tps[0]] >= records {
		t.Fatalf("the mirror holds all %d records on a full disk", records)
	}
	described, _ := describeMirror(ctx, t, target.addr, "m")
	for _, p := range described.Partitions {
		if p.State != "MIRRORING" {
			t.Errorf("partition %s-%d on a full disk: %s (%s), want MIRRORING", p.Topic, p.Partition, p.State, p.Error)
		}
	}
	t.Logf("the mirror waits for space at offset %d of %d", ends[tps[0]], records)
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitMirrorCaughtUp(ctx, t, source.addr, target.addr, tps)
	compareMirrored(t, readAll(ctx, t, source.addr, tps), readAll(ctx, t, target.addr, tps))
}
