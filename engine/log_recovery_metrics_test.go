package engine

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"testing"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// TestLogRecoveryReported is issue 19's finding: after an unclean stop and
// one flipped byte in the middle of a partition's segment, the open cut
// the log there without a word. Now the cut is logged at WARN with its
// fields, counted in /metrics (once, with its bytes), and the removed
// bytes are in truncated/t-0.
func TestLogRecoveryReported(t *testing.T) {
	const dataDir = "/data"
	fsys := vfs.NewMem()
	var lines bytes.Buffer
	open := func() *Node {
		t.Helper()
		n, err := OpenNode(NodeConfig{FS: fsys, DataDir: dataDir, Log: logstore.DefaultConfig(), Logger: slog.New(slog.NewTextHandler(&lines, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := open()
	createTopic(t, n, "t", 1)
	p, err := n.LocalPartition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	const batches = 10
	for i := range batches {
		batch := rb.Append(nil, rb.Spec{ProducerID: -1, Records: []rb.Record{{Value: bytes.Repeat([]byte{byte(i)}, 100)}}})
		if _, err := p.Produce(context.Background(), batch, netio.ProduceRequest{Acks: -1}); err != nil {
			t.Fatal(err)
		}
	}
	if got := scrapeMetric(t, n, "mirrord_log_recovery_truncations_total"); len(got) != 0 {
		t.Fatalf("truncations %v before any recovery", got)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// Flip a record byte of the sixth batch, then stop uncleanly.
	logDir := path.Join(dataDir, "t-0")
	segment := path.Join(logDir, fmt.Sprintf("%020d.log", 0))
	data := readMem(t, fsys, segment)
	it := rb.NewIter(data, false)
	for i := 0; i < 6 && it.Next(); i++ {
	}
	position := int64(it.Position())
	data[position+rb.HeaderSize+20] ^= 0x40
	writeMem(t, fsys, segment, data)
	if err := fsys.Remove(path.Join(logDir, ".clean-shutdown")); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(logDir); err != nil {
		t.Fatal(err)
	}
	lines.Reset()

	n = open()
	defer n.Close()
	removed := data[position:]
	labels := map[string]string{"topic": "t", "partition": "0"}
	for name, want := range map[string]float64{"mirrord_log_recovery_truncations_total": 1, "mirrord_log_recovery_truncated_bytes_total": float64(len(removed))} {
		got := scrapeMetric(t, n, name)
		if len(got) != 1 || fmt.Sprint(got[0].labels) != fmt.Sprint(labels) || got[0].value != want {
			t.Errorf("%s: %v, want %v at %v", name, got, want, labels)
		}
	}
	families, err := n.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if problems, err := promlint.NewWithMetricFamilies(families).Lint(); err != nil || len(problems) != 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
	// logstore.TruncatedDir, spelled out so that this test runs on the code before it.
	kept := path.Join(dataDir, "truncated", "t-0", fmt.Sprintf("recovery-0-%d.bytes", position))
	if got := readMem(t, fsys, kept); !bytes.Equal(got, removed) {
		t.Errorf("kept %d bytes, want the %d removed", len(got), len(removed))
	}
	var warn string
	for _, line := range strings.Split(lines.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "recovery") {
			warn = line
		}
	}
	for _, field := range []string{"topic=t", "partition=0", "segment=" + segment, fmt.Sprintf("position=%d", position), fmt.Sprintf("bytes=%d", len(removed)),
		"first_offset=5", fmt.Sprintf("last_offset=%d", batches-1), "kept=" + kept, "crc"} {
		if !strings.Contains(warn, field) {
			t.Errorf("WARN line %q lacks %q", warn, field)
		}
	}
	p, err = n.LocalPartition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Log().LogEndOffset(); got != 5 {
		t.Errorf("log end %d after the cut, want 5", got)
	}
}

func readMem(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	data, ok, err := logstore.ReadFile(fsys, name)
	if err != nil || !ok {
		t.Fatalf("read %s: %v (exists %v)", name, err, ok)
	}
	return data
}

func writeMem(t *testing.T, fsys vfs.FS, name string, data []byte) {
	t.Helper()
	if err := logstore.WriteFileAtomic(fsys, path.Dir(name), path.Base(name), data); err != nil {
		t.Fatal(err)
	}
}
