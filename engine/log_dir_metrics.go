package engine

// The log directory's free space in /metrics: mirrord_log_dir_free_bytes
// and mirrord_log_dir_low_space (1 while below log.dir.reserve.bytes, when
// client writes and mirror appends are refused).

import (
	"github.com/mirrord/mirrord/broker"
	"github.com/prometheus/client_golang/prometheus"
)

type logDirCollector struct {
	n         *Node
	free, low *prometheus.Desc
	reserve   *prometheus.Desc
}

func newLogDirCollector(n *Node) *logDirCollector {
	return &logDirCollector{n: n,
		free: prometheus.NewDesc("mirrord_log_dir_free_bytes", "Free bytes of the file system holding the data directory, at the node's last look.", nil, nil),
		low: prometheus.NewDesc("mirrord_log_dir_low_space",
			"1 while the data directory's free space is below log.dir.reserve.bytes: Produce, CreateTopics, CreatePartitions and mirror appends are refused (KAFKA_STORAGE_ERROR).", nil, nil),
		reserve: prometheus.NewDesc("mirrord_log_dir_reserve_bytes", "log.dir.reserve.bytes in effect (0: no reserve).", nil, nil),
	}
}

func (c *logDirCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.free
	ch <- c.low
	ch <- c.reserve
}

func (c *logDirCollector) Collect(ch chan<- prometheus.Metric) {
	space := c.n.LogDirSpace()
	if !space.Known {
		return
	}
	low := 0.0
	if space.Low {
		low = 1
	}
	ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(space.FreeBytes))
	ch <- prometheus.MustNewConstMetric(c.low, prometheus.GaugeValue, low)
	ch <- prometheus.MustNewConstMetric(c.reserve, prometheus.GaugeValue, float64(space.ReserveBytes))
}

// LogDirSpace is the data directory's free space and reserve.
type LogDirSpace = broker.LogDirSpace
