// Package logstore owns the partition logs of a mirrord node: segments of
// raw Kafka v2 record batches, stored exactly as they arrived, with
// memory-mapped sparse indexes, read back as file ranges for sendfile.
//
// On disk, one directory per partition (see Dir for the data directory):
//
//	00000000000000000000.log        batches, whole and valid, offsets increasing
//	00000000000000000000.index      8-byte entries   [relative base offset u32][position u32]
//	00000000000000000000.timeindex  12-byte entries  [max timestamp so far i64][relative offset u32]
//	00000000000000004096.log        the next segment: its name is its base offset
//	...
//	leader-epoch-checkpoint         "0\n<count>\n<epoch> <start offset>\n..." (epoch package)
//	log-offsets-checkpoint          "0\nlog-start-offset <n>\nhigh-watermark <n>\n"
//	.clean-shutdown                 written by Close, removed (durably) before the next write
//
// An index entry is added every IndexIntervalBytes of log; a lookup finds
// the last entry at or below the target and walks batch headers from
// there. The active segment's indexes are mapped at IndexBytesMax (zero
// past the last entry); sealing a segment at roll trims them to their
// entries. Indexes are derived data: a missing or inconsistent index is
// rebuilt from the log.
//
// Durability invariants (tested against vfs.Mem's crash model):
//
//   - Every segment but the last was synced, indexes included, when it was
//     rolled; after an unclean stop only the last segment is recovered.
//   - Recovery checks each batch's framing, CRC-32C and increasing offsets,
//     and, because the CRC does not cover baseOffset and
//     partitionLeaderEpoch, that the epoch checkpoint assigns the batch's
//     offsets to the batch's epoch. It cuts the log at the first failure.
//   - A new leader epoch is checkpointed before its first batch is written,
//     so the checkpoint covers every durable batch; entries past the
//     recovered log end are dropped.
//   - TruncateTo, TruncateFullyAndStartAt, AdvanceLogStart, retention and
//     Dir.Delete are durable when they return; truncated bytes never come
//     back after a crash.
//   - Appends are durable per FlushPolicy: before Append returns, at the
//     next interval tick, or at the next roll, truncation or close.
//   - A write error that could leave the log uncertain marks it failed:
//     writes return ErrFailed until it is reopened, which recovers it.
//     Nothing acknowledged is lost.
//
// Offsets follow Kafka: logStartOffset <= highWatermark <= logEndOffset;
// the log end offset is the offset after the last batch (or the base of
// the only segment when the log is empty). A mirror appends batches with
// the source's offsets and epochs (Append); a writable topic lets the log
// assign them (AppendAssign).
package logstore
