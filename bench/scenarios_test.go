package bench

// The report's own scenarios: the physical limit (a loopback TCP copy and
// a sequential file write of the same bytes), mirrord mirroring mirrord,
// and the copier a user would write with franz-go (a kgo consumer on the
// source feeding a kgo producer into a writable topic on a second node,
// offsets not kept). Each samples mode.Repeats times on data made once per
// variant.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	fileWriteBuffer = 1 << 20
	copierWait      = 5 * time.Minute
)

// mirrorVariants are the mirrord-to-mirrord configurations of a mode.
func mirrorVariants(mode benchMode) []mirrorCase {
	partitions := []int32{1, 64}
	codecs := []rb.Codec{rb.CodecNone, rb.CodecLZ4}
	switch {
	case mode.Full:
		partitions = []int32{1, 64, 1024}
		codecs = []rb.Codec{rb.CodecNone, rb.CodecLZ4, rb.CodecZstd}
	case mode.Name == "smoke":
		partitions, codecs = []int32{1}, []rb.Codec{rb.CodecLZ4}
	}
	var cases []mirrorCase
	for _, p := range partitions {
		for _, c := range codecs {
			cases = append(cases, mirrorCase{partitions: p, codec: c, totalBytes: int(mode.Bytes)})
		}
	}
	return cases
}

// variantName is the Variant of a case, the same in every scenario.
func variantName(partitions int32, codec rb.Codec) string {
	unit := "partitions"
	if partitions == 1 {
		unit = "partition"
	}
	return fmt.Sprintf("%d %s, %s", partitions, unit, codec)
}

// limitScenarios measures the machine: a loopback TCP copy (1 MiB
// buffers, sender and receiver in this process) and a sequential file
// write (1 MiB writes, then fdatasync) of mode.Bytes.
func limitScenarios(tb testing.TB, mode benchMode) []Measurement {
	tb.Helper()
	copyRow := Measurement{Scenario: "limit", Variant: "loopback copy", Note: "1 MiB writes over one loopback TCP connection, both ends in one process"}
	fileRow := Measurement{Scenario: "limit", Variant: variantFileWrite, Note: "sequential 1 MiB writes of a new file, then fdatasync"}
	for range mode.Repeats {
		c := measure(func() { loopbackCopy(tb, mode.Bytes) })
		copyRow.Samples = append(copyRow.Samples, Sample{Wall: c.wall, Bytes: mode.Bytes, CPU: c.cpu})
		c = measure(func() { fileWrite(tb, mode.Bytes) })
		fileRow.Samples = append(fileRow.Samples, Sample{Wall: c.wall, Bytes: mode.Bytes, CPU: c.cpu})
	}
	return []Measurement{copyRow, fileRow}
}

func fileWrite(tb testing.TB, total int64) {
	tb.Helper()
	name := filepath.Join(tb.TempDir(), "write")
	file, err := os.Create(name)
	if err != nil {
		tb.Fatal(err)
	}
	defer os.Remove(name)
	defer file.Close()
	buf := bytes.Repeat([]byte("mirrord "), fileWriteBuffer/8)
	for written := int64(0); written < total; {
		n, err := file.Write(buf[:min(int64(len(buf)), total-written)])
		if err != nil {
			tb.Fatal(err)
		}
		written += int64(n)
	}
	if err := file.Sync(); err != nil {
		tb.Fatal(err)
	}
}

// mirrordScenarios mirrors a filled mirrord source into a fresh mirrord
// process per sample; CPU is the mirror's and the source's over the run,
// PeakRSS the mirror's.
func mirrordScenarios(tb testing.TB, mode benchMode) []Measurement {
	tb.Helper()
	var rows []Measurement
	for _, c := range mirrorVariants(mode) {
		source := startSource(tb, c)
		row := Measurement{Scenario: "mirrord", Variant: variantName(c.partitions, c.codec),
			Note: "StartMirrorTopics to caught up; a fresh mirror process each sample"}
		records := sum(source.endOffsets)
		for range mode.Repeats {
			dir := filepath.Join(tb.TempDir(), "mirror")
			process := startMirrord(tb, dir)
			run := mirrorRun(tb, source, process)
			rss := processPeakRSS(tb, process.proc.Pid())
			process.stop()
			row.Samples = append(row.Samples, Sample{Wall: run.wall, Bytes: source.bytes, Records: records, CPU: run.mirrorCPU + run.sourceCPU, PeakRSS: rss})
			if err := os.RemoveAll(dir); err != nil {
				tb.Fatal(err)
			}
		}
		source.process.stop()
		rows = append(rows, row)
	}
	return rows
}

func sum(values []int64) int64 {
	var total int64
	for _, v := range values {
		total += v
	}
	return total
}

// copierScenarios copies the same data with franz-go: a kgo consumer
// reading the source and an idempotent kgo producer (the source's codec,
// acks=all, 5 ms linger) writing to a writable topic on a second node.
// CPU is the source's, the target's and this process's (the copier).
func copierScenarios(tb testing.TB, mode benchMode) []Measurement {
	tb.Helper()
	var rows []Measurement
	for _, c := range mirrorVariants(mode) {
		if c.partitions > 64 {
			continue // the copier's per-partition buffers make 1024 partitions a different test
		}
		source := startSource(tb, c)
		row := Measurement{Scenario: "kgo-copier", Variant: variantName(c.partitions, c.codec),
			Note: "franz-go consumer -> producer into a second mirrord node (offsets not kept)"}
		for range mode.Repeats {
			row.Samples = append(row.Samples, copyOnce(tb, source, c))
		}
		source.process.stop()
		rows = append(rows, row)
	}
	return rows
}

// copyOnce copies the source's topic into a fresh target node.
func copyOnce(tb testing.TB, source mirrorSource, c mirrorCase) Sample {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "target")
	target := startMirrord(tb, dir)
	defer func() {
		target.stop()
		os.RemoveAll(dir)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), copierWait)
	defer cancel()
	admin := target.client()
	defer admin.Close()
	createTopicOn(tb, ctx, admin, mirrorTopic, c.partitions)
	records := sum(source.endOffsets)

	sourceCPU, targetCPU, selfCPU, started := source.process.cpu(), target.cpu(), processCPU(), time.Now()
	copied := copyTopic(tb, ctx, source.process.addr, target.addr, c, records)
	sample := Sample{Wall: time.Since(started), Bytes: source.bytes, Records: copied,
		CPU:     source.process.cpu() - sourceCPU + target.cpu() - targetCPU + processCPU() - selfCPU,
		PeakRSS: processPeakRSS(tb, target.proc.Pid())}
	if copied != records {
		tb.Fatalf("copier copied %d of %d records", copied, records)
	}
	return sample
}

// copyTopic consumes every record of the source's topic and produces it
// to the same partition on the target, returning the records copied once
// all are acknowledged.
func copyTopic(tb testing.TB, ctx context.Context, sourceAddr, targetAddr string, c mirrorCase, records int64) int64 {
	tb.Helper()
	consumer, producer := copierClients(tb, sourceAddr, targetAddr, c)
	defer consumer.Close()
	defer producer.Close()
	var seen int64
	for polls := 0; seen < records; polls++ {
		if polls > int(records)+1000 {
			tb.Fatalf("copier: %d polls for %d records", polls, records)
		}
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			tb.Fatalf("copier consume after %d of %d records: %v", seen, records, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			seen++
			producer.Produce(ctx, &kgo.Record{Topic: mirrorTopic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}, nil)
		})
	}
	if err := producer.Flush(ctx); err != nil {
		tb.Fatalf("copier flush: %v", err)
	}
	return seen
}

// copierClients are the copier's consumer of the source's topic (from
// the start of every partition) and its producer into the target; the
// caller closes both.
func copierClients(tb testing.TB, sourceAddr, targetAddr string, c mirrorCase) (consumer, producer *kgo.Client) {
	tb.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := range c.partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(sourceAddr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{mirrorTopic: offsets}),
		kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))
	if err != nil {
		tb.Fatal(err)
	}
	producer, err = kgo.NewClient(kgo.SeedBrokers(targetAddr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(copierCodec(c.codec)), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		consumer.Close()
		tb.Fatal(err)
	}
	return consumer, producer
}

func copierCodec(codec rb.Codec) kgo.CompressionCodec {
	switch codec {
	case rb.CodecLZ4:
		return kgo.Lz4Compression()
	case rb.CodecZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// processPeakRSS reads VmHWM (the peak resident set) of a live process.
func processPeakRSS(tb testing.TB, pid int) int64 {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb); err != nil {
				tb.Fatalf("/proc/%d/status VmHWM %q: %v", pid, rest, err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("/proc/%d/status: no VmHWM", pid)
	return 0
}

// createTopicOn creates a writable topic on a mirrord node.
func createTopicOn(tb testing.TB, ctx context.Context, client *kgo.Client, topic string, partitions int32) {
	tb.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = 30_000
	kresp, err := client.Request(ctx, req)
	if err != nil {
		tb.Fatalf("create topic %s: %v", topic, err)
	}
	resp := kresp.(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 {
		tb.Fatalf("create topic %s: %d topics in the answer", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		tb.Fatalf("create topic %s: %v", topic, err)
	}
}
