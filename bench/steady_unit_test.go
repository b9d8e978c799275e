package bench

// Tests of the steady-state goals (steadyGoals) on made-up rows.

import (
	"testing"

	rb "github.com/mirrord/mirrord/recordbatch"
)

func TestSteadyGoals(t *testing.T) {
	const (
		throughput = "steady state: 64 and 1,000 partitions throughput"
		cpu        = "steady state: 64 and 1,000 partitions CPU/GB"
		copier     = "steady state: mirrord CPU/GB <= 1/3"
		floor      = "steady state: one partition CPU/GB"
	)
	steady := func(partitions int32, codec rb.Codec, megabytesPerSecond, cpuSecondsPerGigabyte float64) Measurement {
		return testMeasurement(scenarioMirrordSteady, variantName(partitions, codec), megabytesPerSecond, cpuSecondsPerGigabyte)
	}
	copierRow := func(partitions int32, cpuSecondsPerGigabyte float64) Measurement {
		return testMeasurement(scenarioCopierSteady, variantName(partitions, rb.CodecNone), 100, cpuSecondsPerGigabyte)
	}
	none, lz4 := rb.CodecNone, rb.CodecLZ4
	limits := []Measurement{testMeasurement(scenarioLimit, variantLimit, 2000, 0.4), testMeasurement(scenarioLimit, variantFileWrite, 1000, 0.6)}
	tests := []struct {
		name   string
		goal   string
		rows   []Measurement
		status string
		value  float64
	}{
		{"throughput met", throughput, []Measurement{steady(1, none, 500, 1), steady(64, none, 450, 1), steady(1000, none, 400, 1)}, goalMet, 0.8},
		{"throughput: the worst of 64 and 1,000 counts", throughput, []Measurement{steady(1, none, 500, 1), steady(64, none, 500, 1), steady(1000, none, 100, 1)}, goalNotMet, 0.2},
		{"throughput: each codec against its own one partition", throughput, []Measurement{steady(1, none, 500, 1), steady(64, none, 500, 1), steady(1, lz4, 200, 1), steady(64, lz4, 150, 1)}, goalNotMet, 0.75},
		{"throughput: 10,000 partitions do not count", throughput, []Measurement{steady(1, none, 500, 1), steady(64, none, 500, 1), steady(10000, none, 10, 1)}, goalMet, 1},
		{"throughput without one partition", throughput, []Measurement{steady(64, none, 500, 1)}, goalNotMeasured, 0},
		{"throughput: the one-time rows do not count", throughput, []Measurement{testMeasurement(scenarioMirrord, variantName(1, none), 500, 1), steady(64, none, 500, 1)}, goalNotMeasured, 0},
		{"cpu met", cpu, []Measurement{steady(1, none, 500, 2), steady(64, none, 500, 2.5), steady(1000, none, 500, 2.2)}, goalMet, 1.25},
		{"cpu not met: the worst counts", cpu, []Measurement{steady(1, none, 500, 1), steady(64, none, 500, 1.1), steady(1000, none, 500, 3)}, goalNotMet, 3},
		{"cpu not measured", cpu, []Measurement{steady(1000, none, 500, 3)}, goalNotMeasured, 0},
		{"copier met at every count", copier, []Measurement{steady(1, none, 500, 1), copierRow(1, 4), steady(64, none, 500, 1), copierRow(64, 3.5)}, goalMet, 1 / 3.5},
		{"copier: the worst count counts", copier, []Measurement{steady(1, none, 500, 1), copierRow(1, 10), steady(10000, none, 50, 8), copierRow(10000, 16)}, goalNotMet, 0.5},
		{"copier: the one-time copier rows do not count", copier, []Measurement{steady(1, none, 500, 1), testMeasurement(scenarioCopier, variantName(1, none), 100, 10)}, goalNotMeasured, 0},
		{"floor met", floor, append([]Measurement{steady(1, none, 500, 1.5)}, limits...), goalMet, 1.5},
		{"floor not met", floor, append([]Measurement{steady(1, none, 500, 2)}, limits...), goalNotMet, 2},
		{"floor: the lz4 row is not the one", floor, append([]Measurement{steady(1, lz4, 500, 1)}, limits...), goalNotMeasured, 0},
		{"floor without the limit rows", floor, []Measurement{steady(1, none, 500, 1)}, goalNotMeasured, 0},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			g := findGoal(t, steadyGoals(aggregateAll(test.rows)), test.goal)
			if g.Status != test.status {
				t.Errorf("%s: %s (%s), want %s", g.Name, g.Status, g.Detail, test.status)
			}
			if (g.Value == nil) != (test.status == goalNotMeasured) || (g.Value != nil && !reportNear(*g.Value, test.value)) {
				t.Errorf("%s: value %s, want %v", g.Name, formatRatio(g.Value), test.value)
			}
		})
	}
	// The report judges them with the others.
	if g := findGoal(t, evaluateGoals(aggregateAll([]Measurement{steady(1, none, 500, 1)}), nil), floor); g.Status != goalNotMeasured {
		t.Errorf("evaluateGoals: %s: %s, want %s", g.Name, g.Status, goalNotMeasured)
	}
}

// A steady-state row's "x mirrord" is against mirrord's steady state of
// the same variant, not the one-time row that includes creation.
func TestSteadyRatiosAgainstSteady(t *testing.T) {
	rows := aggregateAll([]Measurement{
		testMeasurement(scenarioMirrord, variantName(64, rb.CodecNone), 100, 4),
		testMeasurement(scenarioMirrordSteady, variantName(64, rb.CodecNone), 400, 2),
		testMeasurement(scenarioCopierSteady, variantName(64, rb.CodecNone), 200, 6),
	})
	copier := rows[2]
	if copier.TimesMirrord == nil || !reportNear(*copier.TimesMirrord, 0.5) || copier.CPUTimesMirrord == nil || !reportNear(*copier.CPUTimesMirrord, 3) {
		t.Errorf("copier-steady against mirrord-steady: %v MB/s, %v CPU; want 0.5 and 3", copier.TimesMirrord, copier.CPUTimesMirrord)
	}
	if rows[1].TimesMirrord != nil {
		t.Errorf("mirrord-steady compared with %v", *rows[1].TimesMirrord)
	}
}
