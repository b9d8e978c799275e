package epoch

import (
	"fmt"

	"github.com/mirrord/mirrord/recordbatch"
)

// Divergence is the follower's step after the leader (for a mirror: the
// source partition) answered with (leaderEpoch, leaderEndOffset), either in
// an OffsetForLeaderEpoch response or as a Fetch DivergingEpoch. It returns
// the offset to truncate the local log to, and done = false when the caller
// must truncate there and ask again, as Kafka's
// AbstractFetcherThread.getOffsetTruncationState does:
//
//   - leaderEndOffset undefined (negative): (logEndOffset, true), keep the
//     log; see below.
//   - leaderEpoch is NoEpoch (a leader that does not report epochs):
//     (min(leaderEndOffset, logEndOffset), true).
//   - the cache cannot answer for leaderEpoch (EndOffsetFor gives
//     UndefinedOffset: the cache is empty or leaderEpoch is above every
//     local epoch): (min(leaderEndOffset, logEndOffset), true).
//   - the largest local epoch <= leaderEpoch is below it (the follower never
//     saw leaderEpoch): (min(its end offset, logEndOffset), false). The
//     caller truncates, then asks again with its new latest epoch, which is
//     lower than leaderEpoch; so the exchange ends within Len()+1 rounds.
//   - otherwise: (min(local end offset of leaderEpoch, leaderEndOffset,
//     logEndOffset), true).
//
// An undefined leaderEndOffset means the leader knows no epoch at or below
// the one asked about. Kafka then truncates to the partition's fetch offset:
// the high watermark, or the log end offset when the replica has epochs and
// the cluster supports truncation on fetch (ReplicaManager.initialFetchOffset).
// A mirror holds only what the source had below its high watermark, so its
// high watermark is its log end offset and Divergence keeps the log. A caller
// that tracks a lower high watermark and wants it checks leaderEndOffset < 0
// itself. Kafka tests for exactly -1; any negative end offset is garbage and
// is treated the same here.
//
// The cache does not change: the caller truncates its log and then the cache
// (TruncateFromEnd). A negative logEndOffset is a caller bug and panics.
func (c *Cache) Divergence(leaderEpoch recordbatch.Epoch, leaderEndOffset, logEndOffset recordbatch.Offset) (truncateTo recordbatch.Offset, done bool) {
	mustBeLogEndOffset(logEndOffset)
	if leaderEndOffset < 0 {
		return logEndOffset, true
	}
	if leaderEpoch == recordbatch.NoEpoch {
		return min(leaderEndOffset, logEndOffset), true
	}
	followerEpoch, followerEndOffset := c.EndOffsetFor(leaderEpoch, logEndOffset)
	if followerEndOffset == UndefinedOffset {
		return min(leaderEndOffset, logEndOffset), true
	}
	if followerEpoch != leaderEpoch {
		return min(followerEndOffset, logEndOffset), false
	}
	return min(followerEndOffset, leaderEndOffset, logEndOffset), true
}

// TruncationPointForLastMirrorEpoch returns the offset the old primary
// truncates its log to on failback, before it fetches from the new primary.
// lmeEpoch and lmeOffset are the last mirror epoch the new primary stored
// when it failed over: the latest epoch it had mirrored from us and its log
// end offset then. The result is
//
//	min(EndOffsetFor(lmeEpoch, logEndOffset), lmeOffset, logEndOffset)
//
// Up to that point both logs hold the same batches: the new primary copied
// them, and our log has the same epochs there. Past it our log holds what we
// wrote after the new primary stopped copying from us, or what an unclean
// election on our side replaced. Epoch numbers alone cannot tell this: both
// sides may have written the same offsets at the same epoch after the
// failover, which Divergence would take for agreement.
//
// When EndOffsetFor cannot answer:
//
//   - the cache is empty (no epochs known): 0, truncate everything;
//   - lmeEpoch is above every local epoch: min(lmeOffset, logEndOffset), as
//     Divergence trusts the leader's offset in that case.
//
// When the cache knows no epoch <= lmeEpoch, EndOffsetFor returns the
// earliest entry's start offset, normally the log start offset: the whole
// local log is suspect and is truncated. The point returned is only the
// first step: the fetches that follow carry LastFetchedEpoch and Divergence
// handles any older divergence.
//
// No LME at all (the new primary never mirrored from us) is the caller's
// case: truncate to 0. A negative lmeEpoch or lmeOffset is treated the same
// and gives 0. A negative logEndOffset is a caller bug and panics.
func (c *Cache) TruncationPointForLastMirrorEpoch(lmeEpoch recordbatch.Epoch, lmeOffset, logEndOffset recordbatch.Offset) recordbatch.Offset {
	mustBeLogEndOffset(logEndOffset)
	if lmeEpoch < 0 || lmeOffset < 0 || c.Len() == 0 {
		return 0
	}
	_, endOffset := c.EndOffsetFor(lmeEpoch, logEndOffset)
	if endOffset == UndefinedOffset {
		return min(lmeOffset, logEndOffset)
	}
	return min(endOffset, lmeOffset, logEndOffset)
}

func mustBeLogEndOffset(logEndOffset recordbatch.Offset) {
	if logEndOffset < 0 {
		panic(fmt.Sprintf("epoch: negative log end offset %d", logEndOffset))
	}
}
