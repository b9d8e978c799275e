package bench

// mirrord as a separate process: built once per test binary (lazily, so a
// run of BenchmarkServe alone builds nothing), started with `mirrord serve`
// on a free loopback port and a data directory, and measured from outside
// (/proc/<pid>/stat). Under -race the child is built with the race
// detector too and a race report in its log fails the test, as in e2e.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mirrord/mirrord/netio"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	processReadyWait   = 20 * time.Second // start to a served ApiVersions
	processStopWait    = 20 * time.Second // SIGTERM to exit
	processLogTailSize = 32 << 10         // bytes of the log printed on failure
	// clockTicksPerSecond is USER_HZ, the unit of utime and stime in
	// /proc/<pid>/stat: 100 on every Linux architecture Go supports.
	clockTicksPerSecond = 100
)

// mirrordBuild is the mirrord binary of this test binary, built on first
// use into buildDir, which TestMain removes.
var mirrordBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if mirrordBuild.dir != "" {
		os.RemoveAll(mirrordBuild.dir)
	}
	os.Exit(code)
}

// raceEnabled reports whether this test binary runs under the race
// detector (the child is then built with it too).
func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, setting := range info.Settings {
		if setting.Key == "-race" {
			return setting.Value == "true"
		}
	}
	return false
}

// mirrordBinary returns the path of a mirrord built from this module,
// building it the first time.
func mirrordBinary(tb testing.TB) string {
	tb.Helper()
	mirrordBuild.once.Do(func() {
		mirrordBuild.dir, mirrordBuild.err = os.MkdirTemp("", "mirrord-bench-")
		if mirrordBuild.err != nil {
			return
		}
		mirrordBuild.path = filepath.Join(mirrordBuild.dir, "mirrord")
		args := []string{"build", "-o", mirrordBuild.path}
		if raceEnabled() {
			args = append(args, "-race")
		}
		build := exec.Command("go", append(args, "github.com/mirrord/mirrord/cmd/mirrord")...)
		if output, err := build.CombinedOutput(); err != nil {
			mirrordBuild.err = fmt.Errorf("go build cmd/mirrord: %w\n%s", err, output)
		}
	})
	if mirrordBuild.err != nil {
		tb.Fatal(mirrordBuild.err)
	}
	return mirrordBuild.path
}

// mirrordProcess is one `mirrord serve` child on a loopback port.
type mirrordProcess struct {
	tb      testing.TB
	addr    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the child has been waited for
	err     error         // the Wait result, valid once exited is closed
}

// startMirrord starts `mirrord serve` on dataDir and waits until it
// answers ApiVersions. The child is killed when the test ends (and by
// the kernel if this process dies first).
func startMirrord(tb testing.TB, dataDir string) *mirrordProcess {
	tb.Helper()
	addr := freeAddress(tb)
	p := &mirrordProcess{tb: tb, addr: addr, logPath: dataDir + ".log", exited: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer logFile.Close() // the child has its own descriptor
	p.cmd = exec.Command(mirrordBinary(tb), "serve", "--data-dir", dataDir, "--listen", addr)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	tb.Cleanup(p.checkLog)
	tb.Cleanup(p.kill) // runs first (cleanups are last in, first out)
	if err := p.waitReady(); err != nil {
		tb.Fatalf("mirrord on %s: %v", addr, err)
	}
	return p
}

// waitReady polls ApiVersions until it is answered, the child exits or
// the deadline passes.
func (p *mirrordProcess) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), processReadyWait)
	defer cancel()
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	var lastErr error
	for {
		if lastErr = probe(ctx, p.addr); lastErr == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("exited before serving: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("not serving after %v: %v", processReadyWait, lastErr)
		case <-ticker.C:
		}
	}
}

// probe sends one ApiVersions on a fresh connection.
func probe(ctx context.Context, addr string) error {
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
	_, err = client.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	return err
}

// client returns a kgo client of the child that also speaks the mirror
// admin RPCs; the caller closes it.
func (p *mirrordProcess) client() *kgo.Client {
	client, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.MaxVersions(netio.MirrorClientVersions()))
	if err != nil {
		p.tb.Fatal(err)
	}
	return client
}

// cpu is the child's CPU time so far, user and system, all threads.
func (p *mirrordProcess) cpu() time.Duration {
	p.tb.Helper()
	cpu, err := processCPUOf(p.cmd.Process.Pid)
	if err != nil {
		p.tb.Fatal(err)
	}
	return cpu
}

// processCPUOf reads utime + stime of a live process from /proc/<pid>/stat.
func processCPUOf(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is parenthesized and may hold spaces:
	// the fields after its closing parenthesis start at field 3 (state).
	closing := bytes.LastIndexByte(data, ')')
	if closing < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(data[closing+1:]))
	const utimeField, stimeField = 14 - 3, 15 - 3
	if len(fields) <= stimeField {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	var ticks int64
	for _, field := range []int{utimeField, stimeField} {
		n, err := strconv.ParseInt(fields[field], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat field %d: %w", pid, field+3, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicksPerSecond, nil
}

// stop sends SIGTERM and requires a clean exit in time.
func (p *mirrordProcess) stop() {
	p.tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.tb.Fatalf("mirrord: SIGTERM: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(processStopWait):
		p.kill()
		p.tb.Fatalf("mirrord: still running %v after SIGTERM", processStopWait)
	}
	if p.err != nil {
		p.tb.Fatalf("mirrord: exit after SIGTERM: %v (want status 0)", p.err)
	}
}

// kill ends the child if it still runs.
func (p *mirrordProcess) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Kill()
	<-p.exited // SIGKILL cannot be ignored: Wait returns
}

// checkLog fails the test on a race report in the child's log, and
// prints the log's tail when the test failed.
func (p *mirrordProcess) checkLog() {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		p.tb.Errorf("mirrord log: %v", err)
		return
	}
	if bytes.Contains(data, []byte("WARNING: DATA RACE")) {
		p.tb.Errorf("mirrord on %s: the race detector reported a data race (log below)", p.addr)
	}
	if !p.tb.Failed() {
		return
	}
	if len(data) > processLogTailSize {
		data = data[len(data)-processLogTailSize:]
	}
	p.tb.Logf("mirrord on %s, log %s (tail):\n%s", p.addr, p.logPath, data)
}

// freeAddress returns a loopback address nothing listens on right now.
func freeAddress(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// nodeID asks a node for its broker ID (Metadata), to send requests to it
// directly with client.Broker.
func nodeID(ctx context.Context, client *kgo.Client) (int32, error) {
	kresp, err := client.Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return 0, err
	}
	brokers := kresp.(*kmsg.MetadataResponse).Brokers
	if len(brokers) != 1 {
		return 0, errors.New("metadata: want exactly one broker")
	}
	return brokers[0].NodeID, nil
}
