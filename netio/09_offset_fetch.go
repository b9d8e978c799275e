package netio

// OffsetFetch, versions 1-9 (v0 was removed in Kafka 4.0, KIP-896; v8+
// asks for several groups, KIP-709; v10, with topic IDs, is not served).
// The group coordinator (Backend.Groups) answers it whole. No answer (the
// coordinator closed) is COORDINATOR_NOT_AVAILABLE: per group from v8, at
// the top level from v2, and per partition asked for below v8.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const offsetFetchGroupsVersion = 8

func serveOffsetFetch(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	asked, denied := *req, []string(nil)
	asked.Groups = nil
	for _, rg := range req.Groups { // v8+
		if c.authorize(opDescribe, resourceGroup, rg.Group) {
			asked.Groups = append(asked.Groups, rg)
		} else {
			denied = append(denied, rg.Group)
		}
	}
	resp, err := unlessDenied(req.Version >= offsetFetchGroupsVersion || c.authorize(opDescribe, resourceGroup, req.Group), kerr.GroupAuthorizationFailed,
		func() (*kmsg.OffsetFetchResponse, error) {
			if req.Version >= offsetFetchGroupsVersion && len(asked.Groups) == 0 {
				return req.ResponseKind().(*kmsg.OffsetFetchResponse), nil // every group denied
			}
			return c.server.backend.Groups().OffsetFetch(ctx, &asked)
		})
	if err == nil {
		for _, name := range denied {
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
