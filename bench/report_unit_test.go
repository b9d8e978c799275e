package bench

// Tests of the report writer (report_test.go, chart_test.go) on made-up
// measurements: aggregation, ratios, goals, the three files, the JSON
// round trip and a byte-identical chart for the same input.

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testSample is a sample moving megabytes MB in wall with cpu.
func testSample(megabytes int64, wall, cpu time.Duration) Sample {
	return Sample{Wall: wall, Bytes: megabytes * 1e6, Records: megabytes * 1000, CPU: cpu}
}

// testMeasurement is a measurement of one sample at megabytesPerSecond costing
// cpuSecondsPerGigabyte.
func testMeasurement(scenario, variant string, megabytesPerSecond, cpuSecondsPerGigabyte float64) Measurement {
	s := Sample{Wall: time.Second, Bytes: int64(megabytesPerSecond * 1e6), Records: 1,
		CPU: time.Duration(cpuSecondsPerGigabyte * megabytesPerSecond / 1e3 * float64(time.Second))}
	return Measurement{Scenario: scenario, Variant: variant, Samples: []Sample{s}}
}

func reportNear(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestAggregateSpread(t *testing.T) {
	tests := []struct {
		name         string
		samples      []Sample
		throughput   spread
		cost         spread
		records      float64
		peakRSS      int64
		unusable     int
		wantMeasured bool
	}{
		{"odd count", []Sample{
			testSample(300, time.Second, 3*time.Second), // 300 MB/s, 10 s/GB
			testSample(100, time.Second, time.Second),   // 100 MB/s, 10 s/GB
			testSample(200, time.Second, 4*time.Second), // 200 MB/s, 20 s/GB
		}, spread{200, 100, 300}, spread{10, 10, 20}, 200e3, 0, 0, true},
		{"even count: mean of the middle two", []Sample{
			testSample(400, time.Second, 0), testSample(100, time.Second, 0),
			testSample(300, time.Second, 0), testSample(200, time.Second, 0),
		}, spread{250, 100, 400}, spread{0, 0, 0}, 250e3, 0, 0, true},
		{"one sample, rate from wall", []Sample{
			{Wall: 2 * time.Second, Bytes: 500e6, Records: 10, CPU: time.Second, PeakRSS: 7e6},
		}, spread{250, 250, 250}, spread{2, 2, 2}, 5, 7e6, 0, true},
		{"peak RSS is the max; a zero wall is left out", []Sample{
			{Wall: time.Second, Bytes: 100e6, PeakRSS: 5e6},
			{Wall: 0, Bytes: 100e6, PeakRSS: 9e6},
		}, spread{100, 100, 100}, spread{0, 0, 0}, 0, 9e6, 1, true},
		{"no samples", nil, spread{}, spread{}, 0, 0, 0, false},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			r := aggregate(Measurement{Scenario: "mirrord", Variant: "v", Samples: test.samples})
			if !spreadsNear(r.MegabytesPerSecond, test.throughput) || !spreadsNear(r.CPUSecondsPerGigabyte, test.cost) {
				t.Errorf("MB/s %+v CPU-s/GB %+v, want %+v %+v", r.MegabytesPerSecond, r.CPUSecondsPerGigabyte, test.throughput, test.cost)
			}
			if !reportNear(r.RecordsPerSecond, test.records) || r.PeakRSSBytes != test.peakRSS {
				t.Errorf("records/s %v peak RSS %d, want %v %d", r.RecordsPerSecond, r.PeakRSSBytes, test.records, test.peakRSS)
			}
			if r.SampleCount != len(test.samples) || r.UnusableCount != test.unusable || r.measured() != test.wantMeasured {
				t.Errorf("n %d unusable %d measured %v, want %d %d %v", r.SampleCount, r.UnusableCount, r.measured(),
					len(test.samples), test.unusable, test.wantMeasured)
			}
		})
	}
}

func spreadsNear(a, b spread) bool {
	return reportNear(a.Median, b.Median) && reportNear(a.Min, b.Min) && reportNear(a.Max, b.Max)
}

func TestAggregateRatios(t *testing.T) {
	limit := testMeasurement("limit", "loopback copy", 2000, 1)
	mirrord := testMeasurement("mirrord", "1 partition", 1000, 0.5)
	mm2 := testMeasurement("mm2", "1 partition", 100, 10)
	lonely := testMeasurement("kgo-copier", "64 partitions", 500, 2)
	tests := []struct {
		name         string
		measurements []Measurement
		index        int
		timesLimit   *float64
		timesMirrord *float64
		cpuTimes     *float64
	}{
		{"limit over itself", []Measurement{limit, mirrord}, 0, reportPointer(1), nil, nil},
		{"mirrord has no x mirrord", []Measurement{limit, mirrord}, 1, reportPointer(0.5), nil, nil},
		{"peer against mirrord", []Measurement{limit, mirrord, mm2}, 2, reportPointer(0.05), reportPointer(0.1), reportPointer(20)},
		{"missing limit row gives -", []Measurement{mirrord, mm2}, 1, nil, reportPointer(0.1), reportPointer(20)},
		{"no mirrord row of the variant gives -", []Measurement{limit, mirrord, lonely}, 2, reportPointer(0.25), nil, nil},
		{"a row without samples has no ratios", []Measurement{limit, {Scenario: "mm2", Variant: "1 partition"}, mirrord}, 1, nil, nil, nil},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			r := aggregateAll(test.measurements)[test.index]
			for _, c := range []struct {
				name      string
				got, want *float64
			}{{"x limit", r.TimesLimit, test.timesLimit}, {"x mirrord", r.TimesMirrord, test.timesMirrord},
				{"CPU x mirrord", r.CPUTimesMirrord, test.cpuTimes}} {
				if (c.got == nil) != (c.want == nil) || (c.got != nil && !reportNear(*c.got, *c.want)) {
					t.Errorf("%s = %s, want %s", c.name, formatRatio(c.got), formatRatio(c.want))
				}
			}
		})
	}
}

func reportPointer(v float64) *float64 { return &v }

// TestPlaintextRatios: a -tls row over the plaintext row of its scenario
// and variant, in the JSON rows and in the Markdown's TLS table.
func TestPlaintextRatios(t *testing.T) {
	plain := testMeasurement("serve-mirrord", "1 partition", 1000, 0.5)
	secure := testMeasurement("serve-mirrord-tls", "1 partition", 400, 2)
	tests := []struct {
		name         string
		measurements []Measurement
		index        int
		times, cpu   *float64
		table        string // a line of the Markdown; "" for no TLS table
	}{
		{"TLS over plaintext", []Measurement{plain, secure}, 1, reportPointer(0.4), reportPointer(4),
			"| serve-mirrord | 1 partition | 1000 | 400 | 0.40x | 0.50 | 2.00 | 4.00x |"},
		{"the plaintext row has none", []Measurement{plain, secure}, 0, nil, nil, "| serve-mirrord | 1 partition |"},
		{"no plaintext row of the variant", []Measurement{testMeasurement("serve-mirrord", "64 partitions", 1000, 0.5), secure}, 1, nil, nil, ""},
		{"no plaintext scenario", []Measurement{testMeasurement("serve-kafka", "1 partition", 1000, 0.5), secure}, 1, nil, nil, ""},
		{"a TLS row without samples", []Measurement{plain, {Scenario: "serve-mirrord-tls", Variant: "1 partition"}}, 1, nil, nil, ""},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			rows := aggregateAll(test.measurements)
			r := rows[test.index]
			for _, c := range []struct {
				name      string
				got, want *float64
			}{{"x plaintext", r.TimesPlaintext, test.times}, {"CPU x plaintext", r.CPUTimesPlaintext, test.cpu}} {
				if (c.got == nil) != (c.want == nil) || (c.got != nil && !reportNear(*c.got, *c.want)) {
					t.Errorf("%s = %s, want %s", c.name, formatRatio(c.got), formatRatio(c.want))
				}
			}
			markdown := string(renderMarkdown(Report{Mode: "test", Measurements: test.measurements}, rows, nil))
			if hasTable := strings.Contains(markdown, "## TLS"); hasTable != (test.table != "") || !strings.Contains(markdown, test.table) {
				t.Errorf("TLS table %v, want line %q in:\n%s", hasTable, test.table, markdown)
			}
		})
	}
}

func TestGoals(t *testing.T) {
	const (
		throughput = "mirror throughput"
		mm2        = "mirrord CPU/GB <= 1/20"
		copier     = "mirrord CPU/GB <= 1/5"
		serve      = "serving throughput from"
		serveTLS   = "serving throughput over TLS"
		idleCPU    = "10,000 idle partitions: CPU"
		idleRSS    = "10,000 idle partitions: RSS"
	)
	tests := []struct {
		name   string
		goal   string
		rows   []Measurement
		scales []ScaleResult
		status string
		value  float64
	}{
		{"throughput met", throughput, []Measurement{testMeasurement("limit", "loopback copy", 1000, 1), testMeasurement("mirrord", "a", 400, 1), testMeasurement("mirrord", "b", 600, 1)}, nil, goalMet, 0.6},
		{"throughput not met", throughput, []Measurement{testMeasurement("limit", "loopback copy", 1000, 1), testMeasurement("mirrord", "a", 400, 1)}, nil, goalNotMet, 0.4},
		{"throughput without limit", throughput, []Measurement{testMeasurement("mirrord", "a", 400, 1)}, nil, goalNotMeasured, 0},
		{"mm2 same variant, the worst counts", mm2, []Measurement{testMeasurement("mirrord", "a", 1, 1), testMeasurement("mm2", "a", 1, 30), testMeasurement("mirrord", "b", 1, 1), testMeasurement("mm2", "b", 1, 10)}, nil, goalNotMet, 0.1},
		{"mm2 met", mm2, []Measurement{testMeasurement("mirrord", "a", 1, 1), testMeasurement("mm2", "a", 1, 25)}, nil, goalMet, 0.04},
		{"copier best vs best", copier, []Measurement{testMeasurement("mirrord", "a", 1, 2), testMeasurement("mirrord", "b", 1, 0.5), testMeasurement("kgo-copier", "c", 1, 5)}, nil, goalMet, 0.1},
		{"copier not measured", copier, []Measurement{testMeasurement("mirrord", "a", 1, 1)}, nil, goalNotMeasured, 0},
		{"serve met", serve, []Measurement{testMeasurement("serve-mirrord", "a", 1200, 1), testMeasurement("serve-kafka", "a", 1000, 1)}, nil, goalMet, 1.2},
		{"serve not met", serve, []Measurement{testMeasurement("serve-mirrord", "a", 900, 1), testMeasurement("serve-kafka", "a", 1000, 1)}, nil, goalNotMet, 0.9},
		{"serve needs the same variant", serve, []Measurement{testMeasurement("serve-mirrord", "a", 900, 1), testMeasurement("serve-kafka", "b", 1000, 1)}, nil, goalNotMeasured, 0},
		{"serve over TLS met", serveTLS, []Measurement{testMeasurement("serve-mirrord-tls", "a", 800, 1), testMeasurement("serve-kafka-tls", "a", 500, 1), testMeasurement("serve-mirrord", "a", 400, 1), testMeasurement("serve-kafka", "a", 1000, 1)}, nil, goalMet, 1.6},
		{"serve over TLS not met", serveTLS, []Measurement{testMeasurement("serve-mirrord-tls", "a", 450, 1), testMeasurement("serve-kafka-tls", "a", 500, 1)}, nil, goalNotMet, 0.9},
		{"serve over TLS needs both TLS rows", serveTLS, []Measurement{testMeasurement("serve-mirrord-tls", "a", 450, 1), testMeasurement("serve-kafka", "a", 500, 1)}, nil, goalNotMeasured, 0},
		{"idle CPU met", idleCPU, nil, []ScaleResult{{Partitions: 10000, CPUPerSecond: 0.01}}, goalMet, 0.01},
		{"idle CPU not met", idleCPU, nil, []ScaleResult{{Partitions: 1000, CPUPerSecond: 0.001}, {Partitions: 10000, CPUPerSecond: 0.05}}, goalNotMet, 0.05},
		{"idle CPU needs 10000 partitions", idleCPU, nil, []ScaleResult{{Partitions: 1000, CPUPerSecond: 0.001}}, goalNotMeasured, 0},
		{"idle RSS met", idleRSS, nil, []ScaleResult{{Partitions: 10000, RSS: 400e6}}, goalMet, 400},
		{"idle RSS not met", idleRSS, nil, []ScaleResult{{Partitions: 20000, RSS: 600e6}}, goalNotMet, 600},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			g := findGoal(t, evaluateGoals(aggregateAll(test.rows), test.scales), test.goal)
			if g.Status != test.status {
				t.Errorf("%s: %s (%s), want %s", g.Name, g.Status, g.Detail, test.status)
			}
			if (g.Value == nil) != (test.status == goalNotMeasured) || (g.Value != nil && !reportNear(*g.Value, test.value)) {
				t.Errorf("%s: value %s, want %v", g.Name, formatRatio(g.Value), test.value)
			}
		})
	}
}

func findGoal(t *testing.T, goals []goal, prefix string) goal {
	t.Helper()
	for _, g := range goals {
		if strings.HasPrefix(g.Name, prefix) {
			return g
		}
	}
	t.Fatalf("no goal %q in %+v", prefix, goals)
	return goal{}
}

func TestChartNiceStep(t *testing.T) {
	for _, test := range []struct{ raw, want float64 }{
		{0, 1}, {0.3, 0.5}, {1, 1}, {1.5, 2}, {3, 5}, {7, 10}, {420, 500}, {math.Inf(1), 1},
	} {
		if got := niceStep(test.raw); !reportNear(got, test.want) {
			t.Errorf("niceStep(%v) = %v, want %v", test.raw, got, test.want)
		}
	}
}

// exampleReport is a small quick run with every kind of result.
func exampleReport() Report {
	quick := func(scenario, variant, note string, megabytesPerSecond ...int64) Measurement {
		m := Measurement{Scenario: scenario, Variant: variant, Note: note}
		for _, mbs := range megabytesPerSecond {
			m.Samples = append(m.Samples, Sample{Wall: time.Second, Bytes: mbs * 1e6, Records: mbs * 1000,
				CPU: time.Duration(mbs) * time.Millisecond, PeakRSS: 120e6})
		}
		return m
	}
	mm2 := quick("mm2", "1 partition, lz4", "", 150, 160, 140)
	for i := range mm2.Samples {
		mm2.Samples[i].CPU *= 15
	}
	return Report{
		Mode:    "quick",
		Started: time.Date(2026, 5, 1, 14, 3, 0, 0, time.UTC),
		Machine: "2 cores, linux/amd64, go1.26",
		Measurements: []Measurement{
			quick("limit", "loopback copy", "one TCP connection, in process", 2000, 2100, 1900),
			quick("mirrord", "1 partition, lz4", "", 1100, 1300, 1200),
			quick("kgo-copier", "1 partition, lz4", "", 600, 650, 550),
			mm2,
		},
		Lags:    []LagResult{{Variant: "1 partition, lz4, 50 MB/s", RateBytes: 50e6, Count: 5000, P50: 800 * time.Microsecond, P99: 4 * time.Millisecond, Max: 9 * time.Millisecond}},
		Scales:  []ScaleResult{{Partitions: 10000, CPUPerSecond: 0.012, RSS: 300e6, SetupTime: 12 * time.Second}},
		Commits: exampleCommits(),
		Tables: []Table{{Title: "Stop", Intro: "--stop of every partition, end to end.", Columns: []string{"Partitions", "stop s"},
			Rows: [][]string{{"10000", "0.42"}}, Numbers: map[string]float64{"stop10000Seconds": 0.42},
			Goals: []goal{measuredGoal("--stop of 10,000 partitions <= 1 s", 0.42, 1, true, "10000 partitions: 0.42 s")}}},
		Notes: []string{"serve-kafka: no Java on this machine"},
	}
}

// The report tests run in parallel: each writes to its own directory, and
// writing (and reading back) a PNG under -race on a busy machine takes
// seconds of waiting for a core.
func TestReportWritesFiles(t *testing.T) {
	t.Parallel()
	r := exampleReport()
	dir := filepath.Join(t.TempDir(), "reports") // writeReport creates it
	paths, err := writeReport(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "quick.md"), filepath.Join(dir, "quick.json"), filepath.Join(dir, "quick.png")}
	if !reflect.DeepEqual(paths, want) {
		t.Fatalf("paths %v, want %v", paths, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 3 {
		t.Fatalf("dir holds %v (%v), want the three files and no temporary", entries, err)
	}
	markdown := readReportFile(t, paths[0])
	for _, s := range []string{"# Benchmark report: quick", "2 cores, linux/amd64, go1.26; started 2026-05-01 14:03:00 UTC",
		"| limit | loopback copy | 2000 [1900-2100] |", "| 1200 [1100-1300] |", "0.60x", "**met**: mirror throughput",
		"**not measured**: serving throughput", "## Lag", "## Idle partitions", "no Java",
		"| mirrord | 1 | 1000 [800-1250] | 1.00 | 2.00 | 5.00 | 300 | 0.50x | 0.50x | 3 |", "offset commits / kafka: not synced",
		"## Stop\n\n--stop of every partition, end to end.\n\n| Partitions | stop s |\n| --- | --- |\n| 10000 | 0.42 |", "**met**: --stop of 10,000 partitions <= 1 s (0.42"} {
		if !strings.Contains(markdown, s) {
			t.Errorf("markdown lacks %q:\n%s", s, markdown)
		}
	}
	t.Logf("markdown:\n%s", markdown)
	checkChart(t, paths[2], chartWidth, chartHeightMin)
}

func TestReportJSONRoundTrip(t *testing.T) {
	t.Parallel()
	r := exampleReport()
	paths, err := writeReport(t.TempDir(), r)
	if err != nil {
		t.Fatal(err)
	}
	document, err := decodeReport([]byte(readReportFile(t, paths[1])))
	if err != nil {
		t.Fatal(err)
	}
	rows := aggregateAll(r.Measurements)
	if !reflect.DeepEqual(document.Rows, rows) {
		t.Errorf("rows from the file %+v, want %+v", document.Rows, rows)
	}
	again := document.report()
	if !reflect.DeepEqual(aggregateAll(again.Measurements), rows) {
		t.Errorf("rows from the file's samples differ from the run's")
	}
	goals := evaluateGoals(rows, again.Scales)
	for _, table := range again.Tables {
		goals = append(goals, table.Goals...)
	}
	if !reflect.DeepEqual(again.Tables, r.Tables) || !reflect.DeepEqual(document.Goals, goals) {
		t.Errorf("goals from the file %+v, want %+v", document.Goals, goals)
	}
	if !again.Started.Equal(r.Started) || again.Mode != r.Mode || !reflect.DeepEqual(again.Lags, r.Lags) ||
		!reflect.DeepEqual(again.Scales, r.Scales) || !reflect.DeepEqual(again.Notes, r.Notes) ||
		!reflect.DeepEqual(again.Commits, r.Commits) || !reflect.DeepEqual(document.CommitRows, aggregateCommits(r.Commits)) {
		t.Errorf("report from the file %+v, want %+v", again, r)
	}
	if _, err := decodeReport([]byte(`{"format": 99}`)); err == nil {
		t.Errorf("decodeReport accepted format 99")
	}
}

func TestReportDeterministic(t *testing.T) {
	t.Parallel()
	first, err := writeReport(t.TempDir(), exampleReport())
	if err != nil {
		t.Fatal(err)
	}
	second, err := writeReport(t.TempDir(), exampleReport())
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		if !bytes.Equal([]byte(readReportFile(t, first[i])), []byte(readReportFile(t, second[i]))) {
			t.Errorf("%s differs between two writes of the same report", filepath.Base(first[i]))
		}
	}
}

func TestReportEmptyAndOverwrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := Report{Mode: "smoke"}
	for range 2 { // the second write replaces the first
		paths, err := writeReport(dir, empty)
		if err != nil {
			t.Fatal(err)
		}
		markdown := readReportFile(t, paths[0])
		if !strings.Contains(markdown, "No throughput measured.") || !strings.Contains(markdown, "No lag measured.") {
			t.Errorf("empty report:\n%s", markdown)
		}
		checkChart(t, paths[2], chartWidth, chartHeightMin)
	}
	for _, mode := range []string{"", "../x", "a/b", ".hidden"} {
		if _, err := writeReport(dir, Report{Mode: mode}); err == nil {
			t.Errorf("mode %q accepted", mode)
		}
	}
}

func TestChartGrowsForManyRows(t *testing.T) {
	t.Parallel()
	r := exampleReport()
	for range 60 {
		r.Measurements = append(r.Measurements, testMeasurement("mirrord-from-kafka", "a rather long variant name that will be cut short", 10, 1))
	}
	paths, err := writeReport(t.TempDir(), r)
	if err != nil {
		t.Fatal(err)
	}
	img := checkChart(t, paths[2], chartWidth, 0)
	if img.Dy() <= chartHeightMin {
		t.Errorf("chart of %d rows is %d px high, want more than %d", len(r.Measurements), img.Dy(), chartHeightMin)
	}
}

// checkChart decodes the PNG at path and checks its size (height 0: any).
func checkChart(t *testing.T, path string, width, height int) image.Rectangle {
	t.Helper()
	img, err := png.Decode(strings.NewReader(readReportFile(t, path)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	bounds := img.Bounds()
	if bounds.Dx() != width || (height != 0 && bounds.Dy() != height) {
		t.Errorf("%s is %dx%d, want %dx%d", path, bounds.Dx(), bounds.Dy(), width, height)
	}
	return bounds
}

func readReportFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestGoalsNameTheLimits: the throughput goal says how the file write
// limit compares, and the copier's CPU goal the floor the limit rows set.
func TestGoalsNameTheLimits(t *testing.T) {
	rows := aggregateAll([]Measurement{
		testMeasurement("limit", "loopback copy", 1000, 0.2),
		testMeasurement("limit", "file write", 500, 0.3),
		testMeasurement("mirrord", "a", 450, 1),
		testMeasurement("kgo-copier", "a", 400, 2),
	})
	goals := evaluateGoals(rows, nil)
	for _, want := range []struct{ goal, detail string }{
		{"mirror throughput", "file write: 500 MB/s (0.50x the loopback copy; mirrord reaches 0.90x of it)"},
		{"mirrord CPU/GB <= 1/5", "floor here (loopback copy + file write): 0.5 CPU-s/GB, 1/4.00 of kgo-copier's cheapest (a)"},
	} {
		if g := findGoal(t, goals, want.goal); !strings.Contains(g.Detail, want.detail) {
			t.Errorf("%s: detail %q, want it to contain %q", g.Name, g.Detail, want.detail)
		}
	}
}
