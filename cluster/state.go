package cluster

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// clusterState is one consistent read of a cluster's prefix at one etcd
// revision (readState), or the cache's copy of it kept by the watch: the
// registry, the drain marks, the controller candidates, the topic specs and
// the partitions.
type clusterState struct {
	nodes      map[int32]Node
	drained    map[int32]bool                    // drain/<id> marks, of live nodes or not
	candidates map[string]candidate              // the election's keys, by key
	topics     map[string]TopicState             // topics/<topic>
	partitions map[TopicPartition]PartitionState // topics/<topic>/partitions/<n>
	mirrors    map[string]MirrorState            // mirrors/<name>
	// mirrorStates: mirrors/<name>/state/<topicID>/<n> (mirror_states.go)
	mirrorStates map[MirrorPartition]MirrorPartitionRecord
	revision     int64
}

// candidate is one key of the controller election: the candidate with the
// lowest create revision is the controller.
type candidate struct {
	nodeID         int32
	createRevision int64
}

func newClusterState() clusterState {
	return clusterState{
		nodes:      make(map[int32]Node),
		drained:    make(map[int32]bool),
		candidates: make(map[string]candidate),
		topics:     make(map[string]TopicState),
		partitions: make(map[TopicPartition]PartitionState),
		mirrors:    make(map[string]MirrorState),

		mirrorStates: make(map[MirrorPartition]MirrorPartitionRecord),
	}
}

// clone returns a copy that shares nothing mutable with s (assignments and
// specs are replaced whole on each put, never changed in place).
func (s clusterState) clone() clusterState {
	return clusterState{
		nodes:      maps.Clone(s.nodes),
		drained:    maps.Clone(s.drained),
		candidates: maps.Clone(s.candidates),
		topics:     maps.Clone(s.topics),
		partitions: maps.Clone(s.partitions),
		mirrors:    maps.Clone(s.mirrors),

		mirrorStates: maps.Clone(s.mirrorStates),
		revision:     s.revision,
	}
}

// liveNodes returns the registered nodes by ID, each with its drain mark.
func (s clusterState) liveNodes() []Node {
	out := make([]Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		n.Drained = s.drained[n.ID]
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func (s clusterState) assignments() Assignments {
	out := make(Assignments, len(s.partitions))
	for tp, p := range s.partitions {
		out[tp] = p.Assignment
	}
	return out
}

// controllerID is the node ID of the election's leader: the candidate
// with the lowest create revision, NoLeader when there is none.
func (s clusterState) controllerID() int32 {
	id, lowest := NoLeader, int64(0)
	for _, c := range s.candidates {
		if lowest == 0 || c.createRevision < lowest {
			id, lowest = c.nodeID, c.createRevision
		}
	}
	return id
}

// readState reads the whole cluster prefix in one Get, so that everything
// in it is of the same revision.
func readState(ctx context.Context, client *clientv3.Client, clusterID string) (clusterState, error) {
	resp, err := client.Get(ctx, clusterPrefix(clusterID), clientv3.WithPrefix())
	if err != nil {
		return clusterState{}, fmt.Errorf("cluster: read %s: %w", clusterPrefix(clusterID), err)
	}
	state := newClusterState()
	state.revision = resp.Header.Revision
	for _, kv := range resp.Kvs {
		if err := state.put(clusterID, string(kv.Key), kv.Value, kv.CreateRevision, kv.ModRevision); err != nil {
			return clusterState{}, err
		}
	}
	return state, nil
}

// put sets one key's value in the state; keys of the prefix that are none
// of the state's are skipped.
func (s *clusterState) put(clusterID, key string, value []byte, createRevision, modRevision int64) error {
	switch {
	case strings.HasPrefix(key, nodesPrefix(clusterID)):
		n, err := decodeNode(clusterID, key, value)
		if err != nil {
			return err
		}
		s.nodes[n.ID] = n
	case strings.HasPrefix(key, drainPrefix(clusterID)):
		id, err := parseDrainKey(clusterID, key)
		if err != nil {
			return err
		}
		s.drained[id] = true
	case strings.HasPrefix(key, controllerPrefix(clusterID)+"/"):
		id, err := parseNodeID(string(value))
		if err != nil {
			return fmt.Errorf("cluster: controller candidate %q: %w", key, err)
		}
		s.candidates[key] = candidate{nodeID: id, createRevision: createRevision}
	case strings.HasPrefix(key, topicsPrefix(clusterID)):
		topic, tp, isPartition, err := parseTopicKey(clusterID, key)
		if err != nil {
			return err
		}
		if !isPartition {
			spec, err := decodeTopicSpec(topic, value)
			if err != nil {
				return err
			}
			s.topics[topic] = TopicState{TopicSpec: spec, ModRevision: modRevision}
			return nil
		}
		a, err := decodeAssignment(tp, value)
		if err != nil {
			return err
		}
		s.partitions[tp] = PartitionState{Assignment: a, ModRevision: modRevision}
	case strings.HasPrefix(key, mirrorsPrefix(clusterID)):
		if p, ok := parseMirrorStateKey(clusterID, key); ok {
			s.mirrorStates[p] = MirrorPartitionRecord{Value: value, ModRevision: modRevision}
			return nil
		}
		name, ok := parseMirrorKey(clusterID, key)
		if !ok {
			return nil // another key below a mirror's: not the cache's
		}
		spec, err := decodeMirrorSpec(name, value)
		if err != nil {
			return err
		}
		s.mirrors[name] = MirrorState{MirrorSpec: spec, CreateRevision: createRevision, ModRevision: modRevision}
	}
	return nil
}

// remove deletes one key from the state.
func (s *clusterState) remove(clusterID, key string) error {
	switch {
	case strings.HasPrefix(key, nodesPrefix(clusterID)):
		id, err := parseNodeKey(clusterID, key)
		if err != nil {
			return err
		}
		delete(s.nodes, id)
	case strings.HasPrefix(key, drainPrefix(clusterID)):
		id, err := parseDrainKey(clusterID, key)
		if err != nil {
			return err
		}
		delete(s.drained, id)
	case strings.HasPrefix(key, controllerPrefix(clusterID)+"/"):
		delete(s.candidates, key)
	case strings.HasPrefix(key, topicsPrefix(clusterID)):
		topic, tp, isPartition, err := parseTopicKey(clusterID, key)
		if err != nil {
			return err
		}
		if isPartition {
			delete(s.partitions, tp)
		} else {
			delete(s.topics, topic)
		}
	case strings.HasPrefix(key, mirrorsPrefix(clusterID)):
		if p, ok := parseMirrorStateKey(clusterID, key); ok {
			delete(s.mirrorStates, p)
		} else if name, ok := parseMirrorKey(clusterID, key); ok {
			delete(s.mirrors, name)
		}
	}
	return nil
}

// Snapshot is one consistent read of a cluster, for the operator's tools
// (mirrord nodes): who is live and drained, who controls, where every
// partition is led.
type Snapshot struct {
	Revision     int64
	Nodes        []Node // the live nodes by ID, with their drain marks
	Drained      []int32
	ControllerID int32 // NoLeader when none
	Topics       map[string]TopicSpec
	Partitions   map[TopicPartition]PartitionState
}

// Read reads a cluster's whole state at one revision.
func Read(ctx context.Context, client *clientv3.Client, clusterID string) (Snapshot, error) {
	s, err := readState(ctx, client, clusterID)
	if err != nil {
		return Snapshot{}, err
	}
	topics := make(map[string]TopicSpec, len(s.topics))
	for name, t := range s.topics {
		topics[name] = t.TopicSpec.clone()
	}
	return Snapshot{Revision: s.revision, Nodes: s.liveNodes(), Drained: slices.Sorted(maps.Keys(s.drained)),
		ControllerID: s.controllerID(), Topics: topics, Partitions: maps.Clone(s.partitions)}, nil
}
