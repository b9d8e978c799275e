package engine

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

func openStateTestNode(t *testing.T, fs vfs.FS, dir string) *Node {
	t.Helper()
	n, err := OpenNode(NodeConfig{FS: fs, DataDir: dir, Log: logstore.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func testStateKey(mirror string, partition int32) MirrorStateKey {
	return MirrorStateKey{Mirror: mirror, TopicID: netio.TopicID{1, 2, 3}, Partition: partition}
}

func mirroringValue(epoch mirrorstate.StateEpoch) mirrorstate.Record {
	return mirrorstate.Record{State: mirrorstate.Mirroring, Previous: mirrorstate.Failed, StateEpoch: epoch, SourceLeaderEpoch: rb.NoEpoch,
		NextRetryAtMillis: -1, LastMirrorEpoch: rb.NoEpoch, LastMirrorOffset: -1, TruncateTo: -1}
}

func failedValue(epoch mirrorstate.StateEpoch, text string) mirrorstate.Record {
	return mirrorstate.Record{State: mirrorstate.Failed, Previous: mirrorstate.Mirroring, StateEpoch: epoch, SourceLeaderEpoch: rb.NoEpoch,
		RetryCount: 3, Error: text, NextRetryAtMillis: -1, LastMirrorEpoch: rb.NoEpoch, LastMirrorOffset: -1, TruncateTo: -1}
}

func mustPut(t *testing.T, n *Node, key MirrorStateKey, value mirrorstate.Record) {
	t.Helper()
	if err := n.states.(*stateLog).put(key, value); err != nil {
		t.Fatal(err)
	}
}

func wantState(t *testing.T, n *Node, key MirrorStateKey, want mirrorstate.Record) {
	t.Helper()
	got, ok := n.states.get(key)
	if !ok || got != want {
		t.Fatalf("%v: got %v (found %v), want %v", key, got, ok, want)
	}
}

func TestStateLogPutReplay(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	n := openStateTestNode(t, vfs.OS, dir)
	if _, ok := n.Topic(mirrorStateTopic); ok {
		t.Fatal("__mirror_state exists before its first write")
	}
	a, b := testStateKey("m", 0), testStateKey("m", 1)
	mustPut(t, n, a, mirroringValue(1))
	mustPut(t, n, b, failedValue(1, "the source topic x was deleted"))
	mustPut(t, n, a, failedValue(2, "boom"))

	info, ok := n.Topic(mirrorStateTopic)
	if !ok || !info.Internal || info.Partitions != 1 {
		t.Fatalf("topic info %+v (found %v), want internal with 1 partition", info, ok)
	}
	ctx := context.Background()
	p, err := n.Partition(mirrorStateTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Produce(ctx, rb.Append(nil, rb.Spec{ProducerID: -1, Records: []rb.Record{{Value: []byte("x")}}}), netio.ProduceRequest{}); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	if _, err := p.DeleteRecords(ctx, -1); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("delete records: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	if err := n.DeleteTopic(ctx, mirrorStateTopic); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("delete topic: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = openStateTestNode(t, vfs.OS, dir)
	defer n.Close()
	wantState(t, n, a, failedValue(2, "boom"))
	wantState(t, n, b, failedValue(1, "the source topic x was deleted"))
	if info, ok := n.Topic(mirrorStateTopic); !ok || !info.Internal {
		t.Fatalf("after reopen: topic info %+v (found %v), want internal", info, ok)
	}
	if err := n.DeleteTopic(ctx, mirrorStateTopic); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("delete topic after reopen: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	mustPut(t, n, a, mirroringValue(3)) // the replayed epoch fences on
	wantState(t, n, a, mirroringValue(3))
}

// A put is durable when it returns: a crash (power loss, no Close) and a
// reopen find it.
func TestStateLogSurvivesCrash(t *testing.T) {
	mem := vfs.NewMem()
	n := openStateTestNode(t, mem, "/data")
	a, b := testStateKey("m", 0), testStateKey("other", 4)
	for epoch := mirrorstate.StateEpoch(1); epoch <= 5; epoch++ {
		mustPut(t, n, a, failedValue(epoch, "attempt"))
	}
	mustPut(t, n, b, mirroringValue(1))
	mem.Crash(nil) // the first node is dead: its handles fail from here on
	n2 := openStateTestNode(t, mem, "/data")
	defer n2.Close()
	wantState(t, n2, a, failedValue(5, "attempt"))
	wantState(t, n2, b, mirroringValue(1))
}

func TestStateLogFencing(t *testing.T) {
	n := openStateTestNode(t, vfs.OS, filepath.Join(t.TempDir(), "data"))
	defer n.Close()
	key := testStateKey("m", 0)
	mustPut(t, n, key, failedValue(2, "first"))
	for _, stale := range []mirrorstate.StateEpoch{1, 2} {
		if err := n.states.(*stateLog).put(key, mirroringValue(stale)); err == nil || !strings.Contains(err.Error(), "fenced") {
			t.Fatalf("put at state epoch %d over 2: %v, want fenced", stale, err)
		}
	}
	wantState(t, n, key, failedValue(2, "first"))
	mustPut(t, n, testStateKey("m", 1), mirroringValue(1)) // another key has its own epochs
	mustPut(t, n, key, mirroringValue(3))
	wantState(t, n, key, mirroringValue(3))
}

func TestStateLogCompactionByRewrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	n := openStateTestNode(t, vfs.OS, dir)
	const keys, epochs = 3, 400 // 1200 records, 3 live
	for epoch := mirrorstate.StateEpoch(1); epoch <= epochs; epoch++ {
		for k := range int32(keys) {
			mustPut(t, n, testStateKey("m", k), failedValue(epoch, "e"))
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the rewrite, then a plain replay of it
		n = openStateTestNode(t, vfs.OS, dir)
		if n.states.(*stateLog).records != keys {
			t.Fatalf("%d records after open, want %d", n.states.(*stateLog).records, keys)
		}
		if start, end := n.states.(*stateLog).log.LogStartOffset(), n.states.(*stateLog).log.LogEndOffset(); start != keys*epochs || end != keys*epochs+keys {
			t.Fatalf("log offsets [%d, %d), want [%d, %d)", start, end, keys*epochs, keys*epochs+keys)
		}
		for k := range int32(keys) {
			wantState(t, n, testStateKey("m", k), failedValue(epochs, "e"))
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	n = openStateTestNode(t, vfs.OS, dir)
	defer n.Close()
	mustPut(t, n, testStateKey("m", 0), mirroringValue(epochs+1))
	if err := n.states.(*stateLog).put(testStateKey("m", 1), mirroringValue(epochs)); err == nil {
		t.Fatal("a stale epoch was accepted after compaction")
	}
}

func TestStateLogCorruptRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	n := openStateTestNode(t, vfs.OS, dir)
	mustPut(t, n, testStateKey("m", 0), mirroringValue(1))
	key, _ := EncodeMirrorStateRecord(testStateKey("m", 1), mirroringValue(1))
	bad := rb.Append(nil, rb.Spec{ProducerID: -1, Records: []rb.Record{{Key: key, Value: []byte{0, 99}}}})
	if _, err := n.states.(*stateLog).log.AppendAssign(bad, 0); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// The node starts; the corrupt batch is skipped, kept in quarantine/,
	// and the readable records before it are replayed.
	n = openStateTestNode(t, vfs.OS, dir)
	defer n.Close()
	wantState(t, n, testStateKey("m", 0), mirroringValue(1))
	if _, ok := n.states.get(testStateKey("m", 1)); ok {
		t.Fatal("a corrupt record was replayed")
	}
	kept, err := os.ReadFile(filepath.Join(dir, quarantineDir, "__mirror_state-0", "1.batch"))
	if err != nil {
		t.Fatalf("the corrupt batch was not kept: %v", err)
	}
	if parsed, err := rb.Parse(kept); err != nil || parsed.BaseOffset() != 1 || len(kept) != len(bad) {
		t.Fatalf("kept %d bytes (%v), want the %d-byte batch at offset 1", len(kept), err, len(bad))
	}
	mustPut(t, n, testStateKey("m", 1), mirroringValue(2)) // the log goes on past it
}

// TestStateTopicRefusesClients: clients can neither create __mirror_state
// before the node does (Kafka's rule for internal topics) nor write it.
func TestStateTopicRefusesClients(t *testing.T) {
	n := openStateTestNode(t, vfs.OS, filepath.Join(t.TempDir(), "data"))
	defer n.Close()
	if _, err := n.CreateTopic(context.Background(), mirrorStateTopic, 1, nil, false); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("create %s: %v, want INVALID_REQUEST", mirrorStateTopic, err)
	}
	if _, ok := n.Topic(mirrorStateTopic); ok {
		t.Fatalf("%s exists after a refused create", mirrorStateTopic)
	}
	mustPut(t, n, testStateKey("m", 0), mirroringValue(1))
	p, err := n.Partition(mirrorStateTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	batch := rb.Append(nil, rb.Spec{ProducerID: -1, Records: []rb.Record{{Value: []byte{1}}}})
	if _, err := p.Produce(context.Background(), batch, netio.ProduceRequest{Acks: -1}); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to %s: %v, want INVALID_TOPIC_EXCEPTION", mirrorStateTopic, err)
	}
	if err := n.DeleteTopic(context.Background(), mirrorStateTopic); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("delete %s: %v, want INVALID_TOPIC_EXCEPTION", mirrorStateTopic, err)
	}
}

// serveNode opens a node and serves it like startNode; stop (also run at
// cleanup) stops serving and closes the node, once.
func serveNode(t *testing.T, dir string) (*Node, string, func()) {
	t.Helper()
	return serveNodeLog(t, dir, logstore.DefaultConfig())
}

// serveNodeLog is serveNode with the logs' config.
func serveNodeLog(t *testing.T, dir string, cfg logstore.Config) (*Node, string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	node, err := OpenNode(NodeConfig{FS: vfs.OS, DataDir: dir, Log: cfg, Host: addr.IP.String(), Port: int32(addr.Port)})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- netio.NewServer(netio.Config{Backend: node}).Serve(ctx, ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
			if err := node.Close(); err != nil {
				t.Errorf("close node: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return node, ln.Addr().String(), stop
}

func failedPartitions(t *testing.T, n *Node) []netio.MirrorPartitionStatus {
	t.Helper()
	descriptions, err := n.Mirrors().DescribeMirrors(context.Background(), []string{"m"}, true)
	if err != nil {
		t.Fatal(err)
	}
	return descriptions[0].Partitions
}

// stateHistory reads every __mirror_state record of key, oldest first.
func stateHistory(t *testing.T, n *Node, key MirrorStateKey) []mirrorstate.Record {
	t.Helper()
	states := n.states.(*stateLog)
	states.mu.Lock()
	log := states.log
	states.mu.Unlock()
	var out []mirrorstate.Record
	buf, err := log.ReadBytes(nil, log.LogStartOffset(), 1<<30, log.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	batches := rb.NewIter(buf, true)
	for batches.Next() {
		it := records.NewIter(batches.Batch().Records())
		for it.Next() {
			k, v, err := DecodeMirrorStateRecord(it.Record().Key, it.Record().Value)
			if err != nil {
				t.Fatal(err)
			}
			if k == key {
				out = append(out, v)
			}
		}
	}
	if batches.Err() != nil {
		t.Fatal(batches.Err())
	}
	return out
}

// A partition FAILED waiting for recover (its source topic was deleted)
// stays FAILED, with its error, across a restart of the target node, and
// RecoverMirroring persists MIRRORING.
func TestMirrorFailedStateSurvivesRestart(t *testing.T) {
	sourceNode, sourceAddr := startNode(t, filepath.Join(t.TempDir(), "source"))
	targetDir := filepath.Join(t.TempDir(), "target")
	target, targetAddr, stop := serveNode(t, targetDir)
	createTopic(t, sourceNode, "gone", 2)
	produceMixed(t, sourceAddr, "gone", 2, 1)
	startMirroring(t, target, sourceAddr, "gone")
	waitMirrored(t, newClient(t, sourceAddr), newClient(t, targetAddr), "gone", 2)
	info, ok := target.Topic("gone")
	if !ok {
		t.Fatal("no local topic gone")
	}
	if err := sourceNode.DeleteTopic(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(20 * time.Second)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	var failed []netio.MirrorPartitionStatus
	for failed = failedPartitions(t, target); len(failed) != 2; failed = failedPartitions(t, target) {
		if time.Now().After(deadline) {
			t.Fatalf("partitions not failed after the source topic was deleted: %+v", failed)
		}
		<-poll.C
	}
	persisted := map[int32]mirrorstate.Record{}
	for _, p := range failed {
		v, ok := target.states.get(MirrorStateKey{Mirror: "m", TopicID: info.ID, Partition: p.Partition})
		if !ok || v.State != mirrorstate.Failed || v.Retryable || v.Error != p.Error || !strings.Contains(v.Error, "was deleted") {
			t.Fatalf("partition %d: persisted %v (found %v), want FAILED waiting for recover with %q", p.Partition, v, ok, p.Error)
		}
		persisted[p.Partition] = v
	}
	// The report the console reads says the same as the describe.
	for _, r := range target.MirrorReports()[0].Partitions {
		v := persisted[r.Partition]
		if r.State != mirrorstate.Failed || r.Error != v.Error || r.RetryCount != -1 || r.Previous != v.Previous {
			t.Fatalf("report of partition %d: %v from %v, error %q, retry count %d; want FAILED from %v, %q, -1",
				r.Partition, r.State, r.Previous, r.Error, r.RetryCount, v.Previous, v.Error)
		}
	}
	stop()

	target, _, _ = serveNode(t, targetDir)
	after := failedPartitions(t, target) // before or racing the first refresh: FAILED either way
	if len(after) != 2 {
		t.Fatalf("after restart: failed partitions %+v, want 2", after)
	}
	for i, p := range after {
		if p.State != "FAILED" || p.RetryCount != -1 || p.Error != failed[i].Error {
			t.Fatalf("after restart: partition %d %s, retry count %d, error %q; want FAILED, -1, %q", p.Partition, p.State, p.RetryCount, p.Error, failed[i].Error)
		}
		if v, _ := target.states.get(MirrorStateKey{Mirror: "m", TopicID: info.ID, Partition: p.Partition}); v != persisted[p.Partition] {
			t.Fatalf("after restart: partition %d persisted %v, want %v unchanged", p.Partition, v, persisted[p.Partition])
		}
	}

	results, err := target.Mirrors().SetTopicsDesiredState(context.Background(), "m", netio.RecoverMirroring, netio.TopicSelection{Names: []string{"gone"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("recover %s: %v", r.Topic, r.Err)
		}
	}
	// The source topic is still gone, so the next refresh may fail the
	// partitions again: look for the MIRRORING record in the history.
	for partition, was := range persisted {
		history := stateHistory(t, target, MirrorStateKey{Mirror: "m", TopicID: info.ID, Partition: partition})
		recovered := false
		for _, v := range history {
			if v.StateEpoch > was.StateEpoch && v.State == mirrorstate.Mirroring && v.Previous == mirrorstate.Failed {
				recovered = v.StateEpoch == was.StateEpoch+1
				break
			}
		}
		if !recovered {
			t.Fatalf("partition %d: no MIRRORING at state epoch %d after recover; history %v", partition, was.StateEpoch+1, history)
		}
	}
}

// TestStateLogPutAll: a group commit checks every entry before writing
// any (a fenced or repeated key refuses the whole write), writes more
// entries than one batch holds, and replays after a crash.
func TestStateLogPutAll(t *testing.T) {
	mem := vfs.NewMem()
	n := openStateTestNode(t, mem, "/data")
	mustPut(t, n, testStateKey("m", 0), failedValue(5, "stored"))
	for name, entries := range map[string][]stateEntry{
		"fenced":   {{testStateKey("m", 1), mirroringValue(1)}, {testStateKey("m", 0), mirroringValue(5)}},
		"repeated": {{testStateKey("m", 1), mirroringValue(1)}, {testStateKey("m", 1), mirroringValue(2)}},
	} {
		if err := n.states.(*stateLog).putAll(entries); err == nil {
			t.Fatalf("%s: putAll succeeded", name)
		}
		if _, ok := n.states.get(testStateKey("m", 1)); ok {
			t.Fatalf("%s: a refused putAll wrote an entry", name)
		}
	}
	const count = stateLogBatchRecords*2 + 7 // three batches
	var entries []stateEntry
	for i := range int32(count) {
		entries = append(entries, stateEntry{testStateKey("many", i), mirroringValue(mirrorstate.StateEpoch(i + 1))})
	}
	if err := n.states.(*stateLog).putAll(entries); err != nil {
		t.Fatal(err)
	}
	mem.Crash(nil)
	n2 := openStateTestNode(t, mem, "/data")
	defer n2.Close()
	for _, e := range entries {
		wantState(t, n2, e.key, e.value)
	}
	wantState(t, n2, testStateKey("m", 0), failedValue(5, "stored"))
}
