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
	"github.com/mirrord/mirrord/mirrordtest/faultproxy"
	"github.com/mirrord/mirrord/netio"
	"github.com/twmb/franz-go/pkg/kgo"
)

// progressTestDeadline bounds each test.
const progressTestDeadline = 3 * time.Minute

// progressLineRE is a drawn progress line.
var progressLineRE = regexp.MustCompile(`^Mirror [a-z-]+: (waiting for the partitions|\d+/\d+ partitions (stopped|aligned|caught up) \(\d+%\), (at least )?\d+ (partitions|records) left( at [0-9.]+/s)?, ETA (-|0s|<1s|\d+s|\d+m\d\ds|\d+h\d\dm))$`)

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
	node, err := startDemoNode(ctx, dir)
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
func waitPartitions(ctx context.Context, t *testing.T, node demoNode, mirror string, topics []string, count int, ok func(netio.MirrorPartitionStatus) bool) {
	t.Helper()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	last := ""
	for {
		described, err := node.node.Mirrors().DescribeMirrors(ctx, []string{mirror}, false)
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
	if err := node.node.Mirrors().CreateMirror(ctx, name, full); err != nil {
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
	for _, topic := range []string{"slow", "piped"} {
		if _, err := source.node.CreateTopic(ctx, topic, partitions, nil, false); err != nil {
			t.Fatal(err)
		}
		produceEach(ctx, t, source.addr, topic, partitions, catchUpBatches, 400)
	}
	// A fetch answers 4 KiB at most, and half the frames or more wait
	// 40ms: 200 partitions of 10 batches of ~470 bytes take 230 fetches
	// or more, 4.6s or more.
	proxy := stalledProxy(t, source.addr, 40*time.Millisecond)
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
	checkProgress(t, progress, "caught up", "records", partitions)
	waitPartitions(ctx, t, target, "m", []string{"slow"}, partitions, func(p netio.MirrorPartitionStatus) bool { return p.LogEndOffset == catchUpBatches })

	piped, err := runPiped(ctx, t, target.addr, "--start", "--mirror", "m", "--topics", "piped", "--wait")
	if err != nil || !regexp.MustCompile(`^Mirror m, topic piped: start requested\nMirror m: 200 partitions caught up in [0-9hms<]+\.\n$`).MatchString(piped) {
		t.Errorf("piped: %q, %v", piped, err)
	}
	waitPartitions(ctx, t, target, "m", []string{"piped"}, partitions, func(p netio.MirrorPartitionStatus) bool { return p.LogEndOffset == catchUpBatches })
	// Without --wait nothing changes: the result line alone.
	piped, err = runPiped(ctx, t, target.addr, "--start", "--mirror", "m", "--topics", "piped")
	if err != nil || piped != "Mirror m, topic piped: start requested\n" {
		t.Errorf("piped without --wait: %q, %v", piped, err)
	}
}

// checkProgress requires progress lines that count doing of total
// partitions in unit, with counts that never exceed total, and one of
// them at least with a rate and an ETA in time.
func checkProgress(t *testing.T, progress []string, doing, unit string, total int) {
	t.Helper()
	counted := regexp.MustCompile(`^Mirror [a-z-]+: (\d+)/(\d+) partitions ` + doing + ` \(\d+%\), \d+ ` + unit + ` left`)
	rated, seen := false, 0
	for _, line := range progress {
		match := counted.FindStringSubmatch(line)
		if match == nil {
			continue
		}
		seen++
		if match[2] != fmt.Sprint(total) {
			t.Errorf("progress line %q: total %s, want %d", line, match[2], total)
		}
		rated = rated || regexp.MustCompile(`/s, ETA (0s|<1s|\d+s|\d+m\d\ds)$`).MatchString(line)
	}
	if seen == 0 || !rated {
		t.Errorf("%d progress lines of partitions %s (one with an ETA: %v): %q", seen, doing, rated, progress)
	}
}
