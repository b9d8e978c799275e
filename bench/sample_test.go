package bench

import "time"

// The data model of the benchmark report (TestBenchReport, `make bench`):
// every scenario measures Samples, the report turns them into rows.

// Sample is one repeat of one measured configuration.
type Sample struct {
	Wall    time.Duration // start to done
	Bytes   int64         // payload moved: record batch bytes as stored at the source
	Records int64         // records moved
	// CPU is the CPU time (user+system) of every process involved over
	// the run: mirrord nodes, Kafka brokers, MirrorMaker 2, the copier,
	// and this test process's share when it takes part (the loopback
	// copy, an in-process client). Taken from /proc/<pid>/stat or rusage.
	CPU time.Duration
	// PeakRSS is the largest resident set (VmHWM) of the processes
	// involved, bytes; 0 when not measured.
	PeakRSS int64
}

// Measurement is one row of the report: a scenario in one configuration,
// measured Repeats times.
type Measurement struct {
	Scenario string // "limit", "mirrord", "kgo-copier", "mirrord-from-kafka", "mm2", "kafka-replication", "serve-mirrord", "serve-kafka", "serve-mirrord-tls", "serve-kafka-tls"
	Variant  string // "1 partition, lz4", "64 partitions, none", ...
	Samples  []Sample
	Note     string // what the row measures, where it matters
}

// LagResult is the lag scenario: the time from a record's
// acknowledgement at the source to its visibility on the mirror, at a
// steady produce rate.
type LagResult struct {
	Variant   string        // "1 partition, lz4, 50 MB/s"
	RateBytes float64       // produce rate, bytes per second
	Count     int           // records timed
	P50, P99  time.Duration // percentiles
	Max       time.Duration
	// NodesBusy is the CPU time of the source and mirror processes per
	// second of the run (1.5 = one and a half cores); Cores is how many
	// this machine has. A lag measured with the nodes near all cores busy
	// is the queueing of a saturated machine.
	NodesBusy float64
	Cores     int
}

// ScaleResult is the idle-partitions scenario: many mirrored partitions,
// mostly idle.
type ScaleResult struct {
	Partitions int
	// CPUPerSecond is the mirror process's CPU time per second of wall
	// time while idle (0.02 = 2% of one core).
	CPUPerSecond float64
	RSS          int64         // resident set of the mirror, bytes, at the end
	SetupTime    time.Duration // until every partition was mirrored once
}

// benchMode sizes a report run: smoke (make test: the harness works),
// quick (make bench, under 5 minutes on 2 cores) or full.
type benchMode struct {
	Name    string // "smoke", "quick", "full"
	Repeats int    // samples per configuration: 1 in smoke, >= 3 otherwise
	Bytes   int64  // payload per throughput run
	Full    bool   // every variant (1024 partitions, every codec, ...)
}

var benchModes = map[string]benchMode{
	"smoke": {Name: "smoke", Repeats: 1, Bytes: 4 << 20},
	"quick": {Name: "quick", Repeats: 3, Bytes: 128 << 20},
	"full":  {Name: "full", Repeats: 5, Bytes: 1 << 30, Full: true},
}
