package netio

// CreateTopics, versions 2-7. Creates writable topics on this node. A
// partition count of -1 means 1 (num.partitions); a replication factor
// above 1 cannot be met by one node (INVALID_REPLICATION_FACTOR). Replica
// assignments are refused (INVALID_REQUEST). v5+ answers with the
// partition count, replication factor and configs; v7 with the topic ID.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const defaultPartitions = 1

func serveCreateTopics(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		partitions := rt.NumPartitions
		if partitions == -1 {
			partitions = defaultPartitions
		}
		configs := map[string]string{}
		for _, cfg := range rt.Configs {
			if cfg.Value != nil {
				configs[cfg.Name] = *cfg.Value
			}
		}
		var err error
		switch {
		case len(rt.ReplicaAssignment) > 0:
			err = kerr.InvalidRequest
		case rt.ReplicationFactor > 1:
			err = kerr.InvalidReplicationFactor
		case partitions <= 0 || partitions > maxPartitionsPerRequest:
			err = fmt.Errorf("%w: %d partitions, at most %d at a time", kerr.InvalidPartitions, partitions, maxPartitionsPerRequest)
		}
		var t TopicInfo
		if err == nil {
			t, err = c.server.backend.CreateTopic(ctx, rt.Topic, partitions, configs, req.ValidateOnly)
		}
		if err != nil {
			st.ErrorCode = errorCode(c.server.log, err, kerr.UnknownServerError)
			message := err.Error()
			st.ErrorMessage = &message
		} else {
			st.TopicID, st.NumPartitions, st.ReplicationFactor = t.ID, t.Partitions, 1
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
