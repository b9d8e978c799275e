package netio

import (
	"context"
	"time"

	"github.com/mirrord/mirrord/mirrorwire"
)

// MirrorBackend is a Backend that administers mirrors. The server answers
// the mirror admin RPCs (mirrorwire) and advertises them in
// ApiVersions only when its Backend implements MirrorBackend; to any other
// Backend they are unknown keys.
type MirrorBackend interface {
	Mirrors() MirrorAdmin
}

// MirrorAdmin is the engine's mirror administration, in the terms of the
// mirror admin RPCs (1000_mirror_admin.go turns requests into these calls
// and their results into responses).
//
// Errors: return the kerr errors of github.com/twmb/franz-go/pkg/kerr where
// Kafka has a code, wrapped with a message for the operator if useful
// (fmt.Errorf("unknown mirror config %q: %w", key, kerr.InvalidConfig));
// the message reaches the client. The codes to use:
//
//	kerr.InvalidConfig            a mirror config key that is unknown, a bad value, no bootstrap.servers
//	kerr.InvalidRequest           a bad mirror name; a change the topic's state does not allow
//	kerr.DuplicateResource        CreateMirror of a name that exists
//	kerr.ResourceNotFound         a mirror name that is no mirror
//	kerr.UnknownTopicOrPartition  a topic named that is not (and cannot be) in the mirror
//	kerr.UnknownTopicID           a topic ID a last-mirror-epoch lookup names that is unknown
//	kerr.InvalidRegularExpression an include or exclude pattern that does not compile
//
// Any other error is answered UNKNOWN_SERVER_ERROR, with its text, and
// logged.
type MirrorAdmin interface {
	// CreateMirror creates a mirror whose source cluster config holds
	// the mirror config keys of DESIGN.md (bootstrap.servers required),
	// as the operator wrote them; the engine validates them.
	CreateMirror(ctx context.Context, name string, config map[string]string) error
	// DeleteMirror deletes a mirror. The engine decides whether a mirror
	// whose topics are not all STOPPED may go (kerr.InvalidRequest if not).
	DeleteMirror(ctx context.Context, name string) error
	// SetTopicsDesiredState applies change to the topics of mirror that
	// topics selects, and answers each topic it names or matches, sorted
	// by name. The desired state is persisted before it returns; the
	// partitions walk to it afterwards, except for StopMirroring, which
	// returns once each partition is STOPPED (writable) or has failed,
	// its error in the topic's result. A failure of the whole request
	// (an unknown mirror) is the error, and the results are ignored.
	SetTopicsDesiredState(ctx context.Context, mirror string, change TopicsChange, topics TopicSelection) ([]TopicResult, error)
	// ListMirrors lists every mirror, sorted by name.
	ListMirrors(ctx context.Context) ([]MirrorListing, error)
	// DescribeMirrors describes the named mirrors in the order named, one
	// description each (Err kerr.ResourceNotFound for a name that is no
	// mirror), or every mirror, sorted by name, when names is nil.
	// failedOnly keeps only the FAILED partitions.
	DescribeMirrors(ctx context.Context, names []string, failedOnly bool) ([]MirrorDescription, error)
	// LastMirrorEpochs answers a failback lookup from the cluster
	// askingClusterID: for each partition asked, the last mirror epoch
	// and offset this node stored when it stopped mirroring that
	// partition from askingClusterID, or -1 and -1 when it stored none.
	// One answer per partition asked, in the order asked.
	LastMirrorEpochs(ctx context.Context, askingClusterID string, partitions []TopicPartitions) ([]LastMirrorEpoch, error)
}

// TopicsChange is what a topic-state RPC asks of a mirror's topics; the
// wire package defines it, as each change has its own key.
type TopicsChange = mirrorwire.TopicsChange

// The changes (mirrorwire documents each).
const (
	StartMirroring   = mirrorwire.StartMirroring
	StopMirroring    = mirrorwire.StopMirroring
	PauseMirroring   = mirrorwire.PauseMirroring
	ResumeMirroring  = mirrorwire.ResumeMirroring
	RecoverMirroring = mirrorwire.RecoverMirroring
)

// TopicSelection selects a mirror's topics: the topics named, and the
// topics whose whole name one of Include matches, less those whose whole
// name one of Exclude matches (Exclude wins, over names too). The
// patterns are regular expressions as in the mirror config's
// topics.include; a StartMirroring selection also extends the mirror's
// own include and exclude lists, so topics created later on the source
// are mirrored as well.
type TopicSelection struct {
	Names   []string
	Include []string
	Exclude []string
}

// TopicResult is the outcome of a topic-state change for one topic.
type TopicResult struct {
	Topic string
	Err   error
}

// MirrorListing is one mirror as ListClusterMirrors shows it.
type MirrorListing struct {
	Name            string
	SourceBootstrap string   // the bootstrap.servers of its config
	SourceClusterID string   // "" until the source has been reached
	Topics          []string // the mirror's topics, sorted
}

// MirrorDescription is one mirror as DescribeClusterMirrors shows it.
type MirrorDescription struct {
	Name            string
	SourceBootstrap string
	SourceClusterID string
	// Err is set for a mirror that cannot be described (a name that is
	// no mirror: kerr.ResourceNotFound); the rest is then empty.
	Err error
	// SourceUnreachableSince is when the source stopped answering, zero
	// while it answers; SourceError is the latest failure's text.
	SourceUnreachableSince time.Time
	SourceError            string
	// Partitions are sorted by topic, then partition.
	Partitions []MirrorPartitionStatus
	// GroupSync is the consumer group offset sync's last round, nil when
	// the mirror reports none.
	GroupSync *MirrorGroupSync
	// ACLSync is the ACL sync's last round, nil when the mirror reports
	// none.
	ACLSync *MirrorACLSync
}

// MirrorACLSync is the last round of a mirror's ACL sync (KIP-1279).
type MirrorACLSync struct {
	// At is when the last round ended, zero before the first (or while
	// the sync is off: Error says why); Duration is how long it took.
	At       time.Time
	Duration time.Duration
	// Synced counts the source ACLs selected that this node holds.
	Synced int
	// FailedRounds counts the rounds that failed since the mirror
	// started; Error is the last round's failure, "" when it succeeded.
	FailedRounds int64
	Error        string
}

// MirrorGroupSync is the last round of a mirror's consumer group offset
// sync (KIP-1279).
type MirrorGroupSync struct {
	// At is when the last round ended, zero before the first; Duration
	// is how long it took.
	At       time.Time
	Duration time.Duration
	// Synced counts the groups whose offsets are the source's (clamped to
	// what is mirrored), Skipped those with members on this node.
	Synced, Skipped int
	// FailedRounds counts the rounds that failed since the mirror started;
	// Error is the last round's failure, "" when it succeeded.
	FailedRounds int64
	Error        string
	// Groups are the groups synced and skipped, sorted by name.
	Groups []MirrorGroupSyncGroup
}

// MirrorGroupSyncGroup is one group of a group sync round.
type MirrorGroupSyncGroup struct {
	Group string
	// OffsetLag is the source's committed offsets minus the synced ones,
	// summed over the group's mirrored partitions: what a consumer moved
	// here would read again. -1 for a group skipped.
	OffsetLag int64
	// Skipped: the group has members on this node and was not synced.
	Skipped bool
}

// MirrorPartitionStatus is the state of one mirrored partition.
type MirrorPartitionStatus struct {
	Topic     string
	Partition int32
	// State is the partition state's name: LOG_ALIGNMENT, EPOCH_FENCING,
	// ULE_RECOVERY, MIRRORING, PAUSING, PAUSED, STOPPING, STOPPED, FAILED
	// or UNKNOWN.
	State string
	// Error is the failure's text in FAILED, else "".
	Error string
	// RetryCount is the attempts made in FAILED, 0 when not failed, -1
	// for a failure that waits for RecoverMirroring.
	RetryCount int16
	// SourceHighWatermark is the source partition's high watermark as
	// last learned, -1 when unknown; SourceHighWatermarkAge is its age,
	// -1 when unknown.
	SourceHighWatermark    int64
	SourceHighWatermarkAge time.Duration
	// Stale: SourceHighWatermark is older than the mirror's staleness
	// bound, so the lag computed from it is only a lower bound.
	Stale bool
	// LogEndOffset is the local log end offset, -1 when unknown.
	LogEndOffset int64
	// LastMirrorEpoch and LastMirrorOffset are the last mirror epoch and
	// offset stored at the last stop, -1 when none.
	LastMirrorEpoch  int32
	LastMirrorOffset int64
	// LagTime is how long the partition has not been caught up with the
	// source (0 when caught up), -1 when unknown.
	LagTime time.Duration
	// LeaderEpoch is the leader epoch of the local log's last batch (a
	// mirrored batch keeps the source's), -1 when none or offline;
	// SourceLeaderEpoch is the source partition leader's epoch as last
	// learned, -1 when unknown.
	LeaderEpoch, SourceLeaderEpoch int32
	// Leader is the node leading the partition on a mirrord cluster, -1
	// when it has none (offline) or is unknown; ISR its in-sync replicas
	// as the cluster's metadata names them, never empty on a cluster
	// (Kafka's rule: a leader that goes stays the last member). A node
	// alone sets no ISR (nil), and Leader means nothing without one: the
	// wire carries Leader only beside an ISR.
	Leader int32
	ISR    []int32
}

// Lag is how far the local log is behind the source: source high
// watermark - local log end offset, never below 0; -1 when either is
// unknown or the source high watermark is stale (LagAtLeast is then what
// is known).
func (s MirrorPartitionStatus) Lag() int64 {
	if s.Stale {
		return -1
	}
	return s.LagAtLeast()
}

// LagAtLeast is a lower bound of the lag: Lag, or for a stale source high
// watermark the lag computed from it; -1 when unknown.
func (s MirrorPartitionStatus) LagAtLeast() int64 {
	if s.SourceHighWatermark < 0 || s.LogEndOffset < 0 {
		return -1
	}
	return max(s.SourceHighWatermark-s.LogEndOffset, 0)
}

// TopicPartitions names partitions of a topic by its ID.
type TopicPartitions struct {
	TopicID    TopicID
	Partitions []int32
}

// LastMirrorEpoch is a failback lookup's answer for one partition.
type LastMirrorEpoch struct {
	TopicID   TopicID
	Partition int32
	Epoch     int32 // -1: none stored
	Offset    int64 // -1: none stored
	Err       error
}
