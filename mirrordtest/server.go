package mirrordtest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// ReadyWait bounds a start (and the recovery it runs) until the
	// server answers ApiVersions: generous, as a loaded machine's restart
	// recovers its logs slowly, and a start that outlives it would move to
	// another address.
	ReadyWait = 60 * time.Second
	// StopWait bounds SIGTERM to exit; SIGKILL follows.
	StopWait = 20 * time.Second
	// StartTries is how many addresses a start tries: a free port can be
	// taken between the probe and the server's bind.
	StartTries = 3
	// pollInterval is how often a start probes the server.
	pollInterval = 10 * time.Millisecond
	// raceReport starts every report of the race detector.
	raceReport = "WARNING: DATA RACE"
)

// mirrordPackage is the command a Binary builds.
const mirrordPackage = "github.com/mirrord/mirrord/cmd/mirrord"

// ErrNotRunning is returned by Kill and Stop of a server that does not run.
var ErrNotRunning = errors.New("mirrordtest: not running")

// Build builds cmd/mirrord to path, with the race detector when this binary
// runs under it (RaceEnabled). It runs the go command of PATH in the
// current directory, which must be inside the module.
func Build(path string) error { return build(path, RaceEnabled) }

func build(path string, race bool) error {
	args := []string{"build", "-o", path}
	if race {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, mirrordPackage)...)
	if output, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("mirrordtest: go build cmd/mirrord: %w\n%s", err, output)
	}
	return nil
}

// Binary is a mirrord built on first use into a temporary directory,
// which Remove deletes. The zero value is ready; it is safe for
// concurrent use.
type Binary struct {
	// NoRace builds without the race detector whatever this binary runs
	// under: a test measuring the process's memory measures the binary
	// `make build` makes.
	NoRace bool

	once sync.Once
	dir  string
	path string
	err  error
}

// Path builds mirrord the first time and returns its path, or the error
// of that build.
func (b *Binary) Path() (string, error) {
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "mirrord-test-")
		if b.err != nil {
			b.err = fmt.Errorf("mirrordtest: %w", b.err)
			return
		}
		b.path = filepath.Join(b.dir, "mirrord")
		b.err = build(b.path, RaceEnabled && !b.NoRace)
	})
	return b.path, b.err
}

// Remove deletes the built binary, if any.
func (b *Binary) Remove() error {
	if b.dir == "" {
		return nil
	}
	return os.RemoveAll(b.dir)
}

// Server is one `mirrord serve` process over a data directory that
// outlives it. Set the exported fields before Start; Env may change
// between starts. Methods are for one goroutine at a time.
type Server struct {
	Binary  string   // the mirrord to run
	DataDir string   // --data-dir
	LogPath string   // standard output and error of every run, appended
	Env     []string // added to the environment of the next starts
	Args    []string // appended to the serve command line of the next starts
	// ReadyWait bounds each start when set (0: the package's ReadyWait),
	// for a node that opens many partitions.
	ReadyWait time.Duration

	addr   string // host:port of the current (or last) run
	runs   int
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has been waited for
	err    error         // the Wait result, valid once exited is closed
}

// Start runs the server on its last address (a free one the first time,
// or when the last is taken; StartTries addresses in all) and waits until
// it answers ApiVersions.
func (s *Server) Start() error {
	if s.Running() {
		return errors.New("mirrordtest: start while running")
	}
	addr := s.addr
	var errs []error
	for range StartTries {
		if addr == "" {
			var err error
			if addr, err = FreeAddress(); err != nil {
				return err
			}
		}
		err := s.startOn(addr)
		if err == nil {
			s.addr = addr
			return nil
		}
		errs = append(errs, fmt.Errorf("on %s: %w", addr, err))
		if !errors.Is(err, errExited) {
			break // running but slow: another address would not help, and clients expect this one
		}
		addr = ""
	}
	return fmt.Errorf("mirrordtest: mirrord did not start after %d tries: %w", StartTries, errors.Join(errs...))
}

// errExited is a start whose process exited before it served (its port
// taken, say): the start tries another address.
var errExited = errors.New("exited")

func (s *Server) startOn(addr string) error {
	s.runs++
	logFile, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own descriptor
	fmt.Fprintf(logFile, "=== mirrordtest: start %d on %s at %s\n", s.runs, addr, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(s.Binary, append([]string{"serve", "--data-dir", s.DataDir, "--listen", addr}, s.Args...)...)
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // no orphans when the test dies
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	s.cmd, s.exited = cmd, exited
	go func() {
		s.err = cmd.Wait()
		close(exited)
	}()
	if err := s.waitReady(addr); err != nil {
		s.Close()
		return err
	}
	return nil
}

// waitReady polls ApiVersions until it is answered, the process exits or
// ReadyWait passes.
func (s *Server) waitReady(addr string) error {
	wait := cmp.Or(s.ReadyWait, ReadyWait)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var lastErr error
	for {
		if lastErr = Probe(ctx, addr); lastErr == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%w before serving: %v", errExited, s.err)
		case <-ctx.Done():
			return fmt.Errorf("not serving after %v: %v", wait, lastErr)
		case <-ticker.C:
		}
	}
}

// Probe sends one ApiVersions to addr on a fresh client and requires an
// answer without error.
func Probe(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	conn.Close() // listening; now a real request through a client
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer client.Close()
	resp, err := client.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.ApiVersionsResponse).ErrorCode; code != 0 {
		return fmt.Errorf("ApiVersions: error code %d", code)
	}
	return nil
}

// Addr is the host:port of the current (or last) run.
func (s *Server) Addr() string { return s.addr }

// Pid is the process ID of the current (or last) run.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Running reports whether the process is alive.
func (s *Server) Running() bool {
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

// Exited is closed once the current (or last) run has exited; nil before
// the first start.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// ExitErr is how the last run ended (exec.Cmd.Wait), once Exited is closed.
func (s *Server) ExitErr() error { return s.err }

// KilledBySignal reports whether the last run ended by sig.
func (s *Server) KilledBySignal(sig syscall.Signal) bool {
	var exit *exec.ExitError
	return errors.As(s.err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == sig
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() error {
	if !s.Running() {
		return fmt.Errorf("%w (last exit: %v)", ErrNotRunning, s.err)
	}
	s.Close()
	if !s.KilledBySignal(syscall.SIGKILL) {
		return fmt.Errorf("mirrordtest: after SIGKILL: %v", s.err)
	}
	return nil
}

// Close kills the process if it still runs and waits for it.
func (s *Server) Close() {
	if !s.Running() {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited // SIGKILL cannot be ignored: Wait returns
}

// Stop sends SIGTERM and requires a clean exit (status 0) within
// StopWait; after that it kills the process.
func (s *Server) Stop() error {
	if !s.Running() {
		return fmt.Errorf("%w (last exit: %v)", ErrNotRunning, s.err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("mirrordtest: SIGTERM: %w", err)
	}
	timer := time.NewTimer(StopWait)
	defer timer.Stop()
	select {
	case <-s.exited:
	case <-timer.C:
		s.Close()
		return fmt.Errorf("mirrordtest: still running %v after SIGTERM", StopWait)
	}
	if s.err != nil {
		return fmt.Errorf("mirrordtest: exit after SIGTERM: %v (want status 0)", s.err)
	}
	return nil
}

// RaceReported reports whether the log holds a race detector report.
func (s *Server) RaceReported() (bool, error) {
	data, err := os.ReadFile(s.LogPath)
	if err != nil {
		return false, err
	}
	return bytes.Contains(data, []byte(raceReport)), nil
}

// LogTail is the end of the log of every run, at most maxBytes from a
// line start.
func (s *Server) LogTail(maxBytes int) (string, error) { return logTail(s.LogPath, maxBytes) }

// logTail is the end of the file at path, at most maxBytes from a line
// start.
func logTail(path string, maxBytes int) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if len(data) > maxBytes {
		data = data[len(data)-maxBytes:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return string(data), nil
}

// FreeAddress returns a loopback address nothing listens on right now.
func FreeAddress() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("mirrordtest: free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
