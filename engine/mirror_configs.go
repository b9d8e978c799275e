package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic config sync (KIP-1279): with each consumer group offset sync
// round a mirror copies, for every topic it is mirroring (a partition
// MIRRORING), the source topic's dynamic configs (DescribeConfigs: the
// DYNAMIC_TOPIC_CONFIG ones, set on the topic) minus those matching
// topic.properties.exclude, as the mirror topic's overrides
// (broker.Node.SetTopicConfigs, persisted, origin "mirror <name>"; on a
// cluster, the topic's spec in etcd, which every replica applies). A
// mirror topic refuses a client's AlterConfigs (it is read-only): its
// configs are the source's. A topic stopped (failed over) keeps the last
// configs copied and is writable, its configs its clients' from then on.
// The bytes a mirror appends are the source's whatever the configs say
// (no recompression, no restamping); the log's own settings (segments,
// retention of the mirror's copy, compaction by the local cleaner, as a
// Kafka follower cleans) follow them.

// configOrigin names a mirror as the writer of its topics' configs.
func configOrigin(mirror string) string { return "mirror " + mirror }

// syncConfigs runs one topic config sync round.
func (m *mirror) syncConfigs(ctx context.Context) {
	m.cfgSync.runRound(ctx, m, "topic config sync", m.syncConfigsRound)
}

// syncConfigsRound describes the mirrored topics' configs on the source
// and sets what changed.
func (m *mirror) syncConfigsRound(ctx context.Context) (int, error) {
	topics := map[string]bool{}
	for tp := range m.mirroringPartitions() {
		topics[tp.Topic] = true
	}
	if len(topics) == 0 {
		return 0, nil
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	ctx, cancel := context.WithTimeout(ctx, m.config.RequestTimeout)
	defer cancel()
	described, err := kadm.NewClient(m.client).DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return 0, fmt.Errorf("describe the source's topic configs: %w", err)
	}
	var errs []error
	synced := 0
	for _, rc := range described {
		if rc.Err != nil {
			errs = append(errs, fmt.Errorf("describe the configs of source topic %s: %w", rc.Name, rc.Err))
			continue
		}
		overrides := map[string]string{}
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil && !m.config.TopicPropertiesExclude.Matches(c.Key) {
				overrides[c.Key] = *c.Value
			}
		}
		var err error
		if m.node.member != nil {
			err = m.node.setClusterTopicConfigs(ctx, rc.Name, overrides) // cluster_configs.go
		} else {
			current, origin, cerr := m.node.TopicConfigs(rc.Name)
			if err = cerr; err == nil && (!maps.Equal(current, overrides) || origin != configOrigin(m.name)) {
				err = m.node.SetTopicConfigs(rc.Name, overrides, configOrigin(m.name))
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("set the configs of mirror topic %s: %w", rc.Name, err))
			continue
		}
		synced++
	}
	return synced, errors.Join(errs...)
}
