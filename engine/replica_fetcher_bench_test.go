package engine

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
)

// BenchmarkReplicaCatchUp measures a follower copying a leader's log
// over loopback (leader's Fetch serving, follower's append as sent):
// each round empties the follower and lets it catch up with logBytes.
// It reports MB/s, the process's CPU-seconds per GB (both nodes), and
// the ratio of its time to writing the same bytes to a file in the same
// run (the limit of these machines, DESIGN.md).
func BenchmarkReplicaCatchUp(b *testing.B) {
	const batchBytes, logBytes = 512 << 10, 64 << 20
	c := startReplicaCluster(b, 2)
	c.lead(b, 1, 1, 1, 2)
	c.nodes[1].SetFollowing(nil)
	leader, follower := c.partition(b, 1), c.partition(b, 2)
	value := make([]byte, 1000)
	var records []rb.Record
	for range batchBytes / len(value) {
		records = append(records, rb.Record{Value: value})
	}
	for leader.Log().Size() < logBytes {
		batch := rb.Append(nil, rb.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: records})
		if _, err := leader.Produce(context.Background(), batch, netio.ProduceRequest{Version: 9, Acks: 1}); err != nil {
			b.Fatal(err)
		}
	}
	size := leader.Log().Size()
	b.SetBytes(size)
	b.ResetTimer()
	cpuStart := cpuTime()
	for range b.N {
		b.StopTimer()
		c.nodes[1].SetFollowing(nil)
		if err := follower.TruncateReplica(0); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c.follow(b, 2, 1, 1)
		deadline := time.Now().Add(time.Minute)
		poll := time.NewTicker(time.Millisecond)
		for follower.LogEndOffset() != leader.LogEndOffset() {
			if time.Now().After(deadline) {
				b.Fatal("the follower did not catch up")
			}
			<-poll.C
		}
		poll.Stop()
	}
	b.StopTimer()
	elapsed, cpu := b.Elapsed(), cpuTime()-cpuStart
	b.ReportMetric(cpu.Seconds()/(float64(size)*float64(b.N)/1e9), "cpu-s/GB")
	data, err := leader.ReadBatches(nil, 0, size, leader.LogEndOffset())
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "limit")
	start := time.Now()
	for range b.N {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(elapsed.Seconds()/time.Since(start).Seconds(), "x-file-write")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}
