package main

// The progress line of the long `mirrord mirrors` operations (a stop of
// many partitions, a start --wait: the log alignment of a failback, then
// the catch-up): on a terminal, one line redrawn in place,
//
//	Mirror m: 120/500 partitions stopped (24%), 380 partitions left at 95/s, ETA 4s, 2s elapsed
//	Mirror m: 12/200 partitions caught up (6%), 48200 records left at 10500/s, ETA 5s, 1s elapsed
//
// at most progressRedrawsPerSecond times a second, and a final line when
// the operation ends. The line is drawn with "\r" and ESC [K (erase to the
// end of the line), cut to the terminal's width so that it never wraps.
// On anything else (a pipe, a file, a buffer) it draws nothing at all: the
// command's output stays what it was without progress.
//
// The ETA is the work left over a smoothed rate at which it shrinks: an
// exponentially weighted mean of the rates between samples, with a time
// constant of progressRateWindow, so that one slow or fast poll does not
// swing it. Work that grows (a lag while the source writes faster than
// the mirror fetches) has no ETA ("ETA -").

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// progressRedrawEvery bounds the redraws: at most 10 a second.
	progressRedrawEvery = 100 * time.Millisecond
	// progressRateWindow is the time constant of the smoothed rate.
	progressRateWindow = 3 * time.Second
	// progressEraseLine returns to the start of the line and erases it.
	progressEraseLine = "\r\x1b[K"
)

// terminalWidth reports whether out is a terminal (an *os.File whose
// descriptor answers the terminal ioctl TCGETS) and its width in columns,
// 0 when the terminal does not say.
func terminalWidth(out io.Writer) (terminal bool, width int) {
	file, ok := out.(*os.File)
	if !ok {
		return false, 0
	}
	fd := int(file.Fd())
	if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err != nil {
		return false, 0
	}
	if size, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
		width = int(size.Col)
	}
	return true, width
}

// progressStep is what an operation has done, as one sample.
type progressStep struct {
	// Done of Total partitions are Doing ("stopped", "aligned", "caught
	// up"). Total 0: the partitions are not known yet.
	Done, Total int
	Doing       string
	// Left is the work left in Unit ("partitions", "records"), whose rate
	// of decrease gives the ETA. A change of Unit starts a new rate.
	Left int64
	Unit string
	// LeftAtLeast: Left is only a lower bound (some partitions' lag is
	// not known yet); such a sample has no ETA, and the rate starts anew
	// after it.
	LeftAtLeast bool
}

// progressLine draws the progress of one operation. It is used by one
// goroutine at a time.
type progressLine struct {
	out   io.Writer // the terminal; nil: draw nothing
	width int       // columns, 0: unknown (the line is not cut)
	now   func() time.Time
	label string // "Mirror m"

	begin    time.Time // the first update
	drawn    bool      // the line is on the screen
	lastDraw time.Time

	// The rate: Unit of the samples, the last sample, and the smoothed
	// rate of decrease of Left in Unit per second (valid when rated).
	unit     string
	lastLeft int64
	lastAt   time.Time
	rate     float64
	rated    bool
}

// newProgressLine is the progress of an operation on out: drawn when out
// is a terminal, nothing otherwise.
func newProgressLine(out io.Writer, label string, now func() time.Time) *progressLine {
	terminal, width := terminalWidth(out)
	if !terminal {
		out = nil
	}
	return &progressLine{out: out, width: width, now: now, label: label}
}

// active reports whether the line is drawn at all (out is a terminal).
func (p *progressLine) active() bool { return p.out != nil }

// update takes a sample and redraws the line unless it was drawn less
// than progressRedrawEvery ago.
func (p *progressLine) update(step progressStep) {
	if p.out == nil {
		return
	}
	now := p.now()
	if p.begin.IsZero() {
		p.begin = now
	}
	p.sample(step, now)
	if p.drawn && now.Sub(p.lastDraw) < progressRedrawEvery {
		return
	}
	p.drawn, p.lastDraw = true, now
	io.WriteString(p.out, progressEraseLine+p.cut(p.text(step)+", "+durationText(now.Sub(p.begin))+" elapsed"))
}

// sample folds step into the smoothed rate.
func (p *progressLine) sample(step progressStep, now time.Time) {
	if step.LeftAtLeast {
		p.lastAt, p.rated = time.Time{}, false
		return
	}
	if step.Unit != p.unit || p.lastAt.IsZero() {
		p.unit, p.lastLeft, p.lastAt, p.rated = step.Unit, step.Left, now, false
		return
	}
	elapsed := now.Sub(p.lastAt)
	if elapsed <= 0 {
		return
	}
	rate := float64(p.lastLeft-step.Left) / elapsed.Seconds()
	if p.rated {
		weight := 1 - math.Exp(-elapsed.Seconds()/progressRateWindow.Seconds())
		rate = p.rate + weight*(rate-p.rate)
	}
	p.rate, p.rated, p.lastLeft, p.lastAt = rate, true, step.Left, now
}

// eta is the time the work left takes at the smoothed rate, false when
// there is no rate or the work does not shrink.
func (p *progressLine) eta(left int64) (time.Duration, bool) {
	switch {
	case left <= 0:
		return 0, true
	case !p.rated || p.rate <= 0:
		return 0, false
	}
	seconds := float64(left) / p.rate
	if seconds > float64(math.MaxInt64/int64(time.Second)) {
		return 0, false
	}
	return time.Duration(seconds * float64(time.Second)), true
}

// text is the line for step.
func (p *progressLine) text(step progressStep) string {
	if step.Total == 0 {
		return p.label + ": waiting for the partitions"
	}
	var b strings.Builder
	atLeast := ""
	if step.LeftAtLeast {
		atLeast = "at least "
	}
	fmt.Fprintf(&b, "%s: %d/%d partitions %s (%d%%), %s%d %s left", p.label, step.Done, step.Total, step.Doing,
		int64(step.Done)*100/int64(step.Total), atLeast, step.Left, step.Unit)
	if p.rated && p.rate > 0 {
		fmt.Fprintf(&b, " at %s/s", rateText(p.rate))
	}
	b.WriteString(", ETA ")
	if eta, ok := p.eta(step.Left); ok && !step.LeftAtLeast {
		b.WriteString(durationText(eta))
	} else {
		b.WriteString("-")
	}
	return b.String()
}

// cut shortens line to the terminal's width less one column (a line that
// fills the last column wraps on some terminals).
func (p *progressLine) cut(line string) string {
	if p.width <= 1 || len(line) < p.width {
		return line
	}
	return line[:p.width-1]
}

// erase erases the line, for other output to take its place; the next
// update draws it again.
func (p *progressLine) erase() {
	if p.out != nil && p.drawn {
		io.WriteString(p.out, progressEraseLine)
	}
	p.drawn = false
}

// finish erases the line and writes final (if not empty) in its place,
// with a newline. The line draws nothing afterwards.
func (p *progressLine) finish(final string) {
	if p.out == nil {
		return
	}
	p.erase()
	if final != "" {
		io.WriteString(p.out, p.cut(final)+"\n")
	}
	p.out = nil
}

// rateText prints a rate per second: whole units, one decimal below 10.
func rateText(rate float64) string {
	if rate < 10 {
		return fmt.Sprintf("%.1f", rate)
	}
	return fmt.Sprintf("%.0f", rate)
}

// durationText prints a duration for people: "0s", "<1s", "42s",
// "3m05s", "2h07m".
func durationText(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return "<1s"
	}
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
