package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// OAUTHBEARER with Kafka's client credentials grant (KIP-768): the token
// comes from sasl.oauthbearer.token.endpoint.url, asked with a POST of
// grant_type=client_credentials (and scope), the client ID and secret in
// HTTP Basic authentication as Kafka's HttpAccessTokenRetriever sends
// them. A token is kept and given to each new connection until
// oauthRefreshWindow of its lifetime (expires_in) has passed, as Kafka's
// sasl.login.refresh.window.factor default, then a new one is asked for.
// Errors say the endpoint gave no token; why (refused, timed out, HTTP
// 401, bad JSON) goes to the node's log only.

const (
	oauthRefreshWindow  = 0.8     // of a token's lifetime
	oauthResponseMax    = 1 << 20 // bytes of a token response read at most
	oauthLifetimeAssume = time.Minute
)

// errNoToken is what the SASL exchange fails with when no token came.
var errNoToken = errors.New("engine: the OAuth token endpoint (sasl.oauthbearer.token.endpoint.url) gave no token; the node's log says why")

// oauthTokenSource fetches and caches the token of one client.
type oauthTokenSource struct {
	endpoint, clientID, clientSecret, scope string
	http                                    *http.Client
	log                                     *slog.Logger
	now                                     func() time.Time

	mu        sync.Mutex
	token     string
	refreshAt time.Time // after this, fetch anew
}

func newOAuthTokenSource(endpoint, clientID, clientSecret, scope string, timeout time.Duration, log *slog.Logger) *oauthTokenSource {
	if log == nil {
		log = slog.Default()
	}
	return &oauthTokenSource{endpoint: endpoint, clientID: clientID, clientSecret: clientSecret, scope: scope,
		http: &http.Client{Timeout: timeout}, log: log, now: time.Now}
}

func (s *oauthTokenSource) mechanism() sasl.Mechanism {
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		token, err := s.get(ctx)
		return oauth.Auth{Token: token}, err
	})
}

// get returns the cached token, or fetches one if it is past its
// refresh time.
func (s *oauthTokenSource) get(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && s.now().Before(s.refreshAt) {
		return s.token, nil
	}
	start := s.now()
	token, lifetime, err := s.fetch(ctx)
	if err != nil {
		s.log.Warn("cannot get an OAuth token", "endpoint", s.endpoint, "error", err)
		return "", errNoToken
	}
	s.token, s.refreshAt = token, start.Add(time.Duration(float64(lifetime)*oauthRefreshWindow))
	return token, nil
}

// fetch asks the endpoint for a token and its lifetime.
func (s *oauthTokenSource) fetch(ctx context.Context) (string, time.Duration, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if s.scope != "" {
		form.Set("scope", s.scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(s.clientID), url.QueryEscape(s.clientSecret))
	resp, err := s.http.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, oauthResponseMax))
	if err != nil {
		return "", 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("HTTP status %s", resp.Status) // the body may echo the secret
	}
	var answer struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"` // seconds
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return "", 0, fmt.Errorf("the answer is not JSON: %w", err)
	}
	if answer.AccessToken == "" {
		return "", 0, errors.New("the answer has no access_token")
	}
	lifetime := oauthLifetimeAssume
	if answer.ExpiresIn > 0 {
		lifetime = time.Duration(min(answer.ExpiresIn, 1<<31)) * time.Second
	}
	return answer.AccessToken, lifetime, nil
}
