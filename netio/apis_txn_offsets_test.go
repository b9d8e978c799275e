package netio

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAddOffsetsToTxn(t *testing.T) {
	backend := newStubBackend()
	coordinator := &stubTransactions{}
	backend.transactions = coordinator
	raw := startStubServer(t, backend)
	for _, c := range []struct {
		name            string
		version         int16
		transactionalID string
		err             error
		code            int16
		calls           string
	}{
		{name: "added", version: 3, transactionalID: "tx", calls: `AddOffsets("tx", 42, 3, g)`},
		{name: "empty transactional ID", version: 0, code: kerr.InvalidRequest.Code},
		{name: "fenced v1", version: 1, transactionalID: "tx", err: kerr.ProducerFenced, code: kerr.InvalidProducerEpoch.Code, calls: `AddOffsets("tx", 42, 3, g)`},
		{name: "fenced v2", version: 2, transactionalID: "tx", err: kerr.ProducerFenced, code: kerr.ProducerFenced.Code, calls: `AddOffsets("tx", 42, 3, g)`},
		{name: "coordinator failure", version: 3, transactionalID: "tx", err: errors.New("log full"), code: kerr.UnknownServerError.Code, calls: `AddOffsets("tx", 42, 3, g)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			coordinator.set(c.err, nil)
			req := kmsg.NewPtrAddOffsetsToTxnRequest()
			req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = c.version, c.transactionalID, 42, 3, "g"
			resp := raw.do(req).(*kmsg.AddOffsetsToTxnResponse)
			if resp.ErrorCode != c.code {
				t.Errorf("got %s, want %s", errName(resp.ErrorCode), errName(c.code))
			}
			if got := coordinator.calls(); got != c.calls {
				t.Errorf("coordinator asked %q, want %q", got, c.calls)
			}
		})
	}
}

// TestTxnOffsetCommitNoCoordinator: a coordinator that gives no answer is
// COORDINATOR_NOT_AVAILABLE for every partition asked.
func TestTxnOffsetCommitNoCoordinator(t *testing.T) {
	raw := startStubServer(t, newStubBackend())
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group = 4, "tx", "g"
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "a", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0}, {Partition: 1}}}}
	resp := raw.do(req).(*kmsg.TxnOffsetCommitResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("answer %+v, want both partitions", resp)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			t.Errorf("partition %d: %s, want COORDINATOR_NOT_AVAILABLE", p.Partition, errName(p.ErrorCode))
		}
	}
}
