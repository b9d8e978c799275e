package engine

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestCreateMirrorSaysWhySourceFails: --create names what failed in
// Kafka's terms (a refused connection, TLS against a plaintext listener),
// and one dropped connection does not fail it.
func TestCreateMirrorSaysWhySourceFails(t *testing.T) {
	_, sourceAddr := startNode(t, filepath.Join(t.TempDir(), "source"))
	target, _ := startNode(t, filepath.Join(t.TempDir(), "target"))
	closed := closedAddress(t)
	for _, c := range []struct {
		name   string
		config map[string]string
		want   string // "" for success
	}{
		{"refused", map[string]string{"bootstrap.servers": closed}, "connection to " + closed + " refused: nothing listens there"},
		{"tls to plaintext", map[string]string{"bootstrap.servers": sourceAddr, "security.protocol": "SSL", "request.timeout.ms": "3000"},
			"TLS handshake with " + sourceAddr + " failed"},
		{"one dropped connection", map[string]string{"bootstrap.servers": dropFirstConnection(t, sourceAddr)}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := target.Mirrors().CreateMirror(context.Background(), strings.ReplaceAll(c.name, " ", "-"), c.config)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("create: %v", err)
			case c.want != "" && (!errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), c.want)):
				t.Errorf("create: %v, want INVALID_CONFIG saying %q", err, c.want)
			}
			t.Logf("create: %v", err)
		})
	}
}

// closedAddress is a loopback address nothing listens on.
func closedAddress(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// dropFirstConnection listens on loopback, closes the first connection it
// accepts at once and forwards the later ones to target.
func dropFirstConnection(t *testing.T, target string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn // bounded by the connections the test makes
	)
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for accepted := 0; ; accepted++ {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			if accepted == 0 {
				conn.Close()
				continue
			}
			upstream, err := net.Dial("tcp", target)
			if err != nil {
				conn.Close()
				continue
			}
			track(conn)
			track(upstream)
			wg.Add(2)
			forward := func(to, from net.Conn) {
				defer wg.Done()
				io.Copy(to, from)
				to.Close()
				from.Close()
			}
			go forward(upstream, conn)
			go forward(conn, upstream)
		}
	}()
	return ln.Addr().String()
}
