package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mirrord/mirrord/mirrordtest"
)

const (
	deploySamplesDeadline = 3 * time.Minute  // beside another test (t.Parallel) on a loaded machine
	deployMetricsWait     = 90 * time.Second // the syncs' first rounds (ACLs, configs, transactional IDs, groups)
)

// TestDeploySamples: the samples of deploy/ work as shipped. A node
// serves with deploy/server.properties (a copy with the data directory
// and reserve made fit for a test, and its commented authorizer lines
// turned on, the test's PLAINTEXT client a super user); a mirror made
// from deploy/mirror.properties (its bootstrap.servers the source node's,
// its ACL sync every second) copies a topic; and every metric the Grafana
// dashboard and the alert rules name is in the node's /metrics, with each
// label value they select by equality (state="FAILED"), so no panel is
// empty and no alert silent for want of a series.
func TestDeploySamples(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), deploySamplesDeadline)
	defer cancel()
	exprs := deployExpressions(t)
	wanted := append(deployMetricNames(t, exprs), deployLabelMatchers(exprs)...)
	t.Logf("the dashboard and the alert rules name %d metrics and label values", len(wanted))

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

	var exported map[string]float64
	last := ""
	reason := pollUntil(ctx, deployMetricsWait, func(ctx context.Context) string {
		var err error
		if exported, err = scrapeMetrics(ctx, "http://"+httpAddr+"/metrics"); err != nil {
			return err.Error()
		}
		var missing []string
		for _, name := range wanted {
			if _, ok := exported[name]; !ok {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			if reason := "not in /metrics: " + strings.Join(missing, ", "); reason != last {
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
	t.Logf("all %d exported (of %d mirrord_* names and label values in /metrics)", len(wanted), len(exported))
}

// TestDeploySamplesCluster: the cluster block of deploy/server.properties,
// uncommented with its values as shipped but etcd's address, each node's
// ID and rack, joins two nodes to one etcd; a topic made with the sample's
// default.replication.factor (3, capped by the two live nodes) gets both
// nodes in every ISR; and the nodes' /metrics are what the cluster alert
// rules take for a healthy cluster: each node sees both, one controller
// between them, no partition offline or under-replicated.
func TestDeploySamplesCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), deploySamplesDeadline)
	defer cancel()
	etcd := mirrordtest.StartEtcd(t)
	c := &testClusterNodes{t: t, etcd: etcd}
	var urls []string
	for id := 1; id <= 2; id++ {
		config := sampleCopy(t, "server.properties", map[string]string{
			"log.dirs=/var/lib/mirrord":        "log.dirs=" + filepath.Join(t.TempDir(), "unused"), // --data-dir wins
			"log.dir.reserve.bytes=1073741824": "log.dir.reserve.bytes=1048576",                    // a test machine's disk
			"#etcd.endpoints=etcd-1.example.com:2379,etcd-2.example.com:2379,etcd-3.example.com:2379": "etcd.endpoints=" + strings.Join(etcd.Endpoints(), ","),
			"#node.id=1":                   fmt.Sprintf("node.id=%d", id),
			"#node.lease.ms=":              "node.lease.ms=",
			"#default.replication.factor=": "default.replication.factor=",
			"#min.insync.replicas=":        "min.insync.replicas=",
			"#broker.rack=rack-a":          fmt.Sprintf("broker.rack=rack-%d", id),
			"#replica.lag.time.max.ms=":    "replica.lag.time.max.ms=",
		})
		httpAddr := freeAddress(t)
		c.nodes = append(c.nodes, startServer(t, "--config", config, "--http-listen", httpAddr))
		urls = append(urls, "http://"+httpAddr+"/metrics")
	}
	client := newClient(t, c.seeds())
	created, err := kadm.NewClient(client).CreateTopic(ctx, 2, -1, nil, "orders")
	if err == nil {
		err = created.Err
	}
	if err != nil {
		t.Fatalf("create topic orders with the default replication factor: %v", err)
	}
	c.waitPartitions(ctx, 0, "orders", "two replicas in the ISR of each partition", deployMetricsWait, func(ps kadm.PartitionDetails) bool {
		for _, p := range ps {
			if len(p.Replicas) != 2 {
				return false
			}
		}
		return fullISR(ps)
	})
	reason := pollUntil(ctx, deployMetricsWait, func(ctx context.Context) string {
		controllers := 0.0
		for i, url := range urls {
			m, err := scrapeMetrics(ctx, url)
			if err != nil {
				return err.Error()
			}
			if live := m["mirrord_cluster_live_nodes"]; live != 2 {
				return fmt.Sprintf("node %d: mirrord_cluster_live_nodes %v, want 2", i+1, live)
			}
			for _, name := range []string{"mirrord_partitions_offline", "mirrord_partitions_under_replicated"} {
				if v, ok := m[name]; !ok || v != 0 {
					return fmt.Sprintf("node %d: %s %v (exported: %v), want 0", i+1, name, v, ok)
				}
			}
			controllers += m["mirrord_cluster_controller"]
		}
		if controllers != 1 {
			return fmt.Sprintf("mirrord_cluster_controller adds up to %v over the nodes, want 1", controllers)
		}
		return ""
	})
	if reason != "" {
		t.Fatalf("after %v, the cluster is not healthy by its /metrics: %s", deployMetricsWait, reason)
	}
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

// deployExpressions are the PromQL expressions of the Grafana dashboard
// (its panels' targets and its variables' queries) and of the alert rules
// (their expr lines).
func deployExpressions(t *testing.T) []string {
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
	return exprs
}

// deployMetricNames are the metrics exprs name, sorted.
func deployMetricNames(t *testing.T, exprs []string) []string {
	t.Helper()
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

// selector is a metric's label matchers in an expression; labelEquals
// is one matcher of a literal value (`state="FAILED"`), not of a
// regular expression or a Grafana variable.
var (
	selector    = regexp.MustCompile(`\b(mirrord_[a-z0-9_]+)\{([^}]*)\}`)
	labelEquals = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"$]*)"`)
	labelValue  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// deployLabelMatchers are the label values exprs select by equality, as
// `metric{label="value"}`, sorted: a live node must have a series with
// each (a state or result name the node does not use selects nothing).
func deployLabelMatchers(exprs []string) []string {
	set := map[string]bool{}
	for _, expr := range exprs {
		for _, sel := range selector.FindAllStringSubmatch(expr, -1) {
			for _, m := range labelEquals.FindAllStringSubmatch(sel[2], -1) {
				set[fmt.Sprintf("%s{%s=%q}", sel[1], m[1], m[2])] = true
			}
		}
	}
	matchers := make([]string, 0, len(set))
	for m := range set {
		matchers = append(matchers, m)
	}
	slices.Sort(matchers)
	return matchers
}

// scrapeMetrics reads /metrics and returns the names of its samples and,
// for each label of each sample, `name{label="value"}`, each with the
// value of its last sample (NaN where it does not parse).
func scrapeMetrics(ctx context.Context, url string) (map[string]float64, error) {
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
	names := map[string]float64{}
	scanner := bufio.NewScanner(io.LimitReader(resp.Body, 64<<20))
	scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end <= 0 {
			continue
		}
		name := line[:end]
		labels, sample := "", line[end+1:]
		if line[end] == '{' {
			labels, sample, _ = strings.Cut(sample, "} ")
		}
		value, err := strconv.ParseFloat(strings.Fields(sample + " NaN")[0], 64)
		if err != nil {
			value = math.NaN()
		}
		names[name] = value
		for _, m := range labelValue.FindAllStringSubmatch(labels, -1) {
			names[fmt.Sprintf("%s{%s=%q}", name, m[1], m[2])] = value
		}
	}
	return names, scanner.Err()
}
