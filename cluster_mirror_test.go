package mirrord

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sourceRecord is one record of a partition as a consumer reads it.
type sourceRecord struct {
	partition int32
	offset    int64
	value     string
}

// readAll consumes topic from the start through seed until it has want
// records, and returns them sorted by partition and offset.
func readAll(t *testing.T, seed, topic string, want int) []sourceRecord {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []sourceRecord
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records of %s through %s: %v", len(got), want, topic, seed, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, sourceRecord{r.Partition, r.Offset, string(r.Value)}) })
	}
	slices.SortFunc(got, func(a, b sourceRecord) int {
		if a.partition != b.partition {
			return int(a.partition - b.partition)
		}
		return int(a.offset - b.offset)
	})
	return got
}

// TestClusterMirrors: a mirror created through one node of three runs on
// the cluster: each partition of the mirror topic (replication factor 3)
// is mirrored by its leader and copied by its followers, every replica
// byte-identical and the records the source's at the source's offsets;
// every node lists the mirror and describes each partition with its
// leader and ISR; when a partition's leader leaves, another
// replica leads and mirrors what the source gets afterwards, with no gap
// and no duplicate. A --stop through any node answers when every
// partition's leader stored STOPPED: the topic is then writable through
// every node at the offsets after the mirrored ones (and the stop's
// MIRROR_PID_RESET batch), replicated like any topic, and the mirror can
// be deleted.
func TestClusterMirrors(t *testing.T) {
	source, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer source.Close()
	sourceAddr := source.ListenAddrs()[0]
	producer, err := kgo.NewClient(kgo.SeedBrokers(sourceAddr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	produced := 0
	produceSource := func(count int) {
		t.Helper()
		var records []*kgo.Record
		for range count {
			records = append(records, &kgo.Record{Topic: "events", Partition: int32(produced % 3), Value: fmt.Appendf(nil, "e%05d", produced)})
			produced++
		}
		if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatalf("produce to the source: %v", err)
		}
	}
	produceSource(300)
	// A config of the source's topic, which the mirror copies to every
	// replica of its topic.
	if altered, err := kadm.NewClient(producer).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("86400000")}}, "events"); err != nil || onlyErr(altered.On("events", nil)) != nil {
		t.Fatalf("set a config of the source's topic: %v %v", err, onlyErr(altered.On("events", nil)))
	}

	tc := startTestCluster(t, 3)
	waitUntil(t, 30*time.Second, "three live nodes", func() (bool, string) {
		m, err := kadm.NewClient(tc.client(0)).Metadata(ctx)
		return err == nil && len(m.Brokers) == 3, fmt.Sprint(m.Brokers, err)
	})
	began := time.Now()
	phase := func(what string) { t.Logf("%v: %s", time.Since(began).Round(time.Millisecond), what) }
	admin := tc.nodes[1].Admin()
	config := map[string]string{"bootstrap.servers": sourceAddr, "mirror.metadata.refresh.interval.ms": "200", "mirror.group.offsets.sync.interval.ms": "200"}
	if err := admin.CreateMirror(ctx, "m", config); err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateMirror(ctx, "m", config); err == nil {
		t.Fatal("a second mirror m was created")
	}
	events := TopicSelection{Names: []string{"events"}}
	if _, err := admin.SetTopicsDesiredState(ctx, "m", StartMirroring, events); err != nil {
		t.Fatal(err)
	}
	phase("mirror created and started through node 2")

	// Every replica is the source's partition, byte for byte.
	check := func(want int) {
		t.Helper()
		tc.waitReplicas("events", 3, int64(want))
		phase(fmt.Sprintf("replicas equal, %d records", want))
		sourceRecords := readAll(t, sourceAddr, "events", want)
		for i, n := range tc.nodes {
			if n == nil {
				continue
			}
			if got := readAll(t, tc.addrs[i], "events", want); !slices.Equal(got, sourceRecords) {
				t.Fatalf("read through node %d: %d records, not the source's %d at their offsets", i+1, len(got), len(sourceRecords))
			}
		}
	}
	check(300)
	phase("300 records mirrored, replicas byte-identical")
	for i := range tc.nodes {
		waitUntil(t, 30*time.Second, fmt.Sprintf("node %d describes the source's config", i+1), func() (bool, string) {
			v, err := topicConfig(ctx, tc.client(i), "events", "retention.ms")
			return err == nil && v == "86400000", fmt.Sprint(v, err)
		})
	}
	if err := setTopicConfig(ctx, tc.client(2), "events", "retention.ms", "1000"); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("alter a mirror topic's config through node 3: %v, want POLICY_VIOLATION (read-only)", err)
	}
	phase("the source topic's config on every node; a client's alter refused")
	// A group's offsets committed at the source are the cluster's group
	// coordinator's (the controller's; the other nodes do not sync them).
	committed := kadm.Offsets{}
	committed.Add(kadm.Offset{Topic: "events", Partition: 1, At: 42, LeaderEpoch: -1})
	if resp, err := kadm.NewClient(producer).CommitOffsets(ctx, "readers", committed); err != nil || resp.Error() != nil {
		t.Fatalf("commit at the source: %v %v", err, resp.Error())
	}
	waitUntil(t, 30*time.Second, "the source group's offset through the cluster", func() (bool, string) {
		fetched, err := kadm.NewClient(tc.client(1)).FetchOffsets(ctx, "readers")
		o, ok := fetched.Lookup("events", 1)
		return err == nil && ok && o.At == 42, fmt.Sprint(fetched, err)
	})
	phase("the source group's offsets through the cluster's coordinator")

	meta, err := kadm.NewClient(tc.client(0)).Metadata(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]bool{}
	for _, p := range meta.Topics["events"].Partitions {
		if len(p.Replicas) != 3 {
			t.Fatalf("events-%d: replicas %v, want 3", p.Partition, p.Replicas)
		}
		leaders[p.Leader] = true
	}
	// Every node describes every partition once, from its machine or
	// from etcd's record, with the leader Metadata names and the full ISR
	// (polled: a node's cache may trail node 1's by a moment).
	for i, n := range tc.nodes {
		listed, err := n.Admin().ListMirrors(ctx)
		if err != nil || len(listed) != 1 || listed[0].Name != "m" {
			t.Fatalf("node %d lists %+v (%v), want mirror m", i+1, listed, err)
		}
		waitUntil(t, 30*time.Second, fmt.Sprintf("node %d describes the 3 partitions with their leader and ISR", i+1), func() (bool, string) {
			descriptions, err := n.Admin().DescribeMirrors(ctx, []string{"m"}, false)
			if err != nil || len(descriptions) != 1 || len(descriptions[0].Partitions) != 3 {
				return false, fmt.Sprintf("%+v (%v)", descriptions, err)
			}
			for j, p := range descriptions[0].Partitions {
				want := meta.Topics["events"].Partitions[int32(j)]
				if p.Topic != "events" || p.Partition != int32(j) || p.State != "MIRRORING" || p.Leader != want.Leader ||
					!sameIDs(p.ISR, want.Replicas) || p.LogEndOffset != 100 {
					return false, fmt.Sprintf("row %d: %+v, want events-%d MIRRORING at 100, leader %d, ISR %v", j, p, j, want.Leader, want.Replicas)
				}
			}
			return true, ""
		})
		if failed, err := n.Admin().DescribeMirrors(ctx, []string{"m"}, true); err != nil || len(failed) != 1 || len(failed[0].Partitions) != 0 {
			t.Fatalf("node %d describes as failed %+v (%v), want none", i+1, failed, err)
		}
	}
	// The remote client (the CLI's) takes each row from the partition's
	// leader, the one node that knows the source's high watermark: every
	// partition's lag is known, and 0.
	remote, err := Dial(ctx, tc.addrs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	waitUntil(t, 30*time.Second, "every partition's lag through node 1's client", func() (bool, string) {
		descriptions, err := remote.DescribeMirrors(ctx, []string{"m"}, false)
		if err != nil || len(descriptions) != 1 || len(descriptions[0].Partitions) != 3 {
			return false, fmt.Sprintf("%+v (%v)", descriptions, err)
		}
		for _, p := range descriptions[0].Partitions {
			if p.Lag() != 0 || p.SourceHighWatermark != 100 {
				return false, fmt.Sprintf("events-%d: lag %d, source high watermark %d (leader %d)", p.Partition, p.Lag(), p.SourceHighWatermark, p.Leader)
			}
		}
		return true, ""
	})
	if err := admin.DeleteMirror(ctx, "m"); err == nil {
		t.Fatal("a mirror that mirrors was deleted")
	}

	// The leader of events-0 leaves: another replica leads it and mirrors
	// what the source gets from then on.
	p0 := meta.Topics["events"].Partitions[0]
	tc.stop(int(p0.Leader) - 1)
	phase(fmt.Sprintf("node %d (leader of events-0) stopped", p0.Leader))
	produceSource(300)
	check(600)
	phase("600 records mirrored after the leader left")
	// The new leader continued from its log end: no failback alignment
	// truncated it (a truncation keeps what it removed in truncated/).
	for i, dir := range tc.dirs {
		if _, err := os.Stat(filepath.Join(dir, "truncated")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("node %d truncated a mirror log (%v)", i+1, err)
		}
	}
	// It comes back (its mirror loaded from its data directory is rebuilt
	// from etcd's), follows, and catches up byte for byte.
	tc.start(int(p0.Leader) - 1)
	produceSource(30)
	check(630)
	phase(fmt.Sprintf("node %d back, 630 records on every replica", p0.Leader))
	if listed, err := tc.nodes[p0.Leader-1].Admin().ListMirrors(ctx); err != nil || len(listed) != 1 {
		t.Fatalf("node %d back lists %+v (%v)", p0.Leader, listed, err)
	}
	survivor := 0
	if p0.Leader == 1 {
		survivor = 1
	}
	after, err := kadm.NewClient(tc.client(survivor)).Metadata(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if p := after.Topics["events"].Partitions[0]; p.Leader == p0.Leader || p.LeaderEpoch <= p0.LeaderEpoch {
		t.Fatalf("events-0 after its leader left: leader %d epoch %d, before %d epoch %d", p.Leader, p.LeaderEpoch, p0.Leader, p0.LeaderEpoch)
	}

	// Failover through the node that did not start the mirror.
	results, err := tc.nodes[survivor].Admin().SetTopicsDesiredState(ctx, "m", StopMirroring, events)
	if err != nil || len(results) != 1 || results[0].Err != nil {
		t.Fatalf("--stop through node %d: %+v %v", survivor+1, results, err)
	}
	phase("stopped")
	// Every node describes the 3 partitions STOPPED (its cache may trail
	// the answering node's by a moment).
	for i := range tc.nodes {
		waitUntil(t, 30*time.Second, fmt.Sprintf("node %d describes the 3 partitions STOPPED at 210", i+1), func() (bool, string) {
			descriptions, err := tc.nodes[i].Admin().DescribeMirrors(ctx, []string{"m"}, false)
			if err != nil || len(descriptions) != 1 || len(descriptions[0].Partitions) != 3 {
				return false, fmt.Sprintf("%+v (%v)", descriptions, err)
			}
			for _, p := range descriptions[0].Partitions {
				if p.State != "STOPPED" || p.LastMirrorOffset != 210 {
					return false, fmt.Sprintf("events-%d is %s with last mirror offset %d, want STOPPED at 210 (the source's log end)", p.Partition, p.State, p.LastMirrorOffset)
				}
			}
			return true, ""
		})
	}
	// Each partition holds 210 mirrored records and the MIRROR_PID_RESET
	// at 210: a produce through node i to partition i lands at 211.
	for i := range tc.nodes {
		cl := tc.client(i, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
		r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: "events", Partition: int32(i), Value: []byte("after the stop")}).First()
		cl.Close()
		if err != nil || r.Offset != 211 {
			t.Fatalf("produce through node %d to events-%d after the stop: offset %v, %v; want 211", i+1, i, r, err)
		}
	}
	tc.waitReplicas("events", 3, 3*212)
	phase("produced through every node after the stop, replicas byte-identical")
	if err := setTopicConfig(ctx, tc.client(2), "events", "retention.ms", "1000000"); err != nil {
		t.Fatalf("alter the stopped topic's config through node 3: %v", err)
	}
	for i := range tc.nodes { // another node's view may lag a watch event
		waitUntil(t, 30*time.Second, fmt.Sprintf("node %d describes the alter", i+1), func() (bool, string) {
			v, err := topicConfig(ctx, tc.client(i), "events", "retention.ms")
			return err == nil && v == "1000000", fmt.Sprint(v, err)
		})
	}
	if err := admin.DeleteMirror(ctx, "m"); err != nil {
		t.Fatalf("delete the stopped mirror: %v", err)
	}
	cl := tc.client(2, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	waitUntil(t, 30*time.Second, "a produce after the mirror's delete", func() (bool, string) {
		r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: "events", Partition: 0, Value: []byte("after the delete")}).First()
		return err == nil && r.Offset == 212, fmt.Sprint(r, err)
	})
}

// topicConfig describes one config of topic through cl.
func topicConfig(ctx context.Context, cl *kgo.Client, topic, name string) (string, error) {
	described, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return "", err
	}
	rc, err := described.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return "", err
	}
	for _, c := range rc.Configs {
		if c.Key == name && c.Value != nil {
			return *c.Value, nil
		}
	}
	return "", fmt.Errorf("no config %s", name)
}

// setTopicConfig sets one config of topic through cl.
func setTopicConfig(ctx context.Context, cl *kgo.Client, topic, name, value string) error {
	altered, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: kadm.StringPtr(value)}}, topic)
	if err != nil {
		return err
	}
	return onlyErr(altered.On(topic, nil))
}

// sameIDs reports whether got and want hold the same node IDs, in any
// order.
func sameIDs(got, want []int32) bool {
	a, b := slices.Clone(got), slices.Clone(want)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
