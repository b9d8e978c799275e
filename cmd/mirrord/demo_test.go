package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestMirrorDemoFailover runs the mirror demo with a second of load and
// checks its failover from the outside: every partition STOPPED, the
// mirror had every source record, and the records written afterwards
// continue the source's offsets right after the MIRROR_PID_RESET batch.
func TestMirrorDemoFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	report, err := mirrorDemoRun(ctx, &out, time.Second, nil)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	if len(report.Partitions) != 5 {
		t.Fatalf("failover of %d partitions, want 5\n%s", len(report.Partitions), out.String())
	}
	compared := 0
	for _, p := range report.Partitions {
		if p.LastMirrorOffset != p.SourceHighWatermark {
			t.Errorf("%s: last mirror offset %d, source high watermark %d", p, p.LastMirrorOffset, p.SourceHighWatermark)
		}
		if p.FirstWritten != p.SourceHighWatermark+1 || p.LastWritten != p.FirstWritten+failoverRecordsPerPartition-1 {
			t.Errorf("%s: written at %d..%d, want %d.. (the source's high watermark %d, +1 for MIRROR_PID_RESET)",
				p, p.FirstWritten, p.LastWritten, p.SourceHighWatermark+1, p.SourceHighWatermark)
		}
		if p.ReadBack != failoverRecordsPerPartition {
			t.Errorf("%s: %d records read back, want %d", p, p.ReadBack, failoverRecordsPerPartition)
		}
		if p.ComparedOffset >= 0 {
			compared++
		}
	}
	if compared == 0 {
		t.Errorf("no mirrored record compared with the source's")
	}
	if last := lastLine(out.String()); !strings.HasPrefix(last, "failover: 5 partitions writable in ") ||
		!strings.Contains(last, "3000 records written to the former mirror at offsets ") {
		t.Errorf("last line %q", last)
	}
}

// TestCheckFailover: the check the demo ends with rejects writes that do
// not continue the mirrored offsets.
func TestCheckFailover(t *testing.T) {
	ok := partitionFailover{Topic: "orders", LastMirrorOffset: 100, FirstWritten: 101,
		LastWritten: 100 + failoverRecordsPerPartition, ReadBack: failoverRecordsPerPartition}
	tests := []struct {
		name   string
		change func(*partitionFailover)
		want   string // "" for no error
	}{
		{"continues", func(*partitionFailover) {}, ""},
		{"no PID reset offset", func(p *partitionFailover) { p.FirstWritten, p.LastWritten = 100, 99+failoverRecordsPerPartition }, "first offset written 100, want 101"},
		{"restarted at 0", func(p *partitionFailover) { p.FirstWritten, p.LastWritten = 0, failoverRecordsPerPartition-1 }, "first offset written 0"},
		{"nothing written", func(p *partitionFailover) { p.FirstWritten, p.LastWritten, p.ReadBack = -1, -1, 0 }, "first offset written -1"},
		{"not all read back", func(p *partitionFailover) { p.ReadBack-- }, "read back"},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			p := ok
			test.change(&p)
			err := checkFailover([]partitionFailover{p})
			switch {
			case test.want == "" && err != nil:
				t.Errorf("error %v", err)
			case test.want != "" && (err == nil || !strings.Contains(err.Error(), test.want)):
				t.Errorf("error %v, want one with %q", err, test.want)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
