package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/mirrord/mirrord"
	"github.com/twmb/franz-go/pkg/kgo"
)

// demoNode is a node served on a loopback port, inside this process,
// through the embedding API.
type demoNode struct {
	node *mirrord.Node
	addr string
	stop func() error
}

// startDemoNode opens a node on dir logging to logger (nil: nowhere) and
// serves it on a free loopback port until stop.
func startDemoNode(ctx context.Context, dir string, logger *slog.Logger) (demoNode, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return demoNode{}, err
	}
	node, err := mirrord.Open(mirrord.Config{DataDir: dir, Logger: logger})
	if err != nil {
		ln.Close()
		return demoNode{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- node.Serve(ctx, ln) }()
	return demoNode{node: node, addr: ln.Addr().String(), stop: func() error {
		cancel()
		return errors.Join(<-done, node.Close())
	}}, nil
}

// runMirrorDemo is `mirrord demo`: a source node with writable topics, a
// load generator writing to it, and a mirror node mirroring it live, all
// in this process on loopback. It prints a progress line a second, a
// summary, and ends with a failover: the mirror node stops mirroring and
// takes writes at the offsets the source had.
func runMirrorDemo(args []string) error {
	flags := flag.NewFlagSet("demo", flag.ContinueOnError)
	seconds := flags.Int("seconds", 10, "how long the load generator writes")
	logFormat := flags.String("log-format", "", "the two nodes' log lines on stderr: text or json (empty: none)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	var logger *slog.Logger
	if *logFormat != "" {
		var err error
		if logger, err = mirrord.NewLogger(os.Stderr, *logFormat, slog.LevelInfo); err != nil {
			return fmt.Errorf("demo: --log-format: %w", err)
		}
	}
	_, err := mirrorDemoRun(context.Background(), os.Stdout, time.Duration(*seconds)*time.Second, logger)
	return err
}

// demoCatchUpWithin bounds the wait, once the load generator has
// stopped, for the mirror to hold every record the source has.
const demoCatchUpWithin = 30 * time.Second

// mirrorDemo is one run of the mirror demo: its two nodes, the topics
// the source has and the mirror mirrors, and where it prints. Only the
// goroutine running the demo uses it.
type mirrorDemo struct {
	out            io.Writer
	source, target demoNode
	topics         map[string]int32 // name -> partitions
	// progressAt and progressBytes are the time and MirroredBytes of the
	// last progress line, for its MB/s.
	progressAt    time.Time
	progressBytes int64
}

// mirrorDemoRun runs the whole demo, load for load, printing to out; it
// returns what the failover did, for the test to check.
func mirrorDemoRun(ctx context.Context, out io.Writer, load time.Duration, logger *slog.Logger) (_ failoverReport, err error) {
	base, err := os.MkdirTemp("", "mirrord-demo-")
	if err != nil {
		return failoverReport{}, fmt.Errorf("demo: %w", err)
	}
	defer func() { err = errors.Join(err, os.RemoveAll(base)) }()
	d := &mirrorDemo{out: out, topics: map[string]int32{"orders": 3, "payments": 2}}
	if d.source, err = startDemoNode(ctx, filepath.Join(base, "source"), nodeLogger(logger, "source")); err != nil {
		return failoverReport{}, fmt.Errorf("demo: source node: %w", err)
	}
	defer func() { err = errors.Join(err, stopDemoNode("source", d.source)) }()
	if d.target, err = startDemoNode(ctx, filepath.Join(base, "mirror"), nodeLogger(logger, "mirror")); err != nil {
		return failoverReport{}, fmt.Errorf("demo: mirror node: %w", err)
	}
	defer func() { err = errors.Join(err, stopDemoNode("mirror", d.target)) }()
	if err := d.startMirroring(ctx); err != nil {
		return failoverReport{}, err
	}
	produced, err := generateLoad(ctx, d.source.addr, d.topics, load, func() { d.printProgress(ctx) })
	if err != nil {
		return failoverReport{}, fmt.Errorf("demo: load generator: %w", err)
	}
	lag := d.waitCaughtUp(ctx, demoCatchUpWithin)
	d.printProgress(ctx)
	if err := d.printSummary(ctx, produced); err != nil {
		return failoverReport{}, err
	}
	report, err := d.failover(ctx)
	if err != nil {
		return report, err
	}
	if lag != 0 {
		return report, fmt.Errorf("demo: the mirror did not catch up within %v: lag %d", demoCatchUpWithin, lag)
	}
	return report, nil
}

// nodeLogger is logger with the node's role on each line; nil for nil.
func nodeLogger(logger *slog.Logger, role string) *slog.Logger {
	if logger == nil {
		return nil
	}
	return logger.With("node", role)
}

// stopDemoNode stops a node; it is an error for the demo to end on.
func stopDemoNode(role string, n demoNode) error {
	if err := n.stop(); err != nil {
		return fmt.Errorf("demo: stop the %s node: %w", role, err)
	}
	return nil
}

// startMirroring creates the topics on the source and mirror "demo" of
// them on the target.
func (d *mirrorDemo) startMirroring(ctx context.Context) error {
	for name, partitions := range d.topics {
		if err := d.source.node.CreateTopic(ctx, name, partitions, nil); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	fmt.Fprintf(d.out, "mirrord demo: source node %s, mirror node %s, topics orders (3 partitions) and payments (2)\n", d.source.addr, d.target.addr)
	if err := d.target.node.Admin().CreateMirror(ctx, "demo", map[string]string{"bootstrap.servers": d.source.addr, "mirror.metadata.refresh.interval.ms": "1000"}); err != nil {
		return fmt.Errorf("demo: create mirror: %w", err)
	}
	results, err := d.target.node.Admin().SetTopicsDesiredState(ctx, "demo", mirrord.StartMirroring, mirrord.TopicSelection{Include: []string{"orders|payments"}})
	if err != nil {
		return fmt.Errorf("demo: start mirroring: %w", err)
	}
	return topicResultsError("start mirroring", results)
}

// waitCaughtUp polls, for at most within, until the mirror holds every
// record the source has; it returns the lag left (0: caught up), and
// prints it when the deadline passed first.
func (d *mirrorDemo) waitCaughtUp(ctx context.Context, within time.Duration) int64 {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	for {
		lag := totalLag(d.source, d.target, d.topics)
		if lag == 0 {
			return 0
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(d.out, "  the mirror has not caught up after %v: %s\n", within, d.lagByTopic())
			return lag
		case <-ticker.C:
		}
	}
}

// lagByTopic is the lag per topic, as the progress line shows it.
func (d *mirrorDemo) lagByTopic() string {
	return fmt.Sprintf("lag orders=%d payments=%d",
		totalLag(d.source, d.target, map[string]int32{"orders": d.topics["orders"]}),
		totalLag(d.source, d.target, map[string]int32{"payments": d.topics["payments"]}))
}

// generateLoad writes 1 KiB records (lz4) to every partition of the topics
// for d, calling tick every second; it returns the records acknowledged.
func generateLoad(ctx context.Context, addr string, topics map[string]int32, d time.Duration, tick func()) (int64, error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer client.Close()
	// Values of random letters: lz4 shrinks them to about 60%, as it
	// does typical text.
	values := make([][]byte, 64)
	seed := uint32(1)
	for v := range values {
		values[v] = make([]byte, 1000)
		for i := range values[v] {
			seed = seed*1664525 + 1013904223
			values[v][i] = byte('a' + seed>>24%26)
		}
	}
	var (
		mu       sync.Mutex
		acked    int64
		firstErr error
	)
	names := make([]string, 0, len(topics))
	for name := range topics {
		names = append(names, name)
	}
	sort.Strings(names)
	end, nextTick := time.Now().Add(d), time.Now().Add(time.Second)
	for i := 0; time.Now().Before(end); i++ {
		record := &kgo.Record{Topic: names[i%len(names)], Key: fmt.Appendf(nil, "key-%d", i%1000), Value: values[i%len(values)]}
		client.Produce(ctx, record, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if err == nil {
				acked++
			}
		})
		if time.Now().After(nextTick) {
			tick()
			nextTick = nextTick.Add(time.Second)
		}
	}
	if err := client.Flush(ctx); err != nil {
		return 0, err
	}
	mu.Lock()
	defer mu.Unlock()
	return acked, firstErr
}

// printProgress prints one progress line: the offsets mirrored, the
// mirror's MB/s since the last line, and the lag per topic.
func (d *mirrorDemo) printProgress(ctx context.Context) {
	descriptions, err := d.target.node.Admin().DescribeMirrors(ctx, []string{"demo"}, false)
	if err != nil || len(descriptions) == 0 {
		fmt.Fprintf(d.out, "  progress: %v\n", err)
		return
	}
	var mirrored int64
	for _, p := range descriptions[0].Partitions {
		mirrored += p.LogEndOffset
	}
	var bytes int64
	for _, m := range d.target.node.Mirrors() {
		for _, p := range m.Partitions {
			bytes += p.Bytes
		}
	}
	rate := 0.0
	if !d.progressAt.IsZero() {
		rate = float64(bytes-d.progressBytes) / time.Since(d.progressAt).Seconds() / 1e6
	}
	d.progressAt, d.progressBytes = time.Now(), bytes
	fmt.Fprintf(d.out, "  mirrored %7d records  %6.1f MB/s  %s\n", mirrored, rate, d.lagByTopic())
}

// totalLag is the records the mirror lacks: the source's high watermarks
// (read from the source node itself, not from the mirror's last fetch)
// less the mirror's log end offsets; -1 when a source partition is
// missing.
func totalLag(source, target demoNode, topics map[string]int32) int64 {
	var lag int64
	for name, partitions := range topics {
		for i := range partitions {
			sp, err := source.node.Offsets(name, i)
			if err != nil {
				return -1
			}
			tp, err := target.node.Offsets(name, i)
			if err != nil {
				lag += int64(sp.HighWatermark)
				continue
			}
			lag += int64(max(sp.HighWatermark-tp.LogEndOffset, 0))
		}
	}
	return lag
}

// printSummary prints what was mirrored; a FAILED partition is an error.
func (d *mirrorDemo) printSummary(ctx context.Context, produced int64) error {
	descriptions, err := d.target.node.Admin().DescribeMirrors(ctx, []string{"demo"}, false)
	if err != nil {
		return fmt.Errorf("demo: describe mirror: %w", err)
	}
	var mirrored int64
	for _, p := range descriptions[0].Partitions {
		mirrored += p.LogEndOffset
		if state, _ := mirrord.ParsePartitionState(p.State); state == mirrord.Failed {
			return fmt.Errorf("demo: partition %s-%d failed: %s", p.Topic, p.Partition, p.Error)
		}
	}
	fmt.Fprintf(d.out, "\nsummary: %d records acknowledged by the source, %d offsets mirrored (transaction markers and the\n", produced, mirrored)
	fmt.Fprintf(d.out, "record batches are copied byte for byte, with the same offsets and topic IDs); lag %d.\n", totalLag(d.source, d.target, d.topics))
	fmt.Fprint(d.out, `
To do the same against your own cluster, and fail over to the mirror:

  mirrord serve --data-dir /var/lib/mirrord --listen 0.0.0.0:9092 --http-listen 0.0.0.0:8080
  cat > source.properties <<EOF
  bootstrap.servers=kafka-1.example:9092,kafka-2.example:9092
  EOF
  mirrord mirrors --bootstrap-server localhost:9092 --create --mirror dr --mirror-config source.properties
  mirrord mirrors --bootstrap-server localhost:9092 --start --mirror dr --topics 'orders,pay-.*'
  mirrord mirrors --bootstrap-server localhost:9092 --describe --mirror dr
  mirrord mirrors --bootstrap-server localhost:9092 --stop --dry-run --mirror dr --topics 'orders,pay-.*'
  mirrord mirrors --bootstrap-server localhost:9092 --stop --mirror dr --topics 'orders,pay-.*'
`)
	return nil
}

// topicResultsError joins the per-topic errors of a topic-state change.
func topicResultsError(what string, results []mirrord.TopicResult) error {
	var errs []error
	for _, r := range results {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", r.Topic, r.Err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("demo: %s: %w", what, err)
	}
	return nil
}
