package netio

// Authentication on a SASL_PLAINTEXT or SASL_SSL listener, as Kafka's
// SaslServerAuthenticator runs it. Until the client is authenticated a
// connection serves only these, in this order:
//
//	[ApiVersions]          at most once (a second one closes)
//	SaslHandshake v0-1     names the mechanism; one not enabled answers
//	                       UNSUPPORTED_SASL_MECHANISM with the enabled
//	                       list, then closes
//	SaslAuthenticate v0-2  (after SaslHandshake v1) carries the tokens
//	...                    until the mechanism completes: the principal
//	                       becomes User:<name>; or fails: the answer is
//	                       SASL_AUTHENTICATION_FAILED with Kafka's
//	                       message, then the connection closes
//
// After SaslHandshake v0 the tokens travel raw, each a 4-byte size and
// the bytes, without Kafka request headers, as Kafka serves pre-KIP-152
// clients; a failure then closes without an answer. Any other request
// before authentication closes the connection (Kafka's
// InvalidRequestException before the handshake; during the token
// exchange Kafka's IllegalSaslStateException, whose error response for
// an arbitrary API mirrord does not build: it closes without one).
// Frames before authentication are bounded by saslReceiveBytesMax
// (Kafka's sasl.server.max.receive.size). SaslAuthenticate v1+ answers
// session_lifetime_ms 0: the session does not expire and re-authentication
// (KIP-368, connections.max.reauth.ms) is not offered.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/auth"
)

// saslReceiveBytesMax is Kafka's DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE.
const saslReceiveBytesMax = 524288

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// saslState is where a connection of a SASL listener is in its
// authentication (Kafka's SaslState).
type saslState int8

const (
	saslHandshakeOrVersions saslState = iota // the zero value: nothing received yet
	saslHandshakeRequest                     // ApiVersions answered: SaslHandshake next
	saslAuthenticate                         // tokens
	saslComplete                             // authenticated
)

// saslSession is a connection's authentication, owned by its goroutine.
type saslSession struct {
	state     saslState
	rawTokens bool // SaslHandshake v0: tokens without SaslAuthenticate
	mechanism string
	exchange  auth.SASLExchange
}

// errSASL closes a connection whose authentication failed or broke
// Kafka's order.
var errSASL = errors.New("netio: SASL authentication")

// authenticating reports whether the connection must authenticate before
// its next request is served.
func (c *conn) authenticating() bool {
	return c.listener.Protocol.UsesSASL() && c.sasl.state != saslComplete
}

// readRequest reads the next frame: a request, or a raw token after
// SaslHandshake v0 (request_read.go bounds its memory and its time).
func (c *conn) readRequest(ctx context.Context) error {
	switch {
	case !c.authenticating():
		return c.readSized(ctx, func(size [4]byte) (int32, error) { return frameSize(size, c.server.cfg.MaxRequestBytes) })
	case c.sasl.rawTokens:
		return c.readSized(ctx, tokenSize)
	default:
		return c.readSized(ctx, func(size [4]byte) (int32, error) { return frameSize(size, saslReceiveBytesMax) })
	}
}

// tokenSize is the size of a raw SASL token, refused outside [0,
// saslReceiveBytesMax].
func tokenSize(size [4]byte) (int32, error) {
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > saslReceiveBytesMax {
		return 0, fmt.Errorf("%w: SASL token size %d outside [0, %d]", errSASL, n, saslReceiveBytesMax)
	}
	return n, nil
}

// authenticate serves one frame of a connection that is not yet
// authenticated. An error closes the connection.
func (c *conn) authenticate(ctx context.Context, frame []byte) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	if c.sasl.rawTokens {
		return c.authenticateRawToken(frame)
	}
	h, body, err := parseHeader(frame, flexibility)
	if err != nil {
		return err
	}
	switch {
	case c.sasl.state == saslAuthenticate && h.Key != saslAuthenticateKey:
		return fmt.Errorf("%w: unexpected request of api key %d during SASL authentication (client %q)", errSASL, h.Key, echo(h.ClientID))
	case c.sasl.state == saslAuthenticate:
		return c.serveSASLToken(h, body)
	case h.Key == apiVersionsKey && c.sasl.state == saslHandshakeOrVersions:
		if err := c.handle(ctx, frame); err != nil {
			return err
		}
		if api := apis[apiVersionsKey]; h.Version >= api.minVersion && h.Version <= api.maxVersion {
			c.sasl.state = saslHandshakeRequest
		}
		return nil
	case h.Key == saslHandshakeKey:
		return c.serveSASLHandshake(h, body)
	}
	return fmt.Errorf("%w: unexpected request of api key %d during the SASL handshake (client %q)", errSASL, h.Key, echo(h.ClientID))
}

// parseSASLRequest parses a request of key 17 or 36 at a served version.
func parseSASLRequest(h RequestHeader, body []byte) (kmsg.Request, error) {
	api := apis[h.Key]
	if h.Version < api.minVersion || h.Version > api.maxVersion {
		return nil, fmt.Errorf("%w: api key %d version %d outside [%d, %d] (client %q)", ErrFrame, h.Key, h.Version, api.minVersion, api.maxVersion, echo(h.ClientID))
	}
	req := requestForKey(h.Key)
	req.SetVersion(h.Version)
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: api key %d version %d: %w (client %q)", ErrFrame, h.Key, h.Version, err, echo(h.ClientID))
	}
	return req, nil
}

func (c *conn) serveSASLHandshake(h RequestHeader, body []byte) error {
	kreq, err := parseSASLRequest(h, body)
	if err != nil {
		return err
	}
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = c.listener.SASL.Names()
	mechanism, ok := c.listener.SASL.Mechanism(req.Mechanism)
	if !ok {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.server.metrics.authenticated(c.listener.Name, unsupportedMechanismLabel, false)
		return errors.Join(c.writeResponse(h, resp),
			fmt.Errorf("%w: unsupported SASL mechanism %q (client %q)", errSASL, echo(req.Mechanism), echo(h.ClientID)))
	}
	c.sasl = saslSession{state: saslAuthenticate, rawTokens: h.Version == 0, mechanism: req.Mechanism, exchange: mechanism.NewExchange()}
	return c.writeResponse(h, resp)
}

func (c *conn) serveSASLToken(h RequestHeader, body []byte) error {
	kreq, err := parseSASLRequest(h, body)
	if err != nil {
		return err
	}
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	challenge, err := c.step(req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		message := saslFailureMessage(err)
		resp.ErrorMessage = &message
		return errors.Join(c.writeResponse(h, resp), err)
	}
	resp.SASLAuthBytes = challenge
	return c.writeResponse(h, resp)
}

// authenticateRawToken serves a token after SaslHandshake v0: the answer
// goes back size-prefixed; a failure closes without one.
func (c *conn) authenticateRawToken(token []byte) error {
	challenge, err := c.step(token)
	if err != nil {
		return err
	}
	c.out = binary.BigEndian.AppendUint32(c.out[:0], uint32(len(challenge)))
	c.out = append(c.out, challenge...)
	if _, err := c.w.Write(c.out); err != nil {
		return err
	}
	return c.w.Flush()
}

// step feeds a token to the exchange; done, the connection acts as the
// exchange's principal.
func (c *conn) step(token []byte) ([]byte, error) {
	challenge, done, err := c.sasl.exchange.Step(token)
	if err != nil {
		c.server.metrics.authenticated(c.listener.Name, c.sasl.mechanism, false)
		c.server.closeLog.log(c.server.log, "SASL authentication failed", "remote", c.nc.RemoteAddr().String(), "listener", c.listener.Name,
			"mechanism", c.sasl.mechanism, "reason", clip(err.Error(), reasonMaxBytes))
		return nil, fmt.Errorf("%w: %w", errSASL, err)
	}
	if done {
		c.principal = c.sasl.exchange.Principal()
		c.sasl = saslSession{state: saslComplete, mechanism: c.sasl.mechanism}
		c.server.metrics.authenticated(c.listener.Name, c.sasl.mechanism, true)
	}
	return challenge, nil
}

// saslFailureMessage is what a client is told of a failed exchange.
func saslFailureMessage(err error) string {
	var saslErr *auth.SASLError
	if errors.As(err, &saslErr) {
		return saslErr.Message
	}
	return "Authentication failed"
}
