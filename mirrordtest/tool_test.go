package mirrordtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records Fatal and Skip instead of ending
// the test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.fatal = args[0].(string) }
func (r *recorder) Skip(args ...any)  { r.skip = args[0].(string) }

func TestTool(t *testing.T) {
	bin := t.TempDir()
	onPath := filepath.Join(bin, "mirrord-test-tool-alias")
	if err := os.WriteFile(onPath, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	for _, tc := range []struct {
		name, env, ci     string
		also              []string
		want, fatal, skip bool
	}{
		{name: "the variable wins", env: "/from/env", want: true},
		{name: "an alias on PATH", also: []string{"mirrord-test-tool-alias"}, want: true},
		{name: "missing skips", ci: "", skip: true},
		{name: "missing fails under CI", ci: "true", fatal: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MIRRORD_TEST_TOOL", tc.env)
			t.Setenv("CI", tc.ci)
			r := &recorder{TB: t}
			got := Tool(r, "mirrord-test-tool", "MIRRORD_TEST_TOOL", "scripts/install-test-tool.sh", tc.also...)
			switch {
			case tc.env != "" && got != tc.env:
				t.Errorf("got %q, want $MIRRORD_TEST_TOOL %q", got, tc.env)
			case tc.env == "" && tc.want && got != onPath:
				t.Errorf("got %q, want %q", got, onPath)
			case !tc.want && got != "":
				t.Errorf("got %q for a missing tool", got)
			}
			gotFatal, gotSkip := r.fatal != "", r.fatal == "" && r.skip != ""
			if gotFatal != tc.fatal || gotSkip != tc.skip {
				t.Errorf("fatal %q, skip %q; want fatal %v, skip %v", r.fatal, r.skip, tc.fatal, tc.skip)
			}
			for _, message := range []string{r.fatal, r.skip} {
				if message != "" && (!strings.Contains(message, "MIRRORD_TEST_TOOL") || !strings.Contains(message, "scripts/install-test-tool.sh")) {
					t.Errorf("message %q names neither the variable nor the install script", message)
				}
			}
		})
	}
}

// TestModuleRoot: .cache/bin is looked up in the module's root, the parent
// of this package's directory.
func TestModuleRoot(t *testing.T) {
	want, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := moduleRoot(); !ok || got != want {
		t.Fatalf("moduleRoot() = %q, %v; want %q", got, ok, want)
	}
}
