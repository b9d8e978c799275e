package mirrord

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/mirrordtest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// serveTest runs serve in a goroutine until the test ends, then checks
// that it returned nil once its context was done.
func serveTest(t *testing.T, serve func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serving: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("serving did not return 10s after its context was done")
		}
	})
}

func openTest(t *testing.T, props map[string]string) *Node {
	t.Helper()
	node, err := Open(Config{DataDir: t.TempDir(), Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := node.Close(); err != nil {
			t.Error(err)
		}
	})
	return node
}

// produceTest produces one record to an auto-created topic with a
// client of opts; it returns the produce error.
func produceTest(t *testing.T, opts ...kgo.Opt) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := kgo.NewClient(append(opts, kgo.AllowAutoTopicCreation(), kgo.RequestRetries(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	return client.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr()
}

// A named SASL_PLAINTEXT listener of the properties, served on a socket
// the test owns: alice's password lets her produce, another does not;
// a name the properties lack is ErrNoListener.
func TestServeListenerSASL(t *testing.T) {
	node := openTest(t, map[string]string{
		"listeners":                                   "CLIENT://127.0.0.1:0",
		"listener.security.protocol.map":              "CLIENT:SASL_PLAINTEXT",
		"sasl.enabled.mechanisms":                     "PLAIN",
		"listener.name.client.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	serveTest(t, func(ctx context.Context) error { return node.ServeListener(ctx, ln, "client") })
	if err := produceTest(t, kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())); err != nil {
		t.Fatalf("alice: %v", err)
	}
	wrong, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := wrong.Request(ctx, kmsg.NewPtrMetadataRequest()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if cluster := node.Cluster(); net.JoinHostPort(cluster.Host, itoa(cluster.Port)) != addr {
		t.Errorf("node address %s:%d, want the first listener served's, %s", cluster.Host, cluster.Port, addr)
	}
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := node.ServeListener(context.Background(), other, "INTERNAL"); !errors.Is(err, ErrNoListener) {
		t.Fatalf("an unknown listener: %v, want ErrNoListener", err)
	}
	if _, err := other.Accept(); err == nil {
		t.Fatal("ServeListener left the socket of an unknown listener open")
	}
}

// ListenAndServe binds the properties' listeners (port 0: a free one)
// and advertises the first; the node serves on it until the context is
// done. A bound port is an error naming the listener.
func TestListenAndServe(t *testing.T) {
	node := openTest(t, map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0"})
	serveTest(t, node.ListenAndServe)
	deadline := time.Now().Add(10 * time.Second)
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for node.Cluster().Port == 0 { // the address appears once the listener is bound
		if time.Now().After(deadline) {
			t.Fatal("ListenAndServe advertised no address within 10s")
		}
		<-poll.C
	}
	cluster := node.Cluster()
	addr := net.JoinHostPort(cluster.Host, itoa(cluster.Port))
	if err := produceTest(t, kgo.SeedBrokers(addr)); err != nil {
		t.Fatal(err)
	}

	taken := openTest(t, map[string]string{"listeners": "CLIENT://" + addr, "listener.security.protocol.map": "CLIENT:PLAINTEXT"})
	if err := taken.ListenAndServe(context.Background()); err == nil || !strings.Contains(err.Error(), "listener CLIENT on "+addr) {
		t.Fatalf("a port in use: %v", err)
	}
	if err := openTest(t, nil).ListenAndServe(context.Background()); !errors.Is(err, ErrNoListener) {
		t.Fatalf("no listeners: %v, want ErrNoListener", err)
	}
}

// NewLogger's formats each write one line per event with its fields.
func TestNewLogger(t *testing.T) {
	for _, tc := range []struct {
		format string
		parse  func(line string) (map[string]string, error)
	}{
		{"text", func(line string) (map[string]string, error) {
			fields := map[string]string{}
			for _, field := range strings.Fields(line) {
				key, value, _ := strings.Cut(field, "=")
				fields[key] = value
			}
			return fields, nil
		}},
		{"json", func(line string) (map[string]string, error) {
			var fields map[string]any
			err := json.Unmarshal([]byte(line), &fields)
			out := map[string]string{}
			for k, v := range fields {
				out[k] = strings.Trim(mustJSON(v), `"`)
			}
			return out, err
		}},
	} {
		var out bytes.Buffer
		logger, err := NewLogger(&out, tc.format, slog.LevelInfo)
		if err != nil {
			t.Fatal(err)
		}
		logger.Debug("not written")
		logger.With("mirror", "dr").Warn("failed", "topic", "orders", "partition", 3)
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != 1 {
			t.Fatalf("%s: %d lines, want 1: %q", tc.format, len(lines), out.String())
		}
		fields, err := tc.parse(lines[0])
		if err != nil || fields["level"] != "WARN" || fields["mirror"] != "dr" || fields["topic"] != "orders" || fields["partition"] != "3" {
			t.Errorf("%s: %q read as %v, %v", tc.format, lines[0], fields, err)
		}
	}
	if _, err := NewLogger(&bytes.Buffer{}, "JSON", slog.LevelInfo); err == nil || !strings.Contains(err.Error(), `"JSON"`) {
		t.Errorf("an unknown format: %v, want an error naming it", err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// A named SSL listener of the properties, served on a socket the test
// owns, speaks TLS with the keystore's certificate: a client trusting
// the CA produces, a plaintext client does not get an answer.
func TestServeListenerTLS(t *testing.T) {
	pki := mirrordtest.NewPKI(t, "test CA")
	keystore := pki.Issue("node", pkix.Name{CommonName: "node"}, "127.0.0.1").Keystore
	node := openTest(t, map[string]string{"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": keystore})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	serveTest(t, func(ctx context.Context) error { return node.ServeListener(ctx, ln, "SSL") })
	caPEM, err := os.ReadFile(pki.Truststore)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA certificate in the truststore")
	}
	if err := produceTest(t, kgo.SeedBrokers(addr), kgo.DialTLSConfig(&tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})); err != nil {
		t.Fatalf("TLS client: %v", err)
	}
	plaintext, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer plaintext.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := plaintext.Request(ctx, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("a plaintext client was answered on the SSL listener")
	}
}
