package engine

// A cluster's health in /metrics, as Kafka's ReplicaManager and controller
// report it:
//
//	mirrord_partitions_under_replicated  partitions this node leads whose ISR is smaller than their replicas (UnderReplicatedPartitions)
//	mirrord_partitions_offline           partitions without a live leader, counted by the controller alone (OfflinePartitionsCount): 0 on the other nodes
//	mirrord_cluster_live_nodes           the nodes registered in etcd, as this node's cache has them
//	mirrord_cluster_controller           1 on the controller (ActiveControllerCount)
//
// A node alone leads everything with a full ISR and is its own controller:
// 0, 0, 1, 1.

import (
	"github.com/prometheus/client_golang/prometheus"
)

type clusterCollector struct {
	n                                               *Node
	underReplicated, offline, liveNodes, controller *prometheus.Desc
}

func newClusterCollector(n *Node) *clusterCollector {
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &clusterCollector{n: n,
		underReplicated: desc("mirrord_partitions_under_replicated", "Partitions this node leads whose in-sync replicas are fewer than their replicas (Kafka's UnderReplicatedPartitions)."),
		offline:         desc("mirrord_partitions_offline", "Partitions with no live leader, counted by the cluster's controller (Kafka's OfflinePartitionsCount); 0 on the other nodes."),
		liveNodes:       desc("mirrord_cluster_live_nodes", "The cluster's registered nodes, as this node's view of etcd has them (1 alone)."),
		controller:      desc("mirrord_cluster_controller", "1 on the cluster's controller (Kafka's ActiveControllerCount), else 0; 1 alone."),
	}
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.underReplicated
	ch <- c.offline
	ch <- c.liveNodes
	ch <- c.controller
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	m := c.n.member
	if m == nil || m.cache == nil {
		gauge(c.underReplicated, 0)
		gauge(c.offline, 0)
		gauge(c.liveNodes, 1)
		gauge(c.controller, 1)
		return
	}
	self := m.cfg.NodeID
	live := map[int32]bool{}
	for _, ln := range m.cache.LiveNodes() {
		live[ln.ID] = true
	}
	isController := m.cache.ControllerID() == self
	under, offline := 0, 0
	parts, _ := m.cache.Partitions()
	for _, st := range parts {
		if st.Leader == self && len(st.ISR) < len(st.Replicas) {
			under++
		}
		if isController && !live[st.Leader] {
			offline++
		}
	}
	gauge(c.underReplicated, under)
	gauge(c.offline, offline)
	gauge(c.liveNodes, len(live))
	gauge(c.controller, map[bool]int{true: 1}[isController])
}
