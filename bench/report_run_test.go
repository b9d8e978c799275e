package bench

// The report run: `make bench` (MIRRORD_BENCH=quick) and `make bench-full`
// (MIRRORD_BENCH=full) measure every scenario in one run and write
// bench/results/<mode>.{md,json,png}. TestBenchReportSmoke runs the same
// harness on tiny sizes in `make test` (numbers not judged) so it keeps
// working.

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
)

// resultsDir is where `make bench` writes the report (bench/results).
const resultsDir = "results"

func TestBenchReport(t *testing.T) {
	name := os.Getenv("MIRRORD_BENCH")
	if name == "" {
		t.Skip("set MIRRORD_BENCH=quick or full (make bench, make bench-full)")
	}
	mode, ok := benchModes[name]
	if !ok || name == "smoke" {
		t.Fatalf("MIRRORD_BENCH=%q: want quick or full", name)
	}
	report := runReport(t, mode, true, false)
	paths, err := writeReport(resultsDir, report)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		t.Logf("wrote %s", path)
	}
	if markdown, err := os.ReadFile(filepath.Join(resultsDir, mode.Name+".md")); err == nil {
		fmt.Println(string(markdown))
	}
}

func TestBenchReportSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("the report harness starts several processes")
	}
	parallelInSmoke(t, benchModes["smoke"])
	// The Kafka scenarios have their own smoke test, TestKafkaScenariosSmoke,
	// which checks each of their rows: they are not run twice. The other
	// steps run here once, each checked as its own smoke test checks it
	// (skipForReportSmoke).
	report := runReport(t, benchModes["smoke"], false, true)
	paths, err := writeReport(t.TempDir(), report)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 {
		t.Fatalf("wrote %v, want the Markdown, JSON and PNG", paths)
	}
	scenarios := map[string]bool{}
	for _, m := range report.Measurements {
		if len(m.Samples) == 0 && strings.HasPrefix(m.Note, "not measured") {
			continue // a peer this machine cannot run (MirrorMaker 2 without its jar): the report says so
		}
		if len(m.Samples) == 0 || m.Samples[0].Bytes <= 0 || m.Samples[0].Wall <= 0 {
			t.Errorf("%s / %s: samples %+v", m.Scenario, m.Variant, m.Samples)
		}
		scenarios[m.Scenario] = true
	}
	for _, want := range []string{"limit", "mirrord", "kgo-copier"} {
		if !scenarios[want] {
			t.Errorf("no %s row in the smoke report", want)
		}
	}
	if len(report.Lags) == 0 || len(report.Scales) == 0 {
		t.Errorf("smoke report: %d lag rows, %d scale rows", len(report.Lags), len(report.Scales))
	}
	checkCommitResults(t, benchModes["smoke"], report.Commits, 1) // mirrord's; Kafka's in TestGroupCommitSmoke
}

// runReport measures every scenario of mode in turn; withKafka false
// leaves out the real-Kafka scenarios. With check, each step's results
// are checked as the step's own smoke test checks them.
func runReport(t *testing.T, mode benchMode, withKafka, check bool) Report {
	t.Helper()
	report := Report{Mode: mode.Name, Started: time.Now(), Machine: machine()}
	// Each step is a subtest: one that fails (a peer that does not start,
	// a bound run out) fails the run but leaves the report of the others
	// written, with a note naming it.
	step := func(name string, run func(t *testing.T)) {
		started := time.Now()
		if !t.Run(name, run) {
			report.Notes = append(report.Notes, fmt.Sprintf("The %s step failed (its log is in the run's output); its rows and goals are missing or partial.", name))
		}
		t.Logf("%s: %v", name, time.Since(started).Round(time.Millisecond))
	}
	step("limit", func(t *testing.T) { report.Measurements = append(report.Measurements, limitScenarios(t, mode)...) })
	var mirrord []Measurement
	step("mirrord", func(t *testing.T) { mirrord = mirrordScenarios(t, mode) })
	report.Measurements = append(report.Measurements, mirrord...)
	step("kgo copier", func(t *testing.T) { report.Measurements = append(report.Measurements, copierScenarios(t, mode)...) })
	step("cluster", func(t *testing.T) {
		r, err := clusterScenario(t, mode, check)
		if err != nil {
			t.Fatalf("cluster: %v", err)
		}
		report.Measurements = append(append(report.Measurements, r.Produce...), r.Mirror...)
		tables := clusterTables(r, aggregateAll(report.Measurements)) // the limit rows are measured by now
		if check {
			checkCluster(t, mode, r, tables)
		}
		report.Tables = append(report.Tables, tables...)
	})
	step("kafka", func(t *testing.T) {
		if !withKafka {
			return
		}
		rows, err := kafkaScenarios(t, mode)
		switch {
		case errors.Is(err, kafkatest.ErrNotInstalled) && os.Getenv("CI") != "true":
			report.Notes = append(report.Notes, "Kafka scenarios not run: "+err.Error())
		case err != nil:
			t.Fatalf("kafka scenarios: %v", err)
		}
		report.Measurements = append(report.Measurements, rows...)
	})
	step("cleaner", func(t *testing.T) {
		if !withKafka {
			return
		}
		rows, err := cleanerScenarios(t, mode)
		switch {
		case errors.Is(err, kafkatest.ErrNotInstalled) && os.Getenv("CI") != "true":
			report.Notes = append(report.Notes, "cleaner scenarios not run: "+err.Error())
		case err != nil:
			t.Fatalf("cleaner scenarios: %v", err)
		}
		report.Measurements = append(report.Measurements, rows...)
	})
	step("lag", func(t *testing.T) {
		table, lags, err := lagSustainScenario(t, mode)
		if err != nil {
			t.Fatalf("lag: %v", err)
		}
		if check {
			checkLagSustain(t, mode, table, lags)
		}
		report.Tables, report.Lags = append(report.Tables, table), append(report.Lags, lags...)
	})
	step("group commit", func(t *testing.T) { report.Commits = commitScenarioOf(t, mode, withKafka, &report.Notes) })
	step("scale", func(t *testing.T) {
		scales, err := scaleScenario(t, mode)
		if err != nil {
			t.Fatalf("scale: %v", err)
		}
		if check {
			checkScale(t, mode, scales)
		}
		report.Scales = scales
	})
	step("open", func(t *testing.T) {
		table := openScenarioOf(t, mode, withKafka)
		if check {
			checkOpen(t, mode, table)
		}
		report.Tables = append(report.Tables, table)
	})
	step("many partitions", func(t *testing.T) { report.Tables = append(report.Tables, manyPartitionsReport(t, mode)) })
	step("rto", func(t *testing.T) {
		table, err := rtoScenario(t, mode)
		if err != nil {
			t.Fatalf("rto: %v", err)
		}
		if check {
			checkRTO(t, mode, table)
		}
		report.Tables = append(report.Tables, table)
	})
	step("steady", func(t *testing.T) {
		rows, creation := steadyScenarios(t, mode)
		if check {
			checkSteady(t, mode, rows, creation)
		}
		report.Measurements = append(append(report.Measurements, rows...), kafkaReplicationSteady(withKafka)...)
		report.Tables = append(report.Tables, creation)
	})
	return report
}

// commitScenarioOf runs the group-commit scenario, against Kafka too when
// withKafka; without the Kafka jars (and not under CI=true) against
// mirrord alone, with a note that says so.
func commitScenarioOf(t *testing.T, mode benchMode, withKafka bool, notes *[]string) []CommitResult {
	t.Helper()
	libs := ""
	if withKafka {
		var err error
		libs, err = kafkatest.Libs(".")
		switch {
		case errors.Is(err, kafkatest.ErrNotInstalled) && os.Getenv("CI") != "true":
			*notes = append(*notes, "Offset commits against Kafka not measured: "+err.Error())
		case err != nil:
			t.Fatalf("group commit: %v", err)
		}
	}
	results, err := groupCommitScenario(t, mode, libs)
	if err != nil {
		t.Fatalf("group commit: %v", err)
	}
	return results
}

// skipForReportSmoke skips a step's own smoke test in smoke mode when
// TestBenchReportSmoke runs in the same test binary (not -short, its name
// matched by -run, no -skip): the report smoke runs the step once and
// applies the same checks (check names the function), so `make test` does
// not run each step twice. `go test -run TestSteadySmoke` and the other
// modes (scenarioModeEnv) still run the step alone.
func skipForReportSmoke(t *testing.T, mode benchMode, check string) {
	t.Helper()
	if mode.Name != "smoke" || testing.Short() || flag.Lookup("test.skip").Value.String() != "" {
		return
	}
	// -run matches each level of a test's name against its own part of
	// the pattern: the top level's is the part before the first slash.
	top, _, _ := strings.Cut(flag.Lookup("test.run").Value.String(), "/")
	if matched, err := regexp.MatchString(top, "TestBenchReportSmoke"); err != nil || !matched {
		return
	}
	t.Skipf("TestBenchReportSmoke runs this step in smoke mode and checks it (%s)", check)
}

// machine describes where the report ran.
func machine() string {
	return fmt.Sprintf("%d cores, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}
