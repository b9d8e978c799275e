package mirrord

// The SASL of the node's listeners, by Kafka's broker config names:
//
//	sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512,OAUTHBEARER
//	listener.name.<listener>.sasl.enabled.mechanisms=...        (wins for that listener)
//	listener.name.<listener>.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";
//	listener.name.<listener>.plain.sasl.users.file=PATH         (mirrord's: user=password lines, added to the JAAS users)
//	listener.name.<listener>.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
//	sasl.oauthbearer.jwks.endpoint.url, sasl.oauthbearer.expected.audience,
//	sasl.oauthbearer.expected.issuer, sasl.oauthbearer.sub.claim.name,
//	sasl.oauthbearer.clock.skew.seconds, sasl.oauthbearer.jwks.endpoint.refresh.ms,
//	sasl.oauthbearer.jwks.endpoint.retry.backoff.ms, ...retry.backoff.max.ms
//	(each also as listener.name.<listener>.oauthbearer.<key>)
//
// An OAUTHBEARER listener's JWKS refresh (auth/jwks.go) runs until the
// listener stops being served: runJWKSRefresh.
//
// <listener> is the listener name in lower case, as Kafka spells it. An
// unprefixed sasl.jaas.config is a client setting Kafka's broker does not
// read for its listeners: refused with the form to use. SCRAM users come
// from the node's credential store (kafka-configs --alter --add-config
// 'SCRAM-SHA-512=[...]' --entity-type users), not from the JAAS config.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mirrord/mirrord/auth"
)

// saslProperties are the SASL keys of the node's config file.
type saslProperties map[string]string

// takeSASLProperties moves the SASL keys out of props (the rest go to
// the node's config checks).
func takeSASLProperties(props map[string]string) (saslProperties, error) {
	if _, ok := props["sasl.jaas.config"]; ok {
		return nil, errors.New("mirrord: sasl.jaas.config is a client setting; a listener's is listener.name.<listener>.<mechanism>.sasl.jaas.config")
	}
	taken := saslProperties{}
	for key, value := range props {
		listenerKey := strings.HasPrefix(key, "listener.name.") && strings.Contains(key, ".sasl.")
		if key == "sasl.enabled.mechanisms" || strings.HasPrefix(key, "sasl.oauthbearer.") || listenerKey {
			taken[key] = value
			delete(props, key)
		}
	}
	return taken, nil
}

// get returns the listener's value of key: listener.name.<l>.<prefix>key, else key.
func (p saslProperties) get(listener, prefix, key string) string {
	if value, ok := p["listener.name."+strings.ToLower(listener)+"."+prefix+key]; ok {
		return value
	}
	return p[key]
}

// listenerSASL builds the SASL config of a listener.
func (p saslProperties) listenerSASL(ctx context.Context, listener string, scram *auth.ScramCredentials) (*auth.SASLConfig, error) {
	config := &auth.SASLConfig{}
	for _, name := range strings.Split(p.get(listener, "", "sasl.enabled.mechanisms"), ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		mechanism, err := p.mechanism(ctx, listener, name, scram)
		if err != nil {
			return nil, fmt.Errorf("mirrord: listener %s: %s: %w", listener, name, err)
		}
		config.Mechanisms = append(config.Mechanisms, mechanism)
	}
	if len(config.Mechanisms) == 0 {
		return nil, fmt.Errorf("mirrord: listener %s: no SASL mechanism enabled (sasl.enabled.mechanisms)", listener)
	}
	return config, nil
}

func (p saslProperties) mechanism(ctx context.Context, listener, name string, scram *auth.ScramCredentials) (auth.SASLMechanism, error) {
	prefix := strings.ToLower(name) + "."
	jaasText := p["listener.name."+strings.ToLower(listener)+"."+prefix+"sasl.jaas.config"]
	var jaas auth.JAASConfig
	if jaasText != "" {
		var err error
		if jaas, err = auth.ParseJAAS(jaasText); err != nil {
			return nil, err
		}
	}
	switch name {
	case auth.MechanismPlain:
		users := map[string]string{}
		if jaasText != "" {
			var err error
			if users, err = auth.PlainUsers(jaas); err != nil {
				return nil, err
			}
		}
		if path := p["listener.name."+strings.ToLower(listener)+".plain.sasl.users.file"]; path != "" {
			text, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			fileUsers, err := ParseProperties(string(text))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			for user, password := range fileUsers {
				users[user] = password
			}
		}
		if len(users) == 0 {
			return nil, errors.New("no users: listener.name.<listener>.plain.sasl.jaas.config with user_<name>=\"<password>\" options, or a users file")
		}
		return auth.NewPlain(users), nil
	case auth.MechanismScramSHA256, auth.MechanismScramSHA512:
		if jaasText != "" && jaas.LoginModule != auth.ScramLoginModule {
			return nil, fmt.Errorf("%w: %s needs %s", auth.ErrJAAS, name, auth.ScramLoginModule)
		}
		return auth.NewScram(name, scram)
	case auth.MechanismOAuthBearer:
		if jaasText != "" && jaas.LoginModule != auth.OAuthBearerLoginModule {
			return nil, fmt.Errorf("%w: %s needs %s", auth.ErrJAAS, name, auth.OAuthBearerLoginModule)
		}
		cfg := auth.OAuthBearerConfig{
			JWKSURL:        p.get(listener, prefix, "sasl.oauthbearer.jwks.endpoint.url"),
			ExpectedIssuer: p.get(listener, prefix, "sasl.oauthbearer.expected.issuer"),
			SubClaimName:   p.get(listener, prefix, "sasl.oauthbearer.sub.claim.name"),
		}
		for _, audience := range strings.Split(p.get(listener, prefix, "sasl.oauthbearer.expected.audience"), ",") {
			if audience = strings.TrimSpace(audience); audience != "" {
				cfg.ExpectedAudience = append(cfg.ExpectedAudience, audience)
			}
		}
		if skew := p.get(listener, prefix, "sasl.oauthbearer.clock.skew.seconds"); skew != "" {
			seconds, err := strconv.Atoi(skew)
			if err != nil || seconds < 0 {
				return nil, fmt.Errorf("sasl.oauthbearer.clock.skew.seconds %q: want seconds >= 0", skew)
			}
			cfg.ClockSkew = time.Duration(seconds) * time.Second
		}
		for _, d := range []struct {
			key  string
			into *time.Duration
		}{
			{"sasl.oauthbearer.jwks.endpoint.refresh.ms", &cfg.JWKSRefreshInterval},
			{"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", &cfg.JWKSRetryBackoff},
			{"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", &cfg.JWKSRetryBackoffMax},
		} {
			if text := p.get(listener, prefix, d.key); text != "" {
				ms, err := strconv.ParseInt(text, 10, 64)
				if err != nil || ms < 1 || ms > math.MaxInt32 {
					return nil, fmt.Errorf("%s %q: want milliseconds in [1, %d]", d.key, text, math.MaxInt32)
				}
				*d.into = time.Duration(ms) * time.Millisecond
			}
		}
		return auth.NewOAuthBearer(ctx, cfg)
	}
	return nil, fmt.Errorf("mechanism not served: want %s, %s, %s or %s", auth.MechanismPlain, auth.MechanismScramSHA256,
		auth.MechanismScramSHA512, auth.MechanismOAuthBearer)
}

// runJWKSRefresh runs the JWKS refresh of each OAUTHBEARER mechanism of
// the listeners' SASL configs (nil for a listener without SASL) until ctx
// is done, logging failed refreshes; wait returns once every refresh loop
// has ended.
func runJWKSRefresh(ctx context.Context, configs []*auth.SASLConfig, logger *slog.Logger) (wait func()) {
	var loops sync.WaitGroup
	for _, config := range configs {
		if config == nil {
			continue
		}
		for _, mechanism := range config.Mechanisms {
			if oauth, ok := mechanism.(*auth.OAuthBearer); ok {
				loops.Go(func() {
					oauth.Run(ctx, func(err error) {
						if err != nil {
							logger.Warn("JWKS refresh failed; the keys read before stay in use", "error", err)
						}
					})
				})
			}
		}
	}
	return loops.Wait
}
