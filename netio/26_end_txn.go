package netio

// EndTxn, versions 0-5. Commits or aborts a transaction through
// Transactions.EndTransaction; the coordinator writes the markers. An
// empty transactional ID is INVALID_REQUEST (TransactionCoordinator.
// handleEndTransaction). Below v2 PRODUCER_FENCED is answered as
// INVALID_PRODUCER_EPOCH (KafkaApis.handleEndTxnRequest). v5 is
// transaction version 2 (KIP-890 part 2): the coordinator bumps the
// producer epoch at every EndTxn and the answer carries the producer ID
// and epoch to go on with (-1 and -1 on an error).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	endTxnFencedVersion = 2
	endTxnV2Version     = 5
)

func serveEndTxn(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	err := error(kerr.InvalidRequest)
	resp.ProducerID, resp.ProducerEpoch = noProducerID, noProducerEpoch
	if req.TransactionalID != "" && !c.authorize(opWrite, resourceTransactional, req.TransactionalID) {
		err = kerr.TransactionalIDAuthorizationFailed
	} else if req.TransactionalID != "" {
		resp.ProducerID, resp.ProducerEpoch, err = c.server.backend.Transactions().EndTransaction(ctx, req.TransactionalID,
			req.ProducerID, req.ProducerEpoch, req.Commit, req.Version >= endTxnV2Version)
	}
	code := coordinatorErrorCode(c.server.log, err, kerr.UnknownServerError)
	resp.ErrorCode = olderFencedCode(code, req.Version, endTxnFencedVersion)
	return resp, nil
}
