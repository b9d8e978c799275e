package e2e

// Kafka's own command-line tools run against the differential test's
// broker and node (diff_test.go): kafka-topics --create and --describe,
// and kafka-features describe (kafka-transactions: diff_tools_txn_test.go).
// Each must succeed against both and print the same, once IDs are
// normalised.

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const diffToolWait = 3 * time.Minute // a few cold JVMs on a loaded machine

func init() {
	diffTools["kafka-topics"] = diffKafkaTopics
	diffTools["kafka-features"] = diffKafkaFeatures
}

// runDiffTool runs a Kafka tool class with args against server (the
// first argument after class is --bootstrap-server).
func runDiffTool(ctx context.Context, t *testing.T, libs string, server diffServer, class string, args ...string) string {
	t.Helper()
	out, err := kafkatest.RunTool(ctx, libs, nil, class, append([]string{"--bootstrap-server", server.addr}, args...)...)
	if err != nil {
		t.Fatalf("%s against %s: %v\n%s", class, server.addr, err, out)
	}
	return string(out)
}

// runDiffToolBoth runs a Kafka tool class with args against Kafka and
// against mirrord at once (fromBoth: the two JVM start-ups overlap) and
// returns both outputs, Kafka's first.
func runDiffToolBoth(ctx context.Context, t *testing.T, libs string, kafka, mirrord diffServer, class string, args ...string) [2]string {
	t.Helper()
	fromKafka, fromMirrord, err := fromBoth(kafka.addr, mirrord.addr, func(addr string) ([]byte, error) {
		out, err := kafkatest.RunTool(ctx, libs, nil, class, append([]string{"--bootstrap-server", addr}, args...)...)
		if err != nil {
			return nil, fmt.Errorf("%s against %s: %w\n%s", class, addr, err, out)
		}
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return [2]string{string(fromKafka), string(fromMirrord)}
}

var (
	topicIDField = regexp.MustCompile(`TopicId: [A-Za-z0-9_-]+`)
	nodeFields   = regexp.MustCompile(`(Leader|Replicas|Isr): [0-9,]+`)
)

// normaliseTopicsOutput replaces topic IDs and node IDs in kafka-topics
// output.
func normaliseTopicsOutput(out string, node int32) string {
	out = topicIDField.ReplaceAllString(out, "TopicId: (id)")
	return nodeFields.ReplaceAllStringFunc(out, func(field string) string {
		name, ids, _ := strings.Cut(field, ": ")
		var mapped []string
		for _, id := range strings.Split(ids, ",") {
			if id == fmt.Sprint(node) {
				id = "(node)"
			}
			mapped = append(mapped, id)
		}
		return name + ": " + strings.Join(mapped, ",")
	})
}

func diffKafkaTopics(t *testing.T, d diffTargets) {
	ctx, cancel := context.WithTimeout(context.Background(), diffToolWait)
	defer cancel()
	const topic = "diff-tools-topic"
	t.Run("create", func(t *testing.T) {
		outputs := runDiffToolBoth(ctx, t, d.libs, d.kafka, d.mirrord, "org.apache.kafka.tools.TopicCommand",
			"--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1", "--config", "retention.bytes=1048576")
		compareToolOutputs(t, "kafka-topics --create", outputs)
	})
	t.Run("describe", func(t *testing.T) {
		if !advertises(ctx, t, d.mirrord.addr, describeConfigsKey) {
			t.Skip("mirrord does not serve DescribeConfigs, which kafka-topics --describe needs")
		}
		outputs := runDiffToolBoth(ctx, t, d.libs, d.kafka, d.mirrord, "org.apache.kafka.tools.TopicCommand", "--describe", "--topic", topic)
		for i, server := range []diffServer{d.kafka, d.mirrord} {
			outputs[i] = normaliseTopicsOutput(outputs[i], server.node)
		}
		compareToolOutputs(t, "kafka-topics --describe", outputs)
	})
}

const describeConfigsKey = 32

// advertises reports whether addr's ApiVersions lists key.
func advertises(ctx context.Context, t *testing.T, addr string, key int16) bool {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "mirrord-e2e", "1.0"
	req.Version = 3
	resp, err := rawRequest(ctx, addr, req)
	if err != nil {
		t.Fatalf("ApiVersions of %s: %v", addr, err)
	}
	for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == key {
			return true
		}
	}
	return false
}

// compareToolOutputs requires Kafka's output (first) not to be empty and
// mirrord's (second) to equal it.
func compareToolOutputs(t *testing.T, what string, outputs [2]string) {
	t.Helper()
	t.Logf("%s printed:\n%s", what, outputs[0])
	if strings.TrimSpace(outputs[0]) == "" || outputs[0] != outputs[1] {
		t.Errorf("%s: mirrord printed\n%s\nKafka printed\n%s", what, outputs[1], outputs[0])
	}
}

func diffKafkaFeatures(t *testing.T, d diffTargets) {
	ctx, cancel := context.WithTimeout(context.Background(), diffToolWait)
	defer cancel()
	outputs := runDiffToolBoth(ctx, t, d.libs, d.kafka, d.mirrord, "org.apache.kafka.tools.FeatureCommand", "describe")
	kafka, mirrord := outputs[0], outputs[1]
	t.Logf("kafka-features describe, Kafka:\n%s\nmirrord:\n%s", kafka, mirrord)
	// mirrord reports a subset of Kafka's features (18_api_versions.go):
	// each line it prints must be one Kafka prints, but for the levels it
	// supports and finalizes, which are checked by the ApiVersions cases.
	if strings.TrimSpace(mirrord) == "" {
		t.Fatalf("kafka-features describe printed nothing against mirrord")
	}
	kafkaFeatures := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(kafka), "\n") {
		kafkaFeatures[featureName(line)] = true
	}
	for _, line := range strings.Split(strings.TrimSpace(mirrord), "\n") {
		if name := featureName(line); !kafkaFeatures[name] {
			t.Errorf("kafka-features: mirrord prints %q, a feature Kafka does not print", line)
		}
	}
}

// featureName is the feature a kafka-features describe line is about
// ("Feature: NAME  SupportedMinVersion: ...").
func featureName(line string) string {
	fields := strings.Fields(line)
	if len(fields) < 2 || fields[0] != "Feature:" {
		return line
	}
	return fields[1]
}
