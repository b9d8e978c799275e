package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// mirrorConfigsTopic is a topic of the transactional failover test's
// mirror whose configs the source alters: the mirror topic's are checked.
const mirrorConfigsTopic = "txf-configs"

// checkConfigsSynced alters topic's configs on the Kafka source
// (retention.ms=3600000, cleanup.policy=compact, and
// message.timestamp.type=LogAppendTime, which the mirror's
// topic.properties.exclude leaves out by default) and waits until the
// mirror topic on mirror has the two copied as topic overrides and the
// excluded one at its default.
func checkConfigsSynced(ctx context.Context, t *testing.T, kafka, mirror, topic string) {
	t.Helper()
	set := func(v string) *string { return &v }
	responses, err := kadm.NewClient(newClient(t, kafka)).AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: set("3600000")},
		{Op: kadm.SetConfig, Name: "cleanup.policy", Value: set("compact")},
		{Op: kadm.SetConfig, Name: "message.timestamp.type", Value: set("LogAppendTime")}}, topic)
	if err == nil && len(responses) == 1 {
		err = responses[0].Err
	}
	if err != nil {
		t.Fatalf("alter %s's configs on Kafka: %v", topic, err)
	}
	altered := time.Now()
	admin := kadm.NewClient(newClient(t, mirror))
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	var last map[string]kadm.Config
	for {
		described, err := admin.DescribeTopicConfigs(ctx, topic)
		if err == nil && len(described) == 1 && described[0].Err == nil {
			last = map[string]kadm.Config{}
			for _, c := range described[0].Configs {
				last[c.Key] = c
			}
			if dynamic(last, "retention.ms", "3600000") && dynamic(last, "cleanup.policy", "compact") {
				if c := last["message.timestamp.type"]; c.Source == kmsg.ConfigSourceDynamicTopicConfig || c.MaybeValue() != "CreateTime" {
					t.Fatalf("mirror topic %s copied the excluded message.timestamp.type: %s from %v", topic, c.MaybeValue(), c.Source)
				}
				t.Logf("mirror topic %s has the source's configs %v after they were altered", topic, time.Since(altered).Round(time.Millisecond))
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("mirror topic %s never got the source's configs; last described %v (%v)", topic, last, err)
		case <-ticker.C:
		}
	}
}

func dynamic(configs map[string]kadm.Config, key, value string) bool {
	c, ok := configs[key]
	return ok && c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.MaybeValue() == value
}
