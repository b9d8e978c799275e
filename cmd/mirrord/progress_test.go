package main

import (
	"bytes"
	"errors"
	"github.com/mirrord/mirrord"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ at time.Time }

func (c *fakeClock) now() time.Time          { return c.at }
func (c *fakeClock) advance(d time.Duration) { c.at = c.at.Add(d) }
func newFakeClock() *fakeClock               { return &fakeClock{at: time.Unix(1_700_000_000, 0)} }
func drawnLines(out string) []string         { return strings.Split(out, progressEraseLine)[1:] }
func terminalLine(out *bytes.Buffer, clock *fakeClock) *progressLine {
	return &progressLine{out: out, now: clock.now, label: "Mirror m"}
}

// The ETA is the work left over the smoothed rate: the first rate as
// measured, then an exponentially weighted mean with the time constant
// progressRateWindow (weight 1-e^(-dt/3s) = 0.2835 for dt 1s); none while
// the work grows on average, and a new rate when the unit changes.
func TestProgressLineETA(t *testing.T) {
	clock := newFakeClock()
	var out bytes.Buffer
	line := terminalLine(&out, clock)
	steps := []struct {
		after time.Duration
		step  progressStep
		want  string
	}{
		{0, progressStep{Done: 0, Total: 1000, Doing: "stopped", Left: 1000, Unit: "partitions"},
			"Mirror m: 0/1000 partitions stopped (0%), 1000 partitions left, ETA -"},
		// 100 in 1s: 100/s, 900 left: 9s.
		{time.Second, progressStep{Done: 100, Total: 1000, Doing: "stopped", Left: 900, Unit: "partitions"},
			"Mirror m: 100/1000 partitions stopped (10%), 900 partitions left at 100/s, ETA 9s"},
		// 200/s measured: 100 + 0.2835*(200-100) = 128.35/s; 700 left: 5.45s.
		{time.Second, progressStep{Done: 300, Total: 1000, Doing: "stopped", Left: 700, Unit: "partitions"},
			"Mirror m: 300/1000 partitions stopped (30%), 700 partitions left at 128/s, ETA 5s"},
		// -100/s measured: 128.35 + 0.2835*(-100-128.35) = 63.61/s; 800 left: 12.6s.
		{time.Second, progressStep{Done: 200, Total: 1000, Doing: "stopped", Left: 800, Unit: "partitions"},
			"Mirror m: 200/1000 partitions stopped (20%), 800 partitions left at 64/s, ETA 13s"},
		// -1000/s: 63.61 + 0.2835*(-1063.61) < 0: the work grows, no ETA.
		{time.Second, progressStep{Done: 0, Total: 1000, Doing: "stopped", Left: 1800, Unit: "partitions"},
			"Mirror m: 0/1000 partitions stopped (0%), 1800 partitions left, ETA -"},
		// Another unit: a new rate.
		{time.Second, progressStep{Done: 0, Total: 1000, Doing: "caught up", Left: 50000, Unit: "records"},
			"Mirror m: 0/1000 partitions caught up (0%), 50000 records left, ETA -"},
		// 40000 records in 2s: 20000/s, 10000 left: 0.5s.
		{2 * time.Second, progressStep{Done: 900, Total: 1000, Doing: "caught up", Left: 10000, Unit: "records"},
			"Mirror m: 900/1000 partitions caught up (90%), 10000 records left at 20000/s, ETA <1s"},
		{time.Second, progressStep{Done: 1000, Total: 1000, Doing: "caught up", Left: 0, Unit: "records"},
			"Mirror m: 1000/1000 partitions caught up (100%), 0 records left at 17165/s, ETA 0s"},
		// A lower bound: no ETA, and the rate starts anew after it.
		{time.Second, progressStep{Done: 10, Total: 1000, Doing: "caught up", Left: 500, Unit: "records", LeftAtLeast: true},
			"Mirror m: 10/1000 partitions caught up (1%), at least 500 records left, ETA -"},
		{time.Second, progressStep{Done: 10, Total: 1000, Doing: "caught up", Left: 9000, Unit: "records"},
			"Mirror m: 10/1000 partitions caught up (1%), 9000 records left, ETA -"},
		{time.Second, progressStep{Done: 500, Total: 1000, Doing: "caught up", Left: 6000, Unit: "records"},
			"Mirror m: 500/1000 partitions caught up (50%), 6000 records left at 3000/s, ETA 2s"},
		// Growing by a billion: no ETA.
		{time.Second, progressStep{Done: 3, Total: 7, Doing: "caught up", Left: 1e9, Unit: "records"},
			"Mirror m: 3/7 partitions caught up (42%), 1000000000 records left, ETA -"},
		// Another unit again, and hours: 7e4 in 10s, 7000/s; 999930000 left: 142847s.
		{time.Second, progressStep{Done: 3, Total: 7, Doing: "stopped", Left: 1e9, Unit: "partitions"},
			"Mirror m: 3/7 partitions stopped (42%), 1000000000 partitions left, ETA -"},
		{10 * time.Second, progressStep{Done: 3, Total: 7, Doing: "stopped", Left: 1e9 - 7e4, Unit: "partitions"},
			"Mirror m: 3/7 partitions stopped (42%), 999930000 partitions left at 7000/s, ETA 39h41m"},
		// 7 in 10s more: 0.7/s measured, 7000 + (1-e^(-10/3))*(0.7-7000) = 250.4/s.
		{10 * time.Second, progressStep{Done: 3, Total: 7, Doing: "stopped", Left: 1e9 - 7e4 - 7, Unit: "partitions"},
			"Mirror m: 3/7 partitions stopped (42%), 999929993 partitions left at 250/s, ETA 1109h17m"},
		{0, progressStep{}, "Mirror m: waiting for the partitions"},
	}
	begin := clock.now()
	for i, s := range steps {
		clock.advance(s.after)
		if s.after == 0 && i > 0 {
			clock.advance(progressRedrawEvery)
		}
		out.Reset()
		line.update(s.step)
		want := progressEraseLine + s.want + ", " + durationText(clock.now().Sub(begin)) + " elapsed"
		if out.String() != want {
			t.Errorf("step %d: drew %q, want %q", i, out.String(), want)
		}
	}
}

// The line is redrawn at most every progressRedrawEvery however often it
// is updated, each time with the latest sample; the samples between
// redraws still count in the rate.
func TestProgressLineThrottle(t *testing.T) {
	clock := newFakeClock()
	var out bytes.Buffer
	line := terminalLine(&out, clock)
	for i := range 101 { // every 10ms for 1s
		line.update(progressStep{Done: i, Total: 100, Doing: "stopped", Left: int64(100 - i), Unit: "partitions"})
		clock.advance(10 * time.Millisecond)
	}
	drawn := drawnLines(out.String())
	if len(drawn) != 11 {
		t.Fatalf("%d redraws in 1s of updates every 10ms, want 11 (every 100ms): %q", len(drawn), drawn)
	}
	for i, text := range drawn {
		if want := "Mirror m: " + strconv.Itoa(i*10) + "/100 "; !strings.HasPrefix(text, want) {
			t.Errorf("redraw %d: %q, want %q...", i, text, want)
		}
	}
	// 100 partitions/s all along: at the end, 0 left.
	if last := drawn[len(drawn)-1]; !strings.HasSuffix(last, "0 partitions left at 100/s, ETA 0s, 1s elapsed") {
		t.Errorf("last redraw %q", last)
	}
	out.Reset()
	line.finish("Mirror m: 100/100 partitions stopped in 1s.")
	if out.String() != progressEraseLine+"Mirror m: 100/100 partitions stopped in 1s.\n" {
		t.Errorf("final line %q", out.String())
	}
	out.Reset()
	line.update(progressStep{Done: 1, Total: 1, Doing: "stopped", Unit: "partitions"})
	line.finish("again")
	if out.Len() != 0 {
		t.Errorf("drew %q after finish", out.String())
	}
}

// A line longer than the terminal is cut one column short of its width,
// so that it never wraps (a wrapped line would not be erased by \r).
func TestProgressLineCut(t *testing.T) {
	clock := newFakeClock()
	var out bytes.Buffer
	line := terminalLine(&out, clock)
	line.width = 20
	line.update(progressStep{Done: 1, Total: 2, Doing: "stopped", Left: 1, Unit: "partitions"})
	if out.String() != progressEraseLine+"Mirror m: 1/2 parti" {
		t.Errorf("drew %q", out.String())
	}
}

// Anything but a terminal gets nothing: a buffer, a pipe, a file.
func TestProgressLineQuietWhenNotATerminal(t *testing.T) {
	reader, writer, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	defer writer.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var buffer bytes.Buffer
	for _, out := range []interface {
		Write([]byte) (int, error)
	}{&buffer, writer, file} {
		clock := newFakeClock()
		line := newProgressLine(out, "Mirror m", clock.now)
		if line.active() {
			t.Errorf("%T: a terminal", out)
		}
		for i := range 5 {
			line.update(progressStep{Done: i, Total: 5, Doing: "stopped", Left: int64(5 - i), Unit: "partitions"})
			clock.advance(time.Second)
		}
		line.finish("done")
	}
	writer.Close()
	var piped bytes.Buffer
	if _, err := piped.ReadFrom(reader); err != nil {
		t.Fatal(err)
	}
	info, err := file.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if buffer.Len() != 0 || piped.Len() != 0 || info.Size() != 0 {
		t.Errorf("wrote %q to a buffer, %q to a pipe, %d bytes to a file", buffer.String(), piped.String(), info.Size())
	}
}

func TestDurationText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", -time.Second: "0s", time.Millisecond: "<1s", 999 * time.Millisecond: "<1s", 1499 * time.Millisecond: "1s",
		59 * time.Second: "59s", 65 * time.Second: "1m05s", time.Hour + 7*time.Minute + 40*time.Second: "1h08m",
	} {
		if got := durationText(d); got != want {
			t.Errorf("durationText(%v) = %q, want %q", d, got, want)
		}
	}
}

// A start's progress: partitions past log alignment while some align,
// then the partitions caught up and the records left; a partition FAILED
// for good ends the wait, one that is retried does not.
func TestMirroringStep(t *testing.T) {
	status := func(state string, hw, leo int64) mirrord.MirrorPartitionStatus {
		return mirrord.MirrorPartitionStatus{Topic: "t", State: state, SourceHighWatermark: hw, LogEndOffset: leo}
	}
	failed := func(retries int16) mirrord.MirrorPartitionStatus {
		p := status("FAILED", 10, 5)
		p.RetryCount, p.Error = retries, "disk\nfull"
		return p
	}
	stale := status("MIRRORING", 10, 10)
	stale.Stale = true
	tests := []struct {
		name       string
		partitions []mirrord.MirrorPartitionStatus
		want       progressStep
		done       bool
		err        string
	}{
		{"none yet", nil, progressStep{Doing: "caught up", Unit: "records"}, false, ""},
		{"aligning", []mirrord.MirrorPartitionStatus{status("LOG_ALIGNMENT", -1, 7), status("STOPPED", -1, 3), status("MIRRORING", 10, 4)},
			progressStep{Done: 1, Total: 3, Doing: "aligned", Left: 2, Unit: "partitions"}, false, ""},
		{"catching up", []mirrord.MirrorPartitionStatus{status("MIRRORING", 10, 4), status("MIRRORING", 10, 10), status("EPOCH_FENCING", 10, 10), failed(2)},
			progressStep{Done: 1, Total: 4, Doing: "caught up", Left: 11, Unit: "records"}, false, ""},
		{"stale is not caught up", []mirrord.MirrorPartitionStatus{stale, status("MIRRORING", 12, 10)},
			progressStep{Total: 2, Doing: "caught up", Left: 2, Unit: "records", LeftAtLeast: true}, false, ""},
		{"unknown lag", []mirrord.MirrorPartitionStatus{status("MIRRORING", -1, 10)},
			progressStep{Total: 1, Doing: "caught up", Unit: "records", LeftAtLeast: true}, false, ""},
		{"caught up", []mirrord.MirrorPartitionStatus{status("MIRRORING", 10, 10), status("MIRRORING", 0, 0)},
			progressStep{Done: 2, Total: 2, Doing: "caught up", Unit: "records"}, true, ""},
		{"failed for good", []mirrord.MirrorPartitionStatus{status("MIRRORING", 10, 10), failed(-1)}, progressStep{}, false,
			"partition failed: t-0: disk; full (waits for --recover)"},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			step, done, err := mirroringStep(test.partitions)
			switch {
			case test.err != "":
				if err == nil || !errors.Is(err, errWaitFailed) || err.Error() != test.err {
					t.Errorf("error %v, want %q", err, test.err)
				}
			case err != nil || step != test.want || done != test.done:
				t.Errorf("%+v, %v, %v; want %+v, %v", step, done, err, test.want, test.done)
			}
		})
	}
	stopped := stoppedStep([]mirrord.MirrorPartitionStatus{status("STOPPED", 1, 1), status("STOPPING", 1, 1), status("STOPPED", 1, 1)})
	if want := (progressStep{Done: 2, Total: 3, Doing: "stopped", Left: 1, Unit: "partitions"}); stopped != want {
		t.Errorf("stoppedStep %+v, want %+v", stopped, want)
	}
}

// The partitions of a wait are those of the topics --topics and
// --exclude select; a topic named that has none yet is missing.
func TestSelectedPartitions(t *testing.T) {
	partitions := []mirrord.MirrorPartitionStatus{{Topic: "orders"}, {Topic: "pay-1"}, {Topic: "pay-tmp"}, {Topic: "other"}}
	selected, missing, err := selectedPartitions(mirrorsOptions{topics: "orders,pay-.*,new", exclude: ".*-tmp"}, partitions)
	if err != nil || len(selected) != 2 || selected[0].Topic != "orders" || selected[1].Topic != "pay-1" ||
		len(missing) != 1 || missing[0] != "new" {
		t.Errorf("selected %v, missing %v, %v", selected, missing, err)
	}
}

// --wait against the fake admin: it ends when every selected partition
// is caught up, fails at once on a partition FAILED for good, and at
// --wait-timeout; the actions that do not wait refuse it.
func TestMirrorsWait(t *testing.T) {
	admin, run := newCLI(t)
	partition := func(topic string, p int32, state string, hw, leo int64, retries int16) mirrord.MirrorPartitionStatus {
		return mirrord.MirrorPartitionStatus{Topic: topic, Partition: p, State: state, SourceHighWatermark: hw, LogEndOffset: leo,
			RetryCount: retries, Error: map[bool]string{true: "disk full"}[state == "FAILED"], LastMirrorEpoch: -1, LastMirrorOffset: -1}
	}
	tests := []struct {
		name       string
		args       []string
		partitions []mirrord.MirrorPartitionStatus
		out, err   string // regular expressions
	}{
		{"caught up", []string{"--start", "--mirror", "m", "--topics", "orders", "--wait"},
			[]mirrord.MirrorPartitionStatus{partition("orders", 0, "MIRRORING", 5, 5, 0), partition("orders", 1, "MIRRORING", 0, 0, 0),
				partition("other", 0, "LOG_ALIGNMENT", 9, 0, 0)}, // not selected
			`^Mirror m, topic orders: start requested\nMirror m: 2 partitions caught up in (0s|<1s)\.\n$`, `^$`},
		{"resume", []string{"--resume", "--mirror", "m", "--topics", "pay-.*", "--wait"},
			[]mirrord.MirrorPartitionStatus{partition("pay-1", 0, "MIRRORING", 5, 5, 0)},
			`^Mirror m: no topic matched \(resume\)\.\nMirror m: 1 partition caught up in (0s|<1s)\.\n$`, `^$`},
		{"failed for good", []string{"--start", "--mirror", "m", "--topics", "orders", "--wait"},
			[]mirrord.MirrorPartitionStatus{partition("orders", 0, "MIRRORING", 5, 5, 0), partition("orders", 1, "FAILED", 5, 1, -1)},
			`^Mirror m, topic orders: start requested\n$`, `^mirrors: --wait: partition failed: orders-1: disk full \(waits for --recover\)$`},
		{"timeout", []string{"--start", "--mirror", "m", "--topics", "orders,new", "--wait", "--wait-timeout", "300ms"},
			[]mirrord.MirrorPartitionStatus{partition("orders", 0, "MIRRORING", 5, 5, 0), partition("orders", 1, "FAILED", 5, 1, 3)},
			`^Mirror m, topic orders: start requested\nMirror m, topic new: start requested\n$`,
			`^mirrors: --wait: 1/2 partitions caught up after (<1s|\d+s), topics without partitions \[new\]: context deadline exceeded$`},
		{"no time", []string{"--start", "--mirror", "m", "--topics", "orders", "--wait", "--wait-timeout", "0s"}, nil,
			`^$`, `^mirrors: --wait-timeout 0s: not a time to wait$`},
		{"stop does not wait", []string{"--stop", "--mirror", "m", "--topics", "orders", "--wait"}, nil,
			`^$`, `^mirrors: --stop does not take --wait$`},
		{"pause does not wait", []string{"--pause", "--mirror", "m", "--topics", "orders", "--wait-timeout", "1s"}, nil,
			`^$`, `^mirrors: --pause does not take --wait-timeout$`},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			admin.mu.Lock()
			admin.descriptions = []mirrord.MirrorDescription{{Name: "m", Partitions: test.partitions}}
			admin.mu.Unlock()
			out, err := run(test.args...)
			errText := ""
			if err != nil {
				errText = err.Error()
			}
			if !regexp.MustCompile(test.out).MatchString(out) || !regexp.MustCompile(test.err).MatchString(errText) {
				t.Errorf("output %q, error %q; want %s and %s", out, errText, test.out, test.err)
			}
		})
	}
}
