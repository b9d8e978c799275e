package netio

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/mirrord/mirrord/recordbatch"
)

// BenchmarkFetchWakeUp is the cost of one wake-up of a waiting Fetch
// whose session holds 10, 1,000 or 10,000 partitions: each op appends a
// batch to one of them (in turn) and waits until the fetch, woken, has
// read again and gone back to waiting (MinBytes is never reached). A
// wake-up should cost the same whatever the session's size.
func BenchmarkFetchWakeUp(b *testing.B) {
	for _, partitions := range []int32{10, 1_000, 10_000} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			mem := newMemBackend()
			files := newFileBackend(b, mem)
			server := NewServer(Config{Backend: files})
			info := fetchTestTopic(b, mem, "wake", partitions)
			var parts []fetchTestPart
			targets := make([]Partition, partitions)
			for i := range partitions {
				parts = append(parts, at(i, 0))
				p, err := files.Partition("wake", i)
				if err != nil {
					b.Fatal(err)
				}
				targets[i] = p
			}
			req := fetchTestRequest(18, info, parts...)
			req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 30_000, math.MaxInt32, math.MaxInt32
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				f := newWaitingFetch(server, req)
				defer f.releaseRecords()
				done <- f.fetch(ctx, req, ReadUncommitted)
			}()
			waits := &server.sessions.stats.waits
			awaitWaits(b, waits.Load, 1)
			batch := recordbatch.Append(nil, recordbatch.Spec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: []recordbatch.Record{{Value: []byte("v")}}})
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := targets[i%int(partitions)].Produce(context.Background(), append([]byte(nil), batch...), ProduceRequest{Acks: -1}); err != nil {
					b.Fatal(err)
				}
				awaitWaits(b, waits.Load, int64(i)+2)
			}
			b.StopTimer()
			cancel()
			if err := <-done; err == nil {
				b.Fatal("the waiting fetch ended without its context's error")
			}
		})
	}
}

// awaitWaits spins until load reaches want (a wake-up takes microseconds:
// a ticker would measure the ticker), for at most 10 seconds.
func awaitWaits(b *testing.B, load func() int64, want int64) {
	deadline := time.Now().Add(10 * time.Second)
	for load() < want {
		if time.Now().After(deadline) {
			b.Fatalf("waits %d, want %d after 10s", load(), want)
		}
		runtime.Gosched()
	}
}
