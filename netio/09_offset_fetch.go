package netio

// OffsetFetch, versions 1-9 (v0 was removed in Kafka 4.0, KIP-896; v8+
// asks for several groups, KIP-709; v10, with topic IDs, is not served).
// The group coordinator (Backend.Groups) answers it whole. No answer (the
// coordinator closed) is COORDINATOR_NOT_AVAILABLE: per group from v8, at
// the top level from v2, and per partition asked for below v8.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const offsetFetchGroupsVersion = 8

func serveOffsetFetch(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	asked, deniedGroups := *req, []string(nil)
	asked.Groups = nil
	deniedTopics := map[string][]kmsg.OffsetFetchRequestGroupTopic{} // by group, bounded by the request
	for _, rg := range req.Groups {                                  // v8+
		if !c.authorize(opDescribe, resourceGroup, rg.Group) {
			deniedGroups = append(deniedGroups, rg.Group)
			continue
		}
		if rg.Topics != nil {
			allowed, denied := splitTopicsByAuthorized(c, opDescribe, rg.Topics, func(rt kmsg.OffsetFetchRequestGroupTopic) string { return rt.Topic })
			rg.Topics, deniedTopics[rg.Group] = append([]kmsg.OffsetFetchRequestGroupTopic{}, allowed...), denied
		}
		asked.Groups = append(asked.Groups, rg)
	}
	var deniedV7 []kmsg.OffsetFetchRequestTopic // below v8
	if req.Version < offsetFetchGroupsVersion && req.Topics != nil {
		allowed, denied := splitTopicsByAuthorized(c, opDescribe, req.Topics, func(rt kmsg.OffsetFetchRequestTopic) string { return rt.Topic })
		asked.Topics, deniedV7 = append([]kmsg.OffsetFetchRequestTopic{}, allowed...), denied
	}
	resp, err := unlessDenied(req.Version >= offsetFetchGroupsVersion || c.authorize(opDescribe, resourceGroup, req.Group), kerr.GroupAuthorizationFailed,
		func() (*kmsg.OffsetFetchResponse, error) {
			if req.Version >= offsetFetchGroupsVersion && len(asked.Groups) == 0 {
				return req.ResponseKind().(*kmsg.OffsetFetchResponse), nil // every group denied
			}
			return c.server.backend.Groups().OffsetFetch(ctx, &asked)
		})
	if err == nil {
		hideDeniedOffsets(c, req, resp, deniedTopics, deniedV7)
		for _, name := range deniedGroups {
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group, sg.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, sg)
		}
	}
	if err == nil {
		return resp, nil
	}
	code := errorCode(c.server.log, err, kerr.CoordinatorNotAvailable)
	resp = req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= offsetFetchGroupsVersion {
		for _, rg := range req.Groups {
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group, sg.ErrorCode = rg.Group, code
			resp.Groups = append(resp.Groups, sg)
		}
		return resp, nil
	}
	resp.ErrorCode = code
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = p, -1, -1, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// hideDeniedOffsets is Kafka's topic check of an OffsetFetch answer
// (KafkaApis.fetchOffsetsForGroup, fetchAllOffsetsForGroup): a group asked
// for all its offsets answers only the topics the client may DESCRIBE;
// one asked for named topics answers the denied ones after the others,
// each partition TOPIC_AUTHORIZATION_FAILED with offset -1. A group in
// error is answered as the coordinator answered it.
func hideDeniedOffsets(c *conn, req *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse,
	deniedTopics map[string][]kmsg.OffsetFetchRequestGroupTopic, deniedV7 []kmsg.OffsetFetchRequestTopic) {
	if c.server.cfg.Authorizer == nil {
		return
	}
	if req.Version < offsetFetchGroupsVersion {
		if resp.ErrorCode != 0 {
			return
		}
		if req.Topics == nil {
			resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.OffsetFetchResponseTopic) bool {
				return !c.authorizeQuietly(opDescribe, resourceTopic, t.Topic)
			})
		}
		for _, rt := range deniedV7 {
			st := kmsg.NewOffsetFetchResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewOffsetFetchResponseTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = p, -1, -1, kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return
	}
	for i := range resp.Groups {
		g := &resp.Groups[i]
		denied, named := deniedTopics[g.Group]
		if g.ErrorCode != 0 {
			continue
		}
		if !named {
			g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool {
				return !c.authorizeQuietly(opDescribe, resourceTopic, t.Topic)
			})
			continue
		}
		for _, rt := range denied {
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = p, -1, -1, kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			g.Topics = append(g.Topics, st)
		}
	}
}
