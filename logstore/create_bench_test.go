package logstore

import (
	"fmt"
	"path"
	"sync/atomic"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// syncCounts counts what a countingFS saw: files created (temporary files
// included), file syncs (fdatasync and msync) and directory syncs.
type syncCounts struct {
	creates, fileSyncs, dirSyncs atomic.Int64
}

func (c *syncCounts) reset() {
	c.creates.Store(0)
	c.fileSyncs.Store(0)
	c.dirSyncs.Store(0)
}

// countingFS is a vfs.FS that counts creations and syncs into counts.
type countingFS struct {
	vfs.FS
	counts *syncCounts
}

type countingFile struct {
	vfs.File
	counts *syncCounts
}

type countingMapping struct {
	vfs.Mapping
	counts *syncCounts
}

func (c countingFS) Create(name string) (vfs.File, error) {
	c.counts.creates.Add(1)
	return c.wrap(c.FS.Create(name))
}

func (c countingFS) Open(name string) (vfs.File, error) { return c.wrap(c.FS.Open(name)) }

func (c countingFS) SyncDir(dir string) error {
	c.counts.dirSyncs.Add(1)
	return c.FS.SyncDir(dir)
}

func (c countingFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return countingFile{f, c.counts}, nil
}

func (f countingFile) Sync() error {
	f.counts.fileSyncs.Add(1)
	return f.File.Sync()
}

func (f countingFile) Map(size int) (vfs.Mapping, error) {
	m, err := f.File.Map(size)
	if err != nil {
		return nil, err
	}
	return countingMapping{m, f.counts}, nil
}

func (m countingMapping) Sync() error {
	m.counts.fileSyncs.Add(1)
	return m.Mapping.Sync()
}

// createPartitions creates count partitions in d: all in one CreateAll of
// one topic, or one topic each (as count CreateTopics requests of one
// partition, or a mirror meeting count new topics, would).
func createPartitions(d *Dir, count int, oneTopic bool) error {
	if oneTopic {
		tps := make([]TopicPartition, count)
		for i := range tps {
			tps[i] = TopicPartition{Topic: "t", Partition: int32(i)}
		}
		_, err := d.CreateAll(tps, rb.NewTopicID(), d.cfg)
		return err
	}
	for i := range count {
		if _, err := d.Create(TopicPartition{Topic: fmt.Sprintf("t%04d", i), Partition: 0}, rb.NewTopicID(), d.cfg); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkCreatePartitions creates 1,000 partitions on the OS file system,
// in one topic and as 1,000 topics, and then appends a first batch (leader
// epoch 0, as a mirror's first fetch of a new partition brings) to each.
// It reports the wall time and the syncs per partition of each phase.
func BenchmarkCreatePartitions(b *testing.B) {
	const partitions = 1000
	batch := rb.Append(nil, rb.Spec{BaseTimestamp: baseTimestamp, ProducerID: -1, Records: []rb.Record{{Value: []byte("v")}}})
	for _, oneTopic := range []bool{true, false} {
		name := "topics=1000"
		if oneTopic {
			name = "topics=1"
		}
		b.Run(name, func(b *testing.B) {
			var counts syncCounts
			var create, first time.Duration
			var createCounts, firstCounts [3]int64
			for range b.N {
				b.StopTimer()
				d, err := OpenDir(countingFS{vfs.OS, &counts}, path.Join(b.TempDir(), "data"), DefaultConfig())
				if err != nil {
					b.Fatal(err)
				}
				counts.reset()
				b.StartTimer()
				start := time.Now()
				if err := createPartitions(d, partitions, oneTopic); err != nil {
					b.Fatal(err)
				}
				create += time.Since(start)
				createCounts = addCounts(createCounts, &counts)
				counts.reset()
				start = time.Now()
				for _, info := range d.List() {
					log, _, _ := d.Get(info.TopicPartition)
					if _, err := log.Append(batch); err != nil {
						b.Fatal(err)
					}
				}
				first += time.Since(start)
				firstCounts = addCounts(firstCounts, &counts)
				b.StopTimer()
				if err := d.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			per := float64(b.N * partitions)
			b.ReportMetric(float64(create.Microseconds())/1000/per, "create-ms/partition")
			b.ReportMetric(float64(createCounts[1])/per, "create-fsyncs/partition")
			b.ReportMetric(float64(createCounts[2])/per, "create-dirsyncs/partition")
			b.ReportMetric(float64(createCounts[0])/per, "create-files/partition")
			b.ReportMetric(float64(first.Microseconds())/1000/per, "first-append-ms/partition")
			b.ReportMetric(float64(firstCounts[1])/per, "first-append-fsyncs/partition")
			b.ReportMetric(float64(firstCounts[2])/per, "first-append-dirsyncs/partition")
		})
	}
}

// addCounts adds what counts holds to sum: creates, file syncs, directory
// syncs.
func addCounts(sum [3]int64, counts *syncCounts) [3]int64 {
	return [3]int64{sum[0] + counts.creates.Load(), sum[1] + counts.fileSyncs.Load(), sum[2] + counts.dirSyncs.Load()}
}
