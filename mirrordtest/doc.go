// Package mirrordtest runs mirrord as a separate process for the tests that
// drive it from outside: the end-to-end suite (e2e) and the benchmarks
// (bench). It builds cmd/mirrord once (with the race detector when the test
// binary has it), starts `mirrord serve` on a free loopback port with a data
// directory, and waits until it answers ApiVersions. kafkatest plays the
// same role for real Kafka brokers; nothing in mirrord's data path uses
// either, and this package imports no mirrord package.
//
// A Server's data directory outlives its process: Kill it (SIGKILL, as a
// crash would) or Stop it (SIGTERM, SIGKILL after a bound), then Start it
// again on the same directory and, when the port is still free, the same
// address. Every run logs to one file, with a marker line per start;
// LogTail returns its end for a failing test to print, and RaceReported
// says whether the race detector wrote a report into it.
//
// Tool finds an external tool a test runs (kcat, chromium, promtool, etcd):
// $MIRRORD_<TOOL>, the module's .cache/bin (scripts/install-*.sh) or PATH;
// missing, the test fails under CI=true and skips otherwise.
//
// StartEtcd runs a single-member etcd (the control plane of a mirrord
// cluster) for a test: the etcd Tool finds, its data directory in
// t.TempDir(), client and peer ports on 127.0.0.1 that every start
// reuses, so Stop then Start is "etcd unavailable for a while" to its
// clients; it is ready when /health says true, and t.Cleanup kills it.
//
// Every wait has a deadline and polls the exact condition; nothing sleeps,
// and a server dies with the process that started it (PR_SET_PDEATHSIG).
package mirrordtest
