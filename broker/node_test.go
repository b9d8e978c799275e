package broker

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startNode serves a Node over dir on a loopback port until the test ends.
func startNode(t *testing.T, dir string) (*Node, string) {
	t.Helper()
	n, addr, _ := serveNode(t, dir)
	return n, addr
}

// serveNode is startNode with a function that stops serving and closes
// the node before the test ends (it may be called twice).
func serveNode(t *testing.T, dir string) (*Node, string, func()) {
	t.Helper()
	return serveNodeWith(t, dir, logstore.DefaultConfig())
}

// serveNodeWith is serveNode with a partition log configuration.
func serveNodeWith(t *testing.T, dir string, logConfig logstore.Config) (*Node, string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	node, err := Open(Config{FS: vfs.OS, DataDir: dir, Log: logConfig, Host: addr.IP.String(), Port: int32(addr.Port)}, nil)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- netio.NewServer(netio.Config{Backend: node}).Serve(ctx, ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
			if err := node.Close(); err != nil {
				t.Errorf("close node: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return node, ln.Addr().String(), stop
}

// openTestNodeAt opens a Node over fs at dir; the caller closes it.
func openTestNodeAt(t testing.TB, fs vfs.FS, dir string) *Node {
	t.Helper()
	n, err := Open(Config{FS: fs, DataDir: dir, Log: logstore.DefaultConfig()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestProduceToNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	_, addr := startNode(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := kadm.NewClient(client).CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := client.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}, Partition: int32(i % 2)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// TestOpenDropsPartitionsPastAGap: partitions of one creation are made in
// parallel, so a crash can leave partition 2 without partition 1. Such a
// partition never held a record: OpenNode removes it. One that holds
// offsets past a missing partition is lost data: OpenNode refuses.
func TestOpenDropsPartitionsPastAGap(t *testing.T) {
	fs := vfs.NewMem()
	n := openTestNode(t, fs, newTestClock())
	if _, err := n.CreateTopic(context.Background(), "gap", 3, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.RemoveAll("/data/gap-1"); err != nil {
		t.Fatal(err)
	}
	n = openTestNode(t, fs, newTestClock())
	if got := len(n.topics["gap"].partitions); got != 1 {
		t.Errorf("topic gap has %d partitions after the crash, want 1", got)
	}
	if ok, err := fs.Exists("/data/gap-2"); ok || err != nil {
		t.Errorf("the partition past the gap is still on disk (%v)", err)
	}
	if _, err := n.CreateTopic(context.Background(), "data", 3, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := nodePartition(t, n, "data", 2).log.AdvanceLogStart(7); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.RemoveAll("/data/data-1"); err != nil {
		t.Fatal(err)
	}
	if n, err := Open(Config{FS: fs, DataDir: "/data", Log: logstore.DefaultConfig()}, nil); err == nil {
		n.Close()
		t.Fatal("opened a node whose partition data-2 holds offsets past a missing data-1")
	} else if !strings.Contains(err.Error(), "data-1") && !strings.Contains(err.Error(), "partition 1 is missing") {
		t.Errorf("error %q does not name the missing partition", err)
	}
}
