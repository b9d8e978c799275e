package logstore

import (
	"strings"
	"testing"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

func TestFormatDir(t *testing.T) {
	fsys := vfs.NewMem()
	meta := Meta{ClusterID: "MkU3OEVBNTcwNTJENDM2Qg", NodeID: 3}
	if _, ok, err := ReadMeta(fsys, "/data"); ok || err != nil {
		t.Fatalf("ReadMeta of nothing: ok %v err %v", ok, err)
	}
	if err := FormatDir(fsys, "/data", meta); err != nil {
		t.Fatal(err)
	}
	if err := FormatDir(fsys, "/data", meta); err != nil {
		t.Fatalf("formatting again with the same identity: %v", err)
	}
	d := openDir(t, fsys, "/data", testConfig())
	if d.ClusterID() != meta.ClusterID || d.NodeID() != 3 {
		t.Fatalf("opened as cluster %s node %d", d.ClusterID(), d.NodeID())
	}
	for _, other := range []Meta{{ClusterID: meta.ClusterID, NodeID: 4}, {ClusterID: "AAAAAAAAAAAAAAAAAAAAAA", NodeID: 3}} {
		err := FormatDir(fsys, "/data", other)
		if err == nil || !strings.Contains(err.Error(), "belongs to cluster "+meta.ClusterID+" as node 3") {
			t.Errorf("FormatDir %+v over %+v: %v", other, meta, err)
		}
	}
	if err := FormatDir(fsys, "/other", Meta{ClusterID: "not-a-uuid", NodeID: 1}); err == nil {
		t.Error("a cluster ID that is not a UUID was taken")
	}
}

func TestTopicNames(t *testing.T) {
	fsys := vfs.NewMem()
	d := openDir(t, fsys, "/data", testConfig())
	for _, tp := range []TopicPartition{{"b", 0}, {"a", 1}, {"a", 0}, {"__mirror_state", 0}} {
		if _, err := d.Create(tp, rb.NewTopicID(), testConfig()); err != nil {
			t.Fatal(err)
		}
	}
	names, err := TopicNames(fsys, "/data")
	if err != nil || strings.Join(names, ",") != "a,b" {
		t.Fatalf("TopicNames: %v %v, want a,b", names, err)
	}
}
