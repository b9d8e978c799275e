package bench

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"
)

// servedNode is a Node on disk served on a loopback port.
type servedNode struct {
	node *engine.Node
	addr string
	stop func()
}

func serveNode(tb testing.TB, dir string) servedNode {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	node, err := engine.OpenNode(engine.NodeConfig{FS: vfs.OS, DataDir: dir, Log: logstore.DefaultConfig(), Host: addr.IP.String(), Port: int32(addr.Port)})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- netio.NewServer(netio.Config{Backend: node}).Serve(ctx, ln) }()
	return servedNode{node: node, addr: ln.Addr().String(), stop: func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("serve: %v", err)
		}
		if err := node.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	}}
}

// fill writes totalBytes of 16 KiB batches of 1 KiB records into the
// partitions of topic, through the node's produce path.
func fill(tb testing.TB, node *engine.Node, topic string, partitions int32, totalBytes int) (records int64) {
	tb.Helper()
	ctx := context.Background()
	if _, err := node.CreateTopic(ctx, topic, partitions, nil, false); err != nil {
		tb.Fatal(err)
	}
	value := make([]byte, 1000)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	batch := make([]rb.Record, 16)
	for i := range batch {
		batch[i] = rb.Record{Value: value}
	}
	set := rb.Append(nil, rb.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, Records: batch})
	for written := 0; written < totalBytes; written += len(set) {
		p, err := node.Partition(topic, int32(written/len(set))%partitions)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := p.Produce(ctx, append([]byte(nil), set...), netio.ProduceRequest{Acks: -1}); err != nil {
			tb.Fatal(err)
		}
		records += int64(len(batch))
	}
	return records
}

// cost is wall-clock time and this process's CPU time (user + system).
type cost struct{ wall, cpu time.Duration }

func measure(fn func()) cost {
	cpuStart, start := processCPU(), time.Now()
	fn()
	return cost{wall: time.Since(start), cpu: processCPU() - cpuStart}
}

func processCPU() time.Duration {
	var usage unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &usage); err != nil {
		panic(err)
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

// BenchmarkServe consumes a topic of 256 MiB from a mirrord node with a
// franz-go consumer, and copies the same number of bytes over a plain
// loopback TCP connection (1 MiB buffers), in the same run. Both sides of
// each run are in this process, so CPU-seconds per GB count client and
// server together for mirrord, and sender and receiver for the copy.
func BenchmarkServe(b *testing.B) {
	const totalBytes = 256 << 20
	served := serveNode(b, filepath.Join(b.TempDir(), "data"))
	defer served.stop()
	records := fill(b, served.node, "bench", 4, totalBytes)
	var consumed, copied cost
	var bytes int64
	for b.Loop() {
		consumed.add(measure(func() { bytes = consumeAll(b, served.addr, "bench", 4, records) }))
		copied.add(measure(func() { loopbackCopy(b, bytes) }))
	}
	gb := float64(bytes) * float64(b.N) / 1e9
	b.SetBytes(bytes)
	b.ReportMetric(gb*1e3/consumed.wall.Seconds(), "mirrord-MB/s")
	b.ReportMetric(gb*1e3/copied.wall.Seconds(), "copy-MB/s")
	b.ReportMetric(copied.wall.Seconds()/consumed.wall.Seconds(), "x-copy")
	b.ReportMetric(consumed.cpu.Seconds()/gb, "mirrord-cpu-s/GB")
	b.ReportMetric(copied.cpu.Seconds()/gb, "copy-cpu-s/GB")
}

func (c *cost) add(d cost) { c.wall += d.wall; c.cpu += d.cpu }

// consumeAll reads every record of the topic's partitions from the start
// and returns the record bytes (keys and values) it received; opts are
// added to the client's (a TLS dialer, say).
func consumeAll(tb testing.TB, addr, topic string, partitions int32, records int64, opts ...kgo.Opt) int64 {
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxBytes(64 << 20), kgo.FetchMaxPartitionBytes(16 << 20)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var seen, bytes int64
	for seen < records {
		fetches := client.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			tb.Fatalf("consume after %d of %d records: %v", seen, records, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			seen++
			bytes += int64(len(r.Key) + len(r.Value))
		})
	}
	return bytes
}

// loopbackCopy sends total bytes over a loopback TCP connection.
func loopbackCopy(tb testing.TB, total int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	received := make(chan int64, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			received <- -1
			return
		}
		defer conn.Close()
		buf := make([]byte, 1<<20)
		var n int64
		for {
			m, err := conn.Read(buf)
			n += int64(m)
			if err != nil {
				received <- n
				return
			}
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for sent := int64(0); sent < total; {
		n, err := conn.Write(buf[:min(int64(len(buf)), total-sent)])
		if err != nil {
			tb.Fatal(err)
		}
		sent += int64(n)
	}
	conn.Close()
	if n := <-received; n != total {
		tb.Fatalf("loopback copy received %d of %d bytes", n, total)
	}
}
