package mirrord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/mirrord/mirrord/console"
	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/netio"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ErrNoDataDir is Open's error for a Config without a data directory
// (neither DataDir nor log.dirs).
var ErrNoDataDir = errors.New("mirrord: no data directory: Config.DataDir or log.dirs")

// Config is what Open needs: where the node keeps its data, where it
// logs, and its settings.
type Config struct {
	// DataDir is the node's data directory; empty: the log.dirs (or
	// log.dir) of Properties, one directory.
	DataDir string
	// Logger receives the node's log, one record per event (NewLogger
	// makes one in text or JSON); nil: the node logs nothing.
	Logger *slog.Logger
	// Properties are the node's settings by Kafka's server.properties
	// names (LoadProperties reads a file): listeners, ssl.*, sasl.*,
	// max.connections, message.max.bytes, log.retention.*, the
	// transaction coordinator's, log.cleaner.*, group.consumer.*,
	// authorizer.class.name, ... and mirrord's own mirror.config.files.dir,
	// log.dir.reserve.bytes, log.open.files.max and
	// log.index.cache.max.bytes. A key mirrord does not take is an error
	// naming it. Open does not keep or change the map.
	Properties map[string]string
}

// Node is one mirrord node open on its data directory: a Kafka node
// (topics, partitions, produce, fetch, transactions, consumer groups,
// ACLs) and the mirrors that write into it. Its methods may be called
// from any goroutine.
type Node struct {
	engine    *engine.Node
	logger    *slog.Logger
	server    *netio.Server // every listener's: the connection limits are the node's
	limits    netio.Config
	listeners []listenerConfig
	sasl      saslProperties
	// advertiseOnce sets the node's address to the first listener
	// served's advertised address.
	advertiseOnce sync.Once

	// web is the web console of HTTPHandler; consoleOnce starts its
	// history's sampling (on the first HTTPHandler), which Close stops
	// with stopConsole and waits for on consoleDone.
	web         *console.Console
	consoleOnce sync.Once
	stopConsole context.CancelFunc
	consoleDone chan struct{}
}

// Open opens the node of cfg's data directory (creating it on first
// use), replays its logs and starts the mirrors persisted there. It
// serves nothing until Serve, ServeListener or ListenAndServe; Close
// closes it.
func Open(cfg Config) (*Node, error) {
	s, err := parseSettings(cfg)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s.node.Logger = logger
	var node *engine.Node
	if s.cluster != nil {
		node, err = engine.OpenClusterNode(s.node, *s.cluster)
	} else {
		node, err = engine.OpenNode(s.node)
	}
	if err != nil {
		return nil, err
	}
	n := &Node{engine: node, logger: logger, limits: s.limits, listeners: s.listeners, sasl: s.sasl,
		web: console.New(node, console.Options{SampleInterval: s.console.SampleInterval, Samples: s.console.Samples, Logger: logger})}
	limits := s.limits
	limits.Backend, limits.Logger, limits.NoAutoCreateTopics = node.Backend(), logger, s.node.AutoCreateTopicsDisable
	limits.ScramCredentials, limits.Authorizer, limits.Metrics = node.ScramCredentials(), node.Authorizer(), node.Metrics()
	n.server = netio.NewServer(limits)
	logger.Info("node open", "data_dir", s.node.DataDir, "cluster_id", node.Cluster().ClusterID, "topics", len(node.Topics()))
	l := n.limits.WithDefaults()
	logger.Info("memory ceiling", "ceiling_bytes", n.MemoryCeiling(), "queued_max_request_bytes", l.QueuedMaxRequestBytes,
		"max_connections", l.MaxConnections, "connection_fixed_bytes", netio.ConnectionFixedBytes,
		"decompression_bytes", int64(decompressionBytes), "base_bytes", netio.BaseMemoryBytes)
	return n, nil
}

// Close stops every mirror and closes the node's logs (synced). Stop
// serving first: cancel the contexts of Serve, ServeListener and
// ListenAndServe and let them return.
func (n *Node) Close() error {
	n.consoleOnce.Do(func() {}) // no sampling starts after this
	if n.stopConsole != nil {
		n.stopConsole()
		<-n.consoleDone
	}
	return n.engine.Close()
}

// Admin is the node's mirror administration: what `mirrord mirrors`
// does over the network, in this process.
func (n *Node) Admin() Admin {
	return localAdmin{MirrorAdmin: n.engine.Backend().(netio.MirrorBackend).Mirrors(), node: n} // a cluster node's: etcd's mirrors
}

// Mirrors reports every mirror of the node, by name: its partitions'
// states, lag in records and in time, bytes mirrored, and its syncs.
func (n *Node) Mirrors() []MirrorReport { return n.engine.MirrorReports() }

// Cluster is the node's cluster ID, node ID and address (the first
// listener served's advertised address).
func (n *Node) Cluster() ClusterInfo { return n.engine.Cluster() }

// OfflineLogs are the partitions the node could not open, with why.
func (n *Node) OfflineLogs() []OfflineLog { return n.engine.OfflineLogs() }

// LogDirSpace is the data directory's free space and reserve.
func (n *Node) LogDirSpace() LogDirSpace { return n.engine.LogDirSpace() }

// Metrics is the node's Prometheus registry: the mirrors' series
// (mirrord_mirror_*), the log directory's and the listeners'.
func (n *Node) Metrics() prometheus.Gatherer { return n.engine.Metrics() }

// CreateTopic creates a writable topic of partitions partitions (0: the
// node's num.partitions) with configs (Kafka's topic configs, nil for
// the defaults), as a CreateTopics request would.
func (n *Node) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) error {
	if partitions == 0 {
		partitions = -1 // CreateTopics' "the broker's default"
	}
	if _, err := n.engine.CreateTopic(ctx, name, partitions, configs, false); err != nil {
		return fmt.Errorf("mirrord: create topic %s: %w", name, err)
	}
	return nil
}

// Offsets are the offsets of a partition of the node.
func (n *Node) Offsets(topic string, partition int32) (Offsets, error) {
	p, err := n.engine.Partition(topic, partition)
	if err != nil {
		return Offsets{}, fmt.Errorf("mirrord: %s-%d: %w", topic, partition, err)
	}
	return p.Offsets(), nil
}

// MemoryCeiling is the most memory the node's request handling may hold
// (the queued.max.request.bytes and max.connections of its listeners
// plus the fixed costs, README "Memory"); Open logs it with its terms.
// A process whose main work is
// the node may pass it to debug.SetMemoryLimit, as `mirrord serve` does.
func (n *Node) MemoryCeiling() int64 {
	return netio.MemoryCeiling(n.limits.WithDefaults(), decompressionBytes)
}

// HTTPHandler serves the node's /metrics (its registry, plus the Go
// runtime's and the process's metrics), /healthz ("ok") and the web
// console (package console): the page at /, /status.txt and
// /status.json. Mount it on an HTTP server the caller owns; a path it
// does not serve is 404. The console's charts are sampled from the
// first call until Close.
func (n *Node) HTTPHandler() http.Handler {
	n.consoleOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		n.stopConsole, n.consoleDone = cancel, make(chan struct{})
		go func() {
			defer close(n.consoleDone)
			n.web.Run(ctx)
		}()
	})
	runtime := prometheus.NewRegistry()
	runtime.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := promhttp.HandlerFor(prometheus.Gatherers{n.engine.Metrics(), runtime},
		promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(n.logger.Handler(), slog.LevelError)})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("/", n.web.Handler())
	return mux
}

// LogFormats are NewLogger's formats.
var LogFormats = []string{"text", "json"}

// NewLogger is a logger writing one line per event to w, at level and
// above: "text" is slog's key=value text, "json" one JSON object a line.
// Another format is an error naming it.
func NewLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	options := &slog.HandlerOptions{Level: level}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, options)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, options)), nil
	}
	return nil, fmt.Errorf("mirrord: log format %q: want %s", format, strings.Join(LogFormats, " or "))
}
