package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/vfs"
)

const (
	plainModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	scramModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
	oauthModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
	awsModule   = "software.amazon.msk.auth.iam.IAMLoginModule"
)

// startLoggedNode is a node whose log the test reads.
func startLoggedNode(t *testing.T) (*Node, string, *syncBuffer) {
	var log syncBuffer
	node, addr := startNodeConfig(t, NodeConfig{FS: vfs.OS, DataDir: filepath.Join(t.TempDir(), "target"), Log: logstore.DefaultConfig(),
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	return node, addr, &log
}

// TestMirrorSASLPlainScram mirrors a topic from a kfake source that
// requires SASL, for each mechanism kfake serves; a wrong password is
// refused at --create (kfake closes the connection, so the answer is the
// neutral one; a real Kafka's SASL_AUTHENTICATION_FAILED is in the e2e
// test), and the password shows neither in the error nor in the node's
// log.
func TestMirrorSASLPlainScram(t *testing.T) {
	for _, c := range []struct {
		mechanism SASLMechanism
		module    string
	}{
		{SASLPlain, plainModule},
		{SASLScramSHA256, scramModule},
		{SASLScramSHA512, scramModule},
	} {
		t.Run(string(c.mechanism), func(t *testing.T) {
			const password = "alice-Pa55-secret"
			cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"), kfake.EnableSASL(),
				kfake.Superuser(string(c.mechanism), "alice", password))
			if err != nil {
				t.Fatal(err)
			}
			defer cluster.Close()
			sourceAddr := cluster.ListenAddrs()[0]
			var mechanism kgo.Opt
			switch c.mechanism {
			case SASLPlain:
				mechanism = kgo.SASL(plain.Auth{User: "alice", Pass: password}.AsMechanism())
			case SASLScramSHA256:
				mechanism = kgo.SASL(scram.Auth{User: "alice", Pass: password}.AsSha256Mechanism())
			default:
				mechanism = kgo.SASL(scram.Auth{User: "alice", Pass: password}.AsSha512Mechanism())
			}
			source := newClient(t, sourceAddr, mechanism)
			produceEach(t, source, "events", 1, 5)
			target, targetAddr, log := startLoggedNode(t)

			config := mirrorConfig(sourceAddr)
			config["security.protocol"], config["sasl.mechanism"] = "SASL_PLAINTEXT", string(c.mechanism)
			config["sasl.jaas.config"] = c.module + ` required username="alice" password="wrong-` + password + `";`
			config["request.timeout.ms"] = "2000" // the probe's bound
			err = target.Mirrors().CreateMirror(context.Background(), "wrong", config)
			if !errors.Is(err, kerr.InvalidConfig) || strings.Contains(fmt.Sprint(err), password) {
				t.Errorf("wrong password: %v, want INVALID_CONFIG without the password", err)
			}
			config["sasl.jaas.config"] = c.module + ` required username="alice" password="` + password + `";`
			delete(config, "request.timeout.ms")
			startMirroringWith(t, target, config, "events")
			waitMirrored(t, source, newClient(t, targetAddr), "events", 1)
			described, err := target.Mirrors().DescribeMirrors(context.Background(), []string{"m"}, false)
			if err != nil {
				t.Fatal(err)
			}
			if text := fmt.Sprintf("%+v %v", described, err) + log.String(); strings.Contains(text, password) {
				t.Errorf("the password shows in an answer or the log:\n%s", text)
			}
		})
	}
}

// saslControl makes a kfake cluster (without its own SASL) answer the
// SASL handshake for mechanism (OAUTHBEARER or AWS_MSK_IAM) and hand each
// SaslAuthenticate's bytes to check, which says whether they
// authenticate. Both happen on any
// connection: the test's kgo client is what authenticates.
func saslControl(t *testing.T, cluster *kfake.Cluster, mechanism string, check func([]byte) error) {
	cluster.ControlKey(int16(kmsg.SASLHandshake), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		req := kreq.(*kmsg.SASLHandshakeRequest)
		resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = []string{mechanism}
		if req.Mechanism != mechanism {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		}
		return resp, nil, true
	})
	cluster.ControlKey(int16(kmsg.SASLAuthenticate), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		req := kreq.(*kmsg.SASLAuthenticateRequest)
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		if err := check(req.SASLAuthBytes); err != nil {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			message := err.Error()
			resp.ErrorMessage = &message
			return resp, nil, true
		}
		if mechanism == "AWS_MSK_IAM" {
			resp.SASLAuthBytes = []byte(`{"version":"2020_10_22","request-id":"test"}`) // MSK answers JSON; franz-go wants it non-empty
		} // OAUTHBEARER: an empty answer is success (RFC 7628)
		return resp, nil, true
	})
}

// tokenEndpoint is an OAuth client credentials token endpoint on
// loopback that gives token-1, token-2, ... each living lifetime seconds.
type tokenEndpoint struct {
	*httptest.Server
	mu     sync.Mutex
	issued int
}

func newTokenEndpoint(t *testing.T, clientID, clientSecret string, lifetime int) *tokenEndpoint {
	e := &tokenEndpoint{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if r.Method != http.MethodPost || r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" ||
			!ok || id != clientID || secret != clientSecret {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		e.mu.Lock()
		e.issued++
		token := fmt.Sprintf("token-%d", e.issued)
		e.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": lifetime})
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *tokenEndpoint) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.issued
}

// TestMirrorSASLOAuthBearer: the mirror gets a token from the endpoint
// with its client ID and secret and presents it (RFC 7628's initial
// response) to a source that checks it; a wrong secret is refused at
// --create saying the endpoint gave no token, the secret in neither the
// error nor the log.
func TestMirrorSASLOAuthBearer(t *testing.T) {
	endpoint := newTokenEndpoint(t, "mirrord-client", "s3cret-Value", 3600)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	var mu sync.Mutex
	var presented []string // bounded by the connections of the test
	saslControl(t, cluster, "OAUTHBEARER", func(b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		presented = append(presented, string(b))
		if !strings.HasPrefix(string(b), "n,,\x01auth=Bearer token-") || !strings.HasSuffix(string(b), "\x01\x01") {
			return errors.New("not an OAUTHBEARER initial response with a token")
		}
		return nil
	})
	sourceAddr := cluster.ListenAddrs()[0]
	source := newClient(t, sourceAddr)
	produceEach(t, source, "events", 1, 5)
	target, targetAddr, log := startLoggedNode(t)

	config := mirrorConfig(sourceAddr)
	config["security.protocol"], config["sasl.mechanism"] = "SASL_PLAINTEXT", "OAUTHBEARER"
	config["sasl.oauthbearer.token.endpoint.url"] = endpoint.URL + "/oauth2/token"
	config["sasl.jaas.config"] = oauthModule + ` required clientId="mirrord-client" clientSecret="wrong-s3cret-Value" scope="kafka";`
	err = target.Mirrors().CreateMirror(context.Background(), "wrong", config)
	if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(fmt.Sprint(err), "gave no token") {
		t.Errorf("wrong secret: %v, want INVALID_CONFIG saying the endpoint gave no token", err)
	}
	config["sasl.jaas.config"] = oauthModule + ` required clientId="mirrord-client" clientSecret="s3cret-Value" scope="kafka";`
	startMirroringWith(t, target, config, "events")
	waitMirrored(t, source, newClient(t, targetAddr), "events", 1)
	mu.Lock()
	got := len(presented)
	mu.Unlock()
	if got == 0 || endpoint.count() != 1 {
		t.Errorf("%d authentications with %d tokens fetched; want some with one token (it lives an hour)", got, endpoint.count())
	}
	if strings.Contains(fmt.Sprint(err)+log.String(), "s3cret-Value") {
		t.Errorf("the client secret shows in the error or the log:\n%s", log.String())
	}
}

// TestOAuthTokenRefresh: a token is reused until 80% of its lifetime,
// then a new one is fetched; an endpoint that refuses gives errNoToken.
func TestOAuthTokenRefresh(t *testing.T) {
	endpoint := newTokenEndpoint(t, "id", "secret", 100)
	source := newOAuthTokenSource(endpoint.URL, "id", "secret", "", 5*time.Second, nil)
	now := time.Unix(1_700_000_000, 0)
	source.now = func() time.Time { return now }
	for _, step := range []struct {
		advance time.Duration
		want    string
	}{
		{0, "token-1"}, {10 * time.Second, "token-1"}, {69 * time.Second, "token-1"}, // 79 s in
		{2 * time.Second, "token-2"}, // 81 s: past 80 of 100
		{79 * time.Second, "token-2"}, {2 * time.Second, "token-3"},
	} {
		now = now.Add(step.advance)
		got, err := source.get(context.Background())
		if err != nil || got != step.want {
			t.Fatalf("at %v: %q, %v; want %q", now, got, err, step.want)
		}
	}
	wrong := newOAuthTokenSource(endpoint.URL, "id", "wrong", "", 5*time.Second, nil)
	if _, err := wrong.get(context.Background()); !errors.Is(err, errNoToken) {
		t.Fatalf("wrong secret: %v", err)
	}
}

// TestMirrorSASLAWSMSKIAM: the mirror sends AWS_MSK_IAM's signed payload
// (franz-go's SigV4, no AWS SDK) with the environment's credentials: the
// JSON shape Amazon MSK reads, the access key in the credential scope,
// the secret key nowhere. That MSK accepts the signature cannot be tested
// here: it needs AWS.
func TestMirrorSASLAWSMSKIAM(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-secret")
	t.Setenv("AWS_SESSION_TOKEN", "session-token")
	t.Setenv("AWS_REGION", "eu-west-1") // 127.0.0.1 names no region
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	payloads := make(chan map[string]string, 64)
	saslControl(t, cluster, "AWS_MSK_IAM", func(b []byte) error {
		var payload map[string]string
		if err := json.Unmarshal(b, &payload); err != nil {
			return err
		}
		select {
		case payloads <- payload:
		default:
		}
		return nil
	})
	sourceAddr := cluster.ListenAddrs()[0]
	target, _, _ := startLoggedNode(t)
	config := mirrorConfig(sourceAddr)
	config["security.protocol"], config["sasl.mechanism"] = "SASL_PLAINTEXT", "AWS_MSK_IAM"
	config["sasl.jaas.config"] = awsModule + " required;"
	if err := target.Mirrors().CreateMirror(context.Background(), "m", config); err != nil {
		t.Fatal(err)
	}
	payload := <-payloads // the create's probe authenticated
	date := time.Now().UTC().Format("20060102")
	for key, want := range map[string]string{"version": "2020_10_22", "host": "127.0.0.1", "action": "kafka-cluster:Connect",
		"x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-signedheaders": "host", "x-amz-expires": "900", "x-amz-security-token": "session-token"} {
		if payload[key] != want {
			t.Errorf("payload %s = %q, want %q", key, payload[key], want)
		}
	}
	if credential := payload["x-amz-credential"]; !strings.HasPrefix(credential, "AKIDEXAMPLE/") || !strings.HasSuffix(credential, "/eu-west-1/kafka-cluster/aws4_request") {
		t.Errorf("credential %q", credential)
	}
	if len(payload["x-amz-signature"]) != 64 || !strings.HasPrefix(payload["x-amz-date"], date[:6]) {
		t.Errorf("signature %q, date %q", payload["x-amz-signature"], payload["x-amz-date"])
	}
	for key, value := range payload {
		if strings.Contains(value, "wJalrXUtnFEMI") {
			t.Errorf("payload %s holds the secret key", key)
		}
	}
}

// TestAWSCredentials: the environment, else a profile of the shared
// credentials file; the JAAS awsProfileName picks the profile.
func TestAWSCredentials(t *testing.T) {
	path := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(path, []byte("[default]\naws_access_key_id = DEFAULTKEY\naws_secret_access_key = d\n\n# other\n[other]\naws_access_key_id=OTHERKEY\naws_secret_access_key=o\naws_session_token=t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, profile string
		env           map[string]string
		want          string // access key; "" for an error
	}{
		{"environment", "", map[string]string{"AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "e"}, "ENVKEY"},
		{"default profile", "", map[string]string{}, "DEFAULTKEY"},
		{"AWS_PROFILE", "", map[string]string{"AWS_PROFILE": "other"}, "OTHERKEY"},
		{"awsProfileName wins over the environment", "other", map[string]string{"AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "e"}, "OTHERKEY"},
		{"no such profile", "none", map[string]string{}, ""},
	} {
		c.env["AWS_SHARED_CREDENTIALS_FILE"] = path
		got, err := awsCredentials(c.profile, func(key string) string { return c.env[key] })
		if c.want == "" && err == nil || c.want != "" && (err != nil || got.AccessKey != c.want) {
			t.Errorf("%s: %q, %v; want %q", c.name, got.AccessKey, err, c.want)
		}
	}
}

// TestClientSecurityErrors: the SASL keys are checked together, and no
// error shows the JAAS text.
func TestClientSecurityErrors(t *testing.T) {
	const secret = "hunter2-secret"
	for _, c := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"security.protocol": "SASL_SSL"}, "sasl.jaas.config is required with security.protocol=SASL_SSL"},
		{map[string]string{"security.protocol": "SASL_SSL", "sasl.jaas.config": plainModule + ` required username="a" password="` + secret + `"`},
			"sasl.jaas.config: auth: sasl.jaas.config: want an option name or ';' at byte"},
		{map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": plainModule + ` required username="a" password="` + secret + `";`},
			"sasl.mechanism=SCRAM-SHA-512 wants login module " + scramModule},
		{map[string]string{"security.protocol": "SASL_SSL", "sasl.jaas.config": plainModule + ` required username="a";`},
			"option password is required with sasl.mechanism=PLAIN"},
		{map[string]string{"security.protocol": "SASL_SSL", "sasl.jaas.config": plainModule + ` required username="a" password="` + secret + `" pasword="x";`},
			`option "pasword" is not read`},
		{map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": oauthModule + ` required clientId="a" clientSecret="` + secret + `";`},
			"sasl.oauthbearer.token.endpoint.url: want an http or https URL"},
		{map[string]string{"sasl.jaas.config": secret, "ssl.key.password": secret, "client.id": "x"}, `client config "client.id" is not a security config`},
	} {
		_, err := ParseClientSecurity(c.props)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("%v: %v, want %q and no secret", c.props, err, c.want)
		}
		props := map[string]string{"bootstrap.servers": "127.0.0.1:1"}
		for k, v := range c.props {
			props[k] = v
		}
		if _, err := ParseMirrorConfig(props); err == nil || !errors.Is(err, kerr.InvalidConfig) || strings.Contains(err.Error(), secret) {
			t.Errorf("mirror config %v: %v, want INVALID_CONFIG without the secret", c.props, err)
		}
	}
	good, err := ParseClientSecurity(map[string]string{"security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
		"sasl.jaas.config": scramModule + ` required username="a" password="b";`, "ssl.endpoint.identification.algorithm": ""})
	if err != nil || good.SASL.Mechanism != SASLScramSHA512 || good.TLS.EndpointIdentification {
		t.Fatalf("%+v, %v", good, err)
	}
}
