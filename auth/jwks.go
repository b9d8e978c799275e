package auth

// The JWKS an OAUTHBEARER listener validates tokens with, kept fresh as
// Kafka's RefreshingHttpsJwks keeps it:
//
//   - read when the mechanism is made (a JWKS that cannot be read stops the
//     node from starting, as it stops Kafka's broker);
//   - re-read every sasl.oauthbearer.jwks.endpoint.refresh.ms (Kafka's
//     default 3600000) by OAuthBearer.Run, the loop the node runs until it
//     stops;
//   - re-read at once when a token names a key ID (kid) the set lacks, so a
//     rotated signing key is accepted without a restart. The token that
//     named it is refused (Kafka refuses it too); the client's next attempt
//     is checked against the new set. Each kid asks for such a refresh at
//     most once a minute (Kafka's MISSING_KEY_ID_CACHE_IN_FLIGHT_MS), at most
//     16 kids are remembered (MISSING_KEY_ID_CACHE_MAX_ENTRIES), a kid longer
//     than 1000 bytes asks for none, and requests made while one is pending
//     coalesce into it;
//   - a read that fails is retried as Kafka's Retry does: after
//     sasl.oauthbearer.jwks.endpoint.retry.backoff.ms, doubling, until
//     sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms have passed since
//     the first attempt. A refresh that still fails, or reads a document
//     without keys, keeps the set in use.
//
// Kafka refreshes only an https:// JWKS; mirrord re-reads file:// too.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Kafka's defaults of the JWKS refresh settings.
const (
	DefaultJWKSRefreshInterval   = time.Hour              // sasl.oauthbearer.jwks.endpoint.refresh.ms
	DefaultJWKSRetryBackoff      = 100 * time.Millisecond // sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
	DefaultJWKSRetryBackoffMax   = 10 * time.Second       // sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
	missingKeyIDInFlight         = time.Minute            // how long a kid waits before asking again
	missingKeyIDsMax             = 16                     // kids remembered
	missingKeyIDBytesMax         = 1000                   // a longer kid asks for no refresh
	jwksRetryAttemptsMax         = 64                     // bounds the retry loop whatever its clock says
	jwksRefreshRequestsQueuedMax = 1                      // requests coalesce into the pending one
)

// ErrJWKSRefresh is a refresh of the JWKS that failed; the set in use stays.
var ErrJWKSRefresh = errors.New("auth: JWKS refresh")

// jwks is the key set in use and the refreshes asked of it. keys is read
// by every exchange and written only by refresh; missing is shared by the
// exchanges under mu.
type jwks struct {
	cfg      *OAuthBearerConfig
	keys     atomic.Pointer[jose.JSONWebKeySet]
	expedite chan struct{} // capacity jwksRefreshRequestsQueuedMax

	mu      sync.Mutex
	missing map[string]time.Time // kid -> when it may ask again; len <= missingKeyIDsMax
}

func newJWKS(cfg *OAuthBearerConfig) *jwks {
	return &jwks{cfg: cfg, expedite: make(chan struct{}, jwksRefreshRequestsQueuedMax), missing: map[string]time.Time{}}
}

// read reads the JWKS once and, if it has keys, puts it in use.
func (j *jwks) read(ctx context.Context) error {
	data, err := readJWKS(ctx, j.cfg.JWKSURL)
	if err != nil {
		return err
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		return fmt.Errorf("not a JWKS: %w", err)
	}
	if len(set.Keys) == 0 {
		return errors.New("not a JWKS with keys")
	}
	j.keys.Store(&set)
	return nil
}

// refresh reads the JWKS, retrying with Kafka's backoff.
func (j *jwks) refresh(ctx context.Context) error {
	end := j.cfg.Now().Add(j.cfg.JWKSRetryBackoffMax)
	wait := j.cfg.JWKSRetryBackoff
	var err error
	for attempt := 1; attempt <= jwksRetryAttemptsMax; attempt++ {
		if err = j.read(ctx); err == nil {
			return nil
		}
		left := end.Sub(j.cfg.Now())
		if left <= 0 || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-j.cfg.After(min(wait, left)):
		}
		wait = min(2*wait, j.cfg.JWKSRetryBackoffMax)
	}
	return fmt.Errorf("%w: sasl.oauthbearer.jwks.endpoint.url %q: %w", ErrJWKSRefresh, j.cfg.JWKSURL, err)
}

// unknownKeyID asks for a refresh because a token named kid, unless kid
// asked within the last minute.
func (j *jwks) unknownKeyID(kid string) {
	if kid == "" || len(kid) > missingKeyIDBytesMax {
		return
	}
	now := j.cfg.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	if next, ok := j.missing[kid]; ok && now.Before(next) {
		return
	}
	if _, ok := j.missing[kid]; !ok && len(j.missing) >= missingKeyIDsMax {
		oldest := ""
		for k, next := range j.missing {
			if oldest == "" || next.Before(j.missing[oldest]) {
				oldest = k
			}
		}
		delete(j.missing, oldest)
	}
	j.missing[kid] = now.Add(missingKeyIDInFlight)
	select {
	case j.expedite <- struct{}{}:
	default: // one is pending: it will read the set this kid wants
	}
}

// Run refreshes the JWKS every sasl.oauthbearer.jwks.endpoint.refresh.ms
// and when a token names an unknown kid, until ctx is done. report, if
// not nil, is called after each refresh with its error (nil: the set read
// is in use).
func (m *OAuthBearer) Run(ctx context.Context, report func(error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.cfg.After(m.cfg.JWKSRefreshInterval):
		case <-m.jwks.expedite:
		}
		err := m.jwks.refresh(ctx)
		if ctx.Err() != nil {
			return
		}
		if report != nil {
			report(err)
		}
	}
}
