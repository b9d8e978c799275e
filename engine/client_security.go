package engine

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/mirrord/mirrord/auth"
)

// A Kafka client's security configs, by Kafka's names: how a mirror
// connects to its source cluster (MirrorConfig) and how the mirrors CLI
// connects to the node (--command-config). One table of keys serves both.
//
//	key                                     default              range
//	security.protocol                       PLAINTEXT            PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
//	ssl.truststore.location                 (system roots)       PEM file of CA certificates
//	ssl.truststore.type                     PEM                  PEM
//	ssl.keystore.location                   (no client cert)     PEM file: certificate chain and private key
//	ssl.keystore.type                       PEM                  PEM
//	ssl.key.password                        (key not encrypted)  decrypts an ENCRYPTED PRIVATE KEY (PKCS#8)
//	ssl.endpoint.identification.algorithm   https                https, or empty: no host name check
//	sasl.mechanism                          PLAIN                PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM
//	sasl.jaas.config                        (none)               the login module line, below
//	sasl.oauthbearer.token.endpoint.url     (none)               OAUTHBEARER: the OAuth token endpoint (http or https)
//
// sasl.jaas.config, as Kafka's clients take it (auth.ParseJAAS):
//
//	PLAIN, SCRAM-*  org.apache.kafka.common.security.plain.PlainLoginModule required username="..." password="...";
//	                (ScramLoginModule for SCRAM)
//	OAUTHBEARER     org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required
//	                clientId="..." clientSecret="..." [scope="..."];
//	                a client credentials grant at sasl.oauthbearer.token.endpoint.url
//	AWS_MSK_IAM     software.amazon.msk.auth.iam.IAMLoginModule required [awsProfileName="..."];
//	                credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
//	                AWS_SESSION_TOKEN, or from the profile of the shared
//	                credentials file; the region from the broker's host name
//	                or AWS_REGION (client_aws.go)
//
// The secrets (ssl.key.password, sasl.jaas.config) never appear in an
// error or a log line.

// MirrorSecurity is how a client connects: TLS applies to SSL and
// SASL_SSL, SASL to SASL_PLAINTEXT and SASL_SSL.
type MirrorSecurity struct {
	Protocol auth.SecurityProtocol
	TLS      MirrorTLS
	SASL     MirrorSASL
}

// MirrorTLS is the TLS client setup, from PEM files (Kafka's PEM store
// type; JKS and PKCS12 stores are not read).
type MirrorTLS struct {
	// TruststoreLocation: a PEM file of CA certificates; empty: the
	// system's roots.
	TruststoreLocation string
	// KeystoreLocation: a PEM file holding the client certificate chain
	// and its private key; empty: no client certificate.
	KeystoreLocation string
	// KeyPassword decrypts the keystore's private key if it is an
	// ENCRYPTED PRIVATE KEY (PKCS#8); empty if it is not.
	KeyPassword string
	// EndpointIdentification: check that the broker's certificate names
	// the host dialed (ssl.endpoint.identification.algorithm=https).
	EndpointIdentification bool
}

// SASLMechanism is sasl.mechanism.
type SASLMechanism string

const (
	SASLPlain       SASLMechanism = "PLAIN"
	SASLScramSHA256 SASLMechanism = "SCRAM-SHA-256"
	SASLScramSHA512 SASLMechanism = "SCRAM-SHA-512"
	SASLOAuthBearer SASLMechanism = "OAUTHBEARER"
	SASLAWSMSKIAM   SASLMechanism = "AWS_MSK_IAM"
)

var saslMechanisms = []SASLMechanism{SASLPlain, SASLScramSHA256, SASLScramSHA512, SASLOAuthBearer, SASLAWSMSKIAM}

// saslLoginModules is the login module each mechanism's JAAS entry names.
var saslLoginModules = map[SASLMechanism]string{
	SASLPlain:       "org.apache.kafka.common.security.plain.PlainLoginModule",
	SASLScramSHA256: "org.apache.kafka.common.security.scram.ScramLoginModule",
	SASLScramSHA512: "org.apache.kafka.common.security.scram.ScramLoginModule",
	SASLOAuthBearer: "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
	SASLAWSMSKIAM:   "software.amazon.msk.auth.iam.IAMLoginModule",
}

// saslJAASOptions lists, per mechanism, the JAAS options read (the first
// ones required); another option is an error naming it.
var saslJAASOptions = map[SASLMechanism][]string{
	SASLPlain:       {"username", "password"},
	SASLScramSHA256: {"username", "password"},
	SASLScramSHA512: {"username", "password"},
	SASLOAuthBearer: {"clientId", "clientSecret", "scope"},
	SASLAWSMSKIAM:   {"awsProfileName"},
}

var saslJAASRequired = map[SASLMechanism]int{SASLPlain: 2, SASLScramSHA256: 2, SASLScramSHA512: 2, SASLOAuthBearer: 2, SASLAWSMSKIAM: 0}

// MirrorSASL is the SASL setup.
type MirrorSASL struct {
	Mechanism  SASLMechanism
	JAASConfig string // sasl.jaas.config, Kafka's login module line with the credentials
	// TokenEndpointURL is sasl.oauthbearer.token.endpoint.url.
	TokenEndpointURL string
}

// securityKey is one security config key: its default (empty for none),
// whether its value is a secret (not trimmed, not echoed), how to parse
// it and write it back.
type securityKey struct {
	name         string
	defaultValue string
	secret       bool
	parse        func(s *MirrorSecurity, value string) error
	format       func(s *MirrorSecurity) string
}

// securityKeys: every key, in the order of the table above.
var securityKeys = []securityKey{
	{name: "security.protocol", defaultValue: "PLAINTEXT", parse: parseSecurityProtocol,
		format: func(s *MirrorSecurity) string { return s.Protocol.String() }},
	securityStringKey("ssl.truststore.location", false, func(s *MirrorSecurity) *string { return &s.TLS.TruststoreLocation }),
	securityPEMTypeKey("ssl.truststore.type"),
	securityStringKey("ssl.keystore.location", false, func(s *MirrorSecurity) *string { return &s.TLS.KeystoreLocation }),
	securityPEMTypeKey("ssl.keystore.type"),
	securityStringKey("ssl.key.password", true, func(s *MirrorSecurity) *string { return &s.TLS.KeyPassword }),
	{name: "ssl.endpoint.identification.algorithm", defaultValue: "https", parse: parseEndpointIdentification,
		format: formatEndpointIdentification},
	{name: "sasl.mechanism", defaultValue: "PLAIN", parse: parseSASLMechanism,
		format: func(s *MirrorSecurity) string { return string(s.SASL.Mechanism) }},
	securityStringKey("sasl.jaas.config", true, func(s *MirrorSecurity) *string { return &s.SASL.JAASConfig }),
	securityStringKey("sasl.oauthbearer.token.endpoint.url", false, func(s *MirrorSecurity) *string { return &s.SASL.TokenEndpointURL }),
}

// mirrorSecurityKeys are the security keys as mirror config keys.
func mirrorSecurityKeys() []mirrorConfigKey {
	keys := make([]mirrorConfigKey, 0, len(securityKeys))
	for _, k := range securityKeys {
		keys = append(keys, mirrorConfigKey{name: k.name, defaultValue: k.defaultValue, secret: k.secret,
			parse:  func(c *MirrorConfig, value string) error { return k.parse(&c.Security, value) },
			format: func(c *MirrorConfig) string { return k.format(&c.Security) }})
	}
	return keys
}

// ParseClientSecurity parses a client's security properties (the CLI's
// --command-config) over the defaults, with the mirror config's rules:
// another key is an error naming it, a secret's value is never shown.
func ParseClientSecurity(props map[string]string) (MirrorSecurity, error) {
	var s MirrorSecurity
	for _, key := range securityKeys {
		if err := key.parse(&s, key.defaultValue); err != nil {
			panic(fmt.Sprintf("engine: default %s=%q: %v", key.name, key.defaultValue, err))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		i := slices.IndexFunc(securityKeys, func(k securityKey) bool { return k.name == name })
		if i < 0 {
			return MirrorSecurity{}, fmt.Errorf("engine: client config %q is not a security config this client reads", name)
		}
		key, value := securityKeys[i], props[name]
		if !key.secret {
			value = strings.TrimSpace(value)
		}
		if err := key.parse(&s, value); err != nil {
			if key.secret {
				value = "[hidden]"
			}
			return MirrorSecurity{}, fmt.Errorf("engine: client config %s=%q: %w", name, value, err)
		}
	}
	if err := s.check(); err != nil {
		return MirrorSecurity{}, fmt.Errorf("engine: client config %w", err)
	}
	return s, nil
}

// check verifies the SASL keys together: with a SASL protocol,
// sasl.jaas.config must name the mechanism's login module with its
// options. The error names keys and options, never values.
func (s MirrorSecurity) check() error {
	if !s.Protocol.UsesSASL() {
		return nil
	}
	if s.SASL.JAASConfig == "" {
		return fmt.Errorf("sasl.jaas.config is required with security.protocol=%s", s.Protocol)
	}
	_, err := s.SASL.jaasOptions()
	if err == nil && s.SASL.Mechanism == SASLOAuthBearer {
		err = checkTokenEndpoint(s.SASL.TokenEndpointURL)
	}
	return err
}

// jaasOptions parses sasl.jaas.config for the mechanism.
func (s MirrorSASL) jaasOptions() (map[string]string, error) {
	if s.JAASConfig == "" {
		return nil, fmt.Errorf("sasl.jaas.config is required with sasl.mechanism=%s", s.Mechanism)
	}
	entry, err := auth.ParseJAAS(s.JAASConfig)
	if err != nil {
		return nil, fmt.Errorf("sasl.jaas.config: %w", err) // the offset, never the text
	}
	if want := saslLoginModules[s.Mechanism]; entry.LoginModule != want {
		return nil, fmt.Errorf("sasl.jaas.config: sasl.mechanism=%s wants login module %s", s.Mechanism, want)
	}
	known := saslJAASOptions[s.Mechanism]
	for _, option := range slices.Sorted(maps.Keys(entry.Options)) {
		if !slices.Contains(known, option) {
			return nil, fmt.Errorf("sasl.jaas.config: option %q is not read with sasl.mechanism=%s (read: %s)", option, s.Mechanism, strings.Join(known, ", "))
		}
	}
	for _, option := range known[:saslJAASRequired[s.Mechanism]] {
		if _, ok := entry.Options[option]; !ok {
			return nil, fmt.Errorf("sasl.jaas.config: option %s is required with sasl.mechanism=%s", option, s.Mechanism)
		}
	}
	return entry.Options, nil
}

func checkTokenEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if endpoint == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("sasl.oauthbearer.token.endpoint.url: want an http or https URL with sasl.mechanism=OAUTHBEARER")
	}
	return nil
}

// ClientOptions returns the franz-go options of the security configs:
// TLS (the PEM files read now, inside filesDir unless it is empty) and
// SASL. requestTimeout bounds a token request; log gets the detail of
// failures whose errors stay neutral.
func (s MirrorSecurity) ClientOptions(filesDir string, requestTimeout time.Duration, log *slog.Logger) ([]kgo.Opt, error) {
	tlsConfig, mechanism, err := s.connSecurity(filesDir, requestTimeout, log)
	if err != nil {
		return nil, err
	}
	return securityOptions(tlsConfig, mechanism), nil
}

// connSecurity returns the TLS config (nil: no TLS) and the SASL
// mechanism (nil: no SASL) of s, for kgo and for the fetchers' own
// connections alike: one mechanism, so that an OAUTHBEARER token is
// fetched once for both.
func (s MirrorSecurity) connSecurity(filesDir string, requestTimeout time.Duration, log *slog.Logger) (*tls.Config, sasl.Mechanism, error) {
	var tlsConfig *tls.Config
	var mechanism sasl.Mechanism
	var err error
	if s.Protocol.UsesTLS() {
		if tlsConfig, err = s.TLS.clientConfig(filesDir, log); err != nil {
			return nil, nil, err
		}
	}
	if s.Protocol.UsesSASL() {
		if mechanism, err = s.SASL.mechanism(requestTimeout, log); err != nil {
			return nil, nil, err
		}
	}
	return tlsConfig, mechanism, nil
}

// securityOptions are the kgo options of connSecurity's answer.
func securityOptions(tlsConfig *tls.Config, mechanism sasl.Mechanism) []kgo.Opt {
	var opts []kgo.Opt
	if tlsConfig != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsConfig))
	}
	if mechanism != nil {
		opts = append(opts, kgo.SASL(mechanism))
	}
	return opts
}

// mechanism builds the franz-go SASL mechanism.
func (s MirrorSASL) mechanism(requestTimeout time.Duration, log *slog.Logger) (sasl.Mechanism, error) {
	options, err := s.jaasOptions()
	if err != nil {
		return nil, err
	}
	switch s.Mechanism {
	case SASLPlain:
		return plain.Auth{User: options["username"], Pass: options["password"]}.AsMechanism(), nil
	case SASLScramSHA256:
		return scram.Auth{User: options["username"], Pass: options["password"]}.AsSha256Mechanism(), nil
	case SASLScramSHA512:
		return scram.Auth{User: options["username"], Pass: options["password"]}.AsSha512Mechanism(), nil
	case SASLOAuthBearer:
		if err := checkTokenEndpoint(s.TokenEndpointURL); err != nil {
			return nil, err
		}
		return newOAuthTokenSource(s.TokenEndpointURL, options["clientId"], options["clientSecret"], options["scope"], requestTimeout, log).mechanism(), nil
	case SASLAWSMSKIAM:
		return awsMechanism(options["awsProfileName"], log), nil
	}
	return nil, fmt.Errorf("sasl.mechanism=%s is not supported", s.Mechanism)
}

func securityStringKey(name string, secret bool, field func(*MirrorSecurity) *string) securityKey {
	return securityKey{name: name, secret: secret,
		parse:  func(s *MirrorSecurity, value string) error { *field(s) = value; return nil },
		format: func(s *MirrorSecurity) string { return *field(s) }}
}

// securityPEMTypeKey: ssl.truststore.type and ssl.keystore.type, accepted
// for Kafka client configs that name them, and only as PEM.
func securityPEMTypeKey(name string) securityKey {
	return securityKey{name: name, defaultValue: "PEM",
		parse: func(_ *MirrorSecurity, value string) error {
			if !strings.EqualFold(value, "PEM") {
				return errors.New("only PEM stores are supported")
			}
			return nil
		},
		format: func(*MirrorSecurity) string { return "PEM" }}
}

func parseSecurityProtocol(s *MirrorSecurity, value string) error {
	protocol, err := auth.ParseSecurityProtocol(value)
	if err != nil {
		return err
	}
	s.Protocol = protocol
	return nil
}

func parseEndpointIdentification(s *MirrorSecurity, value string) error {
	if value != "" && !strings.EqualFold(value, "https") {
		return errors.New(`want "https" or empty`)
	}
	s.TLS.EndpointIdentification = value != ""
	return nil
}

func formatEndpointIdentification(s *MirrorSecurity) string {
	if s.TLS.EndpointIdentification {
		return "https"
	}
	return ""
}

func parseSASLMechanism(s *MirrorSecurity, value string) error {
	for _, m := range saslMechanisms {
		if strings.EqualFold(value, string(m)) {
			s.SASL.Mechanism = m
			return nil
		}
	}
	names := make([]string, len(saslMechanisms))
	for i, m := range saslMechanisms {
		names[i] = string(m)
	}
	return fmt.Errorf("want one of %s", strings.Join(names, ", "))
}
