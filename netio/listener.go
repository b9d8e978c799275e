package netio

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/mirrord/mirrord/auth"
)

// Listener is one of the node's listeners, as Kafka's listeners,
// advertised.listeners and listener.security.protocol.map name them. A
// node serves several at once, one per port.
type Listener struct {
	// Name is the listener name: "PLAINTEXT", "SSL", "CLIENT", ...
	Name     string
	Protocol auth.SecurityProtocol
	// AdvertisedHost and AdvertisedPort are the address this listener's
	// clients are told to connect to (Metadata, FindCoordinator,
	// DescribeCluster, Fetch's current leader); empty: Backend.Cluster()'s.
	AdvertisedHost string
	AdvertisedPort int32
	// SASL is the enabled mechanisms of a SASL_PLAINTEXT or SASL_SSL
	// listener (required there, unused elsewhere).
	SASL *auth.SASLConfig

	// TLS secures an SSL or SASL_SSL listener: the node's certificate, and
	// with ClientAuth (ssl.client.auth) the client CAs. Required for those
	// protocols, ignored for the others.
	TLS *tls.Config
	// PrincipalMapper names the principal of an SSL connection from its
	// client certificate's subject (ssl.principal.mapping.rules); nil is
	// Kafka's DEFAULT, the subject itself. A connection without a
	// certificate is auth.Anonymous, as in Kafka.
	PrincipalMapper *auth.PrincipalMapper
	// HandshakeTimeout bounds the TLS handshake; 0 is 10 seconds.
	HandshakeTimeout time.Duration
}

// plaintextListener is what Serve serves: Kafka's default listener.
var plaintextListener = Listener{Name: "PLAINTEXT", Protocol: auth.Plaintext}

const defaultHandshakeTimeout = 10 * time.Second

// ErrListener is a Listener that cannot be served as configured.
var ErrListener = errors.New("netio: listener")

// ErrAuthentication is a client that did not authenticate: a failed TLS
// handshake, or a certificate no principal mapping rule names. The
// connection is closed, as Kafka closes it.
var ErrAuthentication = errors.New("netio: authentication failed")

func (l *Listener) validate() error {
	if l.Protocol.UsesTLS() && l.TLS == nil {
		return fmt.Errorf("%w %s: %s needs a TLS config (ssl.keystore.location)", ErrListener, l.Name, l.Protocol)
	}
	if l.Protocol.UsesSASL() && (l.SASL == nil || len(l.SASL.Mechanisms) == 0) {
		return fmt.Errorf("%w %s: %s with no SASL mechanism enabled", ErrListener, l.Name, l.Protocol)
	}
	return nil
}

// wrap is the connection a listener serves on nc: nc itself, or a TLS
// server connection over it (no I/O until its handshake).
func (l *Listener) wrap(nc net.Conn) net.Conn {
	if l.Protocol.UsesTLS() {
		return tls.Server(nc, l.TLS)
	}
	return nc
}

// handshake runs a TLS listener's handshake before the first request,
// within the listener's timeout, and names the principal of an SSL
// connection from its certificate.
func (c *conn) handshake(ctx context.Context) error {
	tlsConn, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	timeout := c.listener.HandshakeTimeout
	if timeout <= 0 {
		timeout = defaultHandshakeTimeout
	}
	if err := tlsConn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if err := tlsConn.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("%w: TLS handshake: %w", ErrAuthentication, err)
	}
	if err := tlsConn.SetDeadline(time.Time{}); err != nil {
		return err
	}
	if c.listener.Protocol != auth.SSL {
		return nil // SASL_SSL: the SASL exchange names the principal
	}
	peers := tlsConn.ConnectionState().PeerCertificates
	if len(peers) == 0 {
		return nil // ssl.client.auth=requested or none: ANONYMOUS
	}
	principal, err := certificatePrincipal(peers[0].RawSubject, c.listener.PrincipalMapper)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAuthentication, err)
	}
	c.principal = principal
	return nil
}

// certificatePrincipal is the User principal a subject maps to.
func certificatePrincipal(rawSubject []byte, mapper *auth.PrincipalMapper) (auth.Principal, error) {
	subject, err := auth.RDNSequenceName(rawSubject)
	if err != nil {
		return auth.Principal{}, err
	}
	if mapper == nil {
		return auth.User(subject), nil
	}
	name, err := mapper.Name(subject)
	if err != nil {
		return auth.Principal{}, err
	}
	return auth.User(name), nil
}

// cluster is the node's identity with the address of the listener this
// client connected on, as Kafka answers each client with its listener's
// advertised endpoint.
func (c *conn) cluster() ClusterInfo {
	return advertisedCluster(c.server.backend.Cluster(), c.listener)
}

func advertisedCluster(cluster ClusterInfo, l *Listener) ClusterInfo {
	if l != nil && l.AdvertisedHost != "" {
		cluster.Host, cluster.Port = l.AdvertisedHost, l.AdvertisedPort
	}
	return cluster
}
