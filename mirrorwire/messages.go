package mirrorwire

// The mirror admin messages: the requests and responses of the RPCs in
// keys.go, as kmsg.Request and kmsg.Response so that a franz-go
// client sends them with client.Request (configured with
// netio.MirrorClientVersions). Every message is version 0 only and flexible;
// codec.go holds the encoding.
//
// The schemas follow KIP-1279 as the KIP author's prototype branch
// (github.com/showuon/kafka, clients/src/main/resources/common/message,
// *ClusterMirror*.json and *MirrorTopics*.json) defines them, field for
// field and in order; the KIP's wiki page itself was not at hand, and the
// prototype's files changed between revisions (the latest seen is
// followed). The deviations:
//
//   - Keys are private (1000+, keys.go); upstream has none yet.
//   - The five topic-state RPCs (Start, Stop, Pause, Resume, Recover
//     MirrorTopics) share one request and one response shape, the Go
//     types MirrorTopicsRequest and MirrorTopicsResponse, whose Change
//     field picks the key. Upstream's differ:
//     Start carries only include patterns (exclude patterns as tag 0) and
//     a TimeoutMs, Stop topic names and patterns (tag 0), Pause, Resume
//     and Recover only topic names, and Start's response has no per-topic
//     results. Here every one carries MirrorName, Topics (names),
//     IncludePatterns and ExcludePatterns as plain fields and answers
//     per topic. TimeoutMs is dropped: the desired state is persisted
//     before the answer and partitions walk to it afterwards.
//   - StateOffset (Stop, Pause, Resume, DeleteClusterMirror) is dropped:
//     it fences against the KRaft metadata log, which mirrord has not.
//   - CreateClusterMirror's config array is named Config upstream;
//     Configs here (the wire is the same).
//   - DescribeClusterMirrorsRequest keeps upstream's tags ClusterId (0)
//     and LastMirrorEpochLookups (1) and adds FailedOnly (tag 2, ours):
//     only FAILED partitions are described.
//   - DescribeClusterMirrorsResponse: a partition carries Lag after
//     DestinationOffset (as an earlier prototype revision did), and the
//     lookups are answered in a new tagged field, LastMirrorEpochs (tag
//     0, ours), by topic ID and partition with an error code each.
//     Upstream answers them inside Mirrors (by topic name, the maximum
//     over the mirrors); an answer by ID cannot confuse a topic with a
//     later one of the same name. OfflinePartitions (tag 1, ours) lists
//     the node's partitions whose log could not be opened.
//   - Also mirrord's, as tagged fields (absent: unknown or none, so older
//     clients read the same answer): a mirror carries
//     SourceUnreachableSinceMillis (tag 0), SourceError (tag 1) and
//     GroupSync (tag 2: the consumer group offset sync's last round;
//     absent from a server that has none), ACLSync (tag 3: the ACL
//     sync's, likewise); a partition carries LagMillis (tag 0), SourceOffsetAgeMillis (tag 1),
//     LagLowerBound (tag 2), LeaderEpoch (tag 3: the local log's latest
//     leader epoch) and SourceLeaderEpoch (tag 4: the source partition
//     leader's epoch as last learned), Leader (tag 5: the node leading the
//     partition on a mirrord cluster) and ISR (tag 6: its in-sync
//     replicas there; both absent from a node alone). A partition whose SourceOffset is older
//     than the mirror's staleness bound answers Lag -1 (an older client
//     shows it unknown rather than too small) and LagLowerBound.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// version is the version part of every mirror message.
type version struct {
	Version int16
}

func (*version) MaxVersion() int16          { return MaxVersion }
func (v *version) SetVersion(version int16) { v.Version = version }
func (v *version) GetVersion() int16        { return v.Version }
func (*version) IsFlexible() bool           { return true }

// ErrorHead opens every mirror response: throttle time, top-level
// error code and message.
type ErrorHead struct {
	ThrottleMillis int32
	ErrorCode      int16
	ErrorMessage   *string
}

func (h *ErrorHead) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, h.ThrottleMillis)
	dst = kbin.AppendInt16(dst, h.ErrorCode)
	return kbin.AppendCompactNullableString(dst, h.ErrorMessage)
}

func (h *ErrorHead) read(r *reader) {
	h.ThrottleMillis = r.Int32()
	h.ErrorCode = r.Int16()
	h.ErrorMessage = r.nullableString()
}

// CreateClusterMirrorRequest creates a mirror from a source cluster
// config (Kafka's names: bootstrap.servers, ...).
type CreateClusterMirrorRequest struct {
	version
	MirrorName string
	Configs    []CreateClusterMirrorConfig
}

// CreateClusterMirrorConfig is one mirror config key and value.
type CreateClusterMirrorConfig struct {
	Name  string
	Value *string
}

func (*CreateClusterMirrorRequest) Key() int16 { return CreateClusterMirrorKey }
func (r *CreateClusterMirrorRequest) Default() {
	*r = CreateClusterMirrorRequest{version: r.version}
}
func (r *CreateClusterMirrorRequest) ResponseKind() kmsg.Response {
	return &CreateClusterMirrorResponse{version: r.version}
}

func (r *CreateClusterMirrorRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, r.MirrorName)
	dst = appendArray(dst, r.Configs, func(dst []byte, c *CreateClusterMirrorConfig) []byte {
		dst = kbin.AppendCompactString(dst, c.Name)
		dst = kbin.AppendCompactNullableString(dst, c.Value)
		return appendNoTags(dst)
	})
	return appendNoTags(dst)
}

func (r *CreateClusterMirrorRequest) ReadFrom(src []byte) error {
	d := newReader(src)
	m := CreateClusterMirrorRequest{version: r.version}
	m.MirrorName = d.string()
	m.Configs = readArray(&d, 3, func(d *reader) CreateClusterMirrorConfig {
		c := CreateClusterMirrorConfig{Name: d.string(), Value: d.nullableString()}
		d.skipTags()
		return c
	})
	d.skipTags()
	*r = m
	return d.complete()
}

// CreateClusterMirrorResponse answers CreateClusterMirror.
type CreateClusterMirrorResponse struct {
	version
	ErrorHead
}

func (*CreateClusterMirrorResponse) Key() int16 { return CreateClusterMirrorKey }
func (r *CreateClusterMirrorResponse) Default() {
	*r = CreateClusterMirrorResponse{version: r.version}
}
func (r *CreateClusterMirrorResponse) RequestKind() kmsg.Request {
	return &CreateClusterMirrorRequest{version: r.version}
}

func (r *CreateClusterMirrorResponse) AppendTo(dst []byte) []byte {
	dst = r.ErrorHead.appendTo(dst)
	return appendNoTags(dst)
}

func (r *CreateClusterMirrorResponse) ReadFrom(src []byte) error {
	d := newReader(src)
	m := CreateClusterMirrorResponse{version: r.version}
	m.ErrorHead.read(&d)
	d.skipTags()
	*r = m
	return d.complete()
}

// DeleteClusterMirrorRequest deletes a mirror.
type DeleteClusterMirrorRequest struct {
	version
	MirrorName string
}

func (*DeleteClusterMirrorRequest) Key() int16 { return DeleteClusterMirrorKey }
func (r *DeleteClusterMirrorRequest) Default() {
	*r = DeleteClusterMirrorRequest{version: r.version}
}
func (r *DeleteClusterMirrorRequest) ResponseKind() kmsg.Response {
	return &DeleteClusterMirrorResponse{version: r.version}
}

func (r *DeleteClusterMirrorRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, r.MirrorName)
	return appendNoTags(dst)
}

func (r *DeleteClusterMirrorRequest) ReadFrom(src []byte) error {
	d := newReader(src)
	m := DeleteClusterMirrorRequest{version: r.version}
	m.MirrorName = d.string()
	d.skipTags()
	*r = m
	return d.complete()
}

// DeleteClusterMirrorResponse answers DeleteClusterMirror.
type DeleteClusterMirrorResponse struct {
	version
	ErrorHead
}

func (*DeleteClusterMirrorResponse) Key() int16 { return DeleteClusterMirrorKey }
func (r *DeleteClusterMirrorResponse) Default() {
	*r = DeleteClusterMirrorResponse{version: r.version}
}
func (r *DeleteClusterMirrorResponse) RequestKind() kmsg.Request {
	return &DeleteClusterMirrorRequest{version: r.version}
}

func (r *DeleteClusterMirrorResponse) AppendTo(dst []byte) []byte {
	dst = r.ErrorHead.appendTo(dst)
	return appendNoTags(dst)
}

func (r *DeleteClusterMirrorResponse) ReadFrom(src []byte) error {
	d := newReader(src)
	m := DeleteClusterMirrorResponse{version: r.version}
	m.ErrorHead.read(&d)
	d.skipTags()
	*r = m
	return d.complete()
}

// MirrorTopicsRequest is StartMirrorTopics, StopMirrorTopics,
// PauseMirrorTopics, ResumeMirrorTopics or RecoverMirrorTopics, as Change
// says (Change is not on the wire: the key carries it). It selects topics
// of MirrorName by name and by pattern (TopicSelection).
type MirrorTopicsRequest struct {
	version
	Change          TopicsChange
	MirrorName      string
	Topics          []MirrorTopicsRequestTopic
	IncludePatterns []string
	ExcludePatterns []string
}

// MirrorTopicsRequestTopic names one topic.
type MirrorTopicsRequestTopic struct {
	TopicName string
}

// Key returns the key of the request's Change, or -1 when Change is unset.
func (r *MirrorTopicsRequest) Key() int16 {
	return r.Change.Key()
}

func (r *MirrorTopicsRequest) Default() {
	*r = MirrorTopicsRequest{version: r.version, Change: r.Change}
}
func (r *MirrorTopicsRequest) ResponseKind() kmsg.Response {
	return &MirrorTopicsResponse{version: r.version, Change: r.Change}
}

func (r *MirrorTopicsRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, r.MirrorName)
	dst = appendArray(dst, r.Topics, func(dst []byte, t *MirrorTopicsRequestTopic) []byte {
		dst = kbin.AppendCompactString(dst, t.TopicName)
		return appendNoTags(dst)
	})
	dst = appendStrings(dst, r.IncludePatterns)
	dst = appendStrings(dst, r.ExcludePatterns)
	return appendNoTags(dst)
}

func (r *MirrorTopicsRequest) ReadFrom(src []byte) error {
	d := newReader(src)
	m := MirrorTopicsRequest{version: r.version, Change: r.Change}
	m.MirrorName = d.string()
	m.Topics = readArray(&d, 2, func(d *reader) MirrorTopicsRequestTopic {
		t := MirrorTopicsRequestTopic{TopicName: d.string()}
		d.skipTags()
		return t
	})
	m.IncludePatterns = d.strings()
	m.ExcludePatterns = d.strings()
	d.skipTags()
	*r = m
	return d.complete()
}

// MirrorTopicsResponse answers a MirrorTopicsRequest: a top-level error
// (the mirror) and one result per topic named or matched.
type MirrorTopicsResponse struct {
	version
	Change TopicsChange
	ErrorHead
	Topics []MirrorTopicsResponseTopic
}

// MirrorTopicsResponseTopic is the result for one topic.
type MirrorTopicsResponseTopic struct {
	TopicName    string
	ErrorCode    int16
	ErrorMessage *string
}

// Key returns the key of the response's Change, or -1 when Change is unset.
func (r *MirrorTopicsResponse) Key() int16 {
	return r.Change.Key()
}

func (r *MirrorTopicsResponse) Default() {
	*r = MirrorTopicsResponse{version: r.version, Change: r.Change}
}
func (r *MirrorTopicsResponse) RequestKind() kmsg.Request {
	return &MirrorTopicsRequest{version: r.version, Change: r.Change}
}

func (r *MirrorTopicsResponse) AppendTo(dst []byte) []byte {
	dst = r.ErrorHead.appendTo(dst)
	dst = appendArray(dst, r.Topics, func(dst []byte, t *MirrorTopicsResponseTopic) []byte {
		dst = kbin.AppendCompactString(dst, t.TopicName)
		dst = kbin.AppendInt16(dst, t.ErrorCode)
		dst = kbin.AppendCompactNullableString(dst, t.ErrorMessage)
		return appendNoTags(dst)
	})
	return appendNoTags(dst)
}

func (r *MirrorTopicsResponse) ReadFrom(src []byte) error {
	d := newReader(src)
	m := MirrorTopicsResponse{version: r.version, Change: r.Change}
	m.ErrorHead.read(&d)
	m.Topics = readArray(&d, 5, func(d *reader) MirrorTopicsResponseTopic {
		t := MirrorTopicsResponseTopic{TopicName: d.string(), ErrorCode: d.Int16(), ErrorMessage: d.nullableString()}
		d.skipTags()
		return t
	})
	d.skipTags()
	*r = m
	return d.complete()
}

// ListClusterMirrorsRequest lists the mirrors.
type ListClusterMirrorsRequest struct {
	version
	IncludeTopicNames bool
}

func (*ListClusterMirrorsRequest) Key() int16 { return ListClusterMirrorsKey }
func (r *ListClusterMirrorsRequest) Default() {
	*r = ListClusterMirrorsRequest{version: r.version}
}
func (r *ListClusterMirrorsRequest) ResponseKind() kmsg.Response {
	return &ListClusterMirrorsResponse{version: r.version}
}

func (r *ListClusterMirrorsRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendBool(dst, r.IncludeTopicNames)
	return appendNoTags(dst)
}

func (r *ListClusterMirrorsRequest) ReadFrom(src []byte) error {
	d := newReader(src)
	m := ListClusterMirrorsRequest{version: r.version}
	m.IncludeTopicNames = d.Bool()
	d.skipTags()
	*r = m
	return d.complete()
}

// ListClusterMirrorsResponse answers ListClusterMirrors.
type ListClusterMirrorsResponse struct {
	version
	ErrorHead
	Mirrors []ListClusterMirrorsResponseMirror
}

// ListClusterMirrorsResponseMirror is one mirror listed.
type ListClusterMirrorsResponseMirror struct {
	MirrorName      string
	SourceBootstrap string
	SourceClusterID string // "" until resolved
	TopicCount      int32
	TopicNames      []string // nil unless IncludeTopicNames
}

func (*ListClusterMirrorsResponse) Key() int16 { return ListClusterMirrorsKey }
func (r *ListClusterMirrorsResponse) Default() {
	*r = ListClusterMirrorsResponse{version: r.version}
}
func (r *ListClusterMirrorsResponse) RequestKind() kmsg.Request {
	return &ListClusterMirrorsRequest{version: r.version}
}

func (r *ListClusterMirrorsResponse) AppendTo(dst []byte) []byte {
	dst = r.ErrorHead.appendTo(dst)
	dst = appendArray(dst, r.Mirrors, func(dst []byte, m *ListClusterMirrorsResponseMirror) []byte {
		dst = kbin.AppendCompactString(dst, m.MirrorName)
		dst = kbin.AppendCompactString(dst, m.SourceBootstrap)
		dst = kbin.AppendCompactString(dst, m.SourceClusterID)
		dst = kbin.AppendInt32(dst, m.TopicCount)
		dst = appendNullableStrings(dst, m.TopicNames)
		return appendNoTags(dst)
	})
	return appendNoTags(dst)
}

func (r *ListClusterMirrorsResponse) ReadFrom(src []byte) error {
	d := newReader(src)
	m := ListClusterMirrorsResponse{version: r.version}
	m.ErrorHead.read(&d)
	m.Mirrors = readArray(&d, 9, func(d *reader) ListClusterMirrorsResponseMirror {
		l := ListClusterMirrorsResponseMirror{MirrorName: d.string(), SourceBootstrap: d.string(), SourceClusterID: d.string()}
		l.TopicCount = d.Int32()
		l.TopicNames = d.nullableStrings()
		d.skipTags()
		return l
	})
	d.skipTags()
	*r = m
	return d.complete()
}

// AuthorizedOperationsUnknown is Kafka's AuthorizedOperations default:
// not requested.
const AuthorizedOperationsUnknown = math.MinInt32

// DescribeClusterMirrorsRequest describes mirrors down to their
// partitions, and answers failback's last-mirror-epoch lookups.
type DescribeClusterMirrorsRequest struct {
	version
	// MirrorNames are the mirrors to describe: nil for every mirror, an
	// empty list for none (a request that only looks up epochs).
	MirrorNames                 []string
	IncludeAuthorizedOperations bool
	// ClusterID (tag 0) is the asking cluster's ID, required with
	// LastMirrorEpochLookups.
	ClusterID *string
	// LastMirrorEpochLookups (tag 1) are the partitions whose last
	// mirror epoch the asking cluster wants.
	LastMirrorEpochLookups []DescribeClusterMirrorsLookup
	// FailedOnly (tag 2, mirrord's) keeps only FAILED partitions.
	FailedOnly bool
}

// DescribeClusterMirrorsLookup names partitions of a topic by its ID.
type DescribeClusterMirrorsLookup struct {
	TopicID    [16]byte
	Partitions []int32
}

func (*DescribeClusterMirrorsRequest) Key() int16 { return DescribeClusterMirrorsKey }
func (r *DescribeClusterMirrorsRequest) Default() {
	*r = DescribeClusterMirrorsRequest{version: r.version}
}
func (r *DescribeClusterMirrorsRequest) ResponseKind() kmsg.Response {
	return &DescribeClusterMirrorsResponse{version: r.version}
}

func (r *DescribeClusterMirrorsRequest) AppendTo(dst []byte) []byte {
	dst = appendNullableStrings(dst, r.MirrorNames)
	dst = kbin.AppendBool(dst, r.IncludeAuthorizedOperations)
	dst = kbin.AppendUvarint(dst, countTrue(r.ClusterID != nil, len(r.LastMirrorEpochLookups) > 0, r.FailedOnly))
	if r.ClusterID != nil {
		dst = appendTag(dst, 0, func(dst []byte) []byte { return kbin.AppendCompactNullableString(dst, r.ClusterID) })
	}
	if len(r.LastMirrorEpochLookups) > 0 {
		dst = appendTag(dst, 1, func(dst []byte) []byte {
			return appendArray(dst, r.LastMirrorEpochLookups, func(dst []byte, l *DescribeClusterMirrorsLookup) []byte {
				dst = kbin.AppendUuid(dst, l.TopicID)
				dst = appendArray(dst, l.Partitions, func(dst []byte, p *int32) []byte { return kbin.AppendInt32(dst, *p) })
				return appendNoTags(dst)
			})
		})
	}
	if r.FailedOnly {
		dst = appendTag(dst, 2, func(dst []byte) []byte { return kbin.AppendBool(dst, true) })
	}
	return dst
}

func (r *DescribeClusterMirrorsRequest) ReadFrom(src []byte) error {
	d := newReader(src)
	m := DescribeClusterMirrorsRequest{version: r.version}
	m.MirrorNames = d.nullableStrings()
	m.IncludeAuthorizedOperations = d.Bool()
	d.tags(func(tag uint32, v *reader) bool {
		switch tag {
		case 0:
			m.ClusterID = v.nullableString()
		case 1:
			m.LastMirrorEpochLookups = readArray(v, 18, readMirrorLookup)
		case 2:
			m.FailedOnly = v.Bool()
		default:
			return false
		}
		return true
	})
	*r = m
	return d.complete()
}

func readMirrorLookup(d *reader) DescribeClusterMirrorsLookup {
	l := DescribeClusterMirrorsLookup{TopicID: d.Uuid()}
	l.Partitions = readArray(d, 4, func(d *reader) int32 { return d.Int32() })
	d.skipTags()
	return l
}

// countTrue counts the true conditions (the tagged fields present).
func countTrue(conditions ...bool) uint32 {
	n := uint32(0)
	for _, c := range conditions {
		if c {
			n++
		}
	}
	return n
}

// DescribeClusterMirrorsResponse answers DescribeClusterMirrors.
type DescribeClusterMirrorsResponse struct {
	version
	ErrorHead
	Mirrors []DescribeClusterMirrorsMirror
	// LastMirrorEpochs (tag 0, mirrord's) answers the lookups.
	LastMirrorEpochs []DescribeClusterMirrorsEpochTopic
	// OfflinePartitions (tag 1, mirrord's) are the node's partitions
	// whose log could not be opened (offline.go), sorted.
	OfflinePartitions []DescribeClusterMirrorsOfflinePartition
}

// DescribeClusterMirrorsMirror is one mirror described.
type DescribeClusterMirrorsMirror struct {
	ErrorCode            int16
	ErrorMessage         *string
	MirrorName           string
	SourceBootstrap      *string
	SourceClusterID      *string
	AuthorizedOperations int32 // AuthorizedOperationsUnknown unless asked
	Topics               []DescribeClusterMirrorsTopic
	// SourceUnreachableSinceMillis (tag 0, mirrord's) is when the source
	// stopped answering, in Unix milliseconds: the first failure of the
	// current run of failures; -1 (absent) while it answers.
	SourceUnreachableSinceMillis int64
	// SourceError (tag 1, mirrord's) is the latest failure's text, null
	// (absent) when none.
	SourceError *string
	// GroupSync (tag 2, mirrord's) is the mirror's consumer group offset
	// sync (KIP-1279), its last round; nil (absent) when not told.
	GroupSync *DescribeClusterMirrorsGroupSync
	// ACLSync (tag 3, mirrord's) is the mirror's ACL sync, its last
	// round; nil (absent) when not told.
	ACLSync *DescribeClusterMirrorsACLSync
}

// Default sets AuthorizedOperations to "not requested" and the source
// reachable.
func (m *DescribeClusterMirrorsMirror) Default() {
	*m = DescribeClusterMirrorsMirror{AuthorizedOperations: AuthorizedOperationsUnknown, SourceUnreachableSinceMillis: -1}
}

// DescribeClusterMirrorsTopic is one topic of a mirror.
type DescribeClusterMirrorsTopic struct {
	TopicName  string
	Partitions []DescribeClusterMirrorsPartition
}

// DescribeClusterMirrorsEpochTopic answers the lookups of one topic.
type DescribeClusterMirrorsEpochTopic struct {
	TopicID    [16]byte
	Partitions []DescribeClusterMirrorsEpochPartition
}

// DescribeClusterMirrorsEpochPartition is the last mirror epoch and offset
// stored for a partition, -1 and -1 when none.
type DescribeClusterMirrorsEpochPartition struct {
	PartitionIndex   int32
	ErrorCode        int16
	LastMirrorEpoch  int32
	LastMirrorOffset int64
}

func (*DescribeClusterMirrorsResponse) Key() int16 { return DescribeClusterMirrorsKey }
func (r *DescribeClusterMirrorsResponse) Default() {
	*r = DescribeClusterMirrorsResponse{version: r.version}
}
func (r *DescribeClusterMirrorsResponse) RequestKind() kmsg.Request {
	return &DescribeClusterMirrorsRequest{version: r.version}
}

func (r *DescribeClusterMirrorsResponse) AppendTo(dst []byte) []byte {
	dst = r.ErrorHead.appendTo(dst)
	dst = appendArray(dst, r.Mirrors, appendDescribedMirror)
	dst = kbin.AppendUvarint(dst, countTrue(len(r.LastMirrorEpochs) > 0, len(r.OfflinePartitions) > 0))
	if len(r.LastMirrorEpochs) > 0 {
		dst = appendTag(dst, 0, func(dst []byte) []byte {
			return appendArray(dst, r.LastMirrorEpochs, func(dst []byte, t *DescribeClusterMirrorsEpochTopic) []byte {
				dst = kbin.AppendUuid(dst, t.TopicID)
				dst = appendArray(dst, t.Partitions, func(dst []byte, p *DescribeClusterMirrorsEpochPartition) []byte {
					dst = kbin.AppendInt32(dst, p.PartitionIndex)
					dst = kbin.AppendInt16(dst, p.ErrorCode)
					dst = kbin.AppendInt32(dst, p.LastMirrorEpoch)
					dst = kbin.AppendInt64(dst, p.LastMirrorOffset)
					return appendNoTags(dst)
				})
				return appendNoTags(dst)
			})
		})
	}
	if len(r.OfflinePartitions) > 0 {
		dst = appendTag(dst, 1, func(dst []byte) []byte {
			return appendArray(dst, r.OfflinePartitions, appendOfflinePartition)
		})
	}
	return dst
}

func appendDescribedMirror(dst []byte, m *DescribeClusterMirrorsMirror) []byte {
	dst = kbin.AppendInt16(dst, m.ErrorCode)
	dst = kbin.AppendCompactNullableString(dst, m.ErrorMessage)
	dst = kbin.AppendCompactString(dst, m.MirrorName)
	dst = kbin.AppendCompactNullableString(dst, m.SourceBootstrap)
	dst = kbin.AppendCompactNullableString(dst, m.SourceClusterID)
	dst = kbin.AppendInt32(dst, m.AuthorizedOperations)
	dst = appendArray(dst, m.Topics, func(dst []byte, t *DescribeClusterMirrorsTopic) []byte {
		dst = kbin.AppendCompactString(dst, t.TopicName)
		dst = appendArray(dst, t.Partitions, appendDescribedPartition)
		return appendNoTags(dst)
	})
	dst = kbin.AppendUvarint(dst, countTrue(m.SourceUnreachableSinceMillis >= 0, m.SourceError != nil, m.GroupSync != nil, m.ACLSync != nil))
	if m.SourceUnreachableSinceMillis >= 0 {
		dst = appendTag(dst, 0, func(dst []byte) []byte { return kbin.AppendInt64(dst, m.SourceUnreachableSinceMillis) })
	}
	if m.SourceError != nil {
		dst = appendTag(dst, 1, func(dst []byte) []byte { return kbin.AppendCompactNullableString(dst, m.SourceError) })
	}
	if m.GroupSync != nil {
		dst = appendTag(dst, 2, m.GroupSync.appendTo)
	}
	if m.ACLSync != nil {
		dst = appendTag(dst, 3, m.ACLSync.appendTo)
	}
	return dst
}

func (r *DescribeClusterMirrorsResponse) ReadFrom(src []byte) error {
	d := newReader(src)
	m := DescribeClusterMirrorsResponse{version: r.version}
	m.ErrorHead.read(&d)
	m.Mirrors = readArray(&d, 12, readDescribedMirror)
	d.tags(func(tag uint32, v *reader) bool {
		switch tag {
		case 0:
			m.LastMirrorEpochs = readArray(v, 18, readEpochTopic)
		case 1:
			m.OfflinePartitions = readArray(v, offlinePartitionBytesMin, readOfflinePartition)
		default:
			return false
		}
		return true
	})
	*r = m
	return d.complete()
}

func readDescribedMirror(d *reader) DescribeClusterMirrorsMirror {
	m := DescribeClusterMirrorsMirror{ErrorCode: d.Int16(), ErrorMessage: d.nullableString(), MirrorName: d.string()}
	m.SourceBootstrap = d.nullableString()
	m.SourceClusterID = d.nullableString()
	m.AuthorizedOperations = d.Int32()
	m.Topics = readArray(d, 3, func(d *reader) DescribeClusterMirrorsTopic {
		t := DescribeClusterMirrorsTopic{TopicName: d.string()}
		t.Partitions = readArray(d, 45, readDescribedPartition)
		d.skipTags()
		return t
	})
	m.SourceUnreachableSinceMillis = -1
	d.tags(func(tag uint32, v *reader) bool {
		switch tag {
		case 0:
			m.SourceUnreachableSinceMillis = max(v.Int64(), -1) // below -1 means reachable too
		case 1:
			m.SourceError = v.nullableString()
		case 2:
			m.GroupSync = readGroupSync(v)
		case 3:
			m.ACLSync = readACLSync(v)
		default:
			return false
		}
		return true
	})
	return m
}

func readEpochTopic(d *reader) DescribeClusterMirrorsEpochTopic {
	t := DescribeClusterMirrorsEpochTopic{TopicID: d.Uuid()}
	t.Partitions = readArray(d, 19, func(d *reader) DescribeClusterMirrorsEpochPartition {
		p := DescribeClusterMirrorsEpochPartition{PartitionIndex: d.Int32(), ErrorCode: d.Int16()}
		p.LastMirrorEpoch = d.Int32()
		p.LastMirrorOffset = d.Int64()
		d.skipTags()
		return p
	})
	d.skipTags()
	return t
}

// NewRequest returns an empty request of a private mirror key, or
// nil for any other key.
func NewRequest(key int16) kmsg.Request {
	switch key {
	case CreateClusterMirrorKey:
		return &CreateClusterMirrorRequest{}
	case DeleteClusterMirrorKey:
		return &DeleteClusterMirrorRequest{}
	case ListClusterMirrorsKey:
		return &ListClusterMirrorsRequest{}
	case DescribeClusterMirrorsKey:
		return &DescribeClusterMirrorsRequest{}
	}
	if change := topicsChangeForKey(key); change != 0 {
		return &MirrorTopicsRequest{Change: change}
	}
	return nil
}
