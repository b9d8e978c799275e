package bench

// The group-commit scenario in the report (commit_test.go measures it):
// its results, their rows (medians over the repeats, mirrord over Kafka
// with the same number of committers), the Markdown table and the JSON
// document's part.

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// CommitResult is the group-commit scenario on one server with one number
// of concurrent committers, measured Repeats times.
type CommitResult struct {
	Server     string // commitServerMirrord or commitServerKafka
	Committers int
	Samples    []CommitSample
	Note       string
}

// CommitSample is one run: Commits answered in Wall, the server process's
// CPU time over it, and the percentiles of the commits' latencies (request
// sent to answer read, at the client).
type CommitSample struct {
	Commits       int64
	Wall          time.Duration
	ServerCPU     time.Duration
	P50, P99, Max time.Duration
}

// commitRow is a CommitResult aggregated: medians over its samples (the
// percentiles are each sample's, then the median of those). TimesKafka is
// commits/s over Kafka's with the same committers, P99TimesKafka the p99
// over Kafka's; nil on Kafka's rows and where Kafka was not measured.
type commitRow struct {
	Server                   string   `json:"server"`
	Committers               int      `json:"committers"`
	Note                     string   `json:"note"`
	SampleCount              int      `json:"sampleCount"`
	CommitsPerSecond         spread   `json:"commitsPerSecond"`
	P50Milliseconds          float64  `json:"p50Milliseconds"`
	P99Milliseconds          float64  `json:"p99Milliseconds"`
	MaxMilliseconds          float64  `json:"maxMilliseconds"`
	CPUMicrosecondsPerCommit float64  `json:"cpuMicrosecondsPerCommit"`
	TimesKafka               *float64 `json:"timesKafka"`
	P99TimesKafka            *float64 `json:"p99TimesKafka"`
}

// aggregateCommits turns the results into rows, in order; a sample
// without commits or wall time is left out of every figure.
func aggregateCommits(results []CommitResult) []commitRow {
	rows := make([]commitRow, len(results))
	for i, r := range results {
		row := commitRow{Server: r.Server, Committers: r.Committers, Note: r.Note, SampleCount: len(r.Samples)}
		var rates, p50s, p99s, maxes, cpus []float64
		for _, s := range r.Samples {
			if s.Commits <= 0 || s.Wall <= 0 {
				continue
			}
			rates = append(rates, float64(s.Commits)/s.Wall.Seconds())
			p50s = append(p50s, durationMilliseconds(s.P50))
			p99s = append(p99s, durationMilliseconds(s.P99))
			maxes = append(maxes, durationMilliseconds(s.Max))
			cpus = append(cpus, float64(s.ServerCPU)/float64(time.Microsecond)/float64(s.Commits))
		}
		row.CommitsPerSecond = spreadOf(rates)
		row.P50Milliseconds, row.P99Milliseconds = spreadOf(p50s).Median, spreadOf(p99s).Median
		row.MaxMilliseconds, row.CPUMicrosecondsPerCommit = spreadOf(maxes).Median, spreadOf(cpus).Median
		rows[i] = row
	}
	for i := range rows {
		r := &rows[i]
		if r.Server == commitServerKafka || r.CommitsPerSecond.Median <= 0 {
			continue
		}
		for _, kafka := range rows {
			if kafka.Server == commitServerKafka && kafka.Committers == r.Committers && kafka.CommitsPerSecond.Median > 0 {
				r.TimesKafka = ratioOf(r.CommitsPerSecond.Median, kafka.CommitsPerSecond.Median)
				r.P99TimesKafka = ratioOf(r.P99Milliseconds, kafka.P99Milliseconds)
				break
			}
		}
	}
	return rows
}

func writeCommitTable(b *strings.Builder, rows []commitRow) {
	b.WriteString("## Offset commits\n\nConcurrent committers, one group, one partition each, one OffsetCommit in flight per committer.\n\n")
	if len(rows) == 0 {
		b.WriteString("No offset commits measured.\n\n")
		return
	}
	b.WriteString("| Server | committers | commits/s median [min-max] | p50 ms | p99 ms | max ms | server CPU µs/commit | x Kafka commits/s | x Kafka p99 | n |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		rate, p50, p99, most, cpu := "-", "-", "-", "-", "-"
		if r.CommitsPerSecond.Median > 0 {
			rate = fmt.Sprintf("%s [%s-%s]", formatNumber(r.CommitsPerSecond.Median),
				formatNumber(r.CommitsPerSecond.Min), formatNumber(r.CommitsPerSecond.Max))
			p50, p99, most = formatNumber(r.P50Milliseconds), formatNumber(r.P99Milliseconds), formatNumber(r.MaxMilliseconds)
			cpu = formatNumber(r.CPUMicrosecondsPerCommit)
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %d |\n", markdownCell(r.Server), r.Committers,
			rate, p50, p99, most, cpu, formatRatio(r.TimesKafka), formatRatio(r.P99TimesKafka), r.SampleCount)
	}
	b.WriteString("\nLatency: request sent to answer read, at the client; the percentiles are each sample's, the table their medians. " +
		"x Kafka: mirrord's commits/s (p99) over Kafka's with the same committers.\n\n")
}

// commitNotes are the rows' notes, one per server, for the Notes list.
func commitNotes(rows []commitRow) []string {
	var notes []string
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Note != "" && !seen[r.Server] {
			seen[r.Server] = true
			notes = append(notes, "offset commits / "+r.Server+": "+r.Note)
		}
	}
	return notes
}

// The JSON document's part: the raw samples (durations in nanoseconds).
type commitDocument struct {
	Server     string                 `json:"server"`
	Committers int                    `json:"committers"`
	Note       string                 `json:"note"`
	Samples    []commitSampleDocument `json:"samples"`
}

type commitSampleDocument struct {
	Commits              int64 `json:"commits"`
	WallNanoseconds      int64 `json:"wallNanoseconds"`
	ServerCPUNanoseconds int64 `json:"serverCpuNanoseconds"`
	P50Nanoseconds       int64 `json:"p50Nanoseconds"`
	P99Nanoseconds       int64 `json:"p99Nanoseconds"`
	MaxNanoseconds       int64 `json:"maxNanoseconds"`
}

func encodeCommits(results []CommitResult) []commitDocument {
	documents := make([]commitDocument, len(results))
	for i, r := range results {
		samples := make([]commitSampleDocument, len(r.Samples))
		for j, s := range r.Samples {
			samples[j] = commitSampleDocument{s.Commits, int64(s.Wall), int64(s.ServerCPU), int64(s.P50), int64(s.P99), int64(s.Max)}
		}
		documents[i] = commitDocument{r.Server, r.Committers, r.Note, samples}
	}
	return documents
}

func decodeCommits(documents []commitDocument) []CommitResult {
	var results []CommitResult
	for _, d := range documents {
		r := CommitResult{Server: d.Server, Committers: d.Committers, Note: d.Note, Samples: make([]CommitSample, len(d.Samples))}
		for j, s := range d.Samples {
			r.Samples[j] = CommitSample{s.Commits, time.Duration(s.WallNanoseconds), time.Duration(s.ServerCPUNanoseconds),
				time.Duration(s.P50Nanoseconds), time.Duration(s.P99Nanoseconds), time.Duration(s.MaxNanoseconds)}
		}
		results = append(results, r)
	}
	return results
}

// exampleCommits are the group-commit results of exampleReport: mirrord
// at 1000 commits/s median with a 2 ms p99, Kafka at 2000 with 4 ms.
func exampleCommits() []CommitResult {
	sample := func(wall, p99 time.Duration) CommitSample {
		return CommitSample{Commits: 1000, Wall: wall, ServerCPU: 300 * time.Millisecond,
			P50: time.Millisecond, P99: p99, Max: 5 * time.Millisecond}
	}
	return []CommitResult{
		{Server: commitServerMirrord, Committers: 1, Note: "synced",
			Samples: []CommitSample{sample(time.Second, 2*time.Millisecond), sample(800*time.Millisecond, 2*time.Millisecond),
				sample(1250*time.Millisecond, 2*time.Millisecond)}},
		{Server: commitServerKafka, Committers: 1, Note: "not synced",
			Samples: []CommitSample{sample(500*time.Millisecond, 4*time.Millisecond), sample(500*time.Millisecond, 4*time.Millisecond),
				sample(500*time.Millisecond, 4*time.Millisecond)}},
	}
}

func TestAggregateCommits(t *testing.T) {
	mirrord := func(committers int, wall time.Duration) CommitResult {
		return CommitResult{Server: commitServerMirrord, Committers: committers,
			Samples: []CommitSample{{Commits: 100, Wall: wall, ServerCPU: 10 * time.Millisecond, P50: time.Millisecond, P99: 2 * time.Millisecond, Max: 3 * time.Millisecond}}}
	}
	kafka := mirrord(1, 400*time.Millisecond)
	kafka.Server = commitServerKafka
	kafka.Samples[0].P99 = 8 * time.Millisecond
	tests := []struct {
		name          string
		results       []CommitResult
		index         int
		rate          float64
		timesKafka    *float64
		p99TimesKafka *float64
	}{
		{"mirrord over Kafka", []CommitResult{mirrord(1, 100*time.Millisecond), kafka}, 0, 1000, reportPointer(4), reportPointer(0.25)},
		{"Kafka has no ratio", []CommitResult{mirrord(1, 100*time.Millisecond), kafka}, 1, 250, nil, nil},
		{"other committer count gives -", []CommitResult{mirrord(16, 100*time.Millisecond), kafka}, 0, 1000, nil, nil},
		{"no Kafka gives -", []CommitResult{mirrord(1, 200*time.Millisecond)}, 0, 500, nil, nil},
		{"unusable sample gives no figures", []CommitResult{mirrord(1, 0), kafka}, 0, 0, nil, nil},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			r := aggregateCommits(test.results)[test.index]
			if !reportNear(r.CommitsPerSecond.Median, test.rate) || r.SampleCount != 1 {
				t.Errorf("commits/s %v over %d samples, want %v over 1", r.CommitsPerSecond.Median, r.SampleCount, test.rate)
			}
			if test.rate > 0 && (!reportNear(r.CPUMicrosecondsPerCommit, 100) || !reportNear(r.P50Milliseconds, 1)) {
				t.Errorf("CPU %v µs/commit, p50 %v ms; want 100 and 1", r.CPUMicrosecondsPerCommit, r.P50Milliseconds)
			}
			for _, c := range []struct {
				name      string
				got, want *float64
			}{{"x Kafka", r.TimesKafka, test.timesKafka}, {"p99 x Kafka", r.P99TimesKafka, test.p99TimesKafka}} {
				if (c.got == nil) != (c.want == nil) || (c.got != nil && !reportNear(*c.got, *c.want)) {
					t.Errorf("%s = %s, want %s", c.name, formatRatio(c.got), formatRatio(c.want))
				}
			}
		})
	}
}
