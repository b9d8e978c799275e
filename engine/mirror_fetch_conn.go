package engine

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/mirrord/mirrord/engine/fetchwire"
)

// A fetcher's own connection to its source broker. The source client
// (kgo) keeps metadata, admin and every other request; the Fetch round
// trip alone goes over this connection, which the fetcher owns: it writes
// the request kmsg encodes and reads the response into a pooled buffer
// (fetchBuffers), so a response costs no allocation and the records of it
// go from that buffer to the segment file (fetchwire parses it in place).
//
// A connection is set up as kgo sets up its own: TCP (or TLS, with the
// host dialed as the server name unless the config names one), ApiVersions
// (Fetch v13 must be served), then with SASL a SaslHandshake v1 and
// SaslAuthenticate rounds driven by franz-go's sasl.Mechanism, the
// mechanism the mirror config builds for kgo (client_security.go). A SASL
// session with a lifetime (connections.max.reauth.ms) is redialed before
// it ends, keeping the fetch session (the source keys it by ID, not by
// connection). Any error closes the connection; the fetcher redials with a
// new fetch session after its backoff, as it did over kgo.

// sourceDialer dials the source brokers as the mirror config says.
type sourceDialer struct {
	tls            *tls.Config    // nil: no TLS
	mechanism      sasl.Mechanism // nil: no SASL
	dialTimeout    time.Duration
	requestTimeout time.Duration // request.timeout.ms, on top of the fetch's wait
}

// newSourceDialer builds the dialer of c's security configs (the PEM files
// read now, inside filesDir unless it is empty). Errors are INVALID_CONFIG
// and name the key.
func newSourceDialer(c MirrorConfig, filesDir string, log *slog.Logger) (*sourceDialer, error) {
	tlsConfig, mechanism, err := c.Security.connSecurity(filesDir, c.RequestTimeout, log)
	if err != nil {
		return nil, fmt.Errorf("%w: mirror config %w", kerr.InvalidConfig, err)
	}
	return &sourceDialer{tls: tlsConfig, mechanism: mechanism,
		dialTimeout: min(c.RequestTimeout, 10*time.Second), requestTimeout: c.RequestTimeout}, nil
}

// Bounds of the connection.
const (
	// fetchResponseBytesMax bounds a response's size as kgo's
	// BrokerMaxReadBytes default does: a larger size prefix is not a
	// Fetch answer.
	fetchResponseBytesMax = 100 << 20
	// fetchBufferPooledBytesMax: a read buffer larger than this (an
	// answer far above fetch.response.max.bytes) is not pooled.
	fetchBufferPooledBytesMax = 64 << 20
	// fetchBufferGrain: buffers are allocated in multiples of it, so
	// answers of about one size share them.
	fetchBufferGrain = 1 << 20
	fetchClientID    = "mirrord" // client.id, as the kgo client sends it
	saslRoundsMax    = 32        // SaslAuthenticate rounds of one login, at most
)

var (
	errFetchConnUnsupported = errors.New("engine: source broker does not serve what the fetcher needs")
	errFetchConnFrame       = errors.New("engine: source connection: bad response frame")
)

// fetchConn is one connection to a source broker, used by one goroutine.
type fetchConn struct {
	conn          net.Conn
	addr          string
	formatter     *kmsg.RequestFormatter
	correlationID int32
	request       []byte    // the encoding buffer, reused
	size          [4]byte   // a response's size prefix
	expiry        time.Time // redial before: the SASL session's end; zero: none
	timeout       time.Duration
	stop          func() bool // unregisters the close on ctx's end
}

// dial connects to addr and sets the connection up. ctx is the fetcher's:
// its end closes the connection, failing a round trip under way.
func (d *sourceDialer) dial(ctx context.Context, addr string) (*fetchConn, error) {
	dialer := net.Dialer{Timeout: d.dialTimeout}
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if d.tls != nil {
		config := d.tls.Clone()
		if config.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			config.ServerName = host
		}
		tlsConn := tls.Client(conn, config)
		handshake, cancel := context.WithTimeout(ctx, d.dialTimeout)
		err := tlsConn.HandshakeContext(handshake)
		cancel()
		if err != nil {
			conn.Close()
			return nil, err
		}
		conn = tlsConn
	}
	c := &fetchConn{conn: conn, addr: addr, timeout: d.requestTimeout,
		formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(fetchClientID))}
	c.stop = context.AfterFunc(ctx, func() { conn.Close() })
	if err := c.setUp(ctx, d.mechanism); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// close closes the connection.
func (c *fetchConn) close() {
	c.stop()
	c.conn.Close()
}

// expired: the SASL session ends soon; dial anew before the next request.
func (c *fetchConn) expired(now time.Time) bool {
	return !c.expiry.IsZero() && now.After(c.expiry)
}

// setUp asks the versions, then logs in with mechanism (nil: none).
func (c *fetchConn) setUp(ctx context.Context, mechanism sasl.Mechanism) error {
	versions := kmsg.NewPtrApiVersionsRequest()
	versions.Version = 3
	versions.ClientSoftwareName, versions.ClientSoftwareVersion = "mirrord", "1"
	body, buffer, err := c.roundTrip(versions, 0)
	if err == nil && len(body) >= 2 && int16(binary.BigEndian.Uint16(body)) == kerr.UnsupportedVersion.Code {
		// A broker answers a version it does not serve in v0, with its
		// versions: ask again in v0 (KIP-511).
		fetchBuffers.release(buffer)
		versions.Version = 0
		body, buffer, err = c.roundTrip(versions, 0)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	if err == nil {
		resp.Version = versions.Version
		err = resp.ReadFrom(body)
		fetchBuffers.release(buffer)
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	maxVersion := func(key int16) int16 {
		for _, k := range resp.ApiKeys {
			if k.ApiKey == key {
				return k.MaxVersion
			}
		}
		return -1
	}
	if v := maxVersion(kmsg.Fetch.Int16()); v < fetchwire.Version {
		return fmt.Errorf("%w: Fetch v%d (up to v%d)", errFetchConnUnsupported, fetchwire.Version, v)
	}
	if mechanism == nil {
		return nil
	}
	if maxVersion(kmsg.SASLHandshake.Int16()) < 1 || maxVersion(kmsg.SASLAuthenticate.Int16()) < 0 {
		return fmt.Errorf("%w: SaslHandshake v1 and SaslAuthenticate", errFetchConnUnsupported)
	}
	return c.login(ctx, mechanism, min(maxVersion(kmsg.SASLAuthenticate.Int16()), 2))
}

// login runs SaslHandshake v1 and the mechanism's SaslAuthenticate
// rounds (KIP-152), and notes the session's lifetime (KIP-368).
func (c *fetchConn) login(ctx context.Context, mechanism sasl.Mechanism, authenticateVersion int16) error {
	handshake := kmsg.NewPtrSASLHandshakeRequest()
	handshake.Version = 1
	handshake.Mechanism = mechanism.Name()
	handshakeResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := c.request1(handshake, handshakeResp); err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	if err := kerr.ErrorForCode(handshakeResp.ErrorCode); err != nil {
		return fmt.Errorf("SaslHandshake %s: %w", mechanism.Name(), err)
	}
	session, clientWrite, err := mechanism.Authenticate(ctx, c.addr)
	if err != nil {
		return fmt.Errorf("SASL %s: %w", mechanism.Name(), err)
	}
	started := time.Now()
	var lifetimeMillis int64
	done := false
	for round := 0; !done || len(clientWrite) > 0; round++ {
		if round == saslRoundsMax {
			return fmt.Errorf("SASL %s: no end after %d rounds", mechanism.Name(), round)
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = authenticateVersion
		req.SASLAuthBytes = clientWrite
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := c.request1(req, resp); err != nil {
			return fmt.Errorf("SaslAuthenticate: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			// The message names the failure (bad credentials), never
			// the secret.
			message := ""
			if resp.ErrorMessage != nil {
				message = ": " + *resp.ErrorMessage
			}
			return fmt.Errorf("SaslAuthenticate %s: %w%s", mechanism.Name(), err, message)
		}
		lifetimeMillis = resp.SessionLifetimeMillis
		clientWrite = nil
		if !done {
			if done, clientWrite, err = session.Challenge(resp.SASLAuthBytes); err != nil {
				return fmt.Errorf("SASL %s: %w", mechanism.Name(), err)
			}
		}
	}
	if lifetimeMillis > 0 {
		// Redial at 95% of the lifetime, and at least a second (or the
		// login's own time) before its end, as kgo reauthenticates.
		lifetime := time.Duration(min(lifetimeMillis, int64(365*24*time.Hour/time.Millisecond))) * time.Millisecond
		margin := max(lifetime/20, time.Second, time.Since(started)*11/10)
		c.expiry = started.Add(lifetime - margin)
	}
	return nil
}

// request1 sends a set-up request and decodes its answer into resp.
func (c *fetchConn) request1(req kmsg.Request, resp kmsg.Response) error {
	body, buffer, err := c.roundTrip(req, 0)
	if err != nil {
		return err
	}
	defer fetchBuffers.release(buffer)
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(body) // kmsg copies what it keeps
}

// fetchBufferPool pools the buffers the fetchers read answers into: a
// fetcher takes one once it knows an answer's size and gives it back when
// the answer's records are applied, so a node holds as many as answers
// are being read and applied at once (plus fetchBuffersIdleMax idle), not
// one per fetcher. Last in, first out: a fetcher alone gets its buffer
// back every round.
type fetchBufferPool struct {
	mu   sync.Mutex
	idle []*[]byte // at most fetchBuffersIdleMax
}

// fetchBuffers is the process's pool.
var fetchBuffers fetchBufferPool

// fetchBuffersIdleMax bounds the idle buffers kept.
const fetchBuffersIdleMax = 8

// take returns a buffer of n bytes.
func (p *fetchBufferPool) take(n int) *[]byte {
	p.mu.Lock()
	var buffer *[]byte
	if last := len(p.idle) - 1; last >= 0 {
		buffer = p.idle[last]
		p.idle[last] = nil
		p.idle = p.idle[:last]
	}
	p.mu.Unlock()
	if buffer == nil || cap(*buffer) < n {
		// None, or too small: dropped for one that fits this answer.
		grown := make([]byte, n, (n+fetchBufferGrain-1)/fetchBufferGrain*fetchBufferGrain)
		buffer = &grown
	}
	*buffer = (*buffer)[:n]
	return buffer
}

// release gives a buffer back (nil: none); nothing of it may be used
// after.
func (p *fetchBufferPool) release(buffer *[]byte) {
	if buffer == nil || cap(*buffer) > fetchBufferPooledBytesMax {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) < fetchBuffersIdleMax {
		p.idle = append(p.idle, buffer)
	}
}

// roundTrip writes req and reads its response into a pooled buffer,
// returning the body after the response header and the buffer, which the
// caller releases (fetchBuffers.release) when done with body. wait is how
// long the source may hold the request on top of request.timeout.ms (a
// Fetch's max wait).
func (c *fetchConn) roundTrip(req kmsg.Request, wait time.Duration) (body []byte, buffer *[]byte, err error) {
	c.correlationID++
	c.request = c.formatter.AppendRequest(c.request[:0], req, c.correlationID)
	now := time.Now()
	if err := c.conn.SetDeadline(now.Add(c.timeout + wait)); err != nil {
		return nil, nil, err
	}
	if _, err := c.conn.Write(c.request); err != nil {
		return nil, nil, err
	}
	if _, err := io.ReadFull(c.conn, c.size[:]); err != nil {
		return nil, nil, err
	}
	n := int32(binary.BigEndian.Uint32(c.size[:]))
	if n < 4 || n > fetchResponseBytesMax {
		return nil, nil, fmt.Errorf("%w: a response of %d bytes", errFetchConnFrame, n)
	}
	buffer = fetchBuffers.take(int(n))
	if body, err = c.readBody(req, *buffer); err != nil {
		fetchBuffers.release(buffer)
		return nil, nil, err
	}
	return body, buffer, nil
}

// readBody reads a response of len(frame) bytes into frame and returns
// its body.
func (c *fetchConn) readBody(req kmsg.Request, frame []byte) ([]byte, error) {
	if _, err := io.ReadFull(c.conn, frame); err != nil {
		return nil, err
	}
	if id := int32(binary.BigEndian.Uint32(frame)); id != c.correlationID {
		return nil, fmt.Errorf("%w: correlation ID %d, want %d", errFetchConnFrame, id, c.correlationID)
	}
	body := frame[4:]
	// Flexible responses carry header tags, but ApiVersions' (KIP-511).
	if req.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		b := kbin.Reader{Src: body}
		for tags := b.Uvarint(); tags > 0 && b.Ok(); tags-- {
			b.Uvarint()
			b.Span(int(b.Uvarint()))
		}
		if !b.Ok() {
			return nil, fmt.Errorf("%w: response header", errFetchConnFrame)
		}
		body = b.Src
	}
	return body, nil
}
