package e2e

// mirrord's ACL authorizer driven by Kafka 4.4's kafka-acls and seen by
// Kafka's clients: ACLs an admin adds over SASL_SSL take effect on the
// next request and their removal too; and the mirror admin CLI, anonymous
// on the PLAINTEXT listener, is refused what only an admin may do.

import (
	"context"
	"strings"
	"testing"

	"github.com/mirrord/mirrord/kafkatest"
)

// aclCommand is kafka-acls.sh's class.
const aclCommand = "org.apache.kafka.tools.AclCommand"

// secureAuthorizer turns on mirrord's authorizer by Kafka's names, with
// the PLAIN admin as the only super user.
const secureAuthorizer = `authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin
`

// TestKafkaACLsWithKafkaTools: with the authorizer on, alice (SCRAM-SHA-512)
// is refused a write to orders (TopicAuthorizationException); the admin
// adds ACLs with kafka-acls (WRITE on the topic; READ on the topic and
// on her group) and lists them; alice's console producer then writes and
// her console consumer reads in her group; once the admin removes the
// WRITE ACL her producer is refused again.
func TestKafkaACLsWithKafkaTools(t *testing.T) {
	t.Parallel()
	libs := kafkaLibs(t)
	node := startSecureNode(t, secureAuthorizer)
	ctx, cancel := context.WithTimeout(context.Background(), secureToolsDeadline)
	defer cancel()
	aliceUser := kafkatest.ScramUser{Mechanism: "SCRAM-SHA-512", Name: "alice", Password: "alice-Scram-secret"}
	node.addScramUsers(ctx, t, aliceUser)
	if _, err := node.adminClient(t).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatalf("CreateTopics orders as %s: %v", secureAdmin.Name, err)
	}
	admin := node.clientConfig(t, "admin.properties", secureAdmin)
	alice := node.clientConfig(t, "alice.properties", aliceUser)
	addr := node.saslSSL

	produce := func(value string, properties ...string) string {
		t.Helper()
		// kafka-console-producer logs a failed send and exits 0: the
		// output tells.
		args := []string{"--bootstrap-server", addr, "--topic", "orders", "--command-config", alice, "--producer-property", "delivery.timeout.ms=20000"}
		for _, property := range properties {
			args = append(args, "--producer-property", property)
		}
		stdout, stderr, err := kafkatest.RunToolOutputs(ctx, libs, []byte(value+"\n"), "org.apache.kafka.tools.ConsoleProducer", args...)
		if err != nil {
			t.Fatalf("kafka-console-producer as alice: %v\n%s", err, stderr)
		}
		return string(stdout) + string(stderr)
	}
	// wantRefused requires the Java exception's own line (not a log
	// line quoting it) naming what was refused.
	wantRefused := func(when, out, exception, named string) {
		t.Helper()
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "org.apache.kafka.common.errors."+exception+": ") && strings.Contains(line, named) {
				t.Logf("alice %s: %s", when, line)
				return
			}
		}
		t.Fatalf("kafka-console-producer as alice %s: want a %s naming %q, got:\n%s", when, exception, named, out)
	}
	acls := func(args ...string) string {
		t.Helper()
		args = append([]string{"--bootstrap-server", addr, "--command-config", admin}, args...)
		out, err := kafkatest.RunTool(ctx, libs, nil, aclCommand, args...)
		if err != nil {
			t.Fatalf("kafka-acls %s: %v\n%s", strings.Join(args[4:], " "), err, out)
		}
		return string(out)
	}

	// No DESCRIBE on orders: Metadata answers TOPIC_AUTHORIZATION_FAILED.
	wantRefused("before any ACL", produce("refused"), "TopicAuthorizationException", "Not authorized to access topics: [orders]")

	acls("--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
	acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders", "--group", "orders-app")
	listed := acls("--list")
	for _, want := range []string{
		"resourceType=TOPIC, name=orders, patternType=LITERAL",
		"principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW",
		"principal=User:alice, host=*, operation=READ, permissionType=ALLOW",
		"resourceType=GROUP, name=orders-app, patternType=LITERAL",
	} {
		if !strings.Contains(listed, want) {
			t.Errorf("kafka-acls --list lacks %q:\n%s", want, listed)
		}
	}

	if out := produce("allowed"); strings.Contains(out, "Exception") {
		t.Fatalf("kafka-console-producer as alice with WRITE on orders: want no exception, got:\n%s", out)
	}
	out, err := kafkatest.RunTool(ctx, libs, nil, "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"--bootstrap-server", addr, "--topic", "orders", "--group", "orders-app", "--command-config", alice,
		"--from-beginning", "--max-messages", "1", "--timeout-ms", consoleConsumeWait)
	if err != nil || string(out) != "allowed\n" {
		t.Fatalf("kafka-console-consumer as alice in group orders-app with READ: %v, want \"allowed\\n\", got %q", err, out)
	}

	acls("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
	if listed := acls("--list", "--topic", "orders"); strings.Contains(listed, "operation=WRITE") || !strings.Contains(listed, "operation=READ") {
		t.Errorf("kafka-acls --list after removing WRITE: want READ only:\n%s", listed)
	}
	// READ implies DESCRIBE, so Metadata lets her on; without WRITE on
	// any topic Kafka refuses an idempotent producer's InitProducerId
	// (CLUSTER_AUTHORIZATION_FAILED, KIP-679), and a plain producer's
	// Produce (TOPIC_AUTHORIZATION_FAILED).
	wantRefused("after the WRITE ACL is removed (idempotent)", produce("refused again"), "ClusterAuthorizationException", "Cluster authorization failed")
	wantRefused("after the WRITE ACL is removed (not idempotent)", produce("refused again", "enable.idempotence=false"),
		"TopicAuthorizationException", "Not authorized to access topics: [orders]")
	ends, err := node.adminClient(t).ListEndOffsets(ctx, "orders")
	if end, ok := ends.Lookup("orders", 0); err != nil || !ok || end.Err != nil || end.Offset != 1 {
		t.Errorf("orders after the refused writes: end offset %+v (%v), want 1 (the one allowed record)", end, err)
	}
}
