package netio

// InitProducerID, versions 0-5. Hands out a producer ID and epoch through
// Backend.Transactions(): a null transactional ID asks for an idempotent
// producer, a named one is fenced per ID by the coordinator (its ongoing
// transaction aborted). As in Kafka's KafkaApis.handleInitProducerIdRequest
// and TransactionCoordinator.handleInitProducerId: an empty (not null)
// transactional ID is INVALID_REQUEST, and so (v3+, KIP-360) is a request
// that gives only one of ProducerID and ProducerEpoch (both -1, or both
// set to resume a producer after INVALID_PRODUCER_EPOCH). The transaction
// timeout is the coordinator's to check (INVALID_TRANSACTION_TIMEOUT).
// Below v4 PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH, which
// older clients understand. Failures answer producer ID and epoch -1.
// A storage failure is Kafka's coordinator's answer: NOT_COORDINATOR when
// the transaction log could not be written (a named ID), and
// COORDINATOR_LOAD_IN_PROGRESS when no producer ID could be reserved (a
// null ID: Kafka's ProducerIdManager without a block), both of which the
// clients retry.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	noProducerID    = -1
	noProducerEpoch = -1

	initProducerIDFencedVersion = 4
)

func serveInitProducerID(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	var transactionalID string
	if req.TransactionalID != nil {
		transactionalID = *req.TransactionalID
	}
	var err error
	switch {
	case req.TransactionalID != nil && transactionalID == "":
		err = kerr.InvalidRequest
	case (req.ProducerID == noProducerID) != (req.ProducerEpoch == noProducerEpoch):
		err = kerr.InvalidRequest
	case req.TransactionalID != nil && !c.authorize(opWrite, resourceTransactional, transactionalID):
		err = kerr.TransactionalIDAuthorizationFailed
	case req.TransactionalID == nil && !c.authorizeIdempotent():
		err = kerr.ClusterAuthorizationFailed
	default:
		resp.ProducerID, resp.ProducerEpoch, err = c.server.backend.Transactions().InitProducerID(
			ctx, transactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch)
	}
	if err != nil {
		resp.ProducerID, resp.ProducerEpoch = noProducerID, noProducerEpoch
		storage := kerr.NotCoordinator
		if req.TransactionalID == nil {
			storage = kerr.CoordinatorLoadInProgress
		}
		resp.ErrorCode = errorCodeFor(c.server.log, err, storage, kerr.UnknownServerError)
		resp.ErrorCode = olderFencedCode(resp.ErrorCode, req.Version, initProducerIDFencedVersion)
	}
	return resp, nil
}

// olderFencedCode answers PRODUCER_FENCED as INVALID_PRODUCER_EPOCH to a
// request older than the version that added it.
func olderFencedCode(code, version, fencedVersion int16) int16 {
	if code == kerr.ProducerFenced.Code && version < fencedVersion {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
