package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/logstore"
)

func TestServeConfig(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		args       []string
		want       map[string]string // props after the flags
		listen     string
		filesDir   string // mirror.config.files.dir
		err        string
	}{
		{name: "file only", file: "listeners=PLAINTEXT://127.0.0.1:9999\nlog.dirs=/d\nlog.retention.hours=1\nmessage.max.bytes=5000\nmirror.config.files.dir=/etc/mirrord/pem\n",
			want: map[string]string{"log.retention.hours": "1", "message.max.bytes": "5000"}, listen: "127.0.0.1:9999", filesDir: "/etc/mirrord/pem"},
		{name: "a flag wins", file: "message.max.bytes=5000\ntransaction.max.timeout.ms=1000\n", args: []string{"--message-max-bytes", "7000"},
			want: map[string]string{"message.max.bytes": "7000", "transaction.max.timeout.ms": "1000"}},
		{name: "two listeners", file: "listeners=PLAINTEXT://a:1,SSL://a:2\n", err: "one PLAINTEXT listener"},
		{name: "two data directories", file: "log.dirs=/a,/b\n", err: "one data directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "server.properties")
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			flags := flag.NewFlagSet("serve", flag.ContinueOnError)
			flags.Int("message-max-bytes", 1, "")
			if err := flags.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got, err := readServeConfig(path, flags)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%v, want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.props) != len(tc.want) || got.listen != tc.listen || got.mirrorConfigFilesDir != tc.filesDir {
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
