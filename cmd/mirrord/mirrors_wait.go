package main

// The long operations of `mirrord mirrors` and their progress
// (progress.go draws it):
//
//   - `--start --wait` (and `--resume --wait`) waits, after the request,
//     until every partition of the selected topics is MIRRORING and caught
//     up (lag 0 at one describe). A failback first walks its partitions
//     through LOG_ALIGNMENT (the truncation to the last mirror epoch),
//     within the start request for the partitions the mirror knows: the
//     progress counts the partitions past it, then the ones caught up and
//     the records left. The wait ends with one line, "Mirror m: N
//     partitions caught up in D.", printed on a terminal and on a pipe
//     alike; without --wait nothing changes (a start is not long: it
//     returns once the partitions are aligned and fetching, and scripts
//     read its output). The wait fails at once when a partition is FAILED
//     for good (waiting for --recover), and at --wait-timeout.
//   - `--stop` answers once every partition is STOPPED: on a terminal the
//     progress counts the STOPPED partitions from before the request
//     until it answers; the line that ends it ("Mirror m: N/N partitions
//     stopped in D.") comes before the usual result lines. On anything
//     but a terminal --stop prints what it always did.
//
// While a request blocks, the progress polls DescribeClusterMirrors on a
// second connection of its own (dialDescriber: the one seam between the
// progress and the admin client). Polls run at an interval that follows
// the describe's cost (twice its duration), bounded by waitPollMin and
// waitPollMax.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/mirrord/mirrord"
)

const (
	waitPollMin = 100 * time.Millisecond
	waitPollMax = time.Second
	// waitTimeoutDefault is --wait-timeout's default.
	waitTimeoutDefault = time.Hour
)

// errWaitFailed is a --wait that ended on a partition FAILED for good.
var errWaitFailed = errors.New("partition failed")

// commandTimeout bounds the whole command: mirrorsTimeout, and with --wait
// the wait's own bound besides.
func commandTimeout(opts mirrorsOptions) time.Duration {
	if opts.wait {
		return mirrorsTimeout + opts.waitTimeout
	}
	return mirrorsTimeout
}

// mirrorDescriber describes the mirror the command names: what
// Admin.DescribeMirrors(ctx, []string{mirror}, false) answers.
type mirrorDescriber func(ctx context.Context) ([]mirrord.MirrorDescription, error)

// dialDescriber opens the connection the progress polls on, its own (a
// --stop blocks the command's connection), and returns the describer and
// the connection's closer. The one seam between the progress and the
// admin client.
func dialDescriber(ctx context.Context, opts mirrorsOptions) (mirrorDescriber, func(), error) {
	security, err := commandConfigProperties(opts.commandConfig)
	if err != nil {
		return nil, nil, err
	}
	client, err := mirrord.Dial(ctx, opts.bootstrap, security)
	if err != nil {
		return nil, nil, err
	}
	describe := func(ctx context.Context) ([]mirrord.MirrorDescription, error) {
		return client.DescribeMirrors(ctx, []string{opts.mirror}, false)
	}
	return describe, client.Close, nil
}

// mirrorPartitions are the partitions of the mirrors described, or the
// error of one that could not be.
func mirrorPartitions(described []mirrord.MirrorDescription) ([]mirrord.MirrorPartitionStatus, error) {
	var partitions []mirrord.MirrorPartitionStatus
	for _, d := range described {
		if d.Err != nil {
			return nil, fmt.Errorf("describe mirror %q: %w", d.Name, d.Err)
		}
		partitions = append(partitions, d.Partitions...)
	}
	return partitions, nil
}

// selectedPartitions keeps the partitions of the topics the command
// selects (--topics, --exclude), and lists the topics named in --topics
// that have none yet.
func selectedPartitions(opts mirrorsOptions, partitions []mirrord.MirrorPartitionStatus) (selected []mirrord.MirrorPartitionStatus, missing []string, err error) {
	selects, err := topicSelector(opts)
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{} // bounded by the mirror's topics
	for _, p := range partitions {
		if selects(p.Topic) {
			selected = append(selected, p)
			seen[p.Topic] = true
		}
	}
	for _, item := range splitMirrorsList(opts.topics) {
		if isTopicName(item) && selects(item) && !seen[item] {
			missing = append(missing, item)
		}
	}
	return selected, missing, nil
}

// mirroringStep is the progress of a start towards every partition
// caught up: the partitions past log alignment while some are aligning,
// then the partitions caught up and the records left. done: every
// partition caught up. A partition FAILED for good is an error.
func mirroringStep(partitions []mirrord.MirrorPartitionStatus) (step progressStep, done bool, err error) {
	aligning, caughtUp, unknown := 0, 0, false
	var recordsLeft int64
	for _, p := range partitions {
		switch p.State {
		case "UNKNOWN", "STOPPED", "LOG_ALIGNMENT":
			aligning++
		case "FAILED":
			if p.RetryCount < 0 {
				return step, false, fmt.Errorf("%w: %s-%d: %s (waits for --recover)", errWaitFailed, p.Topic, p.Partition, oneLine(p.Error))
			}
		case "MIRRORING":
			if p.Lag() == 0 {
				caughtUp++
			}
		}
		recordsLeft += max(p.LagAtLeast(), 0)
		unknown = unknown || p.Lag() < 0
	}
	total := len(partitions)
	if aligning > 0 {
		return progressStep{Done: total - aligning, Total: total, Doing: "aligned", Left: int64(aligning), Unit: "partitions"}, false, nil
	}
	step = progressStep{Done: caughtUp, Total: total, Doing: "caught up", Left: recordsLeft, Unit: "records", LeftAtLeast: unknown}
	return step, total > 0 && caughtUp == total, nil
}

// stoppedStep is the progress of a stop: the partitions STOPPED.
func stoppedStep(partitions []mirrord.MirrorPartitionStatus) progressStep {
	stopped := 0
	for _, p := range partitions {
		if p.State == "STOPPED" {
			stopped++
		}
	}
	return progressStep{Done: stopped, Total: len(partitions), Doing: "stopped", Left: int64(len(partitions) - stopped), Unit: "partitions"}
}

// poller paces the polls: the interval is twice the last describe's
// duration, within [waitPollMin, waitPollMax].
type poller struct {
	describe mirrorDescriber
	interval time.Duration
}

// poll describes, then waits the interval (or until ctx ends).
func (p *poller) poll(ctx context.Context) ([]mirrord.MirrorPartitionStatus, error) {
	start := time.Now()
	described, err := p.describe(ctx)
	p.interval = min(max(2*time.Since(start), waitPollMin), waitPollMax)
	if err != nil {
		return nil, err
	}
	return mirrorPartitions(described)
}

// pause waits the interval or until ctx ends.
func (p *poller) pause(ctx context.Context) error {
	timer := time.NewTimer(p.interval)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// startAndWait is --start/--resume --wait: it runs start (the request and
// its result lines on the writer it is given), then polls until every
// selected partition is caught up, and ends with one line on out. On a
// terminal the progress is drawn from before the request, and while it
// blocks (the log alignment of a failback runs within it).
func startAndWait(ctx context.Context, opts mirrorsOptions, out io.Writer, start func(out io.Writer) error) error {
	if opts.waitTimeout <= 0 {
		return fmt.Errorf("--wait-timeout %v: not a time to wait", opts.waitTimeout)
	}
	begin := time.Now()
	describe, closeDescriber, err := dialDescriber(ctx, opts)
	if err != nil {
		return err
	}
	defer closeDescriber()
	line := newProgressLine(out, "Mirror "+opts.mirror, time.Now)
	polls := &poller{describe: describe}
	if line.active() {
		stepOf := func(partitions []mirrord.MirrorPartitionStatus) progressStep {
			step, _, _ := mirroringStep(partitions) // a failure is the wait's to report
			return step
		}
		err = progressDuring(ctx, opts, line, polls, stepOf, out, start, line.erase)
	} else {
		err = start(out)
	}
	if err != nil {
		line.finish("")
		return err
	}
	err = waitMirroring(ctx, opts, out, line, polls, begin)
	line.finish("")
	return err
}

// waitMirroring polls until every selected partition is caught up,
// drawing the progress on line, and ends with one line on out.
func waitMirroring(ctx context.Context, opts mirrorsOptions, out io.Writer, line *progressLine, polls *poller, begin time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, opts.waitTimeout)
	defer cancel()
	var step progressStep // the last poll's, for an interrupted wait to tell
	var missing []string
	interrupted := func(err error) error {
		text := fmt.Sprintf("%d/%d partitions %s after %s", step.Done, step.Total, step.Doing, durationText(time.Since(begin)))
		if len(missing) > 0 {
			text += fmt.Sprintf(", topics without partitions %v", missing)
		}
		return fmt.Errorf("--wait: %s: %w", text, err)
	}
	for {
		partitions, err := polls.poll(ctx)
		if ctx.Err() != nil {
			return interrupted(ctx.Err())
		}
		if err != nil {
			return fmt.Errorf("--wait: %w", err)
		}
		var done bool
		if partitions, missing, err = selectedPartitions(opts, partitions); err != nil {
			return err
		}
		if step, done, err = mirroringStep(partitions); err != nil {
			return fmt.Errorf("--wait: %w", err)
		}
		if done && len(missing) == 0 {
			line.finish("")
			_, err := fmt.Fprintf(out, "Mirror %s: %s caught up in %s.\n", opts.mirror, partitionsText(step.Total), durationText(time.Since(begin)))
			return err
		}
		line.update(step)
		if err := polls.pause(ctx); err != nil {
			return interrupted(err)
		}
	}
}

// stopWithProgress runs stop (the --stop request and its result lines on
// the writer it is given) and, on a terminal, draws the STOPPED partitions
// from before the request and while it blocks, and the line that ends the
// progress before the first result line. On anything but a terminal, or
// without a connection to poll on, stop runs alone.
func stopWithProgress(ctx context.Context, opts mirrorsOptions, out io.Writer, stop func(out io.Writer) error) error {
	line := newProgressLine(out, "Mirror "+opts.mirror, time.Now)
	if !line.active() {
		return stop(out)
	}
	begin := time.Now()
	describe, closeDescriber, err := dialDescriber(ctx, opts)
	if err != nil { // the stop's own connection will say why, or stop
		return stop(out)
	}
	defer closeDescriber()
	ending := func() {
		final := ""
		if described, err := (&poller{describe: describe}).poll(ctx); err == nil {
			if partitions, _, err := selectedPartitions(opts, described); err == nil {
				step := stoppedStep(partitions)
				final = fmt.Sprintf("Mirror %s: %d/%d partitions stopped in %s.", opts.mirror, step.Done, step.Total, durationText(time.Since(begin)))
			}
		}
		line.finish(final)
	}
	return progressDuring(ctx, opts, line, &poller{describe: describe}, stoppedStep, out, stop, ending)
}

// progressDuring runs request, which writes its result lines to the
// writer it is given, with the progress drawn on line (a terminal's) from
// a describe before it and from polls on another goroutine while it
// blocks. The polls end, and ending runs, before request writes its first
// line, or once it returns.
func progressDuring(ctx context.Context, opts mirrorsOptions, line *progressLine, polls *poller, stepOf func([]mirrord.MirrorPartitionStatus) progressStep,
	out io.Writer, request func(out io.Writer) error, ending func()) error {
	draw := func(ctx context.Context) { // a failed poll skips a redraw
		if described, err := polls.poll(ctx); err == nil {
			if partitions, _, err := selectedPartitions(opts, described); err == nil {
				line.update(stepOf(partitions))
			}
		}
	}
	draw(ctx)
	pollCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // line's owner until done closes
		defer close(done)
		for polls.pause(pollCtx) == nil {
			draw(pollCtx)
		}
	}()
	var once sync.Once
	end := func() {
		once.Do(func() {
			cancel()
			<-done
			ending()
		})
	}
	defer end()
	return request(writerFunc(func(b []byte) (int, error) {
		end()
		return out.Write(b)
	}))
}

// partitionsText is "1 partition", "N partitions".
func partitionsText(n int) string {
	if n == 1 {
		return "1 partition"
	}
	return fmt.Sprintf("%d partitions", n)
}

// writerFunc is a function as an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
