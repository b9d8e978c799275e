package mirrordtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	// etcdName is the member's name (--name), and its one entry in
	// --initial-cluster.
	etcdName = "mirrordtest"
	// etcdHeartbeatMillis and etcdElectionTimeoutMillis are a fifth of
	// etcd's defaults (100, 1000): a restarted single member waits an
	// election timeout before it leads and serves, and has no follower
	// whose heartbeats a loaded machine could delay.
	etcdHeartbeatMillis       = "50"
	etcdElectionTimeoutMillis = "250"
	// etcdHealthBytesMax bounds the /health answer read.
	etcdHealthBytesMax = 4096
	// etcdLogTailBytes is how much of the log a failed test prints.
	etcdLogTailBytes = 8192
)

// Etcd is one single-member etcd process for a test: the binary Tool finds
// ($MIRRORD_ETCD, .cache/bin/etcd written by scripts/install-etcd.sh, or
// PATH), a data directory in t.TempDir() and two loopback ports (client
// and peer) that every start reuses, so Stop then Start is "etcd
// unavailable for a while" to its clients: the same endpoint, the same
// keys and revisions. Methods are for one goroutine at a time.
type Etcd struct {
	binary     string
	dataDir    string
	logPath    string
	clientAddr string // host:port of the client URL (Endpoints)
	peerAddr   string // host:port of the peer URL

	runs   int
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has been waited for
	err    error         // the Wait result, valid once exited is closed
}

// StartEtcd starts an etcd for t and waits until it serves (ReadyWait);
// t.Cleanup kills it, and a failed test gets the end of its log. Without
// an etcd binary the test fails under CI=true and skips otherwise (Tool).
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	binary := Tool(t, "etcd", "MIRRORD_ETCD", "scripts/install-etcd.sh")
	dir := t.TempDir()
	e := &Etcd{binary: binary, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "etcd.log")}
	t.Cleanup(func() {
		e.Close()
		if t.Failed() {
			if tail, err := logTail(e.logPath, etcdLogTailBytes); err == nil {
				t.Logf("etcd log (end):\n%s", tail)
			}
		}
	})
	if err := e.startFresh(); err != nil {
		t.Fatal(err)
	}
	return e
}

// startFresh is the first start: free ports, StartTries pairs of them, as
// a port can be taken between the probe and etcd's bind. The data
// directory is removed before each try (etcd binds before it writes it).
func (e *Etcd) startFresh() error {
	var errs []error
	for range StartTries {
		if err := e.pickAddresses(); err != nil {
			return err
		}
		if err := os.RemoveAll(e.dataDir); err != nil {
			return fmt.Errorf("mirrordtest: etcd data directory: %w", err)
		}
		err := e.Start()
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if !errors.Is(err, errExited) {
			break // running but not healthy: other ports would not help
		}
	}
	return fmt.Errorf("mirrordtest: etcd did not start after %d tries: %w", StartTries, errors.Join(errs...))
}

// pickAddresses takes two free loopback addresses, distinct as the first
// is held open while the second is taken.
func (e *Etcd) pickAddresses() error {
	client, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("mirrordtest: free port: %w", err)
	}
	defer client.Close()
	e.clientAddr = client.Addr().String()
	e.peerAddr, err = FreeAddress()
	return err
}

// Endpoints are the client endpoints, host:port, for clientv3.Config and
// --etcd-endpoints. They do not change across Stop and Start.
func (e *Etcd) Endpoints() []string { return []string{e.clientAddr} }

// DataDir is etcd's --data-dir; it outlives each run.
func (e *Etcd) DataDir() string { return e.dataDir }

// Start runs etcd again on its data directory and ports and waits until
// it answers /health with "true" (ReadyWait). It fails when it is running,
// or when a port has been taken meanwhile (the process exits: errExited).
func (e *Etcd) Start() error {
	if e.Running() {
		return errors.New("mirrordtest: etcd: start while running")
	}
	e.runs++
	logFile, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("mirrordtest: etcd: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	fmt.Fprintf(logFile, "=== mirrordtest: etcd start %d, client %s, peer %s, at %s\n", e.runs, e.clientAddr, e.peerAddr, time.Now().Format(time.RFC3339Nano))
	clientURL, peerURL := "http://"+e.clientAddr, "http://"+e.peerAddr
	cmd := exec.Command(e.binary,
		"--name", etcdName,
		"--data-dir", e.dataDir,
		"--listen-client-urls", clientURL,
		"--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", etcdName+"="+peerURL,
		"--initial-cluster-state", "new",
		"--heartbeat-interval", etcdHeartbeatMillis,
		"--election-timeout", etcdElectionTimeoutMillis,
		"--logger", "zap",
		"--log-outputs", "stderr",
	)
	cmd.Env = etcdEnvironment()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // no orphans when the test dies
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mirrordtest: etcd: %w", err)
	}
	exited := make(chan struct{})
	e.cmd, e.exited = cmd, exited
	go func() {
		e.err = cmd.Wait()
		close(exited)
	}()
	if err := e.waitReady(); err != nil {
		e.Close()
		return fmt.Errorf("mirrordtest: etcd on %s: %w", e.clientAddr, err)
	}
	return nil
}

// etcdEnvironment is this process's environment without ETCD_* variables:
// etcd reads its flags from them too, and the command line says it all.
func etcdEnvironment() []string {
	var env []string
	for _, variable := range os.Environ() {
		if !strings.HasPrefix(variable, "ETCD_") {
			env = append(env, variable)
		}
	}
	return env
}

// waitReady polls /health until it says "true", the process exits or
// ReadyWait passes.
func (e *Etcd) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), ReadyWait)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var lastErr error
	for {
		if lastErr = etcdHealthy(ctx, client, e.clientAddr); lastErr == nil {
			return nil
		}
		select {
		case <-e.exited:
			return fmt.Errorf("%w before serving: %v", errExited, e.err)
		case <-ctx.Done():
			return fmt.Errorf("not healthy after %v: %v", ReadyWait, lastErr)
		case <-ticker.C:
		}
	}
}

// etcdHealthy asks GET /health, which etcd answers {"health":"true"} once
// the member has a leader and serves reads.
func etcdHealthy(ctx context.Context, client *http.Client, addr string) error {
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
	if err != nil {
		return err
	}
	response, err := client.Do(request)
	if err != nil {
		return err
	}
	defer response.Body.Close()
	body, err := io.ReadAll(io.LimitReader(response.Body, etcdHealthBytesMax))
	if err != nil {
		return err
	}
	if response.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("/health: %s: %s", response.Status, body)
	}
	return nil
}

// Running reports whether the process is alive.
func (e *Etcd) Running() bool {
	if e.exited == nil {
		return false
	}
	select {
	case <-e.exited:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM and waits up to StopWait for etcd to exit (by the
// signal, or with status 0); after that it kills it and fails. Clients see
// connection refused until the next Start.
func (e *Etcd) Stop() error {
	if !e.Running() {
		return fmt.Errorf("%w (last exit: %v)", ErrNotRunning, e.err)
	}
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("mirrordtest: etcd: SIGTERM: %w", err)
	}
	timer := time.NewTimer(StopWait)
	defer timer.Stop()
	select {
	case <-e.exited:
	case <-timer.C:
		e.Close()
		return fmt.Errorf("mirrordtest: etcd still running %v after SIGTERM", StopWait)
	}
	var exit *exec.ExitError
	if e.err != nil && !(errors.As(e.err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM) {
		return fmt.Errorf("mirrordtest: etcd exit after SIGTERM: %v (want status 0 or the signal)", e.err)
	}
	return nil
}

// Close kills the process if it still runs and waits for it.
func (e *Etcd) Close() {
	if !e.Running() {
		return
	}
	e.cmd.Process.Kill()
	<-e.exited // SIGKILL cannot be ignored: Wait returns
}

// LogTail is the end of the log of every run, at most maxBytes from a
// line start.
func (e *Etcd) LogTail(maxBytes int) (string, error) { return logTail(e.logPath, maxBytes) }
