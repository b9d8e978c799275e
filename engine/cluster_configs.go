package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mirrord/mirrord/cluster"
	"github.com/mirrord/mirrord/netio"
)

// Topic configs on a cluster: a topic's configs are its spec's in etcd
// (cluster.TopicSpec.Configs), which every node's reconcile applies to its
// replicas. An AlterConfigs through any node writes the spec by
// compare-and-swap (checked as Kafka checks it first), DescribeConfigs
// answers from the spec whether or not the node holds a replica, and a
// mirror's topic config sync writes the source's configs to the spec, so
// followers and a new leader have them too. A mirror topic refuses a
// client's AlterConfigs until its stop, as on a node alone. Broker configs
// and the node's internal topics stay the node's own.

// clusterConfigs is a cluster node's netio.Configs.
type clusterConfigs struct{ b clusterBackend }

// Configs is the cluster's topic configs and the node's own.
func (b clusterBackend) Configs() netio.Configs { return clusterConfigs{b} }

func (c clusterConfigs) local() netio.Configs { return c.b.Node.Node.Configs() }

func (c clusterConfigs) DescribeConfigs(resource netio.ConfigResource, names []string) ([]netio.ConfigEntry, error) {
	if resource.Type != netio.ConfigResourceTopic {
		return c.local().DescribeConfigs(resource, names)
	}
	st, ok := c.b.cache().Topic(resource.Name)
	if !ok {
		return c.local().DescribeConfigs(resource, names) // an internal topic of the node's, or unknown
	}
	return c.b.DescribeTopicOverrides(st.Configs, names), nil
}

func (c clusterConfigs) AlterConfigs(ctx context.Context, resource netio.ConfigResource, changes []netio.ConfigChange, incremental, validateOnly bool) error {
	if resource.Type != netio.ConfigResourceTopic {
		return c.local().AlterConfigs(ctx, resource, changes, incremental, validateOnly)
	}
	name := resource.Name
	st, ok := c.b.cache().Topic(name)
	if !ok {
		return c.local().AlterConfigs(ctx, resource, changes, incremental, validateOnly)
	}
	if err := c.b.refuseMirrorTopic(name, st, "AlterConfigs"); err != nil {
		return err
	}
	if validateOnly {
		_, err := c.b.AlteredTopicOverrides(st.Configs, changes, incremental)
		return err
	}
	written, err := cluster.UpdateTopicConfigs(ctx, c.b.member.client, c.b.member.id, name, func(spec cluster.TopicSpec) (map[string]string, bool, error) {
		if err := c.b.refuseMirrorTopic(name, cluster.TopicState{TopicSpec: spec}, "AlterConfigs"); err != nil {
			return nil, false, err
		}
		configs, err := c.b.AlteredTopicOverrides(spec.Configs, changes, incremental)
		return configs, err == nil && !maps.Equal(configs, spec.Configs), err
	})
	if err != nil {
		return clusterTopicError(name, err)
	}
	return c.b.waitConfigs(ctx, name, written.ModRevision)
}

// refuseMirrorTopic refuses action on a topic of a mirror the cluster has
// that is not stopped (every partition's record STOPPED).
func (b clusterBackend) refuseMirrorTopic(name string, st cluster.TopicState, action string) error {
	if st.Mirror == "" {
		return nil
	}
	if _, live := b.cache().MirrorCreateRevision(st.Mirror); !live {
		return nil
	}
	if b.stopDone(st.Mirror, name, st) != nil {
		return mirrorTopicRefusal(name, st.Mirror)(action)
	}
	return nil
}

// waitConfigs waits, bounded, until the node's cache holds the spec
// written at revision: a DescribeConfigs after an AlterConfigs through
// this node finds what it wrote.
func (b clusterBackend) waitConfigs(ctx context.Context, name string, revision int64) error {
	ctx, cancel := context.WithTimeout(ctx, clusterCreateTopicWait)
	defer cancel()
	if err := b.cache().WaitRevision(ctx, revision); err != nil {
		return fmt.Errorf("engine: topic %s: this node's view of etcd is behind: %w: %w", name, err, kerr.RequestTimedOut)
	}
	return nil
}

// clusterTopicError is the Kafka error of a failed write of a topic's
// spec: the topic gone is UNKNOWN_TOPIC_OR_PARTITION; a Kafka error (a bad
// config) stands.
func clusterTopicError(name string, err error) error {
	var kafka *kerr.Error
	switch {
	case errors.Is(err, cluster.ErrUnknownTopic):
		return netio.Errorf(kerr.UnknownTopicOrPartition, "The topic '%s' does not exist.", name)
	case errors.As(err, &kafka):
		return err
	}
	return fmt.Errorf("engine: topic %s: %w", name, err)
}

// setClusterTopicConfigs is a mirror's config sync on a cluster: the
// source's configs become the mirror topic's spec's (written only when
// they differ).
func (n *Node) setClusterTopicConfigs(ctx context.Context, name string, overrides map[string]string) error {
	_, err := cluster.UpdateTopicConfigs(ctx, n.member.client, n.member.id, name, func(spec cluster.TopicSpec) (map[string]string, bool, error) {
		return overrides, !maps.Equal(overrides, spec.Configs), nil
	})
	return err
}
