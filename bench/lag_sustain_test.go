package bench

// Lag at the sustainable rate: the highest produce rate the source and
// the mirror together sustain on this machine, found by a short search,
// and the lag at 50% and 80% of it, and at a fixed 50 MB/s (lag_test.go
// has how a run produces and times the records).
//
// A rate is sustained when a search run of lagSearchTime at it (one
// partition) both
//
//   - reaches it: the source acknowledges at least lagSustainReached of
//     the bytes the pace asks (else the source, or the machine, cannot
//     take it), and
//   - keeps the lag bounded: the p99 lag of the run's last third of
//     records is at most lagSustainTailMax. A mirror slower than the
//     source falls behind by the difference every second, so its lag
//     grows through the run; 100 ms is ten times the goal at half the
//     rate, far above any lag a mirror keeping up shows here.
//
// The search doubles the rate from lagSearchStart while it is sustained
// (up to lagSearchMax), halves it while it is not (down to
// lagSearchMin; lagSearchRange in smoke mode), then bisects between the highest sustained and the
// lowest not sustained rate lagBisections times (geometric means). The
// sustainable rate is the highest rate sustained.

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

const (
	lagSustainReached = 0.95
	lagSustainTailMax = 100 * time.Millisecond
	lagSearchStart    = 50e6
	lagSearchMin      = 5e6
	lagSearchMax      = 3.2e9
	lagFixedRate      = 50e6 // the fixed load, bytes per second
	lagHalfP99Max     = 10.0 // ms: the goal at 50% of the sustainable rate
	lagHighP99Max     = 50.0 // ms: the goal at 80%
	lagSustainTitle   = "Lag at the sustainable rate"
)

// lagSearchTime is how long a search run produces, and lagBisections how
// many bisections follow the doubling.
func lagSearchTime(mode benchMode) (time.Duration, int) {
	switch mode.Name {
	case "smoke":
		return time.Second, 0
	case "quick":
		return 4 * time.Second, 2
	}
	return 10 * time.Second, 3
}

// lagSearchRange is the search's first rate and its bounds, bytes per
// second. Smoke mode, which checks the search and the table and judges no
// rate, starts low: on a 2-core machine with other tests beside it the
// source took 4-5 MB/s of every rate asked, so that no rate down to
// lagSearchMin was sustained, no 50% and 80% runs followed, and the smoke
// failed (at load average 40 it took 1.2 MB/s of 4 and sustained 0.5);
// and it stops doubling soon on an idle machine.
func lagSearchRange(mode benchMode) (start, low, high float64) {
	if mode.Name == "smoke" {
		return 4e6, 0.25e6, 16e6
	}
	return lagSearchStart, lagSearchMin, lagSearchMax
}

// lagSustained reports whether a search run sustained its rate, and why
// not.
func lagSustained(m lagMeasured, asked float64) (bool, string) {
	switch {
	case m.RateBytes < lagSustainReached*asked:
		return false, fmt.Sprintf("the source took %.0f MB/s", m.RateBytes/1e6)
	case m.tailP99 > lagSustainTailMax:
		return false, fmt.Sprintf("lag grew: p99 %s ms in the last third", formatMilliseconds(m.tailP99))
	}
	return true, "sustained"
}

// lagLoad is one measured load of the table.
type lagLoad struct {
	name     string  // "50% of sustainable"
	key      string  // Numbers prefix: "half", "high", "fixed"
	rate     float64 // bytes per second
	goal     float64 // p99 target, ms; 0: no goal
	goalName string
}

// lagSustainScenario searches the sustainable rate and measures the lag
// at 50% and 80% of it and at lagFixedRate: the report's lag Table (with
// the lag goals) and the measured runs as LagResults (the "## Lag" table
// and the chart).
func lagSustainScenario(tb testing.TB, mode benchMode) (Table, []LagResult, error) {
	tb.Helper()
	nodes, err := startLagNodes(tb)
	if err != nil {
		return Table{}, nil, err
	}
	table := Table{
		Title:   lagSustainTitle,
		Columns: []string{"Run", "Rate asked (MB/s)", "Reached (MB/s)", "Records", "p50 (ms)", "p99 (ms)", "p99 last third (ms)", "Max (ms)", "Nodes busy (cores)", "Nodes waiting for a core (s/s)", "Outcome"},
		Numbers: map[string]float64{},
	}
	row := func(name string, asked float64, m lagMeasured, outcome string) []string {
		return []string{name, formatNumber(asked / 1e6), formatNumber(m.RateBytes / 1e6), fmt.Sprint(m.Count),
			formatMilliseconds(m.P50), formatMilliseconds(m.P99), formatMilliseconds(m.tailP99), formatMilliseconds(m.Max),
			fmt.Sprintf("%.2f of %d", m.NodesBusy, m.Cores), fmt.Sprintf("%.2f", m.queued), outcome}
	}
	searchTime, bisections := lagSearchTime(mode)
	probe := func(rate float64) (bool, error) {
		m, err := nodes.run(tb, searchTime, 1, rate)
		if err != nil {
			return false, err
		}
		ok, why := lagSustained(m, rate)
		table.Rows = append(table.Rows, row("search", rate, m, why))
		return ok, nil
	}
	sustainable, failed := 0.0, math.Inf(1)
	start, low, high := lagSearchRange(mode)
	for rate := start; rate <= high && rate >= low; { // bounded: doubling or halving within [min, max]
		ok, err := probe(rate)
		if err != nil {
			return table, nil, err
		}
		if ok {
			sustainable = rate
			if !math.IsInf(failed, 1) {
				break
			}
			rate *= 2
			continue
		}
		failed = rate
		if sustainable > 0 {
			break
		}
		rate /= 2
	}
	for range bisections {
		if sustainable == 0 || math.IsInf(failed, 1) {
			break
		}
		rate := math.Sqrt(sustainable * failed)
		ok, err := probe(rate)
		if err != nil {
			return table, nil, err
		}
		if ok {
			sustainable = rate
		} else {
			failed = rate
		}
	}
	table.Numbers["sustainable_bytes_per_second"] = sustainable
	table.Intro = lagSustainIntro(sustainable, failed, searchTime, mode)
	loads := []lagLoad{
		{name: "50% of sustainable", key: "half", rate: sustainable / 2, goal: lagHalfP99Max, goalName: fmt.Sprintf("lag p99 <= %.0f ms at 50%% of the sustainable rate", lagHalfP99Max)},
		{name: "80% of sustainable", key: "high", rate: sustainable * 0.8, goal: lagHighP99Max, goalName: fmt.Sprintf("lag p99 <= %.0f ms at 80%% of the sustainable rate", lagHighP99Max)},
		{name: "fixed 50 MB/s", key: "fixed", rate: lagFixedRate},
	}
	var results []LagResult
	partitions := []int32{1}
	if mode.Full {
		partitions = append(partitions, 64)
	}
	for _, load := range loads {
		if load.rate <= 0 {
			table.Goals = append(table.Goals, lagLoadGoal(load, nil))
			continue
		}
		for _, count := range partitions {
			m, err := nodes.run(tb, lagProduceTime(mode), count, load.rate)
			if err != nil {
				return table, results, err
			}
			results = append(results, m.LagResult)
			name := load.name
			if count > 1 {
				name += fmt.Sprintf(", %d partitions", count)
			}
			table.Rows = append(table.Rows, row(name, load.rate, m, "measured"))
			if count == 1 {
				prefix := "lag_" + load.key + "_"
				table.Numbers[prefix+"rate_bytes_per_second"] = m.RateBytes
				table.Numbers[prefix+"p50_ms"] = durationMilliseconds(m.P50)
				table.Numbers[prefix+"p99_ms"] = durationMilliseconds(m.P99)
				table.Numbers[prefix+"max_ms"] = durationMilliseconds(m.Max)
				table.Numbers[prefix+"nodes_busy_cores"] = m.NodesBusy
				table.Numbers[prefix+"nodes_queued_seconds_per_second"] = m.queued
				if load.goal > 0 {
					table.Goals = append(table.Goals, lagLoadGoal(load, &m.LagResult))
				}
			}
		}
	}
	return table, results, nil
}

// lagSustainIntro says what the table holds and the rate found.
func lagSustainIntro(sustainable, failed float64, searchTime time.Duration, mode benchMode) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Source acknowledgement to visibility on the mirror (1 partition, lz4). "+
		"A search (runs of %v) looks for the highest rate the source and the mirror together sustain here: "+
		"the source takes at least %.0f%% of the rate asked and the p99 lag of the run's last third stays <= %s ms. ",
		searchTime, lagSustainReached*100, formatMilliseconds(lagSustainTailMax))
	switch {
	case sustainable == 0:
		_, low, _ := lagSearchRange(mode)
		fmt.Fprintf(&b, "No rate down to %.2g MB/s was sustained. ", low/1e6)
	case math.IsInf(failed, 1):
		fmt.Fprintf(&b, "Sustainable: %.0f MB/s, the top of the search (not a limit found). ", sustainable/1e6)
	default:
		fmt.Fprintf(&b, "Sustainable: %.0f MB/s (%.0f MB/s was not). ", sustainable/1e6, failed/1e6)
	}
	fmt.Fprintf(&b, "The measured runs produce for %v each.", lagProduceTime(mode))
	return b.String()
}

// lagLoadGoal judges a load's p99 against its target; r nil: no
// sustainable rate was found.
func lagLoadGoal(load lagLoad, r *LagResult) goal {
	if r == nil || r.Count == 0 {
		return unmeasuredGoal(load.goalName, load.goal, true, "no sustainable rate found, or no timed record")
	}
	detail := fmt.Sprintf("%s MB/s asked, %s reached: p99 %s ms over %d records; source and mirror kept %.2f of %d cores busy",
		formatNumber(load.rate/1e6), formatNumber(r.RateBytes/1e6), formatMilliseconds(r.P99), r.Count, r.NodesBusy, r.Cores)
	return measuredGoal(load.goalName, durationMilliseconds(r.P99), load.goal, true, detail)
}

// TestLagSustainSmoke runs the scenario (smoke mode unless
// scenarioModeEnv says otherwise) and checks the table is filled and
// sane. It asserts no timing.
func TestLagSustainSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two mirrord processes")
	}
	mode := scenarioMode(t)
	skipForReportSmoke(t, mode, "checkLagSustain")
	table, results, err := lagSustainScenario(t, mode)
	if err != nil {
		t.Fatal(err)
	}
	checkLagSustain(t, mode, table, results)
}

// checkLagSustain checks the table and the measured runs of
// lagSustainScenario(mode).
func checkLagSustain(t *testing.T, mode benchMode, table Table, results []LagResult) {
	t.Helper()
	for _, r := range table.Rows {
		t.Log(strings.Join(r, " | "))
	}
	t.Log(table.Intro)
	if table.Title != lagSustainTitle || len(table.Rows) < 2 || table.Numbers["sustainable_bytes_per_second"] <= 0 {
		t.Fatalf("table %q: %d rows, sustainable %v", table.Title, len(table.Rows), table.Numbers["sustainable_bytes_per_second"])
	}
	for _, r := range table.Rows {
		if len(r) != len(table.Columns) {
			t.Errorf("row %v: %d cells, %d columns", r, len(r), len(table.Columns))
		}
	}
	if want := 3 * (1 + boolCount(mode.Full)); len(results) != want {
		t.Fatalf("%d measured runs, want %d", len(results), want)
	}
	for _, r := range results {
		if r.Count <= 0 || !(r.P50 <= r.P99 && r.P99 <= r.Max) || !(r.RateBytes > 0) {
			t.Errorf("%s: not sane: %+v", r.Variant, r)
		}
	}
	if len(table.Goals) != 2 {
		t.Fatalf("%d goals, want 2", len(table.Goals))
	}
	for _, g := range table.Goals {
		if g.Status == goalNotMeasured {
			t.Errorf("%s: not measured (%s)", g.Name, g.Detail)
		}
	}
}

// TestLagSustained: the two conditions of a sustained rate.
func TestLagSustained(t *testing.T) {
	for _, test := range []struct {
		name    string
		reached float64
		tail    time.Duration
		want    bool
	}{
		{"kept up", 99e6, 20 * time.Millisecond, true},
		{"source too slow", 90e6, 5 * time.Millisecond, false},
		{"lag grew", 100e6, 300 * time.Millisecond, false},
		{"at both bounds", 95e6, lagSustainTailMax, true},
	} {
		m := lagMeasured{LagResult: LagResult{RateBytes: test.reached}, tailP99: test.tail}
		if got, why := lagSustained(m, 100e6); got != test.want {
			t.Errorf("%s: sustained %v (%s), want %v", test.name, got, why, test.want)
		}
	}
}
