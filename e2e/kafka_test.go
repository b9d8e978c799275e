package e2e

// Helpers of the interop suite: real Kafka brokers (kafkatest), Kafka's
// own command-line tools run against Kafka and against mirrord, and
// comparisons of their answers.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	kafkaStartWait     = 3 * time.Minute // formatting and starting every node, cold JVMs
	consoleConsumeWait = "30000"         // ms: kafka-console-consumer's --timeout-ms
)

// interopRequired says whether a missing Java or missing Kafka jars fail
// the interop tests instead of skipping them: on CI (CI=true, set by
// .ci/run) and when MIRRORD_INTEROP=1 (make interop).
func interopRequired() bool {
	return os.Getenv("CI") == "true" || os.Getenv("MIRRORD_INTEROP") == "1"
}

// kafkaLibs returns the Kafka jars, or skips (fails when required) the
// test when they are missing.
func kafkaLibs(t *testing.T) string {
	t.Helper()
	libs, err := kafkatest.Libs("..")
	if err != nil {
		message := fmt.Sprintf("%v: run `make tools` (scripts/install-kafka.sh)", err)
		if interopRequired() {
			t.Fatal(message)
		}
		t.Skip(message)
	}
	return libs
}

// startKafka starts a KRaft cluster of brokers nodes; its logs are printed
// when the test fails, and it stops when the test ends.
func startKafka(t *testing.T, brokers int, config map[string]string) *kafkatest.Cluster {
	t.Helper()
	return startKafkaCluster(t, kafkatest.Options{Brokers: brokers, Config: config})
}

// startKafkaCluster is startKafka with every option (Libs and Dir are
// filled in).
func startKafkaCluster(t *testing.T, opts kafkatest.Options) *kafkatest.Cluster {
	t.Helper()
	opts.Libs, opts.Dir = kafkaLibs(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaStartWait)
	defer cancel()
	started := time.Now()
	cluster, err := kafkatest.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start Kafka %s (%d brokers, %d dedicated controllers): %v", kafkatest.Version, opts.Brokers, opts.Controllers, err)
	}
	t.Logf("Kafka %s: %d brokers at %s (%d dedicated controllers), started in %v", kafkatest.Version, opts.Brokers, cluster.Bootstrap(), opts.Controllers, time.Since(started).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Kafka logs:\n%s", cluster.Logs())
		}
		killKafka(cluster)
	})
	return cluster
}

// killKafka ends every node of a test's cluster with SIGKILL once the
// test is done with it. A graceful stop (Cluster.Close) checks nothing
// and is slow: a combined KRaft node that lost its quorum to the others'
// stops waits out kafkatest's 30 s grace period, which was a third of
// TestInteropKafkaLeaderKilled's 104 s on an idle machine.
func killKafka(cluster *kafkatest.Cluster) {
	for _, n := range append(append([]*kafkatest.Node{}, cluster.Nodes...), cluster.Controllers...) {
		if n.Running() {
			_ = cluster.Kill(n) // fails only if it exited meanwhile
		}
	}
}

// sharedKafka is the one-broker Kafka of the tests that can share one
// (sharedKafkaBroker), started by the first of them and closed by
// TestMain once every test ended.
var sharedKafka struct {
	once    sync.Once
	dir     string
	cluster *kafkatest.Cluster
	err     error
}

// sharedKafkaBroker returns the package's shared one-broker Kafka with
// kafkatest's default configs, starting it on first use: a Kafka start
// is 12-24 s of a loaded machine's CPU (JVMs: a cluster ID, a format, the
// broker). Only a test that neither stops nor reconfigures the broker,
// nor lists what other tests create there (topics, groups, transactional
// IDs: it names its own and asks about those) may use it; the broker's
// log is printed when such a test fails.
func sharedKafkaBroker(t *testing.T) *kafkatest.Cluster {
	t.Helper()
	libs := kafkaLibs(t)
	sharedKafka.once.Do(func() {
		started := time.Now()
		if sharedKafka.dir, sharedKafka.err = os.MkdirTemp("", "e2e-shared-kafka-"); sharedKafka.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), kafkaStartWait)
		defer cancel()
		sharedKafka.cluster, sharedKafka.err = kafkatest.Start(ctx, kafkatest.Options{Libs: libs, Dir: sharedKafka.dir, Brokers: 1})
		if sharedKafka.err == nil {
			t.Logf("shared Kafka %s: 1 broker at %s, started in %v", kafkatest.Version, sharedKafka.cluster.Bootstrap(), time.Since(started).Round(time.Millisecond))
		}
	})
	if sharedKafka.err != nil {
		t.Fatalf("start the shared Kafka %s: %v", kafkatest.Version, sharedKafka.err)
	}
	cluster := sharedKafka.cluster
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("shared Kafka's logs:\n%s", cluster.Logs())
		}
	})
	return cluster
}

// closeSharedKafka stops the shared Kafka, if a test started it, and
// removes its directory.
func closeSharedKafka() {
	if sharedKafka.cluster != nil {
		killKafka(sharedKafka.cluster)
	}
	if sharedKafka.dir != "" {
		os.RemoveAll(sharedKafka.dir)
	}
}

// createKafkaTopic creates a topic on Kafka with a replication factor and
// topic configs.
func createKafkaTopic(ctx context.Context, t *testing.T, addr, name string, partitions int32, replicas int16, configs map[string]string) {
	t.Helper()
	client, err := kgo.NewClient(seeds(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	values := map[string]*string{}
	for k, v := range configs {
		values[k] = &v
	}
	created, err := kadm.NewClient(client).CreateTopic(ctx, partitions, replicas, values, name)
	if err == nil {
		err = created.Err
	}
	if err != nil {
		t.Fatalf("create topic %s on Kafka: %v", name, err)
	}
}

// consoleConsume runs kafka-console-consumer (the Java client) on one
// partition of Kafka and of mirrord, from the earliest offset until it
// printed count records, with every field of the record printed, and
// returns both outputs.
func consoleConsume(ctx context.Context, t *testing.T, libs, kafka, mirror string, tp topicPartition, isolation string, count int) (fromKafka, fromMirror []byte) {
	t.Helper()
	fromKafka, fromMirror, err := fromBoth(kafka, mirror, func(addr string) ([]byte, error) {
		out, err := kafkatest.RunTool(ctx, libs, nil, "org.apache.kafka.tools.consumer.ConsoleConsumer",
			"--bootstrap-server", addr, "--topic", tp.topic, "--partition", fmt.Sprint(tp.partition),
			"--offset", "earliest", "--max-messages", fmt.Sprint(count), "--timeout-ms", consoleConsumeWait,
			"--isolation-level", isolation,
			"--property", "print.partition=true", "--property", "print.offset=true",
			"--property", "print.timestamp=true", "--property", "print.key=true",
			"--property", "print.headers=true", "--property", "print.value=true",
			"--property", "null.literal=<null>")
		if err != nil {
			return nil, fmt.Errorf("kafka-console-consumer %s (%s) from %s: %w", tp, isolation, addr, err)
		}
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fromKafka, fromMirror
}

// getOffsets runs kafka-get-offsets (GetOffsetShell) against Kafka and
// against mirrord for the topics matching pattern at time (-1 latest, -2
// earliest, -3 max timestamp, or a timestamp in ms) and returns both
// outputs, their lines sorted.
func getOffsets(ctx context.Context, t *testing.T, libs, kafka, mirror, pattern string, time int64) (fromKafka, fromMirror string) {
	t.Helper()
	kafkaOut, mirrorOut, err := fromBoth(kafka, mirror, func(addr string) ([]byte, error) {
		out, err := kafkatest.RunTool(ctx, libs, nil, "org.apache.kafka.tools.GetOffsetShell",
			"--bootstrap-server", addr, "--topic", pattern, "--time", fmt.Sprint(time))
		if err != nil {
			return nil, fmt.Errorf("kafka-get-offsets --time %d from %s: %w", time, addr, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		sort.Strings(lines)
		return []byte(strings.Join(lines, "\n")), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(kafkaOut), string(mirrorOut)
}

// fromBoth asks Kafka and mirrord at once and returns both answers: a
// Kafka tool's run is mostly its JVM's start-up, and the two overlap
// instead of adding up (22 kafka-console-consumer pairs took 71 s of
// TestInteropKafkaSingleBroker one after the other).
func fromBoth(kafka, mirror string, ask func(addr string) ([]byte, error)) (fromKafka, fromMirror []byte, err error) {
	var kafkaErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		fromKafka, kafkaErr = ask(kafka)
	}()
	fromMirror, err = ask(mirror)
	<-done // bounded: ask's tools run under kafkatest's time limit
	return fromKafka, fromMirror, errors.Join(kafkaErr, err)
}

// deleteRecords runs kafka-delete-records against Kafka: every partition
// of offsets moves its log start up to that offset.
func deleteRecords(ctx context.Context, t *testing.T, cluster *kafkatest.Cluster, offsets map[topicPartition]int64) {
	t.Helper()
	var parts []string
	for tp, offset := range offsets {
		parts = append(parts, fmt.Sprintf(`{"topic":%q,"partition":%d,"offset":%d}`, tp.topic, tp.partition, offset))
	}
	file := filepath.Join(t.TempDir(), "delete-records.json")
	if err := os.WriteFile(file, []byte(`{"version":1,"partitions":[`+strings.Join(parts, ",")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Tool(ctx, "org.apache.kafka.tools.DeleteRecordsCommand", "--bootstrap-server", cluster.Bootstrap(), "--offset-json-file", file); err != nil {
		t.Fatalf("kafka-delete-records: %v", err)
	}
}

// compareOutputs requires two tools' outputs to be identical and not empty.
func compareOutputs(t *testing.T, what string, fromKafka, fromMirror []byte) {
	t.Helper()
	if len(fromKafka) == 0 {
		t.Errorf("%s: Kafka's answer is empty", what)
		return
	}
	if !bytes.Equal(fromKafka, fromMirror) {
		at := firstDifference(fromKafka, fromMirror)
		t.Errorf("%s: mirrord's answer (%d bytes) differs from Kafka's (%d bytes) at byte %d:\nKafka:   %q\nmirrord: %q",
			what, len(fromMirror), len(fromKafka), at, excerpt(fromKafka, at), excerpt(fromMirror, at))
	}
}

func excerpt(b []byte, at int) []byte {
	start, end := max(at-80, 0), min(at+80, len(b))
	if start > end {
		return nil
	}
	return b[start:end]
}

// listOffsetsAnswer is one partition's ListOffsets answer, comparable.
type listOffsetsAnswer struct {
	ErrorCode   int16
	Timestamp   int64
	Offset      int64
	LeaderEpoch int32
}

// listOffsets asks addr (ListOffsets v8, read_uncommitted) for one
// partition at a timestamp.
func listOffsets(ctx context.Context, addr string, tp topicPartition, timestamp int64) (listOffsetsAnswer, error) {
	addr, err := leaderAddress(ctx, addr, tp)
	if err != nil {
		return listOffsetsAnswer{}, err
	}
	c, err := dialRaw(ctx, addr)
	if err != nil {
		return listOffsetsAnswer{}, err
	}
	defer c.close()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 8, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = tp.topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = tp.partition, -1, timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := c.request(ctx, req)
	if err != nil {
		return listOffsetsAnswer{}, err
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return listOffsetsAnswer{}, errors.New("ListOffsets: not one partition in the answer")
	}
	p := resp.Topics[0].Partitions[0]
	return listOffsetsAnswer{p.ErrorCode, p.Timestamp, p.Offset, p.LeaderEpoch}, nil
}

// offsetForLeaderEpochAnswer is one partition's answer, comparable.
type offsetForLeaderEpochAnswer struct {
	ErrorCode   int16
	LeaderEpoch int32
	EndOffset   int64
}

// offsetForLeaderEpoch asks addr (v4, as a consumer) for the end offset
// of epoch in one partition.
func offsetForLeaderEpoch(ctx context.Context, addr string, tp topicPartition, epoch int32) (offsetForLeaderEpochAnswer, error) {
	addr, err := leaderAddress(ctx, addr, tp)
	if err != nil {
		return offsetForLeaderEpochAnswer{}, err
	}
	c, err := dialRaw(ctx, addr)
	if err != nil {
		return offsetForLeaderEpochAnswer{}, err
	}
	defer c.close()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version, req.ReplicaID = 4, -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = tp.topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = tp.partition, -1, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := c.request(ctx, req)
	if err != nil {
		return offsetForLeaderEpochAnswer{}, err
	}
	resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return offsetForLeaderEpochAnswer{}, errors.New("OffsetForLeaderEpoch: not one partition in the answer")
	}
	p := resp.Topics[0].Partitions[0]
	return offsetForLeaderEpochAnswer{p.ErrorCode, p.LeaderEpoch, p.EndOffset}, nil
}

// batchEpochs lists the distinct partitionLeaderEpoch values of a
// partition's batches, in order of first appearance.
func batchEpochs(batches []byte) []int32 {
	var epochs []int32
	for len(batches) >= batchHeaderBytes {
		size := 12 + int(int32(beUint32(batches[batchLengthAt:])))
		epoch := int32(beUint32(batches[12:]))
		if len(epochs) == 0 || epochs[len(epochs)-1] != epoch {
			epochs = append(epochs, epoch)
		}
		if size > len(batches) || size < batchHeaderBytes {
			break
		}
		batches = batches[size:]
	}
	return epochs
}

func beUint32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// compareOffsetAnswers compares ListOffsets (latest, earliest, max
// timestamp, and every timestamps value) and OffsetForLeaderEpoch (every
// epoch in the batches, one below and one above) between Kafka and mirrord.
func compareOffsetAnswers(ctx context.Context, t *testing.T, kafkaAddr, mirrorAddr string, tp topicPartition, epochs []int32, timestamps []int64) {
	t.Helper()
	for _, ts := range append([]int64{-1, -2, -3}, timestamps...) {
		want, err := listOffsets(ctx, kafkaAddr, tp, ts)
		if err != nil {
			t.Fatalf("Kafka ListOffsets %s at %d: %v", tp, ts, err)
		}
		got, err := listOffsets(ctx, mirrorAddr, tp, ts)
		if err != nil {
			t.Fatalf("mirrord ListOffsets %s at %d: %v", tp, ts, err)
		}
		if got != want {
			t.Errorf("ListOffsets %s timestamp %d: mirrord %+v, Kafka %+v", tp, ts, got, want)
		}
	}
	asked := map[int32]bool{}
	for _, e := range epochs {
		for _, epoch := range []int32{e - 1, e, e + 1} {
			if epoch < 0 || asked[epoch] {
				continue
			}
			asked[epoch] = true
			want, err := offsetForLeaderEpoch(ctx, kafkaAddr, tp, epoch)
			if err != nil {
				t.Fatalf("Kafka OffsetForLeaderEpoch %s epoch %d: %v", tp, epoch, err)
			}
			got, err := offsetForLeaderEpoch(ctx, mirrorAddr, tp, epoch)
			if err != nil {
				t.Fatalf("mirrord OffsetForLeaderEpoch %s epoch %d: %v", tp, epoch, err)
			}
			if got != want {
				t.Errorf("OffsetForLeaderEpoch %s epoch %d: mirrord %+v, Kafka %+v", tp, epoch, got, want)
			}
		}
	}
}

// seeds is the kgo option for addr: one address, or a comma-separated
// list of a Kafka cluster's brokers.
func seeds(addr string) kgo.Opt { return kgo.SeedBrokers(strings.Split(addr, ",")...) }

// leaderAddress routes a raw request about tp: one address (mirrord) is
// used as it is; of a comma-separated list (a Kafka cluster) the
// partition's leader is asked for in metadata.
func leaderAddress(ctx context.Context, addr string, tp topicPartition) (string, error) {
	if !strings.Contains(addr, ",") {
		return addr, nil
	}
	client, err := kgo.NewClient(seeds(addr))
	if err != nil {
		return "", err
	}
	defer client.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(tp.topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return "", fmt.Errorf("metadata of %s: %w", tp, err)
	}
	leader := int32(-1)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic != nil && *t.Topic == tp.topic && p.Partition == tp.partition && p.ErrorCode == 0 {
				leader = p.Leader
			}
		}
	}
	for _, b := range resp.Brokers {
		if b.NodeID == leader {
			return net.JoinHostPort(b.Host, fmt.Sprint(b.Port)), nil
		}
	}
	return "", fmt.Errorf("metadata of %s: no leader (%d)", tp, leader)
}
