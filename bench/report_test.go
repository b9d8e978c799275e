package bench

// The report of a benchmark run (`make bench`, TestBenchReport): the
// scenarios' samples aggregated into rows, the rows compared with the
// physical limit and with mirrord, the goals of the issue evaluated, and
// all of it written as <mode>.md (for people), <mode>.json (raw samples and
// aggregates, for comparing a later run) and <mode>.png (chart_test.go).
//
// Units: MB = 1e6 bytes, GB = 1e9 bytes. A sample moves Bytes in Wall,
// using CPU: its throughput is Bytes/Wall, its cost CPU/Bytes. A row's
// figures are medians over its samples, with min..max as the spread.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const (
	bytesPerMegabyte = 1e6
	bytesPerGigabyte = 1e9

	// reportFormat is the version of the JSON document; a change of its
	// fields' meaning bumps it, so that a comparison refuses old files
	// instead of misreading them.
	reportFormat = 1
)

// The scenario and variant names that ratios and goals look for
// (Measurement.Scenario lists them all).
const (
	scenarioLimit        = "limit"
	variantLimit         = "loopback copy"
	variantFileWrite     = "file write"
	scenarioMirrord      = "mirrord"
	scenarioMM2          = "mm2"
	scenarioCopier       = "kgo-copier"
	scenarioServeMirrord = "serve-mirrord"
	scenarioServeKafka   = "serve-kafka"
)

// Report is everything one run measured, as handed to writeReport.
type Report struct {
	Mode         string    // benchMode.Name; also the base name of the files
	Started      time.Time // when the run began
	Machine      string    // "2 cores, linux/amd64, go1.26"
	Measurements []Measurement
	Lags         []LagResult
	Scales       []ScaleResult
	Commits      []CommitResult // the group-commit scenario (commit_test.go)
	Tables       []Table        // scenarios with figures of their own (times, counts)
	Notes        []string       // free text: skipped scenarios, caveats
}

// Table is a section of the report for a scenario whose figures are not a
// throughput (a time to stop, to open, descriptors held): its rows are
// formatted by the scenario, and it judges its own goals, which join the
// report's goals after the throughput ones. Number holds the figures the
// rows were formatted from, by name, for a later run to compare.
type Table struct {
	Title   string             `json:"title"`
	Intro   string             `json:"intro"`
	Columns []string           `json:"columns"`
	Rows    [][]string         `json:"rows"`
	Numbers map[string]float64 `json:"numbers"`
	Goals   []goal             `json:"goals"`
}

// spread is one figure of a row over its usable samples: Min <= Median <= Max.
type spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// row is a Measurement aggregated. Ratios are nil where the report shows
// "-": no row to compare with, or one without usable samples.
type row struct {
	Scenario    string `json:"scenario"`
	Variant     string `json:"variant"`
	Note        string `json:"note"`
	SampleCount int    `json:"sampleCount"` // len(Measurement.Samples)
	// UnusableCount counts samples without a positive Wall and Bytes: they
	// give no rate, so every figure leaves them out. UnusableCount <= SampleCount.
	UnusableCount         int     `json:"unusableCount"`
	MegabytesPerSecond    spread  `json:"megabytesPerSecond"`
	RecordsPerSecond      float64 `json:"recordsPerSecond"` // median
	CPUSecondsPerGigabyte spread  `json:"cpuSecondsPerGigabyte"`
	PeakRSSBytes          int64   `json:"peakRSSBytes"` // max over samples; 0: not measured
	// TimesLimit is MegabytesPerSecond.Median over the limit row's.
	TimesLimit *float64 `json:"timesLimit"`
	// TimesMirrord is MegabytesPerSecond.Median over the mirrord row's of
	// the same Variant; CPUTimesMirrord is this row's CPU-s/GB over
	// mirrord's: how many times cheaper mirrord is. Nil on mirrord rows.
	TimesMirrord    *float64 `json:"timesMirrord"`
	CPUTimesMirrord *float64 `json:"cpuTimesMirrord"`
	// TimesPlaintext and CPUTimesPlaintext: a TLS row's MB/s and CPU-s/GB
	// over its plaintext row's (report_tls_test.go); nil on other rows.
	TimesPlaintext    *float64 `json:"timesPlaintext,omitempty"`
	CPUTimesPlaintext *float64 `json:"cpuTimesPlaintext,omitempty"`
}

// measured reports whether the row has a sample to take figures from.
func (r row) measured() bool { return r.SampleCount > r.UnusableCount }

// label names the row in charts and goals.
func (r row) label() string { return r.Scenario + " / " + r.Variant }

// aggregate turns one Measurement into a row, without the ratios (they need
// the other rows: aggregateAll).
func aggregate(m Measurement) row {
	r := row{Scenario: m.Scenario, Variant: m.Variant, Note: m.Note, SampleCount: len(m.Samples)}
	throughput := make([]float64, 0, len(m.Samples))
	records := make([]float64, 0, len(m.Samples))
	cost := make([]float64, 0, len(m.Samples))
	for _, s := range m.Samples {
		r.PeakRSSBytes = max(r.PeakRSSBytes, s.PeakRSS)
		if s.Wall <= 0 || s.Bytes <= 0 {
			r.UnusableCount++
			continue
		}
		seconds := s.Wall.Seconds()
		throughput = append(throughput, float64(s.Bytes)/bytesPerMegabyte/seconds)
		records = append(records, float64(s.Records)/seconds)
		cost = append(cost, s.CPU.Seconds()/(float64(s.Bytes)/bytesPerGigabyte))
	}
	r.MegabytesPerSecond = spreadOf(throughput)
	r.RecordsPerSecond = spreadOf(records).Median
	r.CPUSecondsPerGigabyte = spreadOf(cost)
	return r
}

// spreadOf is the median and range of values; zero for none. An even
// count's median is the mean of the two middle values.
func spreadOf(values []float64) spread {
	if len(values) == 0 {
		return spread{}
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	middle := len(sorted) / 2
	median := sorted[middle]
	if len(sorted)%2 == 0 {
		median = (sorted[middle-1] + sorted[middle]) / 2
	}
	return spread{Median: median, Min: sorted[0], Max: sorted[len(sorted)-1]}
}

// aggregateAll aggregates every measurement, in order, and fills in the
// ratios against the limit row and against mirrord.
func aggregateAll(measurements []Measurement) []row {
	rows := make([]row, len(measurements))
	for i, m := range measurements {
		rows[i] = aggregate(m)
	}
	limit, hasLimit := findRow(rows, scenarioLimit, variantLimit)
	for i := range rows {
		r := &rows[i]
		if !r.measured() {
			continue
		}
		if hasLimit {
			r.TimesLimit = ratioOf(r.MegabytesPerSecond.Median, limit.MegabytesPerSecond.Median)
		}
		baseline := scenarioMirrord // a steady-state row compares with mirrord's steady state
		if strings.HasSuffix(r.Scenario, "-steady") {
			baseline = scenarioMirrordSteady
		}
		mirrord, ok := findRow(rows, baseline, r.Variant)
		if r.Scenario == baseline || !ok {
			continue
		}
		r.TimesMirrord = ratioOf(r.MegabytesPerSecond.Median, mirrord.MegabytesPerSecond.Median)
		r.CPUTimesMirrord = ratioOf(r.CPUSecondsPerGigabyte.Median, mirrord.CPUSecondsPerGigabyte.Median)
	}
	withPlaintextRatios(rows)
	return rows
}

// findRow is the first measured row of scenario and variant.
func findRow(rows []row, scenario, variant string) (row, bool) {
	for _, r := range rows {
		if r.Scenario == scenario && r.Variant == variant && r.measured() {
			return r, true
		}
	}
	return row{}, false
}

// ratioOf is numerator/denominator, nil when the denominator gives none
// (a zero CPU time: too short a run for the 10 ms clock ticks).
func ratioOf(numerator, denominator float64) *float64 {
	if !(denominator > 0) {
		return nil
	}
	value := numerator / denominator
	return &value
}

// Goal statuses.
const (
	goalMet         = "met"
	goalNotMet      = "not met"
	goalNotMeasured = "not measured"
)

// goal is one target of the issue checked against the run: Value (nil
// when not measured) against Target, which it must not exceed when AtMost
// and must reach otherwise. Detail gives the numbers Value came from.
type goal struct {
	Name   string   `json:"name"`
	Status string   `json:"status"`
	Value  *float64 `json:"value"`
	Target float64  `json:"target"`
	AtMost bool     `json:"atMost"`
	Detail string   `json:"detail"`
}

// measuredGoal judges value against target; a value that is not a number
// (a ratio over zero) counts as not measured rather than as met.
func measuredGoal(name string, value, target float64, atMost bool, detail string) goal {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return unmeasuredGoal(name, target, atMost, detail)
	}
	g := goal{Name: name, Status: goalNotMet, Value: &value, Target: target, AtMost: atMost, Detail: detail}
	if (atMost && value <= target) || (!atMost && value >= target) {
		g.Status = goalMet
	}
	return g
}

func unmeasuredGoal(name string, target float64, atMost bool, why string) goal {
	return goal{Name: name, Status: goalNotMeasured, Target: target, AtMost: atMost, Detail: why}
}

// evaluateGoals checks the goals of the issue, in the order.
func evaluateGoals(rows []row, scales []ScaleResult) []goal {
	goals := []goal{
		throughputGoal(rows),
		cpuGoal(rows, scenarioMM2, "MirrorMaker 2", 20),
		withCopyFloor(cpuGoal(rows, scenarioCopier, "the kgo copier", 5), rows, scenarioCopier),
		serveGoal(rows),
		serveTLSGoal(rows),
		idleCPUGoal(scales),
		idleRSSGoal(scales),
	}
	return append(goals, steadyGoals(rows)...)
}

// throughputGoal: the best mirrord row reaches half the loopback copy.
func throughputGoal(rows []row) goal {
	const name, target = "mirror throughput >= 50% of the loopback copy limit", 0.5
	limit, hasLimit := findRow(rows, scenarioLimit, variantLimit)
	best, hasBest := bestRow(rows, scenarioMirrord, func(r row) float64 { return r.MegabytesPerSecond.Median })
	if !hasLimit || !hasBest {
		return unmeasuredGoal(name, target, false, missingRows(hasBest, scenarioMirrord, hasLimit, "limit / loopback copy"))
	}
	detail := fmt.Sprintf("mirrord %s: %s MB/s; loopback copy: %s MB/s", best.Variant,
		formatNumber(best.MegabytesPerSecond.Median), formatNumber(limit.MegabytesPerSecond.Median))
	// A mirror writes every byte it receives: the file write row bounds it
	// as much as the loopback copy does.
	if write, ok := findRow(rows, scenarioLimit, variantFileWrite); ok && write.MegabytesPerSecond.Median > 0 {
		detail += fmt.Sprintf("; file write: %s MB/s (%.2fx the loopback copy; mirrord reaches %.2fx of it)",
			formatNumber(write.MegabytesPerSecond.Median), write.MegabytesPerSecond.Median/limit.MegabytesPerSecond.Median,
			best.MegabytesPerSecond.Median/write.MegabytesPerSecond.Median)
	}
	return measuredGoal(name, best.MegabytesPerSecond.Median/limit.MegabytesPerSecond.Median, target, false, detail)
}

// cpuGoal: mirrord's CPU-s/GB is at most 1/times the peer's. Same-variant
// pairs are compared where there are any, and the worst pair counts (the
// goal holds on every variant); else mirrord's best row against the
// peer's best.
func cpuGoal(rows []row, peer, peerName string, times float64) goal {
	name := fmt.Sprintf("mirrord CPU/GB <= 1/%.0f of %s's", times, peerName)
	target := 1 / times
	cpu := func(r row) float64 { return r.CPUSecondsPerGigabyte.Median }
	if g, ok := worstPair(rows, name, scenarioMirrord, peer, cpu, "CPU-s/GB", target, true); ok {
		return withFraction(g)
	}
	mirrord, hasMirrord := bestRow(rows, scenarioMirrord, func(r row) float64 { return -cpu(r) })
	other, hasOther := bestRow(rows, peer, func(r row) float64 { return -cpu(r) })
	if !hasMirrord || !hasOther {
		return unmeasuredGoal(name, target, true, missingRows(hasMirrord, scenarioMirrord, hasOther, peer))
	}
	detail := fmt.Sprintf("best vs best (no common variant): mirrord %s: %s CPU-s/GB; %s %s: %s CPU-s/GB",
		mirrord.Variant, formatNumber(cpu(mirrord)), peer, other.Variant, formatNumber(cpu(other)))
	return withFraction(measuredGoal(name, cpu(mirrord)/cpu(other), target, true, detail))
}

// withCopyFloor adds to a CPU goal against peer the least any mirror
// could spend here: receiving the bytes over loopback and writing them to
// a file, the two limit rows' CPU-s/GB together, over the peer's cheapest
// row. When that is above the target, no design that copies the bytes
// through the kernel meets the goal on this machine.
func withCopyFloor(g goal, rows []row, peer string) goal {
	loopback, hasLoopback := findRow(rows, scenarioLimit, variantLimit)
	write, hasWrite := findRow(rows, scenarioLimit, variantFileWrite)
	cpu := func(r row) float64 { return r.CPUSecondsPerGigabyte.Median }
	cheapest, hasPeer := bestRow(rows, peer, func(r row) float64 { return -cpu(r) })
	if g.Status == goalNotMeasured || !hasLoopback || !hasWrite || !hasPeer || cpu(cheapest) <= 0 {
		return g
	}
	floor := cpu(loopback) + cpu(write)
	g.Detail += fmt.Sprintf("; floor here (loopback copy + file write): %s CPU-s/GB, 1/%s of %s's cheapest (%s)",
		formatPrecise(floor), formatNumber(cpu(cheapest)/floor), peer, cheapest.Variant)
	return g
}

// withFraction adds the ratio as 1/x to the detail: how a CPU goal is
// phrased.
func withFraction(g goal) goal {
	if g.Value != nil && *g.Value > 0 {
		g.Detail += fmt.Sprintf("; mirrord's is 1/%s of it", formatNumber(1 / *g.Value))
	}
	return g
}

// serveGoal: serving from mirrord is at least as fast as from the broker,
// on every variant both were measured on.
func serveGoal(rows []row) goal {
	const name, target = "serving throughput from mirrord >= the Kafka broker's", 1.0
	throughput := func(r row) float64 { return r.MegabytesPerSecond.Median }
	if g, ok := worstPair(rows, name, scenarioServeMirrord, scenarioServeKafka, throughput, "MB/s", target, false); ok {
		return g
	}
	return unmeasuredGoal(name, target, false, "no serve-mirrord and serve-kafka rows of the same variant")
}

// worstPair judges figure(a)/figure(b) over the rows of scenarios a and b
// that share a Variant, the worst ratio counting; false when no pair has
// a ratio.
func worstPair(rows []row, name, a, b string, figure func(row) float64, unit string, target float64, atMost bool) (goal, bool) {
	var worst *float64
	var worstA, worstB row
	for _, ra := range rows {
		if ra.Scenario != a || !ra.measured() {
			continue
		}
		rb, ok := findRow(rows, b, ra.Variant)
		if !ok {
			continue
		}
		value := ratioOf(figure(ra), figure(rb))
		if value != nil && (worst == nil || (atMost && *value > *worst) || (!atMost && *value < *worst)) {
			worst, worstA, worstB = value, ra, rb
		}
	}
	if worst == nil {
		return goal{}, false
	}
	detail := fmt.Sprintf("%s: %s %s %s, %s %s %s (same variant; the worst one counts)",
		worstA.Variant, a, formatNumber(figure(worstA)), unit, b, formatNumber(figure(worstB)), unit)
	return measuredGoal(name, *worst, target, atMost, detail), true
}

// bestRow is the measured row of scenario with the largest score.
func bestRow(rows []row, scenario string, score func(row) float64) (row, bool) {
	var best row
	found := false
	for _, r := range rows {
		if r.Scenario == scenario && r.measured() && (!found || score(r) > score(best)) {
			best, found = r, true
		}
	}
	return best, found
}

// missingRows says which of two rows a goal lacked.
func missingRows(hasA bool, a string, hasB bool, b string) string {
	var names []string
	if !hasA {
		names = append(names, a)
	}
	if !hasB {
		names = append(names, b)
	}
	return "no measured row: " + strings.Join(names, ", ")
}

const idlePartitionsMin = 10000

// idleScales are the scale results of the idle-partitions goal.
func idleScales(scales []ScaleResult) []ScaleResult {
	var idle []ScaleResult
	for _, s := range scales {
		if s.Partitions >= idlePartitionsMin {
			idle = append(idle, s)
		}
	}
	return idle
}

func idleCPUGoal(scales []ScaleResult) goal {
	const name, target = "10,000 idle partitions: CPU <= 2% of a core", 0.02
	idle := idleScales(scales)
	if len(idle) == 0 {
		return unmeasuredGoal(name, target, true, "no scale result with >= 10000 partitions")
	}
	worst := slices.MaxFunc(idle, func(a, b ScaleResult) int { return cmp.Compare(a.CPUPerSecond, b.CPUPerSecond) })
	detail := fmt.Sprintf("%d partitions: %s%% of a core", worst.Partitions, formatNumber(worst.CPUPerSecond*100))
	return measuredGoal(name, worst.CPUPerSecond, target, true, detail)
}

func idleRSSGoal(scales []ScaleResult) goal {
	const name, target = "10,000 idle partitions: RSS <= 512 MB", 512.0
	idle := slices.DeleteFunc(idleScales(scales), func(s ScaleResult) bool { return s.RSS <= 0 })
	if len(idle) == 0 {
		return unmeasuredGoal(name, target, true, "no scale result with >= 10000 partitions and an RSS")
	}
	worst := slices.MaxFunc(idle, func(a, b ScaleResult) int { return cmp.Compare(a.RSS, b.RSS) })
	megabytes := float64(worst.RSS) / bytesPerMegabyte
	detail := fmt.Sprintf("%d partitions: %s MB", worst.Partitions, formatNumber(megabytes))
	return measuredGoal(name, megabytes, target, true, detail)
}

// writeReport writes <mode>.md, <mode>.json and <mode>.png into dir
// (created if need be), each atomically, and returns their paths in that
// order.
func writeReport(dir string, r Report) (paths []string, err error) {
	if r.Mode == "" || r.Mode != filepath.Base(r.Mode) || strings.HasPrefix(r.Mode, ".") {
		return nil, fmt.Errorf("bench: report: mode %q is not a file name", r.Mode)
	}
	rows := aggregateAll(r.Measurements)
	goals := evaluateGoals(rows, r.Scales)
	for _, t := range r.Tables {
		goals = append(goals, t.Goals...)
	}
	document, err := encodeReport(r, rows, goals)
	if err != nil {
		return nil, err
	}
	chart, err := renderChart(r, rows)
	if err != nil {
		return nil, err
	}
	files := []struct {
		extension string
		data      []byte
	}{
		{".md", renderMarkdown(r, rows, goals)},
		{".json", document},
		{".png", chart},
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: report: %w", err)
	}
	for _, f := range files {
		path := filepath.Join(dir, r.Mode+f.extension)
		if err := writeFileAtomic(path, f.data); err != nil {
			return nil, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// writeFileAtomic replaces path with data so that a reader (or a run that
// dies midway) sees the old file or the new one, never half of one.
func writeFileAtomic(path string, data []byte) (err error) {
	temporary, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("bench: report: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("bench: report: %s: %w", path, err), os.Remove(temporary.Name()))
		}
	}()
	_, err = temporary.Write(data)
	if err == nil {
		err = temporary.Sync() // the rename must not land before the data
	}
	if err = errors.Join(err, temporary.Close()); err != nil {
		return err
	}
	if err := os.Chmod(temporary.Name(), 0o644); err != nil { // CreateTemp makes it 0600
		return err
	}
	return os.Rename(temporary.Name(), path)
}

// The JSON document: the raw samples, so that a later run can aggregate
// them again, and the rows and goals as this run computed them. Durations
// are integer nanoseconds, exact through a round trip.
type reportDocument struct {
	Format       int                   `json:"format"` // reportFormat
	Mode         string                `json:"mode"`
	Started      time.Time             `json:"started"`
	Machine      string                `json:"machine"`
	Measurements []measurementDocument `json:"measurements"`
	Lags         []lagDocument         `json:"lags"`
	Scales       []scaleDocument       `json:"scales"`
	Commits      []commitDocument      `json:"commits"`
	CommitRows   []commitRow           `json:"commitRows"`
	Tables       []Table               `json:"tables"`
	Rows         []row                 `json:"rows"`
	Goals        []goal                `json:"goals"`
	Notes        []string              `json:"notes"`
}

type measurementDocument struct {
	Scenario string           `json:"scenario"`
	Variant  string           `json:"variant"`
	Note     string           `json:"note"`
	Samples  []sampleDocument `json:"samples"`
}

type sampleDocument struct {
	WallNanoseconds int64 `json:"wallNanoseconds"`
	Bytes           int64 `json:"bytes"`
	Records         int64 `json:"records"`
	CPUNanoseconds  int64 `json:"cpuNanoseconds"`
	PeakRSSBytes    int64 `json:"peakRSSBytes"`
}

type lagDocument struct {
	Variant            string  `json:"variant"`
	RateBytesPerSecond float64 `json:"rateBytesPerSecond"`
	Count              int     `json:"count"`
	P50Nanoseconds     int64   `json:"p50Nanoseconds"`
	P99Nanoseconds     int64   `json:"p99Nanoseconds"`
	MaxNanoseconds     int64   `json:"maxNanoseconds"`
	NodesBusy          float64 `json:"nodesBusy"`
	Cores              int     `json:"cores"`
}

type scaleDocument struct {
	Partitions       int     `json:"partitions"`
	CPUPerSecond     float64 `json:"cpuPerSecond"`
	RSSBytes         int64   `json:"rssBytes"`
	SetupNanoseconds int64   `json:"setupNanoseconds"`
}

// encodeReport is the JSON document of r; slices are never null, so that a
// reader need not tell "none" from "absent".
func encodeReport(r Report, rows []row, goals []goal) ([]byte, error) {
	d := reportDocument{
		Format: reportFormat, Mode: r.Mode, Started: r.Started, Machine: r.Machine,
		Measurements: make([]measurementDocument, len(r.Measurements)),
		Lags:         make([]lagDocument, len(r.Lags)),
		Scales:       make([]scaleDocument, len(r.Scales)),
		Commits:      encodeCommits(r.Commits),
		CommitRows:   append([]commitRow{}, aggregateCommits(r.Commits)...),
		Tables:       append([]Table{}, r.Tables...),
		Rows:         append([]row{}, rows...),
		Goals:        append([]goal{}, goals...),
		Notes:        append([]string{}, r.Notes...),
	}
	for i, m := range r.Measurements {
		samples := make([]sampleDocument, len(m.Samples))
		for j, s := range m.Samples {
			samples[j] = sampleDocument{int64(s.Wall), s.Bytes, s.Records, int64(s.CPU), s.PeakRSS}
		}
		d.Measurements[i] = measurementDocument{m.Scenario, m.Variant, m.Note, samples}
	}
	for i, l := range r.Lags {
		d.Lags[i] = lagDocument{l.Variant, l.RateBytes, l.Count, int64(l.P50), int64(l.P99), int64(l.Max), l.NodesBusy, l.Cores}
	}
	for i, s := range r.Scales {
		d.Scales[i] = scaleDocument{s.Partitions, s.CPUPerSecond, s.RSS, int64(s.SetupTime)}
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("bench: report: json: %w", err)
	}
	return append(data, '\n'), nil
}

// decodeReport reads a document written by encodeReport, refusing another
// format version.
func decodeReport(data []byte) (reportDocument, error) {
	var d reportDocument
	if err := json.Unmarshal(data, &d); err != nil {
		return reportDocument{}, fmt.Errorf("bench: report: json: %w", err)
	}
	if d.Format != reportFormat {
		return reportDocument{}, fmt.Errorf("bench: report: json format %d, want %d", d.Format, reportFormat)
	}
	return d, nil
}

// report is the Report the document was written from (Measurements, Lags,
// Scales, Commits and Notes; the rows and goals follow from it).
func (d reportDocument) report() Report {
	r := Report{Mode: d.Mode, Started: d.Started, Machine: d.Machine, Tables: d.Tables, Notes: d.Notes}
	for _, m := range d.Measurements {
		samples := make([]Sample, len(m.Samples))
		for j, s := range m.Samples {
			samples[j] = Sample{time.Duration(s.WallNanoseconds), s.Bytes, s.Records, time.Duration(s.CPUNanoseconds), s.PeakRSSBytes}
		}
		r.Measurements = append(r.Measurements, Measurement{m.Scenario, m.Variant, samples, m.Note})
	}
	for _, l := range d.Lags {
		r.Lags = append(r.Lags, LagResult{l.Variant, l.RateBytesPerSecond, l.Count,
			time.Duration(l.P50Nanoseconds), time.Duration(l.P99Nanoseconds), time.Duration(l.MaxNanoseconds), l.NodesBusy, l.Cores})
	}
	for _, s := range d.Scales {
		r.Scales = append(r.Scales, ScaleResult{s.Partitions, s.CPUPerSecond, s.RSSBytes, time.Duration(s.SetupNanoseconds)})
	}
	r.Commits = decodeCommits(d.Commits)
	return r
}

// renderMarkdown is the report for people: title, the tables, the goals
// and the notes.
func renderMarkdown(r Report, rows []row, goals []goal) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmark report: %s\n\n", r.Mode)
	fmt.Fprintf(&b, "%s; started %s.\n\n", r.Machine, r.Started.UTC().Format("2006-01-02 15:04:05 UTC"))
	fmt.Fprintf(&b, "![throughput, CPU and lag](%s.png)\n\n", r.Mode)
	writeThroughputTable(&b, rows)
	writeTLSTable(&b, rows)
	writeLagTable(&b, r.Lags)
	writeScaleTable(&b, r.Scales)
	commits := aggregateCommits(r.Commits)
	writeCommitTable(&b, commits)
	for _, t := range r.Tables {
		writeTable(&b, t)
	}
	writeGoals(&b, goals)
	writeNotes(&b, append(slices.Clip(r.Notes), commitNotes(commits)...), rows)
	return []byte(b.String())
}

func writeThroughputTable(b *strings.Builder, rows []row) {
	b.WriteString("## Throughput\n\n")
	if len(rows) == 0 {
		b.WriteString("No throughput measured.\n\n")
		return
	}
	b.WriteString("| Scenario | Variant | MB/s median [min-max] | records/s | CPU-s/GB median [min-max] | peak RSS MB | x limit | x mirrord | n |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			markdownCell(r.Scenario), markdownCell(r.Variant),
			formatSpread(r, r.MegabytesPerSecond), formatMeasured(r, r.RecordsPerSecond),
			formatSpread(r, r.CPUSecondsPerGigabyte), formatMegabytes(r.PeakRSSBytes),
			formatRatio(r.TimesLimit), formatTimesMirrord(r), formatSampleCount(r))
	}
	b.WriteString("\nMB = 10^6 bytes, GB = 10^9 bytes. x limit: MB/s over the limit row's (loopback copy). " +
		"x mirrord: MB/s over mirrord's on the same variant; CPU: this row's CPU-s/GB over mirrord's " +
		"(how many times cheaper mirrord is).\n\n")
}

func writeLagTable(b *strings.Builder, lags []LagResult) {
	b.WriteString("## Lag\n\nSource acknowledgement to visibility on the mirror, at a steady produce rate.\n\n")
	if len(lags) == 0 {
		b.WriteString("No lag measured.\n\n")
		return
	}
	b.WriteString("| Variant | rate MB/s | records timed | p50 ms | p99 ms | max ms | cores busy (both nodes) |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, l := range lags {
		busy := "-"
		if l.Cores > 0 {
			busy = fmt.Sprintf("%.2f of %d", l.NodesBusy, l.Cores)
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s |\n", markdownCell(l.Variant),
			formatNumber(l.RateBytes/bytesPerMegabyte), l.Count,
			formatMilliseconds(l.P50), formatMilliseconds(l.P99), formatMilliseconds(l.Max), busy)
	}
	b.WriteString("\n")
}

func writeScaleTable(b *strings.Builder, scales []ScaleResult) {
	b.WriteString("## Idle partitions\n\n")
	if len(scales) == 0 {
		b.WriteString("No scale measured.\n\n")
		return
	}
	b.WriteString("| Partitions | CPU, % of a core | RSS MB | setup s |\n")
	b.WriteString("| ---: | ---: | ---: | ---: |\n")
	for _, s := range scales {
		fmt.Fprintf(b, "| %d | %s | %s | %s |\n", s.Partitions, formatNumber(s.CPUPerSecond*100),
			formatMegabytes(s.RSS), formatNumber(s.SetupTime.Seconds()))
	}
	b.WriteString("\n")
}

// writeTable renders a scenario's own section.
func writeTable(b *strings.Builder, t Table) {
	fmt.Fprintf(b, "## %s\n\n", t.Title)
	if t.Intro != "" {
		fmt.Fprintf(b, "%s\n\n", oneLine(t.Intro))
	}
	if len(t.Rows) == 0 {
		b.WriteString("Nothing measured.\n\n")
		return
	}
	cells := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cells[i] = markdownCell(c)
	}
	fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(cells, " | "), strings.Repeat(" --- |", len(t.Columns)))
	for _, r := range t.Rows {
		cells = cells[:0]
		for _, c := range r {
			cells = append(cells, markdownCell(c))
		}
		fmt.Fprintf(b, "| %s |\n", strings.Join(cells, " | "))
	}
	b.WriteString("\n")
}

func writeGoals(b *strings.Builder, goals []goal) {
	b.WriteString("## Goals\n\n")
	for _, g := range goals {
		value := "-"
		if g.Value != nil {
			value = formatPrecise(*g.Value)
		}
		comparison := ">="
		if g.AtMost {
			comparison = "<="
		}
		fmt.Fprintf(b, "- **%s**: %s (%s, target %s %s): %s\n", g.Status, g.Name, value, comparison,
			formatPrecise(g.Target), g.Detail)
	}
	b.WriteString("\n")
}

// writeNotes lists the run's notes and then each row's.
func writeNotes(b *strings.Builder, notes []string, rows []row) {
	var lines []string
	for _, n := range notes {
		lines = append(lines, oneLine(n))
	}
	for _, r := range rows {
		if r.Note != "" {
			lines = append(lines, fmt.Sprintf("%s: %s", r.label(), oneLine(r.Note)))
		}
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("## Notes\n\n")
	for _, line := range lines {
		fmt.Fprintf(b, "- %s\n", line)
	}
}

// formatNumber prints about three significant digits, without exponents
// for the magnitudes a report holds.
func formatNumber(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 0.01 || a == 0:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

// formatPrecise keeps three significant digits below 1 as well, where a
// goal's ratio is compared with its target.
func formatPrecise(v float64) string {
	if math.Abs(v) < 1 {
		return fmt.Sprintf("%.3g", v)
	}
	return formatNumber(v)
}

func formatSpread(r row, s spread) string {
	if !r.measured() {
		return "-"
	}
	return fmt.Sprintf("%s [%s-%s]", formatNumber(s.Median), formatNumber(s.Min), formatNumber(s.Max))
}

func formatMeasured(r row, v float64) string {
	if !r.measured() {
		return "-"
	}
	return formatNumber(v)
}

// formatMegabytes prints a size in MB; 0 means not measured.
func formatMegabytes(bytes int64) string {
	if bytes <= 0 {
		return "-"
	}
	return formatNumber(float64(bytes) / bytesPerMegabyte)
}

func formatRatio(r *float64) string {
	if r == nil {
		return "-"
	}
	return formatNumber(*r) + "x"
}

func formatTimesMirrord(r row) string {
	if r.TimesMirrord == nil && r.CPUTimesMirrord == nil {
		return "-"
	}
	return fmt.Sprintf("%s MB/s, %s CPU", formatRatio(r.TimesMirrord), formatRatio(r.CPUTimesMirrord))
}

func formatSampleCount(r row) string {
	if r.UnusableCount > 0 {
		return fmt.Sprintf("%d (%d unusable)", r.SampleCount, r.UnusableCount)
	}
	return fmt.Sprint(r.SampleCount)
}

func durationMilliseconds(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func formatMilliseconds(d time.Duration) string { return formatNumber(durationMilliseconds(d)) }

// markdownCell keeps a table cell one cell: no pipes, no line breaks.
func markdownCell(s string) string {
	return strings.ReplaceAll(oneLine(s), "|", `\|`)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
