// Package logstore owns the partition logs of a mirrord node: segments of
// raw Kafka v2 record batches, stored exactly as they arrived, with
// memory-mapped sparse indexes, read back as file ranges for sendfile.
//
// On disk, one directory per partition (see Dir for the data directory),
// laid out as Kafka lays out a partition, so that Kafka's own tools
// (org.apache.kafka.tools.DumpLogSegments) read it:
//
//	00000000000000000000.log        batches, whole and valid, offsets increasing
//	00000000000000000000.index      8-byte entries   [relative last offset u32][position u32]
//	00000000000000000000.timeindex  12-byte entries  [max timestamp so far i64][relative last offset u32]
//	00000000000000004096.log        the next segment: its name is its base offset
//	...
//	leader-epoch-checkpoint         "0\n<count>\n<epoch> <start offset>\n..." (epoch package)
//	log-offsets-checkpoint          "0\nlog-start-offset <n>\nhigh-watermark <n>\n"
//	.clean-shutdown                 written by Close, removed (durably) before the next write
//
// A new partition holds partition.metadata and its first segment's .log
// only: the indexes are made by its first append (or its Close), the
// checkpoints by the writes that need them (Dir.CreateMany).
//
// Index entries follow Kafka's LogSegment.append. Offsets in them are
// relative to the segment's base offset, big-endian:
//
//	.index      offset entry (8 bytes)            .timeindex  time entry (12 bytes)
//	+----------------+----------------+            +--------------------------------+----------------+
//	| last offset of | position of    |            | max batch timestamp so far     | last offset of |
//	| the batch  u32 | the batch  u32 |            | in the segment             i64 | its batch  u32 |
//	+----------------+----------------+            +--------------------------------+----------------+
//
// A batch gets an offset entry when more than IndexIntervalBytes
// (index.interval.bytes) were written since the last indexed batch
// started, so never the segment's first batch; at the same time the time
// index takes the max timestamp so far if it grew (above -1, Kafka's
// NO_TIMESTAMP, when the index is empty), and once more when the segment
// is sealed (roll, Close). Keys strictly increase in both files. A lookup
// of offset X takes the last entry whose key is <= X (the batch there ends
// at or before X) and walks batch headers from there to the first batch
// whose last offset is >= X: the batch holding X, or the first after a
// compaction gap. A lookup by timestamp starts at the batch the last
// smaller time entry names. The active segment's indexes are mapped at
// IndexBytesMax (zero past the last entry); sealing a segment at roll
// trims them to their entries. Indexes are derived data: a missing or
// inconsistent index is rebuilt from the log.
//
// The previous release keyed both indexes by a batch's first offset.
// Lookups are correct with either key (a first offset <= X also starts
// the walk at or before the batch holding X), so sealed segments written
// by it are served as they are until retention deletes them: converting
// them would read every batch header of the log at the first start. The
// active segment, which keeps growing, is rebuilt at open when its last
// offset entry or last time entry does not name its batch's last offset.
// (Its earlier entries are not checked: an index whose last entries name
// one-record batches may keep first-offset entries before them, which
// lookups handle the same way.)
//
// Durability invariants (tested against vfs.Mem's crash model):
//
//   - Every segment but the last was synced, indexes included, when it was
//     rolled; after an unclean stop only the last segment is recovered.
//   - Recovery checks each batch's framing, CRC-32C and, because the CRC
//     does not cover baseOffset and partitionLeaderEpoch, the header rules
//     of checkHeader (offsets increasing within a segment, gaps allowed,
//     and below the next segment's base; epochs not going backwards) and
//     that the epoch checkpoint assigns the batch's offsets to the batch's
//     epoch. It cuts the log at the first failure (or before the batch
//     before it: see anchored), and the segments after a cut sealed one.
//     What it cuts is first copied, synced (a dropped segment is moved
//     whole), to ../truncated/<topic>-<partition>/recovery-<base>-<position>.bytes
//     beside the log directory, then reported (Config.RecoveryTruncated);
//     when that fails, nothing is cut and the open fails.
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
