package console

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/netio"
)

// Source is what the console reads of a node; *engine.Node satisfies it.
type Source interface {
	Cluster() netio.ClusterInfo
	MirrorReports() []engine.MirrorReport
	OfflineLogs() []netio.OfflineLog
	LogDirSpace() broker.LogDirSpace
}

// Options shape the console's history. The zero value is one sample every
// 10 seconds, the last hour (360 samples) kept.
type Options struct {
	SampleInterval time.Duration // 0: DefaultSampleInterval
	Samples        int           // per mirror; 0: DefaultSamples
	// Now is the clock (nil: time.Now); tests give a fake one.
	Now func() time.Time
	// Logger notes the pages that could not be written (nil: discard).
	Logger *slog.Logger
}

// The history's default shape: one sample every 10 seconds, the last
// hour kept.
const (
	DefaultSampleInterval = 10 * time.Second
	DefaultSamples        = 360
	samplesMax            = 100_000 // a bound on Options.Samples: 100,000 samples of 40 bytes per mirror
)

//go:embed assets
var assets embed.FS

// Console is the web console of one node. Its methods are safe for
// concurrent use.
type Console struct {
	src    Source
	now    func() time.Time
	logger *slog.Logger

	mu      sync.Mutex // guards history
	history *history
}

// New is a console of src; Run samples its history.
func New(src Source, opts Options) *Console {
	if opts.SampleInterval <= 0 {
		opts.SampleInterval = DefaultSampleInterval
	}
	if opts.Samples <= 0 {
		opts.Samples = DefaultSamples
	}
	opts.Samples = min(opts.Samples, samplesMax)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Console{src: src, now: opts.Now, logger: opts.Logger, history: newHistory(opts.SampleInterval, opts.Samples)}
}

// Run samples the history now and then every sample interval until ctx
// is done. Its caller waits for it to return.
func (c *Console) Run(ctx context.Context) {
	ticker := time.NewTicker(c.history.interval)
	defer ticker.Stop()
	for {
		c.Sample()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Sample takes one sample of every mirror now (Run calls it).
func (c *Console) Sample() {
	reports := c.src.MirrorReports() // outside the lock: it takes the node's
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.history.add(reports, now)
}

// Status reads the node now, with the history's throughput and samples.
func (c *Console) Status() Status {
	cluster, space, reports, offline := c.src.Cluster(), c.src.LogDirSpace(), c.src.MirrorReports(), c.src.OfflineLogs()
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	return build(cluster, space, reports, offline, c.history, now)
}

// Handler serves the console: / (the page; the text view for a client
// that accepts text/plain and not text/html), /status.txt, /status.json
// and the page's script and style sheet. Other paths are not found.
func (c *Console) Handler() http.Handler {
	files, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("console: embedded assets: " + err.Error()) // the go:embed line guarantees the folder
	}
	static := http.FileServerFS(files)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if wantsText(r.Header.Values("Accept")) {
			c.serveText(w)
			return
		}
		page, err := assets.ReadFile("assets/index.html")
		if err != nil {
			panic("console: embedded index.html: " + err.Error())
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(page)
	})
	mux.HandleFunc("GET /status.txt", func(w http.ResponseWriter, _ *http.Request) { c.serveText(w) })
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err := json.NewEncoder(w).Encode(c.Status()); err != nil {
			c.logger.Info("console: status.json not written", "error", err)
		}
	})
	mux.Handle("GET /console.js", static)
	mux.Handle("GET /console.css", static)
	return mux
}

func (c *Console) serveText(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := WriteText(w, c.Status()); err != nil {
		c.logger.Info("console: status.txt not written", "error", err)
	}
}

// wantsText reports whether an Accept header asks for text/plain and not
// for text/html (a media range with q=0 is refused, not asked for).
func wantsText(accept []string) bool {
	plain, html := false, false
	for _, header := range accept {
		for _, item := range strings.Split(header, ",") {
			media, params, err := mime.ParseMediaType(strings.TrimSpace(item))
			if err != nil {
				continue
			}
			if q, set := params["q"]; set {
				if weight, err := strconv.ParseFloat(q, 64); err != nil || weight <= 0 {
					continue
				}
			}
			switch media {
			case "text/plain":
				plain = true
			case "text/html":
				html = true
			}
		}
	}
	return plain && !html
}
