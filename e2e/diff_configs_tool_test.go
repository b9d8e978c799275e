package e2e

// kafka-configs (Kafka 4.4's ConfigCommand) against Kafka and mirrord:
// --alter then --describe of a topic must print the same from both; then
// a mirrord of its own is killed with SIGKILL and restarted, and stopped
// cleanly and restarted, and its topic's configs must have survived both
// (DescribeConfigs after each start, the tool once at the end).

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	diffTools["kafka-configs"] = diffKafkaConfigs
}

const configCommand = "org.apache.kafka.tools.ConfigCommand"

func diffKafkaConfigs(t *testing.T, d diffTargets) {
	ctx, cancel := context.WithTimeout(context.Background(), diffToolWait)
	defer cancel()
	const topic = "diff-tools-configs"
	alter := []string{"--alter", "--entity-type", "topics", "--entity-name", topic,
		"--add-config", "retention.ms=3600000,cleanup.policy=[compact,delete],max.message.bytes=5000", "--delete-config", "segment.ms"}
	describe := []string{"--describe", "--entity-type", "topics", "--entity-name", topic}
	own := startServer(t)
	ownServer := diffServer{addr: own.addr}
	for _, server := range []diffServer{d.kafka, ownServer} {
		createKafkaTopic(ctx, t, server.addr, topic, 1, 1, map[string]string{"segment.ms": "60000"})
	}
	runDiffToolBoth(ctx, t, d.libs, d.kafka, ownServer, configCommand, alter...)
	outputs := runDiffToolBoth(ctx, t, d.libs, d.kafka, ownServer, configCommand, describe...)
	compareToolOutputs(t, "kafka-configs --describe", outputs)
	want := topicOverrides(ctx, t, own.addr, topic)
	if want["retention.ms"] != "3600000" || want["cleanup.policy"] != "compact,delete" || len(want) != 3 {
		t.Fatalf("overrides after kafka-configs --alter: %v", want)
	}
	for _, restart := range []struct {
		what string
		end  func()
	}{{"kill -9", own.kill}, {"clean stop", own.stop}} {
		restart.end()
		own.start()
		if got := topicOverrides(ctx, t, own.addr, topic); !sameMap(got, want) {
			t.Fatalf("after %s and a restart: overrides %v, want %v", restart.what, got, want)
		}
	}
	if after := runDiffTool(ctx, t, d.libs, ownServer, configCommand, describe...); after != outputs[1] {
		t.Errorf("kafka-configs --describe after the restarts printed\n%s\nbefore\n%s", after, outputs[1])
	}
}

// topicOverrides are a topic's DYNAMIC_TOPIC_CONFIG configs (DescribeConfigs v4).
func topicOverrides(ctx context.Context, t *testing.T, addr, topic string) map[string]string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, r)
	resp, err := rawRequest(ctx, addr, req)
	if err != nil {
		t.Fatal(err)
	}
	res := resp.(*kmsg.DescribeConfigsResponse).Resources
	if len(res) != 1 || res[0].ErrorCode != 0 {
		t.Fatalf("DescribeConfigs of %s: %+v", topic, res)
	}
	overrides := map[string]string{}
	for _, c := range res[0].Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
			overrides[c.Name] = *c.Value
		}
	}
	return overrides
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
