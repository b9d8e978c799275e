package netio

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-227 end to end over the wire: full, incremental with only changed
// partitions, forgotten partitions, and the session errors.
func TestFetchSessions(t *testing.T) {
	mem := newMemBackend()
	addr, server := startFetchServer(t, mem, nil, nil)
	info := fetchTestTopic(t, mem, "s", 3, []string{"a", "b"})
	client := dialFetchTest(t, addr)
	stats := &server.sessions.stats

	full := fetchTestRequest(18, info, at(0, 0), at(1, 0), at(2, 0))
	full.SessionEpoch = 0
	resp := client.fetch(full)
	id := resp.SessionID
	if id == 0 || fmt.Sprint(fetchTestPartitions(resp)) != "[0 1 2]" {
		t.Fatalf("full fetch: session %d, partitions %v", id, fetchTestPartitions(resp))
	}
	incremental := func(epoch int32, parts ...fetchTestPart) *kmsg.FetchRequest {
		req := fetchTestRequest(18, info, parts...)
		req.SessionID, req.SessionEpoch = id, epoch
		return req
	}
	// The client moved on to offset 2: nothing new anywhere.
	resp = client.fetch(incremental(1, at(0, 2), at(1, 2), at(2, 2)))
	if resp.ErrorCode != 0 || resp.SessionID != id || len(resp.Topics) != 0 {
		t.Fatalf("incremental, nothing new: error %d, session %d, partitions %v", resp.ErrorCode, resp.SessionID, fetchTestPartitions(resp))
	}
	// A produce to partition 1 wakes a waiting incremental fetch that
	// names no partition; only partition 1 is answered.
	p1, _ := mem.Partition("s", 1)
	waiting := incremental(2)
	waiting.MaxWaitMillis = 10_000
	done := make(chan *kmsg.FetchResponse, 1)
	go func() {
		resp, _ := client.roundTrip(waiting)
		done <- resp.(*kmsg.FetchResponse)
	}()
	fetchTestEventually(t, 10*time.Second, "waiting", func() bool { return stats.waiting.Load() > 0 })
	fetchTestProduce(t, p1, "c")
	resp = <-done
	if rp := fetchTestOnly(t, resp); rp.Partition != 1 || rp.HighWatermark != 3 || len(fetchTestBatches(t, rp.RecordBatches)) != 1 {
		t.Fatalf("woken incremental: partition %d HW %d", rp.Partition, rp.HighWatermark)
	}
	// Forget partition 0; a produce there is not answered, while a new
	// offset for partition 1 is.
	forget := incremental(3, at(1, 3))
	forget.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "s", TopicID: info.ID, Partitions: []int32{0}}}
	resp = client.fetch(forget)
	if len(resp.Topics) != 0 {
		t.Fatalf("after forgetting: partitions %v, want none", fetchTestPartitions(resp))
	}
	p0, _ := mem.Partition("s", 0)
	fetchTestProduce(t, p0, "d")
	if resp = client.fetch(incremental(4)); len(resp.Topics) != 0 {
		t.Fatalf("produce to a forgotten partition: answered %v", fetchTestPartitions(resp))
	}
	// Session errors: wrong epoch (the session survives), another ID,
	// names instead of IDs.
	if resp = client.fetch(incremental(9)); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(resp.Topics) != 0 {
		t.Fatalf("wrong epoch: error %d", resp.ErrorCode)
	}
	if resp = client.fetch(incremental(5)); resp.ErrorCode != 0 || resp.SessionID != id {
		t.Fatalf("right epoch after a wrong one: error %d, session %d", resp.ErrorCode, resp.SessionID)
	}
	unknown := incremental(6)
	unknown.SessionID = id + 1
	if resp = client.fetch(unknown); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code || resp.SessionID != 0 {
		t.Fatalf("unknown session: error %d, session %d", resp.ErrorCode, resp.SessionID)
	}
	byName := incremental(6)
	byName.Version = 12
	if resp = client.fetch(byName); resp.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("v12 on a v18 session: error %d", resp.ErrorCode)
	}
	// Epoch -1 closes the session and is served sessionless.
	closing := incremental(-1, at(2, 0))
	if resp = client.fetch(closing); resp.ErrorCode != 0 || resp.SessionID != 0 || fmt.Sprint(fetchTestPartitions(resp)) != "[2]" {
		t.Fatalf("closing: error %d, session %d, partitions %v", resp.ErrorCode, resp.SessionID, fetchTestPartitions(resp))
	}
	if resp = client.fetch(incremental(6)); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("after closing: error %d", resp.ErrorCode)
	}
	if got := server.sessions.count(); got != 0 {
		t.Fatalf("%d sessions open, want 0", got)
	}
	if stats.full.Load() != 1 || stats.incremental.Load() != 5 || stats.sessionErrors.Load() != 4 {
		t.Fatalf("fetches: %d full, %d incremental, %d errors", stats.full.Load(), stats.incremental.Load(), stats.sessionErrors.Load())
	}
}

// An incremental session does not read a partition that cannot answer
// anything new: its last read found nothing at the end of what a reader
// may read, no request named it since, and its Changed channel is open.
// A partition a byte limit held back, one produced to, and one a request
// names again are read.
func TestFetchSessionSkipsQuietPartitions(t *testing.T) {
	mem := newMemBackend()
	addr, _ := startFetchServer(t, mem, nil, nil)
	info := fetchTestTopic(t, mem, "q", 4, []string{"a", "b"})
	client := dialFetchTest(t, addr)
	partitions := make([]*memPartition, 4)
	for i := range partitions {
		p, _ := mem.Partition("q", int32(i))
		partitions[i] = p.(*memPartition)
	}
	reads := func() []int {
		out := make([]int, len(partitions))
		for i, p := range partitions {
			p.mu.Lock()
			out[i], p.reads = p.reads, 0
			p.mu.Unlock()
		}
		return out
	}
	full := fetchTestRequest(18, info, at(0, 0), at(1, 2), at(2, 2), at(3, 2))
	full.SessionEpoch = 0
	full.MaxBytes = 1 // partition 0's batch only: no room left for the others (but they have nothing)
	resp := client.fetch(full)
	id := resp.SessionID
	incremental := func(epoch int32, parts ...fetchTestPart) *kmsg.FetchResponse {
		req := fetchTestRequest(18, info, parts...)
		req.SessionID, req.SessionEpoch = id, epoch
		return client.fetch(req)
	}
	if got := fmt.Sprint(reads()); got != "[1 1 1 1]" {
		t.Fatalf("full fetch read %s, want every partition once", got)
	}
	// Partition 0 sent its records: it is read again; 1-3 are quiet.
	incremental(1, at(0, 2))
	if got := fmt.Sprint(reads()); got != "[1 0 0 0]" {
		t.Fatalf("incremental naming partition 0 read %s, want only partition 0", got)
	}
	if resp = incremental(2); len(resp.Topics) != 0 || fmt.Sprint(reads()) != "[0 0 0 0]" {
		t.Fatalf("idle incremental answered %v, read %v; want nothing and no read", fetchTestPartitions(resp), reads())
	}
	fetchTestProduce(t, partitions[2], "c")
	if resp = incremental(3); fmt.Sprint(fetchTestPartitions(resp)) != "[2]" {
		t.Fatalf("after a produce to partition 2: answered %v", fetchTestPartitions(resp))
	}
	if got := fmt.Sprint(reads()); got != "[0 0 1 0]" {
		t.Fatalf("after a produce to partition 2: read %s, want only partition 2", got)
	}
	// Partition 2 sent records at offset 2: it stays awake until a request
	// moves it past them.
	incremental(4, at(2, 3))
	incremental(5)
	if got := fmt.Sprint(reads()); got != "[0 0 1 0]" {
		t.Fatalf("after moving partition 2 on: read %s, want it once, then quiet", got)
	}

	// A byte limit that holds a partition's records back leaves it awake.
	held := fetchTestTopic(t, mem, "held", 2, []string{"x"})
	other := dialFetchTest(t, addr)
	req := fetchTestRequest(18, held, at(0, 0), at(1, 0))
	req.SessionEpoch, req.MaxBytes = 0, 1
	resp = other.fetch(req)
	if fmt.Sprint(fetchTestPartitions(resp)) != "[0 1]" || len(resp.Topics[0].Partitions[1].RecordBatches) != 0 {
		t.Fatalf("full fetch with MaxBytes 1: %v", fetchTestPartitions(resp))
	}
	next := fetchTestRequest(18, held, at(0, 1))
	next.SessionID, next.SessionEpoch = resp.SessionID, 1
	resp = other.fetch(next)
	if rp := fetchTestOnly(t, resp); rp.Partition != 1 || len(fetchTestBatches(t, rp.RecordBatches)) != 1 {
		t.Fatalf("partition 1, held back by MaxBytes, answered %v", fetchTestPartitions(resp))
	}
}

// Partitions that returned records move to the end of the session, so a
// response bound by MaxBytes reaches every partition in turn.
func TestFetchSessionRotation(t *testing.T) {
	mem := newMemBackend()
	addr, _ := startFetchServer(t, mem, nil, nil)
	info := fetchTestTopic(t, mem, "r", 3, []string{"a"}, []string{"b"}, []string{"c"})
	client := dialFetchTest(t, addr)
	full := fetchTestRequest(13, info, at(0, 0), at(1, 0), at(2, 0))
	full.SessionEpoch, full.MaxBytes = 0, 1
	resp := client.fetch(full)
	offsets := map[int32]int64{}
	var order []int32
	for epoch := int32(1); epoch <= 6; epoch++ {
		withData := -1
		for _, rp := range resp.Topics[0].Partitions {
			if batches := fetchTestBatches(t, rp.RecordBatches); len(batches) > 0 {
				withData = int(rp.Partition)
				offsets[rp.Partition] = int64(batches[0].NextOffset())
			}
		}
		order = append(order, int32(withData))
		req := fetchTestRequest(13, info, at(int32(withData), offsets[int32(withData)]))
		req.SessionID, req.SessionEpoch, req.MaxBytes = resp.SessionID, epoch, 1
		resp = client.fetch(req)
	}
	if fmt.Sprint(order) != "[0 1 2 0 1 2]" {
		t.Fatalf("partitions with data, fetch by fetch: %v", order)
	}
}

// Sessions are bounded (least recently used evicted) and dropped with
// their connection.
func TestFetchSessionBounds(t *testing.T) {
	mem := newMemBackend()
	addr, server := startFetchServer(t, mem, nil, func(s *Server) { s.sessions.sessionsMax, s.sessions.partitionsMax = 2, 5 })
	info := fetchTestTopic(t, mem, "b", 3, []string{"a"})
	client := dialFetchTest(t, addr)
	open := func(parts ...fetchTestPart) int32 {
		req := fetchTestRequest(18, info, parts...)
		req.SessionEpoch = 0
		return client.fetch(req).SessionID
	}
	use := func(id, epoch int32, parts ...fetchTestPart) int16 {
		req := fetchTestRequest(18, info, parts...)
		req.SessionID, req.SessionEpoch = id, epoch
		return client.fetch(req).ErrorCode
	}
	first, second := open(at(0, 0)), open(at(1, 0))
	if code := use(first, 1); code != 0 {
		t.Fatalf("first session: error %d", code)
	}
	third := open(at(2, 0)) // evicts second, the least recently used
	if use(second, 1) != kerr.FetchSessionIDNotFound.Code || use(first, 2) != 0 || use(third, 1) != 0 {
		t.Fatal("the least recently used session was not the one evicted")
	}
	// 2 partitions in 2 sessions; a session of 5 (unknown partitions
	// count too) evicts both.
	fourth := open(at(0, 0), at(1, 0), at(2, 0), at(3, 0), at(4, 0))
	if fourth == 0 || server.sessions.count() != 1 {
		t.Fatalf("session of 5 partitions: ID %d, %d sessions", fourth, server.sessions.count())
	}
	// Too big for the budget: served sessionless, evicting nothing.
	if id := open(at(0, 0), at(1, 0), at(2, 0), at(3, 0), at(4, 0), at(5, 0)); id != 0 || server.sessions.count() != 1 {
		t.Fatalf("a session of 6 partitions (budget 5): ID %d, %d sessions", id, server.sessions.count())
	}
	// Growing past the budget closes the session.
	if code := use(fourth, 1, at(0, 1), at(1, 1)); code != 0 {
		t.Fatalf("updating 2 of 5: error %d", code)
	}
	if code := use(fourth, 2, at(5, 0)); code != kerr.FetchSessionIDNotFound.Code || server.sessions.count() != 0 {
		t.Fatalf("growing to 6: error %d, %d sessions; want FETCH_SESSION_ID_NOT_FOUND, none", code, server.sessions.count())
	}
	// A closed connection takes its sessions along.
	open(at(0, 0))
	if server.sessions.count() != 1 {
		t.Fatalf("%d sessions, want 1", server.sessions.count())
	}
	client.nc.Close()
	fetchTestEventually(t, 10*time.Second, "dropping the closed connection's sessions", func() bool { return server.sessions.count() == 0 })
}

// What a Java consumer (FetchSessionHandler) sends around a rebalance and
// at close, with A and B in two topics (as the "extraIds" of the Java
// client's complaint are topic IDs): a full session of A and B, an
// incremental fetch, then a new full request naming only A: either
// (0, 0), after FETCH_SESSION_ID_NOT_FOUND or a response the client
// refused, or (X, 0), after any other session error. Its response, and
// the new session's incremental ones, name A only, never B, even once B
// has records; the client's close, (X, -1) with no partitions, is
// answered with none.
func TestFetchSessionNewFullForgetsOldPartitions(t *testing.T) {
	for _, reuseID := range []bool{false, true} {
		t.Run(fmt.Sprintf("reuseID=%v", reuseID), func(t *testing.T) {
			mem := newMemBackend()
			addr, server := startFetchServer(t, mem, nil, nil)
			a := fetchTestTopic(t, mem, "a", 1, []string{"a0"})
			b := fetchTestTopic(t, mem, "b", 1, []string{"b0"})
			client := dialFetchTest(t, addr)
			request := func(id, epoch int32, onA, onB []fetchTestPart) *kmsg.FetchRequest {
				req := fetchTestRequest(18, a, onA...)
				req.Topics = append(req.Topics, fetchTestRequest(18, b, onB...).Topics...)
				req.SessionID, req.SessionEpoch = id, epoch
				return req
			}
			named := func(resp *kmsg.FetchResponse) string {
				names := map[TopicID]string{a.ID: "a", b.ID: "b"}
				var out []string
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						out = append(out, fmt.Sprintf("%s-%d", names[TopicID(rt.TopicID)], rp.Partition))
					}
				}
				return fmt.Sprint(out)
			}

			resp := client.fetch(request(0, 0, []fetchTestPart{at(0, 0)}, []fetchTestPart{at(0, 0)}))
			old := resp.SessionID
			if old == 0 || named(resp) != "[a-0 b-0]" {
				t.Fatalf("full A, B: session %d, answered %s", old, named(resp))
			}
			if resp = client.fetch(request(old, 1, []fetchTestPart{at(0, 1)}, []fetchTestPart{at(0, 1)})); resp.ErrorCode != 0 || named(resp) != "[]" {
				t.Fatalf("incremental, nothing new: error %d, answered %s", resp.ErrorCode, named(resp))
			}
			id := int32(0)
			if reuseID {
				id = old
			}
			resp = client.fetch(request(id, 0, []fetchTestPart{at(0, 1)}, nil))
			renewed := resp.SessionID
			if resp.ErrorCode != 0 || renewed == 0 || named(resp) != "[a-0]" {
				t.Fatalf("new full request of A alone: error %d, session %d, answered %s", resp.ErrorCode, renewed, named(resp))
			}
			if got := server.sessions.count(); reuseID && got != 1 {
				t.Fatalf("(X, 0) left %d sessions, want only the new one", got)
			}
			bp, _ := mem.Partition("b", 0)
			fetchTestProduce(t, bp, "b1")
			if resp = client.fetch(request(renewed, 1, nil, nil)); resp.ErrorCode != 0 || named(resp) != "[]" {
				t.Fatalf("incremental after B got records: error %d, answered %s; want nothing", resp.ErrorCode, named(resp))
			}
			ap, _ := mem.Partition("a", 0)
			fetchTestProduce(t, ap, "a1")
			if resp = client.fetch(request(renewed, 2, nil, nil)); resp.ErrorCode != 0 || named(resp) != "[a-0]" {
				t.Fatalf("incremental after A and B got records: error %d, answered %s; want A", resp.ErrorCode, named(resp))
			}
			// The Java consumer's close: the session's ID, epoch -1, nothing named.
			if resp = client.fetch(request(renewed, -1, nil, nil)); resp.ErrorCode != 0 || resp.SessionID != 0 || named(resp) != "[]" {
				t.Fatalf("close: error %d, session %d, answered %s; want nothing", resp.ErrorCode, resp.SessionID, named(resp))
			}
			want := 1 // (0, 0) left the first session to eviction, as Kafka does
			if reuseID {
				want = 0
			}
			if got := server.sessions.count(); got != want {
				t.Fatalf("%d sessions after the close, want %d", got, want)
			}
		})
	}
}
