package kafkatest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Version is the Apache Kafka release the pom resolves.
const Version = "4.4.0"

const (
	brokerReadyWait = 90 * time.Second // a cold JVM on a busy 2-core machine
	brokerStopWait  = 30 * time.Second
	toolWait        = 2 * time.Minute
	toolOutputMax   = 64 << 20
	logTailBytes    = 16 << 10
	portTries       = 5
)

// brokerJVM keeps each broker small: several run beside mirrord on two
// cores. The full JIT stays on: the benchmarks compare brokers at speed.
var brokerJVM = []string{"-Xms128m", "-Xmx512m", "-XX:+UseSerialGC"}

// toolJVM makes the short-lived tools start fast.
var toolJVM = []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"}

// ErrNotInstalled is returned by Libs when the jars are not in place.
var ErrNotInstalled = errors.New("kafkatest: Kafka jars not installed")

// Libs returns the folder of Kafka's jars: $MIRRORD_KAFKA_LIBS, else
// .cache/kafka-<Version>/libs of the repository holding dir (searched
// upwards), as scripts/install-kafka.sh leaves it. Java must be on PATH.
func Libs(dir string) (string, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return "", fmt.Errorf("%w: java is not on PATH (Kafka %s needs Java 17+)", ErrNotInstalled, Version)
	}
	if libs := os.Getenv("MIRRORD_KAFKA_LIBS"); libs != "" {
		return checkLibs(libs)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for range 16 { // bounded walk up to the repository root
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return checkLibs(filepath.Join(dir, ".cache", "kafka-"+Version, "libs"))
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("%w: no go.mod above %s", ErrNotInstalled, dir)
}

func checkLibs(libs string) (string, error) {
	jar := filepath.Join(libs, "kafka_2.13-"+Version+".jar")
	if _, err := os.Stat(jar); err != nil {
		return "", fmt.Errorf("%w: %s missing (run scripts/install-kafka.sh)", ErrNotInstalled, jar)
	}
	return libs, nil
}

// Options configure a Cluster.
type Options struct {
	Libs    string // the jars (Libs)
	Dir     string // data, configs and logs; the caller removes it
	Brokers int    // 1 or more
	// Controllers is the number of dedicated controller nodes (the KRaft
	// quorum, process.roles=controller). Zero: every broker is also a
	// controller (combined nodes). With dedicated controllers, brokers
	// can be killed without losing the quorum, down to the last one.
	Controllers int
	// Config adds or overrides the properties of every node.
	Config map[string]string
	// Advertise, when set, is called with each broker once its address
	// is chosen, before it starts (again on a retry with a new address),
	// and returns the address its PLAINTEXT listener advertises instead:
	// a proxy in front of it, which must forward to Node.Addr by then.
	Advertise func(n *Node) string
	// SASLSSL, when set, adds a SASL_SSL listener to every broker
	// (Node.SASLSSLAddr) and creates its SCRAM users (secure.go).
	SASLSSL *SASLSSL
	// SSL, when set, adds an SSL listener to every broker (Node.SSLAddr;
	// secure.go).
	SSL *SSL
}

// Cluster is a KRaft cluster on loopback: combined controller+broker
// nodes, or brokers beside a quorum of dedicated controllers. Methods are
// safe for one goroutine at a time.
type Cluster struct {
	options     Options
	clusterID   string
	Nodes       []*Node // the brokers, IDs 1 to Brokers
	Controllers []*Node // the dedicated controllers, IDs after the brokers; none when combined
}

// Node is one Kafka process. Its data and log survive Kill and Stop.
type Node struct {
	ID             int32
	Addr           string // the PLAINTEXT listener, host:port; "" for a dedicated controller
	SASLSSLAddr    string // the SASL_SSL listener (Options.SASLSSL); "" without one
	SSLAddr        string // the SSL listener (Options.SSL); "" without one
	controllerAddr string // the CONTROLLER listener; "" for a broker beside dedicated controllers
	dir            string
	logPath        string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Start formats storage for the brokers and dedicated controllers of opts
// and starts them, returning once every broker lists all brokers in
// Metadata.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Brokers < 1 || opts.Controllers < 0 {
		return nil, fmt.Errorf("kafkatest: %d brokers, %d controllers", opts.Brokers, opts.Controllers)
	}
	c := &Cluster{options: opts}
	var lastErr error
	for range portTries { // a free port can be taken between probe and bind
		if lastErr = c.tryStart(ctx); lastErr == nil {
			return c, nil
		}
		c.Close()
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func (c *Cluster) tryStart(ctx context.Context) error {
	c.Nodes, c.Controllers = nil, nil
	run := fmt.Sprintf("run-%d", time.Now().UnixNano())
	brokers, controllers := c.options.Brokers, c.options.Controllers
	addrs, err := freeAddresses(2*brokers + controllers)
	if err != nil {
		return err
	}
	var secureAddrs, sslAddrs []string
	if c.options.SASLSSL != nil {
		if secureAddrs, err = freeAddresses(brokers); err != nil {
			return err
		}
	}
	if c.options.SSL != nil {
		if sslAddrs, err = freeAddresses(brokers); err != nil {
			return err
		}
	}
	newNode := func(id int, addr, controllerAddr string) (*Node, error) {
		dir := filepath.Join(c.options.Dir, run, fmt.Sprintf("node-%d", id))
		return &Node{ID: int32(id), Addr: addr, controllerAddr: controllerAddr, dir: dir, logPath: filepath.Join(dir, "kafka.log")}, os.MkdirAll(dir, 0o755)
	}
	for i := range brokers {
		controllerAddr := addrs[2*i+1]
		if controllers > 0 {
			controllerAddr = ""
		}
		n, err := newNode(i+1, addrs[2*i], controllerAddr)
		if err != nil {
			return err
		}
		if secureAddrs != nil {
			n.SASLSSLAddr = secureAddrs[i]
		}
		if sslAddrs != nil {
			n.SSLAddr = sslAddrs[i]
		}
		c.Nodes = append(c.Nodes, n)
	}
	for i := range controllers {
		n, err := newNode(brokers+i+1, "", addrs[2*brokers+i])
		if err != nil {
			return err
		}
		c.Controllers = append(c.Controllers, n)
	}
	id, err := c.tool(ctx, "kafka.tools.StorageTool", "random-uuid")
	if err != nil {
		return err
	}
	c.clusterID = strings.TrimSpace(string(id))
	all := c.all()
	for _, n := range all {
		if err := os.WriteFile(n.configPath(), []byte(c.properties(n)), 0o644); err != nil {
			return err
		}
		format := []string{"format", "-t", c.clusterID, "-c", n.configPath()}
		if c.options.SASLSSL != nil {
			format = append(format, c.options.SASLSSL.formatArgs()...)
		}
		if _, err := c.tool(ctx, "kafka.tools.StorageTool", format...); err != nil {
			return fmt.Errorf("kafkatest: format node %d: %w", n.ID, err)
		}
	}
	for _, n := range all {
		if err := c.launch(n); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes {
		if err := c.waitReady(ctx, n); err != nil {
			return err
		}
	}
	return c.controllersRunning()
}

// controllersRunning fails if a dedicated controller exited: no broker
// can serve without the quorum.
func (c *Cluster) controllersRunning() error {
	for _, n := range c.Controllers {
		if !n.Running() {
			return fmt.Errorf("kafkatest: controller %d exited: %v\n%s", n.ID, n.exitErr(), n.LogTail())
		}
	}
	return nil
}

// all is every node: the brokers, then the dedicated controllers.
func (c *Cluster) all() []*Node { return append(append([]*Node{}, c.Nodes...), c.Controllers...) }

func (n *Node) configPath() string { return filepath.Join(n.dir, "server.properties") }

// properties is the node's server.properties: its roles (combined, broker
// or controller), loopback listeners, internal topics replicated as widely
// as the cluster allows, a cleaner that looks often, no automatic topic
// creation.
func (c *Cluster) properties(n *Node) string {
	var voters []string
	for _, v := range c.all() {
		if v.controllerAddr != "" {
			voters = append(voters, fmt.Sprintf("%d@%s", v.ID, v.controllerAddr))
		}
	}
	replicas := fmt.Sprint(min(len(c.Nodes), 3))
	props := map[string]string{
		"process.roles":                            "broker,controller",
		"node.id":                                  fmt.Sprint(n.ID),
		"controller.quorum.voters":                 strings.Join(voters, ","),
		"listeners":                                "PLAINTEXT://" + n.Addr + ",CONTROLLER://" + n.controllerAddr,
		"advertised.listeners":                     "PLAINTEXT://" + c.advertised(n),
		"controller.listener.names":                "CONTROLLER",
		"listener.security.protocol.map":           "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":               "PLAINTEXT",
		"log.dirs":                                 filepath.Join(n.dir, "data"),
		"auto.create.topics.enable":                "false",
		"offsets.topic.replication.factor":         replicas,
		"offsets.topic.num.partitions":             "3",
		"transaction.state.log.replication.factor": replicas,
		"transaction.state.log.min.isr":            "1",
		"transaction.state.log.num.partitions":     "3",
		"group.initial.rebalance.delay.ms":         "0",
		"log.cleaner.backoff.ms":                   "100",
		"num.network.threads":                      "2",
		"num.io.threads":                           "2",
	}
	switch {
	case n.Addr == "": // a dedicated controller
		props["process.roles"] = "controller"
		props["listeners"] = "CONTROLLER://" + n.controllerAddr
		props["advertised.listeners"] = "CONTROLLER://" + n.controllerAddr
		delete(props, "inter.broker.listener.name")
	case n.controllerAddr == "": // a broker beside dedicated controllers
		props["process.roles"] = "broker"
		props["listeners"] = "PLAINTEXT://" + n.Addr
	}
	if c.options.SASLSSL != nil && n.SASLSSLAddr != "" {
		c.options.SASLSSL.addProperties(props, n.SASLSSLAddr)
	}
	if c.options.SSL != nil && n.SSLAddr != "" {
		c.options.SSL.addProperties(props, n.SSLAddr)
	}
	for k, v := range c.options.Config {
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

func (c *Cluster) launch(n *Node) error {
	logFile, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own descriptor
	fmt.Fprintf(logFile, "=== kafkatest: start node %d on %s at %s\n", n.ID, cmp.Or(n.Addr, n.controllerAddr), time.Now().Format(time.RFC3339Nano))
	args := append(append([]string{}, brokerJVM...), "-cp", filepath.Join(c.options.Libs, "*"), "kafka.Kafka", n.configPath())
	cmd := exec.Command("java", args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // no orphans when the test dies
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kafkatest: start node %d: %w", n.ID, err)
	}
	exited := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.exited, n.err = cmd, exited, nil
	n.mu.Unlock()
	go func() {
		err := cmd.Wait()
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
		close(exited)
	}()
	return nil
}

// waitReady polls the broker's Metadata until it lists every running
// broker (itself included), the process exits or the deadline passes.
func (c *Cluster) waitReady(ctx context.Context, n *Node) error {
	ctx, cancel := context.WithTimeout(ctx, brokerReadyWait)
	defer cancel()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	var lastErr error
	for {
		if err := c.controllersRunning(); err != nil {
			return err
		}
		if lastErr = c.probe(ctx, n); lastErr == nil {
			return nil
		}
		select {
		case <-n.exitedChan():
			return fmt.Errorf("kafkatest: node %d exited before serving: %v\n%s", n.ID, n.exitErr(), n.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("kafkatest: node %d not serving after %v: %v\n%s", n.ID, brokerReadyWait, lastErr, n.LogTail())
		case <-ticker.C:
		}
	}
}

func (c *Cluster) probe(ctx context.Context, n *Node) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(n.Addr), kgo.DialTimeout(time.Second))
	if err != nil {
		return err
	}
	defer client.Close()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := client.Broker(int(n.ID)).Request(ctx, req)
	if err != nil {
		return err
	}
	listed := map[int32]bool{}
	for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
		listed[b.NodeID] = true
	}
	for _, b := range c.Nodes {
		if b.Running() && !listed[b.ID] {
			return fmt.Errorf("metadata lists brokers %v, not running broker %d", slices.Sorted(maps.Keys(listed)), b.ID)
		}
	}
	return nil
}

// advertised is the address n's PLAINTEXT listener advertises.
func (c *Cluster) advertised(n *Node) string {
	if c.options.Advertise == nil || n.Addr == "" {
		return n.Addr
	}
	return c.options.Advertise(n)
}

// SASLSSLBootstrap is every broker's SASL_SSL address, comma-separated
// ("" without Options.SASLSSL).
func (c *Cluster) SASLSSLBootstrap() string {
	var addrs []string
	for _, n := range c.Nodes {
		if n.SASLSSLAddr != "" {
			addrs = append(addrs, n.SASLSSLAddr)
		}
	}
	return strings.Join(addrs, ",")
}

// Bootstrap is every broker's address, comma-separated.
func (c *Cluster) Bootstrap() string {
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.Addr)
	}
	return strings.Join(addrs, ",")
}

// Node returns the node (broker or controller) with the given ID, or nil.
func (c *Cluster) Node(id int32) *Node {
	for _, n := range c.all() {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Kill ends the node with SIGKILL, as a crash would, and waits for it.
func (c *Cluster) Kill(n *Node) error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil || !n.Running() {
		return fmt.Errorf("kafkatest: kill node %d: not running", n.ID)
	}
	cmd.Process.Kill()
	<-exited
	return nil
}

// Restart starts a stopped or killed node on its data and waits until it
// serves.
func (c *Cluster) Restart(ctx context.Context, n *Node) error {
	if n.Running() {
		return fmt.Errorf("kafkatest: restart node %d: still running", n.ID)
	}
	if err := c.launch(n); err != nil {
		return err
	}
	return c.waitReady(ctx, n)
}

// Close stops every node (SIGTERM, then SIGKILL after a grace period),
// the brokers before the controllers they shut down through.
func (c *Cluster) Close() {
	for _, n := range c.all() {
		if !n.Running() {
			continue
		}
		n.mu.Lock()
		cmd, exited := n.cmd, n.exited
		n.mu.Unlock()
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(brokerStopWait):
			cmd.Process.Kill()
			<-exited
		}
	}
}

// Running reports whether the node's process is alive.
func (n *Node) Running() bool {
	select {
	case <-n.exitedChan():
		return false
	default:
		return true
	}
}

func (n *Node) exitedChan() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exited == nil {
		closed := make(chan struct{})
		close(closed)
		return closed
	}
	return n.exited
}

func (n *Node) exitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

// LogTail is the end of the node's log (every run of it).
func (n *Node) LogTail() string {
	data, err := os.ReadFile(n.logPath)
	if err != nil {
		return fmt.Sprintf("(log of node %d: %v)", n.ID, err)
	}
	if len(data) > logTailBytes {
		data = data[len(data)-logTailBytes:]
	}
	return fmt.Sprintf("--- node %d log (%s, last %d bytes)\n%s", n.ID, n.logPath, len(data), data)
}

// Logs is LogTail of every node.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, n := range c.all() {
		b.WriteString(n.LogTail())
	}
	return b.String()
}

// Tool runs one of Kafka's command-line tools by class name (for example
// org.apache.kafka.tools.GetOffsetShell) and returns its standard output.
// A non-zero exit is an error carrying standard error's tail.
func (c *Cluster) Tool(ctx context.Context, class string, args ...string) ([]byte, error) {
	return c.tool(ctx, class, args...)
}

func (c *Cluster) tool(ctx context.Context, class string, args ...string) ([]byte, error) {
	return RunTool(ctx, c.options.Libs, nil, class, args...)
}

// RunTool runs a Kafka tool class from the jars in libs with stdin.
func RunTool(ctx context.Context, libs string, stdin []byte, class string, args ...string) ([]byte, error) {
	stdout, _, err := RunToolOutputs(ctx, libs, stdin, class, args...)
	return stdout, err
}

// RunToolOutputs is RunTool that also returns standard error (where the
// tools log, and where some print the errors they do not exit for).
func RunToolOutputs(ctx context.Context, libs string, stdin []byte, class string, args ...string) (stdout, stderr []byte, err error) {
	return RunToolJVM(ctx, libs, nil, stdin, class, args...)
}

// RunToolJVM is RunToolOutputs with JVM options before the class, such
// as the system properties a tool reads (-Dname=value: Kafka 4's
// org.apache.kafka.sasl.oauthbearer.allowed.urls).
func RunToolJVM(ctx context.Context, libs string, jvmOptions []string, stdin []byte, class string, args ...string) (stdout, stderr []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, toolWait)
	defer cancel()
	jvm := append(append(append([]string{}, toolJVM...), jvmOptions...), "-cp", filepath.Join(libs, "*"), class)
	cmd := exec.CommandContext(ctx, "java", append(jvm, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut limitedBuffer
	out.max, errOut.max = toolOutputMax, toolOutputMax
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if out.overflow {
		return nil, errOut.Bytes(), fmt.Errorf("kafkatest: %s wrote more than %d bytes", class, toolOutputMax)
	}
	if err != nil {
		tail := errOut.Bytes()
		if len(tail) > 4096 {
			tail = tail[len(tail)-4096:]
		}
		return out.Bytes(), errOut.Bytes(), fmt.Errorf("kafkatest: %s %s: %v\n%s", class, strings.Join(args, " "), err, tail)
	}
	return out.Bytes(), errOut.Bytes(), nil
}

type limitedBuffer struct {
	bytes.Buffer
	max      int
	overflow bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		b.overflow = true
		return 0, errors.New("output limit")
	}
	return b.Buffer.Write(p)
}

// freeAddresses returns count distinct loopback addresses nothing listens
// on right now.
func freeAddresses(count int) ([]string, error) {
	var listeners []net.Listener
	defer func() {
		for _, ln := range listeners {
			ln.Close()
		}
	}()
	var addrs []string
	for range count {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("kafkatest: free port: %w", err)
		}
		listeners = append(listeners, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}
