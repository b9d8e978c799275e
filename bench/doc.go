// Package bench will hold the whole-system benchmarks: mirrord against its
// peers (MirrorMaker 2, a franz-go copier, Kafka's own replication) and
// against the physical limit measured in the same run. Until the node
// exists, the storage benchmarks live beside the code they measure
// (logstore/bench_test.go) and `make bench` runs them.
package bench
