package engine

import (
	"context"
	"strconv"
	"time"

	"github.com/mirrord/mirrord/engine/mirrorstate"

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

// offlineActions is the event that answers a round's actions of a
// partition whose local log is offline, or nil when it serves: no action
// touches an offline log; the machine fails, waiting for --recover (a
// machine already there ignores it).
func offlineActions(mp *mirrorPartition, actions []mirrorstate.Action) mirrorstate.Event {
	err := mp.local.Offline()
	if err == nil {
		return nil
	}
	for _, a := range actions {
		if _, ok := a.(mirrorstate.ScheduleRetry); !ok {
			return mirrorstate.LogOffline{Err: err, Now: time.Now()}
		}
	}
	return nil
}

// rebuildOffline rebuilds, on the owner and before a --recover steps the
// machines, the offline local logs of the FAILED partitions of topics:
// each broken directory is moved aside (kept under failed/) and an empty
// log of the source's topic ID takes its place. A rebuild that fails
// leaves the partition offline: the recovery's first action fails it
// again, with the error logged here.
func (m *mirror) rebuildOffline(ctx context.Context, topics []string) {
	selected := make(map[string]bool, len(topics))
	for _, t := range topics {
		selected[t] = true
	}
	m.mu.Lock()
	var offline []*mirrorPartition
	for tp, mp := range m.partitions {
		if selected[tp.Topic] && mp.local.Offline() != nil && mp.machine.State() == mirrorstate.Failed {
			offline = append(offline, mp)
		}
	}
	m.mu.Unlock()
	for _, mp := range offline {
		aside, err := m.node.RebuildPartition(ctx, mp.topic, mp.partition, mp.topicID)
		if err != nil {
			m.log.Error("cannot rebuild the offline partition for --recover", "topic", mp.topic, "partition", mp.partition, "error", err)
			continue
		}
		m.log.Info("recovering the rebuilt partition: it fetches again from the source's log start",
			"topic", mp.topic, "partition", mp.partition, "broken_directory", aside)
	}
}
