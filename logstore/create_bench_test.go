package logstore

import (
	"fmt"
	"path"
	"strings"
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
	// temporaries is how many files named *.tmp are open, and
	// temporariesMax the most at once.
	temporaries, temporariesMax atomic.Int64
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
	f, err := c.wrap(c.FS.Create(name))
	if err != nil || !strings.HasSuffix(name, tmpSuffix) {
		return f, err
	}
	open := c.counts.temporaries.Add(1)
	for peak := c.counts.temporariesMax.Load(); open > peak && !c.counts.temporariesMax.CompareAndSwap(peak, open); {
		peak = c.counts.temporariesMax.Load()
	}
	return countingTemporary{f.(countingFile)}, nil
}

// countingTemporary is a *.tmp file, counted in temporaries until closed.
type countingTemporary struct{ countingFile }

func (f countingTemporary) Close() error {
	f.counts.temporaries.Add(-1)
	return f.File.Close()
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
// one topic, one topic each in one CreateMany (a mirror meeting count new
// topics), or one topic each one after another (count CreateTopics
// requests of one partition).
func createPartitions(d *Dir, count int, topics string) error {
	switch topics {
	case "1":
		tps := make([]TopicPartition, count)
		for i := range tps {
			tps[i] = TopicPartition{Topic: "t", Partition: int32(i)}
		}
		_, err := d.CreateAll(tps, rb.NewTopicID(), d.cfg)
		return err
	case "many/at-once":
		news := make([]NewPartition, count)
		for i := range news {
			news[i] = NewPartition{PartitionInfo{TopicPartition{fmt.Sprintf("t%04d", i), 0}, rb.NewTopicID()}, d.cfg}
		}
		_, err := d.CreateMany(news)
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
// in one topic and as 1,000 topics (in one CreateMany and one by one),
// and then appends a first batch (leader
// epoch 0, as a mirror's first fetch of a new partition brings) to each.
// It reports the wall time and the syncs per partition of each phase.
func BenchmarkCreatePartitions(b *testing.B) {
	const partitions = 1000
	batch := rb.Append(nil, rb.Spec{BaseTimestamp: baseTimestamp, ProducerID: -1, Records: []rb.Record{{Value: []byte("v")}}})
	for _, topics := range []string{"1", "many/at-once", "many/one-by-one"} {
		b.Run("topics="+strings.Replace(topics, "many", "1000", 1), func(b *testing.B) {
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
				if err := createPartitions(d, partitions, topics); err != nil {
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

// openMirrorDir opens a directory on the OS file system with partitions
// partitions of one topic, each holding one first batch (its leader
// epoch checkpointed), as a mirror's partitions are after their first
// fetch.
func openMirrorDir(b *testing.B, counts *syncCounts, partitions int, cfg Config) (*Dir, []*Log) {
	d, err := OpenDir(countingFS{vfs.OS, counts}, path.Join(b.TempDir(), "data"), cfg)
	if err != nil {
		b.Fatal(err)
	}
	tps := make([]TopicPartition, partitions)
	for i := range tps {
		tps[i] = TopicPartition{Topic: "t", Partition: int32(i)}
	}
	logs, err := d.CreateAll(tps, rb.NewTopicID(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, log := range logs {
		if _, err := log.Append(rb.Append(nil, rb.Spec{BaseTimestamp: baseTimestamp, ProducerID: -1, Records: []rb.Record{{Value: []byte("v")}}})); err != nil {
			b.Fatal(err)
		}
	}
	return d, logs
}

// BenchmarkSteadyMirror appends, round-robin, a 4 KiB batch of the same
// leader epoch to each of 1,000 partitions for two seconds, as a mirror
// caught up with its source does, and counts the syncs (file and
// directory) and the files written (checkpoints, segments) per partition
// per second: with the OS's write-back (the default) and with a flush
// every second (log.flush.interval.ms=1000, the Dir's flusher).
func BenchmarkSteadyMirror(b *testing.B) {
	const partitions = 1000
	const runFor = 2 * time.Second
	for _, c := range []struct {
		name  string
		flush FlushPolicy
	}{{"flush=os", FlushOS}, {"flush=1s", FlushInterval}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Flush, cfg.FlushInterval = c.flush, time.Second
			var counts syncCounts
			set := benchSet(4<<10, 4<<10)
			var syncs, files, appends int64
			var elapsed time.Duration
			for range b.N {
				b.StopTimer()
				d, logs := openMirrorDir(b, &counts, partitions, cfg)
				counts.reset()
				b.StartTimer()
				start := time.Now()
				for i := 0; time.Since(start) < runFor; i++ {
					log := logs[i%partitions]
					restamp(set, log.LogEndOffset())
					if _, err := log.Append(set); err != nil {
						b.Fatal(err)
					}
					appends++
				}
				elapsed += time.Since(start)
				syncs += counts.fileSyncs.Load() + counts.dirSyncs.Load()
				files += counts.creates.Load()
				b.StopTimer()
				if err := d.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			perPartitionSecond := float64(partitions) * elapsed.Seconds()
			b.ReportMetric(float64(syncs)/perPartitionSecond, "syncs/partition/s")
			b.ReportMetric(float64(files)/perPartitionSecond, "files-written/partition/s")
			b.ReportMetric(float64(appends)/perPartitionSecond, "appends/partition/s")
		})
	}
}

// BenchmarkFlushTick times one tick of the flusher over 1,000 partitions
// that each hold unflushed bytes: the Dir's flusher (flushAll) against
// the same flushes one partition after another.
func BenchmarkFlushTick(b *testing.B) {
	const partitions = 1000
	for _, serial := range []bool{true, false} {
		name := "flusher"
		if serial {
			name = "one-by-one"
		}
		b.Run(name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Flush, cfg.FlushInterval = FlushInterval, time.Hour // ticks are the benchmark's
			var counts syncCounts
			b.StopTimer()
			d, logs := openMirrorDir(b, &counts, partitions, cfg)
			defer d.Close()
			set := benchSet(4<<10, 4<<10)
			var tick time.Duration
			for range b.N {
				for _, log := range logs {
					restamp(set, log.LogEndOffset())
					if _, err := log.Append(set); err != nil {
						b.Fatal(err)
					}
				}
				counts.reset()
				b.StartTimer()
				start := time.Now()
				if serial {
					for _, log := range logs {
						if err := log.Flush(); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					d.flushAll()
				}
				tick += time.Since(start)
				b.StopTimer()
				if got := counts.fileSyncs.Load(); got != partitions {
					b.Fatalf("%d file syncs in a tick, want %d", got, partitions)
				}
			}
			b.ReportMetric(float64(tick.Microseconds())/1000/float64(b.N), "ms/tick")
			b.ReportMetric(float64(tick.Microseconds())/float64(b.N*partitions), "us/partition")
		})
	}
}
