package main

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirrord/mirrord/auth"
	"github.com/mirrord/mirrord/broker"
	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/mirrordtest"
)

// serveTestFlags declares the flags readServeConfig looks at and parses args.
func serveTestFlags(t *testing.T, args ...string) *flag.FlagSet {
	t.Helper()
	flags := flag.NewFlagSet("serve", flag.ContinueOnError)
	flags.Int("message-max-bytes", 1, "")
	flags.String("listen", "127.0.0.1:9092", "")
	flags.String("advertise", "", "")
	declareListenerFlags(flags)
	if err := flags.Parse(args); err != nil {
		t.Fatal(err)
	}
	return flags
}

func writeServerProperties(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServeConfig(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		args       []string
		want       map[string]string // props after the flags
		listen     string
		filesDir   string // mirror.config.files.dir
		openFiles  int    // log.open.files.max
		indexCache int64  // log.index.cache.max.bytes
		err        string
	}{
		{name: "file only", file: "listeners=PLAINTEXT://127.0.0.1:9999\nlog.dirs=/d\nlog.retention.hours=1\nmessage.max.bytes=5000\nmirror.config.files.dir=/etc/mirrord/pem\n",
			want: map[string]string{"log.retention.hours": "1", "message.max.bytes": "5000"}, listen: "127.0.0.1:9999", filesDir: "/etc/mirrord/pem"},
		{name: "a flag wins", file: "message.max.bytes=5000\ntransaction.max.timeout.ms=1000\n", args: []string{"--message-max-bytes", "7000"},
			want: map[string]string{"message.max.bytes": "7000", "transaction.max.timeout.ms": "1000"}, listen: "127.0.0.1:9092"},
		{name: "--listen wins", file: "listeners=PLAINTEXT://127.0.0.1:9999\n", args: []string{"--listen", "127.0.0.1:7"}, want: map[string]string{}, listen: "127.0.0.1:7"},
		{name: "two data directories", file: "log.dirs=/a,/b\n", err: "one data directory"},
		{name: "file cache bounds", file: "log.open.files.max=500\nlog.index.cache.max.bytes=1048576\n", want: map[string]string{}, listen: "127.0.0.1:9092",
			openFiles: 500, indexCache: 1 << 20},
		{name: "no open files", file: "log.open.files.max=0\n", err: "log.open.files.max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readServeConfig(writeServerProperties(t, tc.file), serveTestFlags(t, tc.args...))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%v, want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.props) != len(tc.want) || len(got.listeners) != 1 || got.listeners[0].address != tc.listen || got.mirrorConfigFilesDir != tc.filesDir ||
				got.openFilesMax != tc.openFiles || got.indexCacheBytesMax != tc.indexCache {
				t.Fatalf("%+v, want props %v listening on %q", got, tc.want, tc.listen)
			}
			for k, v := range tc.want {
				if got.props[k] != v {
					t.Fatalf("%s=%q, want %q", k, got.props[k], v)
				}
			}
			cfg := engine.NodeConfig{Log: logstore.DefaultConfig()}
			if err := cfg.ApplyServerProperties(got.props); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// wantListener is what a test expects of one listener.
type wantListener struct {
	name, address, advertised string
	protocol                  auth.SecurityProtocol
	clientAuth                tls.ClientAuthType
}

func TestServeListeners(t *testing.T) {
	pki := mirrordtest.NewPKI(t, "test CA")
	node := pki.Issue("node", pkix.Name{CommonName: "node"}, "127.0.0.1").Keystore
	trust := pki.Truststore
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		name, file string
		args       []string
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
		{name: "flags", args: []string{"--ssl-listen", "127.0.0.1:9093", "--ssl-keystore", node, "--ssl-truststore", trust, "--ssl-client-auth", "required", "--advertise", "h:1"},
			want: []wantListener{{name: "PLAINTEXT", address: "127.0.0.1:9092", advertised: "h:1", protocol: auth.Plaintext}, {name: "SSL", address: "127.0.0.1:9093", protocol: auth.SSL, clientAuth: tls.RequireAndVerifyClientCert}}},
		{name: "a flag over the file", file: "listeners=SSL://127.0.0.1:9093\nssl.keystore.location=" + missing + "\n", args: []string{"--ssl-keystore", node},
			want: []wantListener{{name: "SSL", address: "127.0.0.1:9093", protocol: auth.SSL}}},
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
			got, err := readServeConfig(writeServerProperties(t, tc.file), serveTestFlags(t, tc.args...))
			if tc.err != "" {
				if !errors.Is(err, ErrListenerConfig) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%v, want ErrListenerConfig saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.props) != 0 {
				t.Fatalf("left in the properties: %v", got.props)
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
// (serve_sasl.go gives it its mechanisms).
func TestServeListenersRefused(t *testing.T) {
	got, err := readServeConfig(writeServerProperties(t, "ssl.cipher.suites=TLS_AES_128_GCM_SHA256\n"), serveTestFlags(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.NodeConfig{Log: logstore.DefaultConfig()}
	if err := cfg.ApplyServerProperties(got.props); !errors.Is(err, broker.ErrServerProperty) || !strings.Contains(err.Error(), "ssl.cipher.suites") {
		t.Fatalf("%v, want ssl.cipher.suites refused", err)
	}
	got, err = readServeConfig(writeServerProperties(t, "listeners=SASL_PLAINTEXT://127.0.0.1:9093\n"), serveTestFlags(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.listeners) != 1 || got.listeners[0].Protocol != auth.SASLPlaintext {
		t.Fatalf("listeners %+v, want one SASL_PLAINTEXT", got.listeners)
	}
}
