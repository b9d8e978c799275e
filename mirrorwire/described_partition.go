package mirrorwire

import "github.com/twmb/franz-go/pkg/kbin"

// One partition of a described mirror (DescribeClusterMirrorsTopic,
// messages.go): the prototype's fields, then mirrord's tagged ones.

// DescribeClusterMirrorsPartition is one partition's mirroring state.
// SourceOffset is the source high watermark, DestinationOffset the local
// log end offset, Lag their difference; -1 where unknown.
type DescribeClusterMirrorsPartition struct {
	PartitionIndex    int32
	StateValue        string
	ErrorMessage      *string
	RetryAttempt      int16 // -1: a failure that waits for recovery
	SourceOffset      int64
	DestinationOffset int64
	Lag               int64
	LastMirrorEpoch   int32
	LastMirrorOffset  int64
	// LagMillis (tag 0, mirrord's) is the lag in time: how long the
	// partition has not been caught up with the source; 0 when caught
	// up, -1 when unknown (absent on the wire).
	LagMillis int64
	// SourceOffsetAgeMillis (tag 1, mirrord's) is how long ago the source
	// last told SourceOffset; -1 when unknown (absent).
	SourceOffsetAgeMillis int64
	// LagLowerBound (tag 2, mirrord's) is, when SourceOffset is stale and
	// Lag therefore -1, the lag computed from it: the lag is at least
	// this. -1 (absent) otherwise.
	LagLowerBound int64
	// LeaderEpoch (tag 3, mirrord's) is the leader epoch of the local
	// log's last batch (a mirrored batch keeps the source's epoch); -1
	// (absent) when the log has none or is offline.
	LeaderEpoch int32
	// SourceLeaderEpoch (tag 4, mirrord's) is the source partition
	// leader's epoch as the mirror last learned it from the source's
	// metadata; -1 (absent) when unknown.
	SourceLeaderEpoch int32
	// Leader (tag 5, mirrord's) is the node ID of the partition's leader
	// on a mirrord cluster; -1 (absent) when it has none, on a node alone,
	// or from a server that does not know.
	Leader int32
	// ISR (tag 6, mirrord's) is the partition's in-sync replicas on a
	// mirrord cluster, as its metadata names them (never empty there);
	// nil (absent) on a node alone or from a server that does not know.
	ISR []int32
}

// Default sets the offsets, epochs and lag to -1 (unknown).
func (p *DescribeClusterMirrorsPartition) Default() {
	*p = DescribeClusterMirrorsPartition{SourceOffset: -1, DestinationOffset: -1, Lag: -1, LastMirrorEpoch: -1, LastMirrorOffset: -1,
		LagMillis: -1, SourceOffsetAgeMillis: -1, LagLowerBound: -1, LeaderEpoch: -1, SourceLeaderEpoch: -1, Leader: -1}
}

func appendDescribedPartition(dst []byte, p *DescribeClusterMirrorsPartition) []byte {
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	dst = kbin.AppendCompactString(dst, p.StateValue)
	dst = kbin.AppendCompactNullableString(dst, p.ErrorMessage)
	dst = kbin.AppendInt16(dst, p.RetryAttempt)
	dst = kbin.AppendInt64(dst, p.SourceOffset)
	dst = kbin.AppendInt64(dst, p.DestinationOffset)
	dst = kbin.AppendInt64(dst, p.Lag)
	dst = kbin.AppendInt32(dst, p.LastMirrorEpoch)
	dst = kbin.AppendInt64(dst, p.LastMirrorOffset)
	dst = kbin.AppendUvarint(dst, countTrue(p.LagMillis >= 0, p.SourceOffsetAgeMillis >= 0, p.LagLowerBound >= 0, p.LeaderEpoch >= 0, p.SourceLeaderEpoch >= 0,
		p.Leader >= 0, len(p.ISR) > 0))
	if p.LagMillis >= 0 {
		dst = appendTag(dst, 0, func(dst []byte) []byte { return kbin.AppendInt64(dst, p.LagMillis) })
	}
	if p.SourceOffsetAgeMillis >= 0 {
		dst = appendTag(dst, 1, func(dst []byte) []byte { return kbin.AppendInt64(dst, p.SourceOffsetAgeMillis) })
	}
	if p.LagLowerBound >= 0 {
		dst = appendTag(dst, 2, func(dst []byte) []byte { return kbin.AppendInt64(dst, p.LagLowerBound) })
	}
	if p.LeaderEpoch >= 0 {
		dst = appendTag(dst, 3, func(dst []byte) []byte { return kbin.AppendInt32(dst, p.LeaderEpoch) })
	}
	if p.SourceLeaderEpoch >= 0 {
		dst = appendTag(dst, 4, func(dst []byte) []byte { return kbin.AppendInt32(dst, p.SourceLeaderEpoch) })
	}
	if p.Leader >= 0 {
		dst = appendTag(dst, 5, func(dst []byte) []byte { return kbin.AppendInt32(dst, p.Leader) })
	}
	if len(p.ISR) > 0 {
		dst = appendTag(dst, 6, func(dst []byte) []byte {
			return appendArray(dst, p.ISR, func(dst []byte, id *int32) []byte { return kbin.AppendInt32(dst, *id) })
		})
	}
	return dst
}

func readDescribedPartition(d *reader) DescribeClusterMirrorsPartition {
	p := DescribeClusterMirrorsPartition{PartitionIndex: d.Int32(), StateValue: d.string(), ErrorMessage: d.nullableString()}
	p.RetryAttempt = d.Int16()
	p.SourceOffset = d.Int64()
	p.DestinationOffset = d.Int64()
	p.Lag = d.Int64()
	p.LastMirrorEpoch = d.Int32()
	p.LastMirrorOffset = d.Int64()
	p.LagMillis, p.SourceOffsetAgeMillis, p.LagLowerBound, p.LeaderEpoch, p.SourceLeaderEpoch, p.Leader = -1, -1, -1, -1, -1, -1
	d.tags(func(tag uint32, v *reader) bool {
		switch tag { // any negative value means unknown
		case 0:
			p.LagMillis = max(v.Int64(), -1)
		case 1:
			p.SourceOffsetAgeMillis = max(v.Int64(), -1)
		case 2:
			p.LagLowerBound = max(v.Int64(), -1)
		case 3:
			p.LeaderEpoch = max(v.Int32(), -1)
		case 4:
			p.SourceLeaderEpoch = max(v.Int32(), -1)
		case 5:
			p.Leader = max(v.Int32(), -1)
		case 6:
			p.ISR = readArray(v, 4, func(d *reader) int32 { return d.Int32() })
		default:
			return false
		}
		return true
	})
	return p
}
