package broker

// Topic configs: a topic's overrides (the configs set on it, in the form
// Kafka writes them), what they set (topicSettings: the log's
// configuration, the Produce checks, the cleanup policy), and how
// DescribeConfigs reports each config with its source and synonyms as
// Kafka 4.4 does. Every topic config Kafka 4.4 accepts is accepted and
// stored; those without behaviour here are listed in inertTopicConfigs.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
)

// topicSettings is what a topic's configs set.
type topicSettings struct {
	log    logstore.Config
	limits produceLimits
}

// inertTopicConfigs are accepted, stored and described, and change
// nothing here, with why.
var inertTopicConfigs = map[string]string{
	"errors.deadletterqueue.group.enable":     "no share groups",
	"file.delete.delay.ms":                    "segments are deleted at once",
	"follower.replication.throttled.replicas": "one replica",
	"leader.replication.throttled.replicas":   "one replica",
	"local.retention.bytes":                   "no tiered storage",
	"local.retention.ms":                      "no tiered storage",
	"max.decompressed.message.bytes":          "batches are not decompressed on append",
	"preallocate":                             "segments grow as written",
	"remote.copy.lag.bytes":                   "no tiered storage",
	"remote.copy.lag.ms":                      "no tiered storage",
	"remote.log.copy.disable":                 "no tiered storage",
	"remote.log.delete.on.disable":            "no tiered storage",
	"remote.storage.enable":                   "no tiered storage: only false is accepted",
	"segment.jitter.ms":                       "segments roll at segment.ms exactly",
	"unclean.leader.election.enable":          "one replica: no election",
}

// applyLog sets a log or Produce setting from a topic override (parsed);
// the keys it lacks are policies (applyPolicies) or inert.
var applyLog = map[string]func(s *topicSettings, n int64){
	"retention.ms": func(s *topicSettings, n int64) { s.log.RetentionAge = millisOrUnlimited(n) },
	"retention.bytes": func(s *topicSettings, n int64) {
		s.log.RetentionBytes = max(n, 0)
		if n == 0 {
			s.log.RetentionBytes = 1 // keep nothing but the active segment, as Kafka's 0
		}
	},
	"segment.bytes":          func(s *topicSettings, n int64) { s.log.SegmentBytes = n },
	"internal.segment.bytes": nil, // settingsOf: it wins over segment.bytes
	"segment.ms":             func(s *topicSettings, n int64) { s.log.SegmentAge = time.Duration(n) * time.Millisecond },
	"segment.index.bytes":    func(s *topicSettings, n int64) { s.log.IndexBytesMax = int(n) },
	"index.interval.bytes":   func(s *topicSettings, n int64) { s.log.IndexIntervalBytes = n },
	"flush.messages": func(s *topicSettings, n int64) {
		if n == 1 {
			s.log.Flush = logstore.FlushEveryAppend
		}
	},
	"flush.ms": func(s *topicSettings, n int64) {
		if n > 0 && n < math.MaxInt64 && s.log.Flush != logstore.FlushEveryAppend {
			s.log.Flush, s.log.FlushInterval = logstore.FlushInterval, time.Duration(n)*time.Millisecond
		}
	},
	"max.message.bytes":               func(s *topicSettings, n int64) { s.limits.maxMessageBytes = n },
	"message.timestamp.before.max.ms": func(s *topicSettings, n int64) { s.limits.timestampBeforeMax = n },
	"message.timestamp.after.max.ms":  func(s *topicSettings, n int64) { s.limits.timestampAfterMax = n },
}

func millisOrUnlimited(n int64) time.Duration {
	if n < 0 {
		return 0
	}
	return time.Duration(n) * time.Millisecond
}

// renderNode writes the node's default of a log or Produce setting (the
// node's logstore.Config and limits) as Kafka writes the topic config.
var renderNode = map[string]func(s topicSettings) string{
	"retention.ms": func(s topicSettings) string { return millisText(s.log.RetentionAge, "-1") },
	"retention.bytes": func(s topicSettings) string {
		if s.log.RetentionBytes == 0 {
			return "-1"
		}
		return strconv.FormatInt(s.log.RetentionBytes, 10)
	},
	"segment.bytes": func(s topicSettings) string { return strconv.FormatInt(s.log.SegmentBytes, 10) },
	"segment.ms": func(s topicSettings) string {
		return millisText(s.log.SegmentAge, strconv.FormatInt(math.MaxInt64, 10))
	},
	"segment.index.bytes":  func(s topicSettings) string { return strconv.Itoa(s.log.IndexBytesMax) },
	"index.interval.bytes": func(s topicSettings) string { return strconv.FormatInt(s.log.IndexIntervalBytes, 10) },
	"flush.messages": func(s topicSettings) string {
		if s.log.Flush == logstore.FlushEveryAppend {
			return "1"
		}
		return strconv.FormatInt(math.MaxInt64, 10)
	},
	"flush.ms": func(s topicSettings) string {
		if s.log.Flush == logstore.FlushInterval {
			return millisText(s.log.FlushInterval, "0")
		}
		return strconv.FormatInt(math.MaxInt64, 10)
	},
	"max.message.bytes":               func(s topicSettings) string { return strconv.FormatInt(s.limits.maxMessageBytes, 10) },
	"message.timestamp.before.max.ms": func(s topicSettings) string { return strconv.FormatInt(s.limits.timestampBeforeMax, 10) },
	"message.timestamp.after.max.ms":  func(s topicSettings) string { return strconv.FormatInt(s.limits.timestampAfterMax, 10) },
}

func millisText(d time.Duration, zero string) string {
	if d == 0 {
		return zero
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// applyPolicies sets the policy settings from their effective values:
// the cleanup policy and the cleaner's settings (logstore.Config), and
// the Produce path's compression.type, compression levels and
// message.timestamp.type (produceLimits).
func applyPolicies(s *topicSettings, value func(key string) string) {
	policy := splitList(value("cleanup.policy"))
	switch compact, del := slices.Contains(policy, "compact"), slices.Contains(policy, "delete"); {
	case compact && del:
		s.log.Cleanup = logstore.CleanupCompactDelete
	case compact:
		s.log.Cleanup = logstore.CleanupCompact
	case del:
		s.log.Cleanup = logstore.CleanupDelete
	default:
		s.log.Cleanup = logstore.CleanupNone
	}
	s.limits.keyRequired = s.log.Cleanup.Compact()
	millis := func(key string) time.Duration { // parsed: a LONG of milliseconds; Long.MAX_VALUE is unlimited (0)
		n, _ := strconv.ParseInt(value(key), 10, 64)
		if n <= 0 || n > math.MaxInt64/int64(time.Millisecond) {
			return 0
		}
		return time.Duration(n) * time.Millisecond
	}
	s.log.DeleteRetention, s.log.MinCompactionLag, s.log.MaxCompactionLag = millis("delete.retention.ms"), millis("min.compaction.lag.ms"), millis("max.compaction.lag.ms")
	s.log.MinCleanableDirtyRatio, _ = strconv.ParseFloat(value("min.cleanable.dirty.ratio"), 64) // parsed: a DOUBLE in [0, 1]
	compression := value("compression.type")
	s.limits.compression, s.limits.keepCodec = compressionTypes[compression], compression == "producer"
	s.limits.logAppendTime = value("message.timestamp.type") == "LogAppendTime"
	if n, _ := strconv.Atoi(value("min.insync.replicas")); n > 1 { // parsed: an INT, at least 1
		s.limits.minInSyncReplicas = n
	}
	for key, codec := range map[string]rb.Codec{"compression.gzip.level": rb.CodecGzip, "compression.lz4.level": rb.CodecLZ4, "compression.zstd.level": rb.CodecZstd} {
		s.limits.levels[codec] = 0 // Kafka's default
		if level := value(key); level != *topicConfigDefs[key].kafkaDefault {
			n, _ := strconv.Atoi(level) // parsed: an INT
			s.limits.levels[codec] = n
		}
	}
}

// parseTopicConfigs checks a topic's overrides as Kafka does and returns
// them as Kafka writes them, with the settings they make on this node.
func (n *Node) parseTopicConfigs(configs map[string]string) (map[string]string, topicSettings, error) {
	overrides := make(map[string]string, len(configs))
	for key, value := range configs {
		def, ok := topicConfigDefs[key]
		if !ok {
			return nil, topicSettings{}, netio.Errorf(kerr.InvalidConfig, "Unknown topic config name: %s", key)
		}
		canonical, err := def.parse(value)
		if err != nil {
			return nil, topicSettings{}, err
		}
		overrides[key] = canonical
	}
	if overrides["remote.storage.enable"] == "true" {
		return nil, topicSettings{}, netio.Errorf(kerr.InvalidConfig,
			"Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")
	}
	settings, err := n.settingsOf(overrides)
	return overrides, settings, err
}

// settingsOf makes the settings of parsed overrides over the node's
// defaults, with Kafka's checks across configs.
func (n *Node) settingsOf(overrides map[string]string) (topicSettings, error) {
	s := topicSettings{log: n.cfg.Log, limits: nodeProduceLimits(n.cfg)}
	for key, value := range overrides {
		apply, ok := applyLog[key]
		if !ok || key == "internal.segment.bytes" {
			continue
		}
		number, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return s, fmt.Errorf("broker: topic config %s=%q: %w", key, value, err)
		}
		apply(&s, number)
	}
	if v, ok := overrides["internal.segment.bytes"]; ok { // wins over segment.bytes, as Kafka's segmentSize()
		number, _ := strconv.ParseInt(v, 10, 64)
		s.log.SegmentBytes = number
	}
	applyPolicies(&s, func(key string) string { return n.topicValue(key, overrides) })
	minLag, _ := strconv.ParseInt(n.topicValue("min.compaction.lag.ms", overrides), 10, 64)
	maxLag, _ := strconv.ParseInt(n.topicValue("max.compaction.lag.ms", overrides), 10, 64)
	if minLag > maxLag {
		return s, netio.Errorf(kerr.InvalidConfig, "conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)", minLag, maxLag)
	}
	if err := s.log.Validate(); err != nil {
		return s, fmt.Errorf("%w: %w", kerr.InvalidConfig, err)
	}
	return s, nil
}

// topicValue is a topic config's value for a topic of overrides: its
// override, else the node's default.
func (n *Node) topicValue(key string, overrides map[string]string) string {
	if v, ok := overrides[key]; ok {
		return v
	}
	v, _ := n.nodeTopicDefault(key)
	return v
}

// nodeTopicDefault is the node's default of a topic config and its
// source: the config file's broker synonym (STATIC_BROKER_CONFIG), else
// the node's log settings for the ones those hold, else Kafka's default.
func (n *Node) nodeTopicDefault(key string) (string, netio.ConfigSource) {
	def := topicConfigDefs[key]
	for _, s := range def.synonyms {
		if v, ok := s.topicValue(n.cfg.StaticConfigs); ok {
			if canonical, err := def.parse(v); err == nil {
				return canonical, netio.ConfigSourceStaticBroker
			}
		}
	}
	if v, ok := clusterDefaults[key]; ok {
		return v, netio.ConfigSourceClusterDefault
	}
	if render, ok := renderNode[key]; ok {
		return render(topicSettings{log: n.cfg.Log, limits: nodeProduceLimits(n.cfg)}), netio.ConfigSourceDefault
	}
	if def.kafkaDefault == nil {
		return "", netio.ConfigSourceDefault
	}
	return *def.kafkaDefault, netio.ConfigSourceDefault
}

// topicConfigEntries describes every topic config of a topic with
// overrides (names, when not nil, selects some), sorted by name.
func (n *Node) topicConfigEntries(overrides map[string]string, names []string) []netio.ConfigEntry {
	entries := make([]netio.ConfigEntry, 0, len(kafkaTopicConfigs))
	for i := range kafkaTopicConfigs {
		def := &kafkaTopicConfigs[i]
		if def.internal || names != nil && !slices.Contains(names, def.name) {
			continue
		}
		entries = append(entries, n.topicConfigEntry(def, overrides))
	}
	return entries
}

func (n *Node) topicConfigEntry(def *configDef, overrides map[string]string) netio.ConfigEntry {
	e := netio.ConfigEntry{Name: def.name, Type: def.typ, Documentation: def.doc}
	value, source := n.nodeTopicDefault(def.name)
	if v, ok := overrides[def.name]; ok {
		value, source = v, netio.ConfigSourceTopic
		e.Synonyms = append(e.Synonyms, netio.ConfigSynonym{Name: def.name, Value: new(v), Source: netio.ConfigSourceTopic})
	}
	e.Value, e.Source = new(value), source
	for _, s := range def.synonyms {
		if v, ok := n.cfg.StaticConfigs[s.name]; ok {
			e.Synonyms = append(e.Synonyms, netio.ConfigSynonym{Name: s.name, Value: new(v), Source: netio.ConfigSourceStaticBroker})
		}
	}
	if v, ok := clusterDefaults[def.name]; ok {
		e.Synonyms = append(e.Synonyms, netio.ConfigSynonym{Name: def.name, Value: new(v), Source: netio.ConfigSourceClusterDefault})
	}
	if len(def.synonyms) > 0 { // Kafka's default of the first broker synonym, if it has one
		if b := brokerConfigDefs[def.synonyms[0].name]; b != nil && b.kafkaDefault != nil {
			e.Synonyms = append(e.Synonyms, netio.ConfigSynonym{Name: b.name, Value: b.kafkaDefault, Source: netio.ConfigSourceDefault})
		}
	}
	return e
}

// clusterDefaults are the cluster-wide dynamic broker defaults a Kafka 4
// cluster has from its start (DYNAMIC_DEFAULT_BROKER_CONFIG): the KRaft
// controller writes min.insync.replicas (KIP-966).
var clusterDefaults = map[string]string{"min.insync.replicas": "1"}

// createTopicsConfigs are the effective configs CreateTopics v5+ answers:
// an override as the request gave it (Kafka answers it unparsed), the
// rest as DescribeConfigs describes them.
func createTopicsConfigs(entries []netio.ConfigEntry, given map[string]string) []netio.TopicConfig {
	configs := make([]netio.TopicConfig, 0, len(entries))
	for _, e := range entries {
		value := *e.Value
		if v, ok := given[e.Name]; ok {
			value = v
		}
		configs = append(configs, netio.TopicConfig{Name: e.Name, Value: value, Source: e.Source})
	}
	return configs
}
