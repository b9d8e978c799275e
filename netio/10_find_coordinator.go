package netio

// FindCoordinator, versions 0-6. A node alone is every coordinator: the
// group coordinator (type 0) and the transaction coordinator (type 1) of
// every key; in a cluster the backend names the node (no live one:
// COORDINATOR_NOT_AVAILABLE). v4+ asks for a batch of keys (KIP-699) and gets one answer per key,
// each with the error message "" (Kafka sets none there); v0-3 ask for
// one key and get one answer, with an error message ("NONE" on success,
// Kafka's Errors.message()). Share coordinators (type 2,
// KIP-932) are not served: INVALID_REQUEST, as a Kafka broker without a
// share coordinator answers (and as any broker answers below v6). Any
// other type is INVALID_REQUEST for every key (CoordinatorType.forId
// throws). A failed key names node -1, host "" and port -1 (Node.noNode).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1

	findCoordinatorBatchVersion = 4
)

// noCoordinatorMessage is every v4+ key's error message, failed or not:
// KafkaApis.handleFindCoordinatorRequestV4AndAbove sets no message, so
// the Coordinator keeps its default, "".
var noCoordinatorMessage = ""

func serveFindCoordinator(_ context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	cluster := c.cluster()
	var err *kerr.Error
	if req.CoordinatorType != coordinatorGroup && req.CoordinatorType != coordinatorTransaction {
		err = kerr.InvalidRequest // share coordinators (not served) and unknown types
	}
	answer := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		sc := kmsg.NewFindCoordinatorResponseCoordinator()
		sc.Key = key
		err := err
		if err == nil {
			err = c.coordinatorDenied(req.CoordinatorType, key)
		}
		if err != nil {
			message := err.Description
			sc.ErrorCode, sc.ErrorMessage = err.Code, &message
			sc.NodeID, sc.Host, sc.Port = -1, "", -1
			return sc
		}
		none := "NONE" // Kafka's Errors.NONE.message()
		sc.NodeID, sc.Host, sc.Port, sc.ErrorMessage = cluster.NodeID, cluster.Host, cluster.Port, &none
		if cb := c.clusterBackend(); cb != nil {
			b, ok := cb.Coordinator(req.CoordinatorType, key)
			if !ok {
				// As Kafka while the coordinator's partition has no leader.
				message := kerr.CoordinatorNotAvailable.Description
				sc.ErrorCode, sc.ErrorMessage = kerr.CoordinatorNotAvailable.Code, &message
				sc.NodeID, sc.Host, sc.Port = -1, "", -1
				return sc
			}
			sc.NodeID, sc.Host, sc.Port = b.NodeID, b.Host, b.Port
		}
		return sc
	}
	if req.Version >= findCoordinatorBatchVersion {
		for _, key := range req.CoordinatorKeys {
			sc := answer(key)
			sc.ErrorMessage = &noCoordinatorMessage
			resp.Coordinators = append(resp.Coordinators, sc)
		}
		return resp, nil
	}
	sc := answer(req.CoordinatorKey)
	resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = sc.ErrorCode, sc.NodeID, sc.Host, sc.Port
	message := "NONE"
	if err != nil {
		message = err.Description
	}
	if sc.ErrorCode != 0 {
		message = *sc.ErrorMessage
	}
	resp.ErrorMessage = &message
	return resp, nil
}
