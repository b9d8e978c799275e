package e2e

// mirrord's ACL authorizer driven by Kafka 4.4's kafka-acls and seen by
// Kafka's clients: ACLs an admin adds over SASL_SSL take effect on the
// next request and their removal too; and the mirror admin CLI, anonymous
// on the PLAINTEXT listener, is refused what only an admin may do.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
// WRITE ACL her producer is refused again, as Kafka refuses it: the
// idempotent one at InitProducerId, a plain one at Produce.
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

// TestMirrorAdminAuthorized: with the authorizer on, `mirrord mirrors`
// without credentials on the PLAINTEXT listener (User:ANONYMOUS) is
// refused --create, --stop and --delete with a one-line error naming
// CLUSTER_MIRROR_AUTHORIZATION_FAILED, and the mirror is as it was; the
// same commands with --command-config (the admin, SCRAM-SHA-512 over
// SASL_SSL) succeed. The source is another mirrord.
func TestMirrorAdminAuthorized(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), mirrorTestDeadline)
	defer cancel()
	source := startServer(t)
	node := startSecureNode(t, secureAuthorizer)
	scramAdmin := kafkatest.ScramUser{Mechanism: "SCRAM-SHA-512", Name: secureAdmin.Name, Password: "admin-Scram-secret"}
	node.addScramUsers(ctx, t, scramAdmin)
	admin := node.clientConfig(t, "admin.properties", scramAdmin)
	const topic = "audit"
	createTopics(ctx, t, source.addr, map[string]int32{topic: 1})
	mirrorConfig := writeMirrorConfig(t, source.addr)
	const refusal = "CLUSTER_MIRROR_AUTHORIZATION_FAILED"

	refused := func(args ...string) {
		t.Helper()
		result := runMirrors(ctx, t, node.addr, args...)
		result.wantOneLineError(t, refusal)
		t.Logf("anonymous %s: exit %d: %s", args[0], result.exit, strings.TrimSpace(result.stderr))
	}
	refused("--create", "--mirror", "m", "--mirror-config", mirrorConfig)
	runMirrorsOK(ctx, t, node.saslSSL, "--command-config", admin, "--create", "--mirror", "m", "--mirror-config", mirrorConfig)
	runMirrorsOK(ctx, t, node.saslSSL, "--command-config", admin, "--start", "--mirror", "m", "--topics", topic)

	if reason := pollUntil(ctx, mirrorProgressWait, func(ctx context.Context) string {
		if state := mirroredStates(ctx, t, node, admin)[topic]; state != "MIRRORING" {
			return fmt.Sprintf("%s is %q", topic, state)
		}
		return ""
	}); reason != "" {
		t.Fatalf("after the admin's --start: %s within %v, want MIRRORING", reason, mirrorProgressWait)
	}
	refused("--stop", "--mirror", "m", "--topics", topic)
	if state := mirroredStates(ctx, t, node, admin)[topic]; state != "MIRRORING" {
		t.Fatalf("after a refused --stop: %s is %q, want MIRRORING", topic, state)
	}
	if out := runMirrorsOK(ctx, t, node.saslSSL, "--command-config", admin, "--stop", "--mirror", "m", "--topics", topic); !strings.Contains(out, topic) {
		t.Errorf("--stop as the admin: the output does not name %s:\n%s", topic, out)
	}
	if states := mirroredStates(ctx, t, node, admin); states[topic] != "STOPPED" {
		t.Fatalf("after the admin's --stop: %s is %q, want STOPPED", topic, states[topic])
	}

	refused("--delete", "--mirror", "m")
	if out := runMirrorsOK(ctx, t, node.saslSSL, "--command-config", admin, "--list"); !slices.Equal(listedMirrors(out), []string{"m"}) {
		t.Fatalf("--list after a refused --delete: want mirror m, got:\n%s", out)
	}
	runMirrorsOK(ctx, t, node.saslSSL, "--command-config", admin, "--delete", "--mirror", "m")
	if out := runMirrorsOK(ctx, t, node.saslSSL, "--command-config", admin, "--list"); len(listedMirrors(out)) != 0 {
		t.Errorf("--list after the admin's --delete: want no mirror, got:\n%s", out)
	}
}

// listedMirrors is the MIRROR column of --list.
func listedMirrors(out string) []string {
	var names []string
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if fields := strings.Fields(line); i > 0 && len(fields) > 0 {
			names = append(names, fields[0])
		}
	}
	return names
}

// mirroredStates is the state of each partition 0 of mirror m, by topic,
// as the admin's --describe --json shows it.
func mirroredStates(ctx context.Context, t *testing.T, node *secureNode, admin string) map[string]string {
	t.Helper()
	out := runMirrorsOK(ctx, t, node.saslSSL, "--command-config", admin, "--describe", "--mirror", "m", "--json")
	var described describeJSON
	if err := json.Unmarshal([]byte(out), &described); err != nil {
		t.Fatalf("--describe --json: %v\n%s", err, out)
	}
	states := map[string]string{}
	for _, row := range described.Partitions {
		if row.Partition == 0 {
			states[row.Topic] = row.State
		}
	}
	return states
}
