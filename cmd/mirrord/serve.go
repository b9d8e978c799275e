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
	"strconv"
	"syscall"
	"time"

	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	"github.com/mirrord/mirrord/vfs"
)

// runServe is `mirrord serve`: the Kafka-protocol node. SIGTERM or SIGINT
// stops it cleanly: listeners close, logs are synced and closed.
func runServe(args []string) error {
	flags := flag.NewFlagSet("serve", flag.ContinueOnError)
	dataDir := flags.String("data-dir", "", "data directory (required)")
	listen := flags.String("listen", "127.0.0.1:9092", "Kafka listener HOST:PORT")
	httpListen := flags.String("http-listen", "", "HTTP listener HOST:PORT for /healthz (empty: none)")
	advertise := flags.String("advertise", "", "HOST:PORT clients are told to connect to (default: the listener's address)")
	configFile := flags.String("config", "", "node config file (not supported yet)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	switch {
	case *dataDir == "":
		return errors.New("serve: --data-dir is required")
	case *configFile != "":
		return errors.New("serve: --config is not supported yet: this build takes its settings from flags")
	case flags.NArg() > 0:
		return fmt.Errorf("serve: unexpected argument %q", flags.Arg(0))
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("serve: listen %s: %w", *listen, err)
	}
	host, port, err := advertisedAddress(*advertise, ln.Addr().(*net.TCPAddr))
	if err != nil {
		ln.Close()
		return err
	}
	node, err := engine.OpenNode(engine.NodeConfig{FS: vfs.OS, DataDir: *dataDir, Log: logstore.DefaultConfig(), Host: host, Port: port, Logger: logger})
	if err != nil {
		ln.Close()
		return err
	}
	if *httpListen != "" {
		if err := serveHTTP(ctx, *httpListen, logger); err != nil {
			ln.Close()
			node.Close()
			return err
		}
	}
	logger.Info("serving", "listen", ln.Addr().String(), "advertised", net.JoinHostPort(host, strconv.Itoa(int(port))),
		"data_dir", *dataDir, "cluster_id", node.Cluster().ClusterID, "topics", len(node.Topics()))
	serveErr := netio.NewServer(netio.Config{Backend: node, Logger: logger}).Serve(ctx, ln)
	closeErr := node.Close()
	logger.Info("stopped", "serve_error", serveErr, "close_error", closeErr)
	return errors.Join(serveErr, closeErr)
}

func advertisedAddress(advertise string, listening *net.TCPAddr) (string, int32, error) {
	if advertise == "" {
		return listening.IP.String(), int32(listening.Port), nil
	}
	host, portText, err := net.SplitHostPort(advertise)
	if err != nil {
		return "", 0, fmt.Errorf("serve: --advertise %q: %w", advertise, err)
	}
	port, err := strconv.ParseInt(portText, 10, 32)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("serve: --advertise %q: bad port", advertise)
	}
	return host, int32(port), nil
}

// serveHTTP starts the HTTP listener (/healthz) until ctx is done.
func serveHTTP(ctx context.Context, addr string, logger *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: http listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http listener failed", "error", err)
		}
	}()
	context.AfterFunc(ctx, func() { server.Close() })
	return nil
}
