package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/xdg-go/scram"
)

// failMessage returns the client message of a failed step, or "".
func failMessage(err error) string {
	var saslErr *SASLError
	if errors.As(err, &saslErr) {
		return saslErr.Message
	}
	return ""
}

func TestParseJAASPlainUsers(t *testing.T) {
	for _, tc := range []struct {
		text  string
		users map[string]string
		err   bool
	}{
		{`org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a \"q\" b";`,
			map[string]string{"admin": "admin-secret", "alice": `a "q" b`}, false},
		{`org.apache.kafka.common.security.plain.PlainLoginModule required user_bob=plain;`, map[string]string{"bob": "plain"}, false},
		{`org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="x"`, nil, true},                  // no ;
		{`org.apache.kafka.common.security.plain.PlainLoginModule maybe user_bob="x";`, nil, true},                    // flag
		{`org.apache.kafka.common.security.scram.ScramLoginModule required user_bob="x";`, nil, true},                 // not PLAIN's
		{`org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="x; a b;`, nil, true},             // unterminated
		{`org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="x"; other required;`, nil, true}, // two entries
	} {
		c, err := ParseJAAS(tc.text)
		var users map[string]string
		if err == nil {
			users, err = PlainUsers(c)
		}
		if (err != nil) != tc.err {
			t.Fatalf("%s: error %v", tc.text, err)
		}
		if !tc.err && len(users) != len(tc.users) {
			t.Fatalf("%s: users %v, want %v", tc.text, users, tc.users)
		}
		for name, password := range tc.users {
			if users[name] != password {
				t.Fatalf("%s: user %s password %q, want %q", tc.text, name, users[name], password)
			}
		}
	}
}

func TestPlainExchange(t *testing.T) {
	plain := NewPlain(map[string]string{"alice": "alice-secret"})
	for _, tc := range []struct {
		token   string
		ok      bool
		message string
	}{
		{"\x00alice\x00alice-secret", true, ""},
		{"alice\x00alice\x00alice-secret", true, ""},
		{"\x00alice\x00wrong", false, "Authentication failed: Invalid username or password"},
		{"\x00mallory\x00alice-secret", false, "Authentication failed: Invalid username or password"},
		{"\x00\x00x", false, "Authentication failed: username not specified"},
		{"\x00alice\x00", false, "Authentication failed: password not specified"},
		{"bob\x00alice\x00alice-secret", false, "Authentication failed: Client requested an authorization id that is different from username"},
		{"alice-secret", false, "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"},
	} {
		e := plain.NewExchange()
		_, done, err := e.Step([]byte(tc.token))
		if done != tc.ok || (err == nil) != tc.ok || failMessage(err) != tc.message {
			t.Fatalf("%q: done %v, err %v", tc.token, done, err)
		}
		if tc.ok && e.Principal() != User("alice") {
			t.Fatalf("%q: principal %v", tc.token, e.Principal())
		}
		if _, _, err := e.Step([]byte(tc.token)); err == nil {
			t.Fatalf("%q: a second step succeeded", tc.token)
		}
	}
}

// scramStore returns a store holding user's password for mechanism, as
// AlterUserScramCredentials would write it.
func scramStore(t testing.TB, user, password string, iterations int) *ScramCredentials {
	t.Helper()
	store, err := OpenScramCredentials(nil, func([]byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	salt := []byte("0123456789abcdef")
	salted, err := pbkdf2.Key(sha512.New, password, salt, iterations, sha512.Size)
	if err != nil {
		t.Fatal(err)
	}
	if errs := store.Alter([]ScramAlteration{{User: user, Mechanism: MechanismScramSHA512, Iterations: int32(iterations), Salt: salt, SaltedPassword: salted}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	return store
}

// runScram runs xdg-go's client against the server exchange.
func runScram(t *testing.T, mechanism SASLMechanism, user, password string) (SASLExchange, error) {
	t.Helper()
	client, err := scram.SHA512.NewClient(user, password, "")
	if err != nil {
		t.Fatal(err)
	}
	conversation := client.NewConversation()
	server := mechanism.NewExchange()
	challenge := ""
	for step := 0; step < 3; step++ {
		token, err := conversation.Step(challenge)
		if err != nil {
			t.Fatalf("client step %d: %v", step, err)
		}
		answer, done, err := server.Step([]byte(token))
		if err != nil {
			return server, err
		}
		if done {
			if _, err := conversation.Step(string(answer)); err != nil {
				t.Fatalf("client rejects the server's signature: %v", err)
			}
			return server, nil
		}
		challenge = string(answer)
	}
	t.Fatal("no end after 3 steps")
	return nil, nil
}

func TestScramExchange(t *testing.T) {
	store := scramStore(t, "alice", "alice-secret", 4096)
	mechanism, err := NewScram(MechanismScramSHA512, store)
	if err != nil {
		t.Fatal(err)
	}
	generic := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
	for _, tc := range []struct {
		user, password, message string
	}{
		{"alice", "alice-secret", ""},
		{"alice", "wrong", generic},
		{"mallory", "alice-secret", generic},
	} {
		server, err := runScram(t, mechanism, tc.user, tc.password)
		if failMessage(err) != tc.message || (err == nil) != (tc.message == "") {
			t.Fatalf("%s/%s: %v", tc.user, tc.password, err)
		}
		if err == nil && server.Principal() != User("alice") {
			t.Fatalf("principal %v", server.Principal())
		}
	}
	sha256Mechanism, _ := NewScram(MechanismScramSHA256, store)
	if _, _, err := sha256Mechanism.NewExchange().Step([]byte("n,,n=alice,r=abc")); failMessage(err) == "" {
		t.Fatalf("alice has no SCRAM-SHA-256 credential: %v", err)
	}
}

func TestScramCredentialsAlterPersists(t *testing.T) {
	var saved []byte
	store, _ := OpenScramCredentials(nil, func(data []byte) error { saved = data; return nil })
	salted := make([]byte, 64)
	errs := store.Alter([]ScramAlteration{
		{User: "alice", Mechanism: MechanismScramSHA512, Iterations: 8192, Salt: []byte("s"), SaltedPassword: salted},
		{User: "bob", Mechanism: "SCRAM-SHA-1", Iterations: 8192},
		{User: "carol", Mechanism: MechanismScramSHA256, Iterations: 4095},
		{User: "dave", Mechanism: MechanismScramSHA256, Iterations: 16385},
		{User: "erin", Mechanism: MechanismScramSHA256, Delete: true},
		{User: "frank", Mechanism: MechanismScramSHA256, Iterations: 4096},
		{User: "frank", Mechanism: MechanismScramSHA512, Iterations: 4096},
		{User: "", Mechanism: MechanismScramSHA512, Iterations: 4096},
	})
	want := []error{nil, ErrScramUnknownMechanism, ErrScramTooFewIterations, ErrScramTooManyIterations, ErrScramNotFound,
		ErrScramDuplicateUser, ErrScramDuplicateUser, ErrScramEmptyUser}
	for i := range want {
		if !errors.Is(errs[i], want[i]) && errs[i] != want[i] {
			t.Fatalf("alteration %d: %v, want %v", i, errs[i], want[i])
		}
	}
	reopened, err := OpenScramCredentials(saved, func([]byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	infos := reopened.Describe(nil)
	if len(infos) != 1 || infos[0].User != "alice" || infos[0].Iterations[0] != 8192 || infos[0].Mechanisms[0] != MechanismScramSHA512 {
		t.Fatalf("reopened: %+v", infos)
	}
	before, _ := reopened.Lookup(MechanismScramSHA512, "alice")
	after, _ := store.Lookup(MechanismScramSHA512, "alice")
	if string(before.StoredKey) != string(after.StoredKey) || len(after.StoredKey) != 64 {
		t.Fatal("stored key did not survive the file")
	}
	// A persist failure changes nothing.
	failing, _ := OpenScramCredentials(saved, func([]byte) error { return errors.New("disk full") })
	if errs := failing.Alter([]ScramAlteration{{User: "alice", Mechanism: MechanismScramSHA512, Delete: true}}); errs[0] == nil {
		t.Fatal("a failed persist reported success")
	}
	if _, ok := failing.Lookup(MechanismScramSHA512, "alice"); !ok {
		t.Fatal("a failed persist deleted the credential")
	}
	if errs := store.Alter([]ScramAlteration{{User: "alice", Mechanism: MechanismScramSHA512, Delete: true}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if infos := store.Describe(nil); len(infos) != 0 {
		t.Fatalf("after delete: %+v", infos)
	}
}

// oauthFixture is a signing key, its JWKS file, and a mechanism over it.
type oauthFixture struct {
	signer    jose.Signer
	kidless   jose.Signer // the same key, no kid in the header
	mechanism *OAuthBearer
	now       time.Time
}

func newOAuthFixture(t testing.TB, cfg OAuthBearerConfig) *oauthFixture {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kidless, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &oauthFixture{signer: signer, kidless: kidless, now: time.Unix(1_800_000_000, 0)}
	cfg.JWKSURL, cfg.Now = "file://"+path, func() time.Time { return f.now }
	if f.mechanism, err = NewOAuthBearer(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *oauthFixture) token(t testing.TB, claims map[string]any) string {
	t.Helper()
	text, err := jwt.Signed(f.signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return text
}

func TestOAuthBearerExchange(t *testing.T) {
	f := newOAuthFixture(t, OAuthBearerConfig{ExpectedAudience: []string{"mirrord"}, ExpectedIssuer: "https://issuer", SubClaimName: "client_id"})
	now := f.now.Unix()
	good := map[string]any{"client_id": "svc-a", "sub": "ignored", "aud": "mirrord", "iss": "https://issuer", "exp": now + 60, "iat": now}
	with := func(key string, value any) map[string]any {
		c := map[string]any{}
		for k, v := range good {
			c[k] = v
		}
		if value == nil {
			delete(c, key)
		} else {
			c[key] = value
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		claims map[string]any
		ok     bool
	}{
		{"good", good, true},
		{"expired within skew", with("exp", now-20), true},
		{"expired", with("exp", now-31), false},
		{"no exp", with("exp", nil), false},
		{"not yet valid", with("nbf", now+60), false},
		{"audience", with("aud", "other"), false},
		{"issuer", with("iss", "https://other"), false},
		{"no principal claim", with("client_id", nil), false},
	} {
		e := f.mechanism.NewExchange()
		answer, done, err := e.Step([]byte("n,,\x01auth=Bearer " + f.token(t, tc.claims) + "\x01\x01"))
		if tc.ok {
			if err != nil || !done || e.Principal() != User("svc-a") {
				t.Fatalf("%s: done %v err %v principal %v", tc.name, done, err, e.Principal())
			}
			continue
		}
		if err != nil || done || string(answer) != `{"status":"invalid_token"}` {
			t.Fatalf("%s: answer %q done %v err %v", tc.name, answer, done, err)
		}
		if _, _, err := e.Step([]byte{1}); failMessage(err) != `{"status":"invalid_token"}` {
			t.Fatalf("%s: after \\x01: %v", tc.name, err)
		}
	}
	// A token without kid is verified by the first key that suits its
	// algorithm, as Kafka's jose4j selects one; one of another key fails.
	kidless, err := jwt.Signed(f.kidless).Claims(good).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	if e := f.mechanism.NewExchange(); func() error { _, _, err := e.Step([]byte("n,,\x01auth=Bearer " + kidless + "\x01\x01")); return err }() != nil || e.Principal() != User("svc-a") {
		t.Fatalf("token without kid: principal %v", e.Principal())
	}
	// A token signed by another key.
	other := newOAuthFixture(t, OAuthBearerConfig{})
	foreignKidless, _ := jwt.Signed(other.kidless).Claims(good).Serialize()
	if answer, _, _ := f.mechanism.NewExchange().Step([]byte("n,,\x01auth=Bearer " + foreignKidless + "\x01\x01")); string(answer) != `{"status":"invalid_token"}` {
		t.Fatalf("foreign signature without kid: %q", answer)
	}
	if answer, _, _ := f.mechanism.NewExchange().Step([]byte("n,,\x01auth=Bearer " + other.token(t, good) + "\x01\x01")); string(answer) != `{"status":"invalid_token"}` {
		t.Fatalf("foreign signature: %q", answer)
	}
	for _, message := range []string{"", "n,,auth=Bearer x\x01\x01", "n,,\x01auth=Basic abc\x01\x01", "n,,\x01auth=Bearer a b\x01\x01", "y,,\x01auth=Bearer a\x01\x01"} {
		if _, _, err := f.mechanism.NewExchange().Step([]byte(message)); failMessage(err) != "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER" {
			t.Fatalf("%q: %v", message, err)
		}
	}
	e := f.mechanism.NewExchange()
	if _, _, err := e.Step([]byte("n,a=bob,\x01auth=Bearer " + f.token(t, good) + "\x01\x01")); !strings.Contains(failMessage(err), "different from the token's principal name") {
		t.Fatalf("authzid: %v", err)
	}
}

// FuzzSASLExchange feeds arbitrary client tokens to each mechanism: no
// panic, no success without the secret, and every exchange ends within
// its bound of steps.
func FuzzSASLExchange(f *testing.F) {
	f.Add([]byte("\x00alice\x00alice-secret"), []byte("c=biws,r=x,p=eA=="), uint8(0))
	f.Add([]byte("n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL"), []byte("c=biws,r=fyko+d2lbbFgONRv9qkxdawL,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="), uint8(1))
	f.Add([]byte("n,,\x01auth=Bearer a.b.c\x01\x01"), []byte{1}, uint8(2))
	f.Add([]byte("n,a=x,\x01auth=Bearer eyJ.e30.x\x01k=v\x01\x01"), []byte("n"), uint8(2))
	store := scramStore(f, "alice", "alice-secret", 4096)
	scramMechanism, _ := NewScram(MechanismScramSHA512, store)
	oauth := newOAuthFixture(f, OAuthBearerConfig{})
	mechanisms := []SASLMechanism{NewPlain(map[string]string{"alice": "alice-secret"}), scramMechanism, oauth.mechanism}
	f.Fuzz(func(t *testing.T, first, second []byte, which uint8) {
		e := mechanisms[int(which)%len(mechanisms)].NewExchange()
		for step, token := range [][]byte{first, second, first} {
			_, done, err := e.Step(token)
			if done && err != nil {
				t.Fatalf("step %d: done with error %v", step, err)
			}
			if done {
				// Only PLAIN's exact credentials can finish from
				// fuzzed bytes (SCRAM needs the server's nonce, a JWT a
				// signature).
				if which%3 != 0 || !strings.HasSuffix(string(token), "\x00alice\x00alice-secret") {
					t.Fatalf("step %d: authenticated %v from %q", step, e.Principal(), token)
				}
				return
			}
			if err != nil {
				if !errors.Is(err, ErrSASLAuthentication) || failMessage(err) == "" {
					t.Fatalf("step %d: error %v is not a SASLError", step, err)
				}
				if _, _, again := e.Step(token); again == nil {
					t.Fatalf("step %d: a step after failure succeeded", step)
				}
				return
			}
		}
		t.Fatalf("no end after 3 tokens")
	})
}
