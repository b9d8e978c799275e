// Package e2e is the process-level end-to-end suite of the Kafka endpoint:
// it builds cmd/mirrord once (TestMain), starts `mirrord serve` as a real
// process (mirrordtest) on a free loopback port with a temporary data directory, and
// drives it with real clients, franz-go's kgo and kcat (librdkafka).
//
// What it checks:
//
//   - kgo producers of every codec, idempotent, plain and transactional,
//     then ConsumePartitions compares keys, values, headers, timestamps
//     and offsets with what the producers had acknowledged;
//   - consumer groups with real clients (groups_*_test.go): Kafka's
//     VerifiableConsumer (classic and KIP-848), kafka-consumer-groups,
//     kcat -G, franz-go; offsets surviving kill -9; applications failing
//     over from Kafka to mirrord on the synced group offsets;
//   - the stored batches, fetched raw, are well formed (CRC-32C), keep the
//     producer's codec, and are identical byte for byte after kill -9 and a
//     restart, and after a clean stop (SIGTERM) and a restart;
//   - kcat lists metadata (-L), consumes (-C) and produces (-P);
//   - security (sasl_test.go, acl_tools_test.go, tls_test.go): Kafka's
//     tools and kcat over SASL_SSL and SSL listeners, kafka-acls against
//     the authorizer, the mirror admin CLI refused without credentials.
//
// The server's log goes to a file that is printed when a test fails. Under
// -race the server is built with the race detector too, and a race report
// in its log fails the test.
// $MIRRORD_E2E_BINARY names a mirrord to test instead of building one.
// kcat comes from $MIRRORD_KCAT, .cache/bin/kcat (scripts/install-kcat.sh,
// run by `make tools`) or PATH; without it the kcat tests fail under
// CI=true and skip otherwise.
//
// Every loop is bounded in count and every wait has a deadline; nothing
// sleeps to wait for something.
//
// The top-level tests call t.Parallel: most of their time is spent
// waiting (JVM start-ups, session timeouts, mirrors catching up), and each
// has its own mirrord processes, Kafka brokers, temporary directories and
// free loopback ports, and changes no package variable. go test runs
// -parallel of them at once (GOMAXPROCS by default) after the serial
// ones. A test that sets the environment (t.Setenv: the JVMs of every
// test would see it) stays serial, and so does one whose bound proved too
// tight beside another (its comment says which).
package e2e

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/mirrord/mirrord/mirrordtest"
)

// mirrordBinary is the mirrord built by TestMain for this test binary.
var mirrordBinary string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	flag.Parse() // for testing.Verbose
	defer closeSharedKafka()
	if mirrordBinary = os.Getenv("MIRRORD_E2E_BINARY"); mirrordBinary != "" {
		return m.Run()
	}
	var build mirrordtest.Binary
	defer build.Remove()
	started := time.Now()
	var err error
	if mirrordBinary, err = build.Path(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "e2e: built %s (race detector: %v) in %v\n", mirrordBinary, mirrordtest.RaceEnabled, time.Since(started).Round(time.Millisecond))
	}
	return m.Run()
}
