package netio

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestInitProducerID(t *testing.T) {
	backend := newStubBackend()
	coordinator := &stubTransactions{}
	backend.transactions = coordinator
	raw := startStubServer(t, backend)
	for _, c := range []struct {
		name            string
		version         int16
		transactionalID *string
		producerID      int64
		producerEpoch   int16
		err             error
		code            *kerr.Error
		calls           string
	}{
		{name: "idempotent", version: 0, producerID: -1, producerEpoch: -1, calls: `Init("", 60000, -1, -1)`},
		{name: "transactional", version: 4, transactionalID: kmsg.StringPtr("tx"), producerID: -1, producerEpoch: -1, calls: `Init("tx", 60000, -1, -1)`},
		{name: "resume", version: 3, transactionalID: kmsg.StringPtr("tx"), producerID: 42, producerEpoch: 3, calls: `Init("tx", 60000, 42, 3)`},
		{name: "empty transactional ID", version: 5, transactionalID: kmsg.StringPtr(""), producerID: -1, producerEpoch: -1, code: kerr.InvalidRequest},
		{name: "producer ID without epoch", version: 3, producerID: 42, producerEpoch: -1, code: kerr.InvalidRequest},
		{name: "epoch without producer ID", version: 5, producerID: -1, producerEpoch: 3, code: kerr.InvalidRequest},
		{name: "fenced v3", version: 3, transactionalID: kmsg.StringPtr("tx"), producerID: -1, producerEpoch: -1, err: kerr.ProducerFenced,
			code: kerr.InvalidProducerEpoch, calls: `Init("tx", 60000, -1, -1)`},
		{name: "fenced v4", version: 4, transactionalID: kmsg.StringPtr("tx"), producerID: -1, producerEpoch: -1, err: kerr.ProducerFenced,
			code: kerr.ProducerFenced, calls: `Init("tx", 60000, -1, -1)`},
		{name: "coordinator failure", version: 5, producerID: -1, producerEpoch: -1, err: errors.New("log full"),
			code: kerr.UnknownServerError, calls: `Init("", 60000, -1, -1)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			coordinator.mu.Lock()
			coordinator.err = c.err
			coordinator.mu.Unlock()
			req := kmsg.NewPtrInitProducerIDRequest()
			req.Version, req.TransactionalID, req.TransactionTimeoutMillis = c.version, c.transactionalID, 60000
			req.ProducerID, req.ProducerEpoch = c.producerID, c.producerEpoch
			resp := raw.do(req).(*kmsg.InitProducerIDResponse)
			wantCode, wantID, wantEpoch := int16(0), int64(42), int16(3)
			if c.code != nil {
				wantCode, wantID, wantEpoch = c.code.Code, -1, -1
			}
			if resp.ErrorCode != wantCode || resp.ProducerID != wantID || resp.ProducerEpoch != wantEpoch {
				t.Errorf("got %s %d/%d, want %s %d/%d", errName(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch, errName(wantCode), wantID, wantEpoch)
			}
			if got := coordinator.calls(); got != c.calls {
				t.Errorf("coordinator asked %q, want %q", got, c.calls)
			}
		})
	}
}

func (s *stubTransactions) set(err error, errs map[string]error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err, s.errs = err, errs
}

func TestAddPartitionsToTxn(t *testing.T) {
	backend := newStubBackend()
	coordinator := &stubTransactions{}
	backend.transactions = coordinator
	mustCreateTopic(t, backend.memBackend, "a", 2)
	mustCreateTopic(t, backend.memBackend, "b", 1)
	mustCreateTopic(t, backend.memBackend, "__transaction_state", 1)
	backend.topics["__transaction_state"].info.Internal = true
	raw := startStubServer(t, backend)
	notAttempted, unknown := kerr.OperationNotAttempted.Code, kerr.UnknownTopicOrPartition.Code
	for _, c := range []struct {
		name            string
		version         int16
		transactionalID string
		topics          map[string][]int32 // sent in name order
		err             error
		errs            map[string]error
		codes           map[string][]int16
		calls           string
	}{
		{name: "added", version: 3, transactionalID: "tx", topics: map[string][]int32{"a": {0, 1}, "b": {0}},
			codes: map[string][]int16{"a": {0, 0}, "b": {0}}, calls: `Add("tx", 42, 3, a, [0 1]) Add("tx", 42, 3, b, [0])`},
		{name: "unknown partition", version: 3, transactionalID: "tx", topics: map[string][]int32{"a": {0, 2}, "b": {0}},
			codes: map[string][]int16{"a": {notAttempted, unknown}, "b": {notAttempted}}},
		{name: "unknown topic", version: 0, transactionalID: "tx", topics: map[string][]int32{"nope": {0}, "b": {0}},
			codes: map[string][]int16{"nope": {unknown}, "b": {notAttempted}}},
		{name: "internal topic", version: 3, transactionalID: "tx", topics: map[string][]int32{"__transaction_state": {0}, "b": {0}},
			codes: map[string][]int16{"__transaction_state": {kerr.TopicAuthorizationFailed.Code}, "b": {notAttempted}}},
		{name: "empty transactional ID", version: 3, transactionalID: "", topics: map[string][]int32{"a": {0}},
			codes: map[string][]int16{"a": {kerr.InvalidRequest.Code}}},
		{name: "one outcome for every partition", version: 2, transactionalID: "tx", topics: map[string][]int32{"a": {0, 1}, "b": {0}},
			errs:  map[string]error{"a": kerr.ConcurrentTransactions},
			codes: map[string][]int16{"a": {kerr.ConcurrentTransactions.Code, kerr.ConcurrentTransactions.Code}, "b": {kerr.ConcurrentTransactions.Code}},
			calls: `Add("tx", 42, 3, a, [0 1])`},
		{name: "fenced v1", version: 1, transactionalID: "tx", topics: map[string][]int32{"b": {0}}, err: kerr.ProducerFenced,
			codes: map[string][]int16{"b": {kerr.InvalidProducerEpoch.Code}}, calls: `Add("tx", 42, 3, b, [0])`},
		{name: "fenced v2", version: 2, transactionalID: "tx", topics: map[string][]int32{"b": {0}}, err: kerr.ProducerFenced,
			codes: map[string][]int16{"b": {kerr.ProducerFenced.Code}}, calls: `Add("tx", 42, 3, b, [0])`},
	} {
		t.Run(c.name, func(t *testing.T) {
			coordinator.set(c.err, c.errs)
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = c.version, c.transactionalID, 42, 3
			names := make([]string, 0, len(c.topics))
			for name := range c.topics {
				names = append(names, name)
			}
			slices.Sort(names)
			for _, name := range names {
				req.Topics = append(req.Topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: name, Partitions: c.topics[name]})
			}
			resp := raw.do(req).(*kmsg.AddPartitionsToTxnResponse)
			got := map[string][]int16{}
			for _, st := range resp.Topics {
				for _, sp := range st.Partitions {
					got[st.Topic] = append(got[st.Topic], sp.ErrorCode)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.codes) {
				t.Errorf("codes %v, want %v", got, c.codes)
			}
			if calls := coordinator.calls(); calls != c.calls {
				t.Errorf("coordinator asked %q, want %q", calls, c.calls)
			}
		})
	}
}

func TestEndTxn(t *testing.T) {
	backend := newStubBackend()
	coordinator := &stubTransactions{}
	backend.transactions = coordinator
	raw := startStubServer(t, backend)
	for _, c := range []struct {
		name            string
		version         int16
		transactionalID string
		commit          bool
		err             error
		code            *kerr.Error
		calls           string
	}{
		{name: "commit", version: 0, transactionalID: "tx", commit: true, calls: `End("tx", 42, 3, true, tv2=false)`},
		{name: "abort", version: 4, transactionalID: "tx", calls: `End("tx", 42, 3, false, tv2=false)`},
		{name: "empty transactional ID", version: 3, code: kerr.InvalidRequest},
		{name: "fenced v1", version: 1, transactionalID: "tx", err: kerr.ProducerFenced, code: kerr.InvalidProducerEpoch, calls: `End("tx", 42, 3, false, tv2=false)`},
		{name: "fenced v2", version: 2, transactionalID: "tx", err: kerr.ProducerFenced, code: kerr.ProducerFenced, calls: `End("tx", 42, 3, false, tv2=false)`},
		{name: "invalid state", version: 4, transactionalID: "tx", commit: true, err: kerr.InvalidTxnState, code: kerr.InvalidTxnState, calls: `End("tx", 42, 3, true, tv2=false)`},
		{name: "transaction version 2", version: 5, transactionalID: "tx", commit: true, calls: `End("tx", 42, 3, true, tv2=true)`},
		{name: "transaction version 2 fenced", version: 5, transactionalID: "tx", err: kerr.ProducerFenced, code: kerr.ProducerFenced, calls: `End("tx", 42, 3, false, tv2=true)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			coordinator.set(c.err, nil)
			req := kmsg.NewPtrEndTxnRequest()
			req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = c.version, c.transactionalID, 42, 3, c.commit
			resp := raw.do(req).(*kmsg.EndTxnResponse)
			wantCode := int16(0)
			if c.code != nil {
				wantCode = c.code.Code
			}
			if resp.ErrorCode != wantCode {
				t.Errorf("got %s, want %s", errName(resp.ErrorCode), errName(wantCode))
			}
			// v5 answers the producer to go on with (the stub bumps the
			// epoch), -1 and -1 on an error and below v5.
			wantID, wantEpoch := int64(-1), int16(-1)
			if c.version >= 5 && c.code == nil {
				wantID, wantEpoch = 42, 4
			}
			if c.version >= 5 && (resp.ProducerID != wantID || resp.ProducerEpoch != wantEpoch) {
				t.Errorf("producer %d epoch %d, want %d, %d", resp.ProducerID, resp.ProducerEpoch, wantID, wantEpoch)
			}
			if calls := coordinator.calls(); calls != c.calls {
				t.Errorf("coordinator asked %q, want %q", calls, c.calls)
			}
		})
	}
}

// TestTransactionalProducerWithKgo runs franz-go's transactional producer
// against the server: FindCoordinator (transaction), InitProducerID,
// Produce v12+ (transaction version 2 is finalized: no AddPartitionsToTxn)
// and EndTxn v5, whose bumped epoch the next transaction uses.
func TestTransactionalProducerWithKgo(t *testing.T) {
	backend := newStubBackend()
	coordinator := &stubTransactions{}
	backend.transactions = coordinator
	mustCreateTopic(t, backend.memBackend, "t", 2)
	addr := startServerConfig(t, Config{Backend: backend}, backend.memBackend)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for _, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := client.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			r := &kgo.Record{Value: []byte{byte(i)}, Partition: int32(i % 2)}
			if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		if err := client.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end transaction: %v", err)
		}
	}
	calls := coordinator.calls()
	for _, want := range []string{`Init("tx", `, `End("tx", 42, 3, true, tv2=true)`, `End("tx", 42, 4, false, tv2=true)`} {
		if !strings.Contains(calls, want) {
			t.Errorf("coordinator calls %s: no %s", calls, want)
		}
	}
}

// TestAdminWithKadm drives the admin calls through kadm against a memory
// backend: list offsets, delete records, add partitions, describe them
// page by page, delete topics.
func TestAdminWithKadm(t *testing.T) {
	backend := newMemBackend()
	addr := startServer(t, backend)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	mustCreateTopic(t, backend, "t", 2)
	produceRecords(t, backend, "t", 1, 5)

	ends, err := admin.ListEndOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if end, _ := ends.Lookup("t", 1); end.Err != nil || end.Offset != 5 {
		t.Fatalf("end offset %+v", end)
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "t", Partition: 1, At: 3})
	deleted, err := admin.DeleteRecords(ctx, offsets)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := deleted.Lookup("t", 1); d.Err != nil || d.LowWatermark != 3 {
		t.Fatalf("delete records %+v", d)
	}
	starts, err := admin.ListStartOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if start, _ := starts.Lookup("t", 1); start.Err != nil || start.Offset != 3 {
		t.Fatalf("start offset %+v", start)
	}
	grown, err := admin.CreatePartitions(ctx, 2, "t")
	if err != nil || grown["t"].Err != nil {
		t.Fatalf("create partitions: %v %+v", err, grown)
	}
	if info, _ := backend.Topic("t"); info.Partitions != 4 {
		t.Fatalf("t has %d partitions, want 4", info.Partitions)
	}
	epochs, err := admin.OffsetForLeaderEpoch(ctx, kadm.OffsetForLeaderEpochRequest{"t": {1: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if e := epochs["t"][1]; e.Err != nil || e.EndOffset != 5 {
		t.Fatalf("offset for leader epoch %+v", e)
	}
	removed, err := admin.DeleteTopics(ctx, "t")
	if err != nil || removed["t"].Err != nil {
		t.Fatalf("delete topics: %v %+v", err, removed)
	}
	if _, ok := backend.Topic("t"); ok {
		t.Fatal("t still exists")
	}
}
