// Package records decodes and validates the records inside a v2 record
// batch, the part that package recordbatch never touches. The broker uses
// it in three places: Produce validation (Validate, after Kafka's
// LogValidator for magic 2, streaming), ListOffsets by timestamp (FirstAtOrAfter), and
// reading a transaction marker (ControlType). It does no I/O and starts no
// goroutines.
//
// # Records section
//
// After the 61-byte batch header comes the records section, compressed as a
// whole with the batch's codec (attributes bits 0-2). Decompressed, it is
// recordCount records back to back with nothing after the last one. Every
// varint is zig-zag encoded (as protobuf's sint32/sint64): varint at most 5
// bytes and within int32, varlong at most 10 bytes.
//
//	record:
//	  length          varint   bytes of the record after this field
//	  attributes      int8     unused, any value
//	  timestampDelta  varlong  added to the batch's baseTimestamp
//	  offsetDelta     varint   added to the batch's baseOffset
//	  keyLength       varint   negative: null key, no bytes follow
//	  key             keyLength bytes
//	  valueLength     varint   negative: null value
//	  value           valueLength bytes
//	  headerCount     varint   >= 0
//	  headers         headerCount times:
//	    keyLength     varint   >= 0 (a header key is never null)
//	    key           keyLength bytes (UTF-8, not checked)
//	    valueLength   varint   negative: null value
//	    value         valueLength bytes
//
// A negative length other than -1 means null too, as in Kafka's reader.
//
// A control batch (attributes bit 5) holds exactly one record, whose key is
//
//	version  int16  0
//	type     int16  0 ABORT, 1 COMMIT
//
// and whose value (version int16, coordinatorEpoch int32) is not read here.
//
// # Codecs
//
//	1 gzip    RFC 1952 members, concatenated members allowed
//	2 snappy  either xerial framing, as snappy-java writes it:
//	            "\x82SNAPPY\x00" version int32 compatible int32
//	            then blocks: length int32, raw snappy block
//	          or one raw snappy block (franz-go, librdkafka, Sarama)
//	3 lz4     LZ4 frame format (not the raw block format)
//	4 zstd    zstd frames
//	5-7       unknown: the batch is corrupt
//
// # Invariants and bounds
//
// Decompression never produces more than the caller's limit (DefaultLimit
// when the limit is <= 0): a batch whose records would decompress past it
// fails with ErrTooLarge, naming the batch, after decoding at most a small
// multiple of the limit. Decoders and scratch buffers are pooled, so that
// validating a batch allocates nothing once the pools are warm.
//
// Memory does not grow with what a batch decompresses to. Validate and
// FirstAtOrAfter read the records as the codec produces them, through a
// 64 KiB window (sectionReader), skipping keys and values: a validation
// holds the window and its codec's state, which is bounded whatever a
// header declares: gzip a 32 KiB window; lz4 a frame's blocks, at most
// 4 MiB by the format; zstd a window of at most ZstdWindowMax (8 MiB, a
// frame declaring more is ErrTooLarge); snappy-java's xerial blocks up
// to 64 KiB in the stream's own buffer. What cannot stream - a raw snappy
// block (decoded whole, and refused when it declares more than snappy's
// 64/3 expansion of its size) or a xerial block over 64 KiB, and
// Recompress (three times the section's size) - is paid for from one
// node-wide DecompressBudget (128 MiB), waiting its turn when it is
// spent. Decompress itself still returns the section whole: callers
// bound how many run at once (the log cleaner's threads).
//
// Errors name the batch by base offset and the record by index and byte
// position in the records section. A malformed batch wraps
// recordbatch.ErrCorrupt; an oversized one wraps ErrTooLarge. Both are
// tested with errors.Is.
package records
