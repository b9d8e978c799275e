package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mirrord/mirrord/kafkatest"
)

// secureUser is the SCRAM-SHA-512 user of the secured Kafka source.
var secureUser = kafkatest.ScramUser{Mechanism: "SCRAM-SHA-512", Name: "mirror", Password: "mirror-Scram-secret"}

// startSecureKafka starts a one-broker Kafka 4.4 with a SASL_SSL listener
// (SCRAM-SHA-512, the users given) beside its PLAINTEXT one: the secured
// source the SASL and ACL sync tests share. config adds broker properties
// (an authorizer, super.users).
func startSecureKafka(t *testing.T, config map[string]string, users ...kafkatest.ScramUser) (*kafkatest.Cluster, *kafkatest.SASLSSL) {
	t.Helper()
	secure, err := kafkatest.NewSASLSSL(t.TempDir(), users...)
	if err != nil {
		t.Fatal(err)
	}
	return startKafkaCluster(t, kafkatest.Options{Brokers: 1, Config: config, SASLSSL: secure}), secure
}

// secureMirrorConfig is the mirror config of a SASL_SSL source for user.
func secureMirrorConfig(t *testing.T, cluster *kafkatest.Cluster, secure *kafkatest.SASLSSL, user kafkatest.ScramUser) string {
	return writeProperties(t, fmt.Sprintf(`bootstrap.servers=%s
security.protocol=SASL_SSL
ssl.truststore.location=%s
sasl.mechanism=%s
sasl.jaas.config=%s
mirror.metadata.refresh.interval.ms=500
fetch.wait.max.ms=100
`, cluster.SASLSSLBootstrap(), secure.TruststoreLocation, user.Mechanism, user.JAASConfig()))
}

// TestInteropKafkaSASLSSLSource: mirrord mirrors from a Kafka 4.4 whose
// listener is SASL_SSL with SCRAM-SHA-512 (TLS verified against the
// source's CA, host name included): a wrong password is refused at
// --create with Kafka's SASL_AUTHENTICATION_FAILED, the right one mirrors
// plain, compressed and transactional batches byte for byte with the
// topic IDs.
func TestInteropKafkaSASLSSLSource(t *testing.T) {
	t.Parallel()
	cluster, secure := startSecureKafka(t, nil, secureUser)
	ctx, cancel := context.WithTimeout(context.Background(), interopDeadline)
	defer cancel()
	kafka := cluster.Bootstrap() // PLAINTEXT: the test's own writes and reads
	maker := newRecordMaker(newSeed(t))
	topics := map[string]int32{"sec-orders": 2, "sec-txn": 2}
	for name, partitions := range topics {
		createKafkaTopic(ctx, t, kafka, name, partitions, 1, nil)
	}
	produceTo(ctx, t, newClient(t, kafka, kgo.ProducerBatchCompression(kgo.ZstdCompression())), maker, topicPartition{"sec-orders", 0}, 500, newLedger())
	produceTo(ctx, t, newClient(t, kafka), maker, topicPartition{"sec-orders", 1}, 300, newLedger())
	produceTransactions(ctx, t, kafka, maker, "sec-txn", 0)

	mirror := startServer(t)
	wrong := secureUser
	wrong.Password = "not-the-password"
	result := runMirrors(ctx, t, mirror.addr, "--create", "--mirror", "wrong", "--mirror-config", secureMirrorConfig(t, cluster, secure, wrong))
	result.wantOneLineError(t, "SASL_AUTHENTICATION_FAILED")

	started := time.Now()
	runMirrorsOK(ctx, t, mirror.addr, "--create", "--mirror", "m", "--mirror-config", secureMirrorConfig(t, cluster, secure, secureUser))
	runMirrorsOK(ctx, t, mirror.addr, "--start", "--mirror", "m", "--topics", "sec-.*")
	produceTo(ctx, t, newClient(t, kafka, kgo.ProducerBatchCompression(kgo.Lz4Compression())), maker, topicPartition{"sec-orders", 0}, 200, newLedger())
	tps := topicPartitions(topics)
	ends := waitMirrorCaughtUp(ctx, t, kafka, mirror.addr, tps)
	t.Logf("mirrored over SASL_SSL (SCRAM-SHA-512) to %v in %v", ends, time.Since(started).Round(time.Millisecond))

	kafkaIDs, mirrorIDs := topicIDs(ctx, t, kafka, topics), topicIDs(ctx, t, mirror.addr, topics)
	for name, id := range kafkaIDs {
		if mirrorIDs[name] != id {
			t.Errorf("topic %s: mirrord's ID %v, Kafka's %v", name, mirrorIDs[name], id)
		}
	}
	compareMirrored(t, readAll(ctx, t, kafka, tps), readAll(ctx, t, mirror.addr, tps))
}
