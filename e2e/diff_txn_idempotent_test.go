package e2e

// Sequences of idempotent producers (diff_txn_test.go): duplicates of the
// last five batches and older, gaps, the sequence wrapping at MaxInt32,
// epochs bumped by the client, unknown producers, several batches of one
// partition in one Produce, every Produce version. Topics:
// diff-txn-idem-*.

import "math"

var none = txnAs{}

func init() {
	txnSequences = append(txnSequences, idempotentSequences()...)
}

func idempotentSequences() []txnSequence {
	var seqs []txnSequence
	add := func(name, topic string, steps ...txnStep) {
		seqs = append(seqs, txnSequence{name: name, topics: []string{topic}, steps: steps})
	}
	{
		const t = "diff-txn-idem-dup"
		steps := []txnStep{initIdempotent("a", 4)}
		for i, records := range []int{1, 2, 1, 3, 1, 2} {
			steps = append(steps, produceStep(9, batchOf("a", t, 0, records)))
			if i == 0 {
				steps = append(steps, produceStep(9, batchOf("a", t, 0, 1).again(1))) // duplicate of the only batch
			}
		}
		for back := 1; back <= 5; back++ {
			steps = append(steps, produceStep(9, batchOf("a", t, 0, 1).again(back)))
		}
		steps = append(steps,
			produceStep(9, batchOf("a", t, 0, 1).again(6)), // older than the last five
			produceStep(9, batchOf("a", t, 0, 1)),
			produceStep(9, batchOf("a", t, 0, 1).again(2)),
			fetchStep(isolationUncommitted, t, 0))
		add("idempotent duplicates of the last five batches and older", t, steps...)
	}
	{
		const t = "diff-txn-idem-gap"
		add("idempotent gap in the sequence", t,
			initIdempotent("a", 4),
			produceStep(9, batchOf("a", t, 0, 2)),
			produceStep(9, batchOf("a", t, 0, 1).gap(1)),
			produceStep(9, batchOf("a", t, 0, 1).gap(3)),
			produceStep(9, batchOf("a", t, 0, 1)),
			produceStep(9, batchOf("a", t, 0, 1).at(0)),
			fetchStep(isolationUncommitted, t, 0))
	}
	{
		const t = "diff-txn-idem-wrap"
		add("idempotent sequence wraps at MaxInt32", t,
			initIdempotent("a", 4),
			produceStep(9, batchOf("a", t, 0, 1)),
			produceStep(9, batchOf("a", t, 0, 3).at(math.MaxInt32-1)),
			produceStep(9, batchOf("a", t, 1, 3).at(math.MaxInt32-1)),
			produceStep(9, batchOf("a", t, 1, 1)),
			produceStep(9, batchOf("a", t, 1, 1).again(2)),
			produceStep(9, batchOf("a", t, 1, 1).at(0)),
			produceStep(9, batchOf("a", t, 1, 2)),
			fetchStep(isolationUncommitted, t, 0, 1))
	}
	{
		const t = "diff-txn-idem-wrap-exact"
		add("idempotent batch ending at MaxInt32, then 0", t,
			initIdempotent("a", 4),
			produceStep(11, batchOf("a", t, 0, 2).at(math.MaxInt32-1)),
			produceStep(11, batchOf("a", t, 0, 1)),
			produceStep(11, batchOf("a", t, 0, 1).at(math.MaxInt32)),
			fetchStep(isolationUncommitted, t, 0))
	}
	{
		const t = "diff-txn-idem-epoch0"
		add("idempotent new epoch at sequence 0, then the old epoch", t,
			initIdempotent("a", 4),
			produceStep(9, batchOf("a", t, 0, 2)),
			produceStep(9, batchOf("a", t, 0, 1).claiming(txnAs{epoch: 1}).at(0)),
			produceStep(9, batchOf("a", t, 0, 1)),
			produceStep(9, batchOf("a", t, 0, 1).claiming(txnAs{epoch: 1}).at(1)),
			produceStep(9, batchOf("a", t, 0, 1).claiming(txnAs{epoch: 3}).at(0)),
			produceStep(9, batchOf("a", t, 0, 1).claiming(txnAs{epoch: 1}).at(2)),
			fetchStep(isolationUncommitted, t, 0))
	}
	{
		const t = "diff-txn-idem-epochn"
		add("idempotent new epoch at a sequence other than 0", t,
			initIdempotent("a", 4),
			produceStep(9, batchOf("a", t, 0, 2)),
			produceStep(9, batchOf("a", t, 0, 1).claiming(txnAs{epoch: 1}).at(5)),
			produceStep(9, batchOf("a", t, 0, 1).claiming(txnAs{epoch: 1}).at(2)),
			produceStep(9, batchOf("a", t, 0, 1)),
			fetchStep(isolationUncommitted, t, 0))
	}
	{
		const t = "diff-txn-idem-unknown"
		add("idempotent unknown producer ID at a sequence other than 0", t,
			initIdempotent("a", 4),
			produceStep(9, batchOf("a", t, 0, 1).claiming(txnAs{otherID: true}).at(7)),
			produceStep(9, batchOf("a", t, 0, 1).claiming(txnAs{otherID: true}).at(8)),
			produceStep(9, batchOf("a", t, 0, 1).claiming(txnAs{otherID: true}).at(10)),
			produceStep(9, batchOf("a", t, 1, 1).claiming(txnAs{otherID: true, epoch: 4}).at(3)),
			fetchStep(isolationUncommitted, t, 0, 1))
	}
	{
		const t = "diff-txn-idem-two-batches"
		add("idempotent Produce with two batches for one partition, and one partition twice", t,
			initIdempotent("a", 4),
			produceStep(9, batchOf("a", t, 0, 1), batchOf("a", t, 0, 1)),
			produceStep(12, batchOf("a", t, 0, 1), batchOf("a", t, 0, 2)),
			produceStep(9, batchOf("a", t, 1, 1), batchOf("a", t, 1, 1).alone()),
			produceStep(12, batchOf("", t, 1, 1), batchOf("", t, 1, 1)),
			produceStep(9, batchOf("a", t, 0, 1)),
			fetchStep(isolationUncommitted, t, 0, 1))
	}
	{
		const t = "diff-txn-idem-versions"
		add("idempotent Produce at every version, both partitions", t,
			initIdempotent("a", 0),
			produceStep(3, batchOf("a", t, 0, 1), batchOf("a", t, 1, 2)),
			produceStep(5, batchOf("a", t, 0, 1), batchOf("a", t, 1, 1)),
			produceStep(7, batchOf("a", t, 0, 2), batchOf("a", t, 1, 1)),
			produceStep(8, batchOf("a", t, 0, 1).again(1), batchOf("a", t, 1, 1).gap(2)),
			produceStep(10, batchOf("a", t, 0, 1), batchOf("a", t, 1, 1)),
			produceStep(11, batchOf("a", t, 0, 1)),
			produceStep(12, batchOf("a", t, 0, 1), batchOf("a", t, 1, 1)),
			produceStep(13, batchOf("a", t, 0, 1), batchOf("a", t, 1, 1)),
			produceStep(13, batchOf("a", t, 0, 1).again(1)),
			fetchStep(isolationUncommitted, t, 0, 1))
	}
	{
		const t = "diff-txn-idem-two-producers"
		add("idempotent producers interleaved, one re-initialised", t,
			initIdempotent("a", 5),
			initIdempotent("b", 5),
			produceStep(9, batchOf("a", t, 0, 1), batchOf("b", t, 1, 1)),
			produceStep(9, batchOf("b", t, 0, 2)),
			produceStep(9, batchOf("a", t, 0, 1)),
			initIdempotent("a", 5),
			produceStep(9, batchOf("a", t, 0, 1)),
			produceStep(9, batchOf("b", t, 0, 1).again(1)),
			fetchStep(isolationCommitted, t, 0, 1))
	}
	return seqs
}
