package engine

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// logRecoveryCollector reads, at scrape time, what log recovery cut from
// the node's partitions when it opened (broker.Node.RecoveryTruncations).
type logRecoveryCollector struct {
	node                *Node
	truncations, cutOff *prometheus.Desc
}

func newLogRecoveryCollector(n *Node) *logRecoveryCollector {
	labels := []string{"topic", "partition"}
	return &logRecoveryCollector{
		node: n,
		truncations: prometheus.NewDesc("mirrord_log_recovery_truncations_total",
			"Cuts log recovery made in the partition's log when the node opened (a torn or corrupt batch, and every segment "+
				"after a cut sealed one), as Kafka's LogSegment.recover truncates. Each cut is logged at WARN and its bytes "+
				"are kept under the data directory's truncated/<topic>-<partition>/. Absent for partitions nothing was cut from.",
			labels, nil),
		cutOff: prometheus.NewDesc("mirrord_log_recovery_truncated_bytes_total",
			"Bytes log recovery cut from the partition's log when the node opened, all kept under the data directory's "+
				"truncated/<topic>-<partition>/recovery-<segment base offset>-<position>.bytes.",
			labels, nil),
	}
}

func (c *logRecoveryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.truncations
	ch <- c.cutOff
}

func (c *logRecoveryCollector) Collect(ch chan<- prometheus.Metric) {
	for tp, r := range c.node.RecoveryTruncations() {
		labels := []string{tp.Topic, strconv.Itoa(int(tp.Partition))}
		ch <- prometheus.MustNewConstMetric(c.truncations, prometheus.CounterValue, float64(r.Truncations), labels...)
		ch <- prometheus.MustNewConstMetric(c.cutOff, prometheus.CounterValue, float64(r.Bytes), labels...)
	}
}
