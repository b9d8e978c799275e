package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMirrorTopicGuarded: a mirror topic's partitions, log start and
// existence follow the source, so every call that would change them is
// refused, with an error each real client knows and does not retry
// (POLICY_VIOLATION) and a message naming the mirror and how to make the
// topic writable: Produce from franz-go, kcat (librdkafka) and Kafka's
// console producer (Java), and kafka-topics --alter / --delete and
// kafka-delete-records (Java AdminClient). The topic stays as the source
// has it. A --stop of a topic the mirror does not hold fails, naming it;
// after a --stop the topic is the operator's.
func TestMirrorTopicGuarded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), mirrorTestDeadline)
	defer cancel()
	libs := kafkaLibs(t)
	kcat := findKcat(t)
	source, target := startServer(t), startServer(t)
	tp := topicPartition{"readonly", 0}
	createTopics(ctx, t, source.addr, map[string]int32{tp.topic: 1})
	produceTo(ctx, t, newClient(t, source.addr), newRecordMaker(1), tp, 50, newLedger())
	runMirrorsOK(ctx, t, target.addr, "--create", "--mirror", "m", "--mirror-config", writeMirrorConfig(t, source.addr))
	runMirrorsOK(ctx, t, target.addr, "--start", "--mirror", "m", "--topics", tp.topic)
	ends := waitMirrorCaughtUp(ctx, t, source.addr, target.addr, []topicPartition{tp})
	const named = "mirror topic of mirror m" // in every message that can carry one

	t.Run("franz-go", func(t *testing.T) {
		client := newClient(t, target.addr)
		err := client.ProduceSync(ctx, &kgo.Record{Topic: tp.topic, Partition: tp.partition, Value: []byte("refused")}).FirstErr()
		if !errors.Is(err, kerr.PolicyViolation) {
			t.Errorf("franz-go produce to mirror topic: %v, want POLICY_VIOLATION", err)
		}
		t.Logf("franz-go produce to a mirror topic: %v", err)
	})
	t.Run("kcat", func(t *testing.T) {
		stderr, err := runKcatFailing(ctx, t, kcat, []byte("key:refused\n"), "-b", target.addr, "-m", kcatMetadataTimeout,
			"-P", "-t", tp.topic, "-p", "0", "-K", ":", "-X", "message.timeout.ms="+mirrorKcatTimeout)
		if err == nil || !bytes.Contains(stderr, []byte("Delivery failed")) || !bytes.Contains(stderr, []byte("Policy violation")) {
			t.Errorf("kcat -P to mirror topic: exit %v, want a delivery failure naming the policy violation:\n%s", err, stderr)
		}
		t.Logf("kcat -P to a mirror topic: %s", bytes.TrimSpace(stderr))
	})
	t.Run("console-producer", func(t *testing.T) {
		// A retried error would end in a TimeoutException after the
		// delivery timeout: the policy violation is the first answer's.
		stdout, stderr, _ := kafkatest.RunToolOutputs(ctx, libs, []byte("refused\n"), "org.apache.kafka.tools.ConsoleProducer",
			"--bootstrap-server", target.addr, "--topic", tp.topic, "--producer-property", "delivery.timeout.ms=60000")
		out := string(stdout) + string(stderr)
		if !strings.Contains(out, "PolicyViolationException") || !strings.Contains(out, named) || strings.Contains(out, "TimeoutException") {
			t.Errorf("kafka-console-producer to mirror topic: want a PolicyViolationException naming the mirror, not retried:\n%s", out)
		}
		t.Logf("kafka-console-producer to a mirror topic: %s", lineWith(out, "PolicyViolationException"))
	})
	admin := []struct {
		name string
		args []string
		want []string
	}{
		{"kafka-topics --alter", []string{"org.apache.kafka.tools.TopicCommand", "--bootstrap-server", target.addr, "--alter", "--topic", tp.topic, "--partitions", "3"},
			[]string{"PolicyViolationException", named}},
		{"kafka-topics --delete", []string{"org.apache.kafka.tools.TopicCommand", "--bootstrap-server", target.addr, "--delete", "--topic", tp.topic},
			[]string{"PolicyViolationException", named}},
		// DeleteRecords answers carry no message: the exception's is Kafka's.
		{"kafka-delete-records", []string{"org.apache.kafka.tools.DeleteRecordsCommand", "--bootstrap-server", target.addr,
			"--offset-json-file", deleteRecordsFile(t, tp, 10)}, []string{"PolicyViolationException"}},
	}
	for _, c := range admin {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, _ := kafkatest.RunToolOutputs(ctx, libs, nil, c.args[0], c.args[1:]...)
			out := string(stdout) + string(stderr)
			for _, want := range c.want {
				if !strings.Contains(out, want) {
					t.Errorf("%s on a mirror topic: output lacks %q:\n%s", c.name, want, out)
				}
			}
			t.Logf("%s on a mirror topic: %s", c.name, lineWith(out, "PolicyViolationException"))
		})
	}
	after, err := endOffsets(ctx, target.addr, []topicPartition{tp})
	if err != nil || after[tp] != ends[tp] {
		t.Errorf("mirror topic after the refused calls: end offsets %v (%v), want %d as the source", after, err, ends[tp])
	}
	if start, err := listOffsets(ctx, target.addr, tp, -2); err != nil || start.Offset != 0 {
		t.Errorf("mirror topic after the refused DeleteRecords: log start %+v (%v), want 0", start, err)
	}
	if second, err := listOffsets(ctx, target.addr, topicPartition{tp.topic, 1}, -1); err == nil && second.ErrorCode == 0 {
		t.Errorf("mirror topic after the refused CreatePartitions has a partition 1: %+v", second)
	}

	t.Run("stop-missing-topic", func(t *testing.T) {
		result := runMirrors(ctx, t, target.addr, "--stop", "--mirror", "m", "--topics", "no-such-topic")
		if result.exit == 0 || !strings.Contains(result.stdout+result.stderr, "no-such-topic") || strings.Contains(result.stdout, "writable") {
			t.Errorf("--stop of a topic the mirror does not hold: exit %d, stdout %q, stderr %q; want a failure naming it", result.exit, result.stdout, result.stderr)
		}
	})
	runMirrorsOK(ctx, t, target.addr, "--stop", "--mirror", "m", "--topics", tp.topic)
	if _, err := kafkatest.RunTool(ctx, libs, nil, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", target.addr,
		"--alter", "--topic", tp.topic, "--partitions", "3"); err != nil {
		t.Errorf("kafka-topics --alter of a stopped mirror topic: %v", err)
	}
}

// deleteRecordsFile writes kafka-delete-records' offset file for one
// partition.
func deleteRecordsFile(t *testing.T, tp topicPartition, offset int64) string {
	file := filepath.Join(t.TempDir(), "delete-records.json")
	body := fmt.Sprintf(`{"version":1,"partitions":[{"topic":%q,"partition":%d,"offset":%d}]}`, tp.topic, tp.partition, offset)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// lineWith returns the first line of out containing s, trimmed.
func lineWith(out, s string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, s) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
