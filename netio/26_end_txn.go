package netio

// EndTxn, versions 0-4. Commits or aborts a transaction through
// Transactions.EndTransaction; the coordinator writes the markers. An
// empty transactional ID is INVALID_REQUEST (TransactionCoordinator.
// handleEndTransaction). Below v2 PRODUCER_FENCED is answered as
// INVALID_PRODUCER_EPOCH (KafkaApis.handleEndTxnRequest). v5 (KIP-890
// part 2) bumps the producer epoch on every transaction and answers the
// new one, which EndTransaction does not return, so it is not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const endTxnFencedVersion = 2

func serveEndTxn(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	err := error(kerr.InvalidRequest)
	if req.TransactionalID != "" {
		err = c.server.backend.Transactions().EndTransaction(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
	}
	code := errorCode(c.server.log, err, kerr.UnknownServerError)
	resp.ErrorCode = olderFencedCode(code, req.Version, endTxnFencedVersion)
	return resp, nil
}
