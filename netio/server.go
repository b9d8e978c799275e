package netio

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/acl"
	"github.com/mirrord/mirrord/auth"
)

// Config configures a Server.
type Config struct {
	Backend Backend
	Logger  *slog.Logger
	// MaxRequestBytes bounds one request frame (socket.request.max.bytes).
	MaxRequestBytes int32
	// MaxConnections bounds concurrent client connections
	// (max.connections); 0: 4096.
	MaxConnections int
	// MaxConnectionsPerIP bounds the connections from one IP address
	// (max.connections.per.ip); 0: DefaultMaxConnectionsPerIP; negative:
	// none from an address without an override (Kafka's 0).
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides is max.connections.per.ip.overrides by
	// IP address (ParseMaxConnectionsPerIPOverrides).
	MaxConnectionsPerIPOverrides map[string]int
	// ConnectionsMaxIdle closes a connection that sends no request for
	// that long (connections.max.idle.ms); 0: 10 minutes; negative: never.
	ConnectionsMaxIdle time.Duration
	// FrameReadTimeout bounds reading a request once its first byte has
	// arrived; 0: DefaultFrameReadTimeout.
	FrameReadTimeout time.Duration
	// QueuedMaxRequestBytes bounds the request bytes held in memory at
	// once, node-wide (queued.max.request.bytes; request_memory.go); 0:
	// DefaultQueuedMaxRequestBytes.
	QueuedMaxRequestBytes int64
	// NoAutoCreateTopics stops Metadata from creating the topics it names
	// (auto.create.topics.enable=false).
	NoAutoCreateTopics bool
	// ScramCredentials is the node's SCRAM credential store, managed by
	// DescribeUserScramCredentials and AlterUserScramCredentials; nil:
	// those answer that the node keeps none.
	ScramCredentials *auth.ScramCredentials
	// Metrics, when set, registers the listeners' metrics
	// (mirrord_authentication_total).
	Metrics prometheus.Registerer
	// Authorizer decides every request (authorize.go); nil is Kafka's
	// empty authorizer.class.name: everything allowed.
	Authorizer *acl.Authorizer
}

// DefaultMaxRequestBytes is socket.request.max.bytes when unset, as Kafka's.
const DefaultMaxRequestBytes = 100 << 20

// WithDefaults is cfg with its zero limits at their defaults.
func (cfg Config) WithDefaults() Config {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = defaultMaxConnections
	}
	if cfg.MaxConnectionsPerIP == 0 {
		cfg.MaxConnectionsPerIP = DefaultMaxConnectionsPerIP
	}
	if cfg.ConnectionsMaxIdle == 0 {
		cfg.ConnectionsMaxIdle = DefaultConnectionsMaxIdle
	}
	if cfg.FrameReadTimeout <= 0 {
		cfg.FrameReadTimeout = DefaultFrameReadTimeout
	}
	if cfg.QueuedMaxRequestBytes <= 0 {
		cfg.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	return cfg
}

// Server serves the Kafka protocol on listeners. Each connection is one
// goroutine that reads a request, handles it and writes its response
// before reading the next, as a Kafka broker does (requests on one
// connection are answered in order; at most one is in flight).
type Server struct {
	cfg      Config
	backend  Backend
	log      *slog.Logger
	sessions *fetchSessions
	metrics  authMetrics
	authz    *authorizationMetrics
	// principalOf, when set (tests), names each new connection's
	// principal, as TLS or SASL will.
	principalOf func(net.Conn) auth.Principal

	// closeLog rate-limits the "closing connection" lines (logsafe.go),
	// refuseLog the refused connections'.
	closeLog, refuseLog *logLimiter
	connMetrics         connectionMetrics
	memory              *requestMemory // queued.max.request.bytes

	mu     sync.Mutex
	conns  map[*conn]struct{} // bounded by MaxConnections
	perIP  map[string]int     // open connections by client IP address
	closed bool
	wg     sync.WaitGroup // one per connection goroutine
}

// NewServer returns a server for cfg.Backend.
func NewServer(cfg Config) *Server {
	cfg = cfg.WithDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	metrics, err := newAuthMetrics(cfg.Metrics)
	if err != nil {
		cfg.Logger.Warn("authentication metrics not registered", "error", err)
	}
	connMetrics, err := newConnectionMetrics(cfg.Metrics)
	if err != nil {
		cfg.Logger.Warn("connection metrics not registered", "error", err)
	}
	return &Server{cfg: cfg, backend: cfg.Backend, log: cfg.Logger, sessions: newFetchSessions(), metrics: metrics, conns: map[*conn]struct{}{}, perIP: map[string]int{},
		authz: newAuthorizationMetrics(cfg.Metrics), closeLog: newLogLimiter(time.Now, closeLogWindow, closeLogBurst),
		refuseLog: newLogLimiter(time.Now, closeLogWindow, closeLogBurst), connMetrics: connMetrics,
		memory: newRequestMemory(cfg.QueuedMaxRequestBytes, connMetrics.queuedBytes.Set)}
}

// Serve serves a PLAINTEXT listener on ln (ServeListener).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.ServeListener(ctx, ln, plaintextListener)
}

// ServeListener accepts connections on ln, secured as l says, until ctx
// is done, then closes ln and every connection and waits for their
// goroutines. One Server may serve several listeners at once.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener, l Listener) error {
	if err := l.validate(); err != nil {
		ln.Close()
		return err
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var err error
	for {
		var nc net.Conn
		nc, err = ln.Accept()
		if err != nil {
			break
		}
		secured := l.wrap(nc)
		c := &conn{server: s, listener: &l, nc: secured, principal: auth.Anonymous, clientHost: remoteHost(nc)}
		if reason, limit := s.track(c); reason != "" {
			s.connMetrics.refused.WithLabelValues(l.Name, reason).Inc()
			s.refuseLog.log(s.log, "refusing connection", "remote", nc.RemoteAddr().String(), "listener", l.Name, "reason", reason, "max", limit)
			nc.Close()
			continue
		}
		c.w = bufio.NewWriterSize(secured, writeBufferBytes)
		if s.principalOf != nil {
			c.principal = s.principalOf(nc)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			c.serve(ctx)
		}()
	}
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("netio: accept: %w", err)
}

// track admits c, or says why not (a refusal reason and the limit it
// met): the node has max.connections, or c's address its
// max.connections.per.ip (or its override).
func (s *Server) track(c *conn) (reason string, limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return refusedShutdown, 0
	}
	if len(s.conns) >= s.cfg.MaxConnections {
		return refusedMaxConnections, s.cfg.MaxConnections
	}
	perIP, ok := s.cfg.MaxConnectionsPerIPOverrides[c.clientHost]
	if !ok {
		perIP = max(s.cfg.MaxConnectionsPerIP, 0)
	}
	if s.perIP[c.clientHost] >= perIP {
		return refusedPerIP, perIP
	}
	s.conns[c] = struct{}{}
	s.perIP[c.clientHost]++
	s.connMetrics.open.WithLabelValues(c.listener.Name).Inc()
	return "", 0
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if s.perIP[c.clientHost]--; s.perIP[c.clientHost] <= 0 {
		delete(s.perIP, c.clientHost)
	}
	s.connMetrics.open.WithLabelValues(c.listener.Name).Dec()
	s.mu.Unlock()
	c.nc.Close()
	c.requestDone()
	s.sessions.forgetConn(c)
}

// remoteHost is the client's IP address without its port.
func remoteHost(nc net.Conn) string {
	if addr, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return addr.IP.String()
	}
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}

// conn is one client connection, owned by its goroutine.
type conn struct {
	server   *Server
	listener *Listener
	nc       net.Conn
	w        *bufio.Writer
	frame    []byte // the request frame being served
	own      []byte // the connection's frame buffer, for frames up to keptBufferBytes
	out      []byte // the response being encoded, reused

	// principal is who the client is: auth.Anonymous until a TLS client
	// certificate or a SASL exchange says otherwise. clientHost is the
	// client's IP address, as ACLs name hosts.
	principal  auth.Principal
	clientHost string
	reserved   int64       // the request memory the frame being served holds
	large      bool        // frame is a buffer of the request memory's
	sasl       saslSession // a SASL listener's authentication
	requestKey int16       // the API key being served, for the denial metrics
}

func (c *conn) serve(ctx context.Context) {
	log := c.server.log.With("remote", c.nc.RemoteAddr().String(), "listener", c.listener.Name)
	if err := c.handshake(ctx); err != nil {
		// A client that connects and closes before the handshake (a port
		// check, a client giving up a bootstrap address) is not news.
		if !errors.Is(err, io.EOF) && ctx.Err() == nil {
			c.server.closeLog.log(log, "closing connection", "reason", clip(err.Error(), reasonMaxBytes))
		}
		return
	}
	for {
		if err := c.readRequest(ctx); err != nil {
			if errors.Is(err, errIdle) {
				c.server.connMetrics.idleClosed.WithLabelValues(c.listener.Name).Inc()
				return
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				c.server.closeLog.log(log, "closing connection", "reason", clip(err.Error(), reasonMaxBytes))
			}
			return
		}
		handle := c.handle
		if c.authenticating() {
			handle = c.authenticate
		}
		if err := handle(ctx, c.frame); err != nil {
			if ctx.Err() == nil {
				c.server.closeLog.log(log, "closing connection", "reason", clip(err.Error(), reasonMaxBytes))
			}
			return
		}
		// A connection keeps small buffers between requests; a large
		// produce or response should not pin its size for the
		// connection's lifetime, nor its bytes the request memory.
		c.requestDone()
	}
}

// writeTimeout bounds writing one response to a client.
const writeTimeout = 60 * time.Second

// handle parses, serves and answers one request frame. An error closes
// the connection.
func (c *conn) handle(ctx context.Context, frame []byte) error {
	h, body, err := parseHeader(frame, flexibility)
	if err != nil {
		return err
	}
	api, ok := c.server.lookupAPI(h.Key)
	if !ok {
		return fmt.Errorf("%w: unknown api key %d (client %q)", ErrFrame, h.Key, echo(h.ClientID))
	}
	if h.Version < api.minVersion || h.Version > api.maxVersion {
		if h.Key == apiVersionsKey {
			resp := unsupportedAPIVersions()
			resp.ApiKeys = c.server.appendMirrorKeys(resp.ApiKeys)
			return c.writeResponse(h, resp)
		}
		return fmt.Errorf("%w: api key %d version %d outside [%d, %d] (client %q)", ErrFrame, h.Key, h.Version, api.minVersion, api.maxVersion, echo(h.ClientID))
	}
	c.requestKey = h.Key
	req := requestForKey(h.Key)
	req.SetVersion(h.Version)
	if err := req.ReadFrom(body); err != nil {
		return fmt.Errorf("%w: api key %d version %d: %w (client %q)", ErrFrame, h.Key, h.Version, err, echo(h.ClientID))
	}
	reply, err := api.serve(ctx, c, h, req)
	if err != nil {
		return err
	}
	// A client that stops reading must not hold this goroutine forever.
	if err := c.nc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	switch r := reply.(type) {
	case nil:
		return nil // acks=0 produce: no response
	case kmsg.Response:
		return c.writeResponse(h, r)
	case frameWriter:
		return r.writeFrame(c, h)
	}
	return fmt.Errorf("netio: api key %d: handler returned %T", h.Key, reply)
}

// frameWriter is a response that writes its own frame (Fetch, whose
// record bytes go from file to socket without passing through memory).
type frameWriter interface {
	writeFrame(c *conn, h RequestHeader) error
}

// writeResponse encodes r at its own version (ResponseKind gives the
// request's; an UNSUPPORTED_VERSION ApiVersions answer is v0).
func (c *conn) writeResponse(h RequestHeader, r kmsg.Response) error {
	c.out = appendResponseHeader(c.out[:0], h.CorrelationID, r.IsFlexible() && h.Key != apiVersionsKey)
	c.out = r.AppendTo(c.out)
	finishFrame(c.out, 0)
	if _, err := c.w.Write(c.out); err != nil {
		return err
	}
	return c.w.Flush()
}

// flexibility reports whether (key, version) uses flexible encoding, and
// whether the pair is one this server serves at all.
func flexibility(key, version int16) (flexible, known bool) {
	api, ok := knownAPI(key)
	if !ok || version < api.minVersion || version > api.maxVersion {
		return false, false
	}
	req := requestForKey(key)
	req.SetVersion(version)
	return req.IsFlexible(), true
}
