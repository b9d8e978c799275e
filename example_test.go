package mirrord_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/mirrord/mirrord"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// exampleNode opens a node on a fresh temporary directory and serves it
// (PLAINTEXT) on a free loopback port until stop, which also closes it.
func exampleNode(ctx context.Context) (node *mirrord.Node, addr string, stop func()) {
	dir, err := os.MkdirTemp("", "mirrord-example-")
	if err != nil {
		log.Fatal(err)
	}
	node, err = mirrord.Open(mirrord.Config{DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- node.Serve(ctx, ln) }()
	return node, ln.Addr().String(), func() {
		cancel()
		if err := errors.Join(<-served, node.Close(), os.RemoveAll(dir)); err != nil {
			log.Fatal(err)
		}
	}
}

// produce writes values to partition 0 of topic at addr (creating the
// topic if it has none, as auto.create.topics.enable allows) and returns
// the offset of each.
func produce(ctx context.Context, addr, topic string, values ...string) []int64 {
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.AllowAutoTopicCreation())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	var offsets []int64
	for _, v := range values {
		r, err := client.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)}).First()
		if err != nil {
			log.Fatal(err)
		}
		offsets = append(offsets, r.Offset)
	}
	return offsets
}

// consume reads n records from partition 0 of topic at addr, from the
// start.
func consume(ctx context.Context, addr, topic string, n int) []*kgo.Record {
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	var records []*kgo.Record
	for len(records) < n {
		fetches := client.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			log.Fatal(err)
		}
		records = append(records, fetches.Records()...)
	}
	return records
}

// A node in this program: open it on a data directory, serve the Kafka
// protocol on a listener the program owns, produce to a topic that the
// first write creates, read it back, close.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node, addr, stop := exampleNode(ctx)
	defer stop()

	offsets := produce(ctx, addr, "greetings", "hello", "world")
	fmt.Println("produced at offsets", offsets)
	for _, r := range consume(ctx, addr, "greetings", 2) {
		fmt.Printf("%s-%d@%d: %s\n", r.Topic, r.Partition, r.Offset, r.Value)
	}
	fmt.Println("node has a cluster ID:", node.Cluster().ClusterID != "")
	// Output:
	// produced at offsets [0 1]
	// greetings-0@0: hello
	// greetings-0@1: world
	// node has a cluster ID: true
}

// Two nodes in this program, one the source and one mirroring it: the
// mirror copies the source's records with their offsets; stopping the
// mirror (the failover) makes the topic writable, its next records after
// the source's.
func ExampleAdmin() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	source, sourceAddr, stopSource := exampleNode(ctx)
	defer stopSource()
	target, targetAddr, stopTarget := exampleNode(ctx)
	defer stopTarget()

	if err := source.CreateTopic(ctx, "orders", 1, nil); err != nil {
		log.Fatal(err)
	}
	produce(ctx, sourceAddr, "orders", "a", "b", "c")

	admin := target.Admin()
	config := map[string]string{"bootstrap.servers": sourceAddr, "mirror.metadata.refresh.interval.ms": "200"}
	if err := admin.CreateMirror(ctx, "dr", config); err != nil {
		log.Fatal(err)
	}
	orders := mirrord.TopicSelection{Names: []string{"orders"}}
	if _, err := admin.SetTopicsDesiredState(ctx, "dr", mirrord.StartMirroring, orders); err != nil {
		log.Fatal(err)
	}
	// Poll until the partition is MIRRORING and holds the source's three
	// records, for at most 30 seconds.
	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		caughtUp := false
		mirrors, err := admin.DescribeMirrors(ctx, []string{"dr"}, false)
		if err != nil {
			log.Fatal(err)
		}
		for _, p := range mirrors[0].Partitions {
			state, _ := mirrord.ParsePartitionState(p.State)
			caughtUp = state == mirrord.Mirroring && p.LogEndOffset == 3
		}
		if caughtUp {
			break
		}
		if time.Now().After(deadline) {
			log.Fatalf("not caught up after 30s: %+v", mirrors[0].Partitions)
		}
		<-poll.C
	}
	fmt.Println("mirroring orders, caught up")

	results, err := admin.SetTopicsDesiredState(ctx, "dr", mirrord.StopMirroring, orders)
	if err != nil || results[0].Err != nil {
		log.Fatal(err, results)
	}
	mirrors, err := admin.DescribeMirrors(ctx, []string{"dr"}, false)
	if err != nil {
		log.Fatal(err)
	}
	p := mirrors[0].Partitions[0]
	fmt.Printf("%s-%d %s, last mirror offset %d\n", p.Topic, p.Partition, p.State, p.LastMirrorOffset)
	// The stop's MIRROR_PID_RESET control batch takes offset 3.
	fmt.Println("written to the former mirror at", produce(ctx, targetAddr, "orders", "d"))
	for _, r := range consume(ctx, targetAddr, "orders", 4) {
		fmt.Printf("%d:%s ", r.Offset, r.Value)
	}
	fmt.Println()
	// Output:
	// mirroring orders, caught up
	// orders-0 STOPPED, last mirror offset 3
	// written to the former mirror at [4]
	// 0:a 1:b 2:c 4:d
}

// Dial reaches a node's mirror administration across the network, as
// `mirrord mirrors` does: the same Admin as Node.Admin in the node's own
// process, over the Kafka listener.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	source, sourceAddr, stopSource := exampleNode(ctx)
	defer stopSource()
	_, targetAddr, stopTarget := exampleNode(ctx)
	defer stopTarget()
	if err := source.CreateTopic(ctx, "orders", 2, nil); err != nil {
		log.Fatal(err)
	}

	admin, err := mirrord.Dial(ctx, targetAddr, nil) // nil: PLAINTEXT; else security.protocol, ssl.*, sasl.*
	if err != nil {
		log.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateMirror(ctx, "dr", map[string]string{"bootstrap.servers": sourceAddr}); err != nil {
		log.Fatal(err)
	}
	err = admin.CreateMirror(ctx, "dr", map[string]string{"bootstrap.servers": sourceAddr})
	fmt.Println("again:", errors.Is(err, kerr.DuplicateResource))
	results, err := admin.SetTopicsDesiredState(ctx, "dr", mirrord.StartMirroring, mirrord.TopicSelection{Names: []string{"orders"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		fmt.Println("started", r.Topic, r.Err)
	}
	listed, err := admin.ListMirrors(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range listed {
		fmt.Println("mirror", m.Name, "from", m.SourceBootstrap == sourceAddr)
	}
	// Output:
	// again: true
	// started orders <nil>
	// mirror dr from true
}

// NewLogger makes the logger of `--log-format`: slog's text or JSON, one
// line per event, the mirror, topic and partition as fields.
func ExampleNewLogger() {
	var out bytes.Buffer
	logger, err := mirrord.NewLogger(&out, "json", slog.LevelInfo)
	if err != nil {
		log.Fatal(err)
	}
	logger.With("mirror", "dr").Info("partition state", "topic", "orders", "partition", 0, "state", "MIRRORING")
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		log.Fatal(err)
	}
	fmt.Println(line["msg"], line["mirror"], line["topic"], line["partition"], line["state"])
	_, err = mirrord.NewLogger(&out, "xml", slog.LevelInfo)
	fmt.Println(err)
	// Output:
	// partition state dr orders 0 MIRRORING
	// mirrord: log format "xml": want text or json
}
