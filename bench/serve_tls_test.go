package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mirrord/mirrord/auth"
	"github.com/mirrord/mirrord/kafkatest"
	"github.com/mirrord/mirrord/mirrordtest"
	"github.com/mirrord/mirrord/netio"
)

// sslCerts is a run's TLS setup, from one test CA: the listeners'
// certificate for 127.0.0.1 (Keystore: a PEM keystore), the CA
// (Truststore: client certificates must chain to it) and a client's
// config with a client certificate. Every SSL listener of the benchmarks
// (mirrord in process and as a child, Kafka) requires that certificate,
// so TLS costs the same handshake everywhere.
type sslCerts struct {
	server     mirrordtest.KeyPair
	truststore string
	pool       *x509.CertPool
	client     *tls.Config
}

func newSSLCerts(tb testing.TB) sslCerts {
	tb.Helper()
	pki := mirrordtest.NewPKI(tb, "bench CA")
	server := pki.Issue("node", pkix.Name{CommonName: "node"}, "127.0.0.1")
	client := pki.Issue("client", pkix.Name{CommonName: "bench"})
	return sslCerts{server: server, truststore: pki.Truststore, pool: pki.Pool(),
		client: &tls.Config{RootCAs: pki.Pool(), Certificates: []tls.Certificate{client.TLS}, ServerName: "127.0.0.1"}}
}

// serveArgs are the `mirrord serve` flags of an SSL listener on addr with
// these certificates.
func (c sslCerts) serveArgs(addr string) []string {
	return []string{"--ssl-listen", addr, "--ssl-keystore", c.server.Keystore, "--ssl-truststore", c.truststore, "--ssl-client-auth", "required"}
}

// kafkaSSL is a Kafka broker's SSL listener with these certificates.
func (c sslCerts) kafkaSSL() *kafkatest.SSL {
	return &kafkatest.SSL{KeystoreLocation: c.server.Keystore, TruststoreLocation: c.truststore, ClientAuth: "required"}
}

// serveSSL serves node's topics on a second, SSL listener (client
// certificates required, the principal from the subject) until the
// benchmark ends, and returns its address and a client TLS config.
func serveSSL(tb testing.TB, served servedNode) (string, *tls.Config) {
	tb.Helper()
	certs := newSSLCerts(tb)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	listener := netio.Listener{Name: "SSL", Protocol: auth.SSL, TLS: &tls.Config{Certificates: []tls.Certificate{certs.server.TLS},
		ClientCAs: certs.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}}
	addr := ln.Addr().(*net.TCPAddr)
	listener.AdvertisedHost, listener.AdvertisedPort = addr.IP.String(), int32(addr.Port)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- netio.NewServer(netio.Config{Backend: served.node}).ServeListener(ctx, ln, listener) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("serve SSL: %v", err)
		}
	})
	return ln.Addr().String(), certs.client
}

// BenchmarkServeTLS consumes a topic of 256 MiB from one node over its
// PLAINTEXT listener (where record bytes leave by sendfile) and over its
// SSL listener (read, encrypted and written by the process), in the same
// run, with a franz-go consumer in this process: MB/s of each and TLS over
// plaintext; CPU-seconds per GB count client and server together.
func BenchmarkServeTLS(b *testing.B) {
	const totalBytes = 256 << 20
	served := serveNode(b, filepath.Join(b.TempDir(), "data"))
	defer served.stop()
	sslAddr, clientTLS := serveSSL(b, served)
	records := fill(b, served.node, "bench", 4, totalBytes)
	var plain, secure cost
	bytes := consumeAll(b, served.addr, "bench", 4, records) // a warm-up, and the bytes both must read
	runs := []func(){
		func() { plain.add(measure(func() { consumeAll(b, served.addr, "bench", 4, records) })) },
		func() {
			secure.add(measure(func() {
				if got := consumeAll(b, sslAddr, "bench", 4, records, kgo.DialTLSConfig(clientTLS)); got != bytes {
					b.Fatalf("over TLS %d bytes, plaintext %d", got, bytes)
				}
			}))
		},
	}
	for i := 0; b.Loop(); i++ { // alternating which goes first
		runs[i%2]()
		runs[(i+1)%2]()
	}
	gb := float64(bytes) * float64(b.N) / 1e9
	b.SetBytes(bytes)
	b.ReportMetric(gb*1e3/plain.wall.Seconds(), "plaintext-MB/s")
	b.ReportMetric(gb*1e3/secure.wall.Seconds(), "tls-MB/s")
	b.ReportMetric(plain.wall.Seconds()/secure.wall.Seconds(), "x-plaintext")
	b.ReportMetric(plain.cpu.Seconds()/gb, "plaintext-cpu-s/GB")
	b.ReportMetric(secure.cpu.Seconds()/gb, "tls-cpu-s/GB")
}
