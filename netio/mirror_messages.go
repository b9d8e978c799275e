package netio

// The mirror admin messages: the requests and responses of the RPCs in
// mirror_keys.go, as kmsg.Request and kmsg.Response so that a franz-go
// client sends them with client.Request (configured with
// MirrorClientVersions). Every message is version 0 only and flexible;
// mirror_codec.go holds the encoding.
//
// The schemas follow KIP-1279 as the KIP author's prototype branch
// (github.com/showuon/kafka, clients/src/main/resources/common/message,
// *ClusterMirror*.json and *MirrorTopics*.json) defines them, field for
// field and in order; the KIP's wiki page itself was not at hand, and the
// prototype's files changed between revisions (the latest seen is
// followed). The deviations:
//
//   - Keys are private (1000+, mirror_keys.go); upstream has none yet.
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
//     later one of the same name.
//   - Also mirrord's, as tagged fields (absent: unknown or none, so older
//     clients read the same answer): a mirror carries
//     SourceUnreachableSinceMillis (tag 0) and SourceError (tag 1); a
//     partition carries LagMillis (tag 0), SourceOffsetAgeMillis (tag 1)
//     and LagLowerBound (tag 2). A partition whose SourceOffset is older
//     than the mirror's staleness bound answers Lag -1 (an older client
//     shows it unknown rather than too small) and LagLowerBound.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// mirrorVersion is the version part of every mirror message.
type mirrorVersion struct {
	Version int16
}

func (*mirrorVersion) MaxVersion() int16          { return mirrorMaxVersion }
func (v *mirrorVersion) SetVersion(version int16) { v.Version = version }
func (v *mirrorVersion) GetVersion() int16        { return v.Version }
func (*mirrorVersion) IsFlexible() bool           { return true }

// mirrorErrorHead opens every mirror response: throttle time, top-level
// error code and message.
type mirrorErrorHead struct {
	ThrottleMillis int32
	ErrorCode      int16
	ErrorMessage   *string
}

func (h *mirrorErrorHead) write(w *mirrorWriter) {
	w.int32(h.ThrottleMillis)
	w.int16(h.ErrorCode)
	w.nullableString(h.ErrorMessage)
}

func (w *mirrorWriter) errorHead(h *mirrorErrorHead) { h.write(w) }

func (h *mirrorErrorHead) read(r *mirrorReader) {
	h.ThrottleMillis = r.int32()
	h.ErrorCode = r.int16()
	h.ErrorMessage = r.nullableString()
}

// CreateClusterMirrorRequest creates a mirror from a source cluster
// config (Kafka's names: bootstrap.servers, ...).
type CreateClusterMirrorRequest struct {
	mirrorVersion
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
	*r = CreateClusterMirrorRequest{mirrorVersion: r.mirrorVersion}
}
func (r *CreateClusterMirrorRequest) ResponseKind() kmsg.Response {
	return &CreateClusterMirrorResponse{mirrorVersion: r.mirrorVersion}
}

func (r *CreateClusterMirrorRequest) AppendTo(dst []byte) []byte {
	w := mirrorWriter{buf: dst}
	w.string(r.MirrorName)
	writeMirrorArray(&w, r.Configs, func(w *mirrorWriter, c *CreateClusterMirrorConfig) {
		w.string(c.Name)
		w.nullableString(c.Value)
		w.noTags()
	})
	w.noTags()
	return w.buf
}

func (r *CreateClusterMirrorRequest) ReadFrom(src []byte) error {
	d := mirrorReader{buf: src}
	m := CreateClusterMirrorRequest{mirrorVersion: r.mirrorVersion}
	m.MirrorName = d.string()
	m.Configs = readMirrorArray(&d, 3, func(d *mirrorReader) CreateClusterMirrorConfig {
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
	mirrorVersion
	mirrorErrorHead
}

func (*CreateClusterMirrorResponse) Key() int16 { return CreateClusterMirrorKey }
func (r *CreateClusterMirrorResponse) Default() {
	*r = CreateClusterMirrorResponse{mirrorVersion: r.mirrorVersion}
}
func (r *CreateClusterMirrorResponse) RequestKind() kmsg.Request {
	return &CreateClusterMirrorRequest{mirrorVersion: r.mirrorVersion}
}

func (r *CreateClusterMirrorResponse) AppendTo(dst []byte) []byte {
	w := mirrorWriter{buf: dst}
	w.errorHead(&r.mirrorErrorHead)
	w.noTags()
	return w.buf
}

func (r *CreateClusterMirrorResponse) ReadFrom(src []byte) error {
	d := mirrorReader{buf: src}
	m := CreateClusterMirrorResponse{mirrorVersion: r.mirrorVersion}
	m.mirrorErrorHead.read(&d)
	d.skipTags()
	*r = m
	return d.complete()
}

// DeleteClusterMirrorRequest deletes a mirror.
type DeleteClusterMirrorRequest struct {
	mirrorVersion
	MirrorName string
}

func (*DeleteClusterMirrorRequest) Key() int16 { return DeleteClusterMirrorKey }
func (r *DeleteClusterMirrorRequest) Default() {
	*r = DeleteClusterMirrorRequest{mirrorVersion: r.mirrorVersion}
}
func (r *DeleteClusterMirrorRequest) ResponseKind() kmsg.Response {
	return &DeleteClusterMirrorResponse{mirrorVersion: r.mirrorVersion}
}

func (r *DeleteClusterMirrorRequest) AppendTo(dst []byte) []byte {
	w := mirrorWriter{buf: dst}
	w.string(r.MirrorName)
	w.noTags()
	return w.buf
}

func (r *DeleteClusterMirrorRequest) ReadFrom(src []byte) error {
	d := mirrorReader{buf: src}
	m := DeleteClusterMirrorRequest{mirrorVersion: r.mirrorVersion}
	m.MirrorName = d.string()
	d.skipTags()
	*r = m
	return d.complete()
}

// DeleteClusterMirrorResponse answers DeleteClusterMirror.
type DeleteClusterMirrorResponse struct {
	mirrorVersion
	mirrorErrorHead
}

func (*DeleteClusterMirrorResponse) Key() int16 { return DeleteClusterMirrorKey }
func (r *DeleteClusterMirrorResponse) Default() {
	*r = DeleteClusterMirrorResponse{mirrorVersion: r.mirrorVersion}
}
func (r *DeleteClusterMirrorResponse) RequestKind() kmsg.Request {
	return &DeleteClusterMirrorRequest{mirrorVersion: r.mirrorVersion}
}

func (r *DeleteClusterMirrorResponse) AppendTo(dst []byte) []byte {
	w := mirrorWriter{buf: dst}
	w.errorHead(&r.mirrorErrorHead)
	w.noTags()
	return w.buf
}

func (r *DeleteClusterMirrorResponse) ReadFrom(src []byte) error {
	d := mirrorReader{buf: src}
	m := DeleteClusterMirrorResponse{mirrorVersion: r.mirrorVersion}
	m.mirrorErrorHead.read(&d)
	d.skipTags()
	*r = m
	return d.complete()
}

// mirrorTopicsKeys maps a topic-state change to its key.
var mirrorTopicsKeys = map[TopicsChange]int16{
	StartMirroring:   StartMirrorTopicsKey,
	StopMirroring:    StopMirrorTopicsKey,
	PauseMirroring:   PauseMirrorTopicsKey,
	ResumeMirroring:  ResumeMirrorTopicsKey,
	RecoverMirroring: RecoverMirrorTopicsKey,
}

// topicsChangeForKey returns the change a topic-state key asks for, or 0.
func topicsChangeForKey(key int16) TopicsChange {
	for change, k := range mirrorTopicsKeys {
		if k == key {
			return change
		}
	}
	return 0
}

// MirrorTopicsRequest is StartMirrorTopics, StopMirrorTopics,
// PauseMirrorTopics, ResumeMirrorTopics or RecoverMirrorTopics, as Change
// says (Change is not on the wire: the key carries it). It selects topics
// of MirrorName by name and by pattern (TopicSelection).
type MirrorTopicsRequest struct {
	mirrorVersion
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
	if key, ok := mirrorTopicsKeys[r.Change]; ok {
		return key
	}
	return -1
}

func (r *MirrorTopicsRequest) Default() {
	*r = MirrorTopicsRequest{mirrorVersion: r.mirrorVersion, Change: r.Change}
}
func (r *MirrorTopicsRequest) ResponseKind() kmsg.Response {
	return &MirrorTopicsResponse{mirrorVersion: r.mirrorVersion, Change: r.Change}
}

func (r *MirrorTopicsRequest) AppendTo(dst []byte) []byte {
	w := mirrorWriter{buf: dst}
	w.string(r.MirrorName)
	writeMirrorArray(&w, r.Topics, func(w *mirrorWriter, t *MirrorTopicsRequestTopic) {
		w.string(t.TopicName)
		w.noTags()
	})
	w.strings(r.IncludePatterns)
	w.strings(r.ExcludePatterns)
	w.noTags()
	return w.buf
}

func (r *MirrorTopicsRequest) ReadFrom(src []byte) error {
	d := mirrorReader{buf: src}
	m := MirrorTopicsRequest{mirrorVersion: r.mirrorVersion, Change: r.Change}
	m.MirrorName = d.string()
	m.Topics = readMirrorArray(&d, 2, func(d *mirrorReader) MirrorTopicsRequestTopic {
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
	mirrorVersion
	Change TopicsChange
	mirrorErrorHead
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
	return (&MirrorTopicsRequest{Change: r.Change}).Key()
}

func (r *MirrorTopicsResponse) Default() {
	*r = MirrorTopicsResponse{mirrorVersion: r.mirrorVersion, Change: r.Change}
}
func (r *MirrorTopicsResponse) RequestKind() kmsg.Request {
	return &MirrorTopicsRequest{mirrorVersion: r.mirrorVersion, Change: r.Change}
}

func (r *MirrorTopicsResponse) AppendTo(dst []byte) []byte {
	w := mirrorWriter{buf: dst}
	w.errorHead(&r.mirrorErrorHead)
	writeMirrorArray(&w, r.Topics, func(w *mirrorWriter, t *MirrorTopicsResponseTopic) {
		w.string(t.TopicName)
		w.int16(t.ErrorCode)
		w.nullableString(t.ErrorMessage)
		w.noTags()
	})
	w.noTags()
	return w.buf
}

func (r *MirrorTopicsResponse) ReadFrom(src []byte) error {
	d := mirrorReader{buf: src}
	m := MirrorTopicsResponse{mirrorVersion: r.mirrorVersion, Change: r.Change}
	m.mirrorErrorHead.read(&d)
	m.Topics = readMirrorArray(&d, 5, func(d *mirrorReader) MirrorTopicsResponseTopic {
		t := MirrorTopicsResponseTopic{TopicName: d.string(), ErrorCode: d.int16(), ErrorMessage: d.nullableString()}
		d.skipTags()
		return t
	})
	d.skipTags()
	*r = m
	return d.complete()
}

// ListClusterMirrorsRequest lists the mirrors.
type ListClusterMirrorsRequest struct {
	mirrorVersion
	IncludeTopicNames bool
}

func (*ListClusterMirrorsRequest) Key() int16 { return ListClusterMirrorsKey }
func (r *ListClusterMirrorsRequest) Default() {
	*r = ListClusterMirrorsRequest{mirrorVersion: r.mirrorVersion}
}
func (r *ListClusterMirrorsRequest) ResponseKind() kmsg.Response {
	return &ListClusterMirrorsResponse{mirrorVersion: r.mirrorVersion}
}

func (r *ListClusterMirrorsRequest) AppendTo(dst []byte) []byte {
	w := mirrorWriter{buf: dst}
	w.bool(r.IncludeTopicNames)
	w.noTags()
	return w.buf
}

func (r *ListClusterMirrorsRequest) ReadFrom(src []byte) error {
	d := mirrorReader{buf: src}
	m := ListClusterMirrorsRequest{mirrorVersion: r.mirrorVersion}
	m.IncludeTopicNames = d.bool()
	d.skipTags()
	*r = m
	return d.complete()
}

// ListClusterMirrorsResponse answers ListClusterMirrors.
type ListClusterMirrorsResponse struct {
	mirrorVersion
	mirrorErrorHead
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
	*r = ListClusterMirrorsResponse{mirrorVersion: r.mirrorVersion}
}
func (r *ListClusterMirrorsResponse) RequestKind() kmsg.Request {
	return &ListClusterMirrorsRequest{mirrorVersion: r.mirrorVersion}
}

func (r *ListClusterMirrorsResponse) AppendTo(dst []byte) []byte {
	w := mirrorWriter{buf: dst}
	w.errorHead(&r.mirrorErrorHead)
	writeMirrorArray(&w, r.Mirrors, func(w *mirrorWriter, m *ListClusterMirrorsResponseMirror) {
		w.string(m.MirrorName)
		w.string(m.SourceBootstrap)
		w.string(m.SourceClusterID)
		w.int32(m.TopicCount)
		w.nullableStrings(m.TopicNames)
		w.noTags()
	})
	w.noTags()
	return w.buf
}

func (r *ListClusterMirrorsResponse) ReadFrom(src []byte) error {
	d := mirrorReader{buf: src}
	m := ListClusterMirrorsResponse{mirrorVersion: r.mirrorVersion}
	m.mirrorErrorHead.read(&d)
	m.Mirrors = readMirrorArray(&d, 9, func(d *mirrorReader) ListClusterMirrorsResponseMirror {
		l := ListClusterMirrorsResponseMirror{MirrorName: d.string(), SourceBootstrap: d.string(), SourceClusterID: d.string()}
		l.TopicCount = d.int32()
		l.TopicNames = d.nullableStrings()
		d.skipTags()
		return l
	})
	d.skipTags()
	*r = m
	return d.complete()
}

// authorizedOperationsUnknown is Kafka's AuthorizedOperations default:
// not requested.
const authorizedOperationsUnknown = math.MinInt32

// DescribeClusterMirrorsRequest describes mirrors down to their
// partitions, and answers failback's last-mirror-epoch lookups.
type DescribeClusterMirrorsRequest struct {
	mirrorVersion
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
	TopicID    TopicID
	Partitions []int32
}

func (*DescribeClusterMirrorsRequest) Key() int16 { return DescribeClusterMirrorsKey }
func (r *DescribeClusterMirrorsRequest) Default() {
	*r = DescribeClusterMirrorsRequest{mirrorVersion: r.mirrorVersion}
}
func (r *DescribeClusterMirrorsRequest) ResponseKind() kmsg.Response {
	return &DescribeClusterMirrorsResponse{mirrorVersion: r.mirrorVersion}
}

func (r *DescribeClusterMirrorsRequest) AppendTo(dst []byte) []byte {
	w := mirrorWriter{buf: dst}
	w.nullableStrings(r.MirrorNames)
	w.bool(r.IncludeAuthorizedOperations)
	w.uvarint(countTrue(r.ClusterID != nil, len(r.LastMirrorEpochLookups) > 0, r.FailedOnly))
	if r.ClusterID != nil {
		w.tag(0, func(w *mirrorWriter) { w.nullableString(r.ClusterID) })
	}
	if len(r.LastMirrorEpochLookups) > 0 {
		w.tag(1, func(w *mirrorWriter) {
			writeMirrorArray(w, r.LastMirrorEpochLookups, func(w *mirrorWriter, l *DescribeClusterMirrorsLookup) {
				w.uuid(l.TopicID)
				writeMirrorArray(w, l.Partitions, func(w *mirrorWriter, p *int32) { w.int32(*p) })
				w.noTags()
			})
		})
	}
	if r.FailedOnly {
		w.tag(2, func(w *mirrorWriter) { w.bool(true) })
	}
	return w.buf
}

func (r *DescribeClusterMirrorsRequest) ReadFrom(src []byte) error {
	d := mirrorReader{buf: src}
	m := DescribeClusterMirrorsRequest{mirrorVersion: r.mirrorVersion}
	m.MirrorNames = d.nullableStrings()
	m.IncludeAuthorizedOperations = d.bool()
	d.tags(func(tag int, v *mirrorReader) bool {
		switch tag {
		case 0:
			m.ClusterID = v.nullableString()
		case 1:
			m.LastMirrorEpochLookups = readMirrorArray(v, 18, readMirrorLookup)
		case 2:
			m.FailedOnly = v.bool()
		default:
			return false
		}
		return true
	})
	*r = m
	return d.complete()
}

func readMirrorLookup(d *mirrorReader) DescribeClusterMirrorsLookup {
	l := DescribeClusterMirrorsLookup{TopicID: d.uuid()}
	l.Partitions = readMirrorArray(d, 4, func(d *mirrorReader) int32 { return d.int32() })
	d.skipTags()
	return l
}

// countTrue counts the true conditions (the tagged fields present).
func countTrue(conditions ...bool) int {
	n := 0
	for _, c := range conditions {
		if c {
			n++
		}
	}
	return n
}

// DescribeClusterMirrorsResponse answers DescribeClusterMirrors.
type DescribeClusterMirrorsResponse struct {
	mirrorVersion
	mirrorErrorHead
	Mirrors []DescribeClusterMirrorsMirror
	// LastMirrorEpochs (tag 0, mirrord's) answers the lookups.
	LastMirrorEpochs []DescribeClusterMirrorsEpochTopic
}

// DescribeClusterMirrorsMirror is one mirror described.
type DescribeClusterMirrorsMirror struct {
	ErrorCode            int16
	ErrorMessage         *string
	MirrorName           string
	SourceBootstrap      *string
	SourceClusterID      *string
	AuthorizedOperations int32 // authorizedOperationsUnknown unless asked
	Topics               []DescribeClusterMirrorsTopic
	// SourceUnreachableSinceMillis (tag 0, mirrord's) is when the source
	// stopped answering, in Unix milliseconds: the first failure of the
	// current run of failures; -1 (absent) while it answers.
	SourceUnreachableSinceMillis int64
	// SourceError (tag 1, mirrord's) is the latest failure's text, null
	// (absent) when none.
	SourceError *string
}

// Default sets AuthorizedOperations to "not requested" and the source
// reachable.
func (m *DescribeClusterMirrorsMirror) Default() {
	*m = DescribeClusterMirrorsMirror{AuthorizedOperations: authorizedOperationsUnknown, SourceUnreachableSinceMillis: -1}
}

// DescribeClusterMirrorsTopic is one topic of a mirror.
type DescribeClusterMirrorsTopic struct {
	TopicName  string
	Partitions []DescribeClusterMirrorsPartition
}

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
}

// Default sets the offsets, epochs and lag to -1 (unknown).
func (p *DescribeClusterMirrorsPartition) Default() {
	*p = DescribeClusterMirrorsPartition{SourceOffset: -1, DestinationOffset: -1, Lag: -1, LastMirrorEpoch: -1, LastMirrorOffset: -1,
		LagMillis: -1, SourceOffsetAgeMillis: -1, LagLowerBound: -1}
}

// DescribeClusterMirrorsEpochTopic answers the lookups of one topic.
type DescribeClusterMirrorsEpochTopic struct {
	TopicID    TopicID
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
	*r = DescribeClusterMirrorsResponse{mirrorVersion: r.mirrorVersion}
}
func (r *DescribeClusterMirrorsResponse) RequestKind() kmsg.Request {
	return &DescribeClusterMirrorsRequest{mirrorVersion: r.mirrorVersion}
}

func (r *DescribeClusterMirrorsResponse) AppendTo(dst []byte) []byte {
	w := mirrorWriter{buf: dst}
	w.errorHead(&r.mirrorErrorHead)
	writeMirrorArray(&w, r.Mirrors, writeDescribedMirror)
	w.uvarint(countTrue(len(r.LastMirrorEpochs) > 0))
	if len(r.LastMirrorEpochs) > 0 {
		w.tag(0, func(w *mirrorWriter) {
			writeMirrorArray(w, r.LastMirrorEpochs, func(w *mirrorWriter, t *DescribeClusterMirrorsEpochTopic) {
				w.uuid(t.TopicID)
				writeMirrorArray(w, t.Partitions, func(w *mirrorWriter, p *DescribeClusterMirrorsEpochPartition) {
					w.int32(p.PartitionIndex)
					w.int16(p.ErrorCode)
					w.int32(p.LastMirrorEpoch)
					w.int64(p.LastMirrorOffset)
					w.noTags()
				})
				w.noTags()
			})
		})
	}
	return w.buf
}

func writeDescribedMirror(w *mirrorWriter, m *DescribeClusterMirrorsMirror) {
	w.int16(m.ErrorCode)
	w.nullableString(m.ErrorMessage)
	w.string(m.MirrorName)
	w.nullableString(m.SourceBootstrap)
	w.nullableString(m.SourceClusterID)
	w.int32(m.AuthorizedOperations)
	writeMirrorArray(w, m.Topics, func(w *mirrorWriter, t *DescribeClusterMirrorsTopic) {
		w.string(t.TopicName)
		writeMirrorArray(w, t.Partitions, writeDescribedPartition)
		w.noTags()
	})
	w.uvarint(countTrue(m.SourceUnreachableSinceMillis >= 0, m.SourceError != nil))
	if m.SourceUnreachableSinceMillis >= 0 {
		w.tag(0, func(w *mirrorWriter) { w.int64(m.SourceUnreachableSinceMillis) })
	}
	if m.SourceError != nil {
		w.tag(1, func(w *mirrorWriter) { w.nullableString(m.SourceError) })
	}
}

func writeDescribedPartition(w *mirrorWriter, p *DescribeClusterMirrorsPartition) {
	w.int32(p.PartitionIndex)
	w.string(p.StateValue)
	w.nullableString(p.ErrorMessage)
	w.int16(p.RetryAttempt)
	w.int64(p.SourceOffset)
	w.int64(p.DestinationOffset)
	w.int64(p.Lag)
	w.int32(p.LastMirrorEpoch)
	w.int64(p.LastMirrorOffset)
	w.uvarint(countTrue(p.LagMillis >= 0, p.SourceOffsetAgeMillis >= 0, p.LagLowerBound >= 0))
	if p.LagMillis >= 0 {
		w.tag(0, func(w *mirrorWriter) { w.int64(p.LagMillis) })
	}
	if p.SourceOffsetAgeMillis >= 0 {
		w.tag(1, func(w *mirrorWriter) { w.int64(p.SourceOffsetAgeMillis) })
	}
	if p.LagLowerBound >= 0 {
		w.tag(2, func(w *mirrorWriter) { w.int64(p.LagLowerBound) })
	}
}

func (r *DescribeClusterMirrorsResponse) ReadFrom(src []byte) error {
	d := mirrorReader{buf: src}
	m := DescribeClusterMirrorsResponse{mirrorVersion: r.mirrorVersion}
	m.mirrorErrorHead.read(&d)
	m.Mirrors = readMirrorArray(&d, 12, readDescribedMirror)
	d.tags(func(tag int, v *mirrorReader) bool {
		if tag != 0 {
			return false
		}
		m.LastMirrorEpochs = readMirrorArray(v, 18, readEpochTopic)
		return true
	})
	*r = m
	return d.complete()
}

func readDescribedMirror(d *mirrorReader) DescribeClusterMirrorsMirror {
	m := DescribeClusterMirrorsMirror{ErrorCode: d.int16(), ErrorMessage: d.nullableString(), MirrorName: d.string()}
	m.SourceBootstrap = d.nullableString()
	m.SourceClusterID = d.nullableString()
	m.AuthorizedOperations = d.int32()
	m.Topics = readMirrorArray(d, 3, func(d *mirrorReader) DescribeClusterMirrorsTopic {
		t := DescribeClusterMirrorsTopic{TopicName: d.string()}
		t.Partitions = readMirrorArray(d, 45, readDescribedPartition)
		d.skipTags()
		return t
	})
	m.SourceUnreachableSinceMillis = -1
	d.tags(func(tag int, v *mirrorReader) bool {
		switch tag {
		case 0:
			m.SourceUnreachableSinceMillis = max(v.int64(), -1) // below -1 means reachable too
		case 1:
			m.SourceError = v.nullableString()
		default:
			return false
		}
		return true
	})
	return m
}

func readDescribedPartition(d *mirrorReader) DescribeClusterMirrorsPartition {
	p := DescribeClusterMirrorsPartition{PartitionIndex: d.int32(), StateValue: d.string(), ErrorMessage: d.nullableString()}
	p.RetryAttempt = d.int16()
	p.SourceOffset = d.int64()
	p.DestinationOffset = d.int64()
	p.Lag = d.int64()
	p.LastMirrorEpoch = d.int32()
	p.LastMirrorOffset = d.int64()
	p.LagMillis, p.SourceOffsetAgeMillis, p.LagLowerBound = -1, -1, -1
	d.tags(func(tag int, v *mirrorReader) bool {
		switch tag { // any negative value means unknown
		case 0:
			p.LagMillis = max(v.int64(), -1)
		case 1:
			p.SourceOffsetAgeMillis = max(v.int64(), -1)
		case 2:
			p.LagLowerBound = max(v.int64(), -1)
		default:
			return false
		}
		return true
	})
	return p
}

func readEpochTopic(d *mirrorReader) DescribeClusterMirrorsEpochTopic {
	t := DescribeClusterMirrorsEpochTopic{TopicID: d.uuid()}
	t.Partitions = readMirrorArray(d, 19, func(d *mirrorReader) DescribeClusterMirrorsEpochPartition {
		p := DescribeClusterMirrorsEpochPartition{PartitionIndex: d.int32(), ErrorCode: d.int16()}
		p.LastMirrorEpoch = d.int32()
		p.LastMirrorOffset = d.int64()
		d.skipTags()
		return p
	})
	d.skipTags()
	return t
}

// newMirrorRequest returns an empty request of a private mirror key, or
// nil for any other key.
func newMirrorRequest(key int16) kmsg.Request {
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
