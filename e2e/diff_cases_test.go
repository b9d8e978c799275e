package e2e

// Differential cases of ApiVersions, Metadata and CreateTopics (see
// diff_test.go). Topic names: diff-meta-* (Metadata), diff-create-*
// (CreateTopics).

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	registerDiffCases("ApiVersions", apiVersionsDiffCases)
	registerDiffCases("Metadata", metadataDiffCases)
	registerDiffCases("CreateTopics", createTopicsDiffCases)
}

// apiVersionsRequest is an ApiVersions request naming the client.
func apiVersionsRequest(name, version string) func(diffServer) kmsg.Request {
	return func(diffServer) kmsg.Request {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = name, version
		return req
	}
}

// sameAPIKeys compares the versions of the keys mirrord serves: mirrord's
// private keys (1000 and up) and the keys it does not serve are dropped,
// and where mirrord serves fewer versions than Kafka Kafka's maximum is
// lowered to mirrord's (logged). Minimum versions must be Kafka's.
func sameAPIKeys(t *testing.T, fromKafka, fromMirrord kmsg.Response) {
	kafka, mirrord := fromKafka.(*kmsg.ApiVersionsResponse), fromMirrord.(*kmsg.ApiVersionsResponse)
	served := map[int16]kmsg.ApiVersionsResponseApiKey{}
	var kept []kmsg.ApiVersionsResponseApiKey
	for _, k := range mirrord.ApiKeys {
		if k.ApiKey < 1000 {
			served[k.ApiKey] = k
			kept = append(kept, k)
		}
	}
	mirrord.ApiKeys = kept
	kept = nil
	for _, k := range kafka.ApiKeys {
		m, ok := served[k.ApiKey]
		if !ok {
			continue
		}
		if m.MaxVersion < k.MaxVersion {
			t.Logf("%s: mirrord serves up to v%d, Kafka up to v%d", kmsg.NameForKey(k.ApiKey), m.MaxVersion, k.MaxVersion)
			k.MaxVersion = m.MaxVersion
		}
		kept = append(kept, k)
	}
	kafka.ApiKeys = kept
	sameFeatures(t, kafka, mirrord)
}

// sameFeatures compares the features mirrord reports (18_api_versions.go
// says why those): Kafka's other features are dropped, and where mirrord
// supports or finalizes a narrower range Kafka's is narrowed to it
// (logged). Both lists are sorted by name.
func sameFeatures(t *testing.T, kafka, mirrord *kmsg.ApiVersionsResponse) {
	supported := map[string]kmsg.ApiVersionsResponseSupportedFeature{}
	for _, f := range mirrord.SupportedFeatures {
		supported[f.Name] = f
	}
	var keptSupported []kmsg.ApiVersionsResponseSupportedFeature
	for _, k := range kafka.SupportedFeatures {
		m, ok := supported[k.Name]
		if !ok {
			continue
		}
		if m.MinVersion > k.MinVersion || m.MaxVersion < k.MaxVersion {
			t.Logf("feature %s: mirrord supports %d-%d, Kafka %d-%d", k.Name, m.MinVersion, m.MaxVersion, k.MinVersion, k.MaxVersion)
			k.MinVersion, k.MaxVersion = max(k.MinVersion, m.MinVersion), min(k.MaxVersion, m.MaxVersion)
		}
		keptSupported = append(keptSupported, k)
	}
	if kafka.SupportedFeatures != nil {
		kafka.SupportedFeatures = keptSupported
	}
	finalized := map[string]kmsg.ApiVersionsResponseFinalizedFeature{}
	for _, f := range mirrord.FinalizedFeatures {
		finalized[f.Name] = f
	}
	var keptFinalized []kmsg.ApiVersionsResponseFinalizedFeature
	for _, k := range kafka.FinalizedFeatures {
		m, ok := finalized[k.Name]
		if !ok {
			continue
		}
		if m.MaxVersionLevel < k.MaxVersionLevel {
			t.Logf("feature %s: mirrord finalized level %d, Kafka %d", k.Name, m.MaxVersionLevel, k.MaxVersionLevel)
			k.MinVersionLevel, k.MaxVersionLevel = min(k.MinVersionLevel, m.MaxVersionLevel), m.MaxVersionLevel
		}
		keptFinalized = append(keptFinalized, k)
	}
	if kafka.FinalizedFeatures != nil {
		kafka.FinalizedFeatures = keptFinalized
	}
	for _, r := range []*kmsg.ApiVersionsResponse{kafka, mirrord} {
		slices.SortFunc(r.SupportedFeatures, func(a, b kmsg.ApiVersionsResponseSupportedFeature) int { return strings.Compare(a.Name, b.Name) })
		slices.SortFunc(r.FinalizedFeatures, func(a, b kmsg.ApiVersionsResponseFinalizedFeature) int { return strings.Compare(a.Name, b.Name) })
	}
}

// apiVersionsV5 is an ApiVersions v5 request naming the cluster and node
// the client means (KIP-1242) as cluster and node say, from the server's.
func apiVersionsV5(cluster func(diffServer) *string, node func(diffServer) int32) func(diffServer) kmsg.Request {
	return func(server diffServer) kmsg.Request {
		req := apiVersionsRequest("mirrord-e2e", "1.0")(server).(*kmsg.ApiVersionsRequest)
		req.ClusterID, req.NodeID = cluster(server), node(server)
		return req
	}
}

func itsCluster(s diffServer) *string { return &s.clusterID }
func noCluster(diffServer) *string    { return nil }
func otherCluster(diffServer) *string { return stringPtr("AAAAAAAAAAAAAAAAAAAAAA") }
func itsNode(s diffServer) int32      { return s.node }
func noNode(diffServer) int32         { return -1 }
func otherNode(s diffServer) int32    { return s.node + 7 }

var apiVersionsDiffCases = []diffCase{
	{name: "v0", version: 0, request: apiVersionsRequest("", ""), normalise: sameAPIKeys},
	{name: "v3", version: 3, request: apiVersionsRequest("mirrord-e2e", "1.0"), normalise: sameAPIKeys},
	{name: "v4", version: 4, request: apiVersionsRequest("mirrord-e2e", "1.0"), normalise: sameAPIKeys},
	{name: "v3 invalid client name", version: 3, request: apiVersionsRequest("bad name!", "1.0"), normalise: sameAPIKeys},
	{name: "v3 invalid client version", version: 3, request: apiVersionsRequest("mirrord-e2e", "1.0 beta"), normalise: sameAPIKeys},
	{name: "v3 empty client name", version: 3, request: apiVersionsRequest("", "1.0"), normalise: sameAPIKeys},
	{name: "v3 empty client version", version: 3, request: apiVersionsRequest("mirrord-e2e", ""), normalise: sameAPIKeys},
	{name: "v3 client name with dots and dashes", version: 3, request: apiVersionsRequest("a.b-c", "1.0-SNAPSHOT"), normalise: sameAPIKeys},
	{name: "v3 client name ending in a dash", version: 3, request: apiVersionsRequest("abc-", "1.0"), normalise: sameAPIKeys},
	{name: "v5 no cluster no node", version: 5, request: apiVersionsV5(noCluster, noNode), normalise: sameAPIKeys},
	{name: "v5 its cluster and node", version: 5, request: apiVersionsV5(itsCluster, itsNode), normalise: sameAPIKeys},
	{name: "v5 another cluster", version: 5, request: apiVersionsV5(otherCluster, itsNode), normalise: sameAPIKeys},
	{name: "v5 another node", version: 5, request: apiVersionsV5(itsCluster, otherNode), normalise: sameAPIKeys},
	{name: "v5 cluster without node", version: 5, request: apiVersionsV5(itsCluster, noNode), normalise: sameAPIKeys},
	{name: "v5 node without cluster", version: 5, request: apiVersionsV5(noCluster, itsNode), normalise: sameAPIKeys},
}

// metadataRequest asks for topics by name (none: every topic).
func metadataRequest(names ...string) func(diffServer) kmsg.Request {
	return func(diffServer) kmsg.Request {
		req := kmsg.NewPtrMetadataRequest()
		for _, name := range names {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
}

// createTopic is one topic of a CreateTopics request.
type createTopic struct {
	name       string
	partitions int32
	replicas   int16
	configs    map[string]*string
	assignment [][]int32 // replica assignment by partition; -2 means this node
}

// createTopicsRequest creates topics (validateOnly: checks only).
func createTopicsRequest(validateOnly bool, topics ...createTopic) func(diffServer) kmsg.Request {
	return func(server diffServer) kmsg.Request {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis, req.ValidateOnly = 30000, validateOnly
		for _, topic := range topics {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic.name, topic.partitions, topic.replicas
			for name, value := range topic.configs {
				rc := kmsg.NewCreateTopicsRequestTopicConfig()
				rc.Name, rc.Value = name, value
				rt.Configs = append(rt.Configs, rc)
			}
			for partition, replicas := range topic.assignment {
				ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				ra.Partition = int32(partition)
				for _, r := range replicas {
					if r == -2 {
						r = server.node
					}
					ra.Replicas = append(ra.Replicas, r)
				}
				rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
			}
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
}

// setupTopics creates topics (CreateTopics v7) before a case.
func setupTopics(topics ...createTopic) func(diffServer) []kmsg.Request {
	build := createTopicsRequest(false, topics...)
	return func(server diffServer) []kmsg.Request {
		req := build(server)
		req.SetVersion(7)
		return []kmsg.Request{req}
	}
}

func withPrefix(prefix string) func(*testing.T, kmsg.Response, kmsg.Response) {
	return func(_ *testing.T, fromKafka, fromMirrord kmsg.Response) {
		keep := func(name string) bool { return strings.HasPrefix(name, prefix) }
		keepMetadataTopics(fromKafka, keep)
		keepMetadataTopics(fromMirrord, keep)
	}
}

var metadataDiffCases = []diffCase{
	{name: "v12 existing topic", version: 12, setup: setupTopics(createTopic{name: "diff-meta-a", partitions: 3, replicas: 1}),
		request: metadataRequest("diff-meta-a")},
	{name: "v1 existing topic", version: 1, request: metadataRequest("diff-meta-a")},
	{name: "v12 every topic", version: 12, request: metadataRequest(), normalise: withPrefix("diff-meta-")},
	{name: "v12 unknown topic", version: 12, request: func(diffServer) kmsg.Request {
		req := metadataRequest("diff-meta-missing")(diffServer{}).(*kmsg.MetadataRequest)
		req.AllowAutoTopicCreation = false
		return req
	}},
	{name: "v12 invalid topic name", version: 12, request: metadataRequest("diff meta bad")},
	{name: "v12 unknown topic authorized operations", version: 12, request: func(diffServer) kmsg.Request {
		req := metadataRequest("diff-meta-missing")(diffServer{}).(*kmsg.MetadataRequest)
		req.AllowAutoTopicCreation, req.IncludeTopicAuthorizedOperations = false, true
		return req
	}},
	{name: "v8 authorized operations", version: 8, request: func(diffServer) kmsg.Request {
		req := metadataRequest("diff-meta-a")(diffServer{}).(*kmsg.MetadataRequest)
		req.IncludeClusterAuthorizedOperations, req.IncludeTopicAuthorizedOperations = true, true
		return req
	}},
	{name: "v12 authorized operations", version: 12, request: func(diffServer) kmsg.Request {
		req := metadataRequest("diff-meta-a")(diffServer{}).(*kmsg.MetadataRequest)
		req.IncludeTopicAuthorizedOperations = true
		return req
	}},
}

func stringPtr(s string) *string { return &s }

var createTopicsDiffCases = []diffCase{
	{name: "v7 create", version: 7, request: createTopicsRequest(false, createTopic{name: "diff-create-a", partitions: 2, replicas: 1})},
	{name: "v7 already exists", version: 7, request: createTopicsRequest(false, createTopic{name: "diff-create-a", partitions: 2, replicas: 1})},
	{name: "v4 create defaults", version: 4, request: createTopicsRequest(false, createTopic{name: "diff-create-b", partitions: -1, replicas: -1})},
	{name: "v7 create defaults", version: 7, request: createTopicsRequest(false, createTopic{name: "diff-create-c", partitions: -1, replicas: -1})},
	{name: "v7 validate only", version: 7, request: createTopicsRequest(true, createTopic{name: "diff-create-d", partitions: 4, replicas: 1})},
	{name: "v7 validate only defaults", version: 7, request: createTopicsRequest(true, createTopic{name: "diff-create-d", partitions: -1, replicas: -1})},
	{name: "v7 same name twice", version: 7, request: createTopicsRequest(false,
		createTopic{name: "diff-create-twice", partitions: 1, replicas: 1}, createTopic{name: "diff-create-twice", partitions: 2, replicas: 1})},
	{name: "v7 same name twice: nothing created", version: 12, request: metadataRequest("diff-create-twice")},
	{name: "v7 replication factor 0", version: 7, request: createTopicsRequest(false, createTopic{name: "diff-create-rf0", partitions: 1, replicas: 0})},
	{name: "v7 replication factor -2", version: 7, request: createTopicsRequest(false, createTopic{name: "diff-create-rf-2", partitions: 1, replicas: -2})},
	{name: "v7 replication factor 2", version: 7, request: createTopicsRequest(false, createTopic{name: "diff-create-rf2", partitions: 1, replicas: 2})},
	{name: "v7 partitions 0", version: 7, request: createTopicsRequest(false, createTopic{name: "diff-create-p0", partitions: 0, replicas: 1})},
	{name: "v7 null config value", version: 7, request: createTopicsRequest(false,
		createTopic{name: "diff-create-nullcfg", partitions: 1, replicas: 1, configs: map[string]*string{"retention.ms": nil}})},
	{name: "v7 config", version: 7, request: createTopicsRequest(false,
		createTopic{name: "diff-create-cfg", partitions: 1, replicas: 1, configs: map[string]*string{"retention.ms": stringPtr("3600000")}})},
	{name: "v7 colliding name", version: 7, setup: setupTopics(createTopic{name: "diff-create.dot", partitions: 1, replicas: 1}),
		request: createTopicsRequest(false, createTopic{name: "diff-create_dot", partitions: 1, replicas: 1})},
	{name: "v7 invalid name", version: 7, request: createTopicsRequest(false, createTopic{name: "diff create", partitions: 1, replicas: 1})},
	{name: "v7 assignment to this node", version: 7, request: createTopicsRequest(false,
		createTopic{name: "diff-create-assigned", partitions: -1, replicas: -1, assignment: [][]int32{{-2}, {-2}}})},
	{name: "v7 assignment to an unknown broker", version: 7, request: createTopicsRequest(false,
		createTopic{name: "diff-create-unassigned", partitions: -1, replicas: -1, assignment: [][]int32{{4242}}})},
}
