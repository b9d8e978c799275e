package e2e

// What legitimately differs between Kafka's and mirrord's answers, made
// equal before they are compared: node IDs (mapped to 100, 101, ... in
// the order the answer lists its brokers), hosts and ports, cluster IDs,
// topic IDs (a non-zero ID becomes diffTopicID: zero stays zero), throttle
// times, the metadata epoch of finalized features, and error message
// texts (a non-null message becomes diffMessage: null stays null), the
// order of configs (diff_configs_test.go).

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	diffNodeIDBase = 100
	diffHost       = "host"
	diffClusterID  = "cluster"
	diffMessage    = "(message)"
)

var diffTopicID = [16]byte{0xd1, 0xff}

// normaliseResponse makes the fields that legitimately differ equal.
func normaliseResponse(resp kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.ApiVersionsResponse:
		r.ThrottleMillis = 0
		if r.FinalizedFeaturesEpoch >= 0 {
			r.FinalizedFeaturesEpoch = 0
		}
	case *kmsg.MetadataResponse:
		r.ThrottleMillis = 0
		nodes := nodeIDMap{}
		for i := range r.Brokers {
			b := &r.Brokers[i]
			b.NodeID = nodes.add(b.NodeID)
			b.Host, b.Port = diffHost, 0
		}
		r.ControllerID = nodes.of(r.ControllerID)
		normaliseString(r.ClusterID, diffClusterID)
		for i := range r.Topics {
			topic := &r.Topics[i]
			normaliseTopicID(&topic.TopicID)
			for j := range topic.Partitions {
				p := &topic.Partitions[j]
				p.Leader = nodes.of(p.Leader)
				nodes.all(p.Replicas)
				nodes.all(p.ISR)
				nodes.all(p.OfflineReplicas)
			}
		}
		sortMetadataTopics(r.Topics)
	case *kmsg.CreateTopicsResponse:
		r.ThrottleMillis = 0
		for i := range r.Topics {
			topic := &r.Topics[i]
			normaliseTopicID(&topic.TopicID)
			normaliseString(topic.ErrorMessage, diffMessage)
			sort.Slice(topic.Configs, func(a, b int) bool { return topic.Configs[a].Name < topic.Configs[b].Name })
		}
	case *kmsg.DescribeConfigsResponse, *kmsg.AlterConfigsResponse, *kmsg.IncrementalAlterConfigsResponse:
		normaliseConfigs(resp)
	case *kmsg.DescribeClusterResponse:
		r.ThrottleMillis = 0
		nodes := nodeIDMap{}
		for i := range r.Brokers {
			b := &r.Brokers[i]
			b.NodeID = nodes.add(b.NodeID)
			b.Host, b.Port = diffHost, 0
		}
		r.ControllerID = nodes.of(r.ControllerID)
		r.ClusterID = diffClusterID
		normaliseString(r.ErrorMessage, diffMessage)
	}
}

// nodeIDMap maps a response's node IDs to diffNodeIDBase + the order of
// their first listing; IDs never listed (-1, or an unknown one) stay.
type nodeIDMap map[int32]int32

func (m nodeIDMap) add(id int32) int32 {
	if mapped, ok := m[id]; ok {
		return mapped
	}
	m[id] = diffNodeIDBase + int32(len(m))
	return m[id]
}

func (m nodeIDMap) of(id int32) int32 {
	if mapped, ok := m[id]; ok {
		return mapped
	}
	return id
}

func (m nodeIDMap) all(ids []int32) {
	for i, id := range ids {
		ids[i] = m.of(id)
	}
}

func normaliseString(s *string, to string) {
	if s != nil {
		*s = to
	}
}

func normaliseTopicID(id *[16]byte) {
	if *id != [16]byte{} {
		*id = diffTopicID
	}
}

// sortMetadataTopics orders topics by name (then by ID): the order of an
// all-topics answer is not part of the protocol.
func sortMetadataTopics(topics []kmsg.MetadataResponseTopic) {
	name := func(t kmsg.MetadataResponseTopic) string {
		if t.Topic == nil {
			return ""
		}
		return *t.Topic
	}
	sort.SliceStable(topics, func(i, j int) bool { return name(topics[i]) < name(topics[j]) })
}

// keepMetadataTopics drops the topics of an answer whose names keep
// refuses (for all-topics cases: the other sets' topics).
func keepMetadataTopics(resp kmsg.Response, keep func(name string) bool) {
	r := resp.(*kmsg.MetadataResponse)
	kept := r.Topics[:0]
	for _, t := range r.Topics {
		if t.Topic != nil && keep(*t.Topic) {
			kept = append(kept, t)
		}
	}
	r.Topics = kept
}
