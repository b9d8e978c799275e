package broker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// TestLogDirReserve: below log.dir.reserve.bytes the writes clients and
// mirrors cause are refused as storage failures while the node's own
// writes go on, and they resume by themselves when space returns.
func TestLogDirReserve(t *testing.T) {
	const reserve = 1 << 20
	var free atomic.Int64
	free.Store(10 * reserve)
	n, err := Open(Config{FS: vfs.NewMem(), DataDir: "/data", Log: logstore.DefaultConfig(), LogDirReserveBytes: reserve,
		FreeSpace: func(string) (int64, int64, error) { return free.Load(), 100 * reserve, nil }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.CreateTopic(context.Background(), "t", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := n.EnsureTopic(context.Background(), "m", rb.NewTopicID(), 1); err != nil {
		t.Fatal(err)
	}
	p, _ := n.LocalPartition("t", 0)
	mirrored, _ := n.LocalPartition("m", 0)
	if _, err := produceTo(p, dataBatch(-1, -1, -1, 3, false), ""); err != nil {
		t.Fatalf("produce with room: %v", err)
	}
	if space := n.LogDirSpace(); !space.Known || space.Low || space.ReserveBytes != reserve || space.FreeBytes != 10*reserve {
		t.Fatalf("with room: %+v", space)
	}

	free.Store(reserve - 1) // another writer filled the disk
	n.space.refresh()       // the ticker's look
	refusals := map[string]error{}
	_, refusals["produce"] = produceTo(p, dataBatch(-1, -1, -1, 3, false), "")
	_, refusals["create topic"] = n.CreateTopic(context.Background(), "u", 1, nil, false)
	refusals["create partitions"] = n.CreatePartitions(context.Background(), "t", 2, false)
	_, refusals["mirror append"] = mirrored.AppendMirrored(rb.Append(nil, rb.Spec{BaseOffset: 0, BaseTimestamp: 1, ProducerID: -1,
		ProducerEpoch: -1, BaseSequence: -1, Records: []rb.Record{{Value: []byte("x")}}}))
	for what, err := range refusals {
		if !errors.Is(err, ErrLogDirLowSpace) || !errors.Is(err, netio.ErrStorage) {
			t.Errorf("%s below the reserve: %v, want ErrLogDirLowSpace (a netio.ErrStorage)", what, err)
		}
	}
	if space := n.LogDirSpace(); !space.Low || space.FreeBytes != reserve-1 {
		t.Errorf("below the reserve: %+v, want low", space)
	}
	if _, err := n.CreateTopic(context.Background(), "v", 1, nil, true); err != nil {
		t.Errorf("validate-only CreateTopics below the reserve: %v, want it answered (it writes nothing)", err)
	}
	if _, _, err := n.Transactions().InitProducerID(context.Background(), "", 60000, -1, -1); err != nil {
		t.Errorf("the node's own write (a producer ID block) below the reserve: %v", err)
	}

	free.Store(reserve + 4096) // space returns: no restart, no tick needed (a refused write looks again)
	if _, err := produceTo(p, dataBatch(-1, -1, -1, 3, false), ""); err != nil {
		t.Fatalf("produce after space returned: %v", err)
	}
	if space := n.LogDirSpace(); space.Low {
		t.Errorf("after space returned: %+v", space)
	}
	if end := p.LogEndOffset(); end != 6 {
		t.Errorf("log end %d, want 6: two acknowledged produces of 3", end)
	}
	free.Store(reserve + 100) // a batch that would take the disk below the reserve is refused
	n.space.refresh()
	if _, err := produceTo(p, dataBatch(-1, -1, -1, 200, false), ""); !errors.Is(err, ErrLogDirLowSpace) {
		t.Errorf("produce that would cross the reserve: %v, want ErrLogDirLowSpace", err)
	}
}
