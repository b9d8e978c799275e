package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	deploySamplesDeadline = 3 * time.Minute  // beside another test (t.Parallel) on a loaded machine
	deployMetricsWait     = 90 * time.Second // the syncs' first rounds (ACLs, configs, transactional IDs, groups)
)

// TestDeploySamples: the samples of deploy/ work as shipped. A node
// serves with deploy/server.properties (a copy with the data directory
// and reserve made fit for a test, and its commented authorizer lines
// turned on, the test's PLAINTEXT client a super user); a mirror made from deploy/mirror.properties (its
// bootstrap.servers the source node's) copies a topic; and every metric
// the Grafana dashboard and the alert rules name is in the node's
// /metrics, so no panel is empty and no alert silent for want of a series.
func TestDeploySamples(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), deploySamplesDeadline)
	defer cancel()
	wanted := deployMetricNames(t)
	t.Logf("the dashboard and the alert rules name %d metrics", len(wanted))

	// The source allows everything without ACLs, so the mirror's ACL sync
	// can describe them, and has a group with committed offsets to sync.
	source := startServer(t, "--authorizer-class-name", standardAuthorizer, "--allow-everyone-if-no-acl-found")
	topics := map[string]int32{"orders": 2}
	createTopics(ctx, t, source.addr, topics)
	tps := topicPartitions(topics)
	client := newClient(t, source.addr)
	var records []*kgo.Record
	for i := range 100 {
		records = append(records, &kgo.Record{Topic: "orders", Partition: int32(i % 2), Value: fmt.Appendf(nil, "record %d", i)})
	}
	if err := produceAll(ctx, client, records, newLedger()); err != nil {
		t.Fatal(err)
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 10, LeaderEpoch: -1})
	if committed, err := kadm.NewClient(client).CommitOffsets(ctx, "billing", offsets); err == nil && committed.Error() != nil || err != nil {
		t.Fatalf("commit offsets of group billing on the source: %v %v", err, committed.Error())
	}

	server := sampleCopy(t, "server.properties", map[string]string{
		"log.dirs=/var/lib/mirrord":            "log.dirs=" + filepath.Join(t.TempDir(), "unused"), // --data-dir wins
		"log.dir.reserve.bytes=1073741824":     "log.dir.reserve.bytes=1048576",                    // a test machine's disk
		"#authorizer.class.name=":              "authorizer.class.name=",
		"#super.users=User:admin":              "super.users=User:admin;User:ANONYMOUS", // the test's PLAINTEXT CLI
		"allow.everyone.if.no.acl.found=false": "allow.everyone.if.no.acl.found=true",
	})
	httpAddr := freeAddress(t)
	target := startServer(t, "--config", server, "--http-listen", httpAddr)
	mirrorConfig := sampleCopy(t, "mirror.properties", map[string]string{
		"bootstrap.servers=kafka-1.source.example.com:9092,kafka-2.source.example.com:9092": "bootstrap.servers=" + source.addr,
		// the ACL sync's first round comes after one interval
		"mirror.acls.sync.interval.ms=60000": "mirror.acls.sync.interval.ms=1000",
	})
	runMirrorsOK(ctx, t, target.addr, "--create", "--mirror", "m", "--mirror-config", mirrorConfig)
	runMirrorsOK(ctx, t, target.addr, "--start", "--mirror", "m", "--topics", "orders")
	started := time.Now()
	waitMirrorCaughtUp(ctx, t, source.addr, target.addr, tps)
	t.Logf("the mirror caught up in %v", time.Since(started).Round(time.Millisecond))

	var exported map[string]bool
	last := ""
	reason := pollUntil(ctx, deployMetricsWait, func(ctx context.Context) string {
		var err error
		if exported, err = scrapeMetricNames(ctx, "http://"+httpAddr+"/metrics"); err != nil {
			return err.Error()
		}
		var missing []string
		for _, name := range wanted {
			if !exported[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			if reason := "not exported: " + strings.Join(missing, ", "); reason != last {
				t.Logf("%v: %s", time.Since(started).Round(time.Millisecond), reason)
				last = reason
			}
			return last
		}
		return ""
	})
	if reason != "" {
		failWithDescribe(ctx, t, target.addr, "after %v, /metrics lacks metrics the dashboard or the alert rules use: %s", deployMetricsWait, reason)
	}
	t.Logf("all %d metrics exported (of %d mirrord_* names in /metrics)", len(wanted), len(exported))
}

// sampleCopy writes a copy of deploy/NAME with each replacement made; a
// replacement that finds nothing fails the test (the sample changed).
func sampleCopy(t *testing.T, name string, replacements map[string]string) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "deploy", name))
	if err != nil {
		t.Fatal(err)
	}
	copied := string(text)
	for old, replacement := range replacements {
		if !strings.Contains(copied, old) {
			t.Fatalf("deploy/%s has no %q", name, old)
		}
		copied = strings.ReplaceAll(copied, old, replacement)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(copied), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// metricName is a mirrord metric in a PromQL expression (a histogram's
// _bucket, _sum and _count series included, as /metrics names them).
var metricName = regexp.MustCompile(`\bmirrord_[a-z0-9_]+`)

// deployMetricNames are the metrics the expressions of the Grafana
// dashboard (its panels' targets and its variables' queries) and of the
// alert rules (their expr lines) name, sorted.
func deployMetricNames(t *testing.T) []string {
	t.Helper()
	var exprs []string
	text, err := os.ReadFile(filepath.Join("..", "deploy", "grafana", "mirrord.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dashboard any
	if err := json.Unmarshal(text, &dashboard); err != nil {
		t.Fatalf("deploy/grafana/mirrord.json: %v", err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for key, value := range v {
				if s, ok := value.(string); ok && (key == "expr" || key == "definition") {
					exprs = append(exprs, s)
				}
				walk(value)
			}
		case []any:
			for _, item := range v {
				walk(item)
			}
		}
	}
	walk(dashboard)
	rules, err := os.ReadFile(filepath.Join("..", "deploy", "prometheus", "mirrord-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(rules), "\n") {
		if expr, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:"); ok {
			exprs = append(exprs, expr)
		}
	}
	set := map[string]bool{}
	for _, expr := range exprs {
		for _, name := range metricName.FindAllString(expr, -1) {
			set[name] = true
		}
	}
	if len(set) < 20 {
		t.Fatalf("%d metric names in %d expressions of the dashboard and the rules: the extraction is broken", len(set), len(exprs))
	}
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// scrapeMetricNames reads /metrics and returns the names of its samples.
func scrapeMetricNames(ctx context.Context, url string) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	names := map[string]bool{}
	scanner := bufio.NewScanner(io.LimitReader(resp.Body, 64<<20))
	scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if end := strings.IndexAny(line, "{ "); end > 0 {
			names[line[:end]] = true
		}
	}
	return names, scanner.Err()
}
