package kafkatest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// toolStopWait bounds a long-running tool's exit after SIGTERM.
const toolStopWait = 30 * time.Second

// ToolProcess is one of Kafka's tools running in the background (for
// example org.apache.kafka.tools.VerifiableConsumer, which runs until it
// is killed): its standard output goes to a file the caller reads as it
// grows, its standard error to another, the log printed on failure.
type ToolProcess struct {
	Name       string // for messages
	StdoutPath string
	StderrPath string

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // set before exited is closed
}

// StartTool starts class from the jars in libs with args, its outputs in
// dir/<name>.out and dir/<name>.err. It returns once the JVM is launched.
// The process dies with this one (PR_SET_PDEATHSIG); Kill or Stop ends it.
func StartTool(libs, dir, name, class string, args ...string) (*ToolProcess, error) {
	return StartToolJVM(libs, dir, name, nil, class, args...)
}

// StartToolJVM is StartTool with JVM options before the class (system
// properties, -Dname=value), set for this process alone: unlike
// JAVA_TOOL_OPTIONS in the environment, they leave the JVMs of the tests
// running beside it alone.
func StartToolJVM(libs, dir, name string, jvmOptions []string, class string, args ...string) (*ToolProcess, error) {
	p := &ToolProcess{
		Name:       name,
		StdoutPath: filepath.Join(dir, name+".out"),
		StderrPath: filepath.Join(dir, name+".err"),
		exited:     make(chan struct{}),
	}
	stdout, err := os.Create(p.StdoutPath)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: start %s: %w", name, err)
	}
	defer stdout.Close() // the child has its own descriptors
	stderr, err := os.Create(p.StderrPath)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: start %s: %w", name, err)
	}
	defer stderr.Close()
	jvm := append(append(append([]string{}, toolJVM...), jvmOptions...), "-cp", filepath.Join(libs, "*"), class)
	p.cmd = exec.Command("java", append(jvm, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = stdout, stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // no orphans when the test dies
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("kafkatest: start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the JVM's process ID.
func (p *ToolProcess) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited.
func (p *ToolProcess) Exited() <-chan struct{} { return p.exited }

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *ToolProcess) Kill() {
	p.cmd.Process.Kill()
	<-p.exited // SIGKILL cannot be ignored: Wait returns
}

// Stop sends SIGTERM (the JVM runs its shutdown hooks: a consumer leaves
// its group and commits) and waits; after toolStopWait it kills the
// process and returns an error. A process that had exited already is not
// an error: Stop is also the cleanup of a killed process.
func (p *ToolProcess) Stop() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil // the JVM exits with 143 after its shutdown hooks: expected
	case <-time.After(toolStopWait):
	}
	p.Kill()
	return errors.New("kafkatest: " + p.Name + " still running " + toolStopWait.String() + " after SIGTERM: killed")
}

// StderrTail is the end of the tool's standard error.
func (p *ToolProcess) StderrTail() string {
	f, err := os.Open(p.StderrPath)
	if err != nil {
		return fmt.Sprintf("(%s: %v)", p.Name, err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > logTailBytes {
		f.Seek(info.Size()-logTailBytes, io.SeekStart)
	}
	data, _ := io.ReadAll(io.LimitReader(f, logTailBytes))
	return fmt.Sprintf("--- %s stderr (%s, last %d bytes)\n%s", p.Name, p.StderrPath, len(data), data)
}
