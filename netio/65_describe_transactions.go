package netio

// DescribeTransactions (version 0) and ListTransactions (versions 0-2,
// KIP-664; v1 adds the duration filter, v2 the transactional ID pattern),
// answered from Transactions.TransactionStates as Kafka's
// TransactionCoordinator does: an unknown transactional ID is
// TRANSACTIONAL_ID_NOT_FOUND, an empty one INVALID_REQUEST; a list keeps
// the transactions whose producer ID and state pass the filters (an
// unknown state name is answered in UnknownStateFilters and matches
// nothing), that have run longer than the duration filter (v1+, when not
// negative), and whose whole ID the pattern matches (v2+, a regular
// expression of RE2's syntax, as Kafka's re2j; an invalid one is
// INVALID_REGULAR_EXPRESSION).

import (
	"context"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// transactionStateNames are Kafka's TransactionState names a filter may
// give.
var transactionStateNames = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func serveDescribeTransactions(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	states := c.server.backend.Transactions().TransactionStates(ctx, req.TransactionalIDs)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		i := slices.IndexFunc(states, func(s TransactionState) bool { return s.TransactionalID == id })
		switch {
		case id == "":
			st.ErrorCode = kerr.InvalidRequest.Code
		case !c.authorize(opDescribe, resourceTransactional, id):
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		case i < 0:
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
		default:
			s := states[i]
			st.State, st.TimeoutMillis, st.StartTimestamp = s.State, s.TimeoutMillis, s.StartMillis
			st.ProducerID, st.ProducerEpoch = s.ProducerID, s.ProducerEpoch
			for _, t := range s.Topics {
				rt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				rt.Topic, rt.Partitions = t.Topic, t.Partitions
				st.Topics = append(st.Topics, rt)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}

func serveListTransactions(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var pattern *regexp.Regexp
	if req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		// Kafka's re2j Matcher.matches: the whole ID, not a part of it.
		// The pattern compiles alone first, so that the anchoring group
		// cannot balance it ("a)|(b").
		_, err := regexp.Compile(*req.TransactionalIDPattern)
		if err == nil {
			pattern, err = regexp.Compile(`^(?:` + *req.TransactionalIDPattern + `)$`)
		}
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp, nil
		}
	}
	var states []string
	for _, name := range req.StateFilters {
		if slices.Contains(transactionStateNames, name) {
			states = append(states, name)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	now := time.Now().UnixMilli()
	for _, s := range c.server.backend.Transactions().TransactionStates(ctx, nil) {
		switch {
		case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, s.ProducerID):
		case len(req.StateFilters) > 0 && !slices.Contains(states, s.State):
		case req.Version >= 1 && req.DurationFilterMillis >= 0 && now-s.StartMillis <= req.DurationFilterMillis:
		case pattern != nil && !pattern.MatchString(s.TransactionalID):
		case !c.authorizeQuietly(opDescribe, resourceTransactional, s.TransactionalID):
		default:
			ts := kmsg.NewListTransactionsResponseTransactionState()
			ts.TransactionalID, ts.ProducerID, ts.TransactionState = s.TransactionalID, s.ProducerID, s.State
			resp.TransactionStates = append(resp.TransactionStates, ts)
		}
	}
	return resp, nil
}
