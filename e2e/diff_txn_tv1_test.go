package e2e

// Sequences of transactions under transaction.version 1 (the version
// Kafka picks for Produce v3-v11, EndTxn v0-v4, AddOffsetsToTxn v0-v3,
// TxnOffsetCommit v0-v4; see diff_txn_test.go): the client adds
// partitions, the epoch stays across transactions; the coordinator's
// errors; fencing; KIP-360 InitProducerID; timeouts; read_committed over
// interleaved transactions. Topics: diff-txn-tv1-*.

func init() {
	txnSequences = append(txnSequences, tv1Sequences()...)
	txnSequences = append(txnSequences, tv1ErrorSequences()...)
}

func tv1Sequences() []txnSequence {
	var seqs []txnSequence
	add := func(name, topic string, steps ...txnStep) {
		seqs = append(seqs, txnSequence{name: name, topics: []string{topic}, steps: steps})
	}
	{
		const t = "diff-txn-tv1-versions"
		add("transaction versions advertised", t,
			apiVersionsStep(3), apiVersionsStep(4),
			findCoordinator(3, 1, "a"), findCoordinator(4, 1, "a"), findCoordinator(4, 0, "a"))
	}
	{
		const t = "diff-txn-tv1-commit"
		add("TV1 add, produce, commit", t,
			initTxn("a", 4, txnTimeoutMillis),
			addPartitions(3, "a", none, t, 0, 1),
			produceStep(11, batchOf("a", t, 0, 2).txn(), batchOf("a", t, 1, 1).txn()),
			produceStep(11, batchOf("a", t, 0, 1).txn()),
			listLatest(isolationCommitted, t, 0, 1),
			fetchStep(isolationCommitted, t, 0, 1),
			endTxn(4, "a", true, none),
			awaitStable(t, 0, 1),
			listLatest(isolationCommitted, t, 0, 1),
			fetchStep(isolationCommitted, t, 0, 1))
	}
	{
		const t = "diff-txn-tv1-abort"
		add("TV1 add, produce, abort, then a committed transaction", t,
			initTxn("a", 5, txnTimeoutMillis),
			addPartitions(3, "a", none, t, 0),
			produceStep(9, batchOf("a", t, 0, 3).txn()),
			endTxn(4, "a", false, none),
			awaitStable(t, 0),
			fetchStep(isolationCommitted, t, 0),
			addPartitions(3, "a", none, t, 0).retrying(txnCompleting),
			produceStep(9, batchOf("a", t, 0, 1).txn()),
			endTxn(4, "a", true, none),
			awaitStable(t, 0),
			fetchStep(isolationCommitted, t, 0),
			fetchStep(isolationUncommitted, t, 0))
	}
	{
		const t = "diff-txn-tv1-before-add"
		add("TV1 produce before AddPartitionsToTxn", t,
			initTxn("a", 4, txnTimeoutMillis),
			produceStep(11, batchOf("a", t, 0, 1).txn()).notInTransaction(),
			produceStep(9, batchOf("a", t, 1, 1).txn()).notInTransaction(),
			addPartitions(3, "a", none, t, 0),
			produceStep(11, batchOf("a", t, 0, 1).txn()),
			produceStep(11, batchOf("a", t, 1, 1).txn()).notInTransaction(),
			endTxn(4, "a", false, none),
			awaitStable(t, 0, 1),
			fetchStep(isolationCommitted, t, 0, 1))
	}
	{
		const t = "diff-txn-tv1-retry"
		add("TV1 EndTxn retried, and of the other outcome", t,
			initTxn("a", 4, txnTimeoutMillis),
			addPartitions(3, "a", none, t, 0),
			produceStep(11, batchOf("a", t, 0, 1).txn()),
			endTxn(4, "a", true, none),
			endTxn(4, "a", true, none).retrying(txnCompleting),
			endTxn(4, "a", false, none).retrying(txnCompleting),
			endTxn(3, "a", true, none).retrying(txnCompleting),
			awaitStable(t, 0),
			fetchStep(isolationCommitted, t, 0))
	}
	{
		const t = "diff-txn-tv1-state"
		add("TV1 EndTxn without a transaction", t,
			initTxn("a", 4, txnTimeoutMillis),
			endTxn(4, "a", true, none),
			endTxn(4, "a", false, none),
			addPartitions(3, "a", none, t, 0),
			endTxn(4, "a", false, none),
			endTxn(4, "a", false, none).retrying(txnCompleting),
			endTxn(4, "a", true, none).retrying(txnCompleting))
	}
	{
		const t = "diff-txn-tv1-next"
		add("TV1 next transactions at the same epoch", t,
			initTxn("a", 4, txnTimeoutMillis),
			addPartitions(3, "a", none, t, 0),
			produceStep(10, batchOf("a", t, 0, 1).txn()),
			endTxn(4, "a", true, none),
			addPartitions(3, "a", none, t, 1).retrying(txnCompleting),
			produceStep(10, batchOf("a", t, 1, 1).txn()),
			produceStep(10, batchOf("a", t, 0, 1).txn()),
			addPartitions(3, "a", none, t, 0),
			produceStep(10, batchOf("a", t, 0, 1).txn()),
			endTxn(4, "a", false, none),
			awaitStable(t, 0, 1),
			fetchStep(isolationCommitted, t, 0, 1))
	}
	{
		const t = "diff-txn-tv1-ongoing"
		add("TV1 InitProducerID while a transaction is ongoing", t,
			initTxn("a", 4, txnTimeoutMillis),
			addPartitions(3, "a", none, t, 0),
			produceStep(11, batchOf("a", t, 0, 2).txn()),
			initTxn("a", 4, txnTimeoutMillis),
			initTxn("a", 4, txnTimeoutMillis).retrying(txnCompleting),
			awaitStable(t, 0),
			fetchStep(isolationCommitted, t, 0),
			listLatest(isolationCommitted, t, 0))
	}
	{
		const t = "diff-txn-tv1-fenced"
		add("TV1 fenced producer", t,
			initTxn("a", 4, txnTimeoutMillis),
			addPartitions(3, "a", none, t, 0),
			produceStep(11, batchOf("a", t, 0, 1).txn()),
			initTxn("a#2", 4, txnTimeoutMillis),
			initTxn("a#2", 4, txnTimeoutMillis).retrying(txnCompleting),
			produceStep(11, batchOf("a", t, 0, 1).txn()),
			addPartitions(3, "a", none, t, 1),
			endTxn(4, "a", true, none),
			addPartitions(1, "a", none, t, 1),
			endTxn(1, "a", true, none),
			addPartitions(3, "a#2", none, t, 1),
			produceStep(11, batchOf("a#2", t, 1, 1).txn()),
			endTxn(4, "a#2", true, none),
			awaitStable(t, 0, 1),
			fetchStep(isolationCommitted, t, 0, 1))
	}
	{
		const t = "diff-txn-tv1-kip360"
		add("TV1 InitProducerID with the current, last and a wrong producer ID and epoch", t,
			initTxn("a", 4, txnTimeoutMillis),
			addPartitions(3, "a", none, t, 0),
			produceStep(11, batchOf("a", t, 0, 1).txn()),
			endTxn(4, "a", true, none),
			initTxnAs("a", 4, txnTimeoutMillis, none).retrying(txnCompleting),
			initTxnAs("a", 4, txnTimeoutMillis, txnAs{epoch: -1}),
			initTxnAs("a", 4, txnTimeoutMillis, txnAs{epoch: -1}),
			initTxnAs("a", 4, txnTimeoutMillis, txnAs{epoch: 2}),
			initTxnAs("a", 4, txnTimeoutMillis, txnAs{epoch: -3}),
			initTxnAs("a", 4, txnTimeoutMillis, txnAs{otherID: true}),
			initTxnAs("a", 3, txnTimeoutMillis, txnAs{noEpoch: true}),
			initTxnAs("a", 5, txnTimeoutMillis, none),
			initTxnAs("b", 4, txnTimeoutMillis, txnAs{otherID: true}),
			initTxn("a", 4, 0),
			initTxn("a", 4, 900001),
			addPartitions(3, "a", none, t, 0),
			produceStep(11, batchOf("a", t, 0, 1).txn()),
			endTxn(4, "a", true, none),
			awaitStable(t, 0),
			fetchStep(isolationCommitted, t, 0))
	}
	{
		const t = "diff-txn-tv1-timeout"
		add("TV1 transaction timeout, then InitProducerID with the old producer ID and epoch", t,
			initTxn("a", 4, txnShortTimeoutMillis),
			addPartitions(3, "a", none, t, 0),
			produceStep(11, batchOf("a", t, 0, 1).txn()),
			awaitStable(t, 0),
			produceStep(11, batchOf("a", t, 0, 1).txn()),
			addPartitions(3, "a", none, t, 1),
			initTxnAs("a", 4, txnShortTimeoutMillis, none).retrying(txnCompleting),
			addPartitions(3, "a", none, t, 1),
			produceStep(11, batchOf("a", t, 1, 1).txn()),
			endTxn(4, "a", true, none),
			awaitStable(t, 0, 1),
			fetchStep(isolationCommitted, t, 0, 1))
	}
	{
		const t = "diff-txn-tv1-timeout-end"
		add("TV1 EndTxn of a timed-out transaction", t,
			initTxn("a", 4, txnShortTimeoutMillis),
			addPartitions(3, "a", none, t, 0),
			produceStep(11, batchOf("a", t, 0, 2).txn()),
			awaitStable(t, 0),
			endTxn(4, "a", true, none).retrying(txnCompleting),
			endTxn(4, "a", false, none).retrying(txnCompleting),
			endTxn(4, "a", false, txnAs{epoch: 1}).retrying(txnCompleting),
			initTxn("a", 4, txnTimeoutMillis).retrying(txnCompleting),
			fetchStep(isolationCommitted, t, 0))
	}
	{
		const t = "diff-txn-tv1-interleaved"
		add("TV1 read_committed over interleaved transactions of two producers", t,
			initTxn("a", 4, txnTimeoutMillis),
			initTxn("b", 4, txnTimeoutMillis),
			initIdempotent("c", 4),
			addPartitions(3, "a", none, t, 0),
			produceStep(11, batchOf("a", t, 0, 1).txn()),
			addPartitions(3, "b", none, t, 0, 1),
			produceStep(11, batchOf("b", t, 0, 2).txn(), batchOf("b", t, 1, 1).txn()),
			produceStep(11, batchOf("c", t, 0, 1)),
			produceStep(11, batchOf("a", t, 0, 1).txn()),
			listLatest(isolationCommitted, t, 0, 1),
			fetchStep(isolationCommitted, t, 0, 1),
			endTxn(4, "a", true, none),
			awaitLastStable(t, 0, 1), // a's marker written: b's first record holds it
			listLatest(isolationCommitted, t, 0, 1),
			produceStep(11, batchOf("c", t, 0, 1)),
			fetchStep(isolationCommitted, t, 0, 1),
			endTxn(4, "b", false, none),
			awaitStable(t, 0, 1),
			fetchStep(isolationCommitted, t, 0, 1),
			fetchStep(isolationUncommitted, t, 0, 1),
			listLatest(isolationCommitted, t, 0, 1),
			listLatest(isolationUncommitted, t, 0, 1))
	}
	{
		const t = "diff-txn-tv1-offsets"
		add("TV1 AddOffsetsToTxn and TxnOffsetCommit", t,
			initTxn("a", 4, txnTimeoutMillis),
			txnOffsetCommit(3, "a", none, t, 0, 5),
			addOffsets(3, "a", none),
			txnOffsetCommit(3, "a", none, t, 0, 5),
			txnOffsetCommit(4, "a", none, t, 1, 7),
			addPartitions(3, "a", none, t, 0),
			produceStep(11, batchOf("a", t, 0, 1).txn()),
			endTxn(4, "a", true, none),
			addOffsets(3, "a", none).retrying(txnCompleting),
			txnOffsetCommit(4, "a", none, t, 0, 9),
			endTxn(4, "a", false, none))
	}
	return seqs
}

// tv1ErrorSequences are the coordinator's errors to a producer that
// claims another producer ID, another epoch or an unknown transactional
// ID, on each request of a transaction.
func tv1ErrorSequences() []txnSequence {
	var seqs []txnSequence
	add := func(name, topic string, steps ...txnStep) {
		seqs = append(seqs, txnSequence{name: name, topics: []string{topic}, steps: steps})
	}
	wrong := []txnAs{{otherID: true}, {epoch: 1}, {epoch: -1}, {unknownID: true}}
	{
		const t = "diff-txn-tv1-add-errors"
		steps := []txnStep{initTxn("a", 4, txnTimeoutMillis), initTxn("a", 4, txnTimeoutMillis)}
		for _, as := range wrong {
			steps = append(steps, addPartitions(3, "a", as, t, 0))
		}
		steps = append(steps, addPartitions(1, "a", txnAs{epoch: -1}, t, 0),
			addPartitions(3, "a", none, t, 0, 7),
			addPartitions(3, "a", none, "diff-txn-tv1-add-errors-none", 0),
			addPartitions(3, "a", none, t, 0))
		for _, as := range wrong {
			steps = append(steps, addPartitions(3, "a", as, t, 1))
		}
		add("TV1 AddPartitionsToTxn errors", t, append(steps, endTxn(4, "a", false, none))...)
	}
	{
		const t = "diff-txn-tv1-end-errors"
		steps := []txnStep{initTxn("a", 4, txnTimeoutMillis), initTxn("a", 4, txnTimeoutMillis),
			addPartitions(3, "a", none, t, 0), produceStep(11, batchOf("a", t, 0, 1).txn())}
		for _, as := range wrong {
			steps = append(steps, endTxn(4, "a", true, as))
		}
		steps = append(steps, endTxn(1, "a", true, txnAs{epoch: -1}), endTxn(4, "a", true, none),
			awaitStable(t, 0), fetchStep(isolationCommitted, t, 0))
		add("TV1 EndTxn errors", t, steps...)
	}
	{
		const t = "diff-txn-tv1-offsets-errors"
		steps := []txnStep{initTxn("a", 4, txnTimeoutMillis), initTxn("a", 4, txnTimeoutMillis)}
		for _, as := range wrong {
			steps = append(steps, addOffsets(3, "a", as))
		}
		steps = append(steps, addOffsets(1, "a", txnAs{epoch: -1}), addOffsets(3, "a", none))
		for _, as := range wrong {
			steps = append(steps, txnOffsetCommit(3, "a", as, t, 0, 1))
		}
		add("TV1 AddOffsetsToTxn and TxnOffsetCommit errors", t, append(steps, endTxn(4, "a", false, none))...)
	}
	{
		const t = "diff-txn-tv1-produce-errors"
		steps := []txnStep{initTxn("a", 4, txnTimeoutMillis), initTxn("a", 4, txnTimeoutMillis),
			addPartitions(3, "a", none, t, 0), produceStep(11, batchOf("a", t, 0, 1).txn())}
		for _, as := range []txnAs{{epoch: 1}, {epoch: -1}, {unknownID: true}, {otherID: true}} {
			steps = append(steps, produceStep(11, batchOf("a", t, 0, 1).txn().claiming(as)))
		}
		steps = append(steps,
			produceStep(9, batchOf("a", t, 1, 1).txn()).notInTransaction(),
			produceStep(11, batchOf("a", t, 1, 1).txn()).notInTransaction(),
			produceStep(11, batchOf("a", t, 0, 1)),
			produceStep(11, batchOf("a", t, 0, 1).txn()),
			endTxn(4, "a", true, none),
			awaitStable(t, 0, 1),
			fetchStep(isolationCommitted, t, 0, 1))
		add("TV1 transactional Produce errors", t, steps...)
	}
	return seqs
}
