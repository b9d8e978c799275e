package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mirrord/mirrord/mirrordtest"
)

const (
	kcatWait            = 30 * time.Second // one kcat run
	kcatRecords         = 200              // per partition
	kcatOutputBytesMax  = 8 << 20
	kcatMessageTimeout  = "20000" // librdkafka message.timeout.ms: a failing produce ends in time
	kcatMetadataTimeout = "20"    // kcat -m, seconds
)

// findKcat returns the kcat to run: $MIRRORD_KCAT, then .cache/bin/kcat
// (scripts/install-kcat.sh), then PATH. Missing, it fails the test under
// CI=true and skips it otherwise.
func findKcat(t *testing.T) string {
	t.Helper()
	return mirrordtest.Tool(t, "kcat", "MIRRORD_KCAT", "scripts/install-kcat.sh")
}

// runKcat runs kcat with args and stdin, bounded in time and output, and
// returns its standard output. A non-zero exit fails the test; so does an
// error line on standard error ("% ERROR" or "Delivery failed").
func runKcat(ctx context.Context, t *testing.T, kcat string, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, kcatWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr boundedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil || bytes.Contains(stderr.Bytes(), []byte("% ERROR")) || bytes.Contains(stderr.Bytes(), []byte("Delivery failed")) {
		t.Fatalf("kcat %s: %v (ctx: %v)\nstderr:\n%s", strings.Join(args, " "), err, ctx.Err(), stderr.Bytes())
	}
	return stdout.Bytes()
}

// boundedBuffer keeps the first kcatOutputBytesMax bytes written to it.
type boundedBuffer struct{ bytes.Buffer }

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := kcatOutputBytesMax - b.Len(); room < len(p) {
		b.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// kcatMetadata is the part of `kcat -L -J` the test reads.
type kcatMetadata struct {
	Brokers []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32  `json:"partition"`
			Leader    int32  `json:"leader"`
			Error     string `json:"error"`
			Replicas  []struct {
				ID int32 `json:"id"`
			} `json:"replicas"`
		} `json:"partitions"`
	} `json:"topics"`
}

// TestKcatMetadata: kcat -L (text and JSON) shows this node as the only
// broker at its address and the topics with their partitions, each led by
// this node.
func TestKcatMetadata(t *testing.T) {
	t.Parallel()
	kcat := findKcat(t)
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	topics := map[string]int32{"kcat-one": 1, "kcat-three": 3, "kcat-seven": 7}
	createTopics(ctx, t, s.addr, topics)

	var metadata kcatMetadata
	out := runKcat(ctx, t, kcat, nil, "-b", s.addr, "-m", kcatMetadataTimeout, "-L", "-J")
	if err := json.Unmarshal(out, &metadata); err != nil {
		t.Fatalf("kcat -L -J: %v\n%s", err, out)
	}
	if len(metadata.Brokers) != 1 || metadata.Brokers[0].Name != s.addr {
		t.Fatalf("kcat -L -J: brokers %+v, want one at %s", metadata.Brokers, s.addr)
	}
	node := metadata.Brokers[0].ID
	seen := map[string]bool{}
	for _, topic := range metadata.Topics {
		want, ok := topics[topic.Topic]
		if !ok {
			t.Errorf("kcat -L -J: unexpected topic %q", topic.Topic)
			continue
		}
		seen[topic.Topic] = true
		if topic.Error != "" || int32(len(topic.Partitions)) != want {
			t.Errorf("kcat -L -J: topic %s: error %q, %d partitions, want %d", topic.Topic, topic.Error, len(topic.Partitions), want)
		}
		for _, p := range topic.Partitions {
			if p.Leader != node || p.Error != "" || len(p.Replicas) != 1 || p.Replicas[0].ID != node {
				t.Errorf("kcat -L -J: %s-%d: leader %d, error %q, replicas %+v; want leader and replica %d", topic.Topic, p.Partition, p.Leader, p.Error, p.Replicas, node)
			}
		}
	}
	if len(seen) != len(topics) {
		t.Errorf("kcat -L -J: topics %v, want %v\n%s", seen, topics, out)
	}

	text := string(runKcat(ctx, t, kcat, nil, "-b", s.addr, "-m", kcatMetadataTimeout, "-L", "-t", "kcat-three"))
	for _, want := range []string{
		fmt.Sprintf("broker %d at %s", node, s.addr),
		`topic "kcat-three" with 3 partitions:`,
		fmt.Sprintf("partition 2, leader %d, replicas: %d, isrs: %d", node, node, node),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("kcat -L -t kcat-three: no line with %q in:\n%s", want, text)
		}
	}
}

// TestKcatConsume: records that kgo produced, one codec per partition, are
// what kcat -C prints, key, value, offset and headers.
func TestKcatConsume(t *testing.T) {
	t.Parallel()
	kcat := findKcat(t)
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	const topic = "kcat-consume"
	createTopics(ctx, t, s.addr, map[string]int32{topic: int32(len(codecs))})
	acked := newLedger()
	for p, c := range codecs {
		client := newClient(t, s.addr, kgo.ProducerBatchCompression(c.codec), kgo.DisableIdempotentWrite())
		records := make([]*kgo.Record, kcatRecords)
		for i := range records {
			records[i] = &kgo.Record{
				Topic: topic, Partition: int32(p),
				Key:     fmt.Appendf(nil, "key-%d-%d", p, i),
				Value:   fmt.Appendf(nil, "value %d of partition %d compressed with %s %s", i, p, c.name, strings.Repeat("x", i%50)),
				Headers: []kgo.RecordHeader{{Key: "codec", Value: []byte(c.name)}, {Key: "index", Value: []byte(strconv.Itoa(i))}},
			}
		}
		if err := produceAll(ctx, client, records, acked); err != nil {
			t.Fatalf("seed partition %d (%s): %v", p, c.name, err)
		}
	}
	byPartition := acked.sorted()
	for tp, records := range byPartition {
		t.Run(fmt.Sprintf("partition-%d", tp.partition), func(t *testing.T) {
			out := runKcat(ctx, t, kcat, nil, "-b", s.addr, "-m", kcatMetadataTimeout, "-C", "-t", topic,
				"-p", strconv.Itoa(int(tp.partition)), "-o", "beginning", "-e", "-q", "-f", "%k|%s|%o|%h\n")
			var want bytes.Buffer
			for _, r := range records {
				fmt.Fprintf(&want, "%s|%s|%d|%s=%s,%s=%s\n", r.Key, r.Value, r.Offset,
					r.Headers[0].Key, r.Headers[0].Value, r.Headers[1].Key, r.Headers[1].Value)
			}
			compareLines(t, "kcat -C", out, want.Bytes())
		})
	}
	// -o -N starts N records before the end (ListOffsets latest).
	t.Run("from-end", func(t *testing.T) {
		records := byPartition[topicPartition{topic, 1}]
		out := runKcat(ctx, t, kcat, nil, "-b", s.addr, "-m", kcatMetadataTimeout, "-C", "-t", topic,
			"-p", "1", "-o", "-10", "-e", "-q", "-f", "%k|%o\n")
		var want bytes.Buffer
		for _, r := range records[len(records)-10:] {
			fmt.Fprintf(&want, "%s|%d\n", r.Key, r.Offset)
		}
		compareLines(t, "kcat -C -o -10", out, want.Bytes())
	})
	// -Q looks offsets up by timestamp (ListOffsets): the first record at
	// or after it; -1 is the end, -2 the start.
	t.Run("query-timestamps", func(t *testing.T) {
		records := byPartition[topicPartition{topic, 2}]
		at := records[len(records)/2].Timestamp.UnixMilli()
		first := int64(-1)
		for _, r := range records {
			if r.Timestamp.UnixMilli() >= at {
				first = r.Offset
				break
			}
		}
		for _, query := range []struct {
			timestamp int64
			want      int64
		}{{at, first}, {-1, int64(len(records))}, {-2, 0}, {records[len(records)-1].Timestamp.UnixMilli() + 60000, -1}} {
			out := runKcat(ctx, t, kcat, nil, "-b", s.addr, "-m", kcatMetadataTimeout, "-Q", "-t", fmt.Sprintf("%s:2:%d", topic, query.timestamp))
			if want := fmt.Sprintf("%s [2] offset %d\n", topic, query.want); string(out) != want {
				t.Errorf("kcat -Q -t %s:2:%d: %q, want %q", topic, query.timestamp, out, want)
			}
		}
	})
}

// TestKcatProduce: kcat -P with each codec (and once idempotent) writes
// records that kgo reads back with offsets 0, 1, ... and the key, value
// and header kcat was given.
func TestKcatProduce(t *testing.T) {
	t.Parallel()
	kcat := findKcat(t)
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	const topic = "kcat-produce"
	runs := []struct {
		name  string
		extra []string
	}{
		{"none", []string{"-z", "none"}},
		{"gzip", []string{"-z", "gzip"}},
		{"snappy", []string{"-z", "snappy"}},
		{"lz4", []string{"-z", "lz4"}},
		{"zstd", []string{"-z", "zstd"}},
		{"idempotent", []string{"-X", "enable.idempotence=true"}},
	}
	createTopics(ctx, t, s.addr, map[string]int32{topic: int32(len(runs))})
	for p, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			var input bytes.Buffer
			want := make([]*kgo.Record, kcatRecords)
			for i := range want {
				r := &kgo.Record{
					Topic: topic, Partition: int32(p), Offset: int64(i),
					Key:     fmt.Appendf(nil, "k%d", i),
					Value:   fmt.Appendf(nil, "kcat %s record %d %s", run.name, i, strings.Repeat("y", i%40)),
					Headers: []kgo.RecordHeader{{Key: "via", Value: []byte("kcat")}},
				}
				fmt.Fprintf(&input, "%s:%s\n", r.Key, r.Value)
				want[i] = r
			}
			args := append([]string{"-b", s.addr, "-m", kcatMetadataTimeout, "-P", "-t", topic, "-p", strconv.Itoa(p),
				"-K", ":", "-H", "via=kcat", "-X", "message.timeout.ms=" + kcatMessageTimeout}, run.extra...)
			runKcat(ctx, t, kcat, input.Bytes(), args...)
			consumeExactly(ctx, t, s.addr, kgo.ReadUncommitted(), map[topicPartition][]*kgo.Record{{topic, int32(p)}: want})
			stored, err := readPartition(ctx, s.addr, topic, int32(p))
			if err != nil {
				t.Fatal(err)
			}
			if stored.highWatermark != kcatRecords {
				t.Errorf("high watermark %d, want %d", stored.highWatermark, kcatRecords)
			}
		})
	}
}

// compareLines compares kcat's output with the expected lines and shows
// the first difference.
func compareLines(t *testing.T, what string, got, want []byte) {
	t.Helper()
	gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range min(len(gotLines), len(wantLines)) {
		if gotLines[i] != wantLines[i] {
			t.Fatalf("%s: line %d:\n got %q\nwant %q", what, i+1, gotLines[i], wantLines[i])
		}
	}
	if len(gotLines) != len(wantLines) {
		t.Fatalf("%s: %d lines, want %d", what, len(gotLines)-1, len(wantLines)-1)
	}
}
