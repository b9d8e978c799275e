package engine

import (
	"context"
	"fmt"
	"github.com/mirrord/mirrord/broker"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMirrorRestartsBelowSourceLogStart pauses a mirror while the source
// (a mirrord) gets more records and deletes records past the mirror's log
// end: in the middle of a batch on partition 0, everything on partition
// 1. On resume the source answers OFFSET_OUT_OF_RANGE; the mirror must
// restart at the source's log start and converge, with the same log start.
func TestMirrorRestartsBelowSourceLogStart(t *testing.T) {
	const seed = 7
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	sourceNode, sourceAddr := startNode(t, filepath.Join(t.TempDir(), "source"))
	target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
	createTopic(t, sourceNode, "retained", 2)
	source, targetClient := newClient(t, sourceAddr), newClient(t, targetAddr)
	for p := range int32(2) {
		produceBatches(t, sourceAddr, "retained", p, rng, 3)
	}
	mirrorTopic(t, target, sourceAddr, "retained")
	waitConverged(t, source, target, targetClient, "retained", 2)

	setMirroring(t, target, netio.PauseMirroring, "retained")
	mirrorEnd := localPartition(t, target, "retained", 0).Log().LogEndOffset()
	for p := range int32(2) {
		produceBatches(t, sourceAddr, "retained", p, rng, 4)
	}
	ctx := context.Background()
	p0, p1 := localPartition(t, sourceNode, "retained", 0), localPartition(t, sourceNode, "retained", 1)
	deleteTo := midBatchOffsetAfter(t, p0, mirrorEnd)
	if _, err := p0.DeleteRecords(ctx, deleteTo); err != nil {
		t.Fatal(err)
	}
	if _, err := p1.DeleteRecords(ctx, -1); err != nil {
		t.Fatal(err)
	}
	setMirroring(t, target, netio.ResumeMirroring, "retained")
	waitConverged(t, source, target, targetClient, "retained", 2)
	for p, sourcePartition := range []*broker.Partition{p0, p1} {
		if got, want := localPartition(t, target, "retained", int32(p)).Offsets(), sourcePartition.Offsets(); got != want {
			t.Errorf("partition %d: mirror offsets %+v, source %+v", p, got, want)
		}
		if got, want := localPartition(t, target, "retained", int32(p)).Log().Epochs(), sourcePartition.Log().Epochs(); !slices.Equal(got, want) {
			t.Errorf("partition %d: mirror epochs %v, source %v", p, got, want)
		}
	}

	// It goes on mirroring from there.
	for p := range int32(2) {
		produceBatches(t, sourceAddr, "retained", p, rng, 2)
	}
	waitConverged(t, source, target, targetClient, "retained", 2)
}

// midBatchOffsetAfter returns an offset inside a batch of several
// records that starts after offset.
func midBatchOffsetAfter(t *testing.T, p *broker.Partition, offset rb.Offset) rb.Offset {
	t.Helper()
	found := rb.Offset(-1)
	err := p.Log().WalkBatches(offset, func(b rb.Batch) bool {
		if b.BaseOffset() > offset && b.LastOffsetDelta() > 0 {
			found = b.BaseOffset() + 1
			return false
		}
		return true
	})
	if err != nil || found < 0 {
		t.Fatalf("no batch of several records after %d (%v)", offset, err)
	}
	return found
}

// TestMirrorCompactedSource mirrors partitions with offset gaps: after
// kfake's compaction (batches dropped, or rebuilt without the records a
// later key replaced, keeping their offsets), and batches written at
// chosen offsets into a mirrord source's log. The gaps and offsets are kept byte for byte, and a client
// reads the same records at the same offsets from both.
func TestMirrorCompactedSource(t *testing.T) {
	t.Run("kfake", func(t *testing.T) {
		const seed = 42
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, 1))
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		defer cluster.Close()
		sourceAddr := cluster.ListenAddrs()[0]
		source := newClient(t, sourceAddr)
		compact := "compact"
		if _, err := kadm.NewClient(source).CreateTopic(context.Background(), 2, 1, map[string]*string{"cleanup.policy": &compact}, "compacted"); err != nil {
			t.Fatal(err)
		}
		for p := range int32(2) {
			produceBatches(t, sourceAddr, "compacted", p, rng, 12)
		}
		cluster.Compact()
		for p := range int32(2) {
			if raw, _, _ := rawPartition(t, source, "compacted", p); !hasGaps(raw) {
				t.Fatalf("partition %d: compaction left no gaps", p)
			}
		}
		target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
		mirrorTopic(t, target, sourceAddr, "compacted")
		targetClient := newClient(t, targetAddr)
		waitConverged(t, source, target, targetClient, "compacted", 2)
		for p := range int32(2) {
			sameRecords(t, sourceAddr, targetAddr, "compacted", p)
		}
	})
	t.Run("mirrord", func(t *testing.T) {
		sourceNode, sourceAddr := startNode(t, filepath.Join(t.TempDir(), "source"))
		createTopic(t, sourceNode, "gaps", 1)
		sourcePartition := localPartition(t, sourceNode, "gaps", 0)
		// A gap before the first batch, between batches, and epochs
		// that change across gaps.
		var batches []byte
		for i, at := range []struct {
			base    rb.Offset
			epoch   rb.Epoch
			records int
		}{{2, 0, 3}, {7, 0, 1}, {8, 1, 2}, {20, 1, 1}, {31, 4, 4}, {90, 6, 2}} {
			batches = appendTestBatch(batches, at.base, at.epoch, at.records, fmt.Sprintf("gap batch %d", i))
		}
		if _, err := sourcePartition.AppendMirrored(batches); err != nil {
			t.Fatal(err)
		}
		target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
		mirrorTopic(t, target, sourceAddr, "gaps")
		source, targetClient := newClient(t, sourceAddr), newClient(t, targetAddr)
		waitConverged(t, source, target, targetClient, "gaps", 1)
		sameRecords(t, sourceAddr, targetAddr, "gaps", 0)

		// Records produced at the source after the gaps follow them.
		produceBatches(t, sourceAddr, "gaps", 0, rand.New(rand.NewPCG(3, 1)), 2)
		waitConverged(t, source, target, targetClient, "gaps", 1)
		sameRecords(t, sourceAddr, targetAddr, "gaps", 0)
		if got, want := localPartition(t, target, "gaps", 0).Log().Epochs(), sourcePartition.Log().Epochs(); !slices.Equal(got, want) {
			t.Errorf("mirror epochs %v, source %v", got, want)
		}
	})
}

// hasGaps reports whether batches skip an offset: between batches, or
// inside one (fewer records than offsets).
func hasGaps(batches []byte) bool {
	next := rb.Offset(-1)
	for it := rb.NewIter(batches, false); it.Next(); {
		b := it.Batch()
		if next >= 0 && b.BaseOffset() != next || int64(b.RecordCount()) != int64(b.LastOffsetDelta())+1 {
			return true
		}
		next = b.NextOffset()
	}
	return false
}

// sameRecords reads a partition with a franz-go consumer from the source
// and from the mirror and compares the records and their offsets.
func sameRecords(t *testing.T, sourceAddr, targetAddr, topic string, partition int32) {
	t.Helper()
	want := readRecords(t, sourceAddr, topic, partition, -1)
	if got := readRecords(t, targetAddr, topic, partition, len(want)); !slices.Equal(got, want) {
		t.Fatalf("%s-%d: the mirror reads\n%v\nthe source\n%v", topic, partition, got, want)
	}
}

// produceBatches produces count batches of 1-6 records, with keys from a
// small set (so that compaction finds duplicates), to one partition. The
// records of a batch are flushed together, so the batches do not depend
// on timing.
func produceBatches(t *testing.T, addr, topic string, partition int32, rng *rand.Rand, count int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ManualFlushing(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for range count {
		n := 1 + rng.IntN(6)
		results := make(chan error, n)
		for range n {
			r := &kgo.Record{Topic: topic, Partition: partition, Key: fmt.Appendf(nil, "key-%d", rng.IntN(6)), Value: fmt.Appendf(nil, "value %d", rng.Uint64())}
			client.Produce(ctx, r, func(_ *kgo.Record, err error) { results <- err })
		}
		if err := client.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := <-results; err != nil {
				t.Fatalf("produce to %s-%d: %v", topic, partition, err)
			}
		}
	}
}
