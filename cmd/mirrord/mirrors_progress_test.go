package main

// Tests of the progress of the long `mirrord mirrors` operations against
// live in-process nodes with many partitions: each command runs once with
// a pseudo-terminal's tty as its output (terminal detection sees a real
// terminal) and once into a pipe, which must get exactly what it got
// before progress existed. A faultproxy stalls the mirror's connection to
// its source, so that a catch-up or an alignment lasts long enough for
// the progress to be drawn whatever the machine's speed.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/mirrord/mirrord"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/mirrordtest/faultproxy"
	"github.com/twmb/franz-go/pkg/kgo"
)

// progressTestDeadline bounds each test.
const progressTestDeadline = 3 * time.Minute

// progressLineRE is a drawn progress line.
var progressLineRE = regexp.MustCompile(`^Mirror [a-z-]+: (waiting for the partitions|\d+/\d+ partitions (stopped|aligned|caught up) \(\d+%\), (at least )?\d+ (partitions|records) left( at [0-9.]+/s)?, ETA (-|0s|<1s|\d+s|\d+m\d\ds|\d+h\d\dm)), (0s|<1s|\d+s|\d+m\d\ds) elapsed$`)

// runOnTerminal runs `mirrord mirrors --bootstrap-server addr args...`
// with a pseudo-terminal's tty as its output, and returns what the
// terminal received, "\r\n" (the tty's output processing) read as "\n".
func runOnTerminal(ctx context.Context, t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	terminal, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer terminal.Close()
	if err := pty.Setsize(terminal, &pty.Winsize{Rows: 40, Cols: 200}); err != nil {
		t.Fatal(err)
	}
	screen := make(chan []byte, 1)
	go func() {
		var b bytes.Buffer
		_, err := b.ReadFrom(terminal) // until EIO: the tty closed
		if err != nil && !errors.Is(err, syscall.EIO) {
			fmt.Fprintf(&b, "\n(read: %v)", err)
		}
		screen <- b.Bytes()
	}()
	runErr := mirrorsCommand(ctx, append([]string{"--bootstrap-server", addr}, args...), tty)
	tty.Close()
	return strings.ReplaceAll(string(<-screen), "\r\n", "\n"), runErr
}

// runPiped runs the command with a pipe as its output.
func runPiped(ctx context.Context, t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	reader, writer, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	piped := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(reader)
		piped <- b
	}()
	runErr := mirrorsCommand(ctx, append([]string{"--bootstrap-server", addr}, args...), writer)
	writer.Close()
	return string(<-piped), runErr
}

// splitScreen separates what a terminal received into the progress lines
// drawn (each after an erase, with no newline) and the rest, in order.
func splitScreen(t *testing.T, screen string) (progress []string, text string) {
	t.Helper()
	segments := strings.Split(screen, progressEraseLine)
	text = segments[0]
	for _, segment := range segments[1:] {
		if segment == "" {
			continue // erased, then the final line
		}
		if !strings.Contains(segment, "\n") {
			if !progressLineRE.MatchString(segment) {
				t.Errorf("progress line %q is not one", segment)
			}
			progress = append(progress, segment)
			continue
		}
		text += segment
	}
	if strings.ContainsAny(text, "\r\x1b") {
		t.Errorf("control characters outside progress lines: %q", screen)
	}
	return progress, text
}

// startTestNode starts an in-process node that the test stops.
func startTestNode(ctx context.Context, t *testing.T, dir string) demoNode {
	t.Helper()
	node, err := startDemoNode(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := node.stop(); err != nil {
			t.Errorf("stop node: %v", err)
		}
	})
	return node
}

// produceEach writes batches of one record of valueBytes to each
// partition of topic.
func produceEach(ctx context.Context, t *testing.T, addr, topic string, partitions int32, batches, valueBytes int) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for i := range batches { // a round of one batch per partition
		var round []*kgo.Record
		for p := range partitions {
			round = append(round, &kgo.Record{Topic: topic, Partition: p, Value: bytes.Repeat([]byte{byte('a' + i%26)}, valueBytes)})
		}
		if err := client.ProduceSync(ctx, round...).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
}

// waitPartitions polls the mirror's description on node until ok holds
// for the count partitions of topics.
func waitPartitions(ctx context.Context, t *testing.T, node demoNode, mirror string, topics []string, count int, ok func(mirrord.MirrorPartitionStatus) bool) {
	t.Helper()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	last := ""
	for {
		described, err := node.node.Admin().DescribeMirrors(ctx, []string{mirror}, false)
		if err == nil && len(described) == 1 {
			n := 0
			for _, p := range described[0].Partitions {
				if strings.Contains(","+strings.Join(topics, ",")+",", ","+p.Topic+",") && ok(p) {
					n++
				}
			}
			if n == count {
				return
			}
			last = fmt.Sprintf("%d of %d", n, count)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("mirror %s, topics %v: %s partitions as wanted (%v)", mirror, topics, last, err)
		case <-poll.C:
		}
	}
}

// stalledProxy is a proxy to target that, once its faults are on, holds
// at least every other frame for stall.
func stalledProxy(t *testing.T, target string, stall time.Duration) *faultproxy.Proxy {
	t.Helper()
	plan := faultproxy.Plan{EveryMin: 0, EveryMax: 1, StallMin: stall, StallMax: stall}
	plan.Weights[faultproxy.Stall] = 1
	proxy, err := faultproxy.Listen(faultproxy.Config{Seed: 21, Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetTarget(target)
	t.Cleanup(func() { proxy.Close() })
	return proxy
}

// createTestMirror creates mirror name on node from source.
func createTestMirror(ctx context.Context, t *testing.T, node demoNode, name, source string, config map[string]string) {
	t.Helper()
	full := map[string]string{"bootstrap.servers": source, "mirror.metadata.refresh.interval.ms": "200", "fetch.wait.max.ms": "100"}
	for key, value := range config {
		full[key] = value
	}
	if err := node.node.Admin().CreateMirror(ctx, name, full); err != nil {
		t.Fatal(err)
	}
}

// The initial catch-up of 2 topics of 200 partitions through a slow link:
// `--start --wait` on a terminal draws the partitions caught up and the
// records left with an ETA, then ends with the line the pipe gets too;
// piped, the same command prints only its result lines and that line.
func TestMirrorsProgressCatchUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), progressTestDeadline)
	defer cancel()
	base := t.TempDir()
	source := startTestNode(ctx, t, filepath.Join(base, "source"))
	target := startTestNode(ctx, t, filepath.Join(base, "target"))
	const partitions, catchUpBatches = 200, 10
	for topic, batches := range map[string]int{"slow": catchUpBatches, "piped": 1} {
		if err := source.node.CreateTopic(ctx, topic, partitions, nil); err != nil {
			t.Fatal(err)
		}
		produceEach(ctx, t, source.addr, topic, partitions, batches, 400)
	}
	// A fetch answers 1 KiB a partition, 4 KiB at most, and half the
	// frames or more wait 100ms: the 2,000 batches of ~470 bytes take
	// seconds, several polls (at most waitPollMax apart).
	proxy := stalledProxy(t, source.addr, 100*time.Millisecond)
	proxy.SetFaults(true)
	createTestMirror(ctx, t, target, "m", proxy.Addr(), map[string]string{"fetch.response.max.bytes": "4096", "fetch.max.bytes": "1024"})

	start := time.Now()
	screen, err := runOnTerminal(ctx, t, target.addr, "--start", "--mirror", "m", "--topics", "slow", "--wait")
	if err != nil {
		t.Fatalf("--start --wait: %v\n%q", err, screen)
	}
	progress, text := splitScreen(t, screen)
	t.Logf("caught up in %v, %d progress lines:\n%s", time.Since(start), len(progress), strings.Join(progress, "\n"))
	if !regexp.MustCompile(`^Mirror m, topic slow: start requested\nMirror m: 200 partitions caught up in [0-9hms<]+\.\n$`).MatchString(text) {
		t.Errorf("terminal text %q", text)
	}
	checkProgress(t, progress, "caught up", "records", partitions, true)
	waitPartitions(ctx, t, target, "m", []string{"slow"}, partitions, func(p mirrord.MirrorPartitionStatus) bool { return p.LogEndOffset == catchUpBatches })

	piped, err := runPiped(ctx, t, target.addr, "--start", "--mirror", "m", "--topics", "piped", "--wait")
	if err != nil || !regexp.MustCompile(`^Mirror m, topic piped: start requested\nMirror m: 200 partitions caught up in [0-9hms<]+\.\n$`).MatchString(piped) {
		t.Errorf("piped: %q, %v", piped, err)
	}
	waitPartitions(ctx, t, target, "m", []string{"piped"}, partitions, func(p mirrord.MirrorPartitionStatus) bool { return p.LogEndOffset == 1 })
	// Without --wait nothing changes: the result line alone.
	piped, err = runPiped(ctx, t, target.addr, "--start", "--mirror", "m", "--topics", "piped")
	if err != nil || piped != "Mirror m, topic piped: start requested\n" {
		t.Errorf("piped without --wait: %q, %v", piped, err)
	}
}

// checkProgress requires progress lines that count doing of total
// partitions in unit and, if rated, one of them at least with a rate and
// an ETA in time.
func checkProgress(t *testing.T, progress []string, doing, unit string, total int, rated bool) {
	t.Helper()
	counted := regexp.MustCompile(`^Mirror [a-z-]+: (\d+)/(\d+) partitions ` + doing + ` \(\d+%\), \d+ ` + unit + ` left`)
	hasRate, seen := false, 0
	for _, line := range progress {
		match := counted.FindStringSubmatch(line)
		if match == nil {
			continue
		}
		seen++
		if match[2] != fmt.Sprint(total) {
			t.Errorf("progress line %q: total %s, want %d", line, match[2], total)
		}
		hasRate = hasRate || regexp.MustCompile(`/s, ETA (0s|<1s|\d+s|\d+m\d\ds), `).MatchString(line)
	}
	if seen == 0 || rated && !hasRate {
		t.Errorf("%d progress lines of partitions %s (one with an ETA: %v): %q", seen, doing, hasRate, progress)
	}
}

// A stop of 500 partitions: on a terminal the STOPPED partitions are drawn
// from before the request until it answers, then the line that ends the
// progress and the usual result line; piped, the result line alone.
func TestMirrorsProgressStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), progressTestDeadline)
	defer cancel()
	base := t.TempDir()
	source := startTestNode(ctx, t, filepath.Join(base, "source"))
	target := startTestNode(ctx, t, filepath.Join(base, "target"))
	const partitions = 500
	topics := []string{"stop-tty", "stop-piped"}
	for _, topic := range topics {
		if err := source.node.CreateTopic(ctx, topic, partitions, nil); err != nil {
			t.Fatal(err)
		}
	}
	createTestMirror(ctx, t, target, "m", source.addr, nil)
	if _, err := target.node.Admin().SetTopicsDesiredState(ctx, "m", mirrord.StartMirroring, mirrord.TopicSelection{Names: topics}); err != nil {
		t.Fatal(err)
	}
	waitPartitions(ctx, t, target, "m", topics, 2*partitions, func(p mirrord.MirrorPartitionStatus) bool { return p.State == "MIRRORING" })

	start := time.Now()
	screen, err := runOnTerminal(ctx, t, target.addr, "--stop", "--mirror", "m", "--topics", "stop-tty")
	if err != nil {
		t.Fatalf("--stop: %v\n%q", err, screen)
	}
	progress, text := splitScreen(t, screen)
	t.Logf("stopped in %v, %d progress lines:\n%s", time.Since(start), len(progress), strings.Join(progress, "\n"))
	if !regexp.MustCompile(`^Mirror m: 500/500 partitions stopped in [0-9hms<]+\.\nMirror m, topic stop-tty: stopped: writable\n$`).MatchString(text) {
		t.Errorf("terminal text %q", text)
	}
	checkProgress(t, progress, "stopped", "partitions", partitions, false)
	if len(progress) > 0 && !strings.HasPrefix(progress[0], "Mirror m: 0/500 partitions stopped (0%), 500 partitions left, ETA -, ") {
		t.Errorf("first progress line %q, want the 500 partitions to stop", progress[0])
	}

	piped, err := runPiped(ctx, t, target.addr, "--stop", "--mirror", "m", "--topics", "stop-piped")
	if err != nil || piped != "Mirror m, topic stop-piped: stopped: writable\n" {
		t.Errorf("piped: %q, %v", piped, err)
	}
	waitPartitions(ctx, t, target, "m", topics, 2*partitions, func(p mirrord.MirrorPartitionStatus) bool { return p.State == "STOPPED" })
}

// Failback with truncation, 2 topics of 100 partitions: B mirrored A,
// stopped and took writes; A wrote past the mirror too. A mirrors B back
// through a slow link: on a terminal `--start --wait` draws the partitions
// past log alignment (A truncates what it wrote), then those caught up
// with B's writes; piped, the result line and the line that ends the wait.
func TestMirrorsProgressFailback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), progressTestDeadline)
	defer cancel()
	base := t.TempDir()
	a := startTestNode(ctx, t, filepath.Join(base, "a"))
	b := startTestNode(ctx, t, filepath.Join(base, "b"))
	const partitions = 100
	topics := []string{"back-tty", "back-piped"}
	for _, topic := range topics {
		if err := a.node.CreateTopic(ctx, topic, partitions, nil); err != nil {
			t.Fatal(err)
		}
		produceEach(ctx, t, a.addr, topic, partitions, 3, 100)
	}
	createTestMirror(ctx, t, b, "a-to-b", a.addr, nil)
	if _, err := b.node.Admin().SetTopicsDesiredState(ctx, "a-to-b", mirrord.StartMirroring, mirrord.TopicSelection{Names: topics}); err != nil {
		t.Fatal(err)
	}
	waitPartitions(ctx, t, b, "a-to-b", topics, 2*partitions, func(p mirrord.MirrorPartitionStatus) bool { return p.State == "MIRRORING" && p.LogEndOffset == 3 })
	if _, err := b.node.Admin().SetTopicsDesiredState(ctx, "a-to-b", mirrord.StopMirroring, mirrord.TopicSelection{Names: topics}); err != nil {
		t.Fatal(err)
	}
	for _, topic := range topics {
		produceEach(ctx, t, b.addr, topic, partitions, 5, 100) // to mirror back
		produceEach(ctx, t, a.addr, topic, partitions, 2, 100) // to truncate
	}
	bEnd := int64(3 + 1 + 5) // the stop's marker takes an offset

	proxy := stalledProxy(t, b.addr, 500*time.Millisecond)
	proxy.SetFaults(true)
	createTestMirror(ctx, t, a, "b-to-a", proxy.Addr(), nil)
	start := time.Now()
	screen, err := runOnTerminal(ctx, t, a.addr, "--start", "--mirror", "b-to-a", "--topics", "back-tty", "--wait")
	if err != nil {
		t.Fatalf("--start --wait: %v\n%q", err, screen)
	}
	progress, text := splitScreen(t, screen)
	t.Logf("failed back in %v, %d progress lines:\n%s", time.Since(start), len(progress), strings.Join(progress, "\n"))
	if !regexp.MustCompile(`^Mirror b-to-a, topic back-tty: start requested\nMirror b-to-a: 100 partitions caught up in [0-9hms<]+\.\n$`).MatchString(text) {
		t.Errorf("terminal text %q", text)
	}
	checkProgress(t, progress, "aligned", "partitions", partitions, false)
	checkProgress(t, progress, "caught up", "records", partitions, false)
	waitPartitions(ctx, t, a, "b-to-a", []string{"back-tty"}, partitions, func(p mirrord.MirrorPartitionStatus) bool { return p.LogEndOffset == bEnd })
	checkTruncated(t, filepath.Join(base, "a"), "back-tty", partitions)

	piped, err := runPiped(ctx, t, a.addr, "--start", "--mirror", "b-to-a", "--topics", "back-piped", "--wait")
	if err != nil || !regexp.MustCompile(`^Mirror b-to-a, topic back-piped: start requested\nMirror b-to-a: 100 partitions caught up in [0-9hms<]+\.\n$`).MatchString(piped) {
		t.Errorf("piped: %q, %v", piped, err)
	}
	waitPartitions(ctx, t, a, "b-to-a", []string{"back-piped"}, partitions, func(p mirrord.MirrorPartitionStatus) bool { return p.LogEndOffset == bEnd })
	checkTruncated(t, filepath.Join(base, "a"), "back-piped", partitions)
}

// checkTruncated requires, for each partition of topic, the file in which
// failback kept what it truncated.
func checkTruncated(t *testing.T, dataDir, topic string, partitions int) {
	t.Helper()
	for p := range partitions {
		kept, err := filepath.Glob(filepath.Join(dataDir, logstore.TruncatedDir, fmt.Sprintf("%s-%d", topic, p), "*.batches"))
		if err != nil || len(kept) != 1 {
			t.Fatalf("%s-%d: truncated batches kept in %v (%v), want one file", topic, p, kept, err)
		}
	}
}

// --describe --watch against a live mirror: on a terminal each snapshot
// clears the screen and redraws under the "Every" line, with the lag in
// time and the leader epochs in the table; piped, the same two snapshots
// follow "# TIME" lines, with no control characters at all.
func TestMirrorsWatchOnTerminal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), progressTestDeadline)
	defer cancel()
	base := t.TempDir()
	source := startTestNode(ctx, t, filepath.Join(base, "source"))
	target := startTestNode(ctx, t, filepath.Join(base, "target"))
	const partitions = 4
	if err := source.node.CreateTopic(ctx, "watched", partitions, nil); err != nil {
		t.Fatal(err)
	}
	produceEach(ctx, t, source.addr, "watched", partitions, 2, 16)
	createTestMirror(ctx, t, target, "m", source.addr, nil)
	if _, err := target.node.Admin().SetTopicsDesiredState(ctx, "m", mirrord.StartMirroring, mirrord.TopicSelection{Names: []string{"watched"}}); err != nil {
		t.Fatal(err)
	}
	waitPartitions(ctx, t, target, "m", []string{"watched"}, partitions, func(p mirrord.MirrorPartitionStatus) bool {
		return p.State == "MIRRORING" && p.LogEndOffset == 2
	})

	args := []string{"--describe", "--mirror", "m", "--watch", "--count", "2", "--interval", "50ms"}
	screen, err := runOnTerminal(ctx, t, target.addr, args...)
	if err != nil {
		t.Fatalf("--describe --watch: %v\n%q", err, screen)
	}
	pages := strings.Split(screen, clearScreen)
	if len(pages) != 3 || pages[0] != "" {
		t.Fatalf("terminal: %d screens, want 2 each after a clear:\n%q", len(pages)-1, screen)
	}
	for i, page := range pages[1:] {
		if !strings.HasPrefix(page, "Every 50ms: mirrord mirrors --describe  ") {
			t.Errorf("screen %d does not open with the watch's line:\n%s", i+1, page)
		}
		for _, column := range []string{"LAG-TIME", "EPOCH", "SOURCE-EPOCH"} {
			if !strings.Contains(page, column) {
				t.Errorf("screen %d has no %s column:\n%s", i+1, column, page)
			}
		}
		if rows := regexp.MustCompile(`(?m)^m\s+watched\s+\d\s+MIRRORING\s`).FindAllString(page, -1); len(rows) != partitions {
			t.Errorf("screen %d shows %d MIRRORING rows of watched, want %d:\n%s", i+1, len(rows), partitions, page)
		}
	}

	piped, err := runPiped(ctx, t, target.addr, args...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(piped, "\r\x1b") || strings.Contains(piped, "Every ") {
		t.Errorf("piped watch carries terminal output:\n%q", piped)
	}
	if headers := snapshotHeader.FindAllString(piped, -1); len(headers) != 2 {
		t.Errorf("piped watch: %d snapshot headers, want 2:\n%s", len(headers), piped)
	}
}
