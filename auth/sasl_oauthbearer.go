package auth

// SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer with its
// broker-side JWT validation (OAuthBearerValidatorCallbackHandler): the
// client's first message is
//
//	n,[a=<authzid>],\x01auth=Bearer <JWT>\x01[<key>=<value>\x01...]\x01
//
// The JWT is checked with github.com/go-jose/go-jose/v4 against the keys
// of a JWKS (sasl.oauthbearer.jwks.endpoint.url, file:// or http(s)://,
// read when the mechanism is made and refreshed as jwks.go says): an asymmetric signature by a key of
// the set, exp required, exp/nbf/iat within sasl.oauthbearer.clock.skew.seconds,
// the expected audience (any of sasl.oauthbearer.expected.audience) and
// issuer (sasl.oauthbearer.expected.issuer) when configured, and the
// principal claim (sasl.oauthbearer.sub.claim.name, "sub") a non-empty
// string. A token that fails is answered, as Kafka answers it, with the
// JSON error {"status":"invalid_token"}; the client acknowledges it with
// a lone \x01 and the exchange fails with that JSON as its message.

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// OAuthBearerConfig is the broker's JWT validation, by Kafka's names.
type OAuthBearerConfig struct {
	// JWKSURL is sasl.oauthbearer.jwks.endpoint.url: file:///path or
	// http(s)://host/path.
	JWKSURL string
	// ExpectedAudience is sasl.oauthbearer.expected.audience (any of
	// them); empty: not checked.
	ExpectedAudience []string
	// ExpectedIssuer is sasl.oauthbearer.expected.issuer; empty: not checked.
	ExpectedIssuer string
	// SubClaimName is sasl.oauthbearer.sub.claim.name; empty: "sub".
	SubClaimName string
	// ClockSkew is sasl.oauthbearer.clock.skew.seconds; Kafka's default 30s.
	ClockSkew time.Duration
	// JWKSRefreshInterval is sasl.oauthbearer.jwks.endpoint.refresh.ms;
	// 0: DefaultJWKSRefreshInterval.
	JWKSRefreshInterval time.Duration
	// JWKSRetryBackoff and JWKSRetryBackoffMax are
	// sasl.oauthbearer.jwks.endpoint.retry.backoff.ms and .max.ms; 0:
	// Kafka's defaults.
	JWKSRetryBackoff, JWKSRetryBackoffMax time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// After is the timer of the refreshes and their retries; nil: time.After.
	After func(time.Duration) <-chan time.Time
}

// DefaultOAuthBearerClockSkew is Kafka's sasl.oauthbearer.clock.skew.seconds.
const DefaultOAuthBearerClockSkew = 30 * time.Second

// jwksBytesMax bounds a JWKS document.
const jwksBytesMax = 1 << 20

// jwtAlgorithms are the signature algorithms a token may use: the
// asymmetric ones of a JWKS (never "none" or a shared secret).
var jwtAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// ErrOAuthBearerConfig is an OAUTHBEARER configuration that cannot be used.
var ErrOAuthBearerConfig = errors.New("auth: OAUTHBEARER")

// OAuthBearer is the OAUTHBEARER mechanism.
type OAuthBearer struct {
	cfg  OAuthBearerConfig
	jwks *jwks
}

// NewOAuthBearer reads the JWKS cfg names and returns the mechanism; Run
// keeps the JWKS fresh.
func NewOAuthBearer(ctx context.Context, cfg OAuthBearerConfig) (*OAuthBearer, error) {
	if cfg.SubClaimName == "" {
		cfg.SubClaimName = "sub"
	}
	if cfg.ClockSkew == 0 {
		cfg.ClockSkew = DefaultOAuthBearerClockSkew
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	for _, d := range []struct {
		value    *time.Duration
		fallback time.Duration
	}{{&cfg.JWKSRefreshInterval, DefaultJWKSRefreshInterval}, {&cfg.JWKSRetryBackoff, DefaultJWKSRetryBackoff}, {&cfg.JWKSRetryBackoffMax, DefaultJWKSRetryBackoffMax}} {
		if *d.value <= 0 {
			*d.value = d.fallback
		}
	}
	m := &OAuthBearer{cfg: cfg}
	m.jwks = newJWKS(&m.cfg)
	if err := m.jwks.read(ctx); err != nil {
		return nil, fmt.Errorf("%w: sasl.oauthbearer.jwks.endpoint.url %q: %w", ErrOAuthBearerConfig, cfg.JWKSURL, err)
	}
	return m, nil
}

func readJWKS(ctx context.Context, location string) ([]byte, error) {
	u, err := url.Parse(location)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "file":
		return os.ReadFile(u.Path)
	case "http", "https":
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, location, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("HTTP %s", resp.Status)
		}
		return io.ReadAll(io.LimitReader(resp.Body, jwksBytesMax))
	}
	return nil, errors.New("want a file:// or http(s):// URL")
}

func (*OAuthBearer) Name() string { return MechanismOAuthBearer }

func (m *OAuthBearer) NewExchange() SASLExchange { return &oauthBearerExchange{m: m} }

type oauthBearerExchange struct {
	m         *OAuthBearer
	steps     int
	errorJSON string // the error answered, awaiting the client's \x01
	principal Principal
}

// invalidTokenJSON is Kafka's answer to a token that does not validate.
const invalidTokenJSON = `{"status":"invalid_token"}`

func (e *oauthBearerExchange) Step(token []byte) ([]byte, bool, error) {
	e.steps++
	switch {
	case e.steps == 2 && e.errorJSON != "" && string(token) == "\x01":
		return nil, false, authenticationFailed(e.errorJSON)
	case e.steps > 1:
		return nil, false, invalidCredentials(MechanismOAuthBearer, errExchangeOver)
	}
	authzid, jwtText, err := parseOAuthBearerFirst(string(token))
	if err != nil {
		return nil, false, invalidCredentials(MechanismOAuthBearer, err)
	}
	name, err := e.m.validate(jwtText)
	if err != nil {
		e.errorJSON = invalidTokenJSON
		return []byte(invalidTokenJSON), false, nil
	}
	if authzid != "" && authzid != name {
		return nil, false, authenticationFailed(fmt.Sprintf(
			"Authentication failed: Client requested an authorization id (%s) that is different from the token's principal name (%s)", authzid, name))
	}
	e.principal = User(name)
	return []byte{}, true, nil
}

func (e *oauthBearerExchange) Principal() Principal { return e.principal }

var errOAuthBearerFirst = errors.New("Invalid OAUTHBEARER client first message")

// parseOAuthBearerFirst returns the authzid and the bearer token of a
// client first message.
func parseOAuthBearerFirst(message string) (authzid, token string, err error) {
	rest, ok := strings.CutPrefix(message, "n,")
	if !ok {
		return "", "", errOAuthBearerFirst
	}
	if strings.HasPrefix(rest, "a=") {
		authzid, rest, ok = strings.Cut(rest[2:], ",")
		if !ok || authzid == "" {
			return "", "", errOAuthBearerFirst
		}
		authzid = strings.NewReplacer("=2C", ",", "=3D", "=").Replace(authzid)
	} else if rest, ok = strings.CutPrefix(rest, ","); !ok {
		return "", "", errOAuthBearerFirst
	}
	pairs, ok := strings.CutPrefix(rest, "\x01")
	if !ok {
		return "", "", errOAuthBearerFirst
	}
	if pairs, ok = strings.CutSuffix(pairs, "\x01\x01"); !ok {
		return "", "", errOAuthBearerFirst
	}
	for _, pair := range strings.Split(pairs, "\x01") {
		key, value, found := strings.Cut(pair, "=")
		if !found || key == "" {
			return "", "", errOAuthBearerFirst
		}
		if key != "auth" {
			continue // an extension: Kafka's server ignores those it does not know
		}
		scheme, bearer, found := strings.Cut(value, " ")
		bearer = strings.TrimLeft(bearer, " ")
		if !found || !strings.EqualFold(scheme, "Bearer") || bearer == "" || strings.ContainsFunc(bearer, notTokenChar) {
			return "", "", errOAuthBearerFirst
		}
		token = bearer
	}
	if token == "" {
		return "", "", errOAuthBearerFirst
	}
	return authzid, token, nil
}

// notTokenChar reports a rune outside Kafka's token pattern [-_.a-zA-Z0-9].
func notTokenChar(r rune) bool {
	return !(r == '-' || r == '_' || r == '.' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
}

// kidlessKey is the first public key of set that can verify alg: its
// type (RSA for RS*/PS*, EC on alg's curve for ES*, Ed25519 for EdDSA),
// no use other than "sig", no algorithm other than alg; nil if none.
func kidlessKey(set *jose.JSONWebKeySet, alg string) any {
	if set == nil {
		return nil
	}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" || k.Algorithm != "" && k.Algorithm != alg {
			continue
		}
		switch key := k.Key.(type) {
		case *rsa.PublicKey:
			if strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS") {
				return key
			}
		case *ecdsa.PublicKey:
			if curve := map[string]string{"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}[alg]; curve != "" && key.Curve.Params().Name == curve {
				return key
			}
		case ed25519.PublicKey:
			if alg == string(jose.EdDSA) {
				return key
			}
		}
	}
	return nil
}

// validate checks a JWT and returns its principal name.
func (m *OAuthBearer) validate(text string) (string, error) {
	token, err := jwt.ParseSigned(text, jwtAlgorithms)
	if err != nil {
		return "", err
	}
	var claims jwt.Claims
	var all map[string]any
	var key any = m.jwks.keys.Load()
	if len(token.Headers) > 0 && token.Headers[0].KeyID == "" {
		// No kid: as Kafka's jose4j selector, the first key of the set
		// whose type, use and algorithm suit the token's algorithm.
		if key = kidlessKey(m.jwks.keys.Load(), token.Headers[0].Algorithm); key == nil {
			return "", fmt.Errorf("no key of the JWKS suits a token without kid signed with %s", token.Headers[0].Algorithm)
		}
	}
	if err := token.Claims(key, &claims, &all); err != nil {
		if errors.Is(err, jose.ErrJWKSKidNotFound) && len(token.Headers) > 0 {
			m.jwks.unknownKeyID(token.Headers[0].KeyID)
		}
		return "", err
	}
	if claims.Expiry == nil {
		return "", errors.New("no exp claim")
	}
	expected := jwt.Expected{Issuer: m.cfg.ExpectedIssuer, AnyAudience: m.cfg.ExpectedAudience, Time: m.cfg.Now()}
	if err := claims.ValidateWithLeeway(expected, m.cfg.ClockSkew); err != nil {
		return "", err
	}
	name, ok := all[m.cfg.SubClaimName].(string)
	if !ok || strings.TrimSpace(name) == "" {
		return "", fmt.Errorf("no %s claim", m.cfg.SubClaimName)
	}
	return name, nil
}
