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

	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kgo"
)

// demoNode is a node served on a loopback port, inside this process.
type demoNode struct {
	node *engine.Node
	addr string
	stop func() error
}

func startDemoNode(ctx context.Context, dir string) (demoNode, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return demoNode{}, err
	}
	addr := ln.Addr().(*net.TCPAddr)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	node, err := engine.OpenNode(engine.NodeConfig{FS: vfs.OS, DataDir: dir, Log: logstore.DefaultConfig(), Host: addr.IP.String(), Port: int32(addr.Port), Logger: quiet})
	if err != nil {
		ln.Close()
		return demoNode{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- netio.NewServer(netio.Config{Backend: node, Logger: quiet}).Serve(ctx, ln) }()
	return demoNode{node: node, addr: ln.Addr().String(), stop: func() error {
		cancel()
		return errors.Join(<-done, node.Close())
	}}, nil
}

// runMirrorDemo is `mirrord demo`: a source node with writable topics, a
// load generator writing to it, and a mirror node mirroring it live, all
// in this process on loopback. It prints a progress line a second and
// ends with a summary and the commands to do the same against a real
// cluster.
func runMirrorDemo(args []string) error {
	flags := flag.NewFlagSet("demo", flag.ContinueOnError)
	seconds := flags.Int("seconds", 10, "how long the load generator writes")
	storage := flags.Bool("storage", false, "run the storage demo instead (append and read back through the log store)")
	storageBytes := flags.Int64("bytes", 512<<20, "with --storage: bytes to append")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *storage {
		return runDemo([]string{"--bytes", fmt.Sprint(*storageBytes)})
	}
	base, err := os.MkdirTemp("", "mirrord-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	ctx := context.Background()
	source, err := startDemoNode(ctx, filepath.Join(base, "source"))
	if err != nil {
		return err
	}
	defer source.stop()
	target, err := startDemoNode(ctx, filepath.Join(base, "mirror"))
	if err != nil {
		return err
	}
	defer target.stop()
	topics := map[string]int32{"orders": 3, "payments": 2}
	for name, partitions := range topics {
		if _, err := source.node.CreateTopic(ctx, name, partitions, nil, false); err != nil {
			return err
		}
	}
	fmt.Printf("mirrord demo: source node %s, mirror node %s, topics orders (3 partitions) and payments (2)\n", source.addr, target.addr)
	if err := target.node.Mirrors().CreateMirror(ctx, "demo", map[string]string{"bootstrap.servers": source.addr, "mirror.metadata.refresh.interval.ms": "1000"}); err != nil {
		return err
	}
	if _, err := target.node.Mirrors().SetTopicsDesiredState(ctx, "demo", netio.StartMirroring, netio.TopicSelection{Include: []string{"orders|payments"}}); err != nil {
		return err
	}
	produced, err := generateLoad(ctx, source.addr, topics, time.Duration(*seconds)*time.Second, func() { printProgress(ctx, source, target, topics) })
	if err != nil {
		return err
	}
	caughtUp := time.Now()
	for time.Since(caughtUp) < 30*time.Second && totalLag(ctx, source, target, topics) != 0 {
		waitTick(200 * time.Millisecond)
	}
	printProgress(ctx, source, target, topics)
	return printSummary(ctx, source, target, topics, produced)
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

var lastProgress struct {
	at    time.Time
	bytes int64
}

func printProgress(ctx context.Context, source, target demoNode, topics map[string]int32) {
	descriptions, err := target.node.Mirrors().DescribeMirrors(ctx, []string{"demo"}, false)
	if err != nil || len(descriptions) == 0 {
		fmt.Printf("  progress: %v\n", err)
		return
	}
	var mirrored int64
	for _, p := range descriptions[0].Partitions {
		mirrored += p.LogEndOffset
	}
	lag := map[string]int64{}
	for name, partitions := range topics {
		lag[name] = totalLag(ctx, source, target, map[string]int32{name: partitions})
	}
	bytes := target.node.MirroredBytes()
	rate := 0.0
	if !lastProgress.at.IsZero() {
		rate = float64(bytes-lastProgress.bytes) / time.Since(lastProgress.at).Seconds() / 1e6
	}
	lastProgress.at, lastProgress.bytes = time.Now(), bytes
	fmt.Printf("  mirrored %7d records  %6.1f MB/s  lag orders=%d payments=%d\n", mirrored, rate, lag["orders"], lag["payments"])
}

// totalLag is the records the mirror lacks: the source's high watermarks
// (read from the source node itself, not from the mirror's last fetch)
// less the mirror's log end offsets.
func totalLag(ctx context.Context, source, target demoNode, topics map[string]int32) int64 {
	var lag int64
	for name, partitions := range topics {
		for i := range partitions {
			sp, err := source.node.Partition(name, i)
			if err != nil {
				return -1
			}
			tp, err := target.node.Partition(name, i)
			if err != nil {
				lag += sp.Offsets().HighWatermark
				continue
			}
			lag += max(sp.Offsets().HighWatermark-tp.Offsets().LogEndOffset, 0)
		}
	}
	return lag
}

func printSummary(ctx context.Context, source, target demoNode, topics map[string]int32, produced int64) error {
	descriptions, err := target.node.Mirrors().DescribeMirrors(ctx, []string{"demo"}, false)
	if err != nil {
		return err
	}
	var mirrored int64
	for _, p := range descriptions[0].Partitions {
		mirrored += p.LogEndOffset
		if p.State == "FAILED" {
			return fmt.Errorf("partition %s-%d failed: %s", p.Topic, p.Partition, p.Error)
		}
	}
	fmt.Printf("\nsummary: %d records acknowledged by the source, %d offsets mirrored (transaction markers and the\n", produced, mirrored)
	fmt.Printf("record batches are copied byte for byte, with the same offsets and topic IDs); lag %d.\n", totalLag(ctx, source, target, topics))
	if lag := totalLag(ctx, source, target, topics); lag != 0 {
		return fmt.Errorf("the mirror did not catch up: lag %d", lag)
	}
	fmt.Print(`
To do the same against your own cluster:

  mirrord serve --data-dir /var/lib/mirrord --listen 0.0.0.0:9092 --http-listen 0.0.0.0:8080
  cat > source.properties <<EOF
  bootstrap.servers=kafka-1.example:9092,kafka-2.example:9092
  EOF
  mirrord mirrors --bootstrap-server localhost:9092 --create --mirror dr --mirror-config source.properties
  mirrord mirrors --bootstrap-server localhost:9092 --start --mirror dr --topics 'orders,pay-.*'
  mirrord mirrors --bootstrap-server localhost:9092 --describe --mirror dr
`)
	return nil
}

// waitTick waits d; the demo paces its progress output with it.
func waitTick(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	<-timer.C
}
