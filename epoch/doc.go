// Package epoch is the leader-epoch cache of one partition log: the map from
// each partition leader epoch to the first offset written in it, as Kafka's
// LeaderEpochFileCache keeps it (KIP-101, KIP-279). It does no I/O and starts
// no goroutines: the log store feeds it appends and truncations, asks it
// whether anything changed, and writes the checkpoint bytes itself.
//
// # What it owns
//
//   - Cache: the entries, and the operations Kafka performs on them: Assign
//     on append, TruncateFromEnd on log truncation, TruncateFromStart when
//     the log start offset moves up (retention, DeleteRecords), EndOffsetFor
//     to answer OffsetForLeaderEpoch and to compute a Fetch DivergingEpoch,
//     EpochForOffset.
//   - Encode and Decode: the leader-epoch-checkpoint file format.
//   - Divergence: the follower's truncation step after a leader's
//     OffsetForLeaderEpoch answer or a Fetch DivergingEpoch, as Kafka's
//     AbstractFetcherThread.getOffsetTruncationState.
//   - TruncationPointForLastMirrorEpoch: the failback truncation point from
//     the last mirror epoch (LME) the new primary stored when it failed over.
//
// # Entries and invariants
//
// An entry (epoch, startOffset) says that the batches from startOffset up to
// the next entry's startOffset (or the log end offset, for the latest entry)
// carry that partition leader epoch. Epoch 3 starting at offset 0, epoch 5 at
// offset 40, epoch 9 at offset 70, log end offset 100:
//
//	offset  0                 40          70          100 = logEndOffset
//	        |-----------------|-----------|-----------|
//	epoch   3                 5           9
//
//	entries [{3 0} {5 40} {9 70}]
//	EndOffsetFor(3) = (3, 40)    EndOffsetFor(4) = (3, 40)
//	EndOffsetFor(9) = (9, 100)   EndOffsetFor(2) = (2, 0)
//	EndOffsetFor(10) = (NoEpoch, -1)
//
// The cache holds, after every call:
//
//   - every Epoch >= 0 and every StartOffset >= 0;
//   - Epoch strictly increasing;
//   - StartOffset strictly increasing.
//
// A caller that breaks them (Assign with a negative epoch or offset, a
// negative log end offset) has a bug and the cache panics. Input from outside
// the process (a checkpoint file, entries handed to New) is checked and
// rejected with an error instead. The cache does not know the log end offset;
// an entry may start at it (a leader assigns its epoch before writing) but
// should not start past it.
//
// # Checkpoint format
//
// Kafka's leader-epoch-checkpoint text file: a version line (always 0), a
// count line, then one line per entry, epoch and start offset in decimal
// separated by one space, every line ending in "\n":
//
//	0\n          version
//	3\n          number of entries
//	3 0\n        epoch 3 starts at offset 0
//	5 40\n
//	9 70\n
//
// Decode is stricter than Kafka's reader, which accepts an empty file, a file
// with only a version line, any run of whitespace between the two numbers,
// and signs or leading zeros. Decode accepts exactly what Encode writes:
// canonical decimal numbers (no sign, no leading zero), the epoch within
// int32, no empty or extra lines, no "\r", the count equal to the number of
// entry lines, and entries that satisfy the invariants above. So a file that
// decodes re-encodes to the same bytes. Every error wraps
// ErrCorruptCheckpoint and names the 1-based line it found wrong.
//
// # Errors
//
// Decode errors wrap ErrCorruptCheckpoint, New errors wrap ErrInvalidEntries;
// both are tested with errors.Is. EndOffsetFor answers "unknown" with
// (recordbatch.NoEpoch, UndefinedOffset), as Kafka does with -1 and -1.
//
// # Divergence and failback
//
// Plain epoch divergence compares (epoch, end offset) pairs and so assumes an
// epoch number names one leader's history. Two clusters break that: after a
// failover the new primary and the old one can both write offset 2 at epoch
// 10. On failback the old primary therefore first truncates to the point
// where its log and the last mirror epoch agree
// (TruncationPointForLastMirrorEpoch), and only then fetches with
// LastFetchedEpoch, letting Divergence handle the rest.
package epoch
