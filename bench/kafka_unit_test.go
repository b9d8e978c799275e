package bench

// Unit tests of the real-Kafka scenarios' pieces that need no Java: the
// measurement helpers, the variants, the generated values and
// MirrorMaker 2's configuration.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
)

func TestPeakRSSOf(t *testing.T) {
	rss, err := peakRSSOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss < 1<<20 || rss > 64<<30 {
		t.Fatalf("peak RSS of this test process %d bytes: not plausible", rss)
	}
	peak, err := peakRSSOfAll(os.Getpid(), os.Getpid())
	if err != nil || peak < rss {
		t.Fatalf("peakRSSOfAll = %d, %v; peakRSSOf %d", peak, err, rss)
	}
	if _, err := peakRSSOf(-1); err == nil {
		t.Fatal("peakRSSOf(-1): no error")
	}
	if _, err := cpuOfAll(os.Getpid(), 0); err == nil {
		t.Fatal("cpuOfAll with pid 0: no error")
	}
}

func TestKafkaVariants(t *testing.T) {
	tests := []struct {
		mode     string
		variants []string
	}{
		{"smoke", []string{"1 partition, lz4"}},
		{"quick", []string{"1 partition, lz4"}},
		{"full", []string{"1 partition, lz4", "64 partitions, lz4"}},
	}
	for _, test := range tests {
		var got []string
		topics := map[string]bool{}
		for _, v := range kafkaVariants(benchModes[test.mode]) {
			got = append(got, v.String())
			topics[v.topic()] = true
		}
		if strings.Join(got, "|") != strings.Join(test.variants, "|") {
			t.Errorf("%s: variants %q, want %q", test.mode, got, test.variants)
		}
		if len(topics) != len(got) {
			t.Errorf("%s: topics %v not distinct", test.mode, topics)
		}
	}
}

// TestValueSource pins the generated values: 1 KiB, distinct, the same in
// every run, half of them text.
func TestValueSource(t *testing.T) {
	a, b := newValueSource(), newValueSource()
	seen := map[string]bool{}
	for i := range 100 {
		value := a.next()
		if len(value) != kafkaRecordBytes {
			t.Fatalf("value %d: %d bytes", i, len(value))
		}
		if !bytes.Equal(value, b.next()) {
			t.Fatalf("value %d differs between two sources", i)
		}
		if seen[string(value)] {
			t.Fatalf("value %d repeats", i)
		}
		seen[string(value)] = true
		if !bytes.Contains(value[kafkaRecordBytes/2:], []byte("byte for byte")) {
			t.Fatalf("value %d: no text in its second half", i)
		}
	}
}

func TestMirrorMakerProperties(t *testing.T) {
	props := kafkatest.MirrorMakerProperties("127.0.0.1:1", "127.0.0.1:2", "bench-1", map[string]string{"tasks.max": "4", "extra.key": "x"})
	parsed := map[string]string{}
	for line := range strings.Lines(props) {
		key, value, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		if !ok {
			t.Fatalf("line %q: no =", line)
		}
		if _, dup := parsed[key]; dup {
			t.Fatalf("key %s twice", key)
		}
		parsed[key] = value
	}
	want := map[string]string{
		"clusters":                          "A, B",
		"A.bootstrap.servers":               "127.0.0.1:1",
		"B.bootstrap.servers":               "127.0.0.1:2",
		"A->B.enabled":                      "true",
		"A->B.topics":                       "bench-1",
		"B->A.enabled":                      "false",
		"replication.policy.class":          "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
		"emit.checkpoints.interval.seconds": "3600",
		"emit.heartbeats.enabled":           "false",
		"replication.factor":                "1",
		"B.producer.compression.type":       "lz4",
		"config.storage.replication.factor": "1",
		"tasks.max":                         "4", // extra overrides
		"extra.key":                         "x", // extra adds
	}
	for key, value := range want {
		if parsed[key] != value {
			t.Errorf("%s = %q, want %q", key, parsed[key], value)
		}
	}
}

func TestStartMirrorMakerNotInstalled(t *testing.T) {
	libs := t.TempDir() // no jars at all
	_, err := kafkatest.StartMirrorMaker(context.Background(), libs, t.TempDir(), "127.0.0.1:1", "127.0.0.1:2", "bench", nil)
	if !errors.Is(err, kafkatest.ErrNotInstalled) || !strings.Contains(err.Error(), "connect-mirror-"+kafkatest.MirrorMakerVersion+".jar") {
		t.Fatalf("StartMirrorMaker without jars: %v, want ErrNotInstalled naming connect-mirror", err)
	}
}

func TestCancelWhenClosed(t *testing.T) {
	done := make(chan struct{})
	cause := errors.New("exited")
	ctx, stop := cancelWhenClosed(context.Background(), done, cause)
	defer stop()
	if ctx.Err() != nil {
		t.Fatal("canceled before done closed")
	}
	close(done)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not canceled 10 s after done closed")
	}
	if !errors.Is(context.Cause(ctx), cause) {
		t.Fatalf("cause %v, want %v", context.Cause(ctx), cause)
	}

	ctx, stop = cancelWhenClosed(context.Background(), make(chan struct{}), cause)
	stop()
	if !errors.Is(ctx.Err(), context.Canceled) || errors.Is(context.Cause(ctx), cause) {
		t.Fatalf("after stop: err %v, cause %v", ctx.Err(), context.Cause(ctx))
	}
}
