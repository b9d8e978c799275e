package broker

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/vfs"
)

// Retention runs on its schedule on writable topics whose cleanup.policy
// holds delete, and leaves compacted, read-only and internal ones alone.
func TestRetentionSchedule(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000).Add(30 * 24 * time.Hour) // a month after dataBatch's timestamps
	cfg := Config{FS: vfs.NewMem(), DataDir: "/data", Log: logstore.DefaultConfig(), RetentionCheckInterval: 10 * time.Millisecond}
	cfg.Log.Now = func() time.Time { return now }
	n, err := Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	small := map[string]string{"segment.bytes": "1048576", "internal.segment.bytes": "1024"}
	for name, policy := range map[string]string{"deleted": "delete", "compacted": "compact", "mirrored": "delete"} {
		configs := map[string]string{"cleanup.policy": policy}
		if name == "mirrored" {
			configs["retention.ms"] = "-1" // until it is read-only, below
		}
		for k, v := range small {
			configs[k] = v
		}
		if _, err := n.CreateTopic(ctx, name, 1, configs, false); err != nil {
			t.Fatal(err)
		}
		p, _ := n.LocalPartition(name, 0)
		for i := range 5 { // about 700 bytes a batch: one batch a segment, the first four can go
			batch := dataBatch(-1, 0, 0, 60, false)
			if policy == "compact" { // a compacted topic takes keyed records only
				batch = keyedBatch(strconv.Itoa(i), strings.Repeat("v", 700))
			}
			if _, err := produceTo(p, batch, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	mirrored, _ := n.LocalPartition("mirrored", 0)
	mirrored.SetReadOnly(func(string) error { return errInternalTopic("mirrored") })
	if err := n.SetTopicConfigs("mirrored", map[string]string{"cleanup.policy": "delete", "segment.bytes": "1048576", "internal.segment.bytes": "1024"}, "mirror m"); err != nil {
		t.Fatal(err)
	}
	deleted, _ := n.LocalPartition("deleted", 0)
	deadline := time.Now().Add(10 * time.Second)
	// A pass may run between two of the produces above: poll until the
	// four old segments are gone.
	for deleted.log.LogStartOffset() != 240 && time.Now().Before(deadline) {
		select {
		case <-deleted.Watchers().Changed():
		case <-time.After(time.Until(deadline)):
		}
	}
	if got := deleted.log.LogStartOffset(); got != 240 {
		t.Fatalf("log start %d after retention, want 240 (four of five segments older than 7 days)", got)
	}
	if n.applyRetention() != 0 {
		t.Fatal("a second pass deleted more")
	}
	for _, name := range []string{"compacted", "mirrored"} {
		p, _ := n.LocalPartition(name, 0)
		if start := p.log.LogStartOffset(); start != 0 {
			t.Errorf("%s: log start %d, want 0: retention is not for it", name, start)
		}
	}
}
