package broker

import (
	"context"
	"errors"
	"maps"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The parser against what Kafka 4.4's ConfigDef answers for the same
// values (LogConfig.validate and ConfigDef.convertToString, run once on
// the jars: scripts/kafkaconfigs).
func TestTopicConfigParse(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		want       string // the value as Kafka writes it; "" with err
		err        string // part of Kafka's message
	}{
		{"cleanup.policy", "", "", ""},
		{"cleanup.policy", "compact, delete", "compact,delete", ""},
		{"cleanup.policy", "Compact", "", "String must be one of: compact, delete"},
		{"cleanup.policy", "delete,", "", "values must not be empty"},
		{"preallocate", "TRUE", "true", ""},
		{"preallocate", " true ", "true", ""},
		{"preallocate", "yes", "", "Expected value to be either true or false"},
		{"min.cleanable.dirty.ratio", "0.50", "0.5", ""},
		{"min.cleanable.dirty.ratio", "1", "1.0", ""},
		{"min.cleanable.dirty.ratio", "1e-1", "0.1", ""},
		{"min.cleanable.dirty.ratio", "1.5", "", "Value must be no more than 1"},
		{"retention.ms", "+5", "5", ""},
		{"retention.ms", " 5 ", "5", ""},
		{"retention.ms", "-2", "", "Value must be at least -1"},
		{"retention.ms", "0x10", "", "Not a number of type LONG"},
		{"retention.ms", "", "", "Not a number of type LONG"},
		{"segment.bytes", "1048575", "", "Value must be at least 1048576"},
		{"segment.bytes", "2147483648", "", "Not a number of type INT"},
		{"follower.replication.throttled.replicas", "*", "*", ""},
		{"follower.replication.throttled.replicas", "0:1,1:2", "0:1,1:2", ""},
		{"follower.replication.throttled.replicas", "x", "", "must be the literal '*'"},
		{"compression.type", "GZIP", "", "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"},
		{"compression.type", "zstd", "zstd", ""},
		{"message.timestamp.type", "LogAppendTime", "LogAppendTime", ""},
		{"message.timestamp.type", "logappendtime", "", "String must be one of: CreateTime, LogAppendTime"},
		{"compression.gzip.level", "0", "", "Value must be between 1 and 9 or equal to -1"},
		{"compression.gzip.level", "-1", "-1", ""},
		{"retention.bytes", "-5", "-5", ""},
		{"max.message.bytes", "-1", "", "Value must be at least 0"},
		{"flush.ms", "9223372036854775808", "", "Not a number of type LONG"},
		{"min.insync.replicas", "0", "", "Value must be at least 1"},
		{"compression.zstd.level", "-131073", "", "Value must be at least -131072"},
		{"local.retention.ms", "-3", "", "Value must be at least -2"},
		{"remote.copy.lag.ms", "-2", "", "Value must be at least -1"},
	} {
		got, err := topicConfigDefs[tc.key].parse(tc.value)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s=%q: %q, %v; want %q", tc.key, tc.value, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, kerr.InvalidConfig)):
			t.Errorf("%s=%q: %v; want INVALID_CONFIG saying %q", tc.key, tc.value, err, tc.err)
		}
	}
}

func openConfigNode(t *testing.T, fs vfs.FS, static map[string]string) *Node {
	t.Helper()
	cfg := Config{FS: fs, DataDir: "/data", Log: logstore.DefaultConfig()}
	if err := cfg.ApplyServerProperties(static); err != nil {
		t.Fatal(err)
	}
	n, err := Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// describe returns a topic's configs by name.
func describe(t *testing.T, n *Node, topic string) map[string]netio.ConfigEntry {
	t.Helper()
	entries, err := n.DescribeConfigs(netio.ConfigResource{Type: netio.ConfigResourceTopic, Name: topic}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]netio.ConfigEntry{}
	for _, e := range entries {
		m[e.Name] = e
	}
	return m
}

func TestTopicConfigsDescribeAlterAndReopen(t *testing.T) {
	fs := vfs.NewMem()
	n := openConfigNode(t, fs, map[string]string{"log.retention.hours": "2", "log.cleanup.policy": "delete"})
	ctx := context.Background()
	if _, err := n.CreateTopic(ctx, "orders", 2, map[string]string{"segment.ms": "60000", "cleanup.policy": "compact"}, false); err != nil {
		t.Fatal(err)
	}
	got := describe(t, n, "orders")
	if len(got) != len(kafkaTopicConfigs)-1 { // all but internal.segment.bytes
		t.Fatalf("%d configs described, want %d", len(got), len(kafkaTopicConfigs)-1)
	}
	for _, tc := range []struct {
		key, value string
		source     netio.ConfigSource
		synonyms   int
	}{
		{"segment.ms", "60000", netio.ConfigSourceTopic, 1},            // the override (log.roll.ms, the first synonym, has no default)
		{"retention.ms", "7200000", netio.ConfigSourceStaticBroker, 1}, // log.retention.hours=2
		{"cleanup.policy", "compact", netio.ConfigSourceTopic, 3},      // the override, the file's, log.cleanup.policy's default
		{"min.insync.replicas", "1", netio.ConfigSourceClusterDefault, 2},
		{"remote.storage.enable", "false", netio.ConfigSourceDefault, 0},
	} {
		e := got[tc.key]
		if e.Value == nil || *e.Value != tc.value || e.Source != tc.source || len(e.Synonyms) != tc.synonyms {
			t.Errorf("%s: %+v, want %s from %d with %d synonyms", tc.key, e, tc.value, tc.source, tc.synonyms)
		}
	}
	p, _ := n.LocalPartition("orders", 1)
	if cfg := p.log.Config(); cfg.SegmentAge != time.Minute || cfg.RetentionAge != 2*time.Hour {
		t.Fatalf("log config %+v: want segment.ms and the node's retention applied", cfg)
	}
	// Incremental: append to a list, delete one, set one.
	changes := []netio.ConfigChange{
		{Name: "cleanup.policy", Op: netio.ConfigAppend, Value: new("delete")},
		{Name: "segment.ms", Op: netio.ConfigDelete},
		{Name: "max.message.bytes", Op: netio.ConfigSet, Value: new("2000")},
	}
	topic := netio.ConfigResource{Type: netio.ConfigResourceTopic, Name: "orders"}
	if err := n.AlterConfigs(ctx, topic, changes, true, false); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cleanup.policy": "compact,delete", "max.message.bytes": "2000"}
	if overrides, _, _ := n.TopicConfigs("orders"); !maps.Equal(overrides, want) {
		t.Fatalf("overrides %v, want %v", overrides, want)
	}
	if p.limits.Load().maxMessageBytes != 2000 || p.log.Config().SegmentAge != logstore.DefaultConfig().SegmentAge {
		t.Fatalf("limits %+v, log %+v: the alter did not reach the partition", p.limits.Load(), p.log.Config())
	}
	for _, bad := range []struct {
		changes     []netio.ConfigChange
		incremental bool
		want        *kerr.Error
	}{
		{[]netio.ConfigChange{{Name: "retention.ms", Op: netio.ConfigAppend, Value: new("5")}}, true, kerr.InvalidConfig},
		{[]netio.ConfigChange{{Name: "no.such.config", Op: netio.ConfigSet, Value: new("5")}}, false, kerr.InvalidConfig},
		{[]netio.ConfigChange{{Name: "min.compaction.lag.ms", Op: netio.ConfigSet, Value: new("10")},
			{Name: "max.compaction.lag.ms", Op: netio.ConfigSet, Value: new("5")}}, false, kerr.InvalidConfig},
		{[]netio.ConfigChange{{Name: "remote.storage.enable", Op: netio.ConfigSet, Value: new("true")}}, false, kerr.InvalidConfig},
	} {
		err := n.AlterConfigs(ctx, topic, bad.changes, bad.incremental, false)
		wantCode(t, bad.changes[0].Name, err, bad.want)
		if !strings.Contains(err.Error(), bad.changes[len(bad.changes)-1].Name) && !strings.Contains(err.Error(), "Tiered") {
			t.Errorf("%v does not name the key", err)
		}
	}
	// Not incremental: replaces every override; validate only changes nothing.
	replace := []netio.ConfigChange{{Name: "retention.bytes", Op: netio.ConfigSet, Value: new("4096")}}
	if err := n.AlterConfigs(ctx, topic, replace, false, true); err != nil {
		t.Fatal(err)
	}
	if overrides, _, _ := n.TopicConfigs("orders"); !maps.Equal(overrides, want) {
		t.Fatalf("validate only changed the overrides to %v", overrides)
	}
	if err := n.AlterConfigs(ctx, topic, replace, false, false); err != nil {
		t.Fatal(err)
	}
	if err := n.SetTopicConfigs("orders", map[string]string{"retention.ms": "3600000", "cleanup.policy": "compact"}, "mirror m"); err != nil {
		t.Fatal(err)
	}
	wantAfter := map[string]string{"retention.ms": "3600000", "cleanup.policy": "compact"}
	// Reopen: a clean close, and a crash (the in-memory file system keeps
	// only what was synced).
	for _, crash := range []bool{false, true} {
		if crash {
			fs.CrashClean()
			n.Close() // its handles fail after the crash: only its goroutines matter
		} else if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		n = openConfigNode(t, fs, map[string]string{"log.retention.hours": "2"})
		overrides, origin, err := n.TopicConfigs("orders")
		if err != nil || !maps.Equal(overrides, wantAfter) || origin != "mirror m" {
			t.Fatalf("crash %v: reopened with %v from %q (%v), want %v from the mirror", crash, overrides, origin, err, wantAfter)
		}
		p, _ := n.LocalPartition("orders", 0)
		if p.log.Config().RetentionAge != time.Hour {
			t.Fatalf("crash %v: retention %v after reopening, want the stored 1h", crash, p.log.Config().RetentionAge)
		}
	}
	defer n.Close()
	// Deleting the topic removes its configs; a topic of the same name
	// starts from the defaults.
	if err := n.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := logstore.ReadFile(fs, path.Join("/data", topicConfigsDir, "orders")); ok {
		t.Fatal("the configs file outlived its topic")
	}
}

// A configs file whose topic never got its partitions (a crash between
// the two) is removed at open.
func TestTopicConfigsLeftByACrash(t *testing.T) {
	fs := vfs.NewMem()
	n := openConfigNode(t, fs, nil)
	stored := storedTopicConfigs{id: rb.NewTopicID(), overrides: map[string]string{"retention.ms": "1"}}
	if err := n.saveTopicConfigs("ghost", stored); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openConfigNode(t, fs, nil)
	defer n.Close()
	if _, ok, _ := logstore.ReadFile(fs, path.Join("/data", topicConfigsDir, "ghost")); ok {
		t.Fatal("the leftover configs file was kept")
	}
}

func TestTopicConfigsFileRoundTrip(t *testing.T) {
	in := storedTopicConfigs{id: rb.NewTopicID(), origin: "mirror \"a\"", overrides: map[string]string{"cleanup.policy": "compact,delete", "x": "a b\nc"}}
	out, err := decodeTopicConfigs(encodeTopicConfigs(in))
	if err != nil || out.id != in.id || out.origin != in.origin || !maps.Equal(out.overrides, in.overrides) {
		t.Fatalf("%+v, %v; want %+v", out, err, in)
	}
	for _, bad := range []string{"", "2\ntopic.id x\norigin \"\"\n", "1\ntopic.id " + in.id.String() + "\norigin \"\"\nconfig a\n"} {
		if _, err := decodeTopicConfigs([]byte(bad)); !errors.Is(err, errTopicConfigsFile) {
			t.Errorf("%q: %v, want errTopicConfigsFile", bad, err)
		}
	}
}

func TestServerProperties(t *testing.T) {
	var cfg Config
	cfg.Log = logstore.DefaultConfig()
	err := cfg.ApplyServerProperties(map[string]string{"log.retention.minutes": "30", "log.retention.hours": "5", "log.segment.bytes": "2097152",
		"num.partitions": "3", "message.max.bytes": "5000", "offsets.retention.minutes": "60", "transaction.max.timeout.ms": "1000",
		"auto.create.topics.enable": "false", "log.retention.check.interval.ms": "100"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Log.RetentionAge != 30*time.Minute || cfg.Log.SegmentBytes != 2<<20 || cfg.NumPartitions != 3 || cfg.MessageMaxBytes != 5000 ||
		cfg.OffsetsRetention != time.Hour || cfg.Transactions.MaxTimeout != time.Second || !cfg.AutoCreateTopicsDisable ||
		cfg.RetentionCheckInterval != 100*time.Millisecond {
		t.Fatalf("%+v", cfg)
	}
	for _, tc := range []struct{ key, value, says string }{
		{"no.such.key", "1", "no.such.key is not a Kafka broker config"},
		{"broker.id", "1", "broker.id is not taken by mirrord"},
		{"num.replica.fetchers", "1", "num.replica.fetchers is a Kafka broker config mirrord does not take"},
		{"log.segment.bytes", "100", "Value must be at least 1048576"},
	} {
		var cfg Config
		cfg.Log = logstore.DefaultConfig()
		if err := cfg.ApplyServerProperties(map[string]string{tc.key: tc.value}); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s=%s: %v, want an error saying %q", tc.key, tc.value, err, tc.says)
		}
	}
}

// A read-only (mirror) topic refuses a client's alter with its writer's
// refusal; SetTopicConfigs, the writer's call, goes through.
func TestTopicConfigsOfAReadOnlyTopic(t *testing.T) {
	n := openConfigNode(t, vfs.NewMem(), nil)
	defer n.Close()
	ctx := context.Background()
	if _, err := n.CreateTopic(ctx, "mirrored", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	p, _ := n.LocalPartition("mirrored", 0)
	p.SetReadOnly(func(action string) error {
		return netio.Errorf(kerr.PolicyViolation, "topic mirrored is a mirror topic of mirror m (%s refused)", action)
	})
	topic := netio.ConfigResource{Type: netio.ConfigResourceTopic, Name: "mirrored"}
	for _, incremental := range []bool{false, true} {
		err := n.AlterConfigs(ctx, topic, []netio.ConfigChange{{Name: "retention.ms", Op: netio.ConfigSet, Value: new("1000")}}, incremental, false)
		wantCode(t, "alter a mirror topic", err, kerr.PolicyViolation)
		if !strings.Contains(err.Error(), "mirror m") {
			t.Fatalf("%v does not name the mirror", err)
		}
	}
	if err := n.SetTopicConfigs("mirrored", map[string]string{"retention.ms": "1000"}, "mirror m"); err != nil {
		t.Fatal(err)
	}
	if e := describe(t, n, "mirrored")["retention.ms"]; *e.Value != "1000" || e.Source != netio.ConfigSourceTopic {
		t.Fatalf("retention.ms %+v after the writer's set", e)
	}
	for _, name := range []string{"", "1"} {
		broker := netio.ConfigResource{Type: netio.ConfigResourceBroker, Name: name}
		err := n.AlterConfigs(ctx, broker, []netio.ConfigChange{{Name: "log.retention.ms", Op: netio.ConfigSet, Value: new("1")}}, true, false)
		wantCode(t, "alter the broker", err, kerr.InvalidRequest)
	}
}
