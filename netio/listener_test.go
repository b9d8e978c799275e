package netio

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mirrord/mirrord/auth"
	"github.com/mirrord/mirrord/mirrordtest"
)

// serverTLS is a listener's TLS config: the node's certificate from pki,
// client certificates checked against pki's CA as clientAuth says.
func serverTLS(pki *mirrordtest.PKI, clientAuth tls.ClientAuthType) *tls.Config {
	node := pki.Issue("node", pkix.Name{CommonName: "node"}, "127.0.0.1")
	return &tls.Config{Certificates: []tls.Certificate{node.TLS}, ClientCAs: pki.Pool(), ClientAuth: clientAuth, MinVersion: tls.VersionTLS12}
}

func TestListenerHandshakePrincipal(t *testing.T) {
	pki := mirrordtest.NewPKI(t, "test CA")
	other := mirrordtest.NewPKI(t, "other CA")
	alice := pki.Issue("alice", pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"corp"}})
	stranger := other.Issue("stranger", pkix.Name{CommonName: "Alice"})
	lowerCN, err := auth.ParsePrincipalMappingRules("RULE:^CN=([^,]+),OU=eng,.*$/$1/L, DEFAULT")
	if err != nil {
		t.Fatal(err)
	}
	onlyBob, err := auth.ParsePrincipalMappingRules("RULE:^CN=Bob,.*$/bob/")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		protocol   auth.SecurityProtocol
		clientAuth tls.ClientAuthType
		mapper     *auth.PrincipalMapper
		cert       *tls.Certificate
		want       auth.Principal
		refused    bool
	}{
		{name: "DEFAULT is the RFC 2253 subject", protocol: auth.SSL, clientAuth: tls.RequireAndVerifyClientCert, cert: &alice.TLS, want: auth.User("CN=Alice,OU=eng,O=corp")},
		{name: "a RULE names the user", protocol: auth.SSL, clientAuth: tls.RequireAndVerifyClientCert, mapper: lowerCN, cert: &alice.TLS, want: auth.User("alice")},
		{name: "requested without a certificate", protocol: auth.SSL, clientAuth: tls.VerifyClientCertIfGiven, want: auth.Anonymous},
		{name: "requested with one", protocol: auth.SSL, clientAuth: tls.VerifyClientCertIfGiven, cert: &alice.TLS, want: auth.User("CN=Alice,OU=eng,O=corp")},
		{name: "none ignores a certificate", protocol: auth.SSL, clientAuth: tls.NoClientCert, cert: &alice.TLS, want: auth.Anonymous},
		{name: "required without a certificate", protocol: auth.SSL, clientAuth: tls.RequireAndVerifyClientCert, refused: true},
		{name: "a certificate of another CA", protocol: auth.SSL, clientAuth: tls.VerifyClientCertIfGiven, cert: &stranger.TLS, refused: true},
		{name: "no rule matches", protocol: auth.SSL, clientAuth: tls.RequireAndVerifyClientCert, mapper: onlyBob, cert: &alice.TLS, refused: true},
		{name: "SASL_SSL leaves it to SASL", protocol: auth.SASLSSL, clientAuth: tls.RequireAndVerifyClientCert, cert: &alice.TLS, want: auth.Anonymous},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &Listener{Name: tc.protocol.String(), Protocol: tc.protocol, TLS: serverTLS(pki, tc.clientAuth), PrincipalMapper: tc.mapper, HandshakeTimeout: 10 * time.Second}
			serverSide, clientSide := net.Pipe()
			defer serverSide.Close()
			clientConfig := &tls.Config{RootCAs: pki.Pool(), ServerName: "127.0.0.1"}
			if tc.cert != nil { // sent even when its CA is not one the server names
				clientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return tc.cert, nil }
			}
			clientDone := make(chan error, 1)
			go func() {
				defer clientSide.Close()
				client := tls.Client(clientSide, clientConfig)
				err := client.Handshake()
				if err == nil {
					_, err = client.Read(make([]byte, 1)) // TLS 1.3: a refused certificate shows here
				}
				clientDone <- err
			}()
			c := &conn{listener: l, nc: l.wrap(serverSide), principal: auth.Anonymous}
			err := c.handshake(context.Background())
			if tc.refused {
				if !errors.Is(err, ErrAuthentication) {
					t.Fatalf("handshake: %v, principal %v; want ErrAuthentication", err, c.principal)
				}
			} else if err != nil || c.principal != tc.want {
				t.Fatalf("handshake: %v, principal %v; want %v", err, c.principal, tc.want)
			}
			serverSide.Close()
			<-clientDone
		})
	}
}

// A client that opens a TLS listener's port and says nothing is closed
// after the handshake timeout.
func TestListenerHandshakeTimeout(t *testing.T) {
	pki := mirrordtest.NewPKI(t, "test CA")
	l := Listener{Name: "SSL", Protocol: auth.SSL, TLS: serverTLS(pki, tls.NoClientCert), HandshakeTimeout: 100 * time.Millisecond}
	addr := serveListeners(t, newMemBackend(), l)[0]
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read %d bytes, %v; want the server to close the connection", n, err)
	}
}

func TestListenerSSLWithoutTLSConfig(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = NewServer(Config{Backend: newMemBackend()}).ServeListener(context.Background(), ln, Listener{Name: "SSL", Protocol: auth.SSL})
	if !errors.Is(err, ErrListener) {
		t.Fatalf("%v, want ErrListener", err)
	}
}

// serveListeners serves backend on a loopback port per listener until
// the test ends, each advertising its own address; the backend's cluster
// address is the first's.
func serveListeners(t *testing.T, backend *memBackend, listeners ...Listener) []string {
	t.Helper()
	server := NewServer(Config{Backend: backend})
	ctx, cancel := context.WithCancel(context.Background())
	var addrs []string
	done := make(chan error, len(listeners))
	for i, l := range listeners {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().(*net.TCPAddr)
		l.AdvertisedHost, l.AdvertisedPort = addr.IP.String(), int32(addr.Port)
		if i == 0 {
			backend.cluster.Host, backend.cluster.Port = "192.0.2.1", 1 // never the answer: each listener advertises its own
		}
		addrs = append(addrs, ln.Addr().String())
		go func() { done <- server.ServeListener(ctx, ln, l) }()
	}
	t.Cleanup(func() {
		cancel()
		for range listeners {
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	})
	return addrs
}

// One server, a PLAINTEXT and an SSL listener: a franz-go client with a
// client certificate produces over TLS and another consumes over
// plaintext, and each is told its own listener's address.
func TestListenersPlaintextAndSSL(t *testing.T) {
	pki := mirrordtest.NewPKI(t, "test CA")
	alice := pki.Issue("alice", pkix.Name{CommonName: "alice"})
	addrs := serveListeners(t, newMemBackend(),
		Listener{Name: "PLAINTEXT", Protocol: auth.Plaintext},
		Listener{Name: "SSL", Protocol: auth.SSL, TLS: serverTLS(pki, tls.RequireAndVerifyClientCert)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	secure, err := kgo.NewClient(kgo.SeedBrokers(addrs[1]), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation(),
		kgo.DialTLSConfig(&tls.Config{RootCAs: pki.Pool(), Certificates: []tls.Certificate{alice.TLS}, ServerName: "127.0.0.1"}))
	if err != nil {
		t.Fatal(err)
	}
	defer secure.Close()
	plain, err := kgo.NewClient(kgo.SeedBrokers(addrs[0]), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for i, client := range []*kgo.Client{plain, secure} {
		brokers, err := kadm.NewClient(client).ListBrokers(ctx)
		if err != nil || len(brokers) != 1 || net.JoinHostPort(brokers[0].Host, strconv.Itoa(int(brokers[0].Port))) != addrs[i] {
			t.Fatalf("listener %d: brokers %+v, %v; want %s", i, brokers, err, addrs[i])
		}
	}
	const records = 50
	for i := range records {
		if err := secure.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d over TLS: %v", i, err)
		}
	}
	got := 0
	for got < records {
		fetches := plain.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatalf("consume after %d records: %v", got, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != strconv.Itoa(got) {
				t.Fatalf("record %d: %q", got, r.Value)
			}
			got++
		})
	}
}
