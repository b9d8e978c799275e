package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mirrord/mirrord"
	"github.com/mirrord/mirrord/cluster/etcdtest"
)

// clusterNodes serves count nodes of one cluster on 127.0.0.1 with an
// embedded etcd, and returns etcd's endpoints and the first node's address.
func clusterNodes(t *testing.T, count int) (endpoints, addr string) {
	t.Helper()
	etcd, err := etcdtest.Start(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	endpoints = strings.Join(etcd.Endpoints(), ",")
	for id := 1; id <= count; id++ {
		node, err := mirrord.Open(mirrord.Config{DataDir: t.TempDir(), Properties: map[string]string{
			"etcd.endpoints": endpoints, "node.id": strconv.Itoa(id), "node.lease.ms": "2000", "default.replication.factor": strconv.Itoa(count),
		}})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- node.Serve(ctx, ln) }()
		t.Cleanup(func() {
			cancel()
			<-done
			node.Close()
		})
		if id == 1 {
			addr = ln.Addr().String()
		}
	}
	return endpoints, addr
}

func readNodes(t *testing.T, endpoints string) mirrord.ClusterReport {
	t.Helper()
	var out bytes.Buffer
	if err := nodesCommand([]string{"--etcd-endpoints", endpoints, "--json"}, &out); err != nil {
		t.Fatal(err)
	}
	var r mirrord.ClusterReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	return r
}

// TestNodesDrain: `mirrord nodes` lists a cluster's nodes from etcd;
// --drain moves a node's leaderships away and returns once it leads
// nothing; --undrain clears the mark.
func TestNodesDrain(t *testing.T) {
	endpoints, addr := clusterNodes(t, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	admin := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for r := readNodes(t, endpoints); len(r.Nodes) < 2 || !r.Nodes[1].Live; r = readNodes(t, endpoints) {
		if time.Now().After(deadline) {
			t.Fatalf("two live nodes not listed within 30 s: %+v", r)
		}
		<-tick.C // polls the listing: the condition itself
	}
	if resp, err := admin.CreateTopic(ctx, 4, -1, nil, "t"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	r := readNodes(t, endpoints)
	if r.Nodes[0].Leaders+r.Nodes[1].Leaders != 4 || r.Nodes[0].Leaders == 0 || r.Nodes[0].Replicas != 4 || r.ControllerID < 1 || r.Offline != 0 {
		t.Fatalf("before the drain: %+v", r)
	}

	var out bytes.Buffer
	if err := nodesCommand([]string{"--etcd-endpoints", endpoints, "--drain", "1", "--wait-timeout", "30s"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "node 1 drained: it leads no partition") {
		t.Fatalf("--drain printed %q", out.String())
	}
	r = readNodes(t, endpoints)
	if n := r.Nodes[0]; !n.Drained || n.Leaders != 0 || r.Nodes[1].Leaders != 4 {
		t.Fatalf("after the drain: %+v", r)
	}
	out.Reset()
	if err := nodesCommand([]string{"--etcd-endpoints", endpoints}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "live,drained") || !strings.Contains(out.String(), "NODE") {
		t.Fatalf("the listing:\n%s", out.String())
	}
	out.Reset()
	if err := nodesCommand([]string{"--etcd-endpoints", endpoints, "--undrain", "1"}, &out); err != nil {
		t.Fatal(err)
	}
	if r := readNodes(t, endpoints); r.Nodes[0].Drained {
		t.Fatalf("after --undrain: %+v", r)
	}
	if err := nodesCommand([]string{"--drain", "1"}, &out); err == nil || !strings.Contains(err.Error(), "--etcd-endpoints is required") {
		t.Fatalf("without --etcd-endpoints: %v", err)
	}
}
