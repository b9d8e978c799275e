package netio

// CreatePartitions, versions 0-3. Grows topics (Backend.CreatePartitions),
// with the checks and messages of Kafka's ControllerApis.createPartitions
// and ReplicationControlManager.createPartitions: a topic listed twice is
// INVALID_REQUEST (answered once), an unknown one
// UNKNOWN_TOPIC_OR_PARTITION, a count that is not an increase
// INVALID_PARTITIONS. Explicit assignments must name one replica set per
// new partition, each exactly this node (replication factor 1), else
// INVALID_REPLICA_ASSIGNMENT. One request may add at most
// maxPartitionsPerRequest partitions in all (Kafka's bound on the records
// of one controller operation); a topic that would pass it is
// POLICY_VIOLATION. ValidateOnly checks without creating. Errors carry a
// message.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxPartitionsPerRequest bounds the partitions one CreatePartitions
// request adds (QuorumController.MAX_RECORDS_PER_USER_OP).
const maxPartitionsPerRequest = 10000

// refusal is a Kafka error code with Kafka's message for the case.
type refusal struct {
	code    *kerr.Error
	message string
}

func (e *refusal) Error() string { return e.message }
func (e *refusal) Unwrap() error { return e.code }

func refuse(code *kerr.Error, format string, args ...any) error {
	return &refusal{code: code, message: fmt.Sprintf(format, args...)}
}

func serveCreatePartitions(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	listed := make(map[string]int, len(req.Topics))
	for _, rt := range req.Topics {
		listed[rt.Topic]++
	}
	answered := make(map[string]bool, len(req.Topics))
	added := int64(0)
	for _, rt := range req.Topics {
		if answered[rt.Topic] {
			continue
		}
		answered[rt.Topic] = true
		var err error
		if listed[rt.Topic] > 1 {
			err = refuse(kerr.InvalidRequest, "Duplicate topic name.")
		} else if !c.authorize(opAlter, resourceTopic, rt.Topic) {
			err = kerr.TopicAuthorizationFailed
		} else {
			err = createPartitions(ctx, c, rt, req.ValidateOnly, &added)
		}
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		if err != nil {
			st.ErrorCode = errorCode(c.server.log, err, kerr.UnknownServerError)
			message := err.Error()
			st.ErrorMessage = &message
		}
		if errors.Is(err, kerr.TopicAuthorizationFailed) { // ControllerApis.createPartitions sets the code alone
			st.ErrorMessage = nil
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// createPartitions checks and grows one topic; added counts the
// partitions the request has added so far.
func createPartitions(ctx context.Context, c *conn, rt kmsg.CreatePartitionsRequestTopic, validateOnly bool, added *int64) error {
	backend := c.server.backend
	t, ok := backend.Topic(rt.Topic)
	switch {
	case !ok:
		return kerr.UnknownTopicOrPartition
	case rt.Count == t.Partitions:
		return refuse(kerr.InvalidPartitions, "Topic already has %d partition(s).", t.Partitions)
	case rt.Count < t.Partitions:
		return refuse(kerr.InvalidPartitions, "The topic %s currently has %d partition(s); %d would not be an increase.", rt.Topic, t.Partitions, rt.Count)
	}
	additional := rt.Count - t.Partitions
	if err := checkAssignment(rt.Assignment, additional, backend.Cluster().NodeID); err != nil {
		return err
	}
	if *added+int64(additional) > maxPartitionsPerRequest {
		return refuse(kerr.PolicyViolation, "Unable to perform excessively large batch operation.")
	}
	if err := backend.CreatePartitions(ctx, rt.Topic, rt.Count, validateOnly); err != nil {
		return err
	}
	*added += int64(additional)
	return nil
}

// checkAssignment accepts no assignment, or one replica list per new
// partition naming only this node.
func checkAssignment(assignment []kmsg.CreatePartitionsRequestTopicAssignment, additional, node int32) error {
	if assignment == nil {
		return nil
	}
	if len(assignment) != int(additional) {
		return refuse(kerr.InvalidReplicaAssignment, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", additional, len(assignment))
	}
	for _, a := range assignment {
		switch {
		case len(a.Replicas) == 0:
			return refuse(kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
		case len(a.Replicas) != 1:
			return refuse(kerr.InvalidReplicaAssignment, "The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have 1 replica(s).", len(a.Replicas))
		case a.Replicas[0] != node:
			return refuse(kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no such broker is registered.", a.Replicas[0])
		}
	}
	return nil
}
