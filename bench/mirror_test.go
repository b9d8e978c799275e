package bench

// BenchmarkMirror: mirrord mirroring mirrord over loopback, each a
// separate `mirrord serve` process, beside a plain loopback TCP copy of the
// same bytes in the same run.
//
// The source's data directory is filled in-process through the node's
// produce path (1 KiB records, 16 to a batch, as a producer with Kafka's
// default batch.size sends them), then served by a source process. Each
// iteration starts a fresh mirror process, creates the mirror (default
// config but bootstrap.servers) and starts the topic with the mirror admin
// RPCs; the clock runs from StartMirrorTopics until ListOffsets(latest) on
// the mirror answers the source's log end offset in every partition. The
// CPU time of each process over that interval comes from /proc/<pid>/stat
// (10 ms ticks). Bytes are record batch bytes as stored and sent (for lz4
// the compressed bytes).
//
// Metrics: mirror-MB/s (start to caught up); setup-ms (start until every
// local partition answers ListOffsets: topic creation, file creation and
// syncs); stream-MB/s and stream-cpu-s/GB (the bytes after setup over
// the time and the mirror's CPU after it; the split is as fine as the 5 ms
// poll interval); mirror-cpu-s/GB (the mirror process
// only, whole run: fetch, append, its share of the kernel's TCP receive
// and page-cache writes; not the kernel's writeback threads);
// source-cpu-s/GB (the source serving the fetches); copy-MB/s and
// copy-cpu-s/GB (sender and receiver together, both in this process);
// x-copy (copy wall / mirror wall: the fraction of the copy's speed the
// mirror reaches) and cpu-x-copy (mirror CPU / copy CPU).

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/mirrorwire"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	mirrorTopic        = "bench"
	mirrorName         = "bench"
	mirrorBenchBytes   = 256 << 20 // batch bytes in the source's log per case
	mirrorRecordBytes  = 1024      // value bytes per record (no key)
	mirrorBatchRecords = 16
	mirrorFillChunk    = 1 << 20         // bytes per Produce call while filling, at most
	mirrorWait         = 2 * time.Minute // start to caught up, at most
	mirrorPollInterval = 5 * time.Millisecond

	// Positions in the v2 batch header (recordbatch keeps its own private).
	batchLengthPosition = 8
	attributesPosition  = 21
	attributesCodecMask = 0x07
)

// mirrorCase is one benchmark configuration.
type mirrorCase struct {
	partitions int32
	codec      rb.Codec // rb.CodecNone or rb.CodecLZ4
	totalBytes int      // batch bytes to fill the source with, at least
}

func (c mirrorCase) String() string {
	return fmt.Sprintf("partitions=%d/codec=%s", c.partitions, c.codec)
}

func BenchmarkMirror(b *testing.B) {
	for _, partitions := range []int32{1, 64} {
		for _, codec := range []rb.Codec{rb.CodecNone, rb.CodecLZ4} {
			c := mirrorCase{partitions: partitions, codec: codec, totalBytes: mirrorBenchBytes}
			b.Run(c.String(), func(b *testing.B) { benchmarkMirror(b, c) })
		}
	}
}

func benchmarkMirror(b *testing.B, c mirrorCase) {
	source := startSource(b, c)
	var mirrored mirrorCost
	var copied cost
	for b.Loop() {
		mirrored.add(mirrorOnce(b, source))
		copied.add(measure(func() { loopbackCopy(b, source.bytes) }))
	}
	b.SetBytes(source.bytes)
	for _, m := range mirrorMetrics(source.bytes, b.N, mirrored, copied) {
		b.ReportMetric(m.value, m.unit)
	}
}

// TestMirrorBenchSmoke runs the harness of BenchmarkMirror on a few MB,
// so that `make test` proves it works. It asserts no timing.
func TestMirrorBenchSmoke(t *testing.T) {
	for _, codec := range []rb.Codec{rb.CodecNone, rb.CodecLZ4} {
		c := mirrorCase{partitions: 1, codec: codec, totalBytes: 2 << 20}
		t.Run(c.String(), func(t *testing.T) {
			source := startSource(t, c)
			if source.bytes < int64(c.totalBytes) {
				t.Fatalf("source holds %d batch bytes, want at least %d", source.bytes, c.totalBytes)
			}
			mirrored := mirrorOnce(t, source)
			copied := measure(func() { loopbackCopy(t, source.bytes) })
			for _, m := range mirrorMetrics(source.bytes, 1, mirrored, copied) {
				t.Logf("%s: %.3g %s", c, m.value, m.unit)
			}
		})
	}
}

// mirrorCost is one or more mirror runs: wall time from
// StartMirrorTopics to caught up; setup, its part before every local
// partition answered ListOffsets (topic creation); streamBytes, the bytes
// mirrored after setup (counted by offsets: every batch has the same
// size); and the CPU time each process spent in the whole run.
type mirrorCost struct {
	wall, setup          time.Duration
	streamBytes          int64
	mirrorCPU, sourceCPU time.Duration
	streamMirrorCPU      time.Duration // the mirror's CPU time after setup
}

func (c *mirrorCost) add(d mirrorCost) {
	c.wall += d.wall
	c.setup += d.setup
	c.streamBytes += d.streamBytes
	c.mirrorCPU += d.mirrorCPU
	c.sourceCPU += d.sourceCPU
	c.streamMirrorCPU += d.streamMirrorCPU
}

type metric struct {
	value float64
	unit  string
}

// mirrorMetrics are the reported numbers for runs of bytes each, mirrored
// and copied.
func mirrorMetrics(bytes int64, runs int, mirrored mirrorCost, copied cost) []metric {
	gb := float64(bytes) * float64(runs) / 1e9
	metrics := []metric{
		{gb * 1e3 / mirrored.wall.Seconds(), "mirror-MB/s"},
		{mirrored.setup.Seconds() * 1e3 / float64(runs), "setup-ms"},
		{mirrored.mirrorCPU.Seconds() / gb, "mirror-cpu-s/GB"},
		{mirrored.sourceCPU.Seconds() / gb, "source-cpu-s/GB"},
		{gb * 1e3 / copied.wall.Seconds(), "copy-MB/s"},
		{copied.cpu.Seconds() / gb, "copy-cpu-s/GB"},
		{copied.wall.Seconds() / mirrored.wall.Seconds(), "x-copy"},
		{mirrored.mirrorCPU.Seconds() / copied.cpu.Seconds(), "cpu-x-copy"},
	}
	if stream := mirrored.wall - mirrored.setup; stream > 0 && mirrored.streamBytes > 0 { // a tiny topic may be whole when it first answers
		streamGB := float64(mirrored.streamBytes) / 1e9
		metrics = append(metrics, metric{streamGB * 1e3 / stream.Seconds(), "stream-MB/s"},
			metric{mirrored.streamMirrorCPU.Seconds() / streamGB, "stream-cpu-s/GB"})
	}
	return metrics
}

// mirrorSource is a source process serving a filled topic.
type mirrorSource struct {
	process    *mirrordProcess
	endOffsets []int64 // per partition
	bytes      int64   // batch bytes in the topic's logs
}

// startSource fills a data directory with c's topic and serves it, and
// checks that the source answers the end offsets it was filled to.
func startSource(tb testing.TB, c mirrorCase) mirrorSource {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "source")
	endOffsets, total := fillOffline(tb, dir, c)
	process := startMirrord(tb, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := process.client()
	defer client.Close()
	broker, err := nodeID(ctx, client)
	if err != nil {
		tb.Fatal(err)
	}
	got, err := listEndOffsets(ctx, client, broker, c.partitions)
	if err != nil {
		tb.Fatalf("source: %v", err)
	}
	if !slices.Equal(got, endOffsets) {
		tb.Fatalf("source end offsets %v, filled to %v", got, endOffsets)
	}
	return mirrorSource{process: process, endOffsets: endOffsets, bytes: total}
}

// fillOffline creates c's topic in a node on dir and writes at least
// c.totalBytes of batches round-robin over its partitions, a chunk of
// batches per Produce call, then closes the node. It returns each
// partition's log end offset and the batch bytes written.
func fillOffline(tb testing.TB, dir string, c mirrorCase) ([]int64, int64) {
	tb.Helper()
	ctx := context.Background()
	node, err := engine.OpenNode(engine.NodeConfig{FS: vfs.OS, DataDir: dir, Log: logstore.DefaultConfig(), Host: "127.0.0.1", Port: 9092,
		Logger: slog.New(slog.DiscardHandler)}) // no lines among the benchmark's
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := node.CreateTopic(ctx, mirrorTopic, c.partitions, nil, false); err != nil {
		tb.Fatal(err)
	}
	batch := benchBatch(tb, c.codec)
	perPartition := max(len(batch), c.totalBytes/int(c.partitions))
	chunk := bytes.Repeat(batch, max(1, min(mirrorFillChunk, perPartition)/len(batch)))
	recordsPerChunk := int64(len(chunk) / len(batch) * mirrorBatchRecords)
	endOffsets := make([]int64, c.partitions)
	var total int64
	for i := 0; total < int64(c.totalBytes); i++ {
		partition := int32(i) % c.partitions
		p, err := node.Partition(mirrorTopic, partition)
		if err != nil {
			tb.Fatal(err)
		}
		// Produce assigns offsets in place: each call gets its own copy.
		if _, err := p.Produce(ctx, slices.Clone(chunk), netio.ProduceRequest{Acks: -1}); err != nil {
			tb.Fatal(err)
		}
		endOffsets[partition] += recordsPerChunk
		total += int64(len(chunk))
	}
	if err := node.Close(); err != nil {
		tb.Fatal(err)
	}
	return endOffsets, total
}

// benchBatch is one batch of mirrorBatchRecords distinct records, each
// value half pseudo-random and half text (lz4 halves it), uncompressed or
// lz4-compressed.
func benchBatch(tb testing.TB, codec rb.Codec) rb.Batch {
	tb.Helper()
	random := rand.New(rand.NewPCG(1, 2))
	text := bytes.Repeat([]byte("mirrord mirrors topics byte for byte. "), mirrorRecordBytes/2)
	records := make([]rb.Record, mirrorBatchRecords)
	for i := range records {
		value := make([]byte, mirrorRecordBytes)
		for j := range mirrorRecordBytes / 2 {
			value[j] = byte(random.Uint32())
		}
		copy(value[mirrorRecordBytes/2:], text[i:])
		records[i] = rb.Record{Value: value}
	}
	batch := rb.Batch(rb.Append(nil, rb.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, Records: records}))
	switch codec {
	case rb.CodecNone:
	case rb.CodecLZ4:
		batch = withLZ4(tb, batch)
	case rb.CodecZstd:
		batch = withZstd(tb, batch)
	default:
		tb.Fatalf("codec %s: not benchmarked", codec)
	}
	parsed, err := rb.Parse(batch)
	if err == nil {
		err = parsed.Verify()
	}
	if err != nil || len(parsed) != len(batch) || parsed.Codec() != codec || parsed.RecordCount() != mirrorBatchRecords {
		tb.Fatalf("bench batch (%s): %v", codec, err)
	}
	return batch
}

// withLZ4 returns batch with its records compressed as Kafka's Java
// client does (LZ4 frame, 64 KiB blocks), and length, codec and CRC set.
func withLZ4(tb testing.TB, batch rb.Batch) rb.Batch {
	tb.Helper()
	var section bytes.Buffer
	w := lz4.NewWriter(&section)
	err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false))
	if err == nil {
		_, err = w.Write(batch.Records())
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		tb.Fatalf("lz4: %v", err)
	}
	out := rb.Batch(append(slices.Clone(batch[:rb.HeaderSize]), section.Bytes()...))
	binary.BigEndian.PutUint32(out[batchLengthPosition:], uint32(len(out)-rb.LengthPrefixSize))
	attributes := binary.BigEndian.Uint16(out[attributesPosition:])
	binary.BigEndian.PutUint16(out[attributesPosition:], attributes&^attributesCodecMask|uint16(rb.CodecLZ4))
	out.SetCRC(out.ComputeCRC())
	return out
}

// withZstd returns batch with its records compressed with zstd (one
// frame, as Kafka's Java client writes it), and length, codec and CRC set.
func withZstd(tb testing.TB, batch rb.Batch) rb.Batch {
	tb.Helper()
	encoder, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		tb.Fatalf("zstd: %v", err)
	}
	defer encoder.Close()
	out := rb.Batch(encoder.EncodeAll(batch.Records(), slices.Clone(batch[:rb.HeaderSize])))
	binary.BigEndian.PutUint32(out[batchLengthPosition:], uint32(len(out)-rb.LengthPrefixSize))
	attributes := binary.BigEndian.Uint16(out[attributesPosition:])
	binary.BigEndian.PutUint16(out[attributesPosition:], attributes&^attributesCodecMask|uint16(rb.CodecZstd))
	out.SetCRC(out.ComputeCRC())
	return out
}

// mirrorOnce starts a mirror process on a fresh data directory, mirrors
// the source's topic into it until it has caught up, stops it, and
// returns the cost from StartMirrorTopics to caught up.
func mirrorOnce(tb testing.TB, source mirrorSource) mirrorCost {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "mirror")
	process := startMirrord(tb, dir)
	run := mirrorRun(tb, source, process)
	process.stop()
	if err := os.RemoveAll(dir); err != nil { // as many bytes as the source
		tb.Fatal(err)
	}
	return run
}

// mirrorRun creates the mirror on process, starts the topic and waits
// until process holds the source's log end offsets.
func mirrorRun(tb testing.TB, source mirrorSource, process *mirrordProcess) mirrorCost {
	tb.Helper()
	client := process.client()
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), mirrorWait)
	defer cancel()
	broker, err := nodeID(ctx, client)
	if err != nil {
		tb.Fatal(err)
	}
	if err := createMirror(ctx, client, source.process.addr); err != nil {
		tb.Fatal(err)
	}
	sourceCPU, mirrorCPU, started := source.process.cpu(), process.cpu(), time.Now()
	if err := startMirrorTopic(ctx, client); err != nil {
		tb.Fatal(err)
	}
	var createdCPU time.Duration
	progress, err := waitEndOffsets(ctx, client, broker, source.endOffsets, func() { createdCPU = process.cpu() })
	if err != nil {
		tb.Fatalf("mirror did not catch up: %v", err)
	}
	caughtUpCPU := process.cpu()
	run := mirrorCost{wall: progress.caughtUp.Sub(started), setup: progress.created.Sub(started),
		mirrorCPU: caughtUpCPU - mirrorCPU, sourceCPU: source.process.cpu() - sourceCPU, streamMirrorCPU: caughtUpCPU - createdCPU}
	records, recordsAfterSetup := int64(0), int64(0)
	for i, end := range source.endOffsets {
		records += end
		recordsAfterSetup += end - progress.atCreated[i]
	}
	run.streamBytes = source.bytes * recordsAfterSetup / records
	return run
}

func createMirror(ctx context.Context, client *kgo.Client, sourceAddr string) error {
	req := &mirrorwire.CreateClusterMirrorRequest{MirrorName: mirrorName,
		Configs: []mirrorwire.CreateClusterMirrorConfig{{Name: "bootstrap.servers", Value: &sourceAddr}}}
	kresp, err := client.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("create mirror: %w", err)
	}
	if code := kresp.(*mirrorwire.CreateClusterMirrorResponse).ErrorCode; code != 0 {
		return fmt.Errorf("create mirror: %w", kerr.ErrorForCode(code))
	}
	return nil
}

func startMirrorTopic(ctx context.Context, client *kgo.Client) error {
	return startMirrorTopicNamed(ctx, client, mirrorTopic)
}

// mirrorProgress is what waitEndOffsets saw: when every partition first
// answered, their log end offsets then, and when they reached the source's.
type mirrorProgress struct {
	created, caughtUp time.Time
	atCreated         []int64
}

// waitEndOffsets polls the log end offsets of the topic's partitions on
// broker until they equal want, or fails when ctx ends. It calls created
// when every partition first answers.
func waitEndOffsets(ctx context.Context, client *kgo.Client, broker int32, want []int64, created func()) (mirrorProgress, error) {
	poll := time.NewTicker(mirrorPollInterval)
	defer poll.Stop()
	var progress mirrorProgress
	for {
		got, err := listEndOffsets(ctx, client, broker, int32(len(want)))
		now := time.Now()
		if err == nil && progress.atCreated == nil {
			progress.created, progress.atCreated = now, got
			created()
		}
		if err == nil && slices.Equal(got, want) {
			progress.caughtUp = now
			return progress, nil
		}
		select {
		case <-ctx.Done():
			return progress, fmt.Errorf("log end offsets %v (error %v), source %v: %w", got, err, want, ctx.Err())
		case <-poll.C:
		}
	}
}

// listEndOffsets asks broker for the log end offset of every partition of
// the topic (ListOffsets, latest); a partition error is an error.
func listEndOffsets(ctx context.Context, client *kgo.Client, broker, partitions int32) ([]int64, error) {
	offsets, err := listOffsetsOf(ctx, client, broker, []string{mirrorTopic}, partitions)
	if err != nil {
		return nil, err
	}
	return offsets[0], nil
}
