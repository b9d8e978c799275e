package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/mirrord/mirrord"
)

// runServe is `mirrord serve`: the Kafka-protocol node, built on the
// embedding API (mirrord.Open, ListenAndServe). The flags become
// server.properties keys over the --config file's. SIGTERM or SIGINT
// stops it cleanly: listeners close, logs are synced and closed.
func runServe(args []string) error {
	flags := flag.NewFlagSet("serve", flag.ContinueOnError)
	dataDir := flags.String("data-dir", "", "data directory (required)")
	listen := flags.String("listen", "127.0.0.1:9092", "Kafka PLAINTEXT listener HOST:PORT")
	httpListen := flags.String("http-listen", "", "HTTP listener HOST:PORT for /metrics, /healthz and the status page at / (empty: none)")
	flags.String("advertise", "", "HOST:PORT clients of the PLAINTEXT listener are told to connect to (default: the listener's address)")
	declareListenerFlags(flags)
	configFile := flags.String("config", "", "node config file: Kafka's server.properties names (flags win over it)")
	logFormat := flags.String("log-format", "text", "log lines on stderr: text (key=value) or json (one object a line)")
	declarePropertyFlags(flags)
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", flags.Arg(0))
	}
	logger, err := mirrord.NewLogger(os.Stderr, *logFormat, slog.LevelInfo)
	if err != nil {
		return fmt.Errorf("serve: --log-format: %w", err)
	}
	props, err := serveProperties(*configFile, *listen, flags)
	if err != nil {
		return err
	}
	if *dataDir == "" && props["log.dirs"] == "" && props["log.dir"] == "" {
		return errors.New("serve: --data-dir is required")
	}
	tuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	node, err := mirrord.Open(mirrord.Config{DataDir: *dataDir, Logger: logger, Properties: props})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	boundMemory(node.MemoryCeiling())
	if *httpListen != "" {
		if err := serveHTTP(ctx, *httpListen, httpHandler(node, logger), logger); err != nil {
			return errors.Join(err, node.Close())
		}
	}
	serveErr := node.ListenAndServe(ctx)
	closeErr := node.Close()
	logger.Info("stopped", "serve_error", serveErr, "close_error", closeErr)
	return errors.Join(serveErr, closeErr)
}

// boundMemory sets the Go runtime's soft memory limit to the node's
// memory ceiling (which Open logged) unless GOMEMLIMIT is set, so that
// garbage under serve's GOGC cannot carry the process past it.
func boundMemory(ceiling int64) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(ceiling)
	}
}

// serveHTTP serves handler on addr until ctx is done.
func serveHTTP(ctx context.Context, addr string, handler http.Handler, logger *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: http listen %s: %w", addr, err)
	}
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http listener failed", "error", err)
		}
	}()
	context.AfterFunc(ctx, func() { server.Close() })
	return nil
}

// httpHandler is the HTTP listener's routes: the node's /metrics and
// /healthz (mirrord.Node.HTTPHandler), and a plain-text status page at /.
func httpHandler(node *mirrord.Node, logger *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", node.HTTPHandler())
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, logDirLine(node.LogDirSpace()))
		if err := writeStatus(w, node.Cluster(), node.Mirrors(), node.OfflineLogs()...); err != nil {
			logger.Info("status page not written", "error", err)
		}
	})
	return mux
}

// writeStatus writes the status page: the node, its offline partitions
// with their errors, then each mirror with
// whether its source answers, its consumer group offset sync in one
// line, and its partitions' state and lag (in
// records and in time, as /metrics reports them; "-" while the source
// high watermark is unknown, ">=N" while it is older than the staleness
// bound, with its age beside it).
func writeStatus(w io.Writer, cluster mirrord.ClusterInfo, mirrors []mirrord.MirrorReport, offline ...mirrord.OfflineLog) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "mirrord node %d, cluster %s, %s\n", cluster.NodeID, cluster.ClusterID, net.JoinHostPort(cluster.Host, strconv.Itoa(int(cluster.Port))))
	writeOfflineStatus(tw, offline) // offline.go: before the mirrors
	if len(mirrors) == 0 {
		fmt.Fprintln(tw, "\nno mirrors")
	}
	for _, m := range mirrors {
		fmt.Fprintf(tw, "\nmirror %s: source %s (cluster %s), %d partitions%s\n", m.Name, m.SourceBootstrap, m.SourceClusterID, len(m.Partitions), stateCounts(m.Partitions))
		if !m.SourceUnreachableSince.IsZero() {
			fmt.Fprintf(tw, "%s\n", unreachableText(m.SourceUnreachableSince.UnixMilli(), m.SourceError, time.Now()))
		}
		fmt.Fprintf(tw, "%s\n", groupSyncStatusLine(m.GroupSync, time.Now()))
		fmt.Fprintf(tw, "%s\n", aclSyncLine(m.ACLSync.At, m.ACLSync.Duration, m.ACLSync.Synced, m.ACLSync.Errors, m.ACLSync.Err, time.Now()))
		if len(m.Partitions) == 0 {
			continue
		}
		stale := 0
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTATE\tSOURCE HW\tHW AGE\tLOG END\tLAG RECORDS\tLAG SECONDS\tBYTES")
		for _, p := range m.Partitions {
			lag := "-"
			if p.LagRecords >= 0 {
				lag = strconv.FormatInt(p.LagRecords, 10)
			}
			if p.LagRecords >= 0 && p.LagLowerBound {
				lag, stale = ">="+lag, stale+1
			}
			age := int64(-1) // unknown
			if p.SourceHighWatermarkAge >= 0 {
				age = p.SourceHighWatermarkAge.Milliseconds()
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\t%s\t%.3f\t%d\n", p.Topic, p.Partition, p.State, p.SourceHighWatermark,
				ageText(age), p.LogEndOffset, lag, p.Lag.Seconds(), p.Bytes)
		}
		if stale > 0 {
			fmt.Fprintf(tw, "%d partitions: the source high watermark is older than %v, so their lag is a lower bound (>=).\n", stale, m.StaleAfter)
		}
	}
	return tw.Flush()
}

// groupSyncStatusLine is the status page's line on a mirror's group
// offset sync: the round, then the groups' offset lag, its sum and the
// group with the most.
func groupSyncStatusLine(g mirrord.GroupSyncStatus, now time.Time) string {
	text := groupSyncLine(g.At, g.Duration, g.Synced, g.Skipped, g.Errors, g.Err, now)
	if len(g.Lag) == 0 {
		return text
	}
	var total int64
	most := ""
	for group, lag := range g.Lag {
		total += lag
		if most == "" || lag > g.Lag[most] || lag == g.Lag[most] && group < most {
			most = group
		}
	}
	return fmt.Sprintf("%s; offset lag %d over %d groups (most: %s %d)", text, total, len(g.Lag), most, g.Lag[most])
}

// stateCounts is ": 3 MIRRORING, 1 FAILED" (states in name order).
func stateCounts(partitions []mirrord.MirrorPartitionReport) string {
	counts := map[string]int{}
	for _, p := range partitions {
		counts[p.State.String()]++
	}
	states := make([]string, 0, len(counts))
	for state := range counts {
		states = append(states, state)
	}
	sort.Strings(states)
	var b strings.Builder
	separator := ": "
	for _, state := range states {
		fmt.Fprintf(&b, "%s%d %s", separator, counts[state], state)
		separator = ", "
	}
	return b.String()
}

// gcPercent is the GC target serve runs with unless GOGC is set. The
// mirror's source client allocates one buffer per fetch response (up to
// fetch.response.max.bytes); at Go's default of 100 the collector ran
// often enough to be a third of the mirror's CPU (bench/mirror_test.go).
// Live memory here is small (indexes are mapped, records are in the page
// cache), so a higher target costs little.
const gcPercent = 400

func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}
