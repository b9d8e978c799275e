package main

// Tests of --json's documented shapes and of --describe --watch.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord"
	"github.com/twmb/franz-go/pkg/kerr"
)

// jsonPaths is the set of field paths of a JSON document
// ("mirrors[].topics", "partitions[].lag"), for the shape's sake.
func jsonPaths(t *testing.T, text string) []string {
	t.Helper()
	var doc any
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, text)
	}
	seen := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for key, value := range v {
				path := strings.TrimPrefix(prefix+"."+key, ".")
				seen[path] = true
				walk(path, value)
			}
		case []any:
			for _, item := range v {
				walk(prefix+"[]", item)
			}
		}
	}
	walk("", doc)
	paths := make([]string, 0, len(seen))
	for path := range seen {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	return paths
}

// sorted is paths, sorted as jsonPaths sorts.
func sorted(paths []string) []string {
	return slices.Sorted(slices.Values(paths))
}

// Each listing's --json has the shape `mirrors --help` documents, field
// for field, and its values.
func TestMirrorsJSONShapes(t *testing.T) {
	admin, run := newCLI(t)
	admin.listing = []mirrord.MirrorListing{{Name: "east", SourceBootstrap: "east-1:9092", SourceClusterID: "Ab3xQ", Topics: []string{"orders", "pay"}}}
	at := time.Now().Add(-3 * time.Second).Truncate(time.Millisecond)
	admin.descriptions = groupSyncFixture(at)
	admin.descriptions[0].ACLSync = &mirrord.MirrorACLSync{At: at, Duration: 7 * time.Millisecond, Synced: 3, Error: "SECURITY_DISABLED"}
	admin.descriptions[0].SourceUnreachableSince, admin.descriptions[0].SourceError = at, "connection refused"

	out, err := run("--list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonPaths(t, out), []string{"mirrors", "mirrors[].mirror", "mirrors[].sourceBootstrap", "mirrors[].sourceClusterId",
		"mirrors[].topicCount", "mirrors[].topics"}; !reflect.DeepEqual(got, want) {
		t.Errorf("--list --json paths %q, want %q", got, want)
	}
	var listed struct {
		Mirrors []listedMirror `json:"mirrors"`
	}
	json.Unmarshal([]byte(out), &listed)
	if want := []listedMirror{{"east", "east-1:9092", "Ab3xQ", 2, []string{"orders", "pay"}}}; !reflect.DeepEqual(listed.Mirrors, want) {
		t.Errorf("--list --json %+v, want %+v", listed.Mirrors, want)
	}
	admin.listing = nil
	if out, err := run("--list", "--json"); err != nil || strings.Join(strings.Fields(out), "") != `{"mirrors":[]}` {
		t.Errorf("--list --json of none: %q, %v", out, err)
	}

	out, err = run("--describe", "--json")
	if err != nil {
		t.Fatal(err)
	}
	wantDescribe := []string{"mirrors", "mirrors[].aclSync", "mirrors[].aclSync.aclsSynced", "mirrors[].aclSync.durationMillis", "mirrors[].aclSync.error",
		"mirrors[].aclSync.failedRounds", "mirrors[].aclSync.lastSync", "mirrors[].aclSync.lastSyncAgeMillis",
		"mirrors[].groupSync", "mirrors[].groupSync.durationMillis", "mirrors[].groupSync.error", "mirrors[].groupSync.failedRounds",
		"mirrors[].groupSync.groups", "mirrors[].groupSync.groups[].group", "mirrors[].groupSync.groups[].offsetLag", "mirrors[].groupSync.groups[].skipped",
		"mirrors[].groupSync.groupsSkipped", "mirrors[].groupSync.groupsSynced", "mirrors[].groupSync.lastSync", "mirrors[].groupSync.lastSyncAgeMillis",
		"mirrors[].mirror", "mirrors[].sourceBootstrap", "mirrors[].sourceClusterId", "mirrors[].sourceError", "mirrors[].sourceUnreachableSince",
		"partitions", "partitions[].error", "partitions[].lag", "partitions[].lagAtLeast", "partitions[].lagMillis", "partitions[].lastMirrorEpoch",
		"partitions[].lastMirrorOffset", "partitions[].leaderEpoch", "partitions[].logEndOffset", "partitions[].mirror", "partitions[].partition",
		"partitions[].retryCount", "partitions[].sourceHighWatermark", "partitions[].sourceHighWatermarkAgeMillis", "partitions[].sourceLeaderEpoch",
		"partitions[].state", "partitions[].topic"}
	if got := jsonPaths(t, out); !reflect.DeepEqual(got, sorted(wantDescribe)) {
		t.Errorf("--describe --json paths\n%q\nwant\n%q", got, wantDescribe)
	}
	// The documentation names every field.
	var help bytes.Buffer
	if err := mirrorsCommand(context.Background(), []string{"--help"}, &help); err != nil {
		t.Fatal(err)
	}
	for _, path := range wantDescribe {
		field := path[strings.LastIndexAny(path, ".]")+1:]
		if !strings.Contains(help.String(), `"`+field+`"`) {
			t.Errorf("--help does not document %q", field)
		}
	}

	admin.topicResults = []mirrord.TopicResult{{Topic: "orders"}, {Topic: "tmp", Err: fmt.Errorf("tmp is not\nmirrored: %w", kerr.UnknownTopicOrPartition)}}
	out, err = run("--stop", "--json", "--mirror", "east", "--topics", "orders,tmp")
	if err == nil || !strings.Contains(err.Error(), "stop: 1 of 2 topics failed") {
		t.Errorf("--stop --json with a failure: %v", err)
	}
	if got, want := jsonPaths(t, out), []string{"action", "mirror", "topics", "topics[].error", "topics[].status", "topics[].topic"}; !reflect.DeepEqual(got, want) {
		t.Errorf("--stop --json paths %q, want %q", got, want)
	}
	var stopped topicsOutput
	json.Unmarshal([]byte(out), &stopped)
	wantStopped := topicsOutput{Mirror: "east", Action: "stop", Topics: []topicOutcome{{Topic: "orders", Status: "stopped"},
		{Topic: "tmp", Status: "failed", Error: "UNKNOWN_TOPIC_OR_PARTITION: tmp is not; mirrored: UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition."}}}
	if !reflect.DeepEqual(stopped, wantStopped) {
		t.Errorf("--stop --json\n%+v\nwant\n%+v", stopped, wantStopped)
	}
	admin.topicResults = nil
	for _, action := range []string{"start", "pause", "resume", "recover"} {
		out, err := run("--"+action, "--json", "--mirror", "east", "--topics", "orders")
		want := fmt.Sprintf(`{"mirror":"east","action":"%s","topics":[{"topic":"orders","status":"requested"}]}`, action)
		if err != nil || strings.Join(strings.Fields(out), "") != want {
			t.Errorf("--%s --json: %q, %v; want %s", action, out, err, want)
		}
	}
	if out, err := run("--pause", "--json", "--mirror", "east", "--topics", "x.*"); err != nil ||
		strings.Join(strings.Fields(out), "") != `{"mirror":"east","action":"pause","topics":[]}` {
		t.Errorf("--pause --json, nothing matched: %q, %v", out, err)
	}

	out, err = run("--stop", "--dry-run", "--json", "--mirror", "east", "--topics", "orders")
	if err != nil {
		t.Fatal(err)
	}
	wantDry := []string{"groupSync", "groupSync.durationMillis", "groupSync.error", "groupSync.failedRounds", "groupSync.groups", "groupSync.groups[].group",
		"groupSync.groups[].offsetLag", "groupSync.groups[].skipped", "groupSync.groupsSkipped", "groupSync.groupsSynced", "groupSync.lastSync",
		"groupSync.lastSyncAgeMillis", "mirror", "partitions", "partitions[].lagMillis", "partitions[].lagRecords", "partitions[].lagRecordsAtLeast",
		"partitions[].logEndOffset", "partitions[].partition", "partitions[].sourceHighWatermark", "partitions[].sourceHighWatermarkAgeMillis",
		"partitions[].state", "partitions[].topic", "sourceError", "sourceUnreachableSince"}
	if got := jsonPaths(t, out); !reflect.DeepEqual(got, sorted(wantDry)) {
		t.Errorf("--stop --dry-run --json paths\n%q\nwant\n%q", got, wantDry)
	}
}

// snapshotHeader opens each piped text snapshot of a watch.
var snapshotHeader = regexp.MustCompile(`(?m)^# \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$`)

// --watch --count 2, piped: two snapshots, each after a "# TIME" line,
// a blank line between them, each the table --describe prints.
func TestMirrorsWatchPiped(t *testing.T) {
	admin, run := newCLI(t)
	admin.descriptions = describedFixture()
	single, err := run("--describe", "--mirror", "east")
	if err != nil {
		t.Fatal(err)
	}
	admin.takeCalls()
	out, err := run("--describe", "--mirror", "east", "--watch", "--count", "2", "--interval", "10ms")
	if err != nil {
		t.Fatal(err)
	}
	snapshots := snapshotHeader.Split(out, -1)
	headers := snapshotHeader.FindAllString(out, -1)
	if len(headers) != 2 || len(snapshots) != 3 || snapshots[0] != "" || snapshots[1] != "\n"+single+"\n" || snapshots[2] != "\n"+single {
		t.Fatalf("watch output:\n%s\nwant two snapshots of\n%s", out, single)
	}
	first, _ := time.Parse(time.RFC3339Nano, strings.TrimPrefix(headers[0], "# "))
	second, _ := time.Parse(time.RFC3339Nano, strings.TrimPrefix(headers[1], "# "))
	if d := second.Sub(first); d < 10*time.Millisecond {
		t.Errorf("snapshots %v apart, want at least the interval", d)
	}
	if calls := admin.takeCalls(); calls != `describe(["east"], false) describe(["east"], false)` {
		t.Errorf("calls %q", calls)
	}

	// JSON: one document per snapshot, no header.
	out, err = run("--describe", "--json", "--watch", "--count", "2", "--interval", "10ms")
	if err != nil {
		t.Fatal(err)
	}
	decoder := json.NewDecoder(strings.NewReader(out))
	documents := 0
	for ; documents < 3; documents++ {
		var doc describeOutput
		if err := decoder.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil || len(doc.Partitions) != 4 {
			t.Fatalf("document %d: %v %+v\n%s", documents, err, doc, out)
		}
	}
	if documents != 2 {
		t.Errorf("%d JSON documents, want 2:\n%s", documents, out)
	}
}

// writeFunc is an io.Writer calling a function on each write.
type writeFunc func(p []byte) (int, error)

func (f writeFunc) Write(p []byte) (int, error) { return f(p) }

// An interrupt (ctx ending) ends a watch without an error; a snapshot
// that fails after the first is shown, and the watch goes on.
func TestMirrorsWatchInterruptAndFailure(t *testing.T) {
	admin, _ := newCLI(t)
	admin.descriptions = describedFixture()
	addr := serveCLI(t, cliBackend{admin: admin})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	snapshots := 0
	watch := writeFunc(func(p []byte) (int, error) {
		snapshots++
		switch snapshots {
		case 1: // the node fails from the second snapshot on
			admin.mu.Lock()
			admin.err = errors.New("state log unavailable")
			admin.mu.Unlock()
		case 2:
			cancel() // the interrupt
		}
		return out.Write(p)
	})
	err := mirrorsCommand(ctx, []string{"--bootstrap-server", addr, "--describe", "--watch", "--interval", "10ms"}, watch)
	if err != nil || snapshots != 2 {
		t.Fatalf("interrupted watch: %v after %d snapshots\n%s", err, snapshots, out.String())
	}
	parts := snapshotHeader.Split(out.String(), -1)
	if len(parts) != 3 || !strings.HasPrefix(parts[1], "\nMIRROR  TOPIC") || parts[2] != "\nmirrors: describe: UNKNOWN_SERVER_ERROR: state log unavailable\n" {
		t.Errorf("watch output:\n%s", out.String())
	}
	// The first snapshot's failure ends the watch with it.
	err = mirrorsCommand(context.Background(), []string{"--bootstrap-server", addr, "--describe", "--watch", "--count", "3"}, io.Discard)
	if err == nil || err.Error() != "mirrors: describe: UNKNOWN_SERVER_ERROR: state log unavailable" {
		t.Errorf("watch failing at once: %v", err)
	}
}

// On a terminal each snapshot clears the screen and redraws, under a
// line naming the interval and the time.
func TestWatchSnapshotRedraws(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	for n := 1; n <= 2; n++ {
		if err := writeSnapshot(&out, mirrorsOptions{interval: 2 * time.Second}, []byte("TABLE\n"), now, n, true); err != nil {
			t.Fatal(err)
		}
	}
	page := clearScreen + "Every 2s: mirrord mirrors --describe  " + now.Local().Format(time.RFC3339) + "\n\nTABLE\n"
	if out.String() != page+page {
		t.Errorf("redraws %q, want %q twice", out.String(), page)
	}
	if terminal, _ := terminalWidth(&out); terminal {
		t.Error("a buffer is no terminal")
	}
}

// clusterFixture is a mirror on a cluster: a partition this node's
// machine describes, one described from its etcd record (stopped), and
// one whose leader is gone (no record: UNKNOWN), each with its leader and
// ISR.
func clusterFixture() []mirrord.MirrorDescription {
	return []mirrord.MirrorDescription{{Name: "east", SourceBootstrap: "east-1:9092", SourceClusterID: "Ab3xQ", Partitions: []mirrord.MirrorPartitionStatus{
		{Topic: "orders", Partition: 0, State: "MIRRORING", SourceHighWatermark: 1200, SourceHighWatermarkAge: 500 * time.Millisecond, LogEndOffset: 1150,
			LastMirrorEpoch: -1, LastMirrorOffset: -1, LagTime: 4 * time.Second, LeaderEpoch: 7, SourceLeaderEpoch: 7, Leader: 2, ISR: []int32{2, 1, 3}},
		{Topic: "orders", Partition: 1, State: "STOPPED", SourceHighWatermark: -1, SourceHighWatermarkAge: -1, LogEndOffset: 81,
			LastMirrorEpoch: 4, LastMirrorOffset: 80, LagTime: -1, LeaderEpoch: 15, SourceLeaderEpoch: 4, Leader: 13, ISR: []int32{13, 1}},
		{Topic: "orders", Partition: 2, State: "UNKNOWN", SourceHighWatermark: -1, SourceHighWatermarkAge: -1, LogEndOffset: -1,
			LastMirrorEpoch: -1, LastMirrorOffset: -1, LagTime: -1, LeaderEpoch: -1, SourceLeaderEpoch: -1, Leader: -1, ISR: []int32{3}},
	}}}
}

// On a cluster --describe prints each partition's LEADER ("-": none) and
// ISR after PARTITION, and --json "leader" and "isr"; a node alone's
// output has neither (TestMirrorsDescribeTable, TestMirrorsJSONShapes).
func TestMirrorsDescribeCluster(t *testing.T) {
	admin, run := newCLI(t)
	admin.descriptions = clusterFixture()
	out, err := run("--describe")
	want := "MIRROR  TOPIC   PARTITION  LEADER  ISR    STATE      SOURCE-HW  LOCAL-LEO  LAG  LAG-TIME  EPOCH  SOURCE-EPOCH  ERROR\n" +
		"east    orders  0          2       2,1,3  MIRRORING  1200       1150       50   4s        7      7             \n" +
		"east    orders  1          13      13,1   STOPPED    -          81         -    -         15     4             \n" +
		"east    orders  2          -       3      UNKNOWN    -          -          -    -         -      -             \n"
	if err != nil || out != want {
		t.Errorf("describe: %v\n%s\nwant\n%s", err, out, want)
	}

	out, err = run("--describe", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got describeOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	type placement struct {
		leader int32
		isr    []int32
	}
	var placements []placement
	for _, row := range got.Partitions {
		if row.Leader == nil {
			t.Fatalf("row %+v: no leader", row)
		}
		placements = append(placements, placement{*row.Leader, row.ISR})
	}
	if want := []placement{{2, []int32{2, 1, 3}}, {13, []int32{13, 1}}, {-1, []int32{3}}}; !reflect.DeepEqual(placements, want) {
		t.Errorf("--json leaders and ISRs %v, want %v", placements, want)
	}
	paths := jsonPaths(t, out)
	var help bytes.Buffer
	if err := mirrorsCommand(context.Background(), []string{"--help"}, &help); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"leader", "isr"} {
		if !slices.Contains(paths, "partitions[]."+field) || !strings.Contains(help.String(), `"`+field+`"`) {
			t.Errorf("--json field %q: in %q, documented %v", field, paths, strings.Contains(help.String(), `"`+field+`"`))
		}
	}
}
