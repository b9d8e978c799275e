package main

// Tests of `mirrord mirrors`: mirrorsCommand against a netio server whose
// backend administers mirrors with cliAdmin, a fake that records its calls
// and answers what the test set.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord"
	"github.com/mirrord/mirrord/netio"
	"github.com/twmb/franz-go/pkg/kerr"
)

type cliAdmin struct {
	mu           sync.Mutex
	calls        []string
	configs      map[string]map[string]string
	listing      []mirrord.MirrorListing
	descriptions []mirrord.MirrorDescription
	topicResults []mirrord.TopicResult // nil: every topic named succeeds
	err          error                 // every call's error
}

func (a *cliAdmin) record(format string, args ...any) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, fmt.Sprintf(format, args...))
	return a.err
}

func (a *cliAdmin) takeCalls() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := strings.Join(a.calls, " ")
	a.calls = nil
	return out
}

func (a *cliAdmin) CreateMirror(_ context.Context, name string, config map[string]string) error {
	if err := a.record("create(%s)", name); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.configs[name]; ok {
		return fmt.Errorf("mirror %q exists: %w", name, kerr.DuplicateResource)
	}
	a.configs[name] = config
	return nil
}

func (a *cliAdmin) DeleteMirror(_ context.Context, name string) error {
	return a.record("delete(%s)", name)
}

func (a *cliAdmin) SetTopicsDesiredState(_ context.Context, mirror string, change mirrord.TopicsChange, topics mirrord.TopicSelection) ([]mirrord.TopicResult, error) {
	if err := a.record("%s(%s, names %v, include %v, exclude %v)", change, mirror, topics.Names, topics.Include, topics.Exclude); err != nil {
		return nil, err
	}
	if a.topicResults != nil {
		return a.topicResults, nil
	}
	var results []mirrord.TopicResult
	for _, name := range topics.Names {
		results = append(results, mirrord.TopicResult{Topic: name})
	}
	return results, nil
}

func (a *cliAdmin) ListMirrors(context.Context) ([]mirrord.MirrorListing, error) {
	return a.listing, a.record("list")
}

func (a *cliAdmin) DescribeMirrors(_ context.Context, names []string, failedOnly bool) ([]mirrord.MirrorDescription, error) {
	if err := a.record("describe(%q, %v)", names, failedOnly); err != nil {
		return nil, err
	}
	var out []mirrord.MirrorDescription
	for _, d := range a.descriptions {
		if names != nil && !strings.Contains(strings.Join(names, ","), d.Name) {
			continue
		}
		kept := d
		kept.Partitions = nil
		for _, p := range d.Partitions {
			if !failedOnly || p.State == "FAILED" {
				kept.Partitions = append(kept.Partitions, p)
			}
		}
		out = append(out, kept)
	}
	if names != nil && len(out) == 0 {
		out = append(out, mirrord.MirrorDescription{Name: names[0], Err: fmt.Errorf("mirror %q: %w", names[0], kerr.ResourceNotFound)})
	}
	return out, nil
}

func (a *cliAdmin) LastMirrorEpochs(context.Context, string, []netio.TopicPartitions) ([]netio.LastMirrorEpoch, error) {
	return nil, a.record("lastMirrorEpochs")
}

// cliBackend serves only what the mirror admin RPCs need: the rest of
// netio.Backend is nil and never called.
type cliBackend struct {
	netio.Backend
	admin *cliAdmin
}

func (b cliBackend) Mirrors() netio.MirrorAdmin { return b.admin }

// Cluster and Topics answer the Metadata the admin client asks before it
// sends a describe to a cluster's partition leaders by node ID: one node,
// no topics (the fixtures' leaders are not known, so the rows stay).
func (b cliBackend) Cluster() netio.ClusterInfo {
	return netio.ClusterInfo{ClusterID: "cli-test", NodeID: 1}
}
func (b cliBackend) Topics() []netio.TopicInfo { return nil }

// serveCLI serves backend on loopback until the test ends and returns the
// address.
func serveCLI(t *testing.T, backend netio.Backend) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- netio.NewServer(netio.Config{Backend: backend}).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// newCLI starts a server over a fresh cliAdmin and returns a runner of
// `mirrord mirrors --bootstrap-server ADDR args...`.
func newCLI(t *testing.T) (*cliAdmin, func(args ...string) (string, error)) {
	admin := &cliAdmin{configs: map[string]map[string]string{}}
	addr := serveCLI(t, cliBackend{admin: admin})
	return admin, func(args ...string) (string, error) {
		var out bytes.Buffer
		err := mirrorsCommand(context.Background(), append([]string{"--bootstrap-server", addr}, args...), &out)
		return out.String(), err
	}
}

func writeMirrorConfig(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMirrorsCreate(t *testing.T) {
	admin, run := newCLI(t)
	config := writeMirrorConfig(t, "m.properties", "# the source\nbootstrap.servers = src1:9092,\\\n    src2:9092\ntopics.exclude: tmp-.*\nfetch.wait.max.ms=500\n")
	out, err := run("--create", "--mirror", "m", "--mirror-config", config)
	if err != nil || out != "Created mirror m.\n" {
		t.Fatalf("create: %q, %v", out, err)
	}
	want := map[string]string{"bootstrap.servers": "src1:9092,src2:9092", "topics.exclude": "tmp-.*", "fetch.wait.max.ms": "500"}
	if !reflect.DeepEqual(admin.configs["m"], want) || admin.takeCalls() != "create(m)" {
		t.Errorf("config %q", admin.configs["m"])
	}
	out, err = run("--delete", "--mirror", "m")
	if err != nil || out != "Deleted mirror m.\n" || admin.takeCalls() != "delete(m)" {
		t.Errorf("delete: %q, %v", out, err)
	}
}

func TestMirrorsTopicActions(t *testing.T) {
	admin, run := newCLI(t)
	for _, tc := range []struct {
		args      []string
		wantCall  string
		wantLines string
	}{
		{[]string{"--start", "--mirror", "m", "--topics", "orders, pay-.*,my.topic", "--exclude", "tmp-.*,x"},
			"start(m, names [orders my.topic], include [pay-.*], exclude [tmp-.* x])",
			"Mirror m, topic orders: start requested\nMirror m, topic my.topic: start requested\n"},
		{[]string{"--stop", "--mirror", "m", "--topics", ".*"}, "stop(m, names [], include [.*], exclude [])", "Mirror m: no topic matched (stop).\n"},
		{[]string{"--pause", "--mirror", "m", "--topics", "orders"}, "pause(m, names [orders], include [], exclude [])", "Mirror m, topic orders: pause requested\n"},
		{[]string{"--resume", "--mirror", "m", "--topics", "orders"}, "resume(m, names [orders], include [], exclude [])", "Mirror m, topic orders: resume requested\n"},
		{[]string{"--recover", "--mirror", "m", "--topics", "orders"}, "recover(m, names [orders], include [], exclude [])", "Mirror m, topic orders: recover requested\n"},
	} {
		out, err := run(tc.args...)
		if err != nil || out != tc.wantLines {
			t.Errorf("%v: %q, %v; want %q", tc.args, out, err, tc.wantLines)
		}
		if calls := admin.takeCalls(); calls != tc.wantCall {
			t.Errorf("%v: call %q, want %q", tc.args, calls, tc.wantCall)
		}
	}
}

func TestMirrorsTopicFailure(t *testing.T) {
	admin, run := newCLI(t)
	admin.topicResults = []mirrord.TopicResult{{Topic: "orders"}, {Topic: "tmp", Err: fmt.Errorf("tmp is not mirrored\n(really): %w", kerr.UnknownTopicOrPartition)}}
	out, err := run("--pause", "--mirror", "m", "--topics", "orders,tmp")
	wantOut := "Mirror m, topic orders: pause requested\nMirror m, topic tmp: failed: UNKNOWN_TOPIC_OR_PARTITION: tmp is not mirrored; (really): UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition.\n"
	if out != wantOut {
		t.Errorf("output\n%s\nwant\n%s", out, wantOut)
	}
	wantErr := "mirrors: pause: 1 of 2 topics failed (first: tmp: UNKNOWN_TOPIC_OR_PARTITION: tmp is not mirrored; (really)"
	if err == nil || !strings.HasPrefix(err.Error(), wantErr) || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %v, want %q...", err, wantErr)
	}
}

func TestMirrorsList(t *testing.T) {
	admin, run := newCLI(t)
	admin.listing = []mirrord.MirrorListing{
		{Name: "east", SourceBootstrap: "east-1:9092", SourceClusterID: "Ab3xQ", Topics: []string{"orders", "pay"}},
		{Name: "west", SourceBootstrap: "west-1:9092"},
	}
	out, err := run("--list")
	want := "MIRROR  SOURCE       SOURCE-CLUSTER-ID  TOPICS\n" +
		"east    east-1:9092  Ab3xQ              2\n" +
		"west    west-1:9092  -                  0\n"
	if err != nil || out != want {
		t.Errorf("list: %v\n%s\nwant\n%s", err, out, want)
	}
}

// describedFixture is a mirror with a mirroring, a failed (waiting for
// --recover) and an unknown partition, and a mirror without topics.
func describedFixture() []mirrord.MirrorDescription {
	return []mirrord.MirrorDescription{
		{Name: "east", SourceBootstrap: "east-1:9092", SourceClusterID: "Ab3xQ", Partitions: []mirrord.MirrorPartitionStatus{
			{Topic: "orders", Partition: 0, State: "MIRRORING", SourceHighWatermark: 1200, SourceHighWatermarkAge: 500 * time.Millisecond, LogEndOffset: 1150, LastMirrorEpoch: -1, LastMirrorOffset: -1,
				LagTime: 4 * time.Second, LeaderEpoch: 7, SourceLeaderEpoch: 7},
			{Topic: "orders", Partition: 1, State: "FAILED", Error: "source topic deleted", RetryCount: -1, SourceHighWatermark: -1, SourceHighWatermarkAge: -1, LogEndOffset: 80, LastMirrorEpoch: 4, LastMirrorOffset: 77,
				LagTime: -1, LeaderEpoch: 4, SourceLeaderEpoch: -1},
			{Topic: "pay", Partition: 0, State: "FAILED", Error: "connection refused", RetryCount: 3, SourceHighWatermark: 10, SourceHighWatermarkAge: 2 * time.Second, LogEndOffset: 7, LastMirrorEpoch: -1, LastMirrorOffset: -1,
				LagTime: 250 * time.Millisecond, LeaderEpoch: 2, SourceLeaderEpoch: 3},
			{Topic: "pay", Partition: 1, State: "UNKNOWN", SourceHighWatermark: -1, SourceHighWatermarkAge: -1, LogEndOffset: -1, LastMirrorEpoch: -1, LastMirrorOffset: -1,
				LagTime: -1, LeaderEpoch: -1, SourceLeaderEpoch: -1},
		}},
		{Name: "west", SourceBootstrap: "west-1:9092"},
	}
}

func TestMirrorsDescribeTable(t *testing.T) {
	admin, run := newCLI(t)
	admin.descriptions = describedFixture()
	out, err := run("--describe")
	want := "MIRROR  TOPIC   PARTITION  STATE      SOURCE-HW  LOCAL-LEO  LAG  LAG-TIME  EPOCH  SOURCE-EPOCH  ERROR\n" +
		"east    orders  0          MIRRORING  1200       1150       50   4s        7      7             \n" +
		"east    orders  1          FAILED     -          80         -    -         4      -             source topic deleted (waits for --recover)\n" +
		"east    pay     0          FAILED     10         7          3    250ms     2      3             connection refused (retry 3)\n" +
		"east    pay     1          UNKNOWN    -          -          -    -         -      -             \n"
	if err != nil || out != want {
		t.Errorf("describe: %v\n%s\nwant\n%s", err, out, want)
	}
	out, err = run("--describe", "--mirror", "east", "--failed")
	want = "MIRROR  TOPIC   PARTITION  STATE   SOURCE-HW  LOCAL-LEO  LAG  LAG-TIME  EPOCH  SOURCE-EPOCH  ERROR\n" +
		"east    orders  1          FAILED  -          80         -    -         4      -             source topic deleted (waits for --recover)\n" +
		"east    pay     0          FAILED  10         7          3    250ms     2      3             connection refused (retry 3)\n"
	if err != nil || out != want {
		t.Errorf("describe --failed: %v\n%s\nwant\n%s", err, out, want)
	}
	if calls := admin.takeCalls(); calls != `describe([], false) describe(["east"], true)` {
		t.Errorf("calls %q", calls)
	}
}

func TestMirrorsDescribeJSON(t *testing.T) {
	admin, run := newCLI(t)
	admin.descriptions = describedFixture()
	out, err := run("--describe", "--json", "--failed")
	if err != nil {
		t.Fatal(err)
	}
	var got describeOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	want := describeOutput{
		Mirrors: []describedMirror{{Mirror: "east", SourceBootstrap: "east-1:9092", SourceClusterID: "Ab3xQ"}, {Mirror: "west", SourceBootstrap: "west-1:9092"}},
		Partitions: []describedPartition{
			{Mirror: "east", Topic: "orders", Partition: 1, State: "FAILED", SourceHighWatermark: -1, SourceHighWatermarkAgeMillis: -1, LogEndOffset: 80, Lag: -1, LagAtLeast: -1,
				LagMillis: -1, LeaderEpoch: 4, SourceLeaderEpoch: -1, Error: "source topic deleted", RetryCount: -1, LastMirrorEpoch: 4, LastMirrorOffset: 77},
			{Mirror: "east", Topic: "pay", Partition: 0, State: "FAILED", SourceHighWatermark: 10, SourceHighWatermarkAgeMillis: 2000, LogEndOffset: 7, Lag: 3, LagAtLeast: 3,
				LagMillis: 250, LeaderEpoch: 2, SourceLeaderEpoch: 3, Error: "connection refused", RetryCount: 3, LastMirrorEpoch: -1, LastMirrorOffset: -1},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("json\n%+v\nwant\n%+v", got, want)
	}
	// Field names as documented, and empty lists as [] rather than null.
	admin.descriptions = nil
	out, err = run("--describe", "--json")
	if err != nil || strings.Join(strings.Fields(out), "") != `{"mirrors":[],"partitions":[]}` {
		t.Errorf("empty: %q, %v", out, err)
	}
}

// staleFixture is a mirror whose source stopped answering three minutes
// ago: one partition's high watermark is stale (lag only a lower bound),
// the other's fresh from before; and a mirror without topics.
func staleFixture(since time.Time) []mirrord.MirrorDescription {
	return []mirrord.MirrorDescription{
		{Name: "east", SourceBootstrap: "east-1:9092", SourceClusterID: "Ab3xQ", SourceUnreachableSince: since,
			SourceError: "fetch from broker 1: dial tcp 127.0.0.1:9: connect: connection refused", Partitions: []mirrord.MirrorPartitionStatus{
				{Topic: "orders", Partition: 0, State: "MIRRORING", SourceHighWatermark: 1200, SourceHighWatermarkAge: 3 * time.Minute, Stale: true,
					LogEndOffset: 1150, LastMirrorEpoch: -1, LastMirrorOffset: -1, LagTime: 200 * time.Second, LeaderEpoch: 3, SourceLeaderEpoch: 3},
				{Topic: "orders", Partition: 1, State: "MIRRORING", SourceHighWatermark: 40, SourceHighWatermarkAge: 300 * time.Millisecond,
					LogEndOffset: 40, LastMirrorEpoch: -1, LastMirrorOffset: -1, LeaderEpoch: 0, SourceLeaderEpoch: 1},
			}},
		{Name: "west", SourceBootstrap: "west-1:9092"},
	}
}

// A stale source high watermark and an unreachable source: describe
// says "lag >= N" with the age and the unreachable-since line, its JSON
// gives lag -1 beside lagAtLeast, and the dry run says its figure is a
// lower bound and since when the source has been silent.
func TestMirrorsLagLowerBound(t *testing.T) {
	admin, run := newCLI(t)
	since := time.Now().Add(-3 * time.Minute).Truncate(time.Second)
	admin.descriptions = staleFixture(since)
	sinceText := since.UTC().Format(time.RFC3339)
	unreachable := regexp.QuoteMeta("source unreachable since "+sinceText+" (") + `3m[0-9]+s` +
		regexp.QuoteMeta(" ago): fetch from broker 1: dial tcp 127.0.0.1:9: connect: connection refused")

	out, err := run("--describe")
	wantTable := "MIRROR  TOPIC   PARTITION  STATE      SOURCE-HW  LOCAL-LEO  LAG                                     LAG-TIME  EPOCH  SOURCE-EPOCH  ERROR\n" +
		"east    orders  0          MIRRORING  1200       1150       >= 50 (source high watermark 3m0s ago)  3m20s     3      3             \n" +
		"east    orders  1          MIRRORING  40         40         0                                       0s        0      1             \n"
	if err != nil || !regexp.MustCompile(`^Mirror east: `+unreachable+"\n").MatchString(out) || !strings.HasSuffix(out, wantTable) {
		t.Errorf("describe: %v\n%s\nwant the unreachable line, then\n%s", err, out, wantTable)
	}

	out, err = run("--describe", "--json")
	var got describeOutput
	if err != nil || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("describe --json: %v\n%s", err, out)
	}
	wantJSON := describeOutput{
		Mirrors: []describedMirror{{Mirror: "east", SourceBootstrap: "east-1:9092", SourceClusterID: "Ab3xQ",
			SourceUnreachableSince: since.UTC().Format(time.RFC3339Nano), SourceError: "fetch from broker 1: dial tcp 127.0.0.1:9: connect: connection refused"},
			{Mirror: "west", SourceBootstrap: "west-1:9092"}},
		Partitions: []describedPartition{
			{Mirror: "east", Topic: "orders", Partition: 0, State: "MIRRORING", SourceHighWatermark: 1200, SourceHighWatermarkAgeMillis: 180000,
				LogEndOffset: 1150, Lag: -1, LagAtLeast: 50, LagMillis: 200000, LeaderEpoch: 3, SourceLeaderEpoch: 3, LastMirrorEpoch: -1, LastMirrorOffset: -1},
			{Mirror: "east", Topic: "orders", Partition: 1, State: "MIRRORING", SourceHighWatermark: 40, SourceHighWatermarkAgeMillis: 300,
				LogEndOffset: 40, Lag: 0, LagAtLeast: 0, LagMillis: 0, LeaderEpoch: 0, SourceLeaderEpoch: 1, LastMirrorEpoch: -1, LastMirrorOffset: -1},
		},
	}
	if !reflect.DeepEqual(got, wantJSON) {
		t.Errorf("describe --json\n%+v\nwant\n%+v", got, wantJSON)
	}

	out, err = run("--stop", "--dry-run", "--mirror", "east", "--topics", "orders")
	wantDry := "TOPIC   PARTITION  STATE      SOURCE-HW  LOCAL-LEO  LAG-RECORDS  LAG-TIME\n" +
		"orders  0          MIRRORING  1200       1150       >= 50        3m20s\n" +
		"orders  1          MIRRORING  40         40         0            0s\n"
	summary := regexp.QuoteMeta("A stop now would leave at least 50 records behind on the source (largest lag in time at least 3m20s); "+
		"the source has not answered since ") + `[0-9TZ:-]+` + regexp.QuoteMeta(" for 1 partitions, so their lag is a lower bound.") +
		" The " + unreachable + regexp.QuoteMeta(". Nothing was stopped (--dry-run).") + "\n$"
	if err != nil || !strings.HasPrefix(out, wantDry) || !regexp.MustCompile(summary).MatchString(strings.TrimPrefix(out, wantDry)) {
		t.Errorf("dry run: %v\n%s\nwant\n%s%s", err, out, wantDry, summary)
	}
	// The date of the source's last answer is the reader's clock minus
	// the oldest stale age: three minutes ago, to the second.
	silent := regexp.MustCompile(`has not answered since ([0-9TZ:-]+) `).FindStringSubmatch(out)
	if silent == nil {
		t.Fatalf("dry run names no time: %s", out)
	}
	if at, err := time.Parse(time.RFC3339, silent[1]); err != nil || at.Sub(since).Abs() > 5*time.Second {
		t.Errorf("silent since %s (%v), the fixture's source high watermark dates from %s", silent[1], err, sinceText)
	}

	out, err = run("--stop", "--dry-run", "--json", "--mirror", "east", "--topics", "orders")
	var dry struct {
		Mirror                 string    `json:"mirror"`
		SourceUnreachableSince string    `json:"sourceUnreachableSince"`
		SourceError            string    `json:"sourceError"`
		Partitions             []stopLag `json:"partitions"`
	}
	if err != nil || json.Unmarshal([]byte(out), &dry) != nil {
		t.Fatalf("dry run --json: %v\n%s", err, out)
	}
	wantLags := []stopLag{
		{Topic: "orders", Partition: 0, State: "MIRRORING", SourceHighWatermark: 1200, LogEndOffset: 1150, LagRecords: -1, LagMillis: 200000,
			LagRecordsAtLeast: 50, SourceHighWatermarkAgeMillis: 180000},
		{Topic: "orders", Partition: 1, State: "MIRRORING", SourceHighWatermark: 40, LogEndOffset: 40, LagRecords: 0, LagMillis: 0,
			LagRecordsAtLeast: 0, SourceHighWatermarkAgeMillis: 300},
	}
	if dry.Mirror != "east" || dry.SourceUnreachableSince != since.UTC().Format(time.RFC3339Nano) || !strings.Contains(dry.SourceError, "connection refused") ||
		!reflect.DeepEqual(dry.Partitions, wantLags) {
		t.Errorf("dry run --json\n%+v\nwant partitions\n%+v", dry, wantLags)
	}

	// Fresh and reachable: the plain figure, no "at least".
	admin.descriptions = describedFixture()
	out, err = run("--stop", "--dry-run", "--mirror", "east", "--topics", "orders")
	if err != nil || !strings.Contains(out, "A stop now would leave 50 records behind on the source (largest lag in time 4s).") ||
		strings.Contains(out, "at least") || strings.Contains(out, "unreachable") {
		t.Errorf("dry run, fresh: %v\n%s", err, out)
	}
}

func TestMirrorsHelp(t *testing.T) {
	var out bytes.Buffer
	if err := mirrorsCommand(context.Background(), []string{"--help"}, &out); err != nil || !strings.Contains(out.String(), "--describe  [--mirror NAME] [--json] [--failed]") {
		t.Errorf("--help: %v\n%s", err, out.String())
	}
}

// plainBackend is a Backend that does not administer mirrors.
type plainBackend struct{ netio.Backend }

func TestMirrorsErrorsAreOneLine(t *testing.T) {
	admin, run := newCLI(t)
	admin.descriptions = describedFixture()
	config := writeMirrorConfig(t, "m.properties", "bootstrap.servers=a:1\n")
	badConfig := writeMirrorConfig(t, "bad.properties", "bootstrap.servers=a:1\nx=\\u12\n")
	if _, err := run("--create", "--mirror", "dup", "--mirror-config", config); err != nil {
		t.Fatal(err)
	}
	plainAddr := serveCLI(t, plainBackend{})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "mirrors: no action: give one of --create"},
		{[]string{"--list", "--describe"}, "mirrors: one action at a time: --describe and --list"},
		{[]string{"--create", "--mirror", "m"}, "mirrors: --create needs --mirror-config"},
		{[]string{"--start", "--mirror", "m"}, "mirrors: --start needs --topics"},
		{[]string{"--stop", "--mirror", "m", "--topics", " , "}, "mirrors: --stop needs --topics"},
		{[]string{"--delete"}, "mirrors: --delete needs --mirror"},
		{[]string{"--pause", "--mirror", "m", "--topics", "t", "--exclude", "x"}, "mirrors: --pause does not take --exclude"},
		{[]string{"--start", "--mirror", "m", "--topics", "t", "--dry-run"}, "mirrors: --start does not take --dry-run"},
		{[]string{"--list", "--json", "--failed", "--mirror", "m"}, "mirrors: --list does not take --failed --mirror"},
		{[]string{"--list", "--count", "2"}, "mirrors: --list does not take --count"},
		{[]string{"--describe", "--count", "2"}, "mirrors: --interval and --count go with --watch"},
		{[]string{"--describe", "--watch", "--interval", "0s"}, "mirrors: --interval 0s: must be positive"},
		{[]string{"--describe", "--watch", "--count", "-1"}, "mirrors: --count -1: must be at least 0"},
		{[]string{"--describe", "--watch", "--mirror", "nope", "--count", "3"}, `mirrors: describe mirror "nope": RESOURCE_NOT_FOUND`},
		{[]string{"--create", "--mirror", "m", "--mirror-config", config, "--failed"}, "mirrors: --create does not take --failed"},
		{[]string{"--list", "extra"}, `mirrors: unexpected argument "extra"`},
		{[]string{"--lst"}, "mirrors: flag provided but not defined: -lst"},
		{[]string{"--create", "--mirror", "m", "--mirror-config", "/nonexistent.properties"}, "mirrors: --mirror-config: open /nonexistent.properties"},
		{[]string{"--create", "--mirror", "m", "--mirror-config", badConfig}, "mirrors: --mirror-config " + badConfig + ": line 2: malformed \\uxxxx"},
		{[]string{"--create", "--mirror", "dup", "--mirror-config", config}, `mirrors: create mirror "dup": DUPLICATE_RESOURCE: mirror "dup" exists`},
		{[]string{"--describe", "--mirror", "nope"}, `mirrors: describe mirror "nope": RESOURCE_NOT_FOUND: mirror "nope"`},
		{[]string{"--pause", "--mirror", "m", "--topics", "a"}, ""}, // (succeeds; keeps the table honest)
	} {
		out, err := run(tc.args...)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.args, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.ContainsAny(err.Error(), "\r\n") {
			t.Errorf("%v: error %v (output %q), want %q...", tc.args, err, out, tc.want)
		}
	}
	var out bytes.Buffer
	err := mirrorsCommand(context.Background(), []string{"--list"}, &out)
	if err == nil || err.Error() != "mirrors: --bootstrap-server is required" {
		t.Errorf("no bootstrap: %v", err)
	}
	err = mirrorsCommand(context.Background(), []string{"--bootstrap-server", plainAddr, "--list"}, &out)
	if err == nil || !strings.Contains(err.Error(), "does not serve ListClusterMirrors (API key 1007)") {
		t.Errorf("plain node: %v", err)
	}
	admin.err = errors.New("state log\nunavailable")
	_, err = run("--list")
	if err == nil || err.Error() != "mirrors: list: UNKNOWN_SERVER_ERROR: state log; unavailable" {
		t.Errorf("server failure: %v", err)
	}
}

func TestMirrorsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	err = mirrorsCommand(context.Background(), []string{"--bootstrap-server", addr, "--list"}, &bytes.Buffer{})
	if err == nil || !strings.HasPrefix(err.Error(), "mirrors: "+addr+": ") || strings.Contains(err.Error(), "\n") {
		t.Errorf("unreachable: %v", err)
	}
}

// TestMirrorsCommandConfig: --command-config gives the tool's own
// connection Kafka's security properties, read by the mirror config's
// parser: over SSL with the node's CA in ssl.truststore.location the tool
// lists the mirrors, without it the handshake fails; a bad file is
// refused naming the key, never showing the secret.
func TestMirrorsCommandConfig(t *testing.T) {
	dir := t.TempDir()
	serverTLS, caPEM := testServerTLS(t)
	truststore := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(truststore, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin := &cliAdmin{configs: map[string]map[string]string{}, listing: []mirrord.MirrorListing{{Name: "east", SourceBootstrap: "a:1"}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- netio.NewServer(netio.Config{Backend: cliBackend{admin: admin}}).Serve(ctx, tls.NewListener(ln, serverTLS))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	addr := ln.Addr().String()
	write := func(text string) string {
		path := filepath.Join(t.TempDir(), "client.properties")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const jaas = `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";` + "\n"
	for _, c := range []struct {
		name, config, want string // want "" for success
	}{
		{"ssl", write("security.protocol=SSL\nssl.truststore.location=" + truststore + "\n"), ""},
		{"ssl without the CA", write("security.protocol=SSL\n"), addr},
		{"wrong login module", write("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n" + jaas),
			"sasl.mechanism=PLAIN wants login module org.apache.kafka.common.security.plain.PlainLoginModule"},
		{"unknown key", write("security.protocol=SSL\n" + jaas + "bootstrap.servers=x:1\n"), `client config "bootstrap.servers" is not a security config`},
		{"missing file", filepath.Join(t.TempDir(), "none.properties"), "--command-config: open "},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var out bytes.Buffer
		err := mirrorsCommand(ctx, []string{"--bootstrap-server", addr, "--command-config", c.config, "--list"}, &out)
		cancel()
		switch {
		case c.want == "" && (err != nil || !strings.Contains(out.String(), "east")):
			t.Errorf("%s: %v, output %q", c.name, err, out.String())
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "admin-secret")):
			t.Errorf("%s: %v, want %q and no secret", c.name, err, c.want)
		}
	}
}

// testServerTLS is a server TLS config for 127.0.0.1 and its CA's PEM.
func testServerTLS(t *testing.T) (*tls.Config, []byte) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTemplate := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	template := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "mirrord"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}
