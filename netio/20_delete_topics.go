package netio

// DeleteTopics, versions 1-6. Topics are named (v1-5 by name; v6 by name
// or by topic ID, KIP-516) and deleted one by one with Backend.DeleteTopic;
// the answers follow the request's order (Kafka shuffles them). Checks as
// in Kafka's ControllerApis.deleteTopics, each INVALID_REQUEST: an entry
// with neither name nor ID, an entry with both, a name or ID listed twice
// (one answer for it), and a name that resolves to an ID also listed (both
// entries; Kafka answers only the name). An unknown name is
// UNKNOWN_TOPIC_OR_PARTITION, an unknown ID UNKNOWN_TOPIC_ID. A deleted
// topic is answered with its name and ID; v5+ errors carry a message.
// TimeoutMillis is not used: the backend deletes before answering.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/acl"
)

const deleteTopicsByIDVersion = 6

// deleteTarget is one topic a DeleteTopics request names, and what it
// resolved to.
type deleteTarget struct {
	name  *string // nil when named by ID
	id    TopicID
	topic TopicInfo
	err   error // set when the entry is refused or its deletion failed
}

func serveDeleteTopics(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	targets := resolveDeleteTargets(c.server.backend, req)
	for i := range targets {
		authorizeDeleteTarget(c, &targets[i])
	}
	markNameIDCollisions(targets) // only among authorized targets: a denied one tells nothing of its ID
	for i := range targets {
		target := &targets[i]
		if target.err == nil {
			target.err = c.server.backend.DeleteTopic(ctx, target.topic.Name)
		}
		resp.Topics = append(resp.Topics, deleteTopicAnswer(c, target))
	}
	return resp, nil
}

// authorizeDeleteTarget refuses a target the client may not delete, as
// ControllerApis.deleteTopics does: DELETE on the cluster allows every
// topic; otherwise a name the client may not DESCRIBE is
// TOPIC_AUTHORIZATION_FAILED whether or not it exists, and one it may
// describe but not DELETE too, both answered with the zero topic ID. A
// topic named by ID that the client may not DELETE keeps the request's ID
// and is answered by name only when the client may DESCRIBE it. The
// message is Kafka's Errors.TOPIC_AUTHORIZATION_FAILED.message().
func authorizeDeleteTarget(c *conn, target *deleteTarget) {
	byName := target.name != nil && target.id == (TopicID{})
	if !byName && target.err != nil || byName && target.err != nil && !errors.Is(target.err, kerr.UnknownTopicOrPartition) {
		return // a mistake of the request, or an unknown ID: never authorized
	}
	if c.authorizeQuietly(opDelete, resourceCluster, acl.ClusterName) {
		return
	}
	name := target.topic.Name
	if byName {
		name = *target.name
	}
	describable := c.authorize(opDescribe, resourceTopic, name)
	if byName && describable && target.err != nil {
		return // UNKNOWN_TOPIC_OR_PARTITION, told only to who may describe it
	}
	if describable && c.authorize(opDelete, resourceTopic, name) {
		return
	}
	target.err = refuse(kerr.TopicAuthorizationFailed, "Topic authorization failed.")
	target.topic = TopicInfo{}
	if !byName && describable {
		target.name = &name
	}
}

// resolveDeleteTargets turns the request's entries into targets, with the
// request's own mistakes marked (but for a name and an ID of the same
// topic: markNameIDCollisions, once authorized). Duplicates are answered
// once.
func resolveDeleteTargets(backend Backend, req *kmsg.DeleteTopicsRequest) []deleteTarget {
	var targets []deleteTarget
	if req.Version < deleteTopicsByIDVersion {
		for _, name := range req.TopicNames {
			targets = append(targets, deleteTarget{name: &name})
		}
	} else {
		for _, rt := range req.Topics {
			targets = append(targets, deleteTarget{name: rt.Topic, id: rt.TopicID})
		}
	}
	names := map[string]int{} // bounded by the request
	ids := map[TopicID]int{}
	for _, target := range targets {
		switch {
		case target.name != nil && target.id == (TopicID{}):
			names[*target.name]++
		case target.name == nil && target.id != (TopicID{}):
			ids[target.id]++
		}
	}
	seenNames, seenIDs := map[string]bool{}, map[TopicID]bool{}
	out := targets[:0]
	for _, target := range targets {
		switch {
		case target.name != nil && target.id == (TopicID{}):
			if seenNames[*target.name] {
				continue
			}
			seenNames[*target.name] = true
		case target.name == nil && target.id != (TopicID{}):
			if seenIDs[target.id] {
				continue
			}
			seenIDs[target.id] = true
		}
		out = append(out, checkDeleteTarget(backend, target, names, ids))
	}
	return out
}

func checkDeleteTarget(backend Backend, target deleteTarget, names map[string]int, ids map[TopicID]int) deleteTarget {
	var ok bool
	switch {
	case target.name == nil && target.id == (TopicID{}):
		target.err = refuse(kerr.InvalidRequest, "Neither topic name nor id were specified.")
	case target.name != nil && target.id != (TopicID{}):
		target.err = refuse(kerr.InvalidRequest, "You may not specify both topic name and topic id.")
	case target.name != nil && names[*target.name] > 1:
		target.err = refuse(kerr.InvalidRequest, "Duplicate topic name.")
	case target.name == nil && ids[target.id] > 1:
		target.err = refuse(kerr.InvalidRequest, "Duplicate topic id.")
	case target.name != nil:
		if target.topic, ok = backend.Topic(*target.name); !ok {
			target.err = kerr.UnknownTopicOrPartition
		}
	default:
		if target.topic, ok = backend.TopicByID(target.id); !ok {
			target.err = kerr.UnknownTopicID
		}
	}
	return target
}

// markNameIDCollisions refuses a topic named both by name and by ID.
func markNameIDCollisions(targets []deleteTarget) {
	byName, byID := map[TopicID]bool{}, map[TopicID]bool{}
	for _, target := range targets {
		if target.err == nil && target.name != nil {
			byName[target.topic.ID] = true
		} else if target.err == nil {
			byID[target.topic.ID] = true
		}
	}
	for i := range targets {
		if target := &targets[i]; target.err == nil && byName[target.topic.ID] && byID[target.topic.ID] {
			target.err = refuse(kerr.InvalidRequest, "The provided topic name maps to an ID that was already supplied.")
		}
	}
}

func deleteTopicAnswer(c *conn, target *deleteTarget) kmsg.DeleteTopicsResponseTopic {
	st := kmsg.NewDeleteTopicsResponseTopic()
	st.Topic, st.TopicID = target.name, target.id
	if target.topic.Name != "" {
		name := target.topic.Name
		st.Topic, st.TopicID = &name, target.topic.ID
	}
	if target.err != nil {
		st.ErrorCode = errorCode(c.server.log, target.err, kerr.UnknownServerError)
		message := target.err.Error()
		st.ErrorMessage = &message
	}
	return st
}
