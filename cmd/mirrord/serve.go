package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
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
	httpListen := flags.String("http-listen", "", "HTTP listener HOST:PORT for /metrics, /healthz and the web console at / (/status.txt in plain text; empty: none)")
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
		if err := serveHTTP(ctx, *httpListen, node.HTTPHandler(), logger); err != nil {
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
