package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
	"github.com/mirrord/mirrord/vfs"
)

// openCleanerNode is a node over memory whose cleaner looks every few
// milliseconds, with a compacted topic of small segments.
func openCleanerNode(t *testing.T, configs map[string]string) (*Node, *Partition) {
	t.Helper()
	cfg := logstore.DefaultConfig()
	cfg.Flush = logstore.FlushEveryAppend
	n, err := Open(Config{FS: vfs.NewMem(), DataDir: "/data", Log: cfg, Cleaner: CleanerConfig{Backoff: 5 * time.Millisecond, DedupeBufferBytes: 1 << 20}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	all := map[string]string{"cleanup.policy": "compact", "internal.segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}
	for k, v := range configs {
		all[k] = v
	}
	if _, err := n.CreateTopic(context.Background(), "compacted", 1, all, false); err != nil {
		t.Fatal(err)
	}
	p, err := n.LocalPartition("compacted", 0)
	if err != nil {
		t.Fatal(err)
	}
	return n, p
}

func keyedBatch(key, value string) []byte {
	return rb.Append(nil, rb.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, Records: []rb.Record{{Key: []byte(key), Value: []byte(value)}}})
}

// latestValues reads the partition from its log start: each key's last
// value, and the number of records.
func latestValues(t *testing.T, p *Partition) (map[string]string, int) {
	t.Helper()
	values, count := map[string]string{}, 0
	offset := p.log.LogStartOffset()
	for range 10_000 {
		buf, err := p.log.ReadBytes(nil, offset, 1<<20, p.log.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		if len(buf) == 0 {
			return values, count
		}
		for it := rb.NewIter(buf, true); it.Next(); {
			b := it.Batch()
			offset = b.NextOffset()
			section, err := records.Decompress(nil, b, 0)
			if err != nil {
				t.Fatal(err)
			}
			for rit := records.NewIter(section); rit.Next(); {
				if !b.Control() {
					values[string(rit.Record().Key)] = string(rit.Record().Value)
					count++
				}
			}
		}
	}
	t.Fatal("read of the log did not end")
	return nil, 0
}

// TestCleanerCompactsWhileProducing: the node's cleaner compacts a
// compacted topic on its own while produces go on, keeping each key's
// latest value.
func TestCleanerCompactsWhileProducing(t *testing.T) {
	n, p := openCleanerNode(t, nil)
	want := map[string]string{}
	produced := 0
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		key, value := fmt.Sprintf("k%d", i%5), fmt.Sprintf("v%d", i)
		if _, err := produceTo(p, keyedBatch(key, value), ""); err != nil {
			t.Fatal(err)
		}
		want[key] = value
		produced++
		cleanings, _, written := n.CleanerStats()
		if cleanings > 0 && written > 0 && produced >= 100 {
			break
		}
		if i > 100_000 || time.Now().After(deadline) {
			t.Fatalf("no cleaning after %d produces", produced)
		}
		if i >= 100 {
			time.Sleep(time.Millisecond) // pace the produces; the condition is polled above
		}
	}
	// Stop producing and let the cleaner catch up: poll until the log is
	// compact below its active segment.
	for i := 0; ; i++ {
		got, count := latestValues(t, p)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("latest values %v, want %v", got, want)
		}
		if count < produced/2 && p.log.CleanerOffset() > 0 {
			t.Logf("%d records produced, %d left, cleaner checkpoint %d", produced, count, p.log.CleanerOffset())
			return
		}
		if i == 2000 {
			t.Fatalf("%d of %d records left after 2000 polls", count, produced)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCleanerRebuildsAbortedIndex: once a cleaning drops an ABORT marker
// (its transaction's batches gone, its delete horizon passed), the
// aborted-transaction index no longer names the transaction, so a
// read_committed consumer does not drop the producer's later, committed
// batches.
func TestCleanerRebuildsAbortedIndex(t *testing.T) {
	_, p := openCleanerNode(t, map[string]string{"delete.retention.ms": "0"})
	now := time.Now().UnixMilli()
	marker := func(offset rb.Offset, kind byte) []byte {
		return rb.Append(nil, rb.Spec{BaseOffset: offset, BaseTimestamp: now, ProducerID: 9, Transactional: true, Control: true,
			Records: []rb.Record{{Key: []byte{0, 0, 0, kind}, Value: []byte{0, 0, 0, 0, 0, 0}}}})
	}
	txn := func(offset rb.Offset, key string, sequence int32) []byte {
		return rb.Append(nil, rb.Spec{BaseOffset: offset, BaseTimestamp: now, ProducerID: 9, BaseSequence: sequence, Transactional: true,
			Records: []rb.Record{{Key: []byte(key), Value: []byte("t")}}})
	}
	var batches []byte
	batches = append(batches, txn(0, "a", 0)...)
	batches = append(batches, marker(1, 0)...) // ABORT
	batches = append(batches, txn(2, "b", 1)...)
	batches = append(batches, marker(3, 1)...) // COMMIT
	if _, err := p.AppendMirrored(batches); err != nil {
		t.Fatal(err)
	}
	if got := p.abortedTransactions(0, 4); len(got) != 1 {
		t.Fatalf("aborted transactions before cleaning: %v", got)
	}
	for i := 0; ; i++ {
		if i == 3000 {
			t.Fatalf("the ABORT marker is still there or still indexed after %d produces: %v", i, p.abortedTransactions(0, p.log.LogEndOffset()))
		}
		if _, err := produceTo(p, keyedBatch(fmt.Sprintf("f%d", i%3), "x"), ""); err != nil {
			t.Fatal(err)
		}
		abortGone := true
		if err := p.log.WalkBatches(0, func(b rb.Batch) bool {
			if kind, err := records.ControlType(b); b.Control() && err == nil && kind == records.ControlAbort {
				abortGone = false
			}
			return abortGone
		}); err != nil {
			t.Fatal(err)
		}
		if abortGone && len(p.abortedTransactions(0, p.log.LogEndOffset())) == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// The committed batch of the same producer is read by read_committed.
	res, err := p.Read(2, 1<<20, netio.ReadCommitted, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records.Release != nil {
		res.Records.Release()
	}
	if len(res.AbortedTransactions) != 0 {
		t.Fatalf("a read_committed fetch from 2 is told of aborted transactions %v", res.AbortedTransactions)
	}
}
