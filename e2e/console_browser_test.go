package e2e

// The web console in a real browser: headless Chromium (Debian's package,
// scripts/install-chromium.sh) loads the page of a live mirrord node
// serving a mirror, runs its script (which fetches /status.json and draws
// the page) and dumps the DOM; the test checks what was rendered, and
// keeps a screenshot in .cache/artifacts/ (git-ignored).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mirrord/mirrord/mirrordtest"
)

const (
	consoleTestDeadline  = 3 * time.Minute
	consoleBrowserRun    = 60 * time.Second // one Chromium run
	consoleRenderTries   = 5                // DOM dumps until the page shows what is awaited
	consoleVirtualBudget = "5000"           // ms of virtual time the page gets to fetch and draw
	consoleRecords       = 200              // per partition
	consoleDOMBytesMax   = 16 << 20
)

// findChromium returns the Chromium to run: $MIRRORD_CHROMIUM, then
// .cache/bin/chromium (scripts/install-chromium.sh), then PATH. Missing,
// it fails the test under CI=true and skips it otherwise.
func findChromium(t *testing.T) string {
	t.Helper()
	return mirrordtest.Tool(t, "chromium", "MIRRORD_CHROMIUM", "scripts/install-chromium.sh", "chromium-browser")
}

// browser runs headless Chromium against one node's console.
type browser struct {
	t      *testing.T
	binary string
}

// run runs Chromium headless on url with args added, bounded by
// consoleBrowserRun and consoleDOMBytesMax, and returns its standard
// output.
func (b browser) run(ctx context.Context, url string, args ...string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, consoleBrowserRun)
	defer cancel()
	base := []string{"--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--hide-scrollbars",
		"--user-data-dir=" + b.t.TempDir(), "--virtual-time-budget=" + consoleVirtualBudget}
	if os.Geteuid() == 0 {
		base = append(base, "--no-sandbox") // Chromium refuses to run as root with its sandbox
	}
	cmd := exec.CommandContext(ctx, b.binary, append(append(base, args...), url)...)
	var stdout, stderr boundedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no end within %v: %w", consoleBrowserRun, err)
		}
		b.t.Fatalf("%s %s: %v\nstderr:\n%s", b.binary, strings.Join(cmd.Args[1:], " "), err, stderr.String())
	}
	return stdout.String()
}

// render dumps the page's DOM until it holds every pattern of want, or
// consoleRenderTries dumps were taken; it returns the last dump and what
// it lacked.
func (b browser) render(ctx context.Context, url string, want ...*regexp.Regexp) (string, []string) {
	b.t.Helper()
	var dom string
	var missing []string
	for range consoleRenderTries {
		dom = b.run(ctx, url, "--dump-dom")
		missing = missing[:0]
		for _, w := range want {
			if !w.MatchString(dom) {
				missing = append(missing, w.String())
			}
		}
		if len(missing) == 0 || ctx.Err() != nil {
			break
		}
	}
	return dom, missing
}

// screenshot saves the page as .cache/artifacts/name and logs where.
func (b browser) screenshot(ctx context.Context, url, name string) {
	b.t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".cache", "artifacts"))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	os.Remove(path)
	b.run(ctx, url, "--window-size=1280,1800", "--screenshot="+path)
	if info, err := os.Stat(path); err != nil || info.Size() == 0 {
		b.t.Errorf("screenshot %s not written: %v", path, err)
		return
	}
	b.t.Logf("screenshot of %s: %s", url, path)
}

// consoleStatus is the part of /status.json the test reads.
type consoleStatus struct {
	Node struct {
		ClusterID string `json:"clusterId"`
	} `json:"node"`
	Failed []struct {
		Mirror, Topic, Error string
	} `json:"failed"`
}

// throughputLine is the line of a rendered throughput chart; its
// submatch is the line's points.
var throughputLine = regexp.MustCompile(`<svg class="chart"[^>]*aria-label="throughput \(bytes/s\)"[^>]*>.*?<polyline class="series" points="([^"]+)"`)

// waitHistory polls the console's model until mirror's history holds at
// least samples samples, one of them with bytes mirrored since the one
// before; produce writes more to the source between polls, so that the
// mirror copies bytes across the sampling intervals (at most 600 polls).
func waitHistory(ctx context.Context, t *testing.T, base, mirror string, samples int, produce func()) {
	t.Helper()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for range 600 {
		_, body := httpGetText(ctx, t, base+"/status.json", "")
		var s struct {
			Mirrors []struct {
				Name    string `json:"name"`
				History []struct {
					BytesPerSecond float64 `json:"bytesPerSecond"`
				} `json:"history"`
			} `json:"mirrors"`
		}
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatalf("/status.json: %v\n%s", err, body)
		}
		for _, m := range s.Mirrors {
			moved := false
			for _, sample := range m.History {
				moved = moved || sample.BytesPerSecond > 0
			}
			if m.Name == mirror && len(m.History) >= samples && moved {
				return
			}
		}
		produce()
		select {
		case <-ctx.Done():
			t.Fatalf("mirror %s's history never held %d samples with bytes mirrored: %.2000s", mirror, samples, body)
		case <-poll.C:
		}
	}
	t.Fatalf("mirror %s's history never held %d samples with bytes mirrored in 600 polls", mirror, samples)
}

func httpGetText(ctx context.Context, t *testing.T, url, accept string) (string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
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
	body, err := io.ReadAll(io.LimitReader(resp.Body, consoleDOMBytesMax))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", url, resp.StatusCode, err, body)
	}
	return resp.Header.Get("Content-Type"), string(body)
}

func nodeClusterID(ctx context.Context, t *testing.T, base string) consoleStatus {
	t.Helper()
	_, body := httpGetText(ctx, t, base+"/status.json", "")
	var s consoleStatus
	if err := json.Unmarshal([]byte(body), &s); err != nil || s.Node.ClusterID == "" {
		t.Fatalf("/status.json: %v\n%s", err, body)
	}
	return s
}

// TestConsoleBrowser: a node mirroring three partitions from another
// node serves the console; Chromium renders the node's cluster ID, the
// mirror, a row per partition in MIRRORING and the charts. Then the
// source node mirrors the topic back from the mirror, a mirror loop its
// partitions refuse (FAILED): its console lists the FAILED partitions
// with their error first, before the mirrors. A page whose node stops
// answering keeps what it showed last under an error banner.
func TestConsoleBrowser(t *testing.T) {
	t.Parallel()
	chromium := browser{t: t, binary: findChromium(t)}
	ctx, cancel := context.WithTimeout(context.Background(), consoleTestDeadline)
	defer cancel()
	sourceHTTP, targetHTTP := freeAddress(t), freeAddress(t)
	source := startServer(t, "--http-listen", sourceHTTP)
	// The mirror samples its console's history every 200 ms, so that the
	// charts hold several points within the test.
	consoleConfig := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(consoleConfig, []byte("console.sample.interval.ms=200\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := startServer(t, "--http-listen", targetHTTP, "--config", consoleConfig)
	topics := map[string]int32{failoverTopic: 3}
	tps := topicPartitions(topics)
	createTopics(ctx, t, source.addr, topics)
	maker := newRecordMaker(newSeed(t))
	for _, tp := range tps {
		produceTo(ctx, t, newClient(t, source.addr, kgo.ProducerBatchCompression(kgo.Lz4Compression())), maker, tp, consoleRecords, newLedger())
	}
	startMirror(ctx, t, target, "east", source.addr)
	waitMirrorCaughtUp(ctx, t, source.addr, target.addr, tps)

	t.Run("mirroring", func(t *testing.T) {
		chromium.t = t
		base := "http://" + targetHTTP
		clusterID := nodeClusterID(ctx, t, base).Node.ClusterID
		if contentType, text := httpGetText(ctx, t, base+"/", "text/plain"); !strings.HasPrefix(contentType, "text/plain") ||
			!strings.Contains(text, "mirror east: source "+source.addr) {
			t.Errorf("/ with Accept text/plain: %s\n%s", contentType, text)
		}
		// More records while the history samples: the throughput chart
		// draws a line through several samples, some above zero.
		producer := newClient(t, source.addr)
		waitHistory(ctx, t, base, "east", 5, func() {
			for _, tp := range tps {
				produceTo(ctx, t, producer, maker, tp, 20, newLedger())
			}
		})
		waitMirrorCaughtUp(ctx, t, source.addr, target.addr, tps)
		dom, missing := chromium.render(ctx, base+"/",
			regexp.MustCompile(`<body data-rendered="true">`),
			throughputLine,
			regexp.MustCompile(`id="cluster-id">`+regexp.QuoteMeta(clusterID)+`<`),
			regexp.MustCompile(`class="mirror-name">east<`),
			regexp.MustCompile(`<tr class="partition-row" data-topic="orders" data-state="MIRRORING"><td class="topic">orders</td><td class="num">0</td><td class="state state-MIRRORING">MIRRORING</td>`),
			// The local log's leader epoch, then the source leader's, both known.
			regexp.MustCompile(`data-state="MIRRORING">(<td[^>]*>[^<]*</td>){5}<td class="num epoch">\d+ / \d+</td>`),
			regexp.MustCompile(`<svg class="chart"[^>]*aria-label="lag \(records\)"[^>]*>.*?<polyline class="series"`),
			regexp.MustCompile(`<svg class="chart"[^>]*aria-label="throughput \(bytes/s\)"`),
			regexp.MustCompile(`Failover dry run: a stop now would leave 0 records behind`),
			regexp.MustCompile(`<section id="failed" hidden="">`),
		)
		if len(missing) > 0 {
			t.Errorf("the rendered page lacks %q:\n%s", missing, dom)
		}
		// The throughput line goes through the samples (the first has no
		// rate), and rises above the axis (y 104 of the chart's 120) where
		// bytes were mirrored.
		if line := throughputLine.FindStringSubmatch(dom); line != nil {
			points, above := strings.Fields(line[1]), false
			for _, point := range points {
				_, y, _ := strings.Cut(point, ",")
				above = above || y != "104.0"
			}
			if len(points) < 4 || !above {
				t.Errorf("the throughput chart's line %q: want 4 samples or more, one above the axis", line[1])
			}
		}
		if rows := strings.Count(dom, `data-state="MIRRORING"`); rows != len(tps) {
			t.Errorf("%d MIRRORING rows rendered, want %d", rows, len(tps))
		}
		chromium.screenshot(ctx, base+"/", "console.png")
	})

	t.Run("failed-first", func(t *testing.T) {
		chromium.t = t
		// The source mirrors the topic from the mirror, which mirrors it
		// from the source: a loop, refused (FAILED).
		startMirror(ctx, t, source, "west", target.addr)
		waitDescribed(ctx, t, source, "west", func(p describedRow) bool {
			return p.State == "FAILED" && strings.Contains(p.Error, "mirror loop")
		})
		base := "http://" + sourceHTTP
		status := nodeClusterID(ctx, t, base)
		if len(status.Failed) != len(tps) || !strings.Contains(status.Failed[0].Error, "mirror loop") {
			t.Fatalf("/status.json failed: %+v, want %d partitions failed by the loop", status.Failed, len(tps))
		}
		dom, missing := chromium.render(ctx, base+"/",
			regexp.MustCompile(`<body data-rendered="true">`),
			regexp.MustCompile(`id="cluster-id">`+regexp.QuoteMeta(status.Node.ClusterID)+`<`),
			regexp.MustCompile(`<section id="failed"><h2>FAILED partitions: 3</h2>`),
			regexp.MustCompile(`<tr class="failed-row"><td>west</td><td class="topic">orders</td><td class="num">0</td><td class="state state-FAILED">FAILED</td><td>[A-Z_]+</td><td class="num">[^<]+</td><td class="error">[^<]*mirror loop`),
			regexp.MustCompile(`class="mirror-name">west<`),
			regexp.MustCompile(`<tr class="partition-row" data-topic="orders" data-state="FAILED">`),
		)
		if len(missing) > 0 {
			t.Errorf("the rendered page lacks %q:\n%s", missing, dom)
		}
		failed, mirrors := strings.Index(dom, `<section id="failed">`), strings.Index(dom, `<section id="mirrors">`)
		if failed < 0 || mirrors < 0 || failed > mirrors {
			t.Errorf("the FAILED partitions are not shown before the mirrors (at %d, mirrors at %d)", failed, mirrors)
		}
		chromium.screenshot(ctx, base+"/", "console-failed.png")
	})
	t.Run("node-stops-answering", func(t *testing.T) {
		chromium.t = t
		// In front of the node: the page's first fetch of /status.json
		// reaches it, the later ones find it gone (502), as when the node
		// stops while the page is open.
		node, err := url.Parse("http://" + targetHTTP)
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(node)
		var mu sync.Mutex
		fetches := 0
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			if r.URL.Path == "/" {
				fetches = 0 // a new page load
			}
			if r.URL.Path == "/status.json" {
				fetches++
			}
			gone := r.URL.Path == "/status.json" && fetches > 1
			mu.Unlock()
			if gone {
				http.Error(w, "node gone", http.StatusBadGateway)
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		defer front.Close()
		dom, missing := chromium.render(ctx, front.URL+"/",
			regexp.MustCompile(`<div id="banner" class="banner">The node does not answer \(status\.json: HTTP 502\); showing what it said last\.</div>`),
			regexp.MustCompile(`class="mirror-name">east<`), // what it said last
		)
		if len(missing) > 0 {
			t.Errorf("the rendered page lacks %q:\n%s", missing, dom)
		}
	})
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("the test took longer than %v", consoleTestDeadline)
	}
}
