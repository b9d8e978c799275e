package e2e

// Differential cases of DescribeConfigs, AlterConfigs,
// IncrementalAlterConfigs and CreateTopics with configs (see
// diff_test.go). Topic names: diff-configs-*.

import (
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	registerDiffCases("Configs", configsDiffCases)
}

// describeConfigs describes resources: a topic by name, or "broker" for
// the server's node (with names, when given).
func describeConfigs(synonyms, documentation bool, topic string, names ...string) func(diffServer) kmsg.Request {
	return func(server diffServer) kmsg.Request {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.IncludeSynonyms, req.IncludeDocumentation = synonyms, documentation
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		if topic == "broker" {
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, itoa(server.node)
		}
		r.ConfigNames = names
		req.Resources = append(req.Resources, r)
		return req
	}
}

func itoa(n int32) string {
	b := []byte{}
	if n == 0 {
		return "0"
	}
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

type configChange struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

func alterConfigs(validateOnly bool, topic string, changes ...configChange) func(diffServer) kmsg.Request {
	return func(diffServer) kmsg.Request {
		req := kmsg.NewPtrAlterConfigsRequest()
		req.ValidateOnly = validateOnly
		r := kmsg.NewAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		for _, c := range changes {
			rc := kmsg.NewAlterConfigsRequestResourceConfig()
			rc.Name, rc.Value = c.name, c.value
			r.Configs = append(r.Configs, rc)
		}
		req.Resources = append(req.Resources, r)
		return req
	}
}

func incrementalAlterConfigs(validateOnly bool, topic string, changes ...configChange) func(diffServer) kmsg.Request {
	return func(diffServer) kmsg.Request {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = validateOnly
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		for _, c := range changes {
			rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			rc.Name, rc.Op, rc.Value = c.name, c.op, c.value
			r.Configs = append(r.Configs, rc)
		}
		req.Resources = append(req.Resources, r)
		return req
	}
}

// then runs the request of a case after others (their answers are
// compared too).
func then(setup ...func(diffServer) kmsg.Request) func(diffServer) []kmsg.Request {
	return func(server diffServer) []kmsg.Request {
		var requests []kmsg.Request
		for _, s := range setup {
			requests = append(requests, s(server))
		}
		return requests
	}
}

// at sets a request's version.
func at(version int16, build func(diffServer) kmsg.Request) func(diffServer) kmsg.Request {
	return func(server diffServer) kmsg.Request {
		req := build(server)
		req.SetVersion(version)
		return req
	}
}

const (
	set      = kmsg.IncrementalAlterConfigOpSet
	deleteOp = kmsg.IncrementalAlterConfigOpDelete
	appendOp = kmsg.IncrementalAlterConfigOpAppend
	subtract = kmsg.IncrementalAlterConfigOpSubtract
)

var configsDiffCases = []diffCase{
	{name: "CreateTopics v7 with configs", version: 7, request: createTopicsRequest(false, createTopic{name: "diff-configs-a", partitions: 1, replicas: 1,
		configs: map[string]*string{"retention.ms": new("3600000"), "cleanup.policy": new("compact, delete"), "compression.type": new("zstd"),
			"message.timestamp.type": new("LogAppendTime"), "min.insync.replicas": new("1"), "segment.bytes": new(" 2097152"),
			"min.cleanable.dirty.ratio": new("0.25"), "preallocate": new("TRUE"), "follower.replication.throttled.replicas": new("*")}})},
	{name: "CreateTopics v7 validate only with configs", version: 7, request: createTopicsRequest(true, createTopic{name: "diff-configs-v", partitions: 1, replicas: 1,
		configs: map[string]*string{"max.message.bytes": new("5000"), "delete.retention.ms": new("100")}})},
	{name: "CreateTopics v7 value out of range", version: 7, request: createTopicsRequest(false, createTopic{name: "diff-configs-bad", partitions: 1, replicas: 1,
		configs: map[string]*string{"retention.ms": new("-2")}})},
	{name: "CreateTopics v7 unknown config", version: 7, request: createTopicsRequest(false, createTopic{name: "diff-configs-bad", partitions: 1, replicas: 1,
		configs: map[string]*string{"retention.weeks": new("2")}})},
	{name: "CreateTopics v7 segment.bytes below Kafka's minimum", version: 7, request: createTopicsRequest(false, createTopic{name: "diff-configs-bad", partitions: 1, replicas: 1,
		configs: map[string]*string{"segment.bytes": new("32768")}})},
	{name: "CreateTopics v7 remote storage", version: 7, request: createTopicsRequest(false, createTopic{name: "diff-configs-bad", partitions: 1, replicas: 1,
		configs: map[string]*string{"remote.storage.enable": new("true")}})},
	{name: "CreateTopics v7 compaction lags crossed", version: 7, request: createTopicsRequest(false, createTopic{name: "diff-configs-bad", partitions: 1, replicas: 1,
		configs: map[string]*string{"min.compaction.lag.ms": new("10"), "max.compaction.lag.ms": new("5")}})},
	{name: "DescribeConfigs v2", version: 2, request: describeConfigs(false, false, "diff-configs-a")},
	{name: "DescribeConfigs v1 synonyms", version: 1, request: describeConfigs(true, false, "diff-configs-a")},
	{name: "DescribeConfigs v3 documentation", version: 3, request: describeConfigs(false, true, "diff-configs-a")},
	{name: "DescribeConfigs v4 all", version: 4, request: describeConfigs(true, true, "diff-configs-a")},
	{name: "DescribeConfigs v4 some names", version: 4, request: describeConfigs(true, false, "diff-configs-a", "retention.ms", "segment.ms", "no.such.config")},
	{name: "DescribeConfigs v4 unknown topic", version: 4, request: describeConfigs(true, false, "diff-configs-none")},
	{name: "DescribeConfigs v4 broker", version: 4, request: describeConfigs(true, true, "broker", "log.retention.hours", "log.retention.ms",
		"log.segment.bytes", "num.partitions", "message.max.bytes", "log.cleanup.policy", "offsets.retention.minutes", "min.insync.replicas"),
		normalise: brokerReadOnly},
	{name: "DescribeConfigs v4 cluster default", version: 4, request: func(server diffServer) kmsg.Request {
		req := describeConfigs(true, false, "broker")(server).(*kmsg.DescribeConfigsRequest)
		req.Resources[0].ResourceName = ""
		return req
	}},
	{name: "AlterConfigs v2 replaces", version: 2, request: alterConfigs(false, "diff-configs-a",
		configChange{name: "retention.bytes", value: new("1048576")}, configChange{name: "segment.ms", value: new("600000")})},
	{name: "AlterConfigs v2 then describe", version: 4, setup: then(at(2, alterConfigs(false, "diff-configs-a", configChange{name: "retention.ms", value: new("7200000")}))),
		request: describeConfigs(true, false, "diff-configs-a")},
	{name: "AlterConfigs v0 validate only", version: 0, request: alterConfigs(true, "diff-configs-a", configChange{name: "retention.ms", value: new("1")})},
	{name: "AlterConfigs v2 unknown topic", version: 2, request: alterConfigs(false, "diff-configs-none", configChange{name: "retention.ms", value: new("1")})},
	{name: "AlterConfigs v2 invalid value", version: 2, request: alterConfigs(false, "diff-configs-a", configChange{name: "cleanup.policy", value: new("forever")})},
	{name: "AlterConfigs v2 null value", version: 2, request: alterConfigs(false, "diff-configs-a", configChange{name: "retention.ms"})},
	{name: "AlterConfigs v2 duplicate key", version: 2, request: alterConfigs(false, "diff-configs-a",
		configChange{name: "retention.ms", value: new("1")}, configChange{name: "retention.ms", value: new("2")})},
	{name: "IncrementalAlterConfigs v1 set and append", version: 4, setup: then(
		at(1, incrementalAlterConfigs(false, "diff-configs-a", configChange{name: "cleanup.policy", op: set, value: new("compact")},
			configChange{name: "max.message.bytes", op: set, value: new("4000")})),
		at(1, incrementalAlterConfigs(false, "diff-configs-a", configChange{name: "cleanup.policy", op: appendOp, value: new("delete")})),
		at(1, incrementalAlterConfigs(false, "diff-configs-a", configChange{name: "follower.replication.throttled.replicas", op: appendOp, value: new("0:1,1:1")})),
		at(1, incrementalAlterConfigs(false, "diff-configs-a", configChange{name: "follower.replication.throttled.replicas", op: subtract, value: new("0:1")})),
		at(1, incrementalAlterConfigs(false, "diff-configs-a", configChange{name: "retention.ms", op: deleteOp})),
	), request: describeConfigs(true, false, "diff-configs-a")},
	{name: "IncrementalAlterConfigs v1 append to a non-list", version: 1, request: incrementalAlterConfigs(false, "diff-configs-a",
		configChange{name: "retention.ms", op: appendOp, value: new("5")})},
	{name: "IncrementalAlterConfigs v0 validate only", version: 0, request: incrementalAlterConfigs(true, "diff-configs-a",
		configChange{name: "segment.bytes", op: set, value: new("1048576")})},
	{name: "IncrementalAlterConfigs v1 unknown config", version: 1, request: incrementalAlterConfigs(false, "diff-configs-a",
		configChange{name: "retention.weeks", op: set, value: new("1")})},
	{name: "IncrementalAlterConfigs v1 unknown topic", version: 1, request: incrementalAlterConfigs(false, "diff-configs-none",
		configChange{name: "retention.ms", op: set, value: new("1")})},
	{name: "IncrementalAlterConfigs v1 delete then describe", version: 4, setup: then(at(1, incrementalAlterConfigs(false, "diff-configs-a",
		configChange{name: "cleanup.policy", op: deleteOp}, configChange{name: "compression.type", op: deleteOp}))),
		request: describeConfigs(true, false, "diff-configs-a", "cleanup.policy", "compression.type")},
}

// brokerReadOnly forgives one known difference of the broker resource:
// Kafka marks the configs it takes while it runs read_only=false, mirrord
// takes none while it runs (its config file is read at start) and marks
// all read-only.
func brokerReadOnly(t *testing.T, fromKafka, fromMirrord kmsg.Response) {
	kafka, mirrord := fromKafka.(*kmsg.DescribeConfigsResponse), fromMirrord.(*kmsg.DescribeConfigsResponse)
	if len(kafka.Resources) != 1 || len(mirrord.Resources) != 1 || len(kafka.Resources[0].Configs) != len(mirrord.Resources[0].Configs) {
		return
	}
	for i := range kafka.Resources[0].Configs {
		k, m := &kafka.Resources[0].Configs[i], mirrord.Resources[0].Configs[i]
		if !k.ReadOnly && m.ReadOnly {
			t.Logf("known difference: broker config %s is read-only on mirrord, updatable on Kafka", k.Name)
			k.ReadOnly = true
		}
	}
}

// normaliseConfigs makes what legitimately differs in the config answers
// equal: throttle times, error messages, the order of configs.
func normaliseConfigs(resp kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.DescribeConfigsResponse:
		r.ThrottleMillis = 0
		for i := range r.Resources {
			res := &r.Resources[i]
			normaliseString(res.ErrorMessage, diffMessage)
			if res.ResourceType == kmsg.ConfigResourceTypeBroker {
				res.ResourceName = "(node)"
			}
			sort.Slice(res.Configs, func(a, b int) bool { return res.Configs[a].Name < res.Configs[b].Name })
		}
	case *kmsg.AlterConfigsResponse:
		r.ThrottleMillis = 0
		for i := range r.Resources {
			normaliseString(r.Resources[i].ErrorMessage, diffMessage)
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		r.ThrottleMillis = 0
		for i := range r.Resources {
			normaliseString(r.Resources[i].ErrorMessage, diffMessage)
		}
	}
}
