package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// jwksServer serves a JWKS on loopback that a test rotates, and counts
// the reads.
type jwksServer struct {
	*httptest.Server
	mu     sync.Mutex
	body   []byte
	status int
	reads  int
}

func newJWKSServer(t *testing.T) *jwksServer {
	s := &jwksServer{status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.reads++
		w.WriteHeader(s.status)
		w.Write(s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

// serve makes the JWKS the public keys of signers, answered with status.
func (s *jwksServer) serve(status int, signers ...*jwksSigner) {
	set := jose.JSONWebKeySet{}
	for _, signer := range signers {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: signer.key.Public(), KeyID: signer.kid, Algorithm: "ES256", Use: "sig"})
	}
	body, _ := json.Marshal(set)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body, s.status = body, status
}

func (s *jwksServer) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// jwksSigner is a signing key with its kid.
type jwksSigner struct {
	kid string
	key *ecdsa.PrivateKey
}

func newJWKSSigner(t *testing.T, kid string) *jwksSigner {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &jwksSigner{kid: kid, key: key}
}

// step runs one OAUTHBEARER exchange with a token signed by s and
// returns the principal, or "" if the token was refused.
func (s *jwksSigner) step(t *testing.T, m *OAuthBearer, now time.Time) Principal {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: s.key, KeyID: s.kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.Signed(signer).Claims(map[string]any{"sub": "svc-" + s.kid, "exp": now.Unix() + 60}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	e := m.NewExchange()
	answer, done, err := e.Step([]byte("n,,\x01auth=Bearer " + token + "\x01\x01"))
	switch {
	case err != nil:
		t.Fatalf("kid %s: %v", s.kid, err)
	case done:
		return e.Principal()
	case string(answer) != invalidTokenJSON:
		t.Fatalf("kid %s: answer %q", s.kid, answer)
	}
	return Principal{}
}

// fakeTimers is the mechanism's After: each timer asked for is handed to
// the test, which fires it.
type fakeTimers struct {
	mu      sync.Mutex
	now     time.Time
	pending chan fakeTimer
}

type fakeTimer struct {
	d    time.Duration
	fire chan time.Time
}

func (f *fakeTimers) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeTimers) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func (f *fakeTimers) After(d time.Duration) <-chan time.Time {
	timer := fakeTimer{d: d, fire: make(chan time.Time, 1)}
	f.pending <- timer
	return timer.fire
}

// next returns the timer the mechanism waits on now.
func (f *fakeTimers) next(t *testing.T) fakeTimer {
	t.Helper()
	select {
	case timer := <-f.pending:
		return timer
	case <-time.After(10 * time.Second):
		t.Fatal("no timer asked for within 10s")
	}
	return fakeTimer{}
}

func newFakeTimers() *fakeTimers {
	return &fakeTimers{now: time.Unix(1_800_000_000, 0), pending: make(chan fakeTimer, 4)}
}

func TestJWKSRefresh(t *testing.T) {
	server, clock := newJWKSServer(t), newFakeTimers()
	k1, k2, k3 := newJWKSSigner(t, "k1"), newJWKSSigner(t, "k2"), newJWKSSigner(t, "k3")
	server.serve(http.StatusOK, k1)
	m, err := NewOAuthBearer(context.Background(), OAuthBearerConfig{JWKSURL: server.URL + "/jwks", Now: clock.Now, After: clock.After})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	reports, done := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx, func(err error) { reports <- err })
	}()
	report := func() error {
		t.Helper()
		select {
		case err := <-reports:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("no refresh within 10s")
		}
		return nil
	}
	want := func(s *jwksSigner, accepted bool) {
		t.Helper()
		if got := s.step(t, m, clock.Now()); (got == User("svc-"+s.kid)) != accepted {
			t.Fatalf("kid %s: principal %v, want accepted %v", s.kid, got, accepted)
		}
	}

	// The periodic refresh, every sasl.oauthbearer.jwks.endpoint.refresh.ms.
	periodic := clock.next(t)
	if periodic.d != DefaultJWKSRefreshInterval {
		t.Fatalf("refresh interval %v, want Kafka's %v", periodic.d, DefaultJWKSRefreshInterval)
	}
	server.serve(http.StatusOK, k1, k2)
	periodic.fire <- clock.Now()
	if err := report(); err != nil || server.readCount() != 2 {
		t.Fatalf("periodic refresh: %v after %d reads", err, server.readCount())
	}
	want(k2, true)

	// A rotated key: the token naming it is refused and asks for a
	// refresh; the next one is accepted, the retired key is not.
	clock.next(t) // the next periodic timer, never fired
	server.serve(http.StatusOK, k3)
	want(k3, false)
	if err := report(); err != nil || server.readCount() != 3 {
		t.Fatalf("refresh for kid k3: %v after %d reads", err, server.readCount())
	}
	want(k3, true)
	want(k1, false) // retired: its kid asks for a refresh too, as in Kafka
	if err := report(); err != nil || server.readCount() != 4 {
		t.Fatalf("refresh for kid k1: %v after %d reads", err, server.readCount())
	}
	want(k1, false)
	clock.next(t) // the periodic timer the k1 refresh replaced

	// A refresh that fails retries with Kafka's backoff, doubling, for
	// retry.backoff.max.ms, then keeps the set in use.
	periodic = clock.next(t)
	server.serve(http.StatusInternalServerError)
	periodic.fire <- clock.Now()
	var waits []time.Duration
	for range 7 { // 100ms doubling to 6.4s passes 10s after the 7th wait
		retry := clock.next(t)
		waits = append(waits, retry.d)
		clock.advance(retry.d)
		retry.fire <- clock.Now()
	}
	if err := report(); !errors.Is(err, ErrJWKSRefresh) {
		t.Fatalf("failed refresh reported %v, want ErrJWKSRefresh", err)
	}
	if got := fmt.Sprint(waits); got != "[100ms 200ms 400ms 800ms 1.6s 3.2s 3.7s]" {
		t.Fatalf("retry waits %s, want Kafka's backoff to 10s", got)
	}
	if reads := server.readCount(); reads != 4+8 {
		t.Fatalf("%d reads, want 8 attempts", reads-4)
	}
	want(k3, true)

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end with its context")
	}
}

// TestJWKSUnknownKeyIDRateLimit: each kid asks for one refresh a minute,
// at most 16 kids are remembered, requests coalesce, and an overlong kid
// asks for none.
func TestJWKSUnknownKeyIDRateLimit(t *testing.T) {
	server, clock := newJWKSServer(t), newFakeTimers()
	k1 := newJWKSSigner(t, "k1")
	server.serve(http.StatusOK, k1)
	m, err := NewOAuthBearer(context.Background(), OAuthBearerConfig{JWKSURL: server.URL, Now: clock.Now, After: clock.After})
	if err != nil {
		t.Fatal(err)
	}
	asked := func() bool {
		select {
		case <-m.jwks.expedite:
			return true
		default:
			return false
		}
	}
	unknown := newJWKSSigner(t, "rotated")
	for _, tc := range []struct {
		name    string
		advance time.Duration
		asks    bool
	}{
		{"first", 0, true},
		{"again at once", 0, false},
		{"after 59s", 59 * time.Second, false},
		{"after 60s", time.Second, true},
		{"again", 0, false},
	} {
		clock.advance(tc.advance)
		unknown.step(t, m, clock.Now())
		if got := asked(); got != tc.asks {
			t.Fatalf("%s: asked for a refresh %v, want %v", tc.name, got, tc.asks)
		}
	}
	k1.step(t, m, clock.Now())
	if asked() {
		t.Fatal("a known kid asked for a refresh")
	}
	for i := range 2 * missingKeyIDsMax {
		m.jwks.unknownKeyID(fmt.Sprintf("kid-%d", i))
	}
	if len(m.jwks.missing) != missingKeyIDsMax || !asked() || asked() {
		t.Fatalf("%d kids remembered, want %d; requests coalesce into one", len(m.jwks.missing), missingKeyIDsMax)
	}
	m.jwks.unknownKeyID(strings.Repeat("k", missingKeyIDBytesMax+1))
	if asked() {
		t.Fatal("an overlong kid asked for a refresh")
	}
	if server.readCount() != 1 {
		t.Fatalf("%d reads without Run, want the first", server.readCount())
	}
}
