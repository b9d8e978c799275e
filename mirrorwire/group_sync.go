package mirrorwire

import "github.com/twmb/franz-go/pkg/kbin"

// The consumer group offset sync of a described mirror: mirrord's tag 2 of
// DescribeClusterMirrorsMirror (messages.go).

// DescribeClusterMirrorsGroupSync is the last round of a mirror's
// consumer group offset sync.
type DescribeClusterMirrorsGroupSync struct {
	// LastSyncMillis is when the last round ended, in Unix milliseconds;
	// -1 before the first round (the rest is then zero).
	LastSyncMillis int64
	DurationMillis int64
	// GroupsSynced counts the groups whose offsets are the source's
	// (clamped to what is mirrored); GroupsSkipped those left alone
	// because they have members on this node.
	GroupsSynced  int32
	GroupsSkipped int32
	// FailedRounds counts the rounds that failed since the mirror started.
	FailedRounds int64
	// ErrorMessage is the last round's failure, null when it succeeded.
	ErrorMessage *string
	// Groups are the groups synced and skipped, sorted by name.
	Groups []DescribeClusterMirrorsGroupSyncGroup
}

// DescribeClusterMirrorsGroupSyncGroup is one group of a group sync round.
type DescribeClusterMirrorsGroupSyncGroup struct {
	GroupID string
	// OffsetLag is the source's committed offsets minus the synced ones,
	// summed over the group's mirrored partitions; -1 for a group
	// skipped.
	OffsetLag int64
	// Skipped: the group has members on this node; not synced.
	Skipped bool
}

func (g *DescribeClusterMirrorsGroupSync) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt64(dst, g.LastSyncMillis)
	dst = kbin.AppendInt64(dst, g.DurationMillis)
	dst = kbin.AppendInt32(dst, g.GroupsSynced)
	dst = kbin.AppendInt32(dst, g.GroupsSkipped)
	dst = kbin.AppendInt64(dst, g.FailedRounds)
	dst = kbin.AppendCompactNullableString(dst, g.ErrorMessage)
	dst = appendArray(dst, g.Groups, func(dst []byte, group *DescribeClusterMirrorsGroupSyncGroup) []byte {
		dst = kbin.AppendCompactString(dst, group.GroupID)
		dst = kbin.AppendInt64(dst, group.OffsetLag)
		dst = kbin.AppendBool(dst, group.Skipped)
		return appendNoTags(dst)
	})
	return appendNoTags(dst)
}

func readGroupSync(d *reader) *DescribeClusterMirrorsGroupSync {
	g := &DescribeClusterMirrorsGroupSync{LastSyncMillis: d.Int64(), DurationMillis: d.Int64()}
	g.GroupsSynced = d.Int32()
	g.GroupsSkipped = d.Int32()
	g.FailedRounds = d.Int64()
	g.ErrorMessage = d.nullableString()
	g.Groups = readArray(d, 11, func(d *reader) DescribeClusterMirrorsGroupSyncGroup {
		group := DescribeClusterMirrorsGroupSyncGroup{GroupID: d.string(), OffsetLag: d.Int64(), Skipped: d.Bool()}
		d.skipTags()
		return group
	})
	d.skipTags()
	return g
}
