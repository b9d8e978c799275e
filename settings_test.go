package mirrord

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/auth"
	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/mirrordtest"
)

// settingsOf parses a server.properties text into the node's settings.
func settingsOf(t *testing.T, text string) (settings, error) {
	t.Helper()
	props, err := ParseProperties(text)
	if err != nil {
		t.Fatal(err)
	}
	return parseSettings(Config{Properties: props, DataDir: "/data"})
}

func TestSettings(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		dataDir    string
		listen     string // the one listener's address; "": none
		filesDir   string // mirror.config.files.dir
		openFiles  int    // log.open.files.max
		indexCache int64  // log.index.cache.max.bytes
		maxBytes   int32  // message.max.bytes
		err        string
	}{
		{name: "file", file: "listeners=PLAINTEXT://127.0.0.1:9999\nlog.retention.hours=1\nmessage.max.bytes=5000\nmirror.config.files.dir=/etc/mirrord/pem\n",
			dataDir: "/data", listen: "127.0.0.1:9999", filesDir: "/etc/mirrord/pem", maxBytes: 5000},
		{name: "Config.DataDir wins over log.dirs", file: "log.dirs=/d\n", dataDir: "/data"},
		{name: "two data directories", file: "log.dirs=/a,/b\n", err: "one data directory"},
		{name: "file cache bounds", file: "log.open.files.max=500\nlog.index.cache.max.bytes=1048576\n", dataDir: "/data", openFiles: 500, indexCache: 1 << 20},
		{name: "no open files", file: "log.open.files.max=0\n", err: "log.open.files.max"},
		{name: "unknown key", file: "no.such.key=1\n", err: "no.such.key is not a Kafka broker config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := settingsOf(t, tc.file)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%v, want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.node.DataDir != tc.dataDir || got.node.MirrorConfigFilesDir != tc.filesDir || got.node.Log.OpenFilesMax != tc.openFiles ||
				got.node.Log.IndexCacheBytesMax != tc.indexCache || tc.maxBytes != 0 && got.node.MessageMaxBytes != tc.maxBytes {
				t.Fatalf("%+v", got.node)
			}
			if tc.listen == "" && len(got.listeners) != 0 || tc.listen != "" && (len(got.listeners) != 1 || got.listeners[0].address != tc.listen) {
				t.Fatalf("listeners %+v, want one on %q", got.listeners, tc.listen)
			}
		})
	}
	if _, err := parseSettings(Config{}); !errors.Is(err, ErrNoDataDir) {
		t.Fatalf("no data directory: %v, want ErrNoDataDir", err)
	}
	// The console's history: a sample every console.sample.interval.ms,
	// the last hour kept; out of [100 ms, 1 h] refused by name.
	if got, err := settingsOf(t, "console.sample.interval.ms=250\n"); err != nil || got.console.SampleInterval != 250*time.Millisecond || got.console.Samples != 14400 {
		t.Fatalf("console.sample.interval.ms=250: %+v, %v", got.console, err)
	}
	for _, bad := range []string{"99", "3600001", "soon"} {
		if _, err := settingsOf(t, "console.sample.interval.ms="+bad+"\n"); err == nil || !strings.Contains(err.Error(), "console.sample.interval.ms") {
			t.Errorf("console.sample.interval.ms=%s: %v, want it refused", bad, err)
		}
	}
	props := map[string]string{"log.dirs": "/d", "num.partitions": "3"}
	if got, err := parseSettings(Config{Properties: props}); err != nil || got.node.DataDir != "/d" || len(props) != 2 {
		t.Fatalf("log.dirs: %q, %v; the caller's map after: %v", got.node.DataDir, err, props)
	}
}

// wantListener is what a test expects of one listener.
type wantListener struct {
	name, address, advertised string
	protocol                  auth.SecurityProtocol
	clientAuth                tls.ClientAuthType
}

func TestListeners(t *testing.T) {
	pki := mirrordtest.NewPKI(t, "test CA")
	node := pki.Issue("node", pkix.Name{CommonName: "node"}, "127.0.0.1").Keystore
	trust := pki.Truststore
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		name, file string
		set        [][3]string // SetListener's name, address, advertised
		want       []wantListener
		err        string
	}{
		{name: "PLAINTEXT and SSL", file: "listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093\nssl.keystore.location=" + node + "\n",
			want: []wantListener{{name: "PLAINTEXT", address: "127.0.0.1:9092", protocol: auth.Plaintext}, {name: "SSL", address: "127.0.0.1:9093", protocol: auth.SSL}}},
		{name: "client auth required", file: "listeners=SSL://127.0.0.1:9093\nssl.keystore.location=" + node + "\nssl.truststore.location=" + trust + "\nssl.client.auth=required\nssl.keystore.type=PEM\n",
			want: []wantListener{{name: "SSL", address: "127.0.0.1:9093", protocol: auth.SSL, clientAuth: tls.RequireAndVerifyClientCert}}},
		{name: "named listeners and advertised", file: "listeners=INTERNAL://127.0.0.1:9092,client://:9094\nlistener.security.protocol.map=INTERNAL:PLAINTEXT,CLIENT:SSL\n" +
			"advertised.listeners=CLIENT://kafka.example:19094\nssl.keystore.location=" + node + "\n",
			want: []wantListener{{name: "INTERNAL", address: "127.0.0.1:9092", protocol: auth.Plaintext}, {name: "CLIENT", address: ":9094", advertised: "kafka.example:19094", protocol: auth.SSL}}},
		{name: "a listener's own ssl configs win", file: "listeners=SSL://127.0.0.1:9093\nssl.keystore.location=" + missing + "\nlistener.name.ssl.ssl.keystore.location=" + node +
			"\nlistener.name.ssl.ssl.client.auth=requested\nssl.truststore.location=" + trust + "\n",
			want: []wantListener{{name: "SSL", address: "127.0.0.1:9093", protocol: auth.SSL, clientAuth: tls.VerifyClientCertIfGiven}}},
		{name: "SASL_SSL takes ssl.client.auth only from its prefix", file: "listeners=SASL_SSL://127.0.0.1:9093,SSL://127.0.0.1:9094\nssl.keystore.location=" + node +
			"\nssl.truststore.location=" + trust + "\nssl.client.auth=required\n",
			want: []wantListener{{name: "SASL_SSL", address: "127.0.0.1:9093", protocol: auth.SASLSSL}, {name: "SSL", address: "127.0.0.1:9094", protocol: auth.SSL, clientAuth: tls.RequireAndVerifyClientCert}}},
		{name: "SetListener", file: "ssl.keystore.location=" + node + "\nssl.truststore.location=" + trust + "\nssl.client.auth=required\n",
			set:  [][3]string{{"plaintext", "127.0.0.1:9092", "h:1"}, {"SSL", "127.0.0.1:9093", ""}},
			want: []wantListener{{name: "PLAINTEXT", address: "127.0.0.1:9092", advertised: "h:1", protocol: auth.Plaintext}, {name: "SSL", address: "127.0.0.1:9093", protocol: auth.SSL, clientAuth: tls.RequireAndVerifyClientCert}}},
		{name: "SetListener over the file", file: "listeners=PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:9093\nadvertised.listeners=PLAINTEXT://h:2\nssl.keystore.location=" + node + "\n",
			set:  [][3]string{{"PLAINTEXT", "127.0.0.1:7", "h:3"}},
			want: []wantListener{{name: "PLAINTEXT", address: "127.0.0.1:7", advertised: "h:3", protocol: auth.Plaintext}, {name: "SSL", address: "127.0.0.1:9093", protocol: auth.SSL}}},
		{name: "JKS", file: "listeners=SSL://127.0.0.1:9093\nssl.keystore.location=" + node + "\nssl.keystore.type=JKS\n", err: "ssl.keystore.type JKS"},
		{name: "PKCS12 truststore", file: "listeners=SSL://127.0.0.1:9093\nssl.keystore.location=" + node + "\nssl.truststore.type=PKCS12\n", err: "ssl.truststore.type PKCS12"},
		{name: "keystore password", file: "listeners=SSL://127.0.0.1:9093\nssl.keystore.location=" + node + "\nssl.keystore.password=x\n", err: "ssl.keystore.password cannot"},
		{name: "no keystore", file: "listeners=SSL://127.0.0.1:9093\n", err: "needs ssl.keystore.location"},
		{name: "unreadable keystore", file: "listeners=SSL://127.0.0.1:9093\nssl.keystore.location=" + missing + "\n", err: "ssl.keystore.location"},
		{name: "required without truststore", file: "listeners=SSL://127.0.0.1:9093\nssl.keystore.location=" + node + "\nssl.client.auth=required\n", err: "needs ssl.truststore.location"},
		{name: "bad client auth", file: "listeners=SSL://127.0.0.1:9093\nssl.keystore.location=" + node + "\nssl.client.auth=always\n", err: `ssl.client.auth "always"`},
		{name: "bad rules", file: "listeners=SSL://127.0.0.1:9093\nssl.keystore.location=" + node + "\nssl.principal.mapping.rules=RULE:x\n", err: "invalid rule"},
		{name: "no protocol for a name", file: "listeners=CLIENT://127.0.0.1:9093\n", err: "no security protocol defined for listener CLIENT"},
		{name: "an explicit map replaces the default", file: "listeners=PLAINTEXT://127.0.0.1:9093\nlistener.security.protocol.map=CLIENT:SSL\n", err: "listener PLAINTEXT"},
		{name: "advertised but not listening", file: "listeners=PLAINTEXT://127.0.0.1:9093\nadvertised.listeners=SSL://h:1\n", err: "advertised.listeners names SSL"},
		{name: "one port twice", file: "listeners=PLAINTEXT://127.0.0.1:9093,SSL://127.0.0.1:9093\nssl.keystore.location=" + node + "\n", err: "same port"},
		{name: "one name twice", file: "listeners=PLAINTEXT://127.0.0.1:9093,plaintext://127.0.0.1:9094\n", err: "appears twice"},
		{name: "not NAME://HOST:PORT", file: "listeners=127.0.0.1:9093\n", err: "is not NAME://HOST:PORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props, err := ParseProperties(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range tc.set {
				if err := SetListener(props, l[0], l[1], l[2]); err != nil {
					t.Fatal(err)
				}
			}
			got, err := parseSettings(Config{DataDir: "/data", Properties: props})
			if tc.err != "" {
				if !errors.Is(err, ErrListenerConfig) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%v, want ErrListenerConfig saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.listeners) != len(tc.want) {
				t.Fatalf("%d listeners, want %d", len(got.listeners), len(tc.want))
			}
			for i, w := range tc.want {
				l := got.listeners[i]
				if l.Name != w.name || l.address != w.address || l.advertised != w.advertised || l.Protocol != w.protocol || (l.TLS != nil) != w.protocol.UsesTLS() {
					t.Fatalf("listener %d: %+v, want %+v", i, l, w)
				}
				if l.TLS != nil && (l.TLS.ClientAuth != w.clientAuth || len(l.TLS.Certificates) != 1 || l.PrincipalMapper == nil) {
					t.Fatalf("listener %s: client auth %v, want %v", l.Name, l.TLS.ClientAuth, w.clientAuth)
				}
			}
		})
	}
}

// The ssl.* configs a listener does not take stay in the properties and
// are refused there by name; a SASL listener is parsed with its protocol
// (sasl.go gives it its mechanisms when it is served).
func TestListenersRefused(t *testing.T) {
	_, err := settingsOf(t, "ssl.cipher.suites=TLS_AES_128_GCM_SHA256\n")
	if !errors.Is(err, broker.ErrServerProperty) || !strings.Contains(err.Error(), "ssl.cipher.suites") {
		t.Fatalf("%v, want ssl.cipher.suites refused", err)
	}
	got, err := settingsOf(t, "listeners=SASL_PLAINTEXT://127.0.0.1:9093\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.listeners) != 1 || got.listeners[0].Protocol != auth.SASLPlaintext {
		t.Fatalf("listeners %+v, want one SASL_PLAINTEXT", got.listeners)
	}
	if err := SetListener(map[string]string{}, "SSL", "no-port", ""); !errors.Is(err, ErrListenerConfig) {
		t.Fatalf("SetListener of a bad address: %v", err)
	}
}

// The node settings Open takes besides ApplyServerProperties': the log
// cleaner's, the consumer groups' and the transaction coordinator's
// bounds, with Kafka's names and defaults, refusing what Kafka's config
// validation refuses.
func TestNodeProperties(t *testing.T) {
	session, heartbeat := engine.DefaultConsumerGroupTimings()
	for _, tc := range []struct {
		name  string
		props map[string]string
		check func(engine.NodeConfig) bool
		err   string
	}{
		{name: "defaults", props: nil, check: func(c engine.NodeConfig) bool {
			return c.Cleaner == engine.DefaultCleanerConfig && c.ConsumerSessionTimeout == session && c.ConsumerHeartbeatInterval == heartbeat &&
				c.Transactions == engine.TransactionConfig{}
		}},
		{name: "cleaner", props: map[string]string{"log.cleaner.enable": "false", "log.cleaner.threads": "2", "log.cleaner.dedupe.buffer.size": "2097152",
			"log.cleaner.backoff.ms": "100", "log.cleaner.io.max.bytes.per.second": "1e6"}, check: func(c engine.NodeConfig) bool {
			return c.Cleaner.Disabled && c.Cleaner.Threads == 2 && c.Cleaner.DedupeBufferBytes == 2<<20 && c.Cleaner.Backoff == 100*time.Millisecond &&
				c.Cleaner.IOMaxBytesPerSecond == 1e6
		}},
		{name: "cleaner threads", props: map[string]string{"log.cleaner.threads": "0"}, err: "log.cleaner.threads 0 out of range [1, 64]"},
		{name: "dedupe buffer", props: map[string]string{"log.cleaner.dedupe.buffer.size": "1000"}, err: "at least 1 MiB"},
		{name: "cleaner rate", props: map[string]string{"log.cleaner.io.max.bytes.per.second": "-1"}, err: "log.cleaner.io.max.bytes.per.second"},
		{name: "groups", props: map[string]string{"group.consumer.session.timeout.ms": "10000", "group.consumer.heartbeat.interval.ms": "2000"},
			check: func(c engine.NodeConfig) bool {
				return c.ConsumerSessionTimeout == 10*time.Second && c.ConsumerHeartbeatInterval == 2*time.Second
			}},
		{name: "session 0", props: map[string]string{"group.consumer.session.timeout.ms": "0"}, err: "group.consumer.session.timeout.ms 0 out of range"},
		{name: "session too long", props: map[string]string{"group.consumer.session.timeout.ms": "3000000000"}, err: "group.consumer.session.timeout.ms 3000000000 out of range"},
		{name: "heartbeat over session", props: map[string]string{"group.consumer.session.timeout.ms": "4000"},
			err: "group.consumer.heartbeat.interval.ms 5000 out of range [1, 4000)"},
		{name: "heartbeat 0", props: map[string]string{"group.consumer.heartbeat.interval.ms": "0"}, err: "group.consumer.heartbeat.interval.ms 0 out of range"},
		{name: "transactions", props: map[string]string{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "250", "transaction.max.timeout.ms": "60000",
			"transactional.id.expiration.ms": "1000", "producer.id.expiration.ms": "2000"}, check: func(c engine.NodeConfig) bool {
			return c.Transactions == engine.TransactionConfig{MaxTimeout: time.Minute, AbortTimedOutInterval: 250 * time.Millisecond,
				TransactionalIDExpiration: time.Second, ProducerIDExpiration: 2 * time.Second}
		}},
		{name: "transaction timeout 0", props: map[string]string{"transaction.max.timeout.ms": "0"}, err: "transaction.max.timeout.ms 0 out of range"},
		{name: "producer ID expiration", props: map[string]string{"producer.id.expiration.ms": "3000000000"}, err: "producer.id.expiration.ms 3000000000 out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSettings(Config{DataDir: "/data", Properties: tc.props})
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err == "" && !tc.check(got.node):
				t.Fatalf("%+v", got.node)
			}
		})
	}
}

// PropertyDefaults are what Open applies when the properties leave the
// keys out: given explicitly, they make the same node settings.
func TestPropertyDefaults(t *testing.T) {
	none, err := parseSettings(Config{DataDir: "/data"})
	if err != nil {
		t.Fatal(err)
	}
	given, err := parseSettings(Config{DataDir: "/data", Properties: PropertyDefaults()})
	if err != nil {
		t.Fatal(err)
	}
	a, b := none.node, given.node
	a.StaticConfigs, b.StaticConfigs = nil, nil // the keys given are kept as STATIC_BROKER_CONFIG
	a.MessageMaxBytes, b.MessageMaxBytes = max(a.MessageMaxBytes, engine.DefaultMessageMaxBytes), max(b.MessageMaxBytes, engine.DefaultMessageMaxBytes)
	a.Transactions, b.Transactions = orDefault(a.Transactions), orDefault(b.Transactions)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("without the keys %+v\nwith PropertyDefaults %+v", a, b)
	}
}

// orDefault is c with Kafka's default for each zero field, as the node
// reads it.
func orDefault(c engine.TransactionConfig) engine.TransactionConfig {
	d := engine.DefaultTransactionConfig
	for _, f := range []struct{ into, def *time.Duration }{{&c.MaxTimeout, &d.MaxTimeout}, {&c.AbortTimedOutInterval, &d.AbortTimedOutInterval},
		{&c.TransactionalIDExpiration, &d.TransactionalIDExpiration}, {&c.ProducerIDExpiration, &d.ProducerIDExpiration}} {
		if *f.into == 0 {
			*f.into = *f.def
		}
	}
	return c
}
