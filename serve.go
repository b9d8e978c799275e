package mirrord

// Serving the Kafka protocol. The node has one netio.Server: every
// listener shares its connection limits (max.connections, ...) and its
// request memory (queued.max.request.bytes). Serving a listener returns
// when its context is done (nil) or it fails; either way its socket and
// connections are closed when it returns.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/mirrord/mirrord/auth"
	"github.com/mirrord/mirrord/netio"
)

// ErrNoListener is ServeListener's error for a name the properties'
// listeners do not have, and ListenAndServe's when they have none.
var ErrNoListener = errors.New("mirrord: no such listener")

// Serve serves the Kafka protocol, PLAINTEXT, on ln (a listener the
// caller made; Serve closes it when it returns) until ctx is done or ln
// fails. Clients are told to connect to ln's address.
func (n *Node) Serve(ctx context.Context, ln net.Listener) error {
	l := netio.Listener{Name: auth.Plaintext.String(), Protocol: auth.Plaintext}
	return n.serve(ctx, ln, l, "")
}

// ServeListener serves on ln the listener the properties call name
// (listeners=NAME://HOST:PORT; the name as there, any case), secured
// as they say: its protocol, TLS and SASL mechanisms. Clients are told to
// connect to its advertised.listeners address, else ln's. It returns
// when ctx is done or ln fails, and closes ln.
func (n *Node) ServeListener(ctx context.Context, ln net.Listener, name string) error {
	for _, l := range n.listeners {
		if l.Name == strings.ToUpper(name) {
			return n.serve(ctx, ln, l.Listener, l.advertised)
		}
	}
	ln.Close()
	return fmt.Errorf("%w: %s", ErrNoListener, name)
}

// ListenAndServe binds every listener of the properties (listeners=,
// port 0 for a free one) and serves them until ctx is done or one fails,
// which stops them all. The node's address is its first listener's.
func (n *Node) ListenAndServe(ctx context.Context) error {
	if len(n.listeners) == 0 {
		return fmt.Errorf("%w: the properties have no listeners", ErrNoListener)
	}
	bound := make([]net.Listener, 0, len(n.listeners))
	for _, l := range n.listeners {
		ln, err := net.Listen("tcp", l.address)
		if err != nil {
			for _, b := range bound {
				b.Close()
			}
			return fmt.Errorf("mirrord: listener %s on %s: %w", l.Name, l.address, err)
		}
		bound = append(bound, ln)
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, len(bound))
	for i, l := range n.listeners {
		go func() { errs <- n.serve(ctx, bound[i], l.Listener, l.advertised) }()
	}
	var serveErr error
	for range bound { // one listener failing stops them all
		if err := <-errs; err != nil {
			serveErr = errors.Join(serveErr, err)
			stop()
		}
	}
	return serveErr
}

// serve serves l on ln, advertising advertised (HOST:PORT) or ln's
// address, with l's SASL mechanisms built and their JWKS refreshed
// while it serves.
func (n *Node) serve(ctx context.Context, ln net.Listener, l netio.Listener, advertised string) error {
	err := n.prepare(ctx, ln, &l, advertised)
	if err != nil {
		ln.Close()
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	waitJWKSRefresh := runJWKSRefresh(ctx, []*auth.SASLConfig{l.SASL}, n.logger)
	n.logger.Info("serving", "listener", l.Name, "protocol", l.Protocol.String(), "listen", ln.Addr().String(),
		"advertised", net.JoinHostPort(l.AdvertisedHost, strconv.Itoa(int(l.AdvertisedPort))))
	err = n.server.ServeListener(ctx, ln, l)
	stop()
	waitJWKSRefresh()
	if err != nil {
		return fmt.Errorf("mirrord: listener %s: %w", l.Name, err)
	}
	return nil
}

// prepare sets l's advertised address and SASL mechanisms, and the
// node's address when it has none yet.
func (n *Node) prepare(ctx context.Context, ln net.Listener, l *netio.Listener, advertised string) error {
	var err error
	if advertised == "" {
		advertised = ln.Addr().String()
	}
	if l.AdvertisedHost, l.AdvertisedPort, err = splitAdvertised(l.Name, advertised); err != nil {
		return err
	}
	var joinErr error
	n.advertiseOnce.Do(func() {
		// A cluster node joins at its first listener's address: that is
		// where the others find it.
		n.engine.SetAdvertised(l.AdvertisedHost, l.AdvertisedPort)
		joinErr = n.engine.JoinCluster(ctx)
	})
	if joinErr != nil {
		return fmt.Errorf("mirrord: %w", joinErr)
	}
	if l.Protocol.UsesSASL() {
		if l.SASL, err = n.sasl.listenerSASL(ctx, l.Name, n.engine.ScramCredentials()); err != nil {
			return err
		}
	}
	return nil
}

// splitAdvertised reads a listener's advertised HOST:PORT.
func splitAdvertised(name, advertised string) (string, int32, error) {
	host, portText, err := net.SplitHostPort(advertised)
	if err != nil {
		return "", 0, fmt.Errorf("%w: advertised address of %s %q: %w", ErrListenerConfig, name, advertised, err)
	}
	port, err := strconv.ParseInt(portText, 10, 32)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("%w: advertised address of %s %q: bad port", ErrListenerConfig, name, advertised)
	}
	return host, int32(port), nil
}
