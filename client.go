package mirrord

// The mirror administration of a node reached over its Kafka listener:
// Client sends the mirror admin RPCs (mirrorwire, keys 1000-1008)
// with a franz-go client and turns the answers into netio's types, the
// inverse of netio/1000_mirror_admin.go. It is an Admin, as Node.Admin
// is, so the same code administers a node in this process or one across
// the network.
//
// Errors: a Kafka error code in an answer is an error wrapping its kerr
// error (errors.Is(err, kerr.ResourceNotFound)), its text the code's name
// and the node's message; a node that does not answer, or does not serve
// the mirror RPCs, is an error naming the bootstrap servers.
//
// `mirrord mirrors` is built on it.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/mirrorwire"
	"github.com/mirrord/mirrord/netio"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminRequestTimeout bounds the TLS and SASL handshakes of the
// connection to the node (a request is bounded by its ctx).
const adminRequestTimeout = 60 * time.Second

// Client administers the mirrors of one node over the network: the
// Admin of a node reached through its Kafka listener (Dial). It is safe
// for concurrent use; Close releases it.
type Client struct {
	client    *kgo.Client
	bootstrap string
	served    map[int16]bool // the mirror keys the node advertises; read-only after Dial
}

// Dial connects to the node at bootstrap (HOST:PORT, comma-separated
// for several) and checks that it serves the mirror admin RPCs.
// commandConfig holds the connection's security properties as Kafka's
// tools take them (security.protocol, ssl.*, sasl.*; nil or empty:
// PLAINTEXT), parsed as a mirror config's security keys are.
func Dial(ctx context.Context, bootstrap string, commandConfig map[string]string) (*Client, error) {
	security, err := adminSecurityOptions(commandConfig)
	if err != nil {
		return nil, err
	}
	var seeds []string
	for _, seed := range strings.Split(bootstrap, ",") {
		if seed = strings.TrimSpace(seed); seed != "" {
			seeds = append(seeds, seed)
		}
	}
	if len(seeds) == 0 {
		return nil, errors.New("no bootstrap server")
	}
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.MaxVersions(netio.MirrorClientVersions()),
		kgo.ClientID("mirrord-mirrors"), kgo.RequestRetries(2), kgo.DialTimeout(10 * time.Second)}, security...)...)
	if err != nil {
		return nil, fmt.Errorf("bootstrap %q: %w", bootstrap, err)
	}
	resp, err := client.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("%s: %w", bootstrap, err)
	}
	served := map[int16]bool{} // bounded by the mirror keys
	for _, key := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
		if mirrorwire.KeyName(key.ApiKey) != "" {
			served[key.ApiKey] = true
		}
	}
	return &Client{client: client, bootstrap: bootstrap, served: served}, nil
}

// adminSecurityOptions turns the connection's security properties into
// client options, with the mirror config's parser of the security keys
// (a key that is not one is refused; a secret is never shown). The files
// they name are read from anywhere: the caller runs as its user.
func adminSecurityOptions(config map[string]string) ([]kgo.Opt, error) {
	if len(config) == 0 {
		return nil, nil
	}
	security, err := engine.ParseClientSecurity(config)
	if err != nil {
		return nil, err
	}
	return security.ClientOptions("", adminRequestTimeout, nil)
}

// Close closes the connections to the node.
func (c *Client) Close() { c.client.Close() }

// request sends req, which the node must serve.
func (c *Client) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if !c.served[req.Key()] {
		return nil, fmt.Errorf("%s does not serve %s (API key %d): not a mirrord node, or one without mirroring",
			c.bootstrap, mirrorwire.KeyName(req.Key()), req.Key())
	}
	resp, err := c.client.Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.bootstrap, mirrorwire.KeyName(req.Key()), err)
	}
	return resp, nil
}

// adminError is an error code the node answered, with its message.
type adminError struct {
	code *kerr.Error
	text string
}

func (e *adminError) Error() string { return e.text }
func (e *adminError) Unwrap() error { return e.code }

// kafkaError is an answer's error code and message as an error wrapping
// the code's kerr error, nil for no error. Its text is the code's name,
// then the message unless the message already opens with the name.
func kafkaError(code int16, message *string) error {
	if code == 0 {
		return nil
	}
	known, ok := kerr.ErrorForCode(code).(*kerr.Error)
	switch {
	case code == netio.ErrClusterMirrorAuthorizationFailed.Code: // KIP-1279's, unknown to kerr
		known = netio.ErrClusterMirrorAuthorizationFailed
	case !ok || known.Code != code:
		known = &kerr.Error{Message: fmt.Sprintf("error code %d", code), Code: code, Description: "an error code this client does not know"}
	}
	text := known.Message
	switch {
	case message == nil || *message == "":
	case strings.HasPrefix(*message, known.Message):
		text = *message
	default:
		text += ": " + *message
	}
	return &adminError{code: known, text: text}
}

// CreateMirror creates the mirror name with config (the mirror config
// keys, bootstrap.servers required); the node validates them.
func (c *Client) CreateMirror(ctx context.Context, name string, config map[string]string) error {
	req := &mirrorwire.CreateClusterMirrorRequest{MirrorName: name}
	keys := make([]string, 0, len(config))
	for key := range config {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		req.Configs = append(req.Configs, mirrorwire.CreateClusterMirrorConfig{Name: key, Value: new(config[key])})
	}
	resp, err := c.request(ctx, req)
	if err != nil {
		return err
	}
	r := resp.(*mirrorwire.CreateClusterMirrorResponse)
	return kafkaError(r.ErrorCode, r.ErrorMessage)
}

// DeleteMirror deletes the mirror name.
func (c *Client) DeleteMirror(ctx context.Context, name string) error {
	resp, err := c.request(ctx, &mirrorwire.DeleteClusterMirrorRequest{MirrorName: name})
	if err != nil {
		return err
	}
	r := resp.(*mirrorwire.DeleteClusterMirrorResponse)
	return kafkaError(r.ErrorCode, r.ErrorMessage)
}

// SetTopicsDesiredState applies change to the topics of mirror that
// topics selects and returns each topic's result, as the node gives them
// (sorted by name); a failure of the whole request is the error.
func (c *Client) SetTopicsDesiredState(ctx context.Context, mirror string, change netio.TopicsChange, topics netio.TopicSelection) ([]netio.TopicResult, error) {
	req := &mirrorwire.MirrorTopicsRequest{Change: change, MirrorName: mirror, IncludePatterns: topics.Include, ExcludePatterns: topics.Exclude}
	for _, name := range topics.Names {
		req.Topics = append(req.Topics, mirrorwire.MirrorTopicsRequestTopic{TopicName: name})
	}
	resp, err := c.request(ctx, req)
	if err != nil {
		return nil, err
	}
	r := resp.(*mirrorwire.MirrorTopicsResponse)
	if err := kafkaError(r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, err
	}
	results := make([]netio.TopicResult, 0, len(r.Topics))
	for _, topic := range r.Topics {
		results = append(results, netio.TopicResult{Topic: topic.TopicName, Err: kafkaError(topic.ErrorCode, topic.ErrorMessage)})
	}
	return results, nil
}

// ListMirrors lists the mirrors the node lets this client describe,
// sorted by name, with their topics.
func (c *Client) ListMirrors(ctx context.Context) ([]netio.MirrorListing, error) {
	resp, err := c.request(ctx, &mirrorwire.ListClusterMirrorsRequest{IncludeTopicNames: true})
	if err != nil {
		return nil, err
	}
	r := resp.(*mirrorwire.ListClusterMirrorsResponse)
	if err := kafkaError(r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, err
	}
	listings := make([]netio.MirrorListing, 0, len(r.Mirrors))
	for _, m := range r.Mirrors {
		listings = append(listings, netio.MirrorListing{Name: m.MirrorName, SourceBootstrap: m.SourceBootstrap, SourceClusterID: m.SourceClusterID,
			Topics: m.TopicNames})
	}
	return listings, nil
}

// DescribeMirrors describes the named mirrors in the order named (a name
// that is no mirror: its description's Err wraps kerr.ResourceNotFound),
// or every mirror, sorted by name, when names is nil. failedOnly keeps
// only the FAILED partitions. Times and durations come to the
// millisecond.
//
// On a cluster (rows with a leader) each partition's row is its leader's:
// only the leader knows the source's high watermark, so the lag of a
// partition another node leads is unknown in the first node's answer.
// The leaders are asked too, and their own rows replace those (a leader
// that does not answer leaves the first answer's row).
func (c *Client) DescribeMirrors(ctx context.Context, names []string, failedOnly bool) ([]netio.MirrorDescription, error) {
	req := &mirrorwire.DescribeClusterMirrorsRequest{MirrorNames: names, FailedOnly: failedOnly}
	r, err := c.describe(ctx, req)
	if err != nil {
		return nil, err
	}
	descriptions := make([]netio.MirrorDescription, 0, len(r.Mirrors))
	for i := range r.Mirrors {
		descriptions = append(descriptions, mirrorDescriptionOf(&r.Mirrors[i]))
	}
	c.fromLeaders(ctx, req, descriptions)
	return descriptions, nil
}

// leaderDescribeWait bounds the describe requests to a cluster's leaders.
const leaderDescribeWait = 5 * time.Second

// fromLeaders replaces, in descriptions, each partition's row with the
// one its leader answers req with.
func (c *Client) fromLeaders(ctx context.Context, req *mirrorwire.DescribeClusterMirrorsRequest, descriptions []netio.MirrorDescription) {
	leaders := map[int32]bool{} // bounded by the cluster's nodes
	for _, d := range descriptions {
		for _, p := range d.Partitions {
			if p.Leader >= 0 {
				leaders[p.Leader] = true
			}
		}
	}
	if len(leaders) == 0 {
		return
	}
	type key struct {
		mirror, topic string
		partition     int32
	}
	// The leaders are asked at once, and a leader that does not answer
	// in leaderDescribeWait (a node just killed, whose partitions the
	// cluster has not moved yet) leaves its rows as they were.
	ctx, cancel := context.WithTimeout(ctx, leaderDescribeWait)
	defer cancel()
	var mu sync.Mutex
	rows := map[key]netio.MirrorPartitionStatus{}
	var wg sync.WaitGroup
	for leader := range leaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := *req // kgo sets the version on the request it sends
			resp, err := c.client.Broker(int(leader)).Request(ctx, &own)
			if err != nil {
				return
			}
			r := resp.(*mirrorwire.DescribeClusterMirrorsResponse)
			if kafkaError(r.ErrorCode, r.ErrorMessage) != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for i := range r.Mirrors {
				d := mirrorDescriptionOf(&r.Mirrors[i])
				for _, p := range d.Partitions {
					if p.Leader == leader {
						rows[key{d.Name, p.Topic, p.Partition}] = p
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, d := range descriptions {
		for i, p := range d.Partitions {
			if row, ok := rows[key{d.Name, p.Topic, p.Partition}]; ok {
				d.Partitions[i] = row
			}
		}
	}
}

// OfflinePartitions lists the node's partitions whose log could not be
// opened (they answer KAFKA_STORAGE_ERROR), mirrored or not, sorted. It
// is not part of the engine's MirrorAdmin: the node (broker.Node's
// OfflineLogs) holds them.
func (c *Client) OfflinePartitions(ctx context.Context) ([]netio.OfflineLog, error) {
	r, err := c.describe(ctx, &mirrorwire.DescribeClusterMirrorsRequest{MirrorNames: []string{}}) // no mirror: the offline list only
	if err != nil {
		return nil, err
	}
	offline := make([]netio.OfflineLog, 0, len(r.OfflinePartitions))
	for _, p := range r.OfflinePartitions {
		offline = append(offline, netio.OfflineLog{Topic: p.TopicName, Partition: p.PartitionIndex, Error: p.ErrorMessage})
	}
	return offline, nil
}

// describe sends a DescribeClusterMirrors request and checks the
// top-level error.
func (c *Client) describe(ctx context.Context, req *mirrorwire.DescribeClusterMirrorsRequest) (*mirrorwire.DescribeClusterMirrorsResponse, error) {
	resp, err := c.request(ctx, req)
	if err != nil {
		return nil, err
	}
	r := resp.(*mirrorwire.DescribeClusterMirrorsResponse)
	if err := kafkaError(r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, err
	}
	return r, nil
}

// mirrorDescriptionOf is one described mirror in netio's terms.
func mirrorDescriptionOf(m *mirrorwire.DescribeClusterMirrorsMirror) netio.MirrorDescription {
	d := netio.MirrorDescription{Name: m.MirrorName}
	if d.Err = kafkaError(m.ErrorCode, m.ErrorMessage); d.Err != nil {
		return d
	}
	d.SourceBootstrap, d.SourceClusterID = stringOrEmpty(m.SourceBootstrap), stringOrEmpty(m.SourceClusterID)
	if m.SourceUnreachableSinceMillis >= 0 {
		d.SourceUnreachableSince, d.SourceError = time.UnixMilli(m.SourceUnreachableSinceMillis), stringOrEmpty(m.SourceError)
	}
	if g := m.GroupSync; g != nil {
		d.GroupSync = &netio.MirrorGroupSync{At: unixMilliOrZero(g.LastSyncMillis), Duration: time.Duration(g.DurationMillis) * time.Millisecond,
			Synced: int(g.GroupsSynced), Skipped: int(g.GroupsSkipped), FailedRounds: g.FailedRounds, Error: stringOrEmpty(g.ErrorMessage)}
		for _, group := range g.Groups {
			d.GroupSync.Groups = append(d.GroupSync.Groups, netio.MirrorGroupSyncGroup{Group: group.GroupID, OffsetLag: group.OffsetLag, Skipped: group.Skipped})
		}
	}
	if s := m.ACLSync; s != nil {
		d.ACLSync = &netio.MirrorACLSync{At: unixMilliOrZero(s.LastSyncMillis), Duration: time.Duration(s.DurationMillis) * time.Millisecond,
			Synced: int(s.ACLsSynced), FailedRounds: s.FailedRounds, Error: stringOrEmpty(s.ErrorMessage)}
	}
	for _, topic := range m.Topics {
		for _, p := range topic.Partitions {
			d.Partitions = append(d.Partitions, netio.MirrorPartitionStatus{
				Topic: topic.TopicName, Partition: p.PartitionIndex, State: p.StateValue, Error: stringOrEmpty(p.ErrorMessage), RetryCount: p.RetryAttempt,
				SourceHighWatermark: p.SourceOffset, SourceHighWatermarkAge: durationOrUnknown(p.SourceOffsetAgeMillis),
				Stale:        p.LagLowerBound >= 0, // the node sends a lower bound for a stale source high watermark only
				LogEndOffset: p.DestinationOffset, LastMirrorEpoch: p.LastMirrorEpoch, LastMirrorOffset: p.LastMirrorOffset,
				LagTime: durationOrUnknown(p.LagMillis), LeaderEpoch: p.LeaderEpoch, SourceLeaderEpoch: p.SourceLeaderEpoch,
				Leader: p.Leader, ISR: p.ISR, // -1 and nil from a node alone
			})
		}
	}
	return d
}

// unixMilliOrZero is the time of Unix milliseconds, zero for -1 (none).
func unixMilliOrZero(millis int64) time.Time {
	if millis < 0 {
		return time.Time{}
	}
	return time.UnixMilli(millis)
}

// durationOrUnknown is millis as a duration, -1 for -1 (unknown), as the
// engine gives an unknown duration.
func durationOrUnknown(millis int64) time.Duration {
	if millis < 0 {
		return -1
	}
	return time.Duration(millis) * time.Millisecond
}

// stringOrEmpty is *s, "" for null.
func stringOrEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
