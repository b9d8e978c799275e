package engine

// What the partition logs hold open, in /metrics: descriptors and index
// mappings (bounded by log.open.files.max and log.index.cache.max.bytes,
// so that many partitions stay under RLIMIT_NOFILE and vm.max_map_count),
// and how the cache of idle segments' files does.

import "github.com/prometheus/client_golang/prometheus"

type logFilesCollector struct {
	n                                *Node
	files, filesMax                  *prometheus.Desc
	mappings, mappedBytes, idleBytes *prometheus.Desc
	idleBytesMax                     *prometheus.Desc
	hits, misses, evictions          *prometheus.Desc
}

func newLogFilesCollector(n *Node) *logFilesCollector {
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &logFilesCollector{n: n,
		files:        desc("mirrord_log_open_files", "Segment log files the partition logs hold open (one descriptor each)."),
		filesMax:     desc("mirrord_log_open_files_max", "log.open.files.max in effect: idle segments past it are closed, least recently read first."),
		mappings:     desc("mirrord_log_index_mappings", "Index files the partition logs hold mapped (each one of the process's vm.max_map_count)."),
		mappedBytes:  desc("mirrord_log_index_mapped_bytes", "Bytes of the index mappings, active segments' included."),
		idleBytes:    desc("mirrord_log_index_cache_bytes", "Bytes of the index mappings of idle (not written) segments, bounded by log.index.cache.max.bytes."),
		idleBytesMax: desc("mirrord_log_index_cache_max_bytes", "log.index.cache.max.bytes in effect."),
		hits:         desc("mirrord_log_file_cache_hits_total", "Reads of an idle segment whose log file was open."),
		misses:       desc("mirrord_log_file_cache_misses_total", "Reads of an idle segment whose log file had been closed: it was opened again."),
		evictions:    desc("mirrord_log_file_cache_evictions_total", "Idle segments closed (log file and index mappings) to stay within the bounds."),
	}
}

func (c *logFilesCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.files, c.filesMax, c.mappings, c.mappedBytes, c.idleBytes, c.idleBytesMax, c.hits, c.misses, c.evictions} {
		ch <- d
	}
}

func (c *logFilesCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.n.LogFiles()
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(c.files, st.OpenFiles)
	gauge(c.filesMax, st.OpenFilesMax)
	gauge(c.mappings, st.IndexMappings)
	gauge(c.mappedBytes, st.IndexMappedBytes)
	gauge(c.idleBytes, st.IdleMappedBytes)
	gauge(c.idleBytesMax, st.IndexCacheBytesMax)
	counter(c.hits, st.Hits)
	counter(c.misses, st.Misses)
	counter(c.evictions, st.Evictions)
}
