package netio

// Connection limits, with Kafka's names and semantics: max.connections
// (the node's connections on all listeners), max.connections.per.ip and
// its overrides (a connection from a host at its limit is closed as soon
// as it is accepted, as Kafka's ConnectionQuotas does), and
// connections.max.idle.ms (a connection that sends no request for that
// long is closed). Refusals and idle closes are counted in /metrics and
// logged through the rate limiter of logsafe.go: a client opens
// connections at will.

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	defaultMaxConnections = 4096
	// DefaultMaxConnectionsPerIP is max.connections.per.ip when unset.
	// Kafka's default is unbounded; here one host may hold a quarter of
	// max.connections' default, so idle sockets from one address (issue
	// 19: 4,096 of them locked every client out) cannot take the node.
	DefaultMaxConnectionsPerIP = 1024
	// DefaultConnectionsMaxIdle is connections.max.idle.ms' default, as
	// Kafka's.
	DefaultConnectionsMaxIdle = 10 * time.Minute
	// DefaultFrameReadTimeout bounds reading the rest of a request once its
	// first byte arrived. Kafka has no such bound (its idle timer counts
	// any byte as activity, so a frame dribbled a byte at a time lives
	// forever); 30 s is its clients' request.timeout.ms, in which a
	// client expects its whole request answered.
	DefaultFrameReadTimeout = 30 * time.Second
)

// Refusal reasons, the reason label of mirrord_connections_refused_total.
const (
	refusedMaxConnections = "max_connections"
	refusedPerIP          = "per_ip"
	refusedShutdown       = "shutdown" // accepted as the listener closed
)

// ErrConnectionsConfig is a connection limit that cannot be used.
var ErrConnectionsConfig = errors.New("netio: connection limits")

// ParseMaxConnectionsPerIPOverrides parses max.connections.per.ip.overrides
// as Kafka does: "host:count,host:count", each entry split at its last
// colon (so an IPv6 address keeps its own), spaces around the parts
// ignored, a host name resolved to its first address. The map is keyed by
// IP address.
func ParseMaxConnectionsPerIPOverrides(text string) (map[string]int, error) {
	overrides := map[string]int{}
	if strings.TrimSpace(text) == "" {
		return overrides, nil
	}
	for _, entry := range strings.Split(text, ",") {
		i := strings.LastIndex(entry, ":")
		if i < 0 {
			return nil, fmt.Errorf("%w: max.connections.per.ip.overrides entry %q is not host:count", ErrConnectionsConfig, strings.TrimSpace(entry))
		}
		host, countText := strings.TrimSpace(entry[:i]), strings.TrimSpace(entry[i+1:])
		count, err := strconv.ParseInt(countText, 10, 32)
		if err != nil || count < 0 {
			return nil, fmt.Errorf("%w: max.connections.per.ip.overrides entry %q: count %q", ErrConnectionsConfig, strings.TrimSpace(entry), countText)
		}
		ip := net.ParseIP(strings.Trim(host, "[]"))
		if ip == nil {
			addrs, err := net.LookupIP(host)
			if err != nil || len(addrs) == 0 {
				return nil, fmt.Errorf("%w: max.connections.per.ip.overrides host %q: %v", ErrConnectionsConfig, host, err)
			}
			ip = addrs[0]
		}
		overrides[ip.String()] = int(count)
	}
	return overrides, nil
}

// connectionMetrics are the listeners' connection gauges and counters.
type connectionMetrics struct {
	open        *prometheus.GaugeVec   // mirrord_connections{listener}
	refused     *prometheus.CounterVec // mirrord_connections_refused_total{listener,reason}
	idleClosed  *prometheus.CounterVec // mirrord_connections_idle_closed_total{listener}
	queuedBytes prometheus.Gauge       // mirrord_request_queue_bytes
}

// newConnectionMetrics makes the metrics and registers them with
// registerer when it is not nil (a registry holding them already, from
// another Server, lends its own).
func newConnectionMetrics(registerer prometheus.Registerer) (connectionMetrics, error) {
	m := connectionMetrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mirrord_connections",
			Help: "Open client connections, by listener."}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mirrord_connections_refused_total",
			Help: "Connections closed as accepted, by listener and reason (max_connections, per_ip, shutdown)."}, []string{"listener", "reason"}),
		idleClosed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mirrord_connections_idle_closed_total",
			Help: "Connections closed after connections.max.idle.ms without a request, by listener."}, []string{"listener"}),
		queuedBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mirrord_request_queue_bytes",
			Help: "Request bytes held in memory now, of queued.max.request.bytes."}),
	}
	if registerer == nil {
		return m, nil
	}
	var errs, err error
	if m.open, err = registered(registerer, m.open); err != nil {
		errs = errors.Join(errs, err)
	}
	if m.refused, err = registered(registerer, m.refused); err != nil {
		errs = errors.Join(errs, err)
	}
	if m.idleClosed, err = registered(registerer, m.idleClosed); err != nil {
		errs = errors.Join(errs, err)
	}
	if m.queuedBytes, err = registered(registerer, m.queuedBytes); err != nil {
		errs = errors.Join(errs, err)
	}
	return m, errs
}

// registered registers c, or returns the registry's collector of the same
// description when it holds one already.
func registered[C prometheus.Collector](registerer prometheus.Registerer, c C) (C, error) {
	err := registerer.Register(c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}
