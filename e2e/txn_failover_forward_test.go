package e2e

// A loopback TCP forwarder: the one address clients of a failover test
// know (their bootstrap, and what Kafka's advertised.listeners and
// mirrord's --advertise name), in front of the cluster that serves them
// now. Switching its target moves the clients without restarting them,
// as a DNS name or a virtual IP moved by an operator would.

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	forwarderConnsMax = 256 // live client connections; more are refused
	forwarderDialWait = 2 * time.Second
)

// forwarder accepts on a loopback port and forwards each connection to
// its current target. Switching the target cuts every live connection,
// as the death of the old cluster does; with no target new connections
// are closed at once (connection refused, to a client).
type forwarder struct {
	ln   net.Listener
	done chan struct{} // closed when the accept loop has returned

	mu     sync.Mutex
	target string                // "": none
	conns  map[net.Conn]struct{} // both ends of every live connection; at most 2*forwarderConnsMax
	wg     sync.WaitGroup        // the copying goroutines
	closed bool
}

// startForwarder listens on a free loopback port with no target; the
// test's end closes it and every connection through it.
func startForwarder(t *testing.T) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("forwarder: %v", err)
	}
	f := &forwarder{ln: ln, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	go f.accept()
	t.Cleanup(f.close)
	return f
}

// addr is the address clients connect to.
func (f *forwarder) addr() string { return f.ln.Addr().String() }

// switchTo makes target ("" for none) the destination of new connections
// and cuts the live ones.
func (f *forwarder) switchTo(target string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = target
	for c := range f.conns {
		c.Close()
	}
}

// close stops accepting, cuts every connection and waits for the
// goroutines.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.ln.Close()
	<-f.done
	f.switchTo("")
	f.wg.Wait()
}

func (f *forwarder) accept() {
	defer close(f.done)
	for { // ends when the listener closes
		client, err := f.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue // a transient accept error (EMFILE, say): the next may succeed
		}
		f.mu.Lock()
		target, full := f.target, len(f.conns) >= 2*forwarderConnsMax
		f.mu.Unlock()
		if target == "" || full {
			client.Close()
			continue
		}
		f.wg.Add(1)
		go f.forward(client, target)
	}
}

// forward dials target for client and copies both ways until either side
// ends or a switch cuts them.
func (f *forwarder) forward(client net.Conn, target string) {
	defer f.wg.Done()
	upstream, err := net.DialTimeout("tcp", target, forwarderDialWait)
	if err != nil {
		client.Close()
		return
	}
	f.mu.Lock()
	if f.closed || f.target != target { // switched while dialing
		f.mu.Unlock()
		client.Close()
		upstream.Close()
		return
	}
	f.conns[client], f.conns[upstream] = struct{}{}, struct{}{}
	f.mu.Unlock()
	var copying sync.WaitGroup
	copying.Add(2)
	pipe := func(to, from net.Conn) {
		defer copying.Done()
		io.Copy(to, from) // ends with an error or EOF on either side: both close
		to.Close()
		from.Close()
	}
	go pipe(upstream, client)
	go pipe(client, upstream)
	copying.Wait()
	f.mu.Lock()
	delete(f.conns, client)
	delete(f.conns, upstream)
	f.mu.Unlock()
}

// dialAround is a kgo option that dials the node at addr directly where
// its Metadata names the forwarder: for the test's own clients of a node
// the forwarder does not lead to (mirrord, before the failover).
func (f *forwarder) dialAround(addr string) kgo.Opt {
	var dialer net.Dialer
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		if host == f.addr() {
			host = addr
		}
		return dialer.DialContext(ctx, network, host)
	})
}
