package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mirrord/mirrord/mirrordtest"
)

// serverLogTailSize is the bytes of the log printed on failure.
const serverLogTailSize = 64 << 10

// server is one `mirrord serve` process (mirrordtest.Server) over a data
// directory that outlives it: kill or stop it, then start it again on the
// same directory. Its log (every run, with a marker line per start) goes
// to one file that is printed when the test fails. The methods fail the
// test on an error.
type server struct {
	t       *testing.T
	proc    *mirrordtest.Server
	dataDir string
	addr    string   // host:port of the current (or last) run
	env     []string // added to the environment of the next starts
}

// startServer starts mirrord on a fresh data directory, with args
// appended to the serve command line of every start.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	return startServerOf(t, mirrordBinary, args...)
}

// noRaceBinary is mirrord built without the race detector, as `make
// build` builds it (MIRRORD_E2E_BINARY, when set, names one), removed at
// the end of the test.
func noRaceBinary(t *testing.T) string {
	t.Helper()
	if binary := os.Getenv("MIRRORD_E2E_BINARY"); binary != "" {
		return binary
	}
	build := &mirrordtest.Binary{NoRace: true}
	t.Cleanup(func() { build.Remove() })
	binary, err := build.Path()
	if err != nil {
		t.Fatal(err)
	}
	return binary
}

// startServerOf is startServer running the mirrord at binary.
func startServerOf(t *testing.T, binary string, args ...string) *server {
	t.Helper()
	dir := t.TempDir()
	s := &server{t: t, dataDir: filepath.Join(dir, "data")}
	s.proc = &mirrordtest.Server{Binary: binary, DataDir: s.dataDir, LogPath: filepath.Join(dir, "mirrord.log"), Args: args}
	t.Cleanup(s.printLogOnFailure)
	t.Cleanup(s.checkNoRace)
	t.Cleanup(s.proc.Close) // runs first (cleanups are last in, first out)
	s.start()
	return s
}

// start runs the process on the last address (a free one the first time,
// or when the last is taken) and waits until it answers ApiVersions.
func (s *server) start() {
	s.t.Helper()
	s.proc.Env = s.env
	if err := s.proc.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.addr = s.proc.Addr()
}

// kill ends the process with SIGKILL, as a crash would.
func (s *server) kill() {
	s.t.Helper()
	if err := s.proc.Kill(); err != nil {
		s.t.Fatalf("mirrord: kill: %v", err)
	}
}

// stop sends SIGTERM and requires a clean exit (status 0) in time.
func (s *server) stop() {
	s.t.Helper()
	if err := s.proc.Stop(); err != nil {
		s.t.Fatalf("mirrord: stop: %v", err)
	}
}

// checkNoRace fails the test when the log holds a race detector report.
func (s *server) checkNoRace() {
	if race, _ := s.proc.RaceReported(); race {
		s.t.Errorf("mirrord: the race detector reported a data race (log below)")
	}
}

func (s *server) printLogOnFailure() {
	if !s.t.Failed() {
		return
	}
	tail, err := s.proc.LogTail(serverLogTailSize)
	if err != nil {
		s.t.Logf("mirrord log: %v", err)
		return
	}
	s.t.Logf("mirrord log (last %d bytes of %s):\n%s", len(tail), s.proc.LogPath, tail)
}

// freeAddress returns a loopback address nothing listens on right now.
func freeAddress(t *testing.T) string {
	t.Helper()
	addr, err := mirrordtest.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
