package mirrord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestClusterTopicConfigs: a topic's configs are the cluster's, whichever
// node is asked: an AlterConfigs through a node holding no replica of the
// topic is what every node describes and what the replica's node applies;
// a bad value is refused with INVALID_CONFIG naming the key, and changes
// nothing.
func TestClusterTopicConfigs(t *testing.T) {
	tc := startTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := kadm.NewClient(tc.client(0))
	waitUntil(t, 30*time.Second, "three live nodes", func() (bool, string) {
		m, err := admin.Metadata(ctx)
		return err == nil && len(m.Brokers) == 3, fmt.Sprint(m.Brokers, err)
	})
	created, err := admin.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, "configured")
	if err != nil || created.Err != nil {
		t.Fatalf("create topic: %v %v", err, created.Err)
	}
	var holder int
	waitUntil(t, 30*time.Second, "the topic placed", func() (bool, string) {
		m, err := admin.Metadata(ctx, "configured")
		if err != nil || len(m.Topics["configured"].Partitions) != 1 {
			return false, fmt.Sprint(m.Topics, err)
		}
		holder = int(m.Topics["configured"].Partitions[0].Leader) - 1
		return holder >= 0, fmt.Sprint(m.Topics["configured"].Partitions)
	})
	other := (holder + 1) % 3 // holds no replica: RF 1
	otherAdmin := kadm.NewClient(tc.client(other))
	altered, err := otherAdmin.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, "configured")
	if err == nil {
		err = onlyErr(altered.On("configured", nil))
	}
	if err != nil {
		t.Fatalf("alter through node %d (no replica): %v", other+1, err)
	}
	want := map[string]string{"cleanup.policy": "compact"}
	for i := range tc.nodes {
		described, err := kadm.NewClient(tc.client(i)).DescribeTopicConfigs(ctx, "configured")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := described.On("configured", nil)
		if err != nil {
			t.Fatalf("describe through node %d: %v", i+1, err)
		}
		got := map[string]string{}
		for _, c := range rc.Configs {
			if c.Source == 1 && c.Value != nil { // DYNAMIC_TOPIC_CONFIG
				got[c.Key] = *c.Value
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("node %d describes the topic's overrides %v, want %v", i+1, got, want)
		}
	}
	waitUntil(t, 30*time.Second, "the replica's node applies the configs", func() (bool, string) {
		have, _, err := tc.nodes[holder].engine.TopicConfigs("configured")
		return err == nil && maps.Equal(have, want), fmt.Sprint(have, err)
	})

	bad, err := otherAdmin.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("soon")}}, "configured")
	if err == nil {
		err = onlyErr(bad.On("configured", nil))
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("retention.ms=soon: %v, want INVALID_CONFIG", err)
	}
	if have, _, err := tc.nodes[holder].engine.TopicConfigs("configured"); err != nil || !maps.Equal(have, want) {
		t.Fatalf("after a refused alter the topic has %v (%v), want %v", have, err, want)
	}
}

// onlyErr is an alter's error for one topic: the request's, or the
// topic's.
func onlyErr(r kadm.AlterConfigsResponse, err error) error {
	if err != nil {
		return err
	}
	return r.Err
}
