package logstore

import (
	"errors"
	"path"
	"strings"
	"testing"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// TestDirOfflinePartition: a partition directory whose partition.metadata
// or a checkpoint cannot be read made OpenDir fail for the whole data
// directory; now that partition alone is offline (listed with an error
// naming the file), the others open, and Rebuild moves it aside under
// failed/ and starts it empty with the topic ID.
func TestDirOfflinePartition(t *testing.T) {
	for _, c := range []struct {
		file string
		junk string
	}{
		{partitionMetadataName, "version: 0\ntopic_id: junk\n"},
		{offsetsCheckpointName, "0\nlog-start-offset x\n"},
		{epochCheckpointName, "0\n2\n1 0\n"},
		{cleanerCheckpointName, "junk"},
	} {
		t.Run(c.file, func(t *testing.T) {
			fsys := vfs.NewMem()
			d := openDir(t, fsys, "/data", testConfig())
			id := rb.NewTopicID()
			good, bad := TopicPartition{"t", 0}, TopicPartition{"t", 1}
			for _, tp := range []TopicPartition{good, bad} {
				log := createPartition(t, d, tp, id)
				if _, err := log.AppendAssign(testBatch(0, 3, baseTimestamp), 3); err != nil {
					t.Fatal(err)
				}
			}
			closeDir(t, d)
			if err := WriteFileAtomic(fsys, "/data/t-1", c.file, []byte(c.junk)); err != nil {
				t.Fatal(err)
			}

			d, err := OpenDir(fsys, "/data", testConfig())
			if err != nil {
				t.Fatalf("one partition's %s stopped the whole directory: %v", c.file, err)
			}
			defer closeDir(t, d)
			if infos := d.List(); len(infos) != 1 || infos[0].TopicPartition != good {
				t.Errorf("online partitions %v, want %s alone", infos, good)
			}
			offline := d.Offline()
			if len(offline) != 1 || offline[0].TopicPartition != bad || offline[0].Path != "/data/t-1" ||
				!errors.Is(offline[0].Err, ErrCorrupt) || !strings.Contains(offline[0].Err.Error(), c.file) {
				t.Fatalf("offline partitions %+v, want t-1 with a corrupt %s", offline, c.file)
			}
			if _, _, ok := d.Get(bad); ok {
				t.Error("Get returns the offline partition's log")
			}
			if _, err := d.Create(bad, id, testConfig()); !errors.Is(err, ErrExists) {
				t.Errorf("Create over the offline partition: %v, want ErrExists", err)
			}

			log, aside, err := d.Rebuild(bad, id, testConfig())
			if err != nil {
				t.Fatal(err)
			}
			if path.Dir(aside) != "/data/"+FailedDir || !strings.HasPrefix(path.Base(aside), "t-1.") {
				t.Errorf("moved aside to %s, want /data/failed/t-1.<ms>", aside)
			}
			if kept, err := fsys.Exists(path.Join(aside, c.file)); !kept || err != nil {
				t.Errorf("the broken %s is not kept in %s (%v)", c.file, aside, err)
			}
			if log.LogEndOffset() != 0 || len(d.Offline()) != 0 || len(d.List()) != 2 {
				t.Errorf("after Rebuild: log end %d, offline %v, online %v", log.LogEndOffset(), d.Offline(), d.List())
			}
			if _, info, ok := d.Get(bad); !ok || info.TopicID != id {
				t.Errorf("rebuilt partition: %v, topic ID %s, want %s", ok, info.TopicID, id)
			}
		})
	}
}
