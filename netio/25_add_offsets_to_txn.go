package netio

// AddOffsetsToTxn, versions 0-4. Adds the group's __consumer_offsets
// partition to the transaction (Transactions.AddOffsets), with the
// coordinator's checks and errors of AddPartitionsToTxn: an empty
// transactional ID is INVALID_REQUEST, an unknown one
// INVALID_PRODUCER_ID_MAPPING, another producer ID
// INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED (below v2
// INVALID_PRODUCER_EPOCH, as KafkaApis.handleAddOffsetsToTxnRequest), a
// transaction being completed CONCURRENT_TRANSACTIONS. v4 (KIP-890 part
// 2) only tells the node the client takes TRANSACTION_ABORTABLE, which
// AddOffsetsToTxn itself never answers.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const addOffsetsToTxnFencedVersion = 2

func serveAddOffsetsToTxn(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	err := error(kerr.InvalidRequest)
	switch {
	case req.TransactionalID == "":
	case !c.authorize(opWrite, resourceTransactional, req.TransactionalID):
		err = kerr.TransactionalIDAuthorizationFailed
	case !c.authorize(opRead, resourceGroup, req.Group):
		err = kerr.GroupAuthorizationFailed
	default:
		err = c.server.backend.Transactions().AddOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
	}
	code := coordinatorErrorCode(c.server.log, err, kerr.UnknownServerError)
	resp.ErrorCode = olderFencedCode(code, req.Version, addOffsetsToTxnFencedVersion)
	return resp, nil
}
