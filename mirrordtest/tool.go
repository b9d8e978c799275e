package mirrordtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Tool returns the path of the external tool a test runs (kcat, chromium,
// promtool): $envVar when set, then .cache/bin/<name> in the module's root
// (written by installScript, which `make tools` runs), then name and each
// of alsoOnPath on PATH. Missing, it fails the test under CI=true and skips
// it otherwise, with a message naming envVar and installScript.
func Tool(t testing.TB, name, envVar, installScript string, alsoOnPath ...string) string {
	t.Helper()
	if path := os.Getenv(envVar); path != "" {
		return path
	}
	if root, ok := moduleRoot(); ok {
		cached := filepath.Join(root, ".cache", "bin", name)
		if info, err := os.Stat(cached); err == nil && !info.IsDir() {
			return cached
		}
	}
	for _, command := range append([]string{name}, alsoOnPath...) {
		if path, err := exec.LookPath(command); err == nil {
			return path
		}
	}
	message := name + " not found: set " + envVar + ", run `make tools` (" + installScript + "), or put " + name + " on PATH"
	if os.Getenv("CI") == "true" {
		t.Fatal(message)
	}
	t.Skip(message)
	return ""
}

// moduleRoot returns the nearest directory at or above the working
// directory (a test's package directory) that holds go.mod.
func moduleRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for range 16 { // bounded walk up to the repository root
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", false
}
