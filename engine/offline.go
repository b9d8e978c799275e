package engine

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Offline partitions (broker/offline.go) as the node shows them: in
// /metrics (Kafka's OfflinePartitionsCount as mirrord_offline_partitions,
// and one mirrord_partition_offline series per offline partition), in
// DescribeClusterMirrors (mirrors --describe, before the mirrors) and on
// the status page. A mirrored partition that is offline is FAILED in its
// mirror as well, waiting for --recover, which rebuilds it from the
// source (mirror_recover.go).

// offlineCollector reads the node's offline partitions at scrape time.
type offlineCollector struct {
	node           *Node
	count, offline *prometheus.Desc
}

func newOfflineCollector(n *Node) *offlineCollector {
	return &offlineCollector{
		node: n,
		count: prometheus.NewDesc("mirrord_offline_partitions",
			"Partitions whose log could not be opened (Kafka's OfflinePartitionsCount): they answer KAFKA_STORAGE_ERROR, "+
				"the others serve. The node's log and mirrors --describe say why.", nil, nil),
		offline: prometheus.NewDesc("mirrord_partition_offline",
			"1 for each partition whose log could not be opened (absent when none is).", []string{"topic", "partition"}, nil),
	}
}

func (c *offlineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.offline
}

func (c *offlineCollector) Collect(ch chan<- prometheus.Metric) {
	offline := c.node.OfflinePartitions()
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(len(offline)))
	for _, p := range offline {
		ch <- prometheus.MustNewConstMetric(c.offline, prometheus.GaugeValue, 1, p.Topic, strconv.Itoa(int(p.Partition)))
	}
}
