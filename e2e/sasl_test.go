package e2e

// Kafka 4.4's own tools against mirrord's SASL listener: kafka-configs
// creates a SCRAM-SHA-512 user on mirrord (as an admin authenticated with
// PLAIN from the listener's JAAS config: with no authorizer any principal
// may alter credentials, as on Kafka), then kafka-console-producer and
// kafka-console-consumer write and read as that user, and a wrong
// password is refused with Kafka's message.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/mirrord/mirrord/mirrordtest"
)

// saslProtocol is the security protocol of the test's SASL listener.
const saslProtocol = "SASL_PLAINTEXT"

func TestSASLScramWithKafkaTools(t *testing.T) {
	libs := kafkaLibs(t)
	dir := t.TempDir()
	saslAddr, err := mirrordtest.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	listener := strings.ToLower(saslProtocol)
	config := write("server.properties", "listener.name."+listener+".plain.sasl.jaas.config="+
		`org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";`+"\n")
	// Metadata advertises the SASL listener: the clients stay on it.
	startServer(t, "--config", config, "--sasl-listen", saslAddr, "--sasl-enabled-mechanisms", "PLAIN,SCRAM-SHA-512", "--advertise", saslAddr)
	client := func(name, mechanism, module, user, password string) string {
		return write(name, "security.protocol="+saslProtocol+"\nsasl.mechanism="+mechanism+"\n"+
			"sasl.jaas.config=org.apache.kafka.common.security."+module+" required username=\""+user+"\" password=\""+password+"\";\n")
	}
	admin := client("admin.properties", "PLAIN", "plain.PlainLoginModule", "admin", "admin-secret")
	alice := client("alice.properties", "SCRAM-SHA-512", "scram.ScramLoginModule", "alice", "alice-secret")
	wrong := client("wrong.properties", "SCRAM-SHA-512", "scram.ScramLoginModule", "alice", "not-alice-secret")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	out, err := kafkatest.RunTool(ctx, libs, nil, configCommand, "--bootstrap-server", saslAddr, "--command-config", admin,
		"--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=alice-secret]", "--entity-type", "users", "--entity-name", "alice")
	if err != nil || !strings.Contains(string(out), "Completed updating config for user alice") {
		t.Fatalf("kafka-configs --alter: %v\n%s", err, out)
	}
	out, err = kafkatest.RunTool(ctx, libs, nil, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", saslAddr,
		"--command-config", alice, "--create", "--topic", "sasl-orders", "--partitions", "1")
	if err != nil {
		t.Fatalf("kafka-topics --create as alice: %v\n%s", err, out)
	}
	out, err = kafkatest.RunTool(ctx, libs, []byte("one\ntwo\n"), "org.apache.kafka.tools.ConsoleProducer",
		"--bootstrap-server", saslAddr, "--topic", "sasl-orders", "--producer.config", alice)
	if err != nil {
		t.Fatalf("kafka-console-producer as alice: %v\n%s", err, out)
	}
	out, err = kafkatest.RunTool(ctx, libs, nil, "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"--bootstrap-server", saslAddr, "--topic", "sasl-orders", "--consumer.config", alice,
		"--from-beginning", "--max-messages", "2", "--timeout-ms", consoleConsumeWait)
	if err != nil || !strings.Contains(string(out), "one\ntwo\n") {
		t.Fatalf("kafka-console-consumer as alice: %v\n%s", err, out)
	}
	// kafka-console-producer logs the failed send and exits 0.
	stdout, stderr, _ := kafkatest.RunToolOutputs(ctx, libs, []byte("refused\n"), "org.apache.kafka.tools.ConsoleProducer",
		"--bootstrap-server", saslAddr, "--topic", "sasl-orders", "--producer.config", wrong, "--producer-property", "delivery.timeout.ms=30000")
	refused := string(stdout) + string(stderr)
	if !strings.Contains(refused, "SaslAuthenticationException") ||
		!strings.Contains(refused, "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512") {
		t.Fatalf("kafka-console-producer with a wrong password: want Kafka's SaslAuthenticationException:\n%s", refused)
	}
	t.Logf("wrong password: %s", lineWith(refused, "SaslAuthenticationException"))
}
