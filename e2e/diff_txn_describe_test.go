package e2e

// DescribeTransactions (v0) and ListTransactions (v0-v2) in the
// transaction sequences (diff_txn_test.go): the steps that ask them, how
// their answers are made comparable, and the sequences that ask them of
// transactional IDs in every state a client leaves them in: Empty,
// Ongoing (partitions of two topics), CompleteCommit, CompleteAbort (by
// EndTxn and by the coordinator's timeout), fenced, never initialised, and
// the empty ID. Topics: diff-txn-describe-*, diff-txn-lifecycle-* (the
// first sequence's ID pattern must not match the second's IDs).
//
// ListTransactions lists every transactional ID of the server, and the
// sequences share one broker and one node: a list step always filters by
// the sequence's own IDs (its producers' IDs, or a pattern of its
// prefix), so its answer does not depend on the other sequences; the
// filters tried beside are states (an unknown name too), durations (v1)
// and patterns (v2, an invalid one too).

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnStartSet stands for a transaction start time that is set: it is the
// clock of the server when the transaction began; -1 (none) stays.
const txnStartSet = 1

func init() {
	txnSequences = append(txnSequences, describeSequences()...)
}

// describeTxns is a DescribeTransactions v0 of the transactional IDs of
// the named producers, in that order; "" is the empty transactional ID.
func describeTxns(producers ...string) txnStep {
	return txnStep{what: fmt.Sprintf("DescribeTransactions v0 of %q", producers),
		request: func(s *txnSession) kmsg.Request {
			req := kmsg.NewPtrDescribeTransactionsRequest()
			for _, p := range producers {
				id := ""
				if p != "" {
					id = s.transactionalID(p)
				}
				req.TransactionalIDs = append(req.TransactionalIDs, id)
			}
			return req
		}}
}

// txnListFilter is what a ListTransactions step filters by.
type txnListFilter struct {
	states    []string
	producers []string // the producer IDs of these producers (as this server handed them out)
	otherID   bool     // and a producer ID the server never handed out
	duration  int64    // v1+: run longer than this many ms; -1 none
	// pattern (v2+), its %s the sequence's prefix quoted; "" (sent as
	// the empty pattern) is none.
	pattern string
}

func (f txnListFilter) String() string {
	var parts []string
	if f.states != nil {
		parts = append(parts, fmt.Sprintf("states %q", f.states))
	}
	if f.producers != nil {
		parts = append(parts, fmt.Sprintf("producer IDs of %v", f.producers))
	}
	if f.otherID {
		parts = append(parts, "an unknown producer ID")
	}
	if f.duration >= 0 {
		parts = append(parts, fmt.Sprintf("duration %d ms", f.duration))
	}
	if f.pattern != "" {
		parts = append(parts, fmt.Sprintf("pattern %q", f.pattern))
	}
	return strings.Join(parts, ", ")
}

// listTxns is a ListTransactions of version with filter.
func listTxns(version int16, filter txnListFilter) txnStep {
	return txnStep{what: fmt.Sprintf("ListTransactions v%d %v", version, filter),
		request: func(s *txnSession) kmsg.Request {
			req := kmsg.NewPtrListTransactionsRequest()
			req.Version, req.StateFilters, req.DurationFilterMillis = version, filter.states, filter.duration
			for _, p := range filter.producers {
				req.ProducerIDFilters = append(req.ProducerIDFilters, s.producer(p).id)
			}
			if filter.otherID {
				highest := int64(0)
				for _, p := range s.producers {
					highest = max(highest, p.id)
				}
				req.ProducerIDFilters = append(req.ProducerIDFilters, highest+otherProducerIDOffset)
			}
			if version >= 2 {
				pattern := filter.pattern
				if pattern != "" {
					pattern = fmt.Sprintf(pattern, regexp.QuoteMeta(s.sequence))
				}
				req.TransactionalIDPattern = kmsg.StringPtr(pattern)
			}
			return req
		}}
}

// awaitTxnComplete waits until none of the named producers' transactional
// IDs is in PrepareCommit, PrepareAbort or PrepareEpochFence: Kafka
// writes a transaction's Complete state once it wrote its markers, after
// EndTxn (or a fencing InitProducerID) answered, and after the last
// stable offset moved; mirrord before it answers.
func awaitTxnComplete(producers ...string) txnStep {
	describe := describeTxns(producers...)
	return txnStep{what: fmt.Sprintf("wait until %v are not preparing", producers),
		await: func(ctx context.Context, s *txnSession) error {
			return pollTxn(ctx, func() (bool, error) {
				resp, err := rawRequest(ctx, s.server.addr, describe.request(s))
				if err != nil {
					return false, err
				}
				for _, st := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
					if st.ErrorCode != 0 || strings.HasPrefix(st.State, "Prepare") {
						return false, nil
					}
				}
				return true, nil
			})
		}}
}

// normaliseDescribeTransactions makes a DescribeTransactions answer
// comparable: producer IDs as ordinals; a start time as set or -1 (each
// server's clock); topics and their partitions sorted (Kafka keeps a
// transaction's partitions in a hash set, whose order is not part of the
// protocol). The transactions stay in the order asked.
func (s *txnSession) normaliseDescribeTransactions(r *kmsg.DescribeTransactionsResponse) {
	r.ThrottleMillis = 0
	for i := range r.TransactionStates {
		st := &r.TransactionStates[i]
		st.ProducerID = s.ordinal(st.ProducerID)
		if st.StartTimestamp != -1 {
			st.StartTimestamp = txnStartSet
		}
		slices.SortFunc(st.Topics, func(a, b kmsg.DescribeTransactionsResponseTransactionStateTopic) int {
			return cmp.Compare(a.Topic, b.Topic)
		})
		for j := range st.Topics {
			slices.Sort(st.Topics[j].Partitions)
		}
	}
}

// normaliseListTransactions makes a ListTransactions answer comparable:
// the transactions sorted by ID (Kafka lists them in the order of its
// hash maps), then producer IDs as ordinals; the unknown state names
// sorted (Kafka collects them in a hash set).
func (s *txnSession) normaliseListTransactions(r *kmsg.ListTransactionsResponse) {
	r.ThrottleMillis = 0
	slices.SortFunc(r.TransactionStates, func(a, b kmsg.ListTransactionsResponseTransactionState) int {
		return cmp.Compare(a.TransactionalID, b.TransactionalID)
	})
	for i := range r.TransactionStates {
		r.TransactionStates[i].ProducerID = s.ordinal(r.TransactionStates[i].ProducerID)
	}
	slices.Sort(r.UnknownStateFilters)
}

// hourMillis is a duration filter no transaction of a sequence reaches:
// what it lists are the IDs with no transaction start time.
const hourMillis = 3600 * 1000

func describeSequences() []txnSequence {
	var seqs []txnSequence
	add := func(name string, topics []string, steps ...txnStep) {
		seqs = append(seqs, txnSequence{name: name, topics: topics, steps: steps})
	}
	all := []string{"empty", "ongoing", "commit", "abort"}
	{
		const t, u = "diff-txn-describe", "diff-txn-describe-other"
		add("describe and list transactional IDs in each state", []string{t, u},
			initTxn("empty", 4, txnTimeoutMillis),
			initTxn("ongoing", 4, txnTimeoutMillis),
			addPartitions(3, "ongoing", none, t, 0, 1),
			addPartitions(3, "ongoing", none, u, 1),
			produceStep(11, batchOf("ongoing", u, 1, 1).txn()),
			initTxn("commit", 5, txnTimeoutMillis),
			produceStep(12, batchOf("commit", t, 0, 2).txn()),
			endTxn(5, "commit", true, none),
			initTxn("abort", 4, txnTimeoutMillis),
			addPartitions(3, "abort", none, u, 0),
			produceStep(11, batchOf("abort", u, 0, 1).txn()),
			endTxn(4, "abort", false, none),
			awaitTxnComplete("commit", "abort"),
			describeTxns("empty", "ongoing", "commit", "abort"),
			describeTxns("never", "", "commit", "commit"),
			listTxns(0, txnListFilter{producers: all, duration: -1}),
			listTxns(0, txnListFilter{producers: all, otherID: true, states: []string{"Ongoing", "CompleteCommit"}, duration: -1}),
			listTxns(0, txnListFilter{producers: all, states: []string{"Empty", "Bogus"}, duration: -1}),
			listTxns(0, txnListFilter{producers: all, states: []string{"Bogus"}, duration: -1}),
			listTxns(0, txnListFilter{otherID: true, duration: -1}),
			listTxns(1, txnListFilter{producers: all, duration: hourMillis}),
			listTxns(1, txnListFilter{producers: all, duration: -1, states: []string{"CompleteAbort"}}),
			listTxns(2, txnListFilter{pattern: "%s-.*", duration: -1}),
			listTxns(2, txnListFilter{pattern: "%s-(commit|abort)", duration: -1}),
			listTxns(2, txnListFilter{pattern: "%s", duration: -1}),
			listTxns(2, txnListFilter{pattern: "%s-e", duration: -1}),
			listTxns(2, txnListFilter{pattern: "%s-[a-z]+", duration: -1, states: []string{"Empty", "CompleteAbort"}}),
			listTxns(2, txnListFilter{pattern: "%s-(", duration: -1, states: []string{"Bogus"}}),
			listTxns(2, txnListFilter{producers: all, pattern: "", duration: -1}),
			endTxn(4, "ongoing", true, none),
			awaitTxnComplete("ongoing"),
			describeTxns("ongoing"))
	}
	{
		const t, u = "diff-txn-lifecycle", "diff-txn-lifecycle-other"
		add("describe one transactional ID through its states", []string{t, u},
			describeTxns("a"),
			initTxn("a", 5, txnTimeoutMillis),
			describeTxns("a"),
			// One topic a Produce: Kafka answers a Produce's topics in the
			// order of a hash map.
			produceStep(12, batchOf("a", t, 1, 1).txn()),
			produceStep(12, batchOf("a", u, 0, 1).txn()),
			describeTxns("a"),
			endTxn(5, "a", false, none),
			awaitTxnComplete("a"),
			describeTxns("a"),
			produceStep(12, batchOf("a", t, 0, 1).txn()).retrying(txnCompleting),
			initTxn("a#2", 5, txnTimeoutMillis),
			awaitTxnComplete("a"),
			describeTxns("a"),
			listTxns(2, txnListFilter{pattern: "%s-a", duration: -1}),
			initTxn("timeout", 4, txnShortTimeoutMillis),
			addPartitions(3, "timeout", none, u, 1),
			produceStep(11, batchOf("timeout", u, 1, 1).txn()),
			awaitStable(u, 1),
			awaitTxnComplete("timeout"),
			describeTxns("timeout"),
			listTxns(1, txnListFilter{producers: []string{"a", "timeout"}, duration: hourMillis}))
	}
	return seqs
}
