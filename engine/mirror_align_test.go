package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// TestKeepTruncatedLongTopicName: failback keeps what it truncates in a
// file whose name fits any legal topic name (249 characters, Kafka's
// limit), in a folder named as the partition's log folder.
func TestKeepTruncatedLongTopicName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	n, err := OpenNode(NodeConfig{FS: vfs.OS, DataDir: dir, Log: logstore.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	topic := strings.Repeat("t", 249)
	createTopic(t, n, topic, 1)
	p, err := n.LocalPartition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	var written []byte
	for i := range 3 {
		batch := rb.Append(nil, rb.Spec{ProducerID: -1, Records: []rb.Record{{Value: []byte{byte(i)}}}})
		if _, err := p.Produce(context.Background(), batch, netio.ProduceRequest{Acks: -1}); err != nil {
			t.Fatal(err)
		}
	}
	if written, err = p.Log().ReadBytes(written, 1, 1<<20, 3, true); err != nil {
		t.Fatal(err)
	}
	m := &mirror{node: n, log: n.log}
	mp := &mirrorPartition{topic: topic, partition: 0, local: p}
	file, err := m.keepTruncated(mp, 1, 3)
	if err != nil {
		t.Fatalf("keep offsets [1, 3) of a %d-character topic: %v", len(topic), err)
	}
	if want := filepath.Join(dir, logstore.TruncatedDir, topic+"-0", "1-3.batches"); file != want {
		t.Fatalf("kept in %s, want %s", file, want)
	}
	kept, err := os.ReadFile(file)
	if err != nil || string(kept) != string(written) {
		t.Fatalf("kept %d bytes (%v), want the %d bytes of offsets [1, 3)", len(kept), err, len(written))
	}
}
