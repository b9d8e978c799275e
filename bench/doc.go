// Package bench holds the whole-system benchmarks: mirrord against its
// peers and against the physical limit measured in the same run, reported
// as ratios.
//
// The report (`make bench`, quick; `make bench-full`): TestBenchReport
// runs every scenario in one process and writes bench/results/<mode>.md,
// .json and .png (report_test.go, chart_test.go):
//
//   - limit: a loopback TCP copy (1 MiB buffers) and a sequential file
//     write of the same number of bytes (scenarios_test.go);
//   - mirrord: mirrord mirroring a preloaded mirrord source, a fresh
//     mirror process per sample, 1 and 64 partitions (1024 in full), 1 KiB
//     records, uncompressed and lz4 (and zstd in full);
//   - kgo-copier: the franz-go consumer -> producer copier a user would
//     write, into a writable topic on a second node;
//   - cluster-produce: an idempotent acks=all producer into one mirrord
//     node on etcd (replication factor 1) and into three (replication
//     factor 3, min.insync.replicas 2), CPU-s/GB of every mirrord process,
//     RF 3 over RF 1 and each over the limit rows; and seeded rounds of
//     kill -9 of a partition's leader, timed to the new leader in Metadata
//     and to the first record produced after the kill read by a consumer
//     (cluster_test.go, cluster_failover_test.go);
//   - cluster-mirror: the mirrord scenario's source (4 partitions)
//     mirrored into three nodes on etcd with replication factor 1 and 3,
//     timed to every replica holding the source's bytes, beside the limit
//     and cluster-produce rows; and the same kill -9 rounds on a mirror
//     partition while a producer writes to the source
//     (cluster_mirror_test.go);
//   - mirrord-from-kafka, mm2, kafka-replication, serve-kafka,
//     serve-mirrord: with real Kafka 4.4 brokers and MirrorMaker 2 from the
//     Maven jars (kafka_test.go, kafkatest);
//   - serve-kafka-tls, serve-mirrord-tls: the same consumer reading the
//     same data from the same broker and the same mirrord over their SSL
//     listeners (one test CA, client certificates required), in the same
//     repeat as the plaintext read; the report's TLS table gives TLS over
//     plaintext, MB/s and CPU-s/GB, for each server (report_tls_test.go);
//   - lag: record acknowledged at the source to visible on the mirror, at
//     50% and 80% of the highest rate source and mirror sustain together
//     (a short search) and at 50 MB/s (lag_sustain_test.go, lag_test.go);
//   - cleaner-mirrord, cleaner-kafka: one segment of keyed records
//     cleaned in one pass by each (MB/s of dirty log, CPU-s/GB of the
//     cleaning: Kafka's cleaner thread, mirrord's process;
//     cleaner_test.go);
//   - mirrord-steady, kgo-copier-steady: 1, 64, 1,000 and 10,000
//     partitions after the mirror (the copier) caught up once: paused while
//     the source is filled, timed from resume to caught up; and the
//     "Partition creation" table, the one-time cost per partition
//     (steady_test.go, steady_copier_test.go);
//   - scale: 10,000 mirrored partitions, mostly idle: the mirror's CPU per
//     second and resident memory (scale_test.go).
//   - group-commit: 1 and 16 concurrent committers (4 in smoke, 64 in
//     full) committing offsets in one group (OffsetCommit, generation -1),
//     against mirrord and a 1-node Kafka 4.4 in the same run: commits/s,
//     latency p50/p99, server CPU per commit, mirrord over Kafka
//     (commit_test.go, commit_report_test.go).
//
// Every sample counts the CPU time of every process involved (from
// /proc/<pid>/stat and rusage) and the peak resident set. Rows are medians
// of mode.Repeats samples with their spread. TestBenchReportSmoke runs the
// whole harness on tiny sizes in `make test`; it judges no number.
//
// The Go micro-benchmarks (`make bench-micro`): BenchmarkServe (a kgo
// consumer reading from a node, in process), BenchmarkServeTLS (the same
// over an SSL listener and the PLAINTEXT one in the same run, as a ratio)
// and BenchmarkMirror (mirrord
// mirroring mirrord, each a `mirrord serve` process), each beside a
// loopback TCP copy of the same bytes; the storage benchmarks live beside
// the code they measure (logstore/bench_test.go).
package bench
