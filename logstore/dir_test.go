package logstore

import (
	"errors"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

func openDir(t testing.TB, fsys vfs.FS, dirPath string, cfg Config) *Dir {
	t.Helper()
	d, err := OpenDir(fsys, dirPath, cfg)
	if err != nil {
		t.Fatalf("open dir %s: %v", dirPath, err)
	}
	return d
}

func closeDir(t testing.TB, d *Dir) {
	t.Helper()
	if err := d.Close(); err != nil {
		t.Fatalf("close dir: %v", err)
	}
}

func createPartition(t testing.TB, d *Dir, tp TopicPartition, id rb.TopicID) *Log {
	t.Helper()
	log, err := d.Create(tp, id, d.cfg)
	if err != nil {
		t.Fatalf("create %s: %v", tp, err)
	}
	return log
}

func TestDirMeta(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dirPath string) {
		d := openDir(t, fsys, dirPath, testConfig())
		clusterID := d.ClusterID()
		if id, err := rb.ParseTopicID(clusterID); err != nil || id == (rb.TopicID{}) || len(clusterID) != 22 {
			t.Errorf("cluster id %q is not 16 non-zero bytes of base64url: %v", clusterID, err)
		}
		if d.NodeID() != 1 {
			t.Errorf("node id %d, want 1", d.NodeID())
		}
		meta := string(fileBytes(t, fsys, path.Join(dirPath, metaPropertiesName)))
		if !strings.Contains(meta, "\ncluster.id="+clusterID+"\n") || !strings.HasPrefix(meta, "version=1\n") {
			t.Errorf("meta.properties %q lacks version=1 or cluster.id=%s", meta, clusterID)
		}
		closeDir(t, d)
		if err := d.Close(); !errors.Is(err, ErrClosed) {
			t.Errorf("second close: got %v, want ErrClosed", err)
		}
		if _, err := d.Create(TopicPartition{"t", 0}, rb.NewTopicID(), testConfig()); !errors.Is(err, ErrClosed) {
			t.Errorf("create on a closed dir: got %v, want ErrClosed", err)
		}
		d = openDir(t, fsys, dirPath, testConfig())
		if d.ClusterID() != clusterID {
			t.Errorf("cluster id %q after reopen, want %q", d.ClusterID(), clusterID)
		}
		closeDir(t, d)
	})
}

func TestDirTopicNames(t *testing.T) {
	tests := []struct {
		topic string
		valid bool
	}{
		{"a", true},
		{"orders.v2_EU-west", true},
		{"ends-with-1", true},
		{"x-delete", true},
		{strings.Repeat("x", 249), true},
		{"", false},
		{".", false},
		{"..", false},
		{strings.Repeat("x", 250), false},
		{"a/b", false},
		{"a b", false},
		{"tópico", false},
		{"a\x00b", false},
		{"a:b", false},
	}
	d := openDir(t, vfs.NewMem(), "/data", testConfig())
	defer closeDir(t, d)
	for _, test := range tests {
		_, err := d.Create(TopicPartition{test.topic, 3}, rb.NewTopicID(), testConfig())
		if test.valid && err != nil || !test.valid && !errors.Is(err, ErrInvalidName) {
			t.Errorf("create topic %q: got %v, want valid=%v", test.topic, err, test.valid)
		}
	}
	if _, err := d.Create(TopicPartition{"a", -1}, rb.NewTopicID(), testConfig()); err == nil {
		t.Errorf("create of a negative partition succeeded")
	}
}

func TestDirPartitions(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dirPath string) {
		d := openDir(t, fsys, dirPath, testConfig())
		ids := map[TopicPartition]rb.TopicID{}
		for _, tp := range []TopicPartition{{"b", 1}, {"a", 10}, {"a", 2}, {"b-1", 0}} {
			id := rb.NewTopicID()
			if tp.Topic == "b-1" {
				id = rb.TopicID{0xfb, 0xff, 0xbf} // '-' and '_' in base64url
			}
			ids[tp] = id
			log := createPartition(t, d, tp, id)
			mustAppend(t, log, testBatch(0, 1, baseTimestamp+int64(tp.Partition)))
		}
		if _, err := d.Create(TopicPartition{"a", 2}, rb.NewTopicID(), testConfig()); !errors.Is(err, ErrExists) {
			t.Errorf("create twice: got %v, want ErrExists", err)
		}
		want := []PartitionInfo{{TopicPartition{"a", 2}, ids[TopicPartition{"a", 2}]}, {TopicPartition{"a", 10}, ids[TopicPartition{"a", 10}]},
			{TopicPartition{"b", 1}, ids[TopicPartition{"b", 1}]}, {TopicPartition{"b-1", 0}, ids[TopicPartition{"b-1", 0}]}}
		check := func(d *Dir) {
			t.Helper()
			if got := d.List(); !slices.Equal(got, want) {
				t.Errorf("list %v, want %v", got, want)
			}
			for _, info := range want {
				log, got, ok := d.Get(info.TopicPartition)
				if !ok || got != info {
					t.Errorf("get %s: %v %v, want %v", info.TopicPartition, got, ok, info)
					continue
				}
				checkContents(t, log, [][]byte{testBatch(0, 1, baseTimestamp+int64(info.Partition))})
				metadata := string(fileBytes(t, fsys, path.Join(dirPath, info.TopicPartition.String(), partitionMetadataName)))
				if wantMeta := "version: 0\ntopic_id: " + info.TopicID.String() + "\n"; metadata != wantMeta {
					t.Errorf("%s partition.metadata %q, want %q", info.TopicPartition, metadata, wantMeta)
				}
			}
			if _, _, ok := d.Get(TopicPartition{"a", 3}); ok {
				t.Errorf("get of a partition never created succeeded")
			}
		}
		check(d)
		closeDir(t, d)
		d = openDir(t, fsys, dirPath, testConfig())
		check(d)
		closeDir(t, d)
	})
}

func TestDirDelete(t *testing.T) {
	fsys := vfs.NewMem()
	d := openDir(t, fsys, "/data", testConfig())
	keep, gone := TopicPartition{"t", 0}, TopicPartition{"t", 1}
	keepID := rb.NewTopicID()
	mustAppend(t, createPartition(t, d, keep, keepID), testBatch(0, 1, baseTimestamp))
	mustAppend(t, createPartition(t, d, gone, rb.NewTopicID()), testBatch(0, 1, baseTimestamp))
	if err := d.Delete(gone); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(gone); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: got %v, want ErrNotFound", err)
	}
	if _, _, ok := d.Get(gone); ok {
		t.Errorf("get of a deleted partition succeeded")
	}
	fsys.CrashClean()
	if err := d.Close(); !errors.Is(err, vfs.ErrCrashed) {
		t.Fatalf("close after a crash: got %v, want ErrCrashed", err)
	}
	names, err := fsys.List("/data")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{metaPropertiesName, "t-0"}; !slices.Equal(names, want) {
		t.Errorf("data dir after delete and crash holds %v, want %v", names, want)
	}
	d = openDir(t, fsys, "/data", testConfig())
	if got, want := d.List(), []PartitionInfo{{keep, keepID}}; !slices.Equal(got, want) {
		t.Errorf("list after delete and crash: %v, want %v", got, want)
	}
	log := createPartition(t, d, gone, rb.NewTopicID()) // the name is free again
	if log.LogEndOffset() != 0 {
		t.Errorf("recreated partition has log end %d, want 0", log.LogEndOffset())
	}
	closeDir(t, d)
}

// TestDirOpenCleansUp: an interrupted delete (a *-delete directory) and an
// interrupted create (a partition directory without partition.metadata)
// are removed at open; other entries are left alone.
func TestDirOpenCleansUp(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dirPath string) {
		closeDir(t, openDir(t, fsys, dirPath, testConfig()))
		for _, dir := range []string{"t-0.0123456789abcdef-delete", "t-1", "lost+found"} {
			if err := fsys.MkdirAll(path.Join(dirPath, dir)); err != nil {
				t.Fatal(err)
			}
			f, err := fsys.Create(path.Join(dirPath, dir, "00000000000000000000.log"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(testBatch(0, 1, 0)); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
		d := openDir(t, fsys, dirPath, testConfig())
		defer closeDir(t, d)
		if got := d.List(); len(got) != 0 {
			t.Errorf("partitions %v after open, want none", got)
		}
		names, err := fsys.List(dirPath)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"lost+found", metaPropertiesName}; !slices.Equal(names, want) {
			t.Errorf("data dir holds %v after open, want %v", names, want)
		}
	})
}

func TestDirFlushInterval(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
		durable  bool
	}{
		{"the flusher syncs", time.Millisecond, true},
		{"nothing synced before the interval", time.Hour, false},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			cfg := testConfig()
			cfg.Flush, cfg.FlushInterval = FlushInterval, test.interval
			d := openDir(t, fsys, "/data", cfg)
			tp := TopicPartition{"t", 0}
			batch := testBatch(0, 1, baseTimestamp)
			mustAppend(t, createPartition(t, d, tp, rb.NewTopicID()), batch)
			segment := path.Join("/data", tp.String(), "00000000000000000000.log")
			if test.durable {
				deadline := time.Now().Add(10 * time.Second)
				poll := time.NewTicker(time.Millisecond)
				for data, _ := fsys.Durable(segment); int64(len(data)) != batchSize; data, _ = fsys.Durable(segment) {
					if time.Now().After(deadline) {
						t.Fatalf("the appended batch is not durable after 10s of a %v flush interval", test.interval)
					}
					<-poll.C
				}
				poll.Stop()
			}
			fsys.CrashClean()
			if err := d.Close(); !errors.Is(err, vfs.ErrCrashed) {
				t.Fatalf("close after a crash: got %v, want ErrCrashed", err)
			}
			d = openDir(t, fsys, "/data", cfg)
			defer closeDir(t, d)
			log, _, ok := d.Get(tp)
			if !ok {
				t.Fatalf("partition %s lost in the crash", tp)
			}
			want := [][]byte{}
			if test.durable {
				want = append(want, batch)
			}
			checkContents(t, log, want)
			if log.LogEndOffset() != rb.Offset(5*len(want)) {
				t.Errorf("log end %d after the crash", log.LogEndOffset())
			}
		})
	}
}

// TestDirCreateAll: partitions made together are durable when CreateAll
// returns (a crash right after keeps them all), and one that fails leaves
// nothing behind: no partition registered, no directory, and the same
// call succeeds once the fault is gone.
func TestDirCreateAll(t *testing.T) {
	tps := func(topic string, n int) []TopicPartition {
		var out []TopicPartition
		for i := range n {
			out = append(out, TopicPartition{topic, int32(i)})
		}
		return out
	}
	mem := vfs.NewMem()
	d := openDir(t, mem, "/d", testConfig())
	id := rb.NewTopicID()
	logs, err := d.CreateAll(tps("all", 20), id, testConfig())
	if err != nil || len(logs) != 20 {
		t.Fatalf("CreateAll: %d logs, %v", len(logs), err)
	}
	mustAppend(t, logs[19], testBatch(0, 1, baseTimestamp))
	mem.CrashClean()
	d = openDir(t, mem, "/d", testConfig())
	if got := d.List(); len(got) != 20 || got[0] != (PartitionInfo{TopicPartition{"all", 0}, id}) {
		t.Fatalf("after a crash: %v, want the 20 partitions", got)
	}

	for _, op := range []vfs.Op{vfs.OpCreate, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir} {
		topic := "some." + op.String()
		for failAt := 0; ; failAt++ {
			mem.SetFault(vfs.FailAfter(op, failAt, vfs.ErrInjected))
			_, err := d.CreateAll(tps(topic, 12), id, testConfig())
			mem.SetFault(nil)
			if err == nil {
				if failAt < 12 {
					t.Fatalf("CreateAll succeeded with %s #%d failing", op, failAt)
				}
				break
			}
			if !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("%s #%d failing: %v, want the injected fault", op, failAt, err)
			}
			for _, info := range d.List() {
				if info.Topic == topic {
					t.Fatalf("%s #%d failing: %s registered", op, failAt, info.TopicPartition)
				}
			}
			names, err := mem.List("/d")
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range names {
				if strings.HasPrefix(name, topic+"-") {
					t.Fatalf("%s #%d failing: %s left behind", op, failAt, name)
				}
			}
		}
	}
	if got := len(d.List()); got != 20+4*12 {
		t.Errorf("%d partitions in the end, want %d", got, 20+4*12)
	}
	closeDir(t, d)
}
