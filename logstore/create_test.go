package logstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// TestDirCreateManyCrash stops the file system after each operation of a
// CreateMany of partitions of three topics (every later operation fails,
// as if the machine had lost power there), crashes it keeping a random
// part of what was not synced, and opens the directory again: every
// partition found is whole (online, its topic ID, writable), none is
// offline, and once CreateMany has returned them all, all are there.
func TestDirCreateManyCrash(t *testing.T) {
	ids := []rb.TopicID{rb.NewTopicID(), rb.NewTopicID(), rb.NewTopicID()}
	var news []NewPartition
	for i, id := range ids {
		for p := range 3 {
			news = append(news, NewPartition{PartitionInfo{TopicPartition{fmt.Sprintf("t%d", i), int32(p)}, id}, testConfig()})
		}
	}
	const stepsMax = 2000
	for stopAt := 0; ; stopAt++ {
		if stopAt == stepsMax {
			t.Fatalf("CreateMany still stopped after %d operations", stepsMax)
		}
		mem := vfs.NewMem()
		closeDir(t, openDir(t, mem, "/d", testConfig()))
		d := openDir(t, mem, "/d", testConfig())
		var ops atomic.Int64
		mem.SetFault(func(vfs.Op, string) error {
			if ops.Add(1) > int64(stopAt) {
				return vfs.ErrInjected
			}
			return nil
		})
		_, err := d.CreateMany(news)
		if err != nil && !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("stopped after %d operations: %v, want the injected fault", stopAt, err)
		}
		seed := uint64(stopAt)
		mem.Crash(rand.New(rand.NewPCG(seed, 7)))
		mem.SetFault(nil)
		d = openDir(t, mem, "/d", testConfig())
		if offline := d.Offline(); len(offline) > 0 {
			t.Fatalf("stopped after %d operations (crash seed %d): offline %v", stopAt, seed, offline)
		}
		found := d.List()
		if err == nil && len(found) != len(news) {
			t.Fatalf("CreateMany returned, crash seed %d: %d partitions found, want %d", seed, len(found), len(news))
		}
		for _, info := range found {
			want := ids[info.Topic[1]-'0']
			if info.TopicID != want {
				t.Fatalf("stopped after %d operations (crash seed %d): %s has topic ID %s, want %s", stopAt, seed, info.TopicPartition, info.TopicID, want)
			}
			log, _, _ := d.Get(info.TopicPartition)
			mustAppend(t, log, testBatch(0, 1, baseTimestamp))
		}
		closeDir(t, d)
		if err == nil {
			t.Logf("CreateMany of %d partitions: %d operations", len(news), stopAt)
			return
		}
	}
}

// TestDirCreateManyRefuses: CreateMany refuses, before making anything,
// a partition named twice or one the directory holds.
func TestDirCreateManyRefuses(t *testing.T) {
	d := openDir(t, vfs.NewMem(), "/d", testConfig())
	defer closeDir(t, d)
	id := rb.NewTopicID()
	one := NewPartition{PartitionInfo{TopicPartition{"t", 0}, id}, testConfig()}
	two := NewPartition{PartitionInfo{TopicPartition{"u", 0}, rb.NewTopicID()}, testConfig()}
	for _, news := range [][]NewPartition{{one, two, one}} {
		if _, err := d.CreateMany(news); !errors.Is(err, ErrExists) {
			t.Fatalf("CreateMany of %v: %v, want ErrExists", news, err)
		}
		if got := d.List(); len(got) != 0 {
			t.Fatalf("after a refused CreateMany: %v", got)
		}
	}
	if _, err := d.CreateMany([]NewPartition{one}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateMany([]NewPartition{two, one}); !errors.Is(err, ErrExists) {
		t.Fatalf("CreateMany of an existing partition: %v, want ErrExists", err)
	}
	if got := d.List(); len(got) != 1 {
		t.Fatalf("after a refused CreateMany: %v, want t-0 alone", got)
	}
}

// TestNewPartitionFiles: a new partition holds partition.metadata and its
// first segment's log file; the first append makes the indexes (and the
// epoch checkpoint), and so does the Close of a partition never written,
// so that a clean open finds every file of the segment.
func TestNewPartitionFiles(t *testing.T) {
	mem := vfs.NewMem()
	d := openDir(t, mem, "/d", testConfig())
	id := rb.NewTopicID()
	logs, err := d.CreateMany([]NewPartition{
		{PartitionInfo{TopicPartition{"t", 0}, id}, testConfig()},
		{PartitionInfo{TopicPartition{"t", 1}, id}, testConfig()},
	})
	if err != nil {
		t.Fatal(err)
	}
	list := func(dir string) string {
		t.Helper()
		names, err := mem.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(names)
	}
	for _, dir := range []string{"/d/t-0", "/d/t-1"} {
		if got, want := list(dir), "[00000000000000000000.log partition.metadata]"; got != want {
			t.Errorf("new partition %s holds %s, want %s", dir, got, want)
		}
	}
	for _, l := range logs { // what Open reports for an empty log, read as Metadata reads it
		if end, epoch := l.LogEndOffset(), l.LatestEpoch(); end != 0 || epoch != rb.NoEpoch {
			t.Errorf("new partition: log end %d, latest epoch %d; want 0 and %d", end, epoch, rb.NoEpoch)
		}
	}
	mustAppend(t, logs[0], testBatch(0, 1, baseTimestamp))
	if got, want := list("/d/t-0"), "[00000000000000000000.index 00000000000000000000.log 00000000000000000000.timeindex leader-epoch-checkpoint partition.metadata]"; got != want {
		t.Errorf("after the first append: %s, want %s", got, want)
	}
	ends := []rb.Offset{logs[0].LogEndOffset(), 0}
	closeDir(t, d)
	if got, want := list("/d/t-1"), "[.clean-shutdown 00000000000000000000.index 00000000000000000000.log 00000000000000000000.timeindex log-offsets-checkpoint partition.metadata]"; got != want {
		t.Errorf("a partition never written, closed: %s, want %s", got, want)
	}
	d = openDir(t, mem, "/d", testConfig())
	defer closeDir(t, d)
	for p, end := range ends {
		log, _, ok := d.Get(TopicPartition{"t", int32(p)})
		if !ok || log.LogEndOffset() != end {
			t.Fatalf("t-%d after a clean reopen: found %v, log end offset %d, want %d", p, ok, log.LogEndOffset(), end)
		}
		mustAppend(t, log, testBatch(end, 1, baseTimestamp))
	}
}

// TestNewPartitionWritesBeforeAppend: every write of a log on a partition
// never appended to, whose segment has no index files yet, works, and it
// and the durable append after it survive a crash.
func TestNewPartitionWritesBeforeAppend(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(*Log) error
		end   rb.Offset
	}{
		{"AdvanceLogStart", func(l *Log) error { return l.AdvanceLogStart(7) }, 7},
		{"TruncateFullyAndStartAt", func(l *Log) error { return l.TruncateFullyAndStartAt(7) }, 7},
		{"TruncateTo", func(l *Log) error { return l.TruncateTo(0) }, 0},
		{"Roll", func(l *Log) error { return l.Roll() }, 0},
		{"Flush", func(l *Log) error { return l.Flush() }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			d := openDir(t, mem, "/d", testConfig())
			log := createPartition(t, d, TopicPartition{"t", 0}, rb.NewTopicID())
			if err := c.write(log); err != nil {
				t.Fatal(err)
			}
			if got := log.LogEndOffset(); got != c.end {
				t.Fatalf("log end offset %d, want %d", got, c.end)
			}
			mustAppend(t, log, testBatch(c.end, 1, baseTimestamp))
			end := log.LogEndOffset()
			mem.CrashClean()
			d = openDir(t, mem, "/d", testConfig())
			defer closeDir(t, d)
			log, _, ok := d.Get(TopicPartition{"t", 0})
			if !ok || log.LogStartOffset() != c.end || log.LogEndOffset() != end {
				t.Fatalf("after a crash: found %v, log start %d, end %d (end before %d)", ok, log.LogStartOffset(), log.LogEndOffset(), end)
			}
			mustAppend(t, log, testBatch(log.LogEndOffset(), 1, baseTimestamp))
		})
	}
}

// A creation of many partitions holds partition.metadata.tmp files open
// for createsChunk of them at most, not for all (a 10,000-partition topic
// ran out of descriptors).
func TestDirCreateManyBoundsDescriptors(t *testing.T) {
	counts := &syncCounts{}
	d := openDir(t, countingFS{vfs.NewMem(), counts}, "/d", testConfig())
	news := make([]NewPartition, 2*createsChunk+100)
	id := rb.NewTopicID()
	for i := range news {
		news[i] = NewPartition{PartitionInfo{TopicPartition{"t", int32(i)}, id}, testConfig()}
	}
	if _, err := d.CreateMany(news); err != nil {
		t.Fatal(err)
	}
	if peak := counts.temporariesMax.Load(); peak > createsChunk || peak == 0 {
		t.Errorf("%d partition.metadata.tmp files open at once creating %d partitions, want 1-%d", peak, len(news), createsChunk)
	}
	if open := counts.temporaries.Load(); open != 0 {
		t.Errorf("%d partition.metadata.tmp files left open", open)
	}
	closeDir(t, d)
}
