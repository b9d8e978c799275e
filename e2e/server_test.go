package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	serverReadyWait   = 20 * time.Second // start (and recovery) to a served ApiVersions
	serverStopWait    = 20 * time.Second // SIGTERM to exit
	serverStartTries  = 3                // ports tried when a start fails
	serverLogTailSize = 64 << 10         // bytes of the log printed on failure
)

// server is one `mirrord serve` process over a data directory that
// outlives it: kill or stop it, then start it again on the same directory.
// Its log (every run, with a marker line per start) goes to one file that
// is printed when the test fails.
type server struct {
	t       *testing.T
	dataDir string
	logPath string
	addr    string // host:port of the current (or last) run
	runs    int
	env     []string // added to the environment of the next starts

	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has been waited for
	err    error         // the Wait result, valid once exited is closed
}

// startServer starts mirrord on a fresh data directory.
func startServer(t *testing.T) *server {
	t.Helper()
	dir := t.TempDir()
	s := &server{t: t, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "mirrord.log")}
	t.Cleanup(s.printLogOnFailure)
	t.Cleanup(s.checkNoRace)
	t.Cleanup(s.killQuietly) // runs first (cleanups are last in, first out)
	s.start()
	return s
}

// start runs the process on the last address (a free one the first time,
// or when the last is taken) and waits until it answers ApiVersions.
func (s *server) start() {
	s.t.Helper()
	if s.running() {
		s.t.Fatalf("mirrord: start while running")
	}
	addr := s.addr
	var lastErr error
	for range serverStartTries {
		if addr == "" {
			addr = freeAddress(s.t)
		}
		if lastErr = s.startOn(addr); lastErr == nil {
			s.addr = addr
			return
		}
		s.t.Logf("mirrord did not start on %s: %v", addr, lastErr)
		addr = ""
	}
	s.t.Fatalf("mirrord did not start after %d tries: %v", serverStartTries, lastErr)
}

func (s *server) startOn(addr string) error {
	s.runs++
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own descriptor
	fmt.Fprintf(logFile, "=== e2e: start %d on %s at %s\n", s.runs, addr, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(mirrordBinary, "serve", "--data-dir", s.dataDir, "--listen", addr)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() {
		s.err = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(addr); err != nil {
		s.killQuietly()
		return err
	}
	return nil
}

// waitReady polls ApiVersions until it is answered, the process exits or
// the deadline passes.
func (s *server) waitReady(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), serverReadyWait)
	defer cancel()
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	var lastErr error
	for {
		if lastErr = probeAPIVersions(ctx, addr); lastErr == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("exited before serving: %v", s.err)
		case <-ctx.Done():
			return fmt.Errorf("not serving after %v: %v", serverReadyWait, lastErr)
		case <-ticker.C:
		}
	}
}

func probeAPIVersions(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := dialRaw(ctx, addr)
	if err != nil {
		return err
	}
	defer c.close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	resp, err := c.request(ctx, req)
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.ApiVersionsResponse).ErrorCode; code != 0 {
		return fmt.Errorf("ApiVersions v0: error code %d", code)
	}
	return nil
}

func (s *server) running() bool {
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// kill ends the process with SIGKILL, as a crash would.
func (s *server) kill() {
	s.t.Helper()
	if !s.running() {
		s.t.Fatalf("mirrord: kill while not running (last exit: %v)", s.err)
	}
	s.killQuietly()
	var exit *exec.ExitError
	if !errors.As(s.err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		s.t.Fatalf("mirrord: after SIGKILL: %v", s.err)
	}
}

func (s *server) killQuietly() {
	if !s.running() {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited // Kill cannot be ignored: Wait returns
}

// stop sends SIGTERM and requires a clean exit (status 0) in time.
func (s *server) stop() {
	s.t.Helper()
	if !s.running() {
		s.t.Fatalf("mirrord: stop while not running (last exit: %v)", s.err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatalf("mirrord: SIGTERM: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(serverStopWait):
		s.killQuietly()
		s.t.Fatalf("mirrord: still running %v after SIGTERM", serverStopWait)
	}
	if s.err != nil {
		s.t.Fatalf("mirrord: exit after SIGTERM: %v (want status 0)", s.err)
	}
}

// checkNoRace fails the test when the log holds a race detector report.
func (s *server) checkNoRace() {
	data, err := os.ReadFile(s.logPath)
	if err == nil && bytes.Contains(data, []byte("WARNING: DATA RACE")) {
		s.t.Errorf("mirrord: the race detector reported a data race (log below)")
	}
}

func (s *server) printLogOnFailure() {
	if !s.t.Failed() {
		return
	}
	data, err := os.ReadFile(s.logPath)
	if err != nil {
		s.t.Logf("mirrord log: %v", err)
		return
	}
	if len(data) > serverLogTailSize {
		data = data[len(data)-serverLogTailSize:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
		s.t.Logf("mirrord log (last %d bytes of %s):\n%s", len(data), s.logPath, data)
		return
	}
	s.t.Logf("mirrord log (%s):\n%s", s.logPath, data)
}

// freeAddress returns a loopback address nothing listens on right now.
func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
