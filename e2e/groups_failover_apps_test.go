package e2e

// The consumer applications of the group failover test
// (groups_failover_test.go), each started against an address in its own
// group, then killed as a crash would: Kafka's VerifiableConsumer (the
// Java consumer, classic protocol) auto-committing or committing after
// each poll, kcat -G (librdkafka's balanced consumer, auto-commit) and a
// franz-go group consumer (its own periodic commit). Each reports the
// offsets it consumed into a vcSeen.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// failoverCommitInterval is the auto-commit interval of the applications
// that commit on a clock (auto.commit.interval.ms).
const failoverCommitInterval = 200 * time.Millisecond

// appInstance is one running instance of an application.
type appInstance interface {
	// poll adds what the instance consumed since the last poll to seen.
	poll(t *testing.T, seen *vcSeen)
	// kill ends the instance without a last commit, as SIGKILL does.
	kill(t *testing.T)
}

// failoverApp is an application: how to start an instance of it against
// an address, in its group.
type failoverApp struct {
	name, group string
	start       func(t *testing.T, addr string, instance int) appInstance
}

// verifiableApp is VerifiableConsumer in group: auto-committing every
// failoverCommitInterval, or committing after each poll (its default).
func verifiableApp(libs, dir, group string, autoCommit bool) failoverApp {
	return failoverApp{name: group, group: group, start: func(t *testing.T, addr string, instance int) appInstance {
		t.Helper()
		config := filepath.Join(dir, fmt.Sprintf("%s-%d.properties", group, instance))
		text := fmt.Sprintf("max.poll.records=100\nauto.commit.interval.ms=%d\n", failoverCommitInterval.Milliseconds())
		if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"--bootstrap-server", addr, "--topic", verifiableTopic, "--group-id", group, "--group-protocol", "classic",
			"--reset-policy", "earliest", "--command-config", config}
		if autoCommit {
			args = append(args, "--enable-autocommit")
		}
		proc, err := kafkatest.StartTool(libs, dir, fmt.Sprintf("%s-%d", group, instance), "org.apache.kafka.tools.VerifiableConsumer", args...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			proc.Kill()
			if t.Failed() {
				t.Log(proc.StderrTail())
			}
		})
		return &verifiableInstance{member: &vcMember{proc: proc, assigned: map[int32]bool{}, commits: map[int32]int64{}}}
	}}
}

type verifiableInstance struct{ member *vcMember }

func (v *verifiableInstance) poll(t *testing.T, seen *vcSeen) { v.member.poll(t, seen) }

func (v *verifiableInstance) kill(t *testing.T) { v.member.proc.Kill() }

// kcatApp is kcat -G in group, auto-committing every
// failoverCommitInterval, printing "partition offset" per record.
func kcatApp(kcat, dir, group string) failoverApp {
	return failoverApp{name: group, group: group, start: func(t *testing.T, addr string, instance int) appInstance {
		t.Helper()
		k := &kcatInstance{outPath: filepath.Join(dir, fmt.Sprintf("%s-%d.out", group, instance)), errPath: filepath.Join(dir, fmt.Sprintf("%s-%d.err", group, instance))}
		stdout, err := os.Create(k.outPath)
		if err != nil {
			t.Fatal(err)
		}
		defer stdout.Close()
		stderr, err := os.Create(k.errPath)
		if err != nil {
			t.Fatal(err)
		}
		defer stderr.Close()
		k.cmd = exec.Command(kcat, "-u", "-b", addr, "-G", group, "-X", "auto.offset.reset=earliest",
			"-X", fmt.Sprintf("auto.commit.interval.ms=%d", failoverCommitInterval.Milliseconds()), "-f", "%p %o\n", verifiableTopic)
		k.cmd.Stdout, k.cmd.Stderr = stdout, stderr
		k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := k.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		k.exited = make(chan struct{})
		go func() { k.cmd.Wait(); close(k.exited) }()
		t.Cleanup(func() {
			k.kill(t)
			if t.Failed() {
				data, _ := os.ReadFile(k.errPath)
				t.Logf("--- %s-%d stderr\n%s", group, instance, data[max(len(data)-4096, 0):])
			}
		})
		return k
	}}
}

type kcatInstance struct {
	cmd              *exec.Cmd
	exited           chan struct{}
	outPath, errPath string
	read             int64
	partial          string
}

func (k *kcatInstance) poll(t *testing.T, seen *vcSeen) {
	t.Helper()
	f, err := os.Open(k.outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(k.read, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(io.LimitReader(f, verifiableEventsBytes))
	if err != nil {
		t.Fatal(err)
	}
	k.read += int64(len(data))
	lines := strings.Split(k.partial+string(data), "\n")
	k.partial = lines[len(lines)-1]
	for _, line := range lines[:len(lines)-1] {
		fields := strings.Fields(line)
		if len(fields) != 2 {
			t.Fatalf("kcat printed %q, want \"partition offset\"", line)
		}
		partition, err1 := strconv.ParseInt(fields[0], 10, 32)
		offset, err2 := strconv.ParseInt(fields[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("kcat printed %q, want \"partition offset\"", line)
		}
		seen.add(int32(partition), offset, offset+1)
	}
}

func (k *kcatInstance) kill(t *testing.T) {
	k.cmd.Process.Kill()
	<-k.exited // SIGKILL cannot be ignored
}

// kgoApp is a franz-go group consumer in group that commits what it
// polled every failoverCommitInterval (CommitUncommittedOffsets), as
// auto-commit does, but never on leaving: its kill stops it between two
// commits.
func kgoApp(group string) failoverApp {
	return failoverApp{name: group, group: group, start: func(t *testing.T, addr string, instance int) appInstance {
		t.Helper()
		client, err := kgo.NewClient(seeds(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(verifiableTopic),
			kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RetryTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		k := &kgoInstance{client: client, cancel: cancel, done: make(chan struct{})}
		go k.run(ctx)
		t.Cleanup(func() { k.kill(t) })
		return k
	}}
}

type kgoInstance struct {
	client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu       sync.Mutex
	consumed [][2]int64 // partition, offset: consumed since the last poll
	err      error      // the first commit or fetch error
}

func (k *kgoInstance) run(ctx context.Context) {
	defer close(k.done)
	lastCommit := time.Now()
	for ctx.Err() == nil { // ends with the kill
		pollCtx, cancel := context.WithTimeout(ctx, failoverCommitInterval)
		fetches := k.client.PollFetches(pollCtx)
		cancel()
		k.mu.Lock()
		fetches.EachRecord(func(r *kgo.Record) { k.consumed = append(k.consumed, [2]int64{int64(r.Partition), r.Offset}) })
		k.mu.Unlock()
		if time.Since(lastCommit) >= failoverCommitInterval && ctx.Err() == nil {
			if err := k.client.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				k.fail(err)
			}
			lastCommit = time.Now()
		}
	}
}

func (k *kgoInstance) fail(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		k.err = err
	}
}

func (k *kgoInstance) poll(t *testing.T, seen *vcSeen) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		t.Fatalf("kgo group consumer: %v", k.err)
	}
	for _, c := range k.consumed {
		seen.add(int32(c[0]), c[1], c[1]+1)
	}
	k.consumed = k.consumed[:0]
}

// kill stops polling and committing, then closes the client (which
// leaves the group without committing: auto-commit is off).
func (k *kgoInstance) kill(t *testing.T) {
	k.once.Do(func() {
		k.cancel()
		<-k.done
		k.client.Close()
	})
}
