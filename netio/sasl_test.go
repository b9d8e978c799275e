package netio

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/mirrord/mirrord/auth"
)

// saslFixture is one Server with a PLAINTEXT listener (for the SCRAM
// admin calls) and a SASL_PLAINTEXT listener with PLAIN, SCRAM-SHA-512
// and OAUTHBEARER.
type saslFixture struct {
	server              *Server
	plaintext, saslAddr string
	registry            *prometheus.Registry
	signer              jose.Signer
}

func startSASLServer(t *testing.T) *saslFixture {
	t.Helper()
	store, err := auth.OpenScramCredentials(nil, func([]byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	scramMechanism, err := auth.NewScram(auth.MechanismScramSHA512, store)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	jwksServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(jwks) }))
	t.Cleanup(jwksServer.Close)
	oauthMechanism, err := auth.NewOAuthBearer(context.Background(), auth.OAuthBearerConfig{JWKSURL: jwksServer.URL, ExpectedAudience: []string{"mirrord"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &saslFixture{registry: prometheus.NewRegistry()}
	if f.signer, err = jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil); err != nil {
		t.Fatal(err)
	}
	mem := newMemBackend()
	f.server = NewServer(Config{Backend: mem, ScramCredentials: store, Metrics: f.registry})
	saslConfig := &auth.SASLConfig{Mechanisms: []auth.SASLMechanism{
		auth.NewPlain(map[string]string{"alice": "alice-secret"}), scramMechanism, oauthMechanism}}
	listeners := []Listener{{Name: "PLAINTEXT", Protocol: auth.Plaintext}, {Name: "CLIENT", Protocol: auth.SASLPlaintext, SASL: saslConfig}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, len(listeners))
	for i, l := range listeners {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			f.plaintext = ln.Addr().String()
		} else {
			f.saslAddr = ln.Addr().String()
			addr := ln.Addr().(*net.TCPAddr)
			mem.cluster.Host, mem.cluster.Port = addr.IP.String(), int32(addr.Port)
		}
		go func() { done <- f.server.ServeListener(ctx, ln, l) }()
	}
	t.Cleanup(func() {
		cancel()
		for range listeners {
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	})
	return f
}

// ping connects with mechanism and asks for metadata.
func (f *saslFixture) ping(t *testing.T, mechanism sasl.Mechanism) error {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(f.saslAddr), kgo.SASL(mechanism), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, client)
	return err
}

// awaitPrincipals waits until the server's open SASL connections are
// want's: a connection its client closed goes away when the server reads
// the close, after the client has returned.
func (f *saslFixture) awaitPrincipals(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		got := f.principals()
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("principals of the open SASL connections %v, want %v", got, want)
		}
		<-tick.C
	}
}

// principals are the principals of the server's open SASL connections.
func (f *saslFixture) principals() []string {
	f.server.mu.Lock()
	defer f.server.mu.Unlock()
	var names []string
	for c := range f.server.conns {
		if c.listener.Protocol.UsesSASL() && c.sasl.state == saslComplete {
			names = append(names, c.principal.String())
		}
	}
	return names
}

func (f *saslFixture) addScramUser(t *testing.T, user, password string, iterations int32) {
	t.Helper()
	salt := []byte("salt-" + user)
	salted, err := pbkdf2.Key(sha512.New, password, salt, int(iterations), sha512.Size)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: user, Mechanism: 2, Iterations: iterations, Salt: salt, SaltedPassword: salted}}
	resp := dialRaw(t, f.plaintext).do(req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	if len(resp.Results) != 1 || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("alter: %+v", resp.Results)
	}
}

func (f *saslFixture) bearer(t *testing.T, claims map[string]any) string {
	t.Helper()
	token, err := jwt.Signed(f.signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func TestSASLExchangesWithKgo(t *testing.T) {
	f := startSASLServer(t)
	f.addScramUser(t, "carol", "carol-secret", 8192)
	exp := time.Now().Add(time.Minute).Unix()
	for _, tc := range []struct {
		name      string
		mechanism sasl.Mechanism
		principal string
		failure   string // in the client's error; "" succeeds
	}{
		{"plain", plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), "User:alice", ""},
		{"plain wrong password", plain.Auth{User: "alice", Pass: "nope"}.AsMechanism(), "", "Authentication failed: Invalid username or password"},
		{"scram", scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha512Mechanism(), "User:carol", ""},
		{"scram wrong password", scram.Auth{User: "carol", Pass: "nope"}.AsSha512Mechanism(), "", "invalid credentials with SASL mechanism SCRAM-SHA-512"},
		{"scram unknown user", scram.Auth{User: "mallory", Pass: "x"}.AsSha512Mechanism(), "", "invalid credentials with SASL mechanism SCRAM-SHA-512"},
		{"scram-sha-256 not enabled", scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism(), "", "UNSUPPORTED_SASL_MECHANISM"},
		{"oauthbearer", oauth.Auth{Token: f.bearer(t, map[string]any{"sub": "svc", "aud": "mirrord", "exp": exp})}.AsMechanism(), "User:svc", ""},
		{"oauthbearer wrong audience", oauth.Auth{Token: f.bearer(t, map[string]any{"sub": "svc", "aud": "x", "exp": exp})}.AsMechanism(), "", `{"status":"invalid_token"}`},
	} {
		err := f.ping(t, tc.mechanism)
		if tc.failure == "" {
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.failure) {
			t.Fatalf("%s: error %v, want %q", tc.name, err, tc.failure)
		}
	}
	// The principals of the connections that authenticated (kgo closed
	// them; check while a client holds one open).
	client, err := kgo.NewClient(kgo.SeedBrokers(f.saslAddr), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.awaitPrincipals(t, "User:alice")
	for _, tc := range []struct {
		mechanism, result string
		want              float64
	}{
		{"PLAIN", "success", 2}, {"PLAIN", "failure", 1}, {"SCRAM-SHA-512", "success", 1}, {"SCRAM-SHA-512", "failure", 2},
		{"OAUTHBEARER", "success", 1}, {"unsupported", "failure", 1},
	} {
		got := testutil.ToFloat64(f.server.metrics.total.WithLabelValues("CLIENT", tc.mechanism, tc.result))
		if got != tc.want {
			t.Fatalf("%s %s: %v, want %v", tc.mechanism, tc.result, got, tc.want)
		}
	}
}

// closed reports whether the server closed r's connection.
func closed(r *rawConn) bool {
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := r.nc.Read(make([]byte, 1))
	return err == io.EOF
}

func TestSASLHandshakeOrder(t *testing.T) {
	f := startSASLServer(t)
	handshake := func(r *rawConn, version int16, mechanism string) *kmsg.SASLHandshakeResponse {
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = version, mechanism
		return r.do(req).(*kmsg.SASLHandshakeResponse)
	}
	enabled := "PLAIN,SCRAM-SHA-512,OAUTHBEARER"

	// A mechanism not enabled: the list, then the connection closes.
	r := dialRaw(t, f.saslAddr)
	resp := handshake(r, 1, "GSSAPI")
	if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(resp.SupportedMechanisms, ",") != enabled || !closed(r) {
		t.Fatalf("GSSAPI: %s %v", errName(resp.ErrorCode), resp.SupportedMechanisms)
	}

	// Metadata before authentication closes without an answer.
	r = dialRaw(t, f.saslAddr)
	r.send(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrMetadataRequest(), 1))
	if !closed(r) {
		t.Fatal("Metadata before authentication was not refused")
	}

	// ApiVersions, then a second ApiVersions: closed.
	r = dialRaw(t, f.saslAddr)
	if v := r.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); v.ErrorCode != 0 {
		t.Fatalf("ApiVersions: %s", errName(v.ErrorCode))
	}
	r.send(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 9))
	if !closed(r) {
		t.Fatal("a second ApiVersions was served")
	}

	// Wrong PLAIN password over SaslAuthenticate: 58 with Kafka's message, closed.
	r = dialRaw(t, f.saslAddr)
	handshake(r, 1, "PLAIN")
	authenticate := kmsg.NewPtrSASLAuthenticateRequest()
	authenticate.Version, authenticate.SASLAuthBytes = 2, []byte("\x00alice\x00nope")
	bad := r.do(authenticate).(*kmsg.SASLAuthenticateResponse)
	if bad.ErrorCode != kerr.SaslAuthenticationFailed.Code || bad.ErrorMessage == nil || *bad.ErrorMessage != "Authentication failed: Invalid username or password" || !closed(r) {
		t.Fatalf("wrong password: %s %v", errName(bad.ErrorCode), bad.ErrorMessage)
	}

	// Handshake v0: raw tokens, then Kafka requests; a second handshake
	// after authentication is ILLEGAL_SASL_STATE.
	r = dialRaw(t, f.saslAddr)
	if resp := handshake(r, 0, "PLAIN"); resp.ErrorCode != 0 {
		t.Fatalf("handshake v0: %s", errName(resp.ErrorCode))
	}
	token := []byte("\x00alice\x00alice-secret")
	r.send(binary.BigEndian.AppendUint32(nil, uint32(len(token))))
	r.send(token)
	var size [4]byte
	if _, err := io.ReadFull(r.nc, size[:]); err != nil || binary.BigEndian.Uint32(size[:]) != 0 {
		t.Fatalf("raw token answer: % x %v", size, err)
	}
	r.correlation = 10
	if m := r.do(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse); len(m.Brokers) != 1 {
		t.Fatalf("metadata after raw PLAIN: %+v", m.Brokers)
	}
	if resp := handshake(r, 1, "PLAIN"); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake after authentication: %s", errName(resp.ErrorCode))
	}
	f.awaitPrincipals(t, "User:alice")

	// On a PLAINTEXT listener: ILLEGAL_SASL_STATE, and the connection stays.
	r = dialRaw(t, f.plaintext)
	if resp := handshake(r, 1, "PLAIN"); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("plaintext handshake: %s", errName(resp.ErrorCode))
	}
	if a := r.do(authenticate).(*kmsg.SASLAuthenticateResponse); a.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("plaintext authenticate: %s", errName(a.ErrorCode))
	}
}

func TestScramCredentialsAPIs(t *testing.T) {
	f := startSASLServer(t)
	f.addScramUser(t, "alice", "alice-secret", 8192)
	r := dialRaw(t, f.plaintext)
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alter.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		{Name: "few", Mechanism: 2, Iterations: 4095, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "many", Mechanism: 2, Iterations: 16385, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "sha1", Mechanism: 0, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "twice", Mechanism: 1, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "twice", Mechanism: 2, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")},
	}
	alter.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "ghost", Mechanism: 2}}
	got := map[string]string{}
	for _, result := range r.do(alter).(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		got[result.User] = errName(result.ErrorCode)
	}
	want := map[string]string{"ghost": "RESOURCE_NOT_FOUND", "few": "UNACCEPTABLE_CREDENTIAL", "many": "UNACCEPTABLE_CREDENTIAL",
		"sha1": "UNSUPPORTED_SASL_MECHANISM", "twice": "DUPLICATE_RESOURCE"}
	for user, code := range want {
		if !strings.HasPrefix(got[user], code) || len(got) != len(want) {
			t.Fatalf("alter results %v, want %v", got, want)
		}
	}
	describe := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	all := r.do(describe).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if len(all.Results) != 1 || all.Results[0].User != "alice" || len(all.Results[0].CredentialInfos) != 1 ||
		all.Results[0].CredentialInfos[0].Mechanism != 2 || all.Results[0].CredentialInfos[0].Iterations != 8192 {
		t.Fatalf("describe all: %+v", all.Results)
	}
	describe.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "bob"}, {Name: "alice"}, {Name: "alice"}}
	named := r.do(describe).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if len(named.Results) != 2 || named.Results[0].ErrorCode != kerr.ResourceNotFound.Code ||
		*named.Results[0].ErrorMessage != "Attempt to describe a user credential that does not exist: bob" ||
		named.Results[1].ErrorCode != kerr.DuplicateResource.Code {
		t.Fatalf("describe named: %+v", named.Results)
	}
}
