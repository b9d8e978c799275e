package netio

// The mirror admin RPCs of KIP-1279, keys 1000-1008, version 0 each,
// whose messages and encoding are package mirrorwire's. The server answers them, and
// ApiVersions lists them, only when its Backend is a MirrorBackend; to any
// other Backend they are unknown keys, which close the connection as any
// unknown key does.
//
// With an authorizer, the ClusterMirror resource (acl.ResourceClusterMirror,
// named by the mirror) is checked as KIP-1279 says: ALTER to create, delete
// or change a mirror's topics, DESCRIBE to list (others left out) or
// describe it (CLUSTER_MIRROR_AUTHORIZATION_FAILED, code 142, otherwise).
// A LastMirrorEpochLookup reads a topic's data, not a mirror's (it names
// no mirror, and the answer is the topic's last mirrored epoch and
// offset, as OffsetForLeaderEpoch's is its leader's): it needs DESCRIBE on
// the topic its ID names, else each of its partitions is
// TOPIC_AUTHORIZATION_FAILED (an unknown ID is answered as the engine
// answers it, as Kafka answers UNKNOWN_TOPIC_ID before authorizing).
//
// Each handler checks what the request alone can get wrong, calls
// MirrorAdmin and turns its errors into codes with their messages
// (errorCode: a kerr error keeps its code, anything else is
// UNKNOWN_SERVER_ERROR and logged):
//
//   - CreateClusterMirror: a config key listed twice is INVALID_REQUEST, a
//     null value INVALID_CONFIG; the engine validates the rest.
//   - DeleteClusterMirror: as the engine answers.
//   - Start/Stop/Pause/Resume/RecoverMirrorTopics: a request that names no
//     topic and has no include pattern is INVALID_REQUEST; a topic named
//     twice is asked for once. A failure of the whole request is the
//     top-level error, else one result per topic, as the engine gives them.
//   - ListClusterMirrors: TopicNames only when asked for (else null),
//     TopicCount always.
//   - DescribeClusterMirrors: MirrorNames null describes every mirror, an
//     empty list none, a name listed twice is described once.
//     LastMirrorEpochLookups need ClusterId (else INVALID_REQUEST) and are
//     answered in LastMirrorEpochs, grouped by topic ID in the order
//     asked. AuthorizedOperations, when asked for, is the ClusterMirror
//     resource's bit field (all of ALTER and DESCRIBE without an
//     authorizer). A failure of either
//     half is the top-level error and the response carries nothing else.
//     A partition whose source high watermark is stale answers Lag -1 and
//     the lower bound in LagLowerBound; an unreachable source, the time
//     and the error in SourceUnreachableSinceMillis and SourceError; the
//     group offset sync's last round, when the engine reports one, in
//     GroupSync (LastSyncMillis -1 before the first round), the ACL
//     sync's likewise in ACLSync; a partition's local and source leader
//     epochs, when known, in LeaderEpoch and SourceLeaderEpoch.

import (
	"context"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/mirrord/mirrord/mirrorwire"
)

// mirrorAPIs is the dispatch table of the mirror admin RPCs.
var mirrorAPIs map[int16]api

func init() {
	mirrorAPIs = map[int16]api{
		mirrorwire.CreateClusterMirrorKey:    {0, mirrorwire.MaxVersion, serveCreateClusterMirror},
		mirrorwire.DeleteClusterMirrorKey:    {0, mirrorwire.MaxVersion, serveDeleteClusterMirror},
		mirrorwire.StartMirrorTopicsKey:      {0, mirrorwire.MaxVersion, serveMirrorTopics},
		mirrorwire.StopMirrorTopicsKey:       {0, mirrorwire.MaxVersion, serveMirrorTopics},
		mirrorwire.PauseMirrorTopicsKey:      {0, mirrorwire.MaxVersion, serveMirrorTopics},
		mirrorwire.ResumeMirrorTopicsKey:     {0, mirrorwire.MaxVersion, serveMirrorTopics},
		mirrorwire.RecoverMirrorTopicsKey:    {0, mirrorwire.MaxVersion, serveMirrorTopics},
		mirrorwire.ListClusterMirrorsKey:     {0, mirrorwire.MaxVersion, serveListClusterMirrors},
		mirrorwire.DescribeClusterMirrorsKey: {0, mirrorwire.MaxVersion, serveDescribeClusterMirrors},
	}
}

// knownAPI returns the api of key on a server that answers everything:
// it decides how a request header is framed (flexibility).
func knownAPI(key int16) (api, bool) {
	if a, ok := apis[key]; ok {
		return a, true
	}
	a, ok := mirrorAPIs[key]
	return a, ok
}

// lookupAPI returns the api of key this server answers: Kafka's, and the
// mirror admin RPCs when the backend administers mirrors.
func (s *Server) lookupAPI(key int16) (api, bool) {
	if a, ok := apis[key]; ok {
		return a, true
	}
	if _, ok := s.backend.(MirrorBackend); !ok {
		return api{}, false
	}
	a, ok := mirrorAPIs[key]
	return a, ok
}

// appendMirrorKeys adds the mirror admin RPCs to ApiVersions entries when
// the backend administers mirrors. They sort after every Kafka key.
func (s *Server) appendMirrorKeys(keys []kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey {
	if _, ok := s.backend.(MirrorBackend); !ok {
		return keys
	}
	for key := mirrorwire.FirstKey; key <= mirrorwire.LastKey; key++ {
		a := mirrorAPIs[key]
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: key, MinVersion: a.minVersion, MaxVersion: a.maxVersion})
	}
	return keys
}

// serveAPIVersionsWithMirrors is ApiVersions (18_api_versions.go) plus
// the mirror admin RPCs.
func serveAPIVersionsWithMirrors(ctx context.Context, c *conn, h RequestHeader, req kmsg.Request) (any, error) {
	reply, err := serveAPIVersions(ctx, c, h, req)
	if resp, ok := reply.(*kmsg.ApiVersionsResponse); ok && resp.ErrorCode == 0 {
		resp.ApiKeys = c.server.appendMirrorKeys(resp.ApiKeys)
	}
	return reply, err
}

// MirrorClientVersions returns the versions a franz-go client should be
// configured with (kgo.MaxVersions) to send the mirror RPCs: kgo refuses a
// request whose key its versions do not list. They are the stable Kafka
// versions plus the mirror keys.
func MirrorClientVersions() *kversion.Versions {
	versions := kversion.Stable()
	for key := mirrorwire.FirstKey; key <= mirrorwire.LastKey; key++ {
		versions.SetMaxKeyVersion(key, mirrorwire.MaxVersion)
	}
	return versions
}

func mirrorAdmin(c *conn) MirrorAdmin {
	return c.server.backend.(MirrorBackend).Mirrors()
}

// mirrorErrorAnswer is the top-level error part of a response for err.
func mirrorErrorAnswer(c *conn, err error) mirrorwire.ErrorHead {
	return mirrorwire.ErrorHead{ErrorCode: errorCode(c.server.log, err, kerr.UnknownServerError), ErrorMessage: errorMessage(err)}
}

// errorMessage is err's text, or null for no error.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	message := err.Error()
	return &message
}

// nonEmpty returns &s, or nil for "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func serveCreateClusterMirror(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*mirrorwire.CreateClusterMirrorRequest)
	resp := req.ResponseKind().(*mirrorwire.CreateClusterMirrorResponse)
	config, err := mirrorConfig(req.Configs)
	if err == nil && !c.authorize(opAlter, resourceClusterMirror, req.MirrorName) {
		err = ErrClusterMirrorAuthorizationFailed
	}
	if err == nil {
		err = mirrorAdmin(c).CreateMirror(ctx, req.MirrorName, config)
	}
	resp.ErrorHead = mirrorErrorAnswer(c, err)
	return resp, nil
}

// mirrorConfig turns a request's configs into a map, refusing a key
// listed twice or a null value.
func mirrorConfig(configs []mirrorwire.CreateClusterMirrorConfig) (map[string]string, error) {
	config := make(map[string]string, len(configs)) // bounded by the request
	for _, entry := range configs {
		if _, ok := config[entry.Name]; ok {
			return nil, refuse(kerr.InvalidRequest, "Duplicate mirror config %q.", entry.Name)
		}
		if entry.Value == nil {
			return nil, refuse(kerr.InvalidConfig, "Mirror config %q has a null value.", entry.Name)
		}
		config[entry.Name] = *entry.Value
	}
	return config, nil
}

func serveDeleteClusterMirror(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*mirrorwire.DeleteClusterMirrorRequest)
	resp := req.ResponseKind().(*mirrorwire.DeleteClusterMirrorResponse)
	err := error(ErrClusterMirrorAuthorizationFailed)
	if c.authorize(opAlter, resourceClusterMirror, req.MirrorName) {
		err = mirrorAdmin(c).DeleteMirror(ctx, req.MirrorName)
	}
	resp.ErrorHead = mirrorErrorAnswer(c, err)
	return resp, nil
}

func serveMirrorTopics(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*mirrorwire.MirrorTopicsRequest)
	resp := req.ResponseKind().(*mirrorwire.MirrorTopicsResponse)
	selection := TopicSelection{Names: uniqueTopicNames(req.Topics), Include: req.IncludePatterns, Exclude: req.ExcludePatterns}
	if len(selection.Names) == 0 && len(selection.Include) == 0 {
		resp.ErrorHead = mirrorErrorAnswer(c, refuse(kerr.InvalidRequest, "No topic named and no include pattern."))
		return resp, nil
	}
	results, err := unlessDenied(c.authorize(opAlter, resourceClusterMirror, req.MirrorName), ErrClusterMirrorAuthorizationFailed,
		func() ([]TopicResult, error) {
			return mirrorAdmin(c).SetTopicsDesiredState(ctx, req.MirrorName, req.Change, selection)
		})
	if err != nil {
		resp.ErrorHead = mirrorErrorAnswer(c, err)
		return resp, nil
	}
	for _, result := range results {
		resp.Topics = append(resp.Topics, mirrorwire.MirrorTopicsResponseTopic{
			TopicName:    result.Topic,
			ErrorCode:    errorCode(c.server.log, result.Err, kerr.UnknownServerError),
			ErrorMessage: errorMessage(result.Err),
		})
	}
	return resp, nil
}

// uniqueTopicNames returns the names of topics, each once, in order.
func uniqueTopicNames(topics []mirrorwire.MirrorTopicsRequestTopic) []string {
	var names []string
	seen := make(map[string]bool, len(topics)) // bounded by the request
	for _, topic := range topics {
		if !seen[topic.TopicName] {
			seen[topic.TopicName] = true
			names = append(names, topic.TopicName)
		}
	}
	return names
}

func serveListClusterMirrors(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*mirrorwire.ListClusterMirrorsRequest)
	resp := req.ResponseKind().(*mirrorwire.ListClusterMirrorsResponse)
	mirrors, err := mirrorAdmin(c).ListMirrors(ctx)
	if err != nil {
		resp.ErrorHead = mirrorErrorAnswer(c, err)
		return resp, nil
	}
	for _, mirror := range mirrors {
		if !c.authorizeQuietly(opDescribe, resourceClusterMirror, mirror.Name) {
			continue // left out, as Kafka's listings leave out what the client may not describe
		}
		listed := mirrorwire.ListClusterMirrorsResponseMirror{
			MirrorName:      mirror.Name,
			SourceBootstrap: mirror.SourceBootstrap,
			SourceClusterID: mirror.SourceClusterID,
			TopicCount:      int32(len(mirror.Topics)),
		}
		if req.IncludeTopicNames {
			listed.TopicNames = append([]string{}, mirror.Topics...)
		}
		resp.Mirrors = append(resp.Mirrors, listed)
	}
	return resp, nil
}

func serveDescribeClusterMirrors(ctx context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*mirrorwire.DescribeClusterMirrorsRequest)
	resp := req.ResponseKind().(*mirrorwire.DescribeClusterMirrorsResponse)
	if err := describeMirrors(ctx, c, req, resp); err != nil {
		resp.Mirrors = nil
		resp.ErrorHead = mirrorErrorAnswer(c, err)
		return resp, nil
	}
	if err := lookUpLastMirrorEpochs(ctx, c, req, resp); err != nil {
		resp.Mirrors, resp.LastMirrorEpochs = nil, nil
		resp.ErrorHead = mirrorErrorAnswer(c, err)
		return resp, nil
	}
	resp.OfflinePartitions = describedOffline(c)
	return resp, nil
}

// describeMirrors fills resp.Mirrors with the mirrors req names.
func describeMirrors(ctx context.Context, c *conn, req *mirrorwire.DescribeClusterMirrorsRequest, resp *mirrorwire.DescribeClusterMirrorsResponse) error {
	if req.MirrorNames != nil && len(req.MirrorNames) == 0 {
		return nil
	}
	var names []string
	if req.MirrorNames != nil {
		names = make([]string, 0, len(req.MirrorNames))
		seen := make(map[string]bool, len(req.MirrorNames)) // bounded by the request
		for _, name := range req.MirrorNames {
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	descriptions, err := mirrorAdmin(c).DescribeMirrors(ctx, names, req.FailedOnly)
	if err != nil {
		return err
	}
	for i := range descriptions {
		if !c.authorize(opDescribe, resourceClusterMirror, descriptions[i].Name) {
			descriptions[i] = MirrorDescription{Name: descriptions[i].Name, Err: ErrClusterMirrorAuthorizationFailed}
		}
		m := describedMirror(c, &descriptions[i])
		if req.IncludeAuthorizedOperations && m.ErrorCode == 0 {
			m.AuthorizedOperations = c.authorizedOperations(resourceClusterMirror, m.MirrorName)
		}
		resp.Mirrors = append(resp.Mirrors, m)
	}
	return nil
}

// describedMirror is the answer for one mirror; its partitions come sorted
// by topic, so each topic's partitions are consecutive.
func describedMirror(c *conn, d *MirrorDescription) mirrorwire.DescribeClusterMirrorsMirror {
	var m mirrorwire.DescribeClusterMirrorsMirror
	m.Default()
	m.MirrorName = d.Name
	if d.Err != nil {
		m.ErrorCode = errorCode(c.server.log, d.Err, kerr.UnknownServerError)
		m.ErrorMessage = errorMessage(d.Err)
		return m
	}
	m.SourceBootstrap, m.SourceClusterID = nonEmpty(d.SourceBootstrap), nonEmpty(d.SourceClusterID)
	if !d.SourceUnreachableSince.IsZero() {
		m.SourceUnreachableSinceMillis, m.SourceError = max(d.SourceUnreachableSince.UnixMilli(), 0), nonEmpty(d.SourceError)
	}
	if d.GroupSync != nil {
		m.GroupSync = describedGroupSync(d.GroupSync)
	}
	if s := d.ACLSync; s != nil {
		m.ACLSync = &mirrorwire.DescribeClusterMirrorsACLSync{LastSyncMillis: -1, ACLsSynced: clampInt32(s.Synced),
			FailedRounds: s.FailedRounds, ErrorMessage: nonEmpty(s.Error)}
		if !s.At.IsZero() {
			m.ACLSync.LastSyncMillis, m.ACLSync.DurationMillis = max(s.At.UnixMilli(), 0), max(s.Duration.Milliseconds(), 0)
		}
	}
	for _, status := range d.Partitions {
		if n := len(m.Topics); n == 0 || m.Topics[n-1].TopicName != status.Topic {
			m.Topics = append(m.Topics, mirrorwire.DescribeClusterMirrorsTopic{TopicName: status.Topic})
		}
		topic := &m.Topics[len(m.Topics)-1]
		lowerBound := int64(-1)
		if status.Stale {
			lowerBound = status.LagAtLeast()
		}
		leader := int32(-1) // a node alone: neither leader nor ISR
		if len(status.ISR) > 0 {
			leader = max(status.Leader, -1)
		}
		topic.Partitions = append(topic.Partitions, mirrorwire.DescribeClusterMirrorsPartition{
			PartitionIndex:        status.Partition,
			StateValue:            status.State,
			ErrorMessage:          nonEmpty(status.Error),
			RetryAttempt:          status.RetryCount,
			SourceOffset:          status.SourceHighWatermark,
			DestinationOffset:     status.LogEndOffset,
			Lag:                   status.Lag(),
			LastMirrorEpoch:       status.LastMirrorEpoch,
			LastMirrorOffset:      status.LastMirrorOffset,
			LagMillis:             millisOrUnknown(status.LagTime),
			SourceOffsetAgeMillis: millisOrUnknown(status.SourceHighWatermarkAge),
			LagLowerBound:         lowerBound,
			LeaderEpoch:           max(status.LeaderEpoch, -1),
			SourceLeaderEpoch:     max(status.SourceLeaderEpoch, -1),
			Leader:                leader,
			ISR:                   status.ISR,
		})
	}
	return m
}

// describedGroupSync is the wire form of a group sync round.
func describedGroupSync(g *MirrorGroupSync) *mirrorwire.DescribeClusterMirrorsGroupSync {
	out := &mirrorwire.DescribeClusterMirrorsGroupSync{LastSyncMillis: -1, GroupsSynced: clampInt32(g.Synced), GroupsSkipped: clampInt32(g.Skipped),
		FailedRounds: g.FailedRounds, ErrorMessage: nonEmpty(g.Error)}
	if !g.At.IsZero() {
		out.LastSyncMillis, out.DurationMillis = max(g.At.UnixMilli(), 0), max(g.Duration.Milliseconds(), 0)
	}
	for _, group := range g.Groups {
		out.Groups = append(out.Groups, mirrorwire.DescribeClusterMirrorsGroupSyncGroup{GroupID: group.Group, OffsetLag: group.OffsetLag, Skipped: group.Skipped})
	}
	return out
}

// clampInt32 is n, or the int32 nearest it.
func clampInt32(n int) int32 {
	return int32(min(max(n, math.MinInt32), math.MaxInt32))
}

// millisOrUnknown is d in milliseconds, -1 for a negative d (unknown):
// -1 ns is not 0 ms.
func millisOrUnknown(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

// lookUpLastMirrorEpochs answers req's lookups in resp.LastMirrorEpochs.
func lookUpLastMirrorEpochs(ctx context.Context, c *conn, req *mirrorwire.DescribeClusterMirrorsRequest, resp *mirrorwire.DescribeClusterMirrorsResponse) error {
	if len(req.LastMirrorEpochLookups) == 0 {
		return nil
	}
	if req.ClusterID == nil || *req.ClusterID == "" {
		return refuse(kerr.InvalidRequest, "LastMirrorEpochLookups without the asking cluster's ClusterId.")
	}
	lookups := make([]TopicPartitions, 0, len(req.LastMirrorEpochLookups))
	var denied []TopicPartitions
	for _, lookup := range req.LastMirrorEpochLookups {
		asked := TopicPartitions{TopicID: lookup.TopicID, Partitions: lookup.Partitions}
		if t, ok := c.server.backend.TopicByID(lookup.TopicID); ok && !c.authorize(opDescribe, resourceTopic, t.Name) {
			denied = append(denied, asked)
			continue
		}
		lookups = append(lookups, asked)
	}
	var epochs []LastMirrorEpoch
	if len(lookups) > 0 {
		var err error
		if epochs, err = mirrorAdmin(c).LastMirrorEpochs(ctx, *req.ClusterID, lookups); err != nil {
			return err
		}
	}
	for _, lookup := range denied {
		for _, partition := range lookup.Partitions {
			epochs = append(epochs, LastMirrorEpoch{TopicID: lookup.TopicID, Partition: partition, Err: kerr.TopicAuthorizationFailed, Epoch: -1, Offset: -1})
		}
	}
	topics := make(map[TopicID]int, len(req.LastMirrorEpochLookups)) // index in resp.LastMirrorEpochs
	for _, epoch := range epochs {
		i, ok := topics[epoch.TopicID]
		if !ok {
			i = len(resp.LastMirrorEpochs)
			topics[epoch.TopicID] = i
			resp.LastMirrorEpochs = append(resp.LastMirrorEpochs, mirrorwire.DescribeClusterMirrorsEpochTopic{TopicID: epoch.TopicID})
		}
		resp.LastMirrorEpochs[i].Partitions = append(resp.LastMirrorEpochs[i].Partitions, mirrorwire.DescribeClusterMirrorsEpochPartition{
			PartitionIndex:   epoch.Partition,
			ErrorCode:        errorCode(c.server.log, epoch.Err, kerr.UnknownServerError),
			LastMirrorEpoch:  epoch.Epoch,
			LastMirrorOffset: epoch.Offset,
		})
	}
	return nil
}
