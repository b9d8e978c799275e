package mirrordtest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServerLifecycle drives one server through the uses of e2e and
// bench: start, kill -9 and restart on the same address and data, a clean
// stop, and a start that fails (the data directory is a file) with the
// log telling why.
func TestServerLifecycle(t *testing.T) {
	var build Binary
	defer build.Remove()
	binary, err := build.Path()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &Server{Binary: binary, DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "mirrord.log")}
	defer s.Close()
	if err := s.Kill(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("kill before start: %v, want ErrNotRunning", err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if err := s.Start(); err == nil {
		t.Fatal("a second start while running succeeded")
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Running() || !s.KilledBySignal(syscall.SIGKILL) {
		t.Fatalf("after kill: running %v, exit %v", s.Running(), s.ExitErr())
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr {
		t.Logf("restarted on %s, not %s (the port was taken)", s.Addr(), addr)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("stop after stop: %v, want ErrNotRunning", err)
	}
	tail, err := s.LogTail(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if starts := strings.Count(tail, "=== mirrordtest: start "); starts != 2 {
		t.Fatalf("the log holds %d start markers, want 2:\n%s", starts, tail)
	}
	if race, err := s.RaceReported(); err != nil || race {
		t.Fatalf("race reported %v, %v:\n%s", race, err, tail)
	}

	bad := &Server{Binary: binary, DataDir: filepath.Join(dir, "file"), LogPath: filepath.Join(dir, "bad.log")}
	if err := os.WriteFile(bad.DataDir, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	err = bad.Start()
	if err == nil || !strings.Contains(err.Error(), "exited before serving") {
		t.Fatalf("start on a file as data directory: %v, want exited before serving", err)
	}
	if tail, _ := bad.LogTail(200); len(tail) > 200 || strings.Count(tail, "\n") == 0 {
		t.Fatalf("log tail of %d bytes:\n%s", len(tail), tail)
	}
}
