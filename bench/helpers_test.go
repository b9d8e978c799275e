package bench

// Helpers the scenarios share: polling with a deadline, mirror admin
// calls, offsets, the scenario mode.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/mirrord/mirrord/mirrorwire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// pollUntil calls done every interval until it reports true or an error,
// or ctx ends.
func pollUntil(ctx context.Context, interval time.Duration, done func() (bool, error)) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for { // bounded by ctx
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

// createMirrorWith creates mirror name of the source at sourceAddr with
// configs besides bootstrap.servers.
func createMirrorWith(ctx context.Context, client *kgo.Client, name, sourceAddr string, configs map[string]string) error {
	req := &mirrorwire.CreateClusterMirrorRequest{MirrorName: name,
		Configs: []mirrorwire.CreateClusterMirrorConfig{{Name: "bootstrap.servers", Value: &sourceAddr}}}
	for _, key := range slices.Sorted(maps.Keys(configs)) {
		value := configs[key]
		req.Configs = append(req.Configs, mirrorwire.CreateClusterMirrorConfig{Name: key, Value: &value})
	}
	kresp, err := client.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("create mirror %s: %w", name, err)
	}
	if code := kresp.(*mirrorwire.CreateClusterMirrorResponse).ErrorCode; code != 0 {
		return fmt.Errorf("create mirror %s: %w", name, kerr.ErrorForCode(code))
	}
	return nil
}

// startMirroring starts the topics named and those matching include in
// mirror name.
func startMirroring(ctx context.Context, client *kgo.Client, name string, topics, include []string) error {
	return changeMirroring(ctx, client, mirrorwire.StartMirroring, name, topics, include)
}

// changeMirroring asks mirror name to change (start, pause, resume, ...)
// the topics named and those matching include.
func changeMirroring(ctx context.Context, client *kgo.Client, change mirrorwire.TopicsChange, name string, topics, include []string) error {
	req := &mirrorwire.MirrorTopicsRequest{Change: change, MirrorName: name, IncludePatterns: include}
	for _, topic := range topics {
		req.Topics = append(req.Topics, mirrorwire.MirrorTopicsRequestTopic{TopicName: topic})
	}
	kresp, err := client.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("%s mirroring %v %v: %w", change, topics, include, err)
	}
	resp := kresp.(*mirrorwire.MirrorTopicsResponse)
	if resp.ErrorCode != 0 {
		return fmt.Errorf("%s mirroring %v %v: %w", change, topics, include, kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			return fmt.Errorf("%s mirroring %s: %w", change, t.TopicName, kerr.ErrorForCode(t.ErrorCode))
		}
	}
	return nil
}

// listOffsetsOf asks broker for the log end offset of partitions
// partitions of each topic, in one ListOffsets; a partition error is an
// error. The answer is by topic, then partition.
func listOffsetsOf(ctx context.Context, client *kgo.Client, broker int32, topics []string, partitions int32) ([][]int64, error) {
	return listLatestOffsets(ctx, client.Broker(int(broker)), -1, topics, partitions)
}

// listLatestOffsets is listOffsetsOf as replicaID: -1 a consumer, which
// Kafka answers the high watermark (mirrord: its log end offset).
func listLatestOffsets(ctx context.Context, broker *kgo.Broker, replicaID int32, topics []string, partitions int32) ([][]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = replicaID
	index := make(map[string]int, len(topics))
	for i, name := range topics {
		index[name] = i
		topic := kmsg.NewListOffsetsRequestTopic()
		topic.Topic = name
		for partition := range partitions {
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Partition, p.Timestamp, p.CurrentLeaderEpoch = partition, -1, -1
			topic.Partitions = append(topic.Partitions, p)
		}
		req.Topics = append(req.Topics, topic)
	}
	kresp, err := broker.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	offsets := make([][]int64, len(topics))
	for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
		i, ok := index[t.Topic]
		if !ok || offsets[i] != nil || len(t.Partitions) != int(partitions) {
			return nil, fmt.Errorf("list offsets: topic %s with %d partitions in the answer", t.Topic, len(t.Partitions))
		}
		offsets[i] = make([]int64, partitions)
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("list offsets %s-%d: %w", t.Topic, p.Partition, err)
			}
			if p.Partition < 0 || p.Partition >= partitions {
				return nil, fmt.Errorf("list offsets: partition %s-%d in the answer", t.Topic, p.Partition)
			}
			offsets[i][p.Partition] = p.Offset
		}
	}
	for i, o := range offsets {
		if o == nil {
			return nil, fmt.Errorf("list offsets: no answer for %s", topics[i])
		}
	}
	return offsets, nil
}

// scenarioMode is the mode scenarioModeEnv names, smoke when unset.
func scenarioMode(tb testing.TB) benchMode {
	tb.Helper()
	name := os.Getenv(scenarioModeEnv)
	if name == "" {
		name = "smoke"
	}
	mode, ok := benchModes[name]
	if !ok {
		tb.Fatalf("%s=%q: want smoke, quick or full", scenarioModeEnv, name)
	}
	return mode
}

// parallelInSmoke runs a smoke test beside the other parallel tests when
// mode is smoke: smoke runs judge no number, and most of their time is
// JVMs and nodes starting up, which overlap well (two at a time: -parallel
// is GOMAXPROCS). In the modes whose numbers are read they run alone.
// The longest (TestKafkaScenariosSmoke, TestBenchReportSmoke) are
// parallel; the shorter ones with a Kafka broker of their own
// (TestCleanerScenarioSmoke, TestGroupCommitSmoke) run alone before
// them: go test starts the parallel tests in no set order, and with those
// two among them TestKafkaScenariosSmoke was started last (after 100 s).
func parallelInSmoke(t *testing.T, mode benchMode) {
	t.Helper()
	if mode.Name == "smoke" {
		t.Parallel()
	}
}

func boolCount(b bool) int {
	if b {
		return 1
	}
	return 0
}
