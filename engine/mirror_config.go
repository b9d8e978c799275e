package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A mirror's config: Java properties with Kafka's names (DESIGN.md), the
// connection to the source cluster and how the mirror behaves. Parsing is
// pure (no file is read); SourceClientOptions reads the PEM files.
// Every error wraps kerr.InvalidConfig and names the key, so the listener
// answers INVALID_CONFIG with a message the operator can act on.
//
//	key                                     default              range
//	bootstrap.servers                       (required)           host:port,...
//	security.protocol                       PLAINTEXT            PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
//	ssl.truststore.location                 (system roots)       PEM file of CA certificates
//	ssl.truststore.type                     PEM                  PEM
//	ssl.keystore.location                   (no client cert)     PEM file: certificate chain and private key
//	ssl.keystore.type                       PEM                  PEM
//	ssl.key.password                        (key not encrypted)  decrypts an ENCRYPTED PRIVATE KEY (PKCS#8)
//	ssl.endpoint.identification.algorithm   https                https, or empty: no host name check
//	sasl.mechanism                          PLAIN                PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM
//	sasl.jaas.config                        (none)               the login module and its credentials (client_security.go)
//	sasl.oauthbearer.token.endpoint.url     (none)               OAUTHBEARER: the client credentials token endpoint
//	fetch.wait.max.ms                       1000                 0 - 2^31-1
//	fetch.min.bytes                         1                    0 - 2^31-1
//	fetch.max.bytes                         1048576              1 - 2^31-1, per partition
//	fetch.response.max.bytes                10485760             1 - 2^31-1
//	request.timeout.ms                      30000                1 - 2^31-1
//	topics.include                          .*                   patterns
//	topics.exclude                          __.*                 patterns
//	groups.include                          .*                   patterns
//	groups.exclude                          (none)               patterns
//	acls.include                            .*                   patterns of ACL resource names (ACL sync, mirror_acls.go)
//	mirror.acls.sync.interval.ms            60000                1 - 2^31-1
//	mirror.metadata.refresh.interval.ms     60000                1 - 2^31-1
//	mirror.replication.throttled.rate       9223372036854775807  1 - 2^63-1 bytes/s (the default: unthrottled)
//	mirror.failed.retry.initial.backoff.ms  100                  1 - 2^31-1
//	mirror.failed.retry.max.backoff.ms      300000               initial backoff - 2^31-1
//	mirror.failed.retry.max.attempts        20                   0 - 2^31-1
//
// Values are trimmed of surrounding white space, except the secrets
// (ssl.key.password, sasl.jaas.config), as Kafka's ConfigDef does. The
// security keys are those of any Kafka client (client_security.go): the
// CLI's --command-config reads them with the same code.

// MirrorConfig is a parsed mirror config. The zero value is not valid:
// ParseMirrorConfig makes one.
type MirrorConfig struct {
	BootstrapServers []string // at least one host:port
	Security         MirrorSecurity
	FetchWaitMax     time.Duration // whole milliseconds, >= 0
	FetchMinBytes    int32         // >= 0
	// FetchPartitionMaxBytes is fetch.max.bytes: per partition, >= 1.
	FetchPartitionMaxBytes int32
	FetchResponseMaxBytes  int32         // >= 1
	RequestTimeout         time.Duration // whole milliseconds, > 0
	TopicsInclude          NamePatterns
	TopicsExclude          NamePatterns
	GroupsInclude          NamePatterns
	GroupsExclude          NamePatterns
	// ACLsInclude are the resource names whose source ACLs the ACL sync
	// copies (acls.include; mirror_acls.go).
	ACLsInclude NamePatterns
	// ACLsSyncInterval is mirror.acls.sync.interval.ms: how often the
	// source's ACLs are synced (whole milliseconds, > 0).
	ACLsSyncInterval time.Duration
	// TopicPropertiesExclude are the topic configs the config sync does
	// not copy (topic.properties.exclude).
	TopicPropertiesExclude NamePatterns
	// MetadataRefreshInterval: whole milliseconds, > 0.
	MetadataRefreshInterval time.Duration
	// ReplicationThrottledRate in bytes per second, >= 1;
	// math.MaxInt64 is unthrottled.
	ReplicationThrottledRate int64
	Retry                    mirrorstate.RetryPolicy // valid()
	// GroupOffsetsSyncInterval is mirror.group.offsets.sync.interval.ms:
	// how often the source's consumer group offsets are synced (whole
	// milliseconds, > 0).
	GroupOffsetsSyncInterval time.Duration
	// SupportUncleanLeaderElection is
	// mirror.support.unclean.leader.election: a source that lost records
	// the mirror copied (an unclean leader election) is followed, the
	// mirror truncating to the new leader's log (ULE_RECOVERY), instead of
	// failing the partition until --recover.
	SupportUncleanLeaderElection bool
}

// NamePatterns is a comma-separated list of Java regular expressions; a
// name matches if one of them matches the whole name (Java's
// Pattern.matches). The empty list matches nothing.
//
// Go's regexp (RE2) stands in for java.util.regex. They agree on the
// common syntax (classes, quantifiers, groups, alternation, \Q...\E,
// (?i), named groups). Java has and Go refuses: backreferences (\1),
// lookaround ((?=, (?!, (?<=, (?<!), possessive quantifiers (a*+), atomic
// groups ((?>...)), \h, \R, \G, \Z and the \p{javaXxx} classes; such a
// pattern is an error naming the key. Splitting on commas, as Kafka's
// list configs do, means a pattern cannot contain a comma (a{1,3}).
type NamePatterns struct {
	text   string         // canonical: the patterns trimmed, joined by ","
	regexp *regexp.Regexp // anchored alternation of them; nil for the empty list
}

// Matches says whether name matches one of the patterns.
func (p NamePatterns) Matches(name string) bool { return p.regexp != nil && p.regexp.MatchString(name) }

func (p NamePatterns) String() string { return p.text }

func parseNamePatterns(list string) (NamePatterns, error) {
	var items []string
	for item := range strings.SplitSeq(list, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		if _, err := regexp.Compile(item); err != nil {
			return NamePatterns{}, fmt.Errorf("pattern %q: %w", item, err)
		}
		items = append(items, item)
	}
	if len(items) == 0 {
		return NamePatterns{}, nil
	}
	re, err := regexp.Compile(`^(?:(?:` + strings.Join(items, `)|(?:`) + `))$`)
	if err != nil {
		return NamePatterns{}, err
	}
	return NamePatterns{text: strings.Join(items, ","), regexp: re}, nil
}

// mirrorConfigKey is one key: its default (empty for none), whether its
// value is a secret (not trimmed, not echoed in errors), how to parse it
// into a MirrorConfig and how to write it back.
type mirrorConfigKey struct {
	name         string
	defaultValue string
	secret       bool
	parse        func(c *MirrorConfig, value string) error
	format       func(c *MirrorConfig) string
}

// mirrorConfigKeys: every key, in the order of the table above.
var mirrorConfigKeys = append(append([]mirrorConfigKey{
	{name: "bootstrap.servers", parse: parseBootstrapServers,
		format: func(c *MirrorConfig) string { return strings.Join(c.BootstrapServers, ",") }},
}, mirrorSecurityKeys()...), []mirrorConfigKey{
	mirrorMillisKey("fetch.wait.max.ms", "1000", 0, func(c *MirrorConfig) *time.Duration { return &c.FetchWaitMax }),
	mirrorInt32Key("fetch.min.bytes", "1", 0, func(c *MirrorConfig) *int32 { return &c.FetchMinBytes }),
	mirrorInt32Key("fetch.max.bytes", "1048576", 1, func(c *MirrorConfig) *int32 { return &c.FetchPartitionMaxBytes }),
	mirrorInt32Key("fetch.response.max.bytes", "10485760", 1, func(c *MirrorConfig) *int32 { return &c.FetchResponseMaxBytes }),
	mirrorMillisKey("request.timeout.ms", "30000", 1, func(c *MirrorConfig) *time.Duration { return &c.RequestTimeout }),
	mirrorPatternsKey("topics.include", ".*", func(c *MirrorConfig) *NamePatterns { return &c.TopicsInclude }),
	mirrorPatternsKey("topics.exclude", "__.*", func(c *MirrorConfig) *NamePatterns { return &c.TopicsExclude }),
	mirrorPatternsKey("groups.include", ".*", func(c *MirrorConfig) *NamePatterns { return &c.GroupsInclude }),
	mirrorPatternsKey("groups.exclude", "", func(c *MirrorConfig) *NamePatterns { return &c.GroupsExclude }),
	// KIP-1279's default: what belongs to the replicas or the clients of
	// one cluster, not to the topic's data.
	mirrorPatternsKey("topic.properties.exclude", `follower\.replication\.throttled\.replicas,leader\.replication\.throttled\.replicas,`+
		`message\.timestamp\..*,unclean\.leader\.election\.enable,min\.insync\.replicas,mirror\..*`,
		func(c *MirrorConfig) *NamePatterns { return &c.TopicPropertiesExclude }),
	mirrorPatternsKey("acls.include", ".*", func(c *MirrorConfig) *NamePatterns { return &c.ACLsInclude }),
	mirrorMillisKey("mirror.acls.sync.interval.ms", "60000", 1, func(c *MirrorConfig) *time.Duration { return &c.ACLsSyncInterval }),
	mirrorMillisKey("mirror.group.offsets.sync.interval.ms", "5000", 1, func(c *MirrorConfig) *time.Duration { return &c.GroupOffsetsSyncInterval }),
	mirrorMillisKey("mirror.metadata.refresh.interval.ms", "60000", 1, func(c *MirrorConfig) *time.Duration { return &c.MetadataRefreshInterval }),
	{name: "mirror.replication.throttled.rate", defaultValue: strconv.FormatInt(math.MaxInt64, 10),
		parse: func(c *MirrorConfig, value string) (err error) {
			c.ReplicationThrottledRate, err = parseMirrorConfigInt(value, 1, math.MaxInt64)
			return err
		},
		format: func(c *MirrorConfig) string { return strconv.FormatInt(c.ReplicationThrottledRate, 10) }},
	mirrorMillisKey("mirror.failed.retry.initial.backoff.ms", "100", 1, func(c *MirrorConfig) *time.Duration { return &c.Retry.InitialBackoff }),
	mirrorMillisKey("mirror.failed.retry.max.backoff.ms", "300000", 1, func(c *MirrorConfig) *time.Duration { return &c.Retry.MaxBackoff }),
	mirrorInt32Key("mirror.failed.retry.max.attempts", "20", 0, func(c *MirrorConfig) *int32 { return &c.Retry.MaxAttempts }),
	{name: "mirror.support.unclean.leader.election", defaultValue: "false",
		parse: func(c *MirrorConfig, value string) error {
			switch strings.ToLower(value) { // as Kafka's ConfigDef BOOLEAN
			case "true", "false":
				c.SupportUncleanLeaderElection = strings.EqualFold(value, "true")
				return nil
			}
			return errors.New("want true or false")
		},
		format: func(c *MirrorConfig) string { return strconv.FormatBool(c.SupportUncleanLeaderElection) }},
}...)

// ParseMirrorConfig parses a mirror's properties over the defaults.
func ParseMirrorConfig(props map[string]string) (MirrorConfig, error) {
	var c MirrorConfig
	for _, key := range mirrorConfigKeys {
		if err := key.parse(&c, key.defaultValue); err != nil {
			panic(fmt.Sprintf("engine: default %s=%q: %v", key.name, key.defaultValue, err))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		i := slices.IndexFunc(mirrorConfigKeys, func(k mirrorConfigKey) bool { return k.name == name })
		if i < 0 {
			return MirrorConfig{}, fmt.Errorf("%w: mirror config %q is unknown", kerr.InvalidConfig, name)
		}
		key, value := mirrorConfigKeys[i], props[name]
		if !key.secret {
			value = strings.TrimSpace(value)
		}
		if err := key.parse(&c, value); err != nil {
			if key.secret {
				value = "[hidden]"
			}
			return MirrorConfig{}, fmt.Errorf("%w: mirror config %s=%q: %w", kerr.InvalidConfig, name, value, err)
		}
	}
	return c, c.check()
}

// check verifies what involves more than one key.
func (c *MirrorConfig) check() error {
	switch {
	case len(c.BootstrapServers) == 0:
		return fmt.Errorf("%w: mirror config bootstrap.servers is required", kerr.InvalidConfig)
	case c.Retry.MaxBackoff < c.Retry.InitialBackoff:
		return fmt.Errorf("%w: mirror config mirror.failed.retry.max.backoff.ms=%d is below mirror.failed.retry.initial.backoff.ms=%d",
			kerr.InvalidConfig, c.Retry.MaxBackoff.Milliseconds(), c.Retry.InitialBackoff.Milliseconds())
	}
	if err := c.Security.check(); err != nil {
		return fmt.Errorf("%w: mirror config %w", kerr.InvalidConfig, err)
	}
	return nil
}

// Properties is the config as properties, every key with its value, such
// that ParseMirrorConfig(c.Properties()) is c: for persisting a mirror.
func (c MirrorConfig) Properties() map[string]string {
	props := make(map[string]string, len(mirrorConfigKeys))
	for _, key := range mirrorConfigKeys {
		props[key.name] = key.format(&c)
	}
	return props
}

func mirrorStringKey(name string, secret bool, field func(*MirrorConfig) *string) mirrorConfigKey {
	return mirrorConfigKey{name: name, secret: secret,
		parse:  func(c *MirrorConfig, value string) error { *field(c) = value; return nil },
		format: func(c *MirrorConfig) string { return *field(c) }}
}

func mirrorInt32Key(name, defaultValue string, lowest int64, field func(*MirrorConfig) *int32) mirrorConfigKey {
	return mirrorConfigKey{name: name, defaultValue: defaultValue,
		parse: func(c *MirrorConfig, value string) error {
			n, err := parseMirrorConfigInt(value, lowest, math.MaxInt32)
			*field(c) = int32(n)
			return err
		},
		format: func(c *MirrorConfig) string { return strconv.FormatInt(int64(*field(c)), 10) }}
}

func mirrorMillisKey(name, defaultValue string, lowest int64, field func(*MirrorConfig) *time.Duration) mirrorConfigKey {
	return mirrorConfigKey{name: name, defaultValue: defaultValue,
		parse: func(c *MirrorConfig, value string) error {
			n, err := parseMirrorConfigInt(value, lowest, math.MaxInt32)
			*field(c) = time.Duration(n) * time.Millisecond
			return err
		},
		format: func(c *MirrorConfig) string { return strconv.FormatInt(field(c).Milliseconds(), 10) }}
}

func mirrorPatternsKey(name, defaultValue string, field func(*MirrorConfig) *NamePatterns) mirrorConfigKey {
	return mirrorConfigKey{name: name, defaultValue: defaultValue,
		parse: func(c *MirrorConfig, value string) (err error) {
			*field(c), err = parseNamePatterns(value)
			return err
		},
		format: func(c *MirrorConfig) string { return field(c).String() }}
}

// parseMirrorConfigInt parses a decimal integer in [lowest, highest].
func parseMirrorConfigInt(value string, lowest, highest int64) (int64, error) {
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return 0, errors.New("not an integer")
	}
	if n < lowest || n > highest {
		return 0, fmt.Errorf("outside [%d, %d]", lowest, highest)
	}
	return n, nil
}

func parseBootstrapServers(c *MirrorConfig, value string) error {
	c.BootstrapServers = nil
	for server := range strings.SplitSeq(value, ",") {
		if server = strings.TrimSpace(server); server == "" {
			continue
		}
		host, port, err := net.SplitHostPort(server)
		if err != nil {
			return fmt.Errorf("%q: want host:port", server)
		}
		if n, err := strconv.ParseUint(port, 10, 16); host == "" || err != nil || n == 0 {
			return fmt.Errorf("%q: want host:port with a port in [1, 65535]", server)
		}
		c.BootstrapServers = append(c.BootstrapServers, server)
	}
	return nil
}

// SourceClientOptions returns the franz-go client options for the source
// cluster: seed brokers, TLS from the PEM files (read now, inside
// filesDir unless it is empty: mirror.config.files.dir), SASL, timeouts
// and fetch sizes, clamped to the ranges kgo accepts. Errors name the key;
// log gets what they do not say (why a file cannot be read).
func (c MirrorConfig) SourceClientOptions(filesDir string, log *slog.Logger) ([]kgo.Opt, error) {
	dialer, err := newSourceDialer(c, filesDir, log)
	if err != nil {
		return nil, err
	}
	return c.sourceClientOptions(dialer), nil
}

// sourceClientOptions are SourceClientOptions with the security of
// dialer, which the mirror's fetchers use too.
func (c MirrorConfig) sourceClientOptions(dialer *sourceDialer) []kgo.Opt {
	metadataMaxAge := min(max(c.MetadataRefreshInterval, 10*time.Millisecond), time.Hour)
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.BootstrapServers...),
		kgo.ClientID("mirrord"),
		kgo.DialTimeout(min(c.RequestTimeout, 10*time.Second)),
		kgo.RequestTimeoutOverhead(min(max(c.RequestTimeout, 100*time.Millisecond), 15*time.Minute)),
		kgo.MetadataMaxAge(metadataMaxAge),
		kgo.MetadataMinAge(min(5*time.Second, metadataMaxAge)),
		kgo.FetchMaxWait(max(c.FetchWaitMax, 10*time.Millisecond)),
		kgo.FetchMinBytes(c.FetchMinBytes),
		kgo.FetchMaxPartitionBytes(c.FetchPartitionMaxBytes),
		kgo.FetchMaxBytes(c.FetchResponseMaxBytes),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
	}
	return append(opts, securityOptions(dialer.tls, dialer.mechanism)...)
}
