package kafkatest

// MirrorMaker 2, the peer of the benchmarks, in dedicated mode: the class
// org.apache.kafka.connect.mirror.MirrorMaker with an mm2.properties, one
// JVM that runs a Connect worker per replication flow (here one, A->B) and
// keeps Connect's internal topics on the target cluster. It comes from the
// connect-mirror jar, which scripts/install-kafka.sh resolves only where
// the Maven registry serves it (kafkatest/pom.xml, profile mirrormaker):
// MirrorMakerInstalled says whether it is there.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// MirrorMakerClass is MirrorMaker 2's dedicated-mode entry point.
const MirrorMakerClass = "org.apache.kafka.connect.mirror.MirrorMaker"

// The cluster aliases of the generated mm2.properties: the flow is
// MirrorMakerSource->MirrorMakerTarget.
const (
	MirrorMakerSource = "A"
	MirrorMakerTarget = "B"
)

const mirrorMakerStopWait = 30 * time.Second // SIGTERM to exit, then SIGKILL

// mirrorMakerJVM keeps MirrorMaker 2 as small as a broker (512 MiB heap,
// the serial collector on two cores) but, unlike the brokers and tools,
// with the full tiered JIT: it is the peer a benchmark measures, and C2
// is what it runs with in production.
var mirrorMakerJVM = []string{"-Xms256m", "-Xmx512m", "-XX:+UseSerialGC"}

// MirrorMakerVersion is the MirrorMaker 2 release kafkatest/mm2/pom.xml
// resolves: the newest connect-mirror the registry serves (4.4.0 is not).
const MirrorMakerVersion = "4.3.1"

// MirrorMakerLibs is MirrorMaker 2's own classpath folder beside libs.
func MirrorMakerLibs(libs string) string { return filepath.Join(filepath.Dir(libs), "mm2-libs") }

// MirrorMakerInstalled returns nil when MirrorMaker 2 (connect-mirror) is
// installed beside libs, else an error wrapping ErrNotInstalled that names
// the missing jar.
func MirrorMakerInstalled(libs string) error {
	jar := filepath.Join(MirrorMakerLibs(libs), "connect-mirror-"+MirrorMakerVersion+".jar")
	if _, err := os.Stat(jar); err != nil {
		return fmt.Errorf("%w: %s missing: MirrorMaker 2 (org.apache.kafka:connect-mirror:%s) was not resolved by scripts/install-kafka.sh (its registry may not serve it)",
			ErrNotInstalled, jar, MirrorMakerVersion)
	}
	return nil
}

// MirrorMaker is one running MirrorMaker 2 process.
type MirrorMaker struct {
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process has been waited for
	err     error         // the Wait result, valid once exited is closed
}

// MirrorMakerProperties is the mm2.properties of StartMirrorMaker: one
// flow from the cluster at sourceBootstrap (alias MirrorMakerSource) to
// the one at targetBootstrap (MirrorMakerTarget) of the topics matching
// topics (a comma-separated list of names and regexes), tuned to copy
// fast and do nothing else; extra adds or overrides keys (tasks.max, for
// one). Every choice:
//
//   - replication.policy.class=IdentityReplicationPolicy: the target topic
//     has the source's name ("bench", not "A.bench"), so it is read like
//     the source; no loop can arise with a single flow.
//   - B->A.enabled=false, emit.heartbeats.enabled=false: one flow, no
//     heartbeats connector and so no B->A worker either (MirrorMakerConfig
//     creates a worker per pair with heartbeats on).
//   - sync.group.offsets.enabled=false, refresh.groups.enabled=false and
//     emit.checkpoints.interval.seconds=3600: no consumer-group
//     translation during a run; the benchmark measures data. Offset syncs
//     and checkpoints stay enabled (MirrorMaker 4.3 refuses to configure
//     its source connector with emit.offset-syncs.enabled=false, and its
//     checkpoint connector without either): the offset-sync records it
//     writes back to the source are part of MirrorMaker's real cost.
//   - sync.topic.configs.enabled=false, sync.topic.acls.enabled=false: no
//     periodic DescribeConfigs/AlterConfigs and no ACL calls (the test
//     brokers have no authorizer). The target topic is still created with
//     the source's partition count.
//   - refresh.topics.interval.seconds=5: topics created after the start
//     are found within seconds (the default is 10 minutes); topics that
//     exist at the start are assigned at once either way.
//   - replication.factor and every internal topic's replication factor
//     (Connect's offsets, configs and status topics, checkpoints,
//     heartbeats, offset syncs) = 1: the test clusters have one node.
//   - tasks.max=1 unless extra says otherwise: one task copies every
//     partition (tasks.max=N spreads N partitions over N tasks).
//   - B.producer.compression.type=lz4, linger.ms=5, batch.size=256 KiB,
//     max.in.flight.requests.per.connection=5 (idempotent, so ordered):
//     Connect's producer defaults (no compression, one request in flight)
//     would store twice the bytes and wait a round trip per batch; these
//     are what a tuned deployment sets.
//   - A.consumer.max.poll.records=2000: fewer task loop turns per MB
//     (the default is 500 records, 500 KB of 1 KiB records).
//   - dedicated.mode.enable.internal.rest stays false: no REST listener,
//     no port to choose.
func MirrorMakerProperties(sourceBootstrap, targetBootstrap, topics string, extra map[string]string) string {
	flow := MirrorMakerSource + "->" + MirrorMakerTarget + "."
	props := map[string]string{
		"clusters":                               MirrorMakerSource + ", " + MirrorMakerTarget,
		MirrorMakerSource + ".bootstrap.servers": sourceBootstrap,
		MirrorMakerTarget + ".bootstrap.servers": targetBootstrap,
		flow + "enabled":                         "true",
		flow + "topics":                          topics,
		MirrorMakerTarget + "->" + MirrorMakerSource + ".enabled":             "false",
		"replication.policy.class":                                            "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
		"emit.heartbeats.enabled":                                             "false",
		"emit.checkpoints.interval.seconds":                                   "3600",
		"sync.group.offsets.enabled":                                          "false",
		"refresh.groups.enabled":                                              "false",
		"sync.topic.configs.enabled":                                          "false",
		"sync.topic.acls.enabled":                                             "false",
		"refresh.topics.interval.seconds":                                     "5",
		"replication.factor":                                                  "1",
		"offset.storage.replication.factor":                                   "1",
		"config.storage.replication.factor":                                   "1",
		"status.storage.replication.factor":                                   "1",
		"checkpoints.topic.replication.factor":                                "1",
		"heartbeats.topic.replication.factor":                                 "1",
		"offset-syncs.topic.replication.factor":                               "1",
		"tasks.max":                                                           "1",
		MirrorMakerTarget + ".producer.compression.type":                      "lz4",
		MirrorMakerTarget + ".producer.linger.ms":                             "5",
		MirrorMakerTarget + ".producer.batch.size":                            fmt.Sprint(256 << 10),
		MirrorMakerTarget + ".producer.enable.idempotence":                    "true",
		MirrorMakerTarget + ".producer.max.in.flight.requests.per.connection": "5",
		MirrorMakerSource + ".consumer.max.poll.records":                      "2000",
	}
	for k, v := range extra {
		props[k] = v
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	return b.String()
}

// StartMirrorMaker writes dir/mm2.properties (MirrorMakerProperties) and
// starts MirrorMaker 2 on it from the jars in libs, logging to
// dir/mm2.log. It returns once the JVM is launched: MirrorMaker has no
// readiness signal without its REST server, so callers watch the target
// cluster. The process dies with this one (PR_SET_PDEATHSIG); Close stops
// it. Without the connect-mirror jar the error wraps ErrNotInstalled.
func StartMirrorMaker(ctx context.Context, libs, dir string, sourceBootstrap, targetBootstrap string, topics string, extra map[string]string) (*MirrorMaker, error) {
	if err := MirrorMakerInstalled(libs); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kafkatest: start MirrorMaker 2: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	propertiesPath := filepath.Join(dir, "mm2.properties")
	if err := os.WriteFile(propertiesPath, []byte(MirrorMakerProperties(sourceBootstrap, targetBootstrap, topics, extra)), 0o644); err != nil {
		return nil, err
	}
	m := &MirrorMaker{logPath: filepath.Join(dir, "mm2.log"), exited: make(chan struct{})}
	logFile, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	fmt.Fprintf(logFile, "=== kafkatest: start MirrorMaker 2 %s -> %s at %s\n", sourceBootstrap, targetBootstrap, time.Now().Format(time.RFC3339Nano))
	args := append(append([]string{}, mirrorMakerJVM...), "-cp", filepath.Join(MirrorMakerLibs(libs), "*"), MirrorMakerClass, propertiesPath)
	m.cmd = exec.Command("java", args...)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // no orphans when the test dies
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("kafkatest: start MirrorMaker 2: %w", err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.exited)
	}()
	return m, nil
}

// Pid is the JVM's process ID, for /proc/<pid>/stat and status.
func (m *MirrorMaker) Pid() int { return m.cmd.Process.Pid }

// Exited is closed once the process has exited.
func (m *MirrorMaker) Exited() <-chan struct{} { return m.exited }

// Close stops MirrorMaker 2: SIGTERM, then SIGKILL after a grace period.
// It returns an error when the process had exited before Close (it
// failed; see LogTail) or did not stop on SIGTERM in time.
func (m *MirrorMaker) Close() error {
	select {
	case <-m.exited:
		return fmt.Errorf("kafkatest: MirrorMaker 2 exited before Close: %v", m.err)
	default:
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
		return nil // the JVM exits with 143 after its shutdown hooks: expected
	case <-time.After(mirrorMakerStopWait):
	}
	m.cmd.Process.Kill()
	<-m.exited // SIGKILL cannot be ignored: Wait returns
	return errors.New("kafkatest: MirrorMaker 2 still running " + mirrorMakerStopWait.String() + " after SIGTERM: killed")
}

// LogTail is the end of MirrorMaker 2's log.
func (m *MirrorMaker) LogTail() string {
	data, err := os.ReadFile(m.logPath)
	if err != nil {
		return fmt.Sprintf("(log of MirrorMaker 2: %v)", err)
	}
	if len(data) > logTailBytes {
		data = data[len(data)-logTailBytes:]
	}
	return fmt.Sprintf("--- MirrorMaker 2 log (%s, last %d bytes)\n%s", m.logPath, len(data), data)
}

// Pid is the node's process ID while it runs, else 0: the benchmarks
// read a broker's CPU time and peak memory from /proc/<pid>. (It belongs
// beside Node in kafka.go; it lives here to keep this change to one new
// file.)
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil || !n.runningLocked() {
		return 0
	}
	return n.cmd.Process.Pid
}

func (n *Node) runningLocked() bool {
	if n.exited == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}
