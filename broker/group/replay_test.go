package group

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReplayAfterRestart: groups, generations, members, assignments and
// offsets come back from the store as they were answered.
func TestReplayAfterRestart(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stableGroup("g", "a", "b")
	h.commit(commitRequest(9, "g", ids[0], 1, map[int32]int64{0: 100, 1: 200}))
	h.commit(commitRequest(3, "simple", "", -1, map[int32]int64{0: 5}))
	h.commit(commitRequest(9, "gone", "", -1, map[int32]int64{0: 1}))
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"gone"}
	if _, err := h.c.DeleteGroups(h.ctx(), del); err != nil {
		t.Fatal(err)
	}
	h.commit(commitRequest(9, "g", ids[1], 1, map[int32]int64{0: 101})) // a later commit wins
	before := h.describe("g")

	h.restart()

	after := h.describe("g")
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("group after restart:\n%+v\nbefore:\n%+v", after, before)
	}
	for _, c := range []struct {
		group     string
		partition int32
		offset    int64
		epoch     int32
		metadata  string
	}{{"g", 0, 101, 7, "m"}, {"g", 1, 200, 7, "m"}, {"simple", 0, 5, -1, "m"}, {"gone", 0, -1, -1, ""}} {
		offset, epoch, metadata := h.fetch(c.group, c.partition)
		if offset != c.offset || epoch != c.epoch || metadata != c.metadata {
			t.Fatalf("%s/%d after restart: %d epoch %d %q, want %d epoch %d %q", c.group, c.partition, offset, epoch, metadata, c.offset, c.epoch, c.metadata)
		}
	}
	if s := h.state("gone"); s != "Dead" {
		t.Fatalf("deleted group came back: %s", s)
	}

	// The members carry on in generation 1 without a rebalance; a member
	// that does not heartbeat within its session timeout after the
	// restart is removed.
	h.advance(9 * time.Second)
	expectCode(t, "heartbeat after restart", h.heartbeat("g", ids[0], 1), 0)
	sb := h.sync(syncRequest("g", ids[1], 1, nil))
	if string(sb.MemberAssignment) != "b" {
		t.Fatalf("assignment of b after restart: %q", sb.MemberAssignment)
	}
	h.advance(1 * time.Second)
	expectCode(t, "heartbeat of the silent member", h.heartbeat("g", ids[1], 1), kerr.UnknownMemberID.Code)
	expectCode(t, "heartbeat of a during the rebalance", h.heartbeat("g", ids[0], 1), kerr.RebalanceInProgress.Code)
	ra := h.join("a", joinRequest("g", ids[0]))
	if ra.Generation != 2 || ra.LeaderID != ids[0] {
		t.Fatalf("rejoin after restart: %+v", ra)
	}
}

// TestRecordsAreKafkas: the store holds Kafka's __consumer_offsets records
// in the versions Kafka writes.
func TestRecordsAreKafkas(t *testing.T) {
	h := newHarness(t, nil)
	ids := h.stableGroup("g", "a")
	h.commit(commitRequest(9, "g", ids[0], 1, map[int32]int64{0: 42}))
	retention := commitRequest(2, "simple", "", -1, map[int32]int64{0: 43})
	retention.RetentionTimeMillis = 60000
	h.commit(retention)

	var offsetValues, groupValues []int16
	for _, r := range h.store.Records() {
		keyVersion := int16(binary.BigEndian.Uint16(r.Key))
		valueVersion := int16(binary.BigEndian.Uint16(r.Value))
		switch keyVersion {
		case 1:
			offsetValues = append(offsetValues, valueVersion)
		case 2:
			groupValues = append(groupValues, valueVersion)
		default:
			t.Fatalf("key version %d", keyVersion)
		}
	}
	// g's creation, its generation 1; the commit (v3) and the commit with
	// a retention time (v1, with the expire timestamp).
	if !reflect.DeepEqual(groupValues, []int16{3, 3}) || !reflect.DeepEqual(offsetValues, []int16{3, 1}) {
		t.Fatalf("value versions: group %v, offset %v", groupValues, offsetValues)
	}
	records := h.store.Records()
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(records[len(records)-1].Value); err != nil {
		t.Fatal(err)
	}
	now := epoch.UnixMilli()
	if v.Offset != 43 || v.LeaderEpoch != 0 || v.CommitTimestamp < now || v.ExpireTimestamp != v.CommitTimestamp+60000 {
		t.Fatalf("v1 offset value %+v", v)
	}
	var g kmsg.GroupMetadataValue
	if err := g.ReadFrom(records[1].Value); err != nil {
		t.Fatal(err)
	}
	if g.ProtocolType != "consumer" || *g.Protocol != "range" || g.Generation != 1 || *g.Leader != ids[0] ||
		len(g.Members) != 1 || string(g.Members[0].Assignment) != "a" || g.Members[0].SessionTimeoutMillis != 10000 ||
		g.Members[0].RebalanceTimeoutMillis != 60000 || g.Members[0].ClientID != "a" || g.CurrentStateTimestamp != now+3000 { // CompletingRebalance after the initial delay
		t.Fatalf("group metadata value %+v", g)
	}
}

// TestReplayRefusesCorruptRecords: a store that does not hold classic
// group records does not open.
func TestReplayRefusesCorruptRecords(t *testing.T) {
	for _, tt := range []struct {
		name   string
		record Record
	}{
		{"short key", Record{Key: []byte{0}}},
		{"truncated offset key", Record{Key: []byte{0, 1, 0, 5, 'a'}}},
		{"consumer group record", Record{Key: []byte{0, 3, 0, 1, 'g'}, Value: []byte{0, 0}}},
		{"truncated offset value", Record{Key: offsetTombstone("g", "t", 0).Key, Value: []byte{0, 3, 0}}},
		{"group value of a future version", Record{Key: groupTombstone("g").Key, Value: (&kmsg.GroupMetadataValue{Version: 5}).AppendTo(nil)}},
		{"members without a protocol", Record{Key: groupTombstone("g").Key, Value: (&kmsg.GroupMetadataValue{Version: 3, Members: []kmsg.GroupMetadataValueMember{{MemberID: "m"}}}).AppendTo(nil)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := &MemoryStore{}
			if err := store.Append([]Record{tt.record}); err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig()
			cfg.Clock = NewManualClock(epoch)
			if c, err := New(cfg, store); !errors.Is(err, ErrCorruptRecord) {
				if c != nil {
					c.Close()
				}
				t.Fatalf("New: %v, want ErrCorruptRecord", err)
			}
		})
	}
}

// TestCloseAnswersWaiters: a JoinGroup waiting for its group returns
// ErrClosed when the coordinator closes.
func TestCloseAnswersWaiters(t *testing.T) {
	h := newHarness(t, nil)
	a := h.memberID("a", joinRequest("g", ""))
	errs := make(chan error, 1)
	go func() {
		_, err := h.c.JoinGroup(h.ctx(), Client{ID: "a"}, joinRequest("g", a))
		errs <- err
	}()
	pollUntil(t, "the join to arrive", func() bool { return h.describe("g").State == "PreparingRebalance" })
	h.c.Close()
	if err := <-errs; !errors.Is(err, ErrClosed) {
		t.Fatalf("JoinGroup after Close: %v, want ErrClosed", err)
	}
	if _, err := h.c.Heartbeat(h.ctx(), kmsg.NewPtrHeartbeatRequest()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Heartbeat after Close: %v", err)
	}
}
