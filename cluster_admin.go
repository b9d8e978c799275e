package mirrord

// The operator's view of a cluster, read from etcd: `mirrord nodes`. It
// needs no node to answer (a cluster whose nodes are all down can still be
// read), only etcd.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mirrord/mirrord/cluster"
)

// ClusterReport is a cluster's nodes as etcd has them.
type ClusterReport struct {
	ClusterID    string              `json:"clusterId"`
	ControllerID int32               `json:"controllerId"` // -1: none
	Nodes        []ClusterNodeReport `json:"nodes"`
	// Offline counts the partitions with no live leader.
	Offline int `json:"offlinePartitions"`
	// UnderReplicated counts the partitions whose ISR is smaller than
	// their replicas.
	UnderReplicated int `json:"underReplicatedPartitions"`
}

// ClusterNodeReport is one node: live (registered under its lease) or
// not (a replica of some partition, or drained, but down).
type ClusterNodeReport struct {
	ID         int32  `json:"id"`
	Host       string `json:"host,omitempty"`
	Port       int32  `json:"port,omitempty"`
	Rack       string `json:"rack,omitempty"`
	Live       bool   `json:"live"`
	Drained    bool   `json:"drained"`
	Controller bool   `json:"controller"`
	Leaders    int    `json:"leaders"`  // partitions it leads
	Replicas   int    `json:"replicas"` // partitions it holds a replica of
}

// ErrNoCluster is ReadCluster's error for an etcd no mirrord node has
// joined.
var ErrNoCluster = errors.New("mirrord: no mirrord cluster in this etcd")

// withEtcd runs f with a client of the etcd at endpoints and the cluster
// ID it holds.
func withEtcd(ctx context.Context, endpoints []string, f func(client *clientv3.Client, clusterID string) error) error {
	client, err := cluster.NewClient(endpoints, 5*time.Second)
	if err != nil {
		return fmt.Errorf("mirrord: %w", err)
	}
	defer client.Close()
	id, ok, err := cluster.ClusterID(ctx, client)
	if err != nil {
		return fmt.Errorf("mirrord: etcd at %v: %w", endpoints, err)
	}
	if !ok {
		return fmt.Errorf("%w at %v", ErrNoCluster, endpoints)
	}
	return f(client, id)
}

// ReadCluster reads the cluster kept in the etcd at endpoints.
func ReadCluster(ctx context.Context, endpoints []string) (ClusterReport, error) {
	var r ClusterReport
	err := withEtcd(ctx, endpoints, func(client *clientv3.Client, id string) error {
		s, err := cluster.Read(ctx, client, id)
		if err != nil {
			return err
		}
		r = clusterReport(id, s)
		return nil
	})
	return r, err
}

func clusterReport(id string, s cluster.Snapshot) ClusterReport {
	r := ClusterReport{ClusterID: id, ControllerID: s.ControllerID}
	nodes := map[int32]*ClusterNodeReport{}
	node := func(id int32) *ClusterNodeReport {
		if nodes[id] == nil {
			nodes[id] = &ClusterNodeReport{ID: id, Controller: id == s.ControllerID}
		}
		return nodes[id]
	}
	for _, n := range s.Nodes {
		nr := node(n.ID)
		nr.Host, nr.Port, nr.Rack, nr.Live = n.Host, n.Port, n.Rack, true
	}
	for _, id := range s.Drained {
		node(id).Drained = true
	}
	for _, p := range s.Partitions {
		for _, id := range p.Replicas {
			node(id).Replicas++
		}
		if p.Leader == cluster.NoLeader || !node(p.Leader).Live {
			r.Offline++
		} else {
			node(p.Leader).Leaders++
		}
		if len(p.ISR) < len(p.Replicas) {
			r.UnderReplicated++
		}
	}
	for _, n := range nodes {
		r.Nodes = append(r.Nodes, *n)
	}
	slices.SortFunc(r.Nodes, func(a, b ClusterNodeReport) int { return cmp.Compare(a.ID, b.ID) })
	return r
}

// DrainNode marks node id drained (drain true) or clears the mark: the
// controller moves the node's leaderships to other in-sync replicas and
// places nothing new on it, until the mark is cleared. The mark outlives
// the node's restarts.
func DrainNode(ctx context.Context, endpoints []string, id int32, drain bool) error {
	return withEtcd(ctx, endpoints, func(client *clientv3.Client, clusterID string) error {
		return cluster.Drain(ctx, client, clusterID, id, drain)
	})
}
