package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mirrord/mirrord/console"
	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	"github.com/mirrord/mirrord/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// runServe is `mirrord serve`: the Kafka-protocol node. SIGTERM or SIGINT
// stops it cleanly: listeners close, logs are synced and closed.
func runServe(args []string) error {
	flags := flag.NewFlagSet("serve", flag.ContinueOnError)
	dataDir := flags.String("data-dir", "", "data directory (required)")
	flags.String("listen", "127.0.0.1:9092", "Kafka PLAINTEXT listener HOST:PORT")
	httpListen := flags.String("http-listen", "", "HTTP listener HOST:PORT for /metrics, /healthz and the web console at / (/status.txt in plain text; empty: none)")
	flags.String("advertise", "", "HOST:PORT clients of the PLAINTEXT listener are told to connect to (default: the listener's address)")
	declareListenerFlags(flags)
	configFile := flags.String("config", "", "node config file: Kafka's server.properties names (flags win over it)")
	messageMaxBytes := flags.Int("message-max-bytes", engine.DefaultMessageMaxBytes, "largest record batch a Produce may write to a topic without max.message.bytes (Kafka's message.max.bytes)")
	txnConfig := transactionFlags(flags)
	cleanerConfig := cleanerFlags(flags)
	consumerGroups := consumerGroupFlags(flags)
	authorizerFlags(flags)
	if err := flags.Parse(args); err != nil {
		return err
	}
	cleaner, err := cleanerConfig()
	if err != nil {
		return err
	}
	transactions, err := txnConfig()
	if err != nil {
		return err
	}
	session, heartbeat, err := consumerGroups()
	if err != nil {
		return err
	}
	file, err := readServeConfig(*configFile, flags)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	flags.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["data-dir"] && file.dataDir != "" {
		*dataDir = file.dataDir
	}
	saslProps, err := takeSASLProperties(file.props)
	if err != nil {
		return err
	}
	limits, err := takeConnectionProperties(file.props)
	if err != nil {
		return err
	}
	nodeConfig := engine.NodeConfig{FS: vfs.OS, Log: logstore.DefaultConfig(), MessageMaxBytes: int32(*messageMaxBytes), Transactions: transactions,
		Cleaner: cleaner, ConsumerSessionTimeout: session, ConsumerHeartbeatInterval: heartbeat, MirrorConfigFilesDir: file.mirrorConfigFilesDir,
		LogDirReserveBytes: file.logDirReserveBytes}
	nodeConfig.Log.OpenFilesMax, nodeConfig.Log.IndexCacheBytesMax = file.openFilesMax, file.indexCacheBytesMax
	if err := nodeConfig.ApplyServerProperties(file.props); err != nil {
		return fmt.Errorf("serve: --config %s: %w", *configFile, err)
	}
	switch {
	case *dataDir == "":
		return errors.New("serve: --data-dir is required")
	case *messageMaxBytes < 1 || *messageMaxBytes > math.MaxInt32:
		return fmt.Errorf("serve: --message-max-bytes %d out of range [1, %d]", *messageMaxBytes, math.MaxInt32)
	case flags.NArg() > 0:
		return fmt.Errorf("serve: unexpected argument %q", flags.Arg(0))
	}
	tuneGC()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	_, goMemLimitSet := os.LookupEnv("GOMEMLIMIT")
	boundMemory(limits, logger, goMemLimitSet)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	bound, err := bindListeners(file.listeners)
	if err != nil {
		return err
	}
	closeAll := func() {
		for _, b := range bound {
			b.ln.Close()
		}
	}
	// The node's own address is its first listener's.
	nodeConfig.DataDir, nodeConfig.Host, nodeConfig.Port, nodeConfig.Logger = *dataDir, bound[0].AdvertisedHost, bound[0].AdvertisedPort, logger
	node, err := engine.OpenNode(nodeConfig)
	if err != nil {
		closeAll()
		return err
	}
	stopConsole := func() {}
	defer func() { stopConsole() }() // the error returns below; the normal end stops it before node.Close
	if *httpListen != "" {
		var handler http.Handler
		handler, stopConsole = httpHandler(ctx, node, logger)
		if err := serveHTTP(ctx, *httpListen, handler, logger); err != nil {
			stopConsole()
			closeAll()
			node.Close()
			return err
		}
	}
	for i := range bound {
		if !bound[i].Protocol.UsesSASL() {
			continue
		}
		if bound[i].SASL, err = saslProps.listenerSASL(ctx, bound[i].Name, node.ScramCredentials()); err != nil {
			closeAll()
			node.Close()
			return err
		}
	}
	limits.Backend, limits.Logger, limits.NoAutoCreateTopics = node, logger, nodeConfig.AutoCreateTopicsDisable
	limits.ScramCredentials, limits.Authorizer, limits.Metrics = node.ScramCredentials(), node.Authorizer(), node.Metrics()
	server := netio.NewServer(limits)
	serveErrs := make(chan error, len(bound))
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	waitJWKSRefresh := runJWKSRefresh(serveCtx, bound, logger)
	for _, b := range bound {
		logger.Info("serving", "listener", b.Name, "protocol", b.Protocol, "listen", b.ln.Addr().String(),
			"advertised", net.JoinHostPort(b.AdvertisedHost, strconv.Itoa(int(b.AdvertisedPort))))
		go func() { serveErrs <- server.ServeListener(serveCtx, b.ln, b.Listener) }()
	}
	logger.Info("node open", "data_dir", *dataDir, "cluster_id", node.Cluster().ClusterID, "topics", len(node.Topics()))
	var serveErr error
	for range bound { // one listener failing stops them all
		if err := <-serveErrs; err != nil {
			serveErr = errors.Join(serveErr, err)
			stopServing()
		}
	}
	stopServing()
	waitJWKSRefresh()
	stopConsole()
	closeErr := node.Close()
	logger.Info("stopped", "serve_error", serveErr, "close_error", closeErr)
	return errors.Join(serveErr, closeErr)
}

// transactionFlags declares the transaction coordinator's settings, with
// Kafka's broker config names and defaults, and returns what reads them
// after parsing.
func transactionFlags(flags *flag.FlagSet) func() (engine.TransactionConfig, error) {
	d := engine.DefaultTransactionConfig
	settings := []struct {
		name  string
		into  *time.Duration
		value *int64
	}{
		{"transaction.max.timeout.ms", &d.MaxTimeout, nil},
		{"transaction.abort.timed.out.transaction.cleanup.interval.ms", &d.AbortTimedOutInterval, nil},
		{"transactional.id.expiration.ms", &d.TransactionalIDExpiration, nil},
		{"producer.id.expiration.ms", &d.ProducerIDExpiration, nil},
	}
	for i := range settings {
		s := &settings[i]
		s.value = flags.Int64(strings.ReplaceAll(s.name, ".", "-"), s.into.Milliseconds(), "Kafka's "+s.name)
	}
	return func() (engine.TransactionConfig, error) {
		for _, s := range settings {
			if *s.value < 1 || *s.value > math.MaxInt32 {
				return d, fmt.Errorf("serve: --%s %d out of range [1, %d]", strings.ReplaceAll(s.name, ".", "-"), *s.value, math.MaxInt32)
			}
			*s.into = time.Duration(*s.value) * time.Millisecond
		}
		return d, nil
	}
}

// consumerGroupFlags declares the consumer groups' (KIP-848) session
// timeout and heartbeat interval, with Kafka's broker config names and
// defaults, and returns what reads them after parsing.
func consumerGroupFlags(flags *flag.FlagSet) func() (session, heartbeat time.Duration, err error) {
	session, heartbeat := engine.DefaultConsumerGroupTimings()
	sessionMs := flags.Int64("group-consumer-session-timeout-ms", session.Milliseconds(), "Kafka's group.consumer.session.timeout.ms")
	heartbeatMs := flags.Int64("group-consumer-heartbeat-interval-ms", heartbeat.Milliseconds(), "Kafka's group.consumer.heartbeat.interval.ms")
	return func() (time.Duration, time.Duration, error) {
		switch {
		case *sessionMs < 1 || *sessionMs > math.MaxInt32:
			return 0, 0, fmt.Errorf("serve: --group-consumer-session-timeout-ms %d out of range [1, %d]", *sessionMs, math.MaxInt32)
		case *heartbeatMs < 1 || *heartbeatMs >= *sessionMs:
			return 0, 0, fmt.Errorf("serve: --group-consumer-heartbeat-interval-ms %d out of range [1, %d): it must be below the session timeout", *heartbeatMs, *sessionMs)
		}
		return time.Duration(*sessionMs) * time.Millisecond, time.Duration(*heartbeatMs) * time.Millisecond, nil
	}
}

// boundListener is a listener with its socket and advertised address.
type boundListener struct {
	netio.Listener
	ln net.Listener
}

// bindListeners opens every listener's socket, or none.
func bindListeners(listeners []serveListener) ([]boundListener, error) {
	var bound []boundListener
	for _, l := range listeners {
		ln, err := net.Listen("tcp", l.address)
		if err == nil {
			l.AdvertisedHost, l.AdvertisedPort, err = advertisedAddress(l.Name, l.advertised, ln.Addr().(*net.TCPAddr))
			if err != nil {
				ln.Close()
			}
		}
		if err != nil {
			for _, b := range bound {
				b.ln.Close()
			}
			return nil, fmt.Errorf("serve: listener %s on %s: %w", l.Name, l.address, err)
		}
		bound = append(bound, boundListener{Listener: l.Listener, ln: ln})
	}
	return bound, nil
}

func advertisedAddress(name, advertise string, listening *net.TCPAddr) (string, int32, error) {
	if advertise == "" {
		return listening.IP.String(), int32(listening.Port), nil
	}
	host, portText, err := net.SplitHostPort(advertise)
	if err != nil {
		return "", 0, fmt.Errorf("advertised address of %s %q: %w", name, advertise, err)
	}
	port, err := strconv.ParseInt(portText, 10, 32)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("advertised address of %s %q: bad port", name, advertise)
	}
	return host, int32(port), nil
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

// httpHandler is the HTTP listener's routes: /metrics (the node's registry,
// plus the Go runtime's and the process's metrics from a registry of this
// listener's own), /healthz, and the web console (package console) at /,
// /status.txt and /status.json, whose history is sampled until ctx is done
// or stop is called; stop waits for that.
func httpHandler(ctx context.Context, node *engine.Node, logger *slog.Logger) (handler http.Handler, stop func()) {
	runtime := prometheus.NewRegistry()
	runtime.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := promhttp.HandlerFor(prometheus.Gatherers{node.Metrics(), runtime},
		promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelError)})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	web := console.New(node, console.Options{Logger: logger})
	mux.Handle("/", web.Handler())
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		web.Run(ctx)
	}()
	return mux, func() { cancel(); <-done }
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
