package broker

// DescribeConfigs and the alters of topic configs (netio.Configs), and
// SetTopicConfigs, the call a mirror's config sync sets a mirror topic's
// overrides with.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/mirrord/mirrord/netio"
	"github.com/twmb/franz-go/pkg/kerr"
)

// nodeSettings are the settings of a topic without overrides.
func (n *Node) nodeSettings() topicSettings {
	s := topicSettings{log: n.cfg.Log, limits: nodeProduceLimits(n.cfg)}
	applyPolicies(&s, func(key string) string { return n.topicValue(key, nil) })
	return s
}

// apply makes overrides the topic's and their settings its partitions';
// n.mu is held (or the node is not yet shared).
func (t *topic) apply(overrides map[string]string, settings topicSettings, origin string) error {
	for _, p := range online(t.partitions) { // RebuildPartition gives an offline one the topic's
		if err := p.log.SetConfig(settings.log); err != nil {
			return fmt.Errorf("broker: topic %s: %w", t.name, err)
		}
		limits := settings.limits
		p.limits.Store(&limits)
	}
	t.overrides, t.settings, t.origin = overrides, settings, origin
	return nil
}

// Configs is the node's configs (netio.Configs).
func (n *Node) Configs() netio.Configs { return n }

// DescribeConfigs describes a topic's configs or the node's
// (netio.Configs).
func (n *Node) DescribeConfigs(resource netio.ConfigResource, names []string) ([]netio.ConfigEntry, error) {
	switch resource.Type {
	case netio.ConfigResourceTopic:
		n.mu.RLock()
		defer n.mu.RUnlock()
		t, ok := n.topics[resource.Name]
		if !ok {
			return nil, netio.Errorf(kerr.UnknownTopicOrPartition, "The topic '%s' does not exist.", resource.Name)
		}
		return n.topicConfigEntries(t.overrides, names), nil
	case netio.ConfigResourceBroker:
		if err := n.checkBrokerResource(resource.Name); err != nil {
			return nil, err
		}
		if resource.Name == "" {
			return clusterDefaultEntries(names), nil
		}
		return n.brokerConfigEntries(names), nil
	}
	return nil, netio.Errorf(kerr.InvalidRequest, "mirrord does not describe config resources of type %d", resource.Type)
}

// checkBrokerResource checks a broker resource's name: this node's ID,
// or "" for the cluster default.
func (n *Node) checkBrokerResource(name string) error {
	id := n.Cluster().NodeID
	if name == "" || name == strconv.Itoa(int(id)) {
		return nil
	}
	return netio.Errorf(kerr.InvalidRequest, "Unexpected broker id, expected %d or empty string, but received %s", id, name)
}

// AlterConfigs alters a topic's overrides (netio.Configs). A read-only
// topic refuses: its configs are its writer's (SetTopicConfigs). The
// node's own configs come from its config file and are refused.
func (n *Node) AlterConfigs(_ context.Context, resource netio.ConfigResource, changes []netio.ConfigChange, incremental, validateOnly bool) error {
	switch resource.Type {
	case netio.ConfigResourceTopic:
	case netio.ConfigResourceBroker:
		if err := n.checkBrokerResource(resource.Name); err != nil {
			return err
		}
		return netio.Errorf(kerr.InvalidRequest, "mirrord takes its broker configs from its config file (mirrord serve --config) at start, not while it runs")
	default:
		return netio.Errorf(kerr.InvalidRequest, "mirrord does not alter config resources of type %d", resource.Type)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.topics[resource.Name]
	if !ok {
		return netio.Errorf(kerr.UnknownTopicOrPartition, "The topic '%s' does not exist.", resource.Name)
	}
	if err := t.refuseIfReadOnly("AlterConfigs"); err != nil {
		return err
	}
	if t.internal {
		return errInternalTopic(t.name)
	}
	configs, err := n.alteredOverrides(t.overrides, changes, incremental)
	if err != nil {
		return err
	}
	return n.setTopicConfigs(t, configs, "", validateOnly)
}

// alteredOverrides applies an alter's changes to a topic's overrides.
func (n *Node) alteredOverrides(current map[string]string, changes []netio.ConfigChange, incremental bool) (map[string]string, error) {
	configs := map[string]string{}
	if incremental {
		configs = maps.Clone(current)
	}
	for _, c := range changes {
		def, known := topicConfigDefs[c.Name]
		if !known {
			return nil, netio.Errorf(kerr.InvalidConfig, "Unknown topic config name: %s", c.Name)
		}
		switch c.Op {
		case netio.ConfigSet:
			configs[c.Name] = *c.Value
		case netio.ConfigDelete:
			delete(configs, c.Name)
		case netio.ConfigAppend, netio.ConfigSubtract:
			if def.typ != netio.ConfigTypeList {
				return nil, netio.Errorf(kerr.InvalidConfig, "Config value append is not allowed for config key: %s", c.Name)
			}
			list := splitList(n.topicValue(c.Name, configs))
			for _, item := range splitList(*c.Value) {
				switch {
				case c.Op == netio.ConfigAppend && !slices.Contains(list, item):
					list = append(list, item)
				case c.Op == netio.ConfigSubtract:
					list = slices.DeleteFunc(list, func(s string) bool { return s == item })
				}
			}
			configs[c.Name] = strings.Join(list, ",")
		}
	}
	return configs, nil
}

// SetTopicConfigs replaces every override of a topic with overrides, set
// by origin (a mirror's config sync: "mirror <name>"), read-only or not:
// it is the writer of a mirror topic's configs. Persisted before it
// returns; a bad config is kerr.InvalidConfig naming the key.
func (n *Node) SetTopicConfigs(topic string, overrides map[string]string, origin string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.topics[topic]
	if !ok || t.internal {
		return kerr.UnknownTopicOrPartition
	}
	return n.setTopicConfigs(t, overrides, origin, false)
}

// TopicConfigs returns a topic's overrides (as Kafka writes them) and who
// set them ("" a client).
func (n *Node) TopicConfigs(topic string) (map[string]string, string, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	t, ok := n.topics[topic]
	if !ok {
		return nil, "", kerr.UnknownTopicOrPartition
	}
	return maps.Clone(t.overrides), t.origin, nil
}

// setTopicConfigs checks, persists and applies a topic's new overrides;
// n.mu is held.
func (n *Node) setTopicConfigs(t *topic, configs map[string]string, origin string, validateOnly bool) error {
	overrides, settings, err := n.parseTopicConfigs(configs)
	if err != nil || validateOnly {
		return err
	}
	if err := n.saveTopicConfigs(t.name, storedTopicConfigs{id: t.id, origin: origin, overrides: overrides}); err != nil {
		return err
	}
	if err := t.apply(overrides, settings, origin); err != nil {
		return err
	}
	n.log.Info("topic configs set", "topic", t.name, "origin", origin, "configs", len(overrides))
	return nil
}

// AlteredTopicOverrides is what an alter's changes make of a topic's
// overrides (current), checked as Kafka checks them and written as Kafka
// writes them: a cluster's AlterConfigs, which writes the result to the
// topic's spec rather than to this node's topic.
func (n *Node) AlteredTopicOverrides(current map[string]string, changes []netio.ConfigChange, incremental bool) (map[string]string, error) {
	configs, err := n.alteredOverrides(current, changes, incremental)
	if err != nil {
		return nil, err
	}
	overrides, _, err := n.parseTopicConfigs(configs)
	return overrides, err
}

// DescribeTopicOverrides describes a topic of overrides this node does
// not hold (a cluster's topic placed on other nodes), as DescribeConfigs
// describes a topic it holds.
func (n *Node) DescribeTopicOverrides(overrides map[string]string, names []string) []netio.ConfigEntry {
	return n.topicConfigEntries(overrides, names)
}
