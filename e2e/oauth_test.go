package e2e

// SASL/OAUTHBEARER through `mirrord serve` with Kafka 4.4's own client:
// the test is the identity provider on loopback (a JWKS and a
// client-credentials token endpoint, net/http/httptest on 127.0.0.1),
// mirrord's SASL_SSL listener validates the tokens against that JWKS
// (sasl.oauthbearer.jwks.endpoint.url), and kafka-console-producer and
// kafka-console-consumer log in with Kafka's OAuthBearerLoginCallbackHandler
// (clientId/clientSecret in the JAAS config, the token endpoint allowed by
// the JVM property Kafka 4 requires).

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/mirrord/mirrord/kafkatest"
)

// oauthAudience is the audience mirrord expects (sasl.oauthbearer.expected.audience).
const oauthAudience = "mirrord"

// oauthClient is a client the test's token endpoint knows: its secret,
// the token's sub and audience, and whether the token is signed by a key
// the JWKS does not publish.
type oauthClient struct {
	id, secret, sub, audience string
	rogue                     bool
}

// oauthIssuer is the test's identity provider: a JWKS at /jwks and a
// client-credentials token endpoint at /token, on loopback.
type oauthIssuer struct {
	*httptest.Server
	clients map[string]oauthClient

	mu      sync.Mutex
	signing jose.JSONWebKey // the published key tokens are signed with
	rogue   jose.JSONWebKey // never published
}

func newSigningKey(t *testing.T, kid string) jose.JSONWebKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return jose.JSONWebKey{Key: key, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"}
}

func startOAuthIssuer(t *testing.T, clients ...oauthClient) *oauthIssuer {
	t.Helper()
	issuer := &oauthIssuer{clients: map[string]oauthClient{}, signing: newSigningKey(t, "key-1"), rogue: newSigningKey(t, "rogue")}
	for _, c := range clients {
		issuer.clients[c.id] = c
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks", issuer.serveJWKS)
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) { issuer.serveToken(t, w, r) })
	issuer.Server = httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(issuer.Close)
	return issuer
}

// rotate replaces the signing key: the JWKS publishes only the new one.
func (i *oauthIssuer) rotate(t *testing.T, kid string) {
	key := newSigningKey(t, kid)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.signing = key
}

func (i *oauthIssuer) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	i.mu.Lock()
	public := i.signing.Public()
	i.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{public}})
}

// serveToken answers a client-credentials grant (RFC 6749 4.4) of a known
// client, authenticated with HTTP Basic as Kafka's retriever sends it.
func (i *oauthIssuer) serveToken(t *testing.T, w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	}
	client, known := i.clients[id]
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" || !known || secret != client.secret {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	token, err := i.token(client)
	if err != nil {
		t.Errorf("token for %s: %v", id, err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": 3600})
}

// token is a JWT for client, signed by the current key (or the rogue one).
func (i *oauthIssuer) token(client oauthClient) (string, error) {
	i.mu.Lock()
	key := i.signing
	if client.rogue {
		key = i.rogue
	}
	i.mu.Unlock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	now := time.Now()
	return jwt.Signed(signer).Claims(jwt.Claims{Issuer: i.URL, Subject: client.sub, Audience: jwt.Audience{client.audience},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour))}).Serialize()
}

// startOAuthNode is a secureNode whose SASL_SSL listener serves PLAIN
// (the admin) and OAUTHBEARER against issuer's JWKS, with the authorizer on.
func startOAuthNode(t *testing.T, issuer *oauthIssuer) *secureNode {
	t.Helper()
	return startSecureNodeWith(t, "PLAIN,OAUTHBEARER", fmt.Sprintf(`listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
sasl.oauthbearer.jwks.endpoint.url=%[1]s/jwks
sasl.oauthbearer.expected.audience=%[2]s
sasl.oauthbearer.expected.issuer=%[1]s
%[3]s`, issuer.URL, oauthAudience, secureAuthorizer))
}

// oauthClientConfig writes the Kafka client properties of client over
// SASL_SSL with OAUTHBEARER from issuer's token endpoint.
func (n *secureNode) oauthClientConfig(t *testing.T, issuer *oauthIssuer, client oauthClient) string {
	t.Helper()
	return n.write(t, client.id+".properties", fmt.Sprintf(`security.protocol=SASL_SSL
ssl.truststore.type=PEM
ssl.truststore.location=%s
sasl.mechanism=OAUTHBEARER
sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler
sasl.oauthbearer.token.endpoint.url=%s/token
sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="%s" clientSecret="%s";
`, n.pki.Truststore, issuer.URL, client.id, client.secret))
}

// TestOAuthBearerWithKafkaTools: Kafka's console producer and consumer
// authenticate with tokens from the test's token endpoint; the principal
// is the token's sub (the ACLs name svc-orders, not the client ID
// orders-app, and the authorizer is on); a token signed by a key the JWKS
// does not publish, or for another audience, is refused with Kafka's
// SaslAuthenticationException; after the issuer rotates its signing key,
// a token signed by the new key is accepted once mirrord has re-read the
// JWKS (the unknown kid asks for that refresh), without a restart.
func TestOAuthBearerWithKafkaTools(t *testing.T) {
	t.Parallel()
	libs := kafkaLibs(t)
	orders := oauthClient{id: "orders-app", secret: "orders-secret", sub: "svc-orders", audience: oauthAudience}
	rogue := oauthClient{id: "rogue-app", secret: "rogue-secret", sub: "svc-orders", audience: oauthAudience, rogue: true}
	elsewhere := oauthClient{id: "elsewhere-app", secret: "elsewhere-secret", sub: "svc-orders", audience: "another-service"}
	issuer := startOAuthIssuer(t, orders, rogue, elsewhere)
	node := startOAuthNode(t, issuer)
	ctx, cancel := context.WithTimeout(context.Background(), secureToolsDeadline)
	defer cancel()
	const topic, group = "oauth-orders", "oauth-app"
	admin := node.adminClient(t)
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatalf("CreateTopics %s as %s: %v", topic, secureAdmin.Name, err)
	}
	acls := kadm.NewACLs().Allow("User:"+orders.sub).Topics(topic).Groups(group).
		Operations(kadm.OpWrite, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	results, err := admin.CreateACLs(ctx, acls)
	if err == nil {
		for _, r := range results {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatalf("CreateAcls for User:%s as %s: %v", orders.sub, secureAdmin.Name, err)
	}
	allowedURLs := "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=" + issuer.URL + "/token"
	produce := func(client oauthClient, value string) string {
		t.Helper()
		// kafka-console-producer logs a failed send and exits 0: the output tells.
		stdout, stderr, err := kafkatest.RunToolJVM(ctx, libs, []string{allowedURLs}, []byte(value+"\n"), "org.apache.kafka.tools.ConsoleProducer",
			"--bootstrap-server", node.saslSSL, "--topic", topic, "--command-config", node.oauthClientConfig(t, issuer, client),
			"--producer-property", "delivery.timeout.ms=20000")
		if err != nil {
			t.Fatalf("kafka-console-producer as %s: %v\n%s", client.id, err, stderr)
		}
		return string(stdout) + string(stderr)
	}

	start := time.Now()
	if out := produce(orders, "first"); strings.Contains(out, "Exception") {
		t.Fatalf("kafka-console-producer as %s (sub %s, WRITE allowed): want no exception, got:\n%s", orders.id, orders.sub, out)
	}
	out, _, err := kafkatest.RunToolJVM(ctx, libs, []string{allowedURLs}, nil, "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"--bootstrap-server", node.saslSSL, "--topic", topic, "--group", group, "--command-config", node.oauthClientConfig(t, issuer, orders),
		"--from-beginning", "--max-messages", "1", "--timeout-ms", consoleConsumeWait)
	if err != nil || string(out) != "first\n" {
		t.Fatalf("kafka-console-consumer as %s in group %s: %v, want \"first\\n\", got %q", orders.id, group, err, out)
	}
	t.Logf("produce and consume as User:%s (client %s): %v", orders.sub, orders.id, time.Since(start).Round(time.Millisecond))

	for _, refused := range []oauthClient{rogue, elsewhere} {
		out := produce(refused, "refused")
		line := lineWith(out, "SaslAuthenticationException")
		if !strings.Contains(line, `{"status":"invalid_token"}`) {
			t.Fatalf("kafka-console-producer as %s: want Kafka's SaslAuthenticationException with invalid_token, got:\n%s", refused.id, out)
		}
		t.Logf("%s: %s", refused.id, line)
	}

	// Rotate: the JWKS publishes only key-2, and the token endpoint signs
	// with it. The first token naming key-2 is refused and makes mirrord
	// re-read the JWKS; poll with a franz-go client until one is accepted.
	issuer.rotate(t, "key-2")
	rotated := time.Now()
	var attempts int
	for attempts = 1; ; attempts++ {
		err := pingOAuth(ctx, t, node, issuer, orders)
		if err == nil {
			break
		}
		if attempts == 20 || ctx.Err() != nil {
			t.Fatalf("a token signed by the rotated key still refused after %d attempts, %v: %v", attempts, time.Since(rotated), err)
		}
	}
	t.Logf("rotated key accepted after %d attempts, %v", attempts, time.Since(rotated).Round(time.Millisecond))
	if out := produce(orders, "after rotation"); strings.Contains(out, "Exception") {
		t.Fatalf("kafka-console-producer as %s after the key rotation: want no exception, got:\n%s", orders.id, out)
	}
	ends, err := admin.ListEndOffsets(ctx, topic)
	if end, ok := ends.Lookup(topic, 0); err != nil || !ok || end.Err != nil || end.Offset != 2 {
		t.Fatalf("%s: end offset %+v (%v), want 2 (first, after rotation)", topic, end, err)
	}
}

// pingOAuth authenticates a franz-go client with a token issuer signs
// for client now and asks for metadata.
func pingOAuth(ctx context.Context, t *testing.T, node *secureNode, issuer *oauthIssuer, client oauthClient) error {
	t.Helper()
	token, err := issuer.token(client)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kgo.NewClient(kgo.SeedBrokers(node.saslSSL), kgo.DialTLSConfig(&tls.Config{RootCAs: node.pki.Pool(), MinVersion: tls.VersionTLS12}),
		kgo.SASL(oauth.Auth{Token: token}.AsMechanism()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return kc.Ping(pingCtx)
}
