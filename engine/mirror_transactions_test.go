package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMirrorTransactions mirrors committed, aborted and open transactions
// from a mirrord and from kfake: a read_committed consumer reads the same
// records at the same offsets from both, the last stable offsets match,
// and while a transaction is open at the source the mirror's last stable
// offset stays at its first offset until the source commits it.
func TestMirrorTransactions(t *testing.T) {
	sources := []struct {
		name  string
		start func(t *testing.T, topic string, partitions int32) string
	}{
		{"mirrord", func(t *testing.T, topic string, partitions int32) string {
			node, addr := startNode(t, filepath.Join(t.TempDir(), "source"))
			createTopic(t, node, topic, partitions)
			return addr
		}},
		{"kfake", func(t *testing.T, topic string, partitions int32) string {
			cluster, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(partitions, topic))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cluster.Close)
			return cluster.ListenAddrs()[0]
		}},
	}
	for i, s := range sources {
		t.Run(s.name, func(t *testing.T) {
			seed := uint64(100 + i)
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 1))
			const topic, partitions = "payments", int32(2)
			sourceAddr := s.start(t, topic, partitions)
			committed := produceTransactions(t, sourceAddr, topic, partitions, rng)
			target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
			mirrorTopic(t, target, sourceAddr, topic)
			source, targetClient := newClient(t, sourceAddr), newClient(t, targetAddr)
			waitConverged(t, source, target, targetClient, topic, partitions)
			compareCommitted(t, source, targetClient, sourceAddr, targetAddr, topic, partitions, committed)

			// A transaction left open at the source.
			open, firstOffsets, pending := beginOpenTransaction(t, sourceAddr, topic, partitions, rng)
			waitConverged(t, source, target, targetClient, topic, partitions)
			for p := range partitions {
				lso := lastStableOffset(t, targetClient, topic, p)
				if lso != firstOffsets[p] {
					t.Fatalf("partition %d: mirror last stable offset %d with a transaction open from %d", p, lso, firstOffsets[p])
				}
				if n := committedBytesAt(t, targetClient, topic, p, lso); n != 0 {
					t.Fatalf("partition %d: read_committed at the last stable offset %d returned %d bytes", p, lso, n)
				}
			}
			compareCommitted(t, source, targetClient, sourceAddr, targetAddr, topic, partitions, committed)

			// The source commits it: the mirror's last stable offset
			// reaches its high watermark, and its records are readable.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := open.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			for p, n := range pending {
				committed[p] += n
			}
			waitConverged(t, source, target, targetClient, topic, partitions)
			for p := range partitions {
				_, _, offsets := rawPartition(t, targetClient, topic, p)
				if lso := lastStableOffset(t, targetClient, topic, p); lso != offsets[1] {
					t.Fatalf("partition %d: mirror last stable offset %d after the commit, high watermark %d", p, lso, offsets[1])
				}
			}
			compareCommitted(t, source, targetClient, sourceAddr, targetAddr, topic, partitions, committed)
		})
	}
}

// compareCommitted checks that the last stable offsets match and that a
// read_committed consumer reads committed[p] records from each, the same.
func compareCommitted(t *testing.T, source, target *kgo.Client, sourceAddr, targetAddr, topic string, partitions int32, committed map[int32]int) {
	t.Helper()
	for p := range partitions {
		if got, want := lastStableOffset(t, target, topic, p), lastStableOffset(t, source, topic, p); got != want {
			t.Fatalf("partition %d: mirror last stable offset %d, source %d", p, got, want)
		}
		want := readRecords(t, sourceAddr, topic, p, committed[p])
		if got := readRecords(t, targetAddr, topic, p, committed[p]); !slices.Equal(got, want) {
			t.Fatalf("partition %d: read_committed from the mirror\n%v\nfrom the source\n%v", p, got, want)
		}
	}
}

// produceTransactions writes plain records and transactions over every
// partition, committed and aborted (both at least once), and returns the
// records a read_committed consumer reads per partition.
func produceTransactions(t *testing.T, addr, topic string, partitions int32, rng *rand.Rand) map[int32]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	plain, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	txn, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("paths-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	committed := map[int32]int{}
	for round, commit := range []bool{true, false, rng.IntN(2) == 0, false, true} {
		for p := range partitions {
			n := 1 + rng.IntN(3)
			produceRecords(ctx, t, plain, topic, p, n, fmt.Sprintf("plain round %d", round))
			committed[p] += n
		}
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range partitions {
			n := 1 + rng.IntN(4)
			produceRecords(ctx, t, txn, topic, p, n, fmt.Sprintf("txn round %d commit=%v", round, commit))
			if commit {
				committed[p] += n
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	return committed
}

// beginOpenTransaction produces records to every partition in a
// transaction it leaves open (opts: more producer options), and returns the producer, the
// transaction's first offset and its number of records per partition.
func beginOpenTransaction(t *testing.T, addr, topic string, partitions int32, rng *rand.Rand, opts ...kgo.Opt) (*kgo.Client, map[int32]int64, map[int32]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.TransactionalID("paths-open"), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)
	open, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(open.Close)
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	first, records := map[int32]int64{}, map[int32]int{}
	for p := range partitions {
		records[p] = 1 + rng.IntN(3)
		first[p] = produceRecords(ctx, t, open, topic, p, records[p], "open txn")
	}
	return open, first, records
}

// produceRecords produces n records to one partition, one at a time, and
// returns the first one's offset.
func produceRecords(ctx context.Context, t *testing.T, client *kgo.Client, topic string, partition int32, n int, label string) int64 {
	t.Helper()
	first := int64(-1)
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: partition, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s record %d", label, i)}
		if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to %s-%d: %v", topic, partition, err)
		}
		if first < 0 {
			first = r.Offset
		}
	}
	return first
}

// lastStableOffset asks ListOffsets for the latest read_committed offset.
func lastStableOffset(t *testing.T, client *kgo.Client, topic string, partition int32) int64 {
	t.Helper()
	return listOffsets(t, client, topic, partition, -1, 1)
}

// committedBytesAt is the size of the records a read_committed Fetch at
// offset returns at once.
func committedBytesAt(t *testing.T, client *kgo.Client, topic string, partition int32, offset int64) int {
	t.Helper()
	_, id, _ := rawPartition(t, client, topic, partition)
	req := kmsg.NewPtrFetchRequest()
	req.Version = 13
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.IsolationLevel = -1, 0, 1<<20, 1
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID, rt.Topic = id, topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = partition, offset, -1, -1, -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := client.Request(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	answer := kresp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if answer.ErrorCode != 0 {
		t.Fatalf("fetch %s-%d read_committed at %d: error %d", topic, partition, offset, answer.ErrorCode)
	}
	return len(answer.RecordBatches)
}
