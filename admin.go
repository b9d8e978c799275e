package mirrord

import (
	"context"

	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/netio"
)

// Admin is the mirror administration, the same whether the node is in
// this process (Node.Admin) or reached over the network (Dial).
type Admin interface {
	// CreateMirror creates a mirror whose source cluster config holds
	// the mirror config keys (bootstrap.servers required, plus the
	// client's security settings and mirrord's mirror.* keys), as an
	// operator writes them in a mirror.properties.
	CreateMirror(ctx context.Context, name string, config map[string]string) error
	// DeleteMirror deletes a mirror; one whose topics are not all
	// STOPPED may be refused.
	DeleteMirror(ctx context.Context, name string) error
	// SetTopicsDesiredState applies change (StartMirroring,
	// StopMirroring, PauseMirroring, ResumeMirroring, RecoverMirroring)
	// to the topics of mirror that topics selects, and answers each
	// topic it names or matches, sorted by name, with its own error. The
	// desired state is persisted before it returns; the partitions walk
	// to it afterwards, except for StopMirroring, which returns once each
	// partition is STOPPED (writable) or has failed. A failure of the
	// whole request (an unknown mirror) is the error.
	SetTopicsDesiredState(ctx context.Context, mirror string, change TopicsChange, topics TopicSelection) ([]TopicResult, error)
	// ListMirrors lists every mirror, sorted by name.
	ListMirrors(ctx context.Context) ([]MirrorListing, error)
	// DescribeMirrors describes the named mirrors in the order named (an
	// unknown name has its Err set), or every mirror, sorted by name,
	// when names is nil; failedOnly keeps only FAILED partitions.
	DescribeMirrors(ctx context.Context, names []string, failedOnly bool) ([]MirrorDescription, error)
}

// The types of the mirror administration.
type (
	// TopicsChange is the change SetTopicsDesiredState makes.
	TopicsChange = netio.TopicsChange
	// TopicSelection selects topics by name (Names) or by regular
	// expressions (Include, Exclude).
	TopicSelection = netio.TopicSelection
	// TopicResult is one topic's answer to SetTopicsDesiredState.
	TopicResult = netio.TopicResult
	// MirrorListing is one mirror of ListMirrors.
	MirrorListing = netio.MirrorListing
	// MirrorDescription is one mirror of DescribeMirrors: its source,
	// its partitions with their state and offsets, its syncs.
	MirrorDescription = netio.MirrorDescription
)

// The changes of SetTopicsDesiredState.
const (
	// StartMirroring starts mirroring the topics (creating them).
	StartMirroring = netio.StartMirroring
	// StopMirroring stops mirroring: the topics become writable at the
	// offsets the source had (the failover).
	StopMirroring = netio.StopMirroring
	// PauseMirroring pauses mirroring; the topics stay read-only.
	PauseMirroring = netio.PauseMirroring
	// ResumeMirroring resumes paused topics.
	ResumeMirroring = netio.ResumeMirroring
	// RecoverMirroring retries FAILED partitions.
	RecoverMirroring = netio.RecoverMirroring
)

// PartitionState is a mirrored partition's state, the state machine of
// DESIGN.md; a MirrorDescription's partitions carry it by name
// (ParsePartitionState reads it), a MirrorReport's as this type.
type PartitionState = mirrorstate.State

// The partition states an embedder waits for.
const (
	// Mirroring: the partition copies the source's batches.
	Mirroring = mirrorstate.Mirroring
	// Paused: mirroring is paused; the partition stays read-only.
	Paused = mirrorstate.Paused
	// Stopped: the partition is writable (StopMirroring completed).
	Stopped = mirrorstate.Stopped
	// Failed: the partition stopped on an error (RecoverMirroring
	// retries it).
	Failed = mirrorstate.Failed
)

// ParsePartitionState reads a state's name ("MIRRORING"); ok is false
// for a name that is no state.
func ParsePartitionState(name string) (state PartitionState, ok bool) {
	return mirrorstate.ParseState(name)
}

// The node's reports.
type (
	// MirrorReport is a mirror and its partitions as /metrics shows
	// them: state, lag in records and in time, bytes mirrored, and the
	// last round of each sync.
	MirrorReport = engine.MirrorReport
	// MirrorPartitionReport is one partition of a MirrorReport.
	MirrorPartitionReport = engine.MirrorPartitionReport
	// GroupSyncStatus is the consumer group offset sync's last round.
	GroupSyncStatus = engine.GroupSyncStatus
	// ClusterInfo is the node's cluster ID, node ID and address.
	ClusterInfo = netio.ClusterInfo
	// OfflineLog is a partition the node could not open, with the error.
	OfflineLog = netio.OfflineLog
	// LogDirSpace is the data directory's free space and its reserve
	// (log.dir.reserve.bytes).
	LogDirSpace = engine.LogDirSpace
	// Offsets are a partition's logStartOffset, highWatermark,
	// lastStableOffset and logEndOffset.
	Offsets = netio.Offsets
)
