package netio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkFetchKgo has a kgo consumer read 4 partitions of 16 MiB
// (batches of 16 records of 1 KiB, in files: the sendfile path) from the
// server, and copies the same bytes over a plain loopback TCP connection
// in the same run, the limit for any Kafka server on this machine.
// Reported: kgo-MB/s, loopback-MB/s and their ratio.
func BenchmarkFetchKgo(b *testing.B) {
	const (
		partitions       = 4
		partitionBytes   = 16 << 20
		recordsPerBatch  = 16
		recordValueBytes = 1 << 10
	)
	mem := newMemBackend()
	files := newFileBackend(b, mem)
	addr, _ := startFetchServer(b, mem, files, nil)
	if _, err := mem.CreateTopic(context.Background(), "bench", partitions, nil, false); err != nil {
		b.Fatal(err)
	}
	value := make([]byte, recordValueBytes)
	spec := recordbatch.Spec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	for range recordsPerBatch {
		spec.Records = append(spec.Records, recordbatch.Record{Value: value})
	}
	batch := recordbatch.Append(nil, spec)
	var data []byte // every partition's bytes, for the loopback peer
	records := 0
	offsets := map[int32]kgo.Offset{}
	for i := range int32(partitions) {
		p, err := files.Partition("bench", i)
		if err != nil {
			b.Fatal(err)
		}
		for size := 0; size < partitionBytes; size += len(batch) {
			if _, err := p.Produce(context.Background(), append([]byte(nil), batch...), ProduceRequest{Acks: -1}); err != nil {
				b.Fatal(err)
			}
			data = append(data, batch...)
			records += recordsPerBatch
		}
		offsets[i] = kgo.NewOffset().At(0)
	}

	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		benchConsume(b, addr, offsets, records)
	}
	kgoSeconds := b.Elapsed().Seconds()
	b.StopTimer()
	loopbackSeconds := benchLoopbackCopy(b, data, b.N)

	megabytes := float64(len(data)) * float64(b.N) / 1e6
	b.ReportMetric(megabytes/kgoSeconds, "kgo-MB/s")
	b.ReportMetric(megabytes/loopbackSeconds, "loopback-MB/s")
	b.ReportMetric(loopbackSeconds/kgoSeconds, "ratio")
}

// benchConsume reads every record of the bench topic with a new client.
func benchConsume(b *testing.B, addr string, offsets map[int32]kgo.Offset, records int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"bench": offsets}))
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	for got := 0; got < records; {
		fetches := client.PollFetches(ctx)
		if errs := fetches.Errors(); len(errs) > 0 {
			b.Fatalf("poll: %v", errs)
		}
		got += fetches.NumRecords()
	}
}

// benchLoopbackCopy sends data times times over a loopback TCP connection
// with 1 MiB writes and reads, and returns the seconds it took.
func benchLoopbackCopy(b *testing.B, data []byte, times int) float64 {
	serverSide, clientSide := fetchTestTCPPair(b)
	start := time.Now()
	written := make(chan error, 1)
	go func() {
		for range times {
			for rest := data; len(rest) > 0; rest = rest[min(len(rest), 1<<20):] {
				if _, err := serverSide.Write(rest[:min(len(rest), 1<<20)]); err != nil {
					written <- err
					return
				}
			}
		}
		written <- nil
	}()
	buf := make([]byte, 1<<20)
	for remaining := len(data) * times; remaining > 0; {
		n, err := clientSide.Read(buf[:min(len(buf), remaining)])
		if err != nil {
			b.Fatal(err)
		}
		remaining -= n
	}
	if err := <-written; err != nil {
		b.Fatal(err)
	}
	return time.Since(start).Seconds()
}

// fileBackend is a memBackend whose partitions keep their batches in
// real files, so Fetch sends them with sendfile. It counts ranges not yet
// released, and ranges released twice.
type fileBackend struct {
	*memBackend
	dir            string
	mu             sync.Mutex
	partitions     map[string]*filePartition
	outstanding    atomic.Int64
	doubleReleases atomic.Int64
}

func newFileBackend(t testing.TB, mem *memBackend) *fileBackend {
	b := &fileBackend{memBackend: mem, dir: t.TempDir(), partitions: map[string]*filePartition{}}
	t.Cleanup(func() {
		for _, p := range b.partitions {
			p.file.Close()
		}
	})
	return b
}

func (b *fileBackend) Partition(topic string, partition int32) (Partition, error) {
	if _, err := b.memBackend.Partition(topic, partition); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	name := fmt.Sprintf("%s-%d.log", topic, partition)
	if p := b.partitions[name]; p != nil {
		return p, nil
	}
	file, err := os.Create(filepath.Join(b.dir, name))
	if err != nil {
		return nil, err
	}
	p := &filePartition{backend: b, file: file}
	b.partitions[name] = p
	return p, nil
}

type filePartition struct {
	backend  *fileBackend
	file     *os.File
	mu       sync.Mutex
	batches  []fileBatch        // ascending
	size     int64              // bytes written
	end      recordbatch.Offset // log end offset
	watchers Watchers
}

type fileBatch struct {
	position, size int64
	lastOffset     recordbatch.Offset
}

func (p *filePartition) LeaderEpoch() recordbatch.Epoch { return 0 }

func (p *filePartition) Offsets() Offsets {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Offsets{HighWatermark: p.end, LastStableOffset: p.end, LogEndOffset: p.end}
}

func (p *filePartition) Produce(_ context.Context, batches []byte, _ ProduceRequest) (ProduceResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	base, next := p.end, p.end
	var added []fileBatch
	it := recordbatch.NewIter(batches, true)
	for it.Next() {
		b := it.Batch()
		b.SetBaseOffset(next)
		added = append(added, fileBatch{position: p.size + int64(it.Position()), size: int64(len(b)), lastOffset: b.LastOffset()})
		next = b.NextOffset()
	}
	if it.Err() != nil {
		return ProduceResult{}, kerr.CorruptMessage
	}
	if _, err := p.file.WriteAt(batches, p.size); err != nil {
		return ProduceResult{}, err
	}
	p.batches = append(p.batches, added...)
	p.size += int64(len(batches))
	p.end = next
	p.watchers.Notify()
	return ProduceResult{BaseOffset: base, LogAppendTime: -1}, nil
}

func (p *filePartition) Read(offset recordbatch.Offset, maxBytes int32, _ Isolation, minOneBatch bool) (ReadResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	offsets := Offsets{HighWatermark: p.end, LastStableOffset: p.end, LogEndOffset: p.end}
	if offset < 0 || offset > p.end {
		return ReadResult{Offsets: offsets}, kerr.OffsetOutOfRange
	}
	i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].lastOffset >= offset })
	if i == len(p.batches) {
		return ReadResult{Offsets: offsets}, nil
	}
	first := p.batches[i]
	length := min(p.size-first.position, int64(maxBytes))
	if minOneBatch {
		length = max(length, first.size)
	}
	p.backend.outstanding.Add(1)
	var released atomic.Bool
	release := func() error {
		if released.Swap(true) {
			p.backend.doubleReleases.Add(1)
			return errors.New("released twice")
		}
		p.backend.outstanding.Add(-1)
		return nil
	}
	return ReadResult{Records: FileRange{File: p.file, Position: first.position, Length: length, Release: release}, Offsets: offsets}, nil
}

func (p *filePartition) Watchers() *Watchers { return &p.watchers }

func (p *filePartition) ListOffset(timestamp int64, _ Isolation) (recordbatch.Offset, int64, recordbatch.Epoch, error) {
	switch timestamp {
	case -2:
		return 0, -1, 0, nil
	case -1:
		return p.Offsets().HighWatermark, -1, 0, nil
	}
	return -1, -1, -1, nil
}

func (p *filePartition) EndOffsetForEpoch(epoch recordbatch.Epoch) (recordbatch.Epoch, recordbatch.Offset) {
	if epoch != 0 {
		return -1, -1
	}
	return 0, p.Offsets().LogEndOffset
}

func (p *filePartition) DeleteRecords(context.Context, recordbatch.Offset) (recordbatch.Offset, error) {
	return 0, kerr.PolicyViolation
}
