package console

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/netio"
)

func text(t *testing.T, c *Console) string {
	t.Helper()
	var page strings.Builder
	if err := WriteText(&page, c.Status()); err != nil {
		t.Fatal(err)
	}
	return page.String()
}

// The text view of a mirror whose source stopped answering: the
// unreachable line with its error, ">=" before a stale lag with the high
// watermark's age beside it, and a note saying what ">=" means.
func TestTextStale(t *testing.T) {
	source, clock, c := newFake(4)
	since := clock.Now().Add(-90 * time.Second)
	source.set(engine.MirrorReport{Name: "m", SourceBootstrap: "127.0.0.1:9", SourceClusterID: "src", StaleAfter: 5 * time.Second,
		SourceUnreachableSince: since, SourceError: "fetch from broker 0: EOF",
		Partitions: []engine.MirrorPartitionReport{
			{Topic: "orders", Partition: 0, State: mirrorstate.Mirroring, SourceHighWatermark: 10, SourceHighWatermarkAge: 90 * time.Second,
				LogEndOffset: 10, LeaderEpoch: 17, SourceLeaderEpoch: 7, LagRecords: 0, LagLowerBound: true, Lag: 90 * time.Second, Bytes: 700},
			{Topic: "orders", Partition: 1, State: mirrorstate.Paused, SourceHighWatermark: -1, SourceHighWatermarkAge: -1, LogEndOffset: 0,
				LeaderEpoch: -1, SourceLeaderEpoch: -1, LagRecords: -1},
		},
	})
	c.Sample()
	page := text(t, c)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`^mirrord node 1, cluster c1, 127\.0\.0\.1:9092\nlog dir: free space unknown\n`),
		regexp.MustCompile(`\nmirror m: source 127\.0\.0\.1:9 \(cluster src\), 2 partitions: 1 MIRRORING, 1 PAUSED\n`),
		regexp.MustCompile(`\nsource unreachable since ` + regexp.QuoteMeta(since.UTC().Format(time.RFC3339)) + ` \(1m30s ago\): fetch from broker 0: EOF\n`),
		regexp.MustCompile(`\norders +0 +MIRRORING +10 +1m30s +10 +17 +7 +>=0 +90\.000 +700 +-\n`),
		regexp.MustCompile(`\norders +1 +PAUSED +-1 +- +0 +-1 +-1 +- +0\.000 +0 +-\n`),
		regexp.MustCompile(`\n1 partitions: the source high watermark is older than 5s, so their lag is a lower bound \(>=\)\.\n`),
		regexp.MustCompile(`\nno topic config sync round yet\nno ACL sync round yet\nno transactional ID sync round yet\n`),
		regexp.MustCompile(`\nfailover dry run: a stop now would leave at least 0 records behind on the source \(largest lag in time 1m30s\), 1 partitions' lag unknown; ` +
			`per partition: mirrord mirrors --bootstrap-server 127\.0\.0\.1:9092 --stop --dry-run --mirror m --topics '\.\*'\n$`),
	} {
		if !want.MatchString(page) {
			t.Errorf("text view lacks %s:\n%s", want, page)
		}
	}
}

// The line per mirror on each sync: the round, its failures, and for the
// group offset sync the groups' offset lag with the group that has the
// most.
func TestTextSyncLines(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	for _, tc := range []struct {
		status engine.GroupSyncStatus
		want   string
	}{
		{engine.GroupSyncStatus{}, "no group offset sync round yet"},
		{engine.GroupSyncStatus{At: *at(2 * time.Second), Duration: 3 * time.Millisecond, Synced: 2, Skipped: 1,
			Lag: map[string]int64{"a": 7, "b": 9, "c": 9}, SkippedGroups: []string{"live"}},
			"group offsets synced 2026-12-01T11:59:58Z (2s ago, took 3ms): 2 groups synced, 1 skipped (members on this node); offset lag 25 over 3 groups (most: b 9)"},
		{engine.GroupSyncStatus{At: *at(time.Second), Err: "list the source's groups: EOF", Errors: 2, Lag: map[string]int64{}},
			"group offsets synced 2026-12-01T11:59:59Z (1s ago, took 0s): 0 groups synced, 0 skipped (members on this node); 2 rounds failed; the last round failed: list the source's groups: EOF"},
	} {
		if got := groupSyncLine(groupSync(tc.status), now); got != tc.want {
			t.Errorf("%+v:\n%s\nwant\n%s", tc.status, got, tc.want)
		}
	}
	for _, tc := range []struct {
		status engine.SyncStatus
		want   string
	}{
		{engine.SyncStatus{}, "no ACL sync round yet"},
		{engine.SyncStatus{Err: "mirror.acl.sync.enable is false"}, "no ACL sync round: mirror.acl.sync.enable is false"},
		{engine.SyncStatus{At: *at(3 * time.Second), Duration: 1500 * time.Microsecond, Synced: 4, Errors: 1, Err: "describe ACLs:\nEOF"},
			"ACLs synced 2026-12-01T11:59:57Z (3s ago, took 2ms): 4 ACLs of the source held here; 1 rounds failed; the last round failed: describe ACLs:; EOF"},
	} {
		if got := syncLine("ACL", "ACLs synced", "ACLs of the source held here", syncOf(tc.status), now); got != tc.want {
			t.Errorf("%+v:\n%s\nwant\n%s", tc.status, got, tc.want)
		}
	}
}

// The offline partitions come after the node's lines, then the FAILED
// partitions with their errors, before the mirrors.
func TestTextOfflineAndFailedFirst(t *testing.T) {
	source, _, c := newFake(4)
	source.space = broker.LogDirSpace{Known: true, FreeBytes: 100, ReserveBytes: 1000, Low: true}
	source.offline = []netio.OfflineLog{{Topic: "orders", Partition: 1, Error: "logstore: corrupt"}, {Topic: "pay", Partition: 0, Error: "broker: magic 7"}}
	source.set(engine.MirrorReport{Name: "m", Partitions: []engine.MirrorPartitionReport{
		mirroring("orders", 0, 0, 0),
		{Topic: "pay", Partition: 3, State: mirrorstate.Failed, Previous: mirrorstate.LogAlignment, Error: "mirror loop:\nrefused", RetryCount: 2, LagRecords: -1},
		{Topic: "pay", Partition: 4, State: mirrorstate.Failed, Previous: mirrorstate.ULERecovery, Error: "unclean", RetryCount: -1, LagRecords: -1},
	}})
	want := "mirrord node 1, cluster c1, 127.0.0.1:9092\n" +
		"log dir: LOW SPACE, 100 bytes free, below log.dir.reserve.bytes 1000: Produce, CreateTopics, CreatePartitions and mirror appends are refused (KAFKA_STORAGE_ERROR) until space returns\n\n" +
		"OFFLINE: 2 partition(s) whose log cannot be opened answer KAFKA_STORAGE_ERROR:\n" +
		"  orders-1: logstore: corrupt\n  pay-0: broker: magic 7\n\n" +
		"FAILED: 2 partition(s):\n" +
		"  mirror m, pay-3: mirror loop:; refused (from LOG_ALIGNMENT, 2 retries)\n" +
		"  mirror m, pay-4: unclean (from ULE_RECOVERY, waits for --recover)\n\n" +
		"mirror m: source  (cluster ), 3 partitions: 2 FAILED, 1 MIRRORING\n"
	page := text(t, c)
	if !strings.HasPrefix(page, want) {
		t.Errorf("text view:\n%s\nwant it to begin\n%s", page, want)
	}
	if rows := regexp.MustCompile(`\npay +3 +FAILED .*\npay +4 +FAILED .*\norders +0 +MIRRORING `); !rows.MatchString(page) {
		t.Errorf("text view's rows are not FAILED first:\n%s", page)
	}
	source.set()
	if page := text(t, c); !strings.HasSuffix(page, "\nno mirrors\n") {
		t.Errorf("no mirrors:\n%s", page)
	}
}

func get(t *testing.T, url string, accept string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// The handler's routes: the page (or the text view, by Accept), the text
// and JSON views, the assets with their content types, 404 elsewhere.
func TestHandler(t *testing.T) {
	source, _, c := newFake(4)
	source.set(engine.MirrorReport{Name: "east", SourceBootstrap: "127.0.0.1:9", Partitions: []engine.MirrorPartitionReport{mirroring("orders", 0, 10, 2)}})
	c.Sample()
	server := httptest.NewServer(c.Handler())
	defer server.Close()
	for _, tc := range []struct {
		path, accept, contentType, contains string
		code                                int
	}{
		{"/", "", "text/html; charset=utf-8", `<script src="console.js">`, http.StatusOK},
		{"/", "text/html,application/xhtml+xml,*/*;q=0.8", "text/html; charset=utf-8", `<link rel="stylesheet" href="console.css">`, http.StatusOK},
		{"/", "*/*", "text/html; charset=utf-8", "<!DOCTYPE html>", http.StatusOK},
		{"/", "text/plain", "text/plain; charset=utf-8", "mirrord node 1, cluster c1", http.StatusOK},
		{"/", "text/plain, text/html;q=0", "text/plain; charset=utf-8", "\nmirror east: source 127.0.0.1:9", http.StatusOK},
		{"/", "text/plain;q=0.5, text/html", "text/html; charset=utf-8", "<!DOCTYPE html>", http.StatusOK},
		{"/status.txt", "", "text/plain; charset=utf-8", "\norders  0          MIRRORING", http.StatusOK},
		{"/status.json", "", "application/json", `"clusterId":"c1"`, http.StatusOK},
		{"/console.js", "", "text/javascript; charset=utf-8", "status.json", http.StatusOK},
		{"/console.css", "", "text/css; charset=utf-8", ".chart", http.StatusOK},
		{"/index.html", "", "", "", http.StatusNotFound},
		{"/assets/console.js", "", "", "", http.StatusNotFound},
	} {
		resp, body := get(t, server.URL+tc.path, tc.accept)
		if resp.StatusCode != tc.code || tc.code == http.StatusOK && (resp.Header.Get("Content-Type") != tc.contentType || !strings.Contains(body, tc.contains)) {
			t.Errorf("GET %s (Accept %q): %d %q, want %d %q containing %q\n%.300s", tc.path, tc.accept, resp.StatusCode,
				resp.Header.Get("Content-Type"), tc.code, tc.contentType, tc.contains, body)
		}
	}
	if resp, err := http.Post(server.URL+"/status.json", "application/json", nil); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /status.json: %v %v, want 405", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
}

// /status.json is the model: what it decodes to is what Status built.
func TestJSONView(t *testing.T) {
	source, clock, c := newFake(4)
	source.set(engine.MirrorReport{Name: "east", SourceBootstrap: "127.0.0.1:9", SourceUnreachableSince: clock.Now().Add(-time.Minute),
		SourceError: "EOF", Partitions: []engine.MirrorPartitionReport{mirroring("orders", 0, 10, 2)},
		ACLSync: engine.SyncStatus{Err: "off"}})
	c.Sample()
	clock.advance(10 * time.Second)
	c.Sample()
	server := httptest.NewServer(c.Handler())
	defer server.Close()
	_, body := get(t, server.URL+"/status.json", "")
	var got Status
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	want := c.Status()
	wantJSON, _ := json.Marshal(want)
	gotJSON, _ := json.Marshal(got)
	if string(wantJSON) != string(gotJSON) {
		t.Errorf("status.json\n%s\nwant\n%s", gotJSON, wantJSON)
	}
	m := got.Mirrors[0]
	if m.SourceReachable || m.SourceUnreachableSince == nil || m.ACLSync.Error != "off" || m.ACLSync.At != nil || len(m.History) != 2 ||
		got.SampleIntervalSeconds != 10 || got.SamplesMax != 4 || got.Failed == nil || got.Offline == nil {
		t.Errorf("status.json: %s", body)
	}
	for _, key := range []string{`"failed":[]`, `"offline":[]`, `"lagRecords":2`, `"bytesPerSecond":0`, `"dryRun":{`, `"groupSync":{`,
		`"configSync":{`, `"transactionSync":{`} {
		if !strings.Contains(body, key) {
			t.Errorf("status.json lacks %s: %s", key, body)
		}
	}
}

func TestWantsText(t *testing.T) {
	for _, tc := range []struct {
		accept []string
		want   bool
	}{
		{nil, false},
		{[]string{"text/plain"}, true},
		{[]string{"text/plain; charset=utf-8"}, true},
		{[]string{"application/json", "text/plain"}, true},
		{[]string{"text/plain, text/html"}, false},
		{[]string{"text/plain", "text/html"}, false},
		{[]string{"text/plain, text/html; q=0"}, true},
		{[]string{"text/plain, text/html; q=0.000"}, true},
		{[]string{"text/plain; q=0, text/html"}, false},
		{[]string{"*/*"}, false},
		{[]string{"text/plain; q=0.5"}, true},
		{[]string{"text/plain; q=bad"}, false},
		{[]string{"garbage;;"}, false},
	} {
		if got := wantsText(tc.accept); got != tc.want {
			t.Errorf("Accept %q: text %v, want %v", tc.accept, got, tc.want)
		}
	}
}
