package engine

import (
	"context"
	"net"
	"testing"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startNode serves a Node over dir on a loopback port until the test ends.
func startNode(t *testing.T, dir string) (*Node, string) {
	t.Helper()
	return startNodeConfig(t, NodeConfig{FS: vfs.OS, DataDir: dir, Log: logstore.DefaultConfig()})
}

// startNodeConfig is startNode with a config (its Host and Port are set).
func startNodeConfig(t testing.TB, cfg NodeConfig) (*Node, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	cfg.Host, cfg.Port = addr.IP.String(), int32(addr.Port)
	node, err := OpenNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- netio.NewServer(netio.Config{Backend: node, ScramCredentials: node.ScramCredentials()}).Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := node.Close(); err != nil {
			t.Errorf("close node: %v", err)
		}
	})
	return node, ln.Addr().String()
}

func createTopic(t *testing.T, n *Node, name string, partitions int32) {
	t.Helper()
	if _, err := n.CreateTopic(context.Background(), name, partitions, nil, false); err != nil {
		t.Fatal(err)
	}
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}
