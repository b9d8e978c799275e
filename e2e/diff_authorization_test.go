package e2e

// The differential authorization test: one Kafka 4.4 broker with
// StandardAuthorizer and a SASL_SSL listener (SCRAM users made at format
// time), one mirrord with the same authorizer and a SASL_PLAINTEXT
// listener (PLAIN users in its JAAS config: the authentication is not what
// is compared). Both get the same topics and ACLs from an anonymous super
// user on their PLAINTEXT listeners, then the same raw requests from
// "bob" (no ACL at all) and "carol" (partial grants), authenticated on
// the SASL listener, and must answer the same once diff_test.go's
// normaliser has run (compareResponses, normaliseResponse: the harness of
// TestDifferential, sent as a principal).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/mirrord/mirrord/mirrordtest"
)

const (
	authzSuperUsers = "User:admin;User:ANONYMOUS" // ANONYMOUS: the PLAINTEXT listeners, the broker's own probes and controller
	authzAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
)

// authzUsers are the principals the cases are sent as, password = name.
var authzUsers = []string{"bob", "carol"}

// authzServer is one server of the test: its PLAINTEXT address (the super
// user's) and how to open an authenticated connection as a user.
type authzServer struct {
	diffServer
	dialAs func(ctx context.Context, user string) (*rawConn, error)
}

// authzCase is one request sent as user to both servers.
type authzCase struct {
	name    string
	user    string
	version int16
	request func(server diffServer) kmsg.Request
}

func TestDifferentialAuthorization(t *testing.T) {
	t.Parallel()
	var users []kafkatest.ScramUser
	for _, name := range authzUsers {
		users = append(users, kafkatest.ScramUser{Mechanism: "SCRAM-SHA-512", Name: name, Password: name})
	}
	cluster, secure := startSecureKafka(t, map[string]string{"authorizer.class.name": authzAuthorizer, "super.users": authzSuperUsers}, users...)
	kafka := authzServer{diffServer: describeDiffServer(t, cluster.Nodes[0].Addr), dialAs: kafkaSCRAMDialer(t, cluster.Nodes[0].SASLSSLAddr, secure.TruststoreLocation)}
	mirrord := startAuthorizedMirrord(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, server := range []authzServer{kafka, mirrord} {
		for _, req := range authzSetup() {
			resp, err := rawRequest(ctx, server.addr, req)
			if err != nil {
				t.Fatalf("setup %s on %s: %v", kmsg.NameForKey(req.Key()), server.addr, err)
			}
			if err := awaitCreatedTopics(ctx, server.addr, req, resp); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, server := range []authzServer{kafka, mirrord} {
		if err := awaitAuthzCoordinators(ctx, server.diffServer); err != nil {
			t.Fatalf("coordinators of %s: %v", server.addr, err)
		}
	}
	for _, c := range authzCases() {
		t.Run(c.user+"/"+c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), diffCaseWait)
			defer cancel()
			send := func(server authzServer) kmsg.Response {
				conn, err := server.dialAs(ctx, c.user)
				if err != nil {
					t.Fatalf("%s as %s: %v", server.addr, c.user, err)
				}
				defer conn.close()
				req := c.request(server.diffServer)
				req.SetVersion(c.version)
				resp, err := conn.request(ctx, req)
				if err != nil {
					t.Fatalf("%s to %s: %v", kmsg.NameForKey(req.Key()), server.addr, err)
				}
				normaliseResponse(resp)
				normaliseAuthzResponse(resp)
				return resp
			}
			fromK, fromM := send(kafka), send(mirrord)
			compareResponses(t, fmt.Sprintf("%s v%d as %s", c.name, c.version, c.user), fromK, fromM)
		})
	}
}

// awaitAuthzCoordinators waits, as the super user, until the server's
// group and transaction coordinators answer for the test's group and
// transactional ID: a new Kafka creates __consumer_offsets and
// __transaction_state on first use and answers COORDINATOR_NOT_AVAILABLE
// or NOT_COORDINATOR until it has loaded them, which would hide the
// authorization answers the cases compare.
func awaitAuthzCoordinators(ctx context.Context, server diffServer) error {
	if err := awaitTxnCoordinators(server); err != nil {
		return err
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: authzGroup}}
	describe := kmsg.NewPtrDescribeTransactionsRequest()
	describe.TransactionalIDs = []string{authzTxn}
	for _, req := range []kmsg.Request{fetch, describe} {
		err := pollTxn(ctx, func() (bool, error) {
			resp, err := rawRequest(ctx, server.addr, req)
			if err != nil {
				return false, err
			}
			var code int16
			switch r := resp.(type) {
			case *kmsg.OffsetFetchResponse:
				code = r.Groups[0].ErrorCode
			case *kmsg.DescribeTransactionsResponse:
				code = r.TransactionStates[0].ErrorCode
			}
			return !slices.Contains(txnLoading, code), nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", kmsg.NameForKey(req.Key()), err)
		}
	}
	return nil
}

// authzPermissionMessage is Kafka's ClusterAuthorizationException text,
// "Request <the request's connection and session> needs <op> permission.":
// free text but for the operation, which stays compared.
var authzPermissionMessage = regexp.MustCompile(`^Request .* needs ([A-Z_]+) permission\.$`)

// normaliseAuthzResponse makes equal, after normaliseResponse, what
// legitimately differs in this test's answers, and the known differences
// (each with its reason):
//   - topic IDs in DescribeTopicPartitions and ConsumerGroupHeartbeat
//     answers, and the coordinator's node, host and port in FindCoordinator
//     answers (normaliseResponse does not know these APIs);
//   - the order of ConsumerGroupHeartbeat's assigned topics (by topic ID,
//     random, in both), sorted by their partitions once the IDs are equal;
//   - ConsumerGroupHeartbeat's member epoch, when positive: Kafka
//     answered 2 where mirrord answers 1, its group epoch depending on
//     what the earlier cases did to the group (not verified further: not
//     an authorization answer);
//   - the free text of Kafka's "Request ... needs X permission." (the
//     operation is kept);
//   - known difference: the order of Produce's, ListOffsets' and
//     AddPartitionsToTxn's topics, sorted by name here: Kafka answers them
//     in hash order (Produce's by TopicIdPartition, whose random topic ID
//     changes it from run to run; ReplicaManager.fetchOffset groups a
//     mutable.Map by topic; AddPartitionsToTxn builds its answer from a
//     HashMap), mirrord in request order;
//   - known difference: the order of DescribeTopicPartitions' denied
//     topics, which both answer after the described ones: Kafka adds
//     them from a java.util.HashSet (hash order), mirrord in name order.
func normaliseAuthzResponse(resp kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.ConsumerGroupHeartbeatResponse:
		if r.MemberEpoch > 0 {
			r.MemberEpoch = 1
		}
		if r.Assignment != nil {
			assigned := r.Assignment.Topics
			for i := range assigned {
				normaliseTopicID(&assigned[i].TopicID)
			}
			sort.SliceStable(assigned, func(i, j int) bool { return slices.Compare(assigned[i].Partitions, assigned[j].Partitions) < 0 })
		}
	case *kmsg.DescribeTopicPartitionsResponse:
		described := len(r.Topics)
		for described > 0 && r.Topics[described-1].ErrorCode == kerr.TopicAuthorizationFailed.Code {
			described--
		}
		for i := range r.Topics {
			normaliseTopicID(&r.Topics[i].TopicID)
		}
		denied := r.Topics[described:]
		sort.SliceStable(denied, func(i, j int) bool { return *denied[i].Topic < *denied[j].Topic })
	case *kmsg.FindCoordinatorResponse:
		for i := range r.Coordinators {
			if c := &r.Coordinators[i]; c.NodeID >= 0 {
				c.NodeID, c.Host, c.Port = diffNodeIDBase, diffHost, 0
			}
		}
	case *kmsg.ProduceResponse:
		sort.SliceStable(r.Topics, func(i, j int) bool { return r.Topics[i].Topic < r.Topics[j].Topic })
	case *kmsg.ListOffsetsResponse:
		sort.SliceStable(r.Topics, func(i, j int) bool { return r.Topics[i].Topic < r.Topics[j].Topic })
	case *kmsg.AddPartitionsToTxnResponse:
		sort.SliceStable(r.Topics, func(i, j int) bool { return r.Topics[i].Topic < r.Topics[j].Topic })
	case *kmsg.DescribeACLsResponse:
		normalisePermissionMessage(r.ErrorMessage)
	case *kmsg.CreateACLsResponse:
		for i := range r.Results {
			normalisePermissionMessage(r.Results[i].ErrorMessage)
		}
	case *kmsg.DeleteACLsResponse:
		for i := range r.Results {
			normalisePermissionMessage(r.Results[i].ErrorMessage)
		}
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		for i := range r.Results {
			normalisePermissionMessage(r.Results[i].ErrorMessage)
		}
	}
}

func normalisePermissionMessage(s *string) {
	if s == nil {
		return
	}
	if m := authzPermissionMessage.FindStringSubmatch(*s); m != nil {
		*s = "Request (request) needs " + m[1] + " permission."
	}
}

// startAuthorizedMirrord runs mirrord with the authorizer and a
// SASL_PLAINTEXT listener whose PLAIN users are authzUsers and admin.
func startAuthorizedMirrord(t *testing.T) authzServer {
	t.Helper()
	saslAddr, err := mirrordtest.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin"`
	for _, user := range authzUsers {
		jaas += fmt.Sprintf(` user_%s="%s"`, user, user)
	}
	config := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(config, []byte("listener.name.sasl_plaintext.plain.sasl.jaas.config="+jaas+";\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := startServer(t, "--config", config, "--sasl-listen", saslAddr, "--sasl-enabled-mechanisms", "PLAIN",
		"--authorizer-class-name", authzAuthorizer, "--super-users", authzSuperUsers)
	return authzServer{diffServer: describeDiffServer(t, m.addr), dialAs: func(ctx context.Context, user string) (*rawConn, error) {
		c, err := dialRaw(ctx, saslAddr)
		if err != nil {
			return nil, err
		}
		return c, authenticateRaw(ctx, c, plain.Auth{User: user, Pass: user}.AsMechanism())
	}}
}

// kafkaSCRAMDialer opens TLS connections to Kafka's SASL_SSL listener and
// authenticates with SCRAM-SHA-512.
func kafkaSCRAMDialer(t *testing.T, addr, truststore string) func(context.Context, string) (*rawConn, error) {
	t.Helper()
	pem, err := os.ReadFile(truststore)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", truststore)
	}
	return func(ctx context.Context, user string) (*rawConn, error) {
		c, err := dialRaw(ctx, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(c.nc, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
		if err := tc.HandshakeContext(ctx); err != nil {
			c.close()
			return nil, err
		}
		c.nc = tc
		return c, authenticateRaw(ctx, c, scram.Auth{User: user, Pass: user}.AsSha512Mechanism())
	}
}

// authenticateRaw runs SaslHandshake v1 and SaslAuthenticate v2 for the
// mechanism on a raw connection; the connection is closed on an error.
func authenticateRaw(ctx context.Context, c *rawConn, mechanism sasl.Mechanism) (err error) {
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	handshake := kmsg.NewPtrSASLHandshakeRequest()
	handshake.Version, handshake.Mechanism = 1, mechanism.Name()
	resp, err := c.request(ctx, handshake)
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		return fmt.Errorf("SaslHandshake %s: error %d", mechanism.Name(), code)
	}
	session, message, err := mechanism.Authenticate(ctx, "127.0.0.1")
	if err != nil {
		return err
	}
	for range 4 { // SCRAM takes two round trips, PLAIN one
		authenticate := kmsg.NewPtrSASLAuthenticateRequest()
		authenticate.Version, authenticate.SASLAuthBytes = 2, message
		resp, err := c.request(ctx, authenticate)
		if err != nil {
			return err
		}
		answer := resp.(*kmsg.SASLAuthenticateResponse)
		if answer.ErrorCode != 0 {
			return fmt.Errorf("SaslAuthenticate: error %d %v", answer.ErrorCode, answer.ErrorMessage)
		}
		done, next, err := session.Challenge(answer.SASLAuthBytes)
		if err != nil || done {
			return err
		}
		message = next
	}
	return fmt.Errorf("SaslAuthenticate: %s did not finish in 4 round trips", mechanism.Name())
}
