package engine

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"testing"

	"github.com/mirrord/mirrord/netio"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The topic config sync: a mirror topic takes the source topic's dynamic
// configs minus topic.properties.exclude within a round, follows a change
// on the source, refuses a client's alter, and keeps the last configs it
// copied after the stop, when it is the clients' to change.
func TestMirrorSyncsTopicConfigs(t *testing.T) {
	ctx := context.Background()
	source, sourceAddr := startNode(t, filepath.Join(t.TempDir(), "source"))
	target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
	if _, err := source.CreateTopic(ctx, "table", 1, map[string]string{"cleanup.policy": "compact", "retention.ms": "3600000",
		"message.timestamp.type": "LogAppendTime", "min.insync.replicas": "1"}, false); err != nil {
		t.Fatal(err)
	}
	config := mirrorConfig(sourceAddr)
	config["mirror.group.offsets.sync.interval.ms"] = "50"
	mirrorTopicWith(t, target, config, "table")
	waitConfigs := func(want map[string]string) {
		t.Helper()
		var got map[string]string
		waitUntil(t, "the mirror topic's configs to be the source's", func() bool {
			var err error
			got, _, err = target.TopicConfigs("table")
			return err == nil && maps.Equal(got, want)
		})
	}
	// message.timestamp.* and min.insync.replicas are excluded by default.
	waitConfigs(map[string]string{"cleanup.policy": "compact", "retention.ms": "3600000"})
	if _, origin, _ := target.TopicConfigs("table"); origin != "mirror m" {
		t.Fatalf("origin %q, want the mirror's", origin)
	}

	sourceAdmin, targetAdmin := kadm.NewClient(newClient(t, sourceAddr)), kadm.NewClient(newClient(t, targetAddr))
	alter := func(admin *kadm.Client, key, value string) error {
		responses, err := admin.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: key, Value: &value}}, "table")
		if err == nil {
			_, err = responses.On("table", nil)
		}
		if err == nil {
			err = responses[0].Err
		}
		return err
	}
	if err := alter(sourceAdmin, "segment.ms", "600000"); err != nil {
		t.Fatal(err)
	}
	waitConfigs(map[string]string{"cleanup.policy": "compact", "retention.ms": "3600000", "segment.ms": "600000"})
	if err := alter(targetAdmin, "retention.ms", "1000"); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("a client's alter of a mirror topic: %v, want POLICY_VIOLATION", err)
	}

	setMirroring(t, target, netio.StopMirroring, "table")
	if err := alter(sourceAdmin, "retention.ms", "7200000"); err != nil { // no longer copied
		t.Fatal(err)
	}
	if err := alter(targetAdmin, "retention.ms", "1800000"); err != nil {
		t.Fatalf("a client's alter after the stop: %v", err)
	}
	waitConfigs(map[string]string{"cleanup.policy": "compact", "retention.ms": "1800000", "segment.ms": "600000"})
}
