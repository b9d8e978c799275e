package mirrord

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mirrord/mirrord/auth"
)

// oauthKey is a signing key of a test JWKS.
type oauthKey struct {
	kid string
	key *ecdsa.PrivateKey
}

func newOAuthKey(t *testing.T, kid string) oauthKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return oauthKey{kid: kid, key: key}
}

// writeJWKS writes the public keys as a JWKS file.
func writeJWKS(t *testing.T, path string, keys ...oauthKey) {
	set := jose.JSONWebKeySet{}
	for _, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.key.Public(), KeyID: k.kid, Algorithm: "ES256", Use: "sig"})
	}
	data, _ := json.Marshal(set)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// authenticate runs an OAUTHBEARER exchange with a token of sub signed by
// k and reports whether it succeeded.
func (k oauthKey) authenticate(t *testing.T, config *auth.SASLConfig, sub string) bool {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: k.key, KeyID: k.kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.Signed(signer).Claims(map[string]any{"sub": sub, "aud": "mirrord", "exp": time.Now().Unix() + 60}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	mechanism, ok := config.Mechanism(auth.MechanismOAuthBearer)
	if !ok {
		t.Fatalf("OAUTHBEARER not enabled: %v", config.Names())
	}
	exchange := mechanism.NewExchange()
	_, done, err := exchange.Step([]byte("n,,\x01auth=Bearer " + token + "\x01\x01"))
	return err == nil && done && exchange.Principal() == auth.User(sub)
}

// TestListenerOAuthBearerRefresh: the JWKS refresh keys reach the
// listener's mechanism (a listener's refresh.ms of 1 re-reads a rotated
// JWKS file while the node serves: the default hour would keep the
// retired key), bad values are refused, and the refresh loops end with
// the node.
func TestListenerOAuthBearerRefresh(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "jwks.json")
	old, rotated := newOAuthKey(t, "old"), newOAuthKey(t, "rotated")
	writeJWKS(t, path, old)
	store, _ := auth.OpenScramCredentials(nil, func([]byte) error { return nil })
	props := map[string]string{
		"listener.name.client.sasl.enabled.mechanisms":                               "OAUTHBEARER",
		"sasl.oauthbearer.jwks.endpoint.url":                                         "file://" + path,
		"sasl.oauthbearer.expected.audience":                                         "mirrord",
		"listener.name.client.oauthbearer.sasl.oauthbearer.jwks.endpoint.refresh.ms": "1",
	}
	sasl, err := takeSASLProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	config, err := sasl.listenerSASL(context.Background(), "CLIENT", store)
	if err != nil {
		t.Fatal(err)
	}
	if !old.authenticate(t, config, "svc-old") {
		t.Fatal("a token of the JWKS's key refused")
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait := runJWKSRefresh(ctx, []*auth.SASLConfig{config}, slog.New(slog.DiscardHandler))
	writeJWKS(t, path, rotated)
	// The retired key's kid is in the set in use, so only the periodic
	// refresh (not one for an unknown kid) can retire it.
	deadline := time.Now().Add(10 * time.Second)
	for old.authenticate(t, config, "svc-old") {
		if time.Now().After(deadline) {
			t.Fatal("a token of the retired key still accepted after 10s of refresh.ms=1")
		}
	}
	if !rotated.authenticate(t, config, "svc-rotated") {
		t.Fatal("a token of the rotated key refused after the refresh")
	}
	cancel()
	waited := make(chan struct{})
	go func() { wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the JWKS refresh did not end with the node's context")
	}

	for _, value := range []string{"0", "-5", "soon", "3000000000"} {
		bad := map[string]string{"sasl.enabled.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.jwks.endpoint.url": "file://" + path}
		for _, key := range []string{"sasl.oauthbearer.jwks.endpoint.refresh.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
			"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"} {
			bad[key] = value
			taken, _ := takeSASLProperties(bad)
			if _, err := taken.listenerSASL(context.Background(), "CLIENT", store); err == nil {
				t.Fatalf("%s=%s accepted", key, value)
			}
			delete(bad, key)
		}
	}
}
