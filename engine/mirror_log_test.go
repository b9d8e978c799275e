package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	"github.com/mirrord/mirrord/vfs"
)

// mirrorLogWait bounds each wait for a log event.
const mirrorLogWait = 30 * time.Second

// An event about a mirror's partition is one line (one JSON object) with
// the mirror, topic and partition as fields of their own, not in the
// message text, and its states by name: what `--log-format json`
// hands to a log pipeline that filters by them.
func TestMirrorLogEventsCarryFields(t *testing.T) {
	var out syncBuffer
	logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sourceNode, sourceAddr := startNode(t, filepath.Join(t.TempDir(), "source"))
	target, _ := startNodeConfig(t, NodeConfig{FS: vfs.OS, DataDir: filepath.Join(t.TempDir(), "target"), Log: logstore.DefaultConfig(), Logger: logger})
	createTopic(t, sourceNode, "orders", 2)
	startMirroring(t, target, sourceAddr, "orders")
	// The partitions' state changes on their way to MIRRORING (Debug),
	// then the stop (Info).
	waitMirrorLogEvents(t, &out, "mirror partition state", map[string]any{"state": "MIRRORING"}, 2)
	results, err := target.Mirrors().SetTopicsDesiredState(context.Background(), "m", netio.StopMirroring, netio.TopicSelection{Names: []string{"orders"}})
	if err != nil || len(results) != 1 || results[0].Err != nil {
		t.Fatalf("stop: %v %+v", err, results)
	}
	waitMirrorLogEvents(t, &out, "stopped mirroring: the partition is writable", nil, 2)

	events := 0
	for _, event := range mirrorLogEvents(t, out.String()) {
		message, _ := event["msg"].(string)
		if strings.Contains(message, "orders") {
			t.Errorf("event %q names the topic in its text", message)
		}
		if event["topic"] != "orders" {
			continue
		}
		if _, ok := event["partition"]; !ok {
			continue // a topic's event, from the broker (which knows no mirror): created topic with a given ID
		}
		events++
		if event["mirror"] != "m" {
			t.Errorf("event %q: mirror %v, want m", message, event["mirror"])
		}
		if p, ok := event["partition"].(float64); !ok || (p != 0 && p != 1) {
			t.Errorf("event %q: partition %v (%T), want the number 0 or 1", message, event["partition"], event["partition"])
		}
		if strings.Contains(message, "partition 0") || strings.Contains(message, "partition 1") || strings.Contains(message, "orders-") {
			t.Errorf("event %q names the partition in its text", message)
		}
		for _, key := range []string{"state", "from"} {
			if v, ok := event[key]; ok {
				if s, isString := v.(string); !isString || s == "" || strings.Trim(s, "0123456789") == "" {
					t.Errorf("event %q: %s %v, want a state's name", message, key, v)
				}
			}
		}
	}
	if events < 4 {
		t.Fatalf("%d events of the partitions of orders in the log:\n%s", events, out.String())
	}
}

// mirrorLogEvents parses the JSON log, one object a line.
func mirrorLogEvents(t *testing.T, text string) []map[string]any {
	t.Helper()
	var events []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		var event map[string]any
		if err := json.Unmarshal([]byte(line), &event); err != nil {
			t.Fatalf("log line %q is not one JSON object: %v", line, err)
		}
		events = append(events, event)
	}
	return events
}

// waitMirrorLogEvents polls the log until it holds events with message
// msg and the given fields for n partitions of topic orders.
func waitMirrorLogEvents(t *testing.T, out *syncBuffer, msg string, fields map[string]any, n int) {
	t.Helper()
	deadline := time.Now().Add(mirrorLogWait)
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		partitions := map[any]bool{}
	events:
		for _, event := range mirrorLogEvents(t, out.String()) {
			if event["msg"] != msg || event["topic"] != "orders" {
				continue
			}
			for key, want := range fields {
				if event[key] != want {
					continue events
				}
			}
			partitions[event["partition"]] = true
		}
		if len(partitions) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q event %v for %d partitions of orders within %v; the log:\n%s", msg, fields, n, mirrorLogWait, out.String())
		}
		<-poll.C
	}
}
