package main

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// serveTestFlags declares serve's flags, as runServe does, and parses args.
func serveTestFlags(t *testing.T, args ...string) *flag.FlagSet {
	t.Helper()
	flags := flag.NewFlagSet("serve", flag.ContinueOnError)
	flags.String("listen", "127.0.0.1:9092", "")
	flags.String("advertise", "", "")
	declareListenerFlags(flags)
	declarePropertyFlags(flags)
	if err := flags.Parse(args); err != nil {
		t.Fatal(err)
	}
	return flags
}

// The flags given on the command line are set over the config file's
// keys by Kafka's names; the flags not given leave the file's keys (and
// add none of their own, so the node's defaults apply); --listen is the
// one listener of a file without listeners.
func TestServeProperties(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		args       []string
		want       map[string]string
	}{
		{name: "no file", want: map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092"}},
		{name: "a flag wins", file: "message.max.bytes=5000\ntransaction.max.timeout.ms=1000\n", args: []string{"--message-max-bytes", "7000"},
			want: map[string]string{"message.max.bytes": "7000", "transaction.max.timeout.ms": "1000", "listeners": "PLAINTEXT://127.0.0.1:9092"}},
		{name: "--listen wins", file: "listeners=PLAINTEXT://127.0.0.1:9999,SSL://127.0.0.1:9998\n", args: []string{"--listen", "127.0.0.1:7"},
			want: map[string]string{"listeners": "PLAINTEXT://127.0.0.1:7,SSL://127.0.0.1:9998"}},
		{name: "the file's listeners", file: "listeners=SSL://127.0.0.1:9998\n", want: map[string]string{"listeners": "SSL://127.0.0.1:9998"}},
		{name: "listener flags", args: []string{"--ssl-listen", "127.0.0.1:9093", "--ssl-keystore", "k.pem", "--ssl-truststore", "t.pem", "--ssl-client-auth", "required", "--advertise", "h:1"},
			want: map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093", "advertised.listeners": "PLAINTEXT://h:1",
				"ssl.keystore.location": "k.pem", "ssl.truststore.location": "t.pem", "ssl.client.auth": "required"}},
		{name: "a flag over the file's ssl", file: "listeners=SSL://127.0.0.1:9093\nssl.keystore.location=old.pem\n", args: []string{"--ssl-keystore", "new.pem"},
			want: map[string]string{"listeners": "SSL://127.0.0.1:9093", "ssl.keystore.location": "new.pem"}},
		{name: "cleaner, groups, authorizer", args: []string{"--log-cleaner-enable=false", "--log-cleaner-backoff-ms", "100", "--group-consumer-session-timeout-ms", "10000",
			"--allow-everyone-if-no-acl-found", "--super-users", "User:admin"},
			want: map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092", "log.cleaner.enable": "false", "log.cleaner.backoff.ms": "100",
				"group.consumer.session.timeout.ms": "10000", "allow.everyone.if.no.acl.found": "true", "super.users": "User:admin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.file != "" {
				path = filepath.Join(t.TempDir(), "server.properties")
				if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			flags := serveTestFlags(t, tc.args...)
			got, err := serveProperties(path, flags.Lookup("listen").Value.String(), flags)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%v, want %v", got, tc.want)
			}
		})
	}
}
