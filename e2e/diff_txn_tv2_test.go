package e2e

// Sequences of transactions under transaction.version 2 (KIP-890 part 2,
// which Kafka picks for Produce v12+, EndTxn v5+, AddOffsetsToTxn v4+,
// TxnOffsetCommit v5+; see diff_txn_test.go): a transactional Produce
// adds its partition, every EndTxn bumps the epoch and answers the new
// one, AddPartitionsToTxn v4-v5 batch transactions and verify. Also the
// kill -9 sequence, run last. Topics: diff-txn-tv2-*, diff-txn-kill-*.

func init() {
	txnSequences = append(txnSequences, tv2Sequences()...)
	txnRestartSequences = append(txnRestartSequences, killSequence())
}

func tv2Sequences() []txnSequence {
	var seqs []txnSequence
	add := func(name string, topics []string, steps ...txnStep) {
		seqs = append(seqs, txnSequence{name: name, topics: topics, steps: steps})
	}
	{
		const t = "diff-txn-tv2-commit"
		add("TV2 implicit add, commit returning a new epoch", []string{t},
			initTxn("a", 5, txnTimeoutMillis),
			produceStep(12, batchOf("a", t, 0, 2).txn(), batchOf("a", t, 1, 1).txn()),
			produceStep(12, batchOf("a", t, 0, 1).txn()),
			listLatest(isolationCommitted, t, 0, 1),
			endTxn(5, "a", true, none),
			awaitStable(t, 0, 1),
			fetchStep(isolationCommitted, t, 0, 1))
	}
	{
		const t = "diff-txn-tv2-abort"
		add("TV2 implicit add, abort returning a new epoch", []string{t},
			initTxn("a", 5, txnTimeoutMillis),
			produceStep(12, batchOf("a", t, 0, 2).txn()),
			endTxn(5, "a", false, none),
			awaitStable(t, 0),
			fetchStep(isolationCommitted, t, 0),
			fetchStep(isolationUncommitted, t, 0))
	}
	{
		const t = "diff-txn-tv2-next"
		add("TV2 next transactions at the new epochs", []string{t},
			initTxn("a", 5, txnTimeoutMillis),
			produceStep(12, batchOf("a", t, 0, 1).txn()),
			endTxn(5, "a", true, none),
			produceStep(12, batchOf("a", t, 0, 1).txn()).retrying(txnCompleting),
			produceStep(12, batchOf("a", t, 1, 1).txn()),
			endTxn(5, "a", false, none),
			produceStep(13, batchOf("a", t, 1, 2).txn()).retrying(txnCompleting),
			endTxn(5, "a", true, none),
			awaitStable(t, 0, 1),
			fetchStep(isolationCommitted, t, 0, 1))
	}
	{
		const t = "diff-txn-tv2-retry"
		add("TV2 EndTxn retried with the old epoch", []string{t},
			initTxn("a", 5, txnTimeoutMillis),
			produceStep(12, batchOf("a", t, 0, 1).txn()),
			endTxn(5, "a", true, none),
			endTxn(5, "a", true, txnAs{epoch: -1}).retrying(txnCompleting),
			endTxn(5, "a", false, txnAs{epoch: -1}).retrying(txnCompleting),
			endTxn(5, "a", true, txnAs{epoch: -2}).retrying(txnCompleting),
			endTxn(5, "a", true, none).retrying(txnCompleting),
			awaitStable(t, 0),
			fetchStep(isolationCommitted, t, 0))
	}
	{
		const t = "diff-txn-tv2-empty"
		add("TV2 EndTxn without a transaction, and TV1 requests after TV2 ones", []string{t},
			initTxn("a", 5, txnTimeoutMillis),
			endTxn(5, "a", true, none),
			endTxn(5, "a", false, none).retrying(txnCompleting),
			produceStep(12, batchOf("a", t, 0, 1).txn()).retrying(txnCompleting),
			endTxn(4, "a", true, none),
			// Kafka writes the markers after it answers, and a produce
			// that comes first joins the ending transaction: wait for them.
			awaitStable(t, 0),
			produceStep(11, batchOf("a", t, 0, 1).txn()).retrying(txnCompleting).notInTransaction(),
			addPartitions(3, "a", none, t, 0).retrying(txnCompleting),
			produceStep(11, batchOf("a", t, 0, 1).txn()),
			endTxn(5, "a", true, none),
			awaitStable(t, 0),
			fetchStep(isolationCommitted, t, 0))
	}
	{
		const t, u = "diff-txn-tv2-batched", "diff-txn-tv2-batched-other"
		add("TV2 AddPartitionsToTxn v4 and v5 batched and verify-only", []string{t, u},
			initTxn("a", 5, txnTimeoutMillis),
			initTxn("b", 5, txnTimeoutMillis),
			addPartitionsBatched(4, txnAdd{"a", none, false, t, []int32{0}}, txnAdd{"b", none, false, u, []int32{0, 1}}),
			addPartitionsBatched(4, txnAdd{"a", none, true, t, []int32{0, 1}}),
			addPartitionsBatched(5, txnAdd{"b", none, true, u, []int32{1}}, txnAdd{"a", none, true, u, []int32{1}}),
			addPartitionsBatched(5, txnAdd{"a", txnAs{epoch: 1}, true, t, []int32{0}}, txnAdd{"b", txnAs{unknownID: true}, false, u, []int32{0}}),
			addPartitionsBatched(4, txnAdd{"a", txnAs{otherID: true}, false, t, []int32{1}}),
			produceStep(12, batchOf("a", t, 0, 1).txn()),
			produceStep(12, batchOf("b", u, 1, 1).txn()),
			endTxn(5, "a", true, none),
			endTxn(5, "b", false, none),
			awaitStable(t, 0, 1),
			awaitStable(u, 0, 1),
			fetchStep(isolationCommitted, t, 0, 1),
			fetchStep(isolationCommitted, u, 0, 1))
	}
	{
		const t = "diff-txn-tv2-offsets"
		add("TV2 TxnOffsetCommit v5 without AddOffsetsToTxn, and AddOffsetsToTxn v4", []string{t},
			initTxn("a", 5, txnTimeoutMillis),
			txnOffsetCommit(5, "a", none, t, 0, 3),
			produceStep(12, batchOf("a", t, 0, 1).txn()),
			txnOffsetCommit(5, "a", none, t, 1, 4),
			endTxn(5, "a", true, none),
			addOffsets(4, "a", none).retrying(txnCompleting),
			txnOffsetCommit(5, "a", none, t, 0, 6),
			txnOffsetCommit(5, "a", txnAs{epoch: -1}, t, 0, 6),
			addOffsets(4, "a", txnAs{epoch: -1}),
			endTxn(5, "a", false, none))
	}
	{
		const t = "diff-txn-tv2-timeout"
		add("TV2 EndTxn of a timed-out transaction, then the next one", []string{t},
			initTxn("a", 5, txnShortTimeoutMillis),
			produceStep(12, batchOf("a", t, 0, 2).txn()),
			awaitStable(t, 0),
			endTxn(5, "a", true, none).retrying(txnCompleting),
			endTxn(5, "a", false, none).retrying(txnCompleting),
			produceStep(12, batchOf("a", t, 0, 1).txn()).retrying(txnCompleting),
			initTxnAs("a", 5, txnShortTimeoutMillis, none).retrying(txnCompleting),
			produceStep(12, batchOf("a", t, 0, 1).txn()).retrying(txnCompleting),
			endTxn(5, "a", true, none),
			awaitStable(t, 0),
			fetchStep(isolationCommitted, t, 0))
	}
	{
		const t = "diff-txn-tv2-fenced"
		add("TV2 fenced producer", []string{t},
			initTxn("a", 5, txnTimeoutMillis),
			produceStep(12, batchOf("a", t, 0, 1).txn()),
			initTxn("a#2", 5, txnTimeoutMillis),
			initTxn("a#2", 5, txnTimeoutMillis).retrying(txnCompleting),
			produceStep(12, batchOf("a", t, 0, 1).txn()),
			endTxn(5, "a", true, none),
			produceStep(12, batchOf("a#2", t, 0, 1).txn()),
			endTxn(5, "a#2", true, none),
			awaitStable(t, 0),
			fetchStep(isolationCommitted, t, 0))
	}
	{
		const t = "diff-txn-tv2-produce-errors"
		steps := []txnStep{initTxn("a", 5, txnTimeoutMillis), initTxn("a", 5, txnTimeoutMillis)}
		for _, as := range []txnAs{{epoch: 1}, {epoch: -1}, {unknownID: true}, {otherID: true}} {
			steps = append(steps, produceStep(12, batchOf("a", t, 0, 1).txn().claiming(as)))
		}
		steps = append(steps,
			produceStep(12, batchOf("a", t, 0, 1).txn()),
			produceStep(12, batchOf("a", t, 0, 1).txn(), batchOf("a", t, 0, 1).txn()),
			produceStep(12, batchOf("a", t, 1, 1).txn(), batchOf("a", t, 1, 1).txn().alone()),
			endTxn(5, "a", true, none),
			awaitStable(t, 0, 1),
			fetchStep(isolationCommitted, t, 0, 1))
		add("TV2 transactional Produce errors", []string{t}, steps...)
	}
	return seqs
}

// killSequence kills both servers with transactions open and committed,
// of both transaction versions, and asks what each answers after the
// restart.
func killSequence() txnSequence {
	const t, u = "diff-txn-kill", "diff-txn-kill-tv2"
	return txnSequence{name: "kill -9 with open and committed transactions", topics: []string{t, u}, steps: []txnStep{
		initTxn("open", 4, txnTimeoutMillis),
		initTxn("done", 4, txnTimeoutMillis),
		initTxn("open2", 5, txnTimeoutMillis),
		initTxn("done2", 5, txnTimeoutMillis),
		addPartitions(3, "open", none, t, 0),
		produceStep(11, batchOf("open", t, 0, 2).txn()),
		addPartitions(3, "done", none, t, 1),
		produceStep(11, batchOf("done", t, 1, 1).txn()),
		endTxn(4, "done", true, none),
		produceStep(12, batchOf("open2", u, 0, 1).txn()),
		produceStep(12, batchOf("done2", u, 1, 2).txn()),
		endTxn(5, "done2", true, none),
		awaitStable(t, 1),
		awaitStable(u, 1),
		restartBoth(),
		awaitServing(t),
		awaitServing(u),
		listLatest(isolationCommitted, t, 0, 1),
		listLatest(isolationCommitted, u, 0, 1),
		fetchStep(isolationCommitted, t, 0, 1).retrying(txnLoading),
		fetchStep(isolationCommitted, u, 0, 1).retrying(txnLoading),
		endTxn(4, "done", true, none).retrying(txnLoading),
		initTxnAs("done", 4, txnTimeoutMillis, none).retrying(txnLoading),
		endTxn(5, "done2", true, txnAs{epoch: -1}).retrying(txnLoading),
		produceStep(12, batchOf("done2", u, 1, 1).txn()).retrying(txnLoading),
		endTxn(5, "done2", true, none),
		produceStep(12, batchOf("open2", u, 0, 1).txn()).retrying(txnLoading),
		endTxn(5, "open2", true, none).retrying(txnLoading),
		initTxn("open", 4, txnTimeoutMillis).retrying(txnLoading),
		initTxn("open", 4, txnTimeoutMillis).retrying(txnLoading, txnCompleting),
		awaitStable(t, 0, 1),
		awaitStable(u, 0, 1),
		listLatest(isolationCommitted, t, 0, 1),
		fetchStep(isolationCommitted, t, 0, 1),
		fetchStep(isolationCommitted, u, 0, 1),
	}}
}
