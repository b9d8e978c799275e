package engine

import (
	"errors"
	"fmt"
	"github.com/mirrord/mirrord/auth"
	"maps"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// designMirrorDefaults: DESIGN.md's defaults, and ours where it names
// none.
var designMirrorDefaults = map[string]string{
	"bootstrap.servers":                     "source:9092",
	"security.protocol":                     "PLAINTEXT",
	"ssl.truststore.location":               "",
	"ssl.truststore.type":                   "PEM",
	"ssl.keystore.location":                 "",
	"ssl.keystore.type":                     "PEM",
	"ssl.key.password":                      "",
	"ssl.endpoint.identification.algorithm": "https",
	"sasl.mechanism":                        "PLAIN",
	"sasl.jaas.config":                      "",
	"sasl.oauthbearer.token.endpoint.url":   "",
	"fetch.wait.max.ms":                     "1000",
	"fetch.min.bytes":                       "1",
	"fetch.max.bytes":                       "1048576",
	"fetch.response.max.bytes":              "10485760",
	"request.timeout.ms":                    "30000",
	"topics.include":                        ".*",
	"topics.exclude":                        "__.*",
	"groups.include":                        ".*",
	"groups.exclude":                        "",
	"topic.properties.exclude": `follower\.replication\.throttled\.replicas,leader\.replication\.throttled\.replicas,` +
		`message\.timestamp\..*,unclean\.leader\.election\.enable,min\.insync\.replicas,mirror\..*`,
	"mirror.metadata.refresh.interval.ms":    "60000",
	"mirror.replication.throttled.rate":      strconv.FormatInt(math.MaxInt64, 10),
	"mirror.failed.retry.initial.backoff.ms": "100",
	"mirror.failed.retry.max.backoff.ms":     "300000",
	"mirror.failed.retry.max.attempts":       "20",
	"mirror.support.unclean.leader.election": "false",
	"mirror.group.offsets.sync.interval.ms":  "5000",
	"acls.include":                           ".*",
	"mirror.acls.sync.interval.ms":           "60000",
}

func minimalMirrorProps() map[string]string {
	return map[string]string{"bootstrap.servers": "source:9092"}
}

func TestMirrorConfigDefaults(t *testing.T) {
	c, err := ParseMirrorConfig(minimalMirrorProps())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Properties(); !maps.Equal(got, designMirrorDefaults) {
		for key, want := range designMirrorDefaults {
			if got[key] != want {
				t.Errorf("%s = %q, want %q", key, got[key], want)
			}
		}
		t.Fatalf("keys %d, want %d", len(got), len(designMirrorDefaults))
	}
	want := MirrorConfig{FetchWaitMax: time.Second, FetchMinBytes: 1, FetchPartitionMaxBytes: 1 << 20,
		FetchResponseMaxBytes: 10 << 20, RequestTimeout: 30 * time.Second, MetadataRefreshInterval: time.Minute,
		ReplicationThrottledRate: math.MaxInt64, Retry: mirrorstate.RetryPolicy{InitialBackoff: 100 * time.Millisecond, MaxBackoff: 300 * time.Second, MaxAttempts: 20}}
	if c.FetchWaitMax != want.FetchWaitMax || c.FetchMinBytes != want.FetchMinBytes || c.FetchPartitionMaxBytes != want.FetchPartitionMaxBytes ||
		c.FetchResponseMaxBytes != want.FetchResponseMaxBytes || c.RequestTimeout != want.RequestTimeout ||
		c.MetadataRefreshInterval != want.MetadataRefreshInterval || c.ReplicationThrottledRate != want.ReplicationThrottledRate ||
		c.Retry != want.Retry || !c.Security.TLS.EndpointIdentification || c.Security.Protocol != auth.Plaintext {
		t.Fatalf("defaults %+v", c)
	}
}

func TestMirrorConfigKeys(t *testing.T) {
	rows := []struct {
		key, value string
		want       string // the value Properties gives back; "!" for an error
	}{
		{"bootstrap.servers", "a:9092, b:9093,", "a:9092,b:9093"},
		{"bootstrap.servers", "[::1]:9092", "[::1]:9092"},
		{"bootstrap.servers", "a", "!"},
		{"bootstrap.servers", "a:0", "!"},
		{"bootstrap.servers", ":9092", "!"},
		{"bootstrap.servers", "a:http", "!"},
		{"security.protocol", "ssl", "SSL"},
		{"security.protocol", " PLAINTEXT ", "PLAINTEXT"},
		{"security.protocol", "TLS", "!"},
		{"security.protocol", "SASL_SSL", "!"}, // without sasl.jaas.config
		{"security.protocol", "SASL_PLAINTEXT", "!"},
		{"ssl.truststore.location", "/etc/ca.pem", "/etc/ca.pem"},
		{"ssl.truststore.type", "pem", "PEM"},
		{"ssl.truststore.type", "JKS", "!"},
		{"ssl.keystore.location", "/etc/client.pem", "/etc/client.pem"},
		{"ssl.keystore.type", "PEM", "PEM"},
		{"ssl.keystore.type", "PKCS12", "!"},
		{"ssl.key.password", " s3cret ", " s3cret "},
		{"ssl.endpoint.identification.algorithm", "", ""},
		{"ssl.endpoint.identification.algorithm", "HTTPS", "https"},
		{"ssl.endpoint.identification.algorithm", "ldaps", "!"},
		{"sasl.mechanism", "scram-sha-512", "SCRAM-SHA-512"},
		{"sasl.mechanism", "GSSAPI", "!"},
		{"sasl.mechanism", "oauthbearer", "OAUTHBEARER"},
		{"sasl.mechanism", "aws_msk_iam", "AWS_MSK_IAM"},
		{"sasl.oauthbearer.token.endpoint.url", "http://127.0.0.1:1/token", "http://127.0.0.1:1/token"},
		{"sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`,
			`org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`},
		{"fetch.wait.max.ms", "0", "0"},
		{"fetch.wait.max.ms", "-1", "!"},
		{"fetch.wait.max.ms", "1s", "!"},
		{"fetch.min.bytes", "65536", "65536"},
		{"fetch.min.bytes", "2147483648", "!"},
		{"fetch.max.bytes", "1", "1"},
		{"fetch.max.bytes", "0", "!"},
		{"fetch.response.max.bytes", "2147483647", "2147483647"},
		{"fetch.response.max.bytes", "0", "!"},
		{"request.timeout.ms", "5000", "5000"},
		{"request.timeout.ms", "0", "!"},
		{"topics.include", " orders , pay-.* ,", "orders,pay-.*"},
		{"topics.include", "(?!tmp).*", "!"}, // Java lookahead: not in Go
		{"topics.exclude", "", ""},
		{"topics.exclude", "a(b", "!"},
		{"groups.include", "app-\\d+", "app-\\d+"},
		{"groups.include", "(a)\\1", "!"}, // backreference
		{"groups.exclude", "tmp-.*", "tmp-.*"},
		{"groups.exclude", "a++", "!"}, // possessive
		{"topic.properties.exclude", " retention\\..* , ", "retention\\..*"},
		{"topic.properties.exclude", "a(", "!"},
		{"mirror.metadata.refresh.interval.ms", "1000", "1000"},
		{"mirror.metadata.refresh.interval.ms", "0", "!"},
		{"mirror.replication.throttled.rate", "1048576", "1048576"},
		{"mirror.replication.throttled.rate", "0", "!"},
		{"mirror.failed.retry.initial.backoff.ms", "1", "1"},
		{"mirror.failed.retry.initial.backoff.ms", "0", "!"},
		{"mirror.failed.retry.initial.backoff.ms", "300001", "!"}, // above the max backoff
		{"mirror.failed.retry.max.backoff.ms", "100", "100"},
		{"mirror.failed.retry.max.backoff.ms", "99", "!"}, // below the initial backoff
		{"mirror.failed.retry.max.attempts", "0", "0"},
		{"mirror.failed.retry.max.attempts", "-1", "!"},
		{"mirror.failed.retry.max.attempts", "", "!"},
		{"mirror.group.offsets.sync.interval.ms", "250", "250"},
		{"mirror.group.offsets.sync.interval.ms", "0", "!"},
		{"acls.include", " orders , app-.* ,", "orders,app-.*"},
		{"acls.include", "", ""}, // no ACL synced
		{"acls.include", "a(", "!"},
		{"mirror.acls.sync.interval.ms", "1000", "1000"},
		{"mirror.acls.sync.interval.ms", "0", "!"},
		{"mirror.support.unclean.leader.election", "TRUE", "true"},
		{"mirror.support.unclean.leader.election", "false", "false"},
		{"mirror.support.unclean.leader.election", "yes", "!"},
	}
	good, bad := map[string]bool{}, map[string]bool{}
	for _, c := range rows {
		good[c.key] = good[c.key] || c.want != "!"
		bad[c.key] = bad[c.key] || c.want == "!"
		props := minimalMirrorProps()
		props[c.key] = c.value
		config, err := ParseMirrorConfig(props)
		switch {
		case c.want == "!" && err == nil:
			t.Errorf("%s=%q: no error", c.key, c.value)
		case c.want == "!" && (!errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), c.key)):
			t.Errorf("%s=%q: error %v, want INVALID_CONFIG naming the key", c.key, c.value, err)
		case c.want != "!" && err != nil:
			t.Errorf("%s=%q: %v", c.key, c.value, err)
		case c.want != "!" && config.Properties()[c.key] != c.want:
			t.Errorf("%s=%q: reads back %q, want %q", c.key, c.value, config.Properties()[c.key], c.want)
		}
	}
	freeText := map[string]bool{"ssl.truststore.location": true, "ssl.keystore.location": true, "ssl.key.password": true, "sasl.jaas.config": true, "sasl.oauthbearer.token.endpoint.url": true}
	for key := range designMirrorDefaults {
		if !good[key] || !bad[key] && !freeText[key] {
			t.Errorf("key %s: a good row %t, a bad row %t", key, good[key], bad[key])
		}
	}
}

func TestMirrorConfigErrors(t *testing.T) {
	for _, c := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{}, "bootstrap.servers is required"},
		{map[string]string{"bootstrap.servers": " , "}, "bootstrap.servers is required"},
		{map[string]string{"bootstrap.servers": "a:1", "fetch.max.wait.ms": "5"}, `"fetch.max.wait.ms" is unknown`},
		{map[string]string{"bootstrap.servers": "a:1", "security.protocol": "SASL_SSL"}, "sasl.jaas.config is required with security.protocol=SASL_SSL"},
		{map[string]string{"bootstrap.servers": "a:1", "mirror.failed.retry.max.backoff.ms": "50"},
			"mirror.failed.retry.max.backoff.ms=50 is below mirror.failed.retry.initial.backoff.ms=100"},
	} {
		_, err := ParseMirrorConfig(c.props)
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("%v: %v, want INVALID_CONFIG with %q", c.props, err, c.want)
		}
	}
}

func TestMirrorConfigPatterns(t *testing.T) {
	c, err := ParseMirrorConfig(map[string]string{"bootstrap.servers": "a:1", "topics.include": "orders,pay-.*,(?i)AUDIT"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		patterns NamePatterns
		name     string
		want     bool
	}{
		{c.TopicsInclude, "orders", true},
		{c.TopicsInclude, "orders2", false}, // a whole-name match
		{c.TopicsInclude, "my-orders", false},
		{c.TopicsInclude, "pay-eu", true},
		{c.TopicsInclude, "audit", true},
		{c.TopicsExclude, "__consumer_offsets", true},
		{c.TopicsExclude, "a__b", false},
		{c.GroupsInclude, "anything", true},
		{c.GroupsExclude, "anything", false}, // the empty list
		{c.GroupsExclude, "", false},
	} {
		if got := m.patterns.Matches(m.name); got != m.want {
			t.Errorf("%q matches %q: %t, want %t", m.patterns, m.name, got, m.want)
		}
	}
}

func TestMirrorConfigRoundTrip(t *testing.T) {
	for _, props := range []map[string]string{
		minimalMirrorProps(),
		{"bootstrap.servers": "a:1,b:2", "security.protocol": "SSL", "ssl.truststore.location": "/ca.pem",
			"ssl.keystore.location": "/client.pem", "ssl.key.password": " pw ", "ssl.endpoint.identification.algorithm": "",
			"topics.include": "x, y.*", "topics.exclude": "", "groups.exclude": "tmp-.*", "fetch.wait.max.ms": "0",
			"mirror.replication.throttled.rate": "1000", "mirror.failed.retry.max.attempts": "0"},
	} {
		c, err := ParseMirrorConfig(props)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseMirrorConfig(c.Properties())
		if err != nil {
			t.Fatalf("re-parsing %v: %v", c.Properties(), err)
		}
		if !maps.Equal(again.Properties(), c.Properties()) || again.Retry != c.Retry || again.Security != c.Security ||
			again.FetchWaitMax != c.FetchWaitMax || again.ReplicationThrottledRate != c.ReplicationThrottledRate {
			t.Fatalf("round trip:\n%v\n%v", c.Properties(), again.Properties())
		}
	}
}

func TestMirrorConfigClientOptions(t *testing.T) {
	c, err := ParseMirrorConfig(map[string]string{"bootstrap.servers": "127.0.0.1:1", "fetch.wait.max.ms": "0",
		"request.timeout.ms": "1", "mirror.metadata.refresh.interval.ms": "1"})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := c.SourceClientOptions("", nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kgo.NewClient(opts...) // validates the options, clamped into kgo's ranges; dials nothing yet
	if err != nil {
		t.Fatal(err)
	}
	client.Close()
}
