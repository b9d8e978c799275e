package broker

// The node's settings from a Kafka server.properties, by Kafka's broker
// config names (ApplyServerProperties), and the broker resource of
// DescribeConfigs.

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
)

// ErrServerProperty is a config file key mirrord refuses: unknown to
// Kafka, or Kafka's but not taken here.
var ErrServerProperty = errors.New("broker: server.properties")

// notTakenReasons says why some of Kafka's broker configs are refused by
// name; the rest of Kafka's are refused as "not taken by mirrord".
var notTakenReasons = map[string]string{
	"node.id":             "the node ID is the data directory's (meta.properties)",
	"broker.id":           "the node ID is the data directory's (meta.properties)",
	"process.roles":       "mirrord is one process with no KRaft roles",
	"log.dirs":            "use --data-dir (one directory)",
	"log.dir":             "use --data-dir",
	"listeners":           "use --listen",
	"log.cleaner.*":       "the log cleaner's settings are not taken yet",
	"controller.*":        "no KRaft controller quorum",
	"num.io.threads":      "requests are answered by one goroutine per connection",
	"num.network.threads": "requests are answered by one goroutine per connection",
}

// ApplyServerProperties sets the node's settings from the broker configs
// of a server.properties (Kafka's names; values as Kafka parses them) and
// keeps them as StaticConfigs. A key Kafka does not have, or one mirrord
// does not take, is an error naming it (all such keys at once). What the
// file leaves out keeps the value c already holds.
func (c *Config) ApplyServerProperties(props map[string]string) error {
	props, err := c.takeAuthorizerProperties(props)
	if err != nil {
		return err
	}
	static := make(map[string]string, len(props))
	var refused []string
	keys := make([]string, 0, len(props))
	for key := range props {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		def, ok := brokerConfigDefs[key]
		if !ok {
			refused = append(refused, refusedProperty(key))
			continue
		}
		value, err := def.parse(props[key])
		if err != nil {
			return fmt.Errorf("%w: %w", ErrServerProperty, err)
		}
		static[key] = value
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: %s", ErrServerProperty, strings.Join(refused, "; "))
	}
	if static["auto.create.topics.enable"] == "false" {
		c.AutoCreateTopicsDisable = true
	}
	if err := c.applyLogProperties(static); err != nil {
		return err
	}
	c.StaticConfigs = static
	return c.Log.Validate()
}

func refusedProperty(key string) string {
	for pattern, reason := range notTakenReasons {
		if prefix, wildcard := strings.CutSuffix(pattern, "*"); key == pattern || wildcard && strings.HasPrefix(key, prefix) {
			return fmt.Sprintf("%s is not taken by mirrord (%s)", key, reason)
		}
	}
	if slices.Contains(kafkaBrokerConfigNames, key) {
		return fmt.Sprintf("%s is a Kafka broker config mirrord does not take", key)
	}
	return fmt.Sprintf("%s is not a Kafka broker config", key)
}

// applyLogProperties sets the settings the parsed static configs name.
func (c *Config) applyLogProperties(static map[string]string) error {
	number := func(key string) (int64, bool) {
		v, ok := static[key]
		n, _ := strconv.ParseInt(v, 10, 64)
		return n, ok
	}
	millis := func(keys ...string) (time.Duration, bool) { // the first set wins, as Kafka's synonyms
		for _, key := range keys {
			if n, ok := number(key); ok {
				per := map[bool]int64{true: 1}[strings.HasSuffix(key, ".ms")]
				if strings.HasSuffix(key, ".hours") {
					per = 3600000
				} else if strings.HasSuffix(key, ".minutes") {
					per = 60000
				}
				if n < 0 {
					return 0, true
				}
				return time.Duration(n*per) * time.Millisecond, true
			}
		}
		return 0, false
	}
	if d, ok := millis("log.retention.ms", "log.retention.minutes", "log.retention.hours"); ok {
		c.Log.RetentionAge = d
	}
	if n, ok := number("log.retention.bytes"); ok {
		c.Log.RetentionBytes = max(n, 0)
	}
	if n, ok := number("log.segment.bytes"); ok {
		c.Log.SegmentBytes = n
	}
	if d, ok := millis("log.roll.ms", "log.roll.hours"); ok {
		c.Log.SegmentAge = d
	}
	if n, ok := number("log.index.interval.bytes"); ok {
		c.Log.IndexIntervalBytes = n
	}
	if n, ok := number("log.index.size.max.bytes"); ok {
		c.Log.IndexBytesMax = int(n)
	}
	if n, ok := number("log.flush.interval.messages"); ok && n == 1 {
		c.Log.Flush = logstore.FlushEveryAppend
	}
	if d, ok := millis("log.flush.interval.ms"); ok && d > 0 && c.Log.Flush != logstore.FlushEveryAppend {
		c.Log.Flush, c.Log.FlushInterval = logstore.FlushInterval, d
	}
	if n, ok := number("message.max.bytes"); ok {
		c.MessageMaxBytes = int32(n)
	}
	if n, ok := number("num.partitions"); ok {
		c.NumPartitions = int32(n)
	}
	if d, ok := millis("log.retention.check.interval.ms"); ok {
		c.RetentionCheckInterval = d
	}
	if d, ok := millis("offsets.retention.minutes"); ok {
		c.OffsetsRetention = d
	}
	for key, into := range map[string]*time.Duration{
		"transaction.max.timeout.ms":                                  &c.Transactions.MaxTimeout,
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": &c.Transactions.AbortTimedOutInterval,
		"transactional.id.expiration.ms":                              &c.Transactions.TransactionalIDExpiration,
		"producer.id.expiration.ms":                                   &c.Transactions.ProducerIDExpiration,
	} {
		if d, ok := millis(key); ok {
			*into = d
		}
	}
	return nil
}

// ServerPropertyNames are the broker configs a config file may set.
func ServerPropertyNames() []string {
	names := make([]string, 0, len(kafkaBrokerConfigs))
	for _, def := range kafkaBrokerConfigs {
		names = append(names, def.name)
	}
	return append(names, authorizerPropertyNames...)
}

// brokerConfigEntries describes the node's broker configs (names, when
// not nil, selects some): those of its config file as
// STATIC_BROKER_CONFIG, the rest at Kafka's default. All are read-only:
// the node takes them at start.
func (n *Node) brokerConfigEntries(names []string) []netio.ConfigEntry {
	entries := []netio.ConfigEntry{}
	for i := range kafkaBrokerConfigs {
		def := &kafkaBrokerConfigs[i]
		if names != nil && !slices.Contains(names, def.name) {
			continue
		}
		e := netio.ConfigEntry{Name: def.name, Value: def.kafkaDefault, Source: netio.ConfigSourceDefault, ReadOnly: true, Type: def.typ, Documentation: def.doc}
		if v, ok := n.cfg.StaticConfigs[def.name]; ok {
			e.Value, e.Source = new(v), netio.ConfigSourceStaticBroker
			e.Synonyms = append(e.Synonyms, netio.ConfigSynonym{Name: def.name, Value: e.Value, Source: e.Source})
		}
		if v, ok := clusterDefaults[def.name]; ok {
			if e.Source == netio.ConfigSourceDefault {
				e.Value, e.Source = new(v), netio.ConfigSourceClusterDefault
			}
			e.Synonyms = append(e.Synonyms, netio.ConfigSynonym{Name: def.name, Value: new(v), Source: netio.ConfigSourceClusterDefault})
		}
		if def.kafkaDefault != nil {
			e.Synonyms = append(e.Synonyms, netio.ConfigSynonym{Name: def.name, Value: def.kafkaDefault, Source: netio.ConfigSourceDefault})
		}
		entries = append(entries, e)
	}
	return entries
}

// clusterDefaultEntries describes the cluster-wide broker defaults (the
// broker resource named "").
func clusterDefaultEntries(names []string) []netio.ConfigEntry {
	entries := []netio.ConfigEntry{}
	for name, value := range clusterDefaults {
		def := brokerConfigDefs[name]
		if def == nil || names != nil && !slices.Contains(names, name) {
			continue
		}
		entries = append(entries, netio.ConfigEntry{Name: name, Value: new(value), Source: netio.ConfigSourceClusterDefault, Type: def.typ, Documentation: def.doc,
			Synonyms: []netio.ConfigSynonym{{Name: name, Value: new(value), Source: netio.ConfigSourceClusterDefault}}})
	}
	return entries
}
