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
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/mirrordtest"
	"github.com/mirrord/mirrord/netio"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	processLogTailSize = 32 << 10 // bytes of the log printed on failure
	// clockTicksPerSecond is USER_HZ, the unit of utime and stime in
	// /proc/<pid>/stat: 100 on every Linux architecture Go supports.
	clockTicksPerSecond = 100
)

// mirrordBuild is the mirrord binary of this test binary, built on first
// use; TestMain removes it.
var mirrordBuild mirrordtest.Binary

func TestMain(m *testing.M) {
	code := m.Run()
	mirrordBuild.Remove()
	os.Exit(code)
}

// mirrordBinary returns the path of a mirrord built from this module,
// building it the first time.
func mirrordBinary(tb testing.TB) string {
	tb.Helper()
	path, err := mirrordBuild.Path()
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// mirrordProcess is one `mirrord serve` child (mirrordtest.Server) on a
// loopback port; its methods fail the test on an error.
type mirrordProcess struct {
	tb   testing.TB
	addr string
	proc *mirrordtest.Server
}

// startMirrord starts `mirrord serve` on dataDir, args added to its
// command line, and waits until it answers ApiVersions. The child is
// killed when the test ends (and by the kernel if this process dies
// first).
func startMirrord(tb testing.TB, dataDir string, args ...string) *mirrordProcess {
	tb.Helper()
	p := &mirrordProcess{tb: tb, proc: &mirrordtest.Server{Binary: mirrordBinary(tb), DataDir: dataDir, LogPath: dataDir + ".log", Args: args}}
	tb.Cleanup(p.checkLog)
	tb.Cleanup(p.kill) // runs first (cleanups are last in, first out)
	if err := p.proc.Start(); err != nil {
		tb.Fatalf("mirrord on %s: %v", dataDir, err)
	}
	p.addr = p.proc.Addr()
	return p
}

// client returns a kgo client of the child that also speaks the mirror
// admin RPCs, with opts besides; the caller closes it.
func (p *mirrordProcess) client(opts ...kgo.Opt) *kgo.Client {
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(p.addr), kgo.MaxVersions(netio.MirrorClientVersions())}, opts...)...)
	if err != nil {
		p.tb.Fatal(err)
	}
	return client
}

// cpu is the child's CPU time so far, user and system, all threads.
func (p *mirrordProcess) cpu() time.Duration {
	p.tb.Helper()
	cpu, err := processCPUOf(p.proc.Pid())
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
	if err := p.proc.Stop(); err != nil {
		p.tb.Fatalf("mirrord: stop: %v", err)
	}
}

// kill ends the child if it still runs.
func (p *mirrordProcess) kill() { p.proc.Close() }

// checkLog fails the test on a race report in the child's log, and
// prints the log's tail when the test failed.
func (p *mirrordProcess) checkLog() {
	race, err := p.proc.RaceReported()
	if err != nil {
		p.tb.Errorf("mirrord log: %v", err)
		return
	}
	if race {
		p.tb.Errorf("mirrord on %s: the race detector reported a data race (log below)", p.addr)
	}
	if !p.tb.Failed() {
		return
	}
	tail, err := p.proc.LogTail(processLogTailSize)
	if err != nil {
		p.tb.Errorf("mirrord log: %v", err)
		return
	}
	p.tb.Logf("mirrord on %s, log %s (tail):\n%s", p.addr, p.proc.LogPath, tail)
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
