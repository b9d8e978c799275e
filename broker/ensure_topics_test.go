package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// dataDirSyncs is a vfs.FS counting the syncs of the directory /data.
type dataDirSyncs struct {
	vfs.FS
	count *atomic.Int64
}

func (d dataDirSyncs) SyncDir(dir string) error {
	if dir == "/data" {
		d.count.Add(1)
	}
	return d.FS.SyncDir(dir)
}

// TestEnsureTopics: EnsureTopics answers each topic as EnsureTopic would
// (made, grown, refused for another topic ID, a bad name or a name given
// twice), makes the partitions of all in one go (the data directory is
// synced once for them all), and they survive a crash right after.
func TestEnsureTopics(t *testing.T) {
	mem := vfs.NewMem()
	var syncs atomic.Int64
	fs := dataDirSyncs{mem, &syncs}
	n := openTestNodeAt(t, fs, "/data")
	grown, clash := rb.NewTopicID(), rb.NewTopicID()
	for name, id := range map[string]rb.TopicID{"grown": grown, "clash": clash} {
		if _, err := n.EnsureTopic(context.Background(), name, id, 1); err != nil {
			t.Fatal(err)
		}
	}
	made := rb.NewTopicID()
	asked := []EnsuredTopic{
		{Name: "made", ID: made, Partitions: 3},
		{Name: "grown", ID: grown, Partitions: 4},
		{Name: "clash", ID: rb.NewTopicID(), Partitions: 2},
		{Name: "made", ID: made, Partitions: 3},
		{Name: "bad/name", ID: rb.NewTopicID(), Partitions: 1},
	}
	syncs.Store(0)
	answers := n.EnsureTopics(context.Background(), asked)
	if got := syncs.Load(); got != 1 {
		t.Errorf("the data directory was synced %d times for two topics' partitions, want once", got)
	}
	for i, want := range []struct {
		partitions int
		err        error
	}{{3, nil}, {4, nil}, {0, kerr.TopicAlreadyExists}, {0, nil}, {0, kerr.InvalidTopicException}} {
		got := answers[i]
		switch {
		case i == 3:
			if got.Err == nil || !strings.Contains(got.Err.Error(), "named twice") {
				t.Errorf("%s named twice: %v, want refused", got.Name, got.Err)
			}
		case !errors.Is(got.Err, want.err) || (want.err == nil) != (got.Err == nil):
			t.Errorf("%s: %v, want %v", got.Name, got.Err, want.err)
		case len(got.Local) != want.partitions:
			t.Errorf("%s: %d partitions, want %d", got.Name, len(got.Local), want.partitions)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	mem.CrashClean()
	n = openTestNodeAt(t, mem, "/data")
	defer n.Close()
	for name, want := range map[string]int{"made": 3, "grown": 4, "clash": 1} {
		if got := len(n.topics[name].partitions); got != want {
			t.Errorf("after a crash, %s has %d partitions, want %d", name, got, want)
		}
	}
}

// TestEnsureTopicsOneFails: when the partitions of one topic cannot be
// made, the others still are, and the error is that topic's alone.
func TestEnsureTopicsOneFails(t *testing.T) {
	mem := vfs.NewMem()
	n := openTestNodeAt(t, mem, "/data")
	defer n.Close()
	mem.SetFault(func(op vfs.Op, name string) error {
		if op == vfs.OpCreate && strings.HasPrefix(name, "/data/broken-0/") {
			return vfs.ErrInjected
		}
		return nil
	})
	answers := n.EnsureTopics(context.Background(), []EnsuredTopic{
		{Name: "first", ID: rb.NewTopicID(), Partitions: 2},
		{Name: "broken", ID: rb.NewTopicID(), Partitions: 1},
		{Name: "last", ID: rb.NewTopicID(), Partitions: 2},
	})
	mem.SetFault(nil)
	for _, a := range answers {
		if a.Name == "broken" {
			if !errors.Is(a.Err, vfs.ErrInjected) {
				t.Errorf("broken: %v, want the injected fault", a.Err)
			}
			continue
		}
		if a.Err != nil || len(a.Local) != 2 {
			t.Errorf("%s: %d partitions, %v; want 2", a.Name, len(a.Local), a.Err)
		}
	}
	if _, err := n.EnsureTopic(context.Background(), "broken", answers[1].ID, 1); err != nil {
		t.Errorf("broken once the fault is gone: %v", err)
	}
	if got := n.dir.List(); len(got) != 5 {
		t.Errorf("%d partitions on disk, want 5: %v", len(got), got)
	}
}

// syncCounter is a vfs.FS counting file and directory syncs.
type syncCounter struct {
	vfs.FS
	syncs *atomic.Int64
}

type syncCountedFile struct {
	vfs.File
	syncs *atomic.Int64
}

func (c syncCounter) SyncDir(dir string) error {
	c.syncs.Add(1)
	return c.FS.SyncDir(dir)
}

func (c syncCounter) Create(name string) (vfs.File, error) {
	f, err := c.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return syncCountedFile{f, c.syncs}, nil
}

func (f syncCountedFile) Sync() error {
	f.syncs.Add(1)
	return f.File.Sync()
}

// BenchmarkEnsureTopics makes 1,000 mirror partitions on the OS file
// system: one topic of 1,000 partitions, 1,000 topics of one partition
// one EnsureTopic after another (a mirror's reconcile before
// EnsureTopics), and the same 1,000 topics in one EnsureTopics. It
// reports the wall time and the syncs (file and directory) per partition.
func BenchmarkEnsureTopics(b *testing.B) {
	const partitions = 1000
	for _, c := range []struct {
		name   string
		ensure func(n *Node) error
	}{
		{"topics=1", func(n *Node) error {
			_, err := n.EnsureTopic(context.Background(), "t", rb.NewTopicID(), partitions)
			return err
		}},
		{"topics=1000/one-by-one", func(n *Node) error {
			for i := range partitions {
				if _, err := n.EnsureTopic(context.Background(), fmt.Sprintf("t%04d", i), rb.NewTopicID(), 1); err != nil {
					return err
				}
			}
			return nil
		}},
		{"topics=1000/at-once", func(n *Node) error {
			asked := make([]EnsuredTopic, partitions)
			for i := range asked {
				asked[i] = EnsuredTopic{Name: fmt.Sprintf("t%04d", i), ID: rb.NewTopicID(), Partitions: 1}
			}
			for _, a := range n.EnsureTopics(context.Background(), asked) {
				if a.Err != nil {
					return a.Err
				}
			}
			return nil
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var syncs atomic.Int64
			var took time.Duration
			var synced int64
			for range b.N {
				b.StopTimer()
				n := openTestNodeAt(b, syncCounter{vfs.OS, &syncs}, filepath.Join(b.TempDir(), "data"))
				syncs.Store(0)
				b.StartTimer()
				start := time.Now()
				if err := c.ensure(n); err != nil {
					b.Fatal(err)
				}
				took += time.Since(start)
				synced += syncs.Load()
				b.StopTimer()
				if err := n.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			per := float64(b.N * partitions)
			b.ReportMetric(float64(took.Microseconds())/1000/per, "ms/partition")
			b.ReportMetric(float64(synced)/per, "syncs/partition")
		})
	}
}
