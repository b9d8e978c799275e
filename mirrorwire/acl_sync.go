package mirrorwire

import "github.com/twmb/franz-go/pkg/kbin"

// The ACL sync of a described mirror: mirrord's tag 3 of
// DescribeClusterMirrorsMirror (messages.go).

// DescribeClusterMirrorsACLSync is the last round of a mirror's ACL sync
// (KIP-1279).
type DescribeClusterMirrorsACLSync struct {
	// LastSyncMillis is when the last round ended, in Unix milliseconds;
	// -1 before the first round (or when the sync is off: ErrorMessage
	// says why).
	LastSyncMillis int64
	DurationMillis int64
	// ACLsSynced counts the source ACLs selected (acls.include) that this
	// node holds after the round.
	ACLsSynced int32
	// FailedRounds counts the rounds that failed since the mirror started.
	FailedRounds int64
	// ErrorMessage is the last round's failure, null when it succeeded.
	ErrorMessage *string
}

func (s *DescribeClusterMirrorsACLSync) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt64(dst, s.LastSyncMillis)
	dst = kbin.AppendInt64(dst, s.DurationMillis)
	dst = kbin.AppendInt32(dst, s.ACLsSynced)
	dst = kbin.AppendInt64(dst, s.FailedRounds)
	dst = kbin.AppendCompactNullableString(dst, s.ErrorMessage)
	return appendNoTags(dst)
}

func readACLSync(d *reader) *DescribeClusterMirrorsACLSync {
	s := &DescribeClusterMirrorsACLSync{LastSyncMillis: d.Int64(), DurationMillis: d.Int64()}
	s.ACLsSynced = d.Int32()
	s.FailedRounds = d.Int64()
	s.ErrorMessage = d.nullableString()
	d.skipTags()
	return s
}
