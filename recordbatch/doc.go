// Package recordbatch is a zero-copy view over Kafka v2 record batches
// (magic 2) held in a byte slice. It parses and checks batch headers and
// never touches the records inside, so compressed batches stay compressed.
//
// Wire format (all integers big-endian), after KIP-98:
//
//	offset  size  field
//	     0     8  baseOffset
//	     8     4  batchLength           bytes after this field
//	    12     4  partitionLeaderEpoch  not covered by the CRC
//	    16     1  magic                 always 2
//	    17     4  crc                   CRC-32C (Castagnoli) of bytes [21, 12+batchLength)
//	    21     2  attributes            bits 0-2 codec, 3 timestamp type,
//	                                    4 transactional, 5 control, 6 delete horizon
//	    23     4  lastOffsetDelta
//	    27     8  baseTimestamp
//	    35     8  maxTimestamp
//	    43     8  producerId
//	    51     2  producerEpoch
//	    53     4  baseSequence
//	    57     4  recordCount
//	    61     -  records (possibly compressed)
//
// A batch occupies 12+batchLength bytes. baseOffset and partitionLeaderEpoch
// sit before the CRC range, so a leader may stamp them without recomputing it.
//
// Errors: ErrTruncated means the buffer ends inside a batch (normal at the end
// of a fetch response); ErrCorrupt means the bytes cannot be a valid batch.
// Both are tested with errors.Is; the wrapped message names the byte position,
// the base offset where known, and what was wrong.
//
// The package also holds Kafka's log vocabulary that every other package
// shares, each defined once: Offset, Epoch and TopicID.
package recordbatch
