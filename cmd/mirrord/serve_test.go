package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord"
	"github.com/twmb/franz-go/pkg/kgo"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// The HTTP listener (mirrord.Node.HTTPHandler) of a node that mirrors
// another: /metrics shows the mirror's series and the runtime's, the
// console's text view lists the partitions with their state and lag, its
// page and model are served, /healthz answers ok.
func TestHTTPListener(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	source, err := startDemoNode(ctx, filepath.Join(base, "source"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer source.stop()
	target, err := startDemoNode(ctx, filepath.Join(base, "target"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer target.stop()
	if err := source.node.CreateTopic(ctx, "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(source.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for p := range int32(2) {
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: p, Value: []byte("hello")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	config := map[string]string{"bootstrap.servers": source.addr, "mirror.metadata.refresh.interval.ms": "200", "fetch.wait.max.ms": "100"}
	if err := target.node.Admin().CreateMirror(ctx, "m", config); err != nil {
		t.Fatal(err)
	}
	if _, err := target.node.Admin().SetTopicsDesiredState(ctx, "m", mirrord.StartMirroring, mirrord.TopicSelection{Names: []string{"orders"}}); err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(target.node.HTTPHandler())
	defer server.Close()

	// Each partition holds one batch: caught up, its row reads
	// "orders  P  MIRRORING  1  AGE  1  EPOCH  EPOCH  0  0.000  BYTES  RATE".
	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		code, page := httpGet(t, server.URL+"/status.txt")
		if code != http.StatusOK {
			t.Fatalf("status page: %d %s", code, page)
		}
		if statusCaughtUp(page, 2) {
			if !strings.Contains(page, "mirror m: source "+source.addr) || !strings.Contains(page, "2 partitions: 2 MIRRORING") {
				t.Fatalf("status page:\n%s", page)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status page never showed the mirror caught up:\n%s", page)
		}
		<-poll.C
	}

	// The page shows the log; the counters move just after the append
	// that the page saw, so /metrics is polled for what it must show.
	wants := []string{
		`mirrord_mirror_lag_records{mirror="m",partition="0",topic="orders"} 0`,
		`mirrord_mirror_lag_seconds{mirror="m",partition="1",topic="orders"} 0`,
		`mirrord_mirror_batches_total{mirror="m",partition="1",topic="orders"} 1`,
		`mirrord_mirror_partitions{mirror="m",state="MIRRORING"} 2`,
		`mirrord_mirror_partitions{mirror="m",state="FAILED"} 0`,
		`mirrord_mirror_source_reachable{mirror="m"} 1`,
		`mirrord_mirror_source_unreachable_seconds{mirror="m"} 0`,
		`mirrord_mirror_source_high_watermark_age_seconds{mirror="m",partition="0",topic="orders"} `,
		`# TYPE mirrord_mirror_fetch_latency_seconds histogram`,
		`# TYPE mirrord_mirror_bytes_total counter`,
		`go_goroutines `,
	}
	for {
		code, metrics := httpGet(t, server.URL+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
		var missing []string
		for _, want := range wants {
			if !strings.Contains(metrics, want) {
				missing = append(missing, want)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %q", missing)
		}
		<-poll.C
	}
	if code, body := httpGet(t, server.URL+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, page := httpGet(t, server.URL+"/"); code != http.StatusOK || !strings.Contains(page, `<script src="console.js">`) {
		t.Errorf("/: %d, want the console's page:\n%.300s", code, page)
	}
	if code, body := httpGet(t, server.URL+"/status.json"); code != http.StatusOK || !strings.Contains(body, `"name":"m"`) {
		t.Errorf("/status.json: %d %.300s", code, body)
	}
	if code, _ := httpGet(t, server.URL+"/nothing"); code != http.StatusNotFound {
		t.Errorf("/nothing: %d, want 404", code)
	}
}

// statusCaughtUp reports whether the status page shows partitions rows of
// orders, each MIRRORING with one record and no lag (exact: not ">=0").
func statusCaughtUp(page string, partitions int) bool {
	rows := 0
	for _, line := range strings.Split(page, "\n") {
		fields := strings.Fields(line)
		// TOPIC PARTITION STATE SOURCE-HW HW-AGE LOG-END EPOCH SOURCE-EPOCH
		// LAG-RECORDS LAG-SECONDS BYTES BYTES/S
		if len(fields) == 12 && fields[0] == "orders" && fields[2] == "MIRRORING" &&
			fields[3] == "1" && fields[5] == "1" && fields[8] == "0" && fields[9] == "0.000" {
			rows++
		}
	}
	return rows == partitions
}
