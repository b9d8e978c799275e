// Package fetchwire reads a Fetch response (version 13, the version a
// mirror sends: topic IDs, flexible versions) in place, over the bytes of
// the response as they came off the connection, allocating nothing.
//
// The body, after the response header (correlation ID and its tagged
// fields), as Kafka's FetchResponse.json has it for v13:
//
//	throttle_time_ms int32 | error_code int16 | session_id int32
//	responses: compact array of
//	  topic_id uuid
//	  partitions: compact array of
//	    partition_index int32 | error_code int16
//	    high_watermark int64 | last_stable_offset int64 | log_start_offset int64
//	    aborted_transactions: compact nullable array of
//	      producer_id int64 | first_offset int64 | tagged fields
//	    preferred_read_replica int32
//	    records: compact nullable bytes
//	    tagged fields: 0 DivergingEpoch {epoch int32, end_offset int64}
//	                   1 CurrentLeader {leader_id int32, leader_epoch int32}
//	                   2 SnapshotId {end_offset int64, epoch int32}
//	  tagged fields
//	tagged fields
//
// Parse checks the whole body once (every length within the bytes, every
// count bounded by the bytes left, every known tagged field exactly its
// size), so walking the topics and partitions after it cannot fail: the
// cursors (Topics, Partitions, AbortedTransactions) are values that
// re-read the checked bytes. A partition's Records are a sub-slice of the
// body: valid until the caller reuses the buffer.
//
// The fields and their defaults are those of kmsg.FetchResponse: an
// absent DivergingEpoch, CurrentLeader or SnapshotId reads -1 in each of
// its fields; unknown tagged fields are skipped (v16's NodeEndpoints,
// top-level tag 0, is not read: a v13 response does not carry it).
package fetchwire
