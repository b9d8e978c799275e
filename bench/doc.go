// Package bench holds the whole-system benchmarks: mirrord against its
// peers (MirrorMaker 2, a franz-go copier, Kafka's own replication) and
// against the physical limit measured in the same run, reported as
// ratios. Today: BenchmarkServe (a kgo consumer reading from a node, in
// process) and BenchmarkMirror (mirrord mirroring mirrord, each a
// `mirrord serve` process, process_test.go), each beside a loopback TCP
// copy of the same bytes. TestMirrorBenchSmoke runs the mirror harness on
// a few MB so that `make test` keeps it working. The storage benchmarks
// live beside the code they measure (logstore/bench_test.go); `make bench`
// runs them all.
package bench
