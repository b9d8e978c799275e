package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/vfs"
)

// TestCreateMirrorSaysWhySourceFails: --create refuses a source that
// does not answer with one neutral message, whatever the cause (a refused
// connection, TLS against a plaintext listener, a listener that never
// answers), so a client cannot map ports through the node; the node's log
// names the cause in Kafka's terms. One dropped connection does not fail
// it.
func TestCreateMirrorSaysWhySourceFails(t *testing.T) {
	_, sourceAddr := startNode(t, filepath.Join(t.TempDir(), "source"))
	var log syncBuffer
	target, _ := startNodeConfig(t, NodeConfig{FS: vfs.OS, DataDir: filepath.Join(t.TempDir(), "target"), Log: logstore.DefaultConfig(),
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	closed := closedAddress(t)
	silent := silentAddress(t)
	for _, c := range []struct {
		name   string
		config map[string]string
		logged string // "" for success
	}{
		{"refused", map[string]string{"bootstrap.servers": closed}, "connection to " + closed + " refused: nothing listens there"},
		{"tls to plaintext", map[string]string{"bootstrap.servers": sourceAddr, "security.protocol": "SSL", "request.timeout.ms": "3000"},
			"TLS handshake with " + sourceAddr + " failed"},
		{"never answers", map[string]string{"bootstrap.servers": silent, "request.timeout.ms": "2000"},
			silent + " accepts connections but did not answer a Kafka request in time"},
		{"one dropped connection", map[string]string{"bootstrap.servers": dropFirstConnection(t, sourceAddr)}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := target.Mirrors().CreateMirror(context.Background(), strings.ReplaceAll(c.name, " ", "-"), c.config)
			t.Logf("create: %v", err)
			switch {
			case c.logged == "" && err != nil:
				t.Errorf("create: %v", err)
			case c.logged == "":
			case !errors.Is(err, kerr.InvalidConfig) || !strings.HasSuffix(err.Error(), "cannot reach the source cluster at "+c.config["bootstrap.servers"]+": "+errSourceUnreachable.Error()):
				t.Errorf("create: %v, want INVALID_CONFIG with the neutral %q", err, errSourceUnreachable)
			case !strings.Contains(log.String(), c.logged):
				t.Errorf("the node's log does not say %q:\n%s", c.logged, log.String())
			}
		})
	}
}

// syncBuffer is a bytes.Buffer for a logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// silentAddress is a loopback listener that accepts connections and never
// answers.
func silentAddress(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn // bounded by the connections the test makes
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
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
