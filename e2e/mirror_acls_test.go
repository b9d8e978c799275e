package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const standardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// aclTexts are every ACL of the cluster at addr, one text each, sorted;
// ClusterMirror ones (mirrord's resource type 8) are left out.
func aclTexts(ctx context.Context, t *testing.T, addr string) ([]string, error) {
	t.Helper()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, newClient(t, addr))
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range resp.Resources {
		if r.ResourceType == 8 {
			continue
		}
		for _, a := range r.ACLs {
			out = append(out, fmt.Sprintf("%v:%v:%s %s@%s %v %v", r.ResourceType, r.ResourcePatternType, r.ResourceName, a.Principal, a.Host, a.Operation, a.PermissionType))
		}
	}
	slices.Sort(out)
	return out, nil
}

// createKafkaACLs creates ACLs through kadm; each builder must make one.
func createKafkaACLs(ctx context.Context, t *testing.T, addr string, builders ...*kadm.ACLBuilder) {
	t.Helper()
	admin := kadm.NewClient(newClient(t, addr))
	for _, b := range builders {
		results, err := admin.CreateACLs(ctx, b)
		if err == nil && (len(results) != 1 || results[0].Err != nil) {
			err = fmt.Errorf("results %+v", results)
		}
		if err != nil {
			t.Fatalf("create ACLs on Kafka: %v", err)
		}
	}
}

// waitACLsEqual polls mirrord's ACLs until they are Kafka's, and returns
// how long that took.
func waitACLsEqual(ctx context.Context, t *testing.T, kafka, mirror string, deadline time.Duration, what string) time.Duration {
	t.Helper()
	want, err := aclTexts(ctx, t, kafka)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		got, err := aclTexts(ctx, t, mirror)
		if err == nil && slices.Equal(got, want) {
			return time.Since(started)
		}
		if time.Since(started) > deadline {
			t.Fatalf("%s: mirrord's ACLs after %v (err %v):\n%v\nwant Kafka's:\n%v", what, deadline, err, got, want)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-poll.C:
		}
	}
}

// TestInteropKafkaACLSync: a Kafka 4.4 source with StandardAuthorizer and
// a SASL_SSL listener (SCRAM-SHA-512); the mirror authenticates as
// User:mirror, which may DESCRIBE the source's cluster (DescribeAcls) and
// nothing more. Kafka's ACLs appear on mirrord (its own authorizer on)
// within one sync round, an ACL deleted on Kafka goes within the next,
// and --describe shows the round.
func TestInteropKafkaACLSync(t *testing.T) {
	t.Parallel()
	cluster, secure := startSecureKafka(t, map[string]string{"authorizer.class.name": standardAuthorizer,
		"super.users": "User:ANONYMOUS"}, secureUser) // PLAINTEXT: the brokers, the controller and the test's admin
	ctx, cancel := context.WithTimeout(context.Background(), interopDeadline)
	defer cancel()
	kafka := cluster.Bootstrap()
	createKafkaACLs(ctx, t, kafka,
		kadm.NewACLs().Clusters().Allow("User:mirror").Operations(kadm.OpDescribe),
		kadm.NewACLs().Topics("orders").Allow("User:app").Operations(kadm.OpRead),
		kadm.NewACLs().Topics("orders-").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:producer").Operations(kadm.OpWrite),
		kadm.NewACLs().Groups("app").Allow("User:app").Operations(kadm.OpRead),
		kadm.NewACLs().Topics("orders").Deny("User:mallory").DenyHosts("10.1.2.3").Operations(kadm.OpRead),
		kadm.NewACLs().TransactionalIDs("app-tx").Allow("User:producer").Operations(kadm.OpWrite))
	kafkaACLs, err := aclTexts(ctx, t, kafka)
	if err != nil || len(kafkaACLs) != 6 {
		t.Fatalf("Kafka's ACLs %v, %v: want 6", kafkaACLs, err)
	}

	mirror := startServer(t, "--authorizer-class-name", standardAuthorizer, "--super-users", "User:ANONYMOUS")
	const interval = 2 * time.Second
	config := writeProperties(t, fmt.Sprintf(`bootstrap.servers=%s
security.protocol=SASL_SSL
ssl.truststore.location=%s
sasl.mechanism=%s
sasl.jaas.config=%s
mirror.acls.sync.interval.ms=%d
`, cluster.SASLSSLBootstrap(), secure.TruststoreLocation, secureUser.Mechanism, secureUser.JAASConfig(), interval.Milliseconds()))
	runMirrorsOK(ctx, t, mirror.addr, "--create", "--mirror", "m", "--mirror-config", config)
	// One round: the first ends an interval after the create, plus its
	// own time; a second interval of room for a loaded machine.
	took := waitACLsEqual(ctx, t, kafka, mirror.addr, 2*interval+10*time.Second, "Kafka's ACLs on mirrord")
	t.Logf("Kafka's %d ACLs on mirrord %v after --create (sync interval %v)", len(kafkaACLs), took.Round(time.Millisecond), interval)

	var described describeOutput
	if err := json.Unmarshal([]byte(runMirrorsOK(ctx, t, mirror.addr, "--describe", "--mirror", "m", "--json")), &described); err != nil {
		t.Fatal(err)
	}
	if len(described.Mirrors) != 1 || described.Mirrors[0].ACLSync == nil {
		t.Fatalf("describe %+v: want the mirror's ACL sync", described)
	}
	s := described.Mirrors[0].ACLSync
	if s.ACLsSynced != 6 || s.Error != "" || s.LastSyncAgeMillis < 0 {
		t.Fatalf("ACL sync %+v: want 6 ACLs synced without error", s)
	}
	t.Logf("a round took %d ms", s.DurationMillis)

	admin := kadm.NewClient(newClient(t, kafka))
	deleted, err := admin.DeleteACLs(ctx, kadm.NewACLs().Groups("app").Allow("User:app").AllowHosts("*").Operations(kadm.OpRead))
	if err != nil || len(deleted) != 1 || len(deleted[0].Deleted) != 1 {
		t.Fatalf("delete an ACL on Kafka: %+v, %v", deleted, err)
	}
	took = waitACLsEqual(ctx, t, kafka, mirror.addr, 2*interval+10*time.Second, "the ACL deleted on Kafka gone from mirrord")
	t.Logf("the ACL deleted on Kafka gone from mirrord %v later", took.Round(time.Millisecond))
}

// describeOutput is the part of `mirrord mirrors --describe --json` the
// ACL sync test reads.
type describeOutput struct {
	Mirrors []struct {
		Mirror  string `json:"mirror"`
		ACLSync *struct {
			LastSyncAgeMillis int64  `json:"lastSyncAgeMillis"`
			DurationMillis    int64  `json:"durationMillis"`
			ACLsSynced        int32  `json:"aclsSynced"`
			FailedRounds      int64  `json:"failedRounds"`
			Error             string `json:"error"`
		} `json:"aclSync"`
	} `json:"mirrors"`
}
