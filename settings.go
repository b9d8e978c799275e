package mirrord

// The node's settings from its properties, by Kafka's server.properties
// names. Open takes, in this order:
//
//   - log.dirs or log.dir (one directory): the data directory, when
//     Config.DataDir is empty;
//   - mirrord's own keys: mirror.config.files.dir, log.dir.reserve.bytes,
//     log.open.files.max, log.index.cache.max.bytes,
//     console.sample.interval.ms;
//   - the log cleaner's log.cleaner.enable, log.cleaner.threads,
//     log.cleaner.dedupe.buffer.size, log.cleaner.backoff.ms and
//     log.cleaner.io.max.bytes.per.second;
//   - the consumer groups' (KIP-848) group.consumer.session.timeout.ms
//     and group.consumer.heartbeat.interval.ms;
//   - the listeners (listeners.go), their SASL keys (sasl.go) and the
//     connection limits (connections.go);
//
// and hands the rest to engine.NodeConfig.ApplyServerProperties, which
// takes the broker configs it knows (message.max.bytes, the transaction
// coordinator's, log.retention.*, authorizer.class.name, ...) and refuses
// every other key by name.

import (
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/mirrord/mirrord/console"
	"github.com/mirrord/mirrord/engine"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	"github.com/mirrord/mirrord/vfs"
)

// settings is what Open takes from a Config.
type settings struct {
	node      engine.NodeConfig
	cluster   *engine.ClusterConfig // nil: the node runs alone
	listeners []listenerConfig
	sasl      saslProperties
	limits    netio.Config // the connection limits; Backend and the rest are Open's
	// console is the web console's history: a sample every
	// console.sample.interval.ms, the last hour kept.
	console console.Options
}

// parseSettings reads cfg's properties (a copy: cfg's map is left as it
// is) into the node's settings.
func parseSettings(cfg Config) (settings, error) {
	var s settings
	props := maps.Clone(cfg.Properties)
	if props == nil {
		props = map[string]string{}
	}
	s.node = engine.NodeConfig{FS: vfs.OS, Log: logstore.DefaultConfig(), DataDir: cfg.DataDir}
	for _, key := range []string{"log.dirs", "log.dir"} {
		if dirs, ok := props[key]; ok {
			if strings.Contains(dirs, ",") {
				return s, fmt.Errorf("mirrord: %s %q: mirrord keeps one data directory", key, dirs)
			}
			if s.node.DataDir == "" {
				s.node.DataDir = strings.TrimSpace(dirs)
			}
			delete(props, key)
		}
	}
	if s.node.DataDir == "" {
		return s, ErrNoDataDir
	}
	if dir, ok := props["mirror.config.files.dir"]; ok {
		s.node.MirrorConfigFilesDir = strings.TrimSpace(dir)
		delete(props, "mirror.config.files.dir")
	}
	if value, ok := props["log.dir.reserve.bytes"]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil || n < 0 {
			return s, fmt.Errorf("mirrord: log.dir.reserve.bytes %q: want a number of bytes >= 0", value)
		}
		s.node.LogDirReserveBytes = n
		if n == 0 {
			s.node.LogDirReserveBytes = -1 // none
		}
		delete(props, "log.dir.reserve.bytes")
	}
	for key, set := range map[string]func(int64){
		"log.open.files.max":        func(n int64) { s.node.Log.OpenFilesMax = int(min(n, math.MaxInt32)) },
		"log.index.cache.max.bytes": func(n int64) { s.node.Log.IndexCacheBytesMax = n },
	} {
		if value, ok := props[key]; ok {
			n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
			if err != nil || n < 1 {
				return s, fmt.Errorf("mirrord: %s %q: want a number >= 1", key, value)
			}
			set(n)
			delete(props, key)
		}
	}
	if value, ok := props["console.sample.interval.ms"]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil || n < 100 || n > time.Hour.Milliseconds() {
			return s, fmt.Errorf("mirrord: console.sample.interval.ms %q: want milliseconds in [100, %d]", value, time.Hour.Milliseconds())
		}
		s.console.SampleInterval = time.Duration(n) * time.Millisecond
		s.console.Samples = int(time.Hour / s.console.SampleInterval) // the last hour
		delete(props, "console.sample.interval.ms")
	}
	var err error
	if s.node.Cleaner, err = takeCleanerProperties(props); err != nil {
		return s, err
	}
	if s.node.ConsumerSessionTimeout, s.node.ConsumerHeartbeatInterval, err = takeConsumerGroupProperties(props); err != nil {
		return s, err
	}
	if s.cluster, err = takeClusterProperties(props, &s.node); err != nil {
		return s, err
	}
	if err := checkBoundedProperties(props); err != nil {
		return s, err
	}
	if s.listeners, err = takeListeners(props); err != nil {
		return s, err
	}
	if s.sasl, err = takeSASLProperties(props); err != nil {
		return s, err
	}
	if s.limits, err = takeConnectionProperties(props); err != nil {
		return s, err
	}
	if err := s.node.ApplyServerProperties(props); err != nil {
		return s, fmt.Errorf("mirrord: %w", err)
	}
	return s, nil
}

// takeNumber moves key out of props as a number in [low, high]; ok is
// false when props has no key.
func takeNumber(props map[string]string, key string, low, high int64) (n int64, ok bool, err error) {
	text, ok := props[key]
	if !ok {
		return 0, false, nil
	}
	delete(props, key)
	n, err = strconv.ParseInt(strings.TrimSpace(text), 10, 64)
	if err != nil || n < low || n > high {
		return 0, false, fmt.Errorf("mirrord: %s %s out of range [%d, %d]", key, strings.TrimSpace(text), low, high)
	}
	return n, true, nil
}

// takeCleanerProperties moves the log cleaner's keys out of props.
func takeCleanerProperties(props map[string]string) (engine.CleanerConfig, error) {
	c := engine.DefaultCleanerConfig
	if text, ok := props["log.cleaner.enable"]; ok {
		enable, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return c, fmt.Errorf("mirrord: log.cleaner.enable %q: want true or false", text)
		}
		c.Disabled = !enable
		delete(props, "log.cleaner.enable")
	}
	if n, ok, err := takeNumber(props, "log.cleaner.threads", 1, 64); err != nil {
		return c, err
	} else if ok {
		c.Threads = int(n)
	}
	if n, ok, err := takeNumber(props, "log.cleaner.dedupe.buffer.size", 1<<20, math.MaxInt64); err != nil {
		return c, fmt.Errorf("%w (at least 1 MiB)", err)
	} else if ok {
		c.DedupeBufferBytes = n
	}
	if n, ok, err := takeNumber(props, "log.cleaner.backoff.ms", 1, math.MaxInt64/int64(time.Millisecond)); err != nil {
		return c, err
	} else if ok {
		c.Backoff = time.Duration(n) * time.Millisecond
	}
	if text, ok := props["log.cleaner.io.max.bytes.per.second"]; ok {
		rate, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil || rate < 0 || math.IsNaN(rate) {
			return c, fmt.Errorf("mirrord: log.cleaner.io.max.bytes.per.second %q: want bytes per second >= 0 (0: unlimited)", text)
		}
		c.IOMaxBytesPerSecond = rate
		delete(props, "log.cleaner.io.max.bytes.per.second")
	}
	return c, nil
}

// takeConsumerGroupProperties moves the consumer groups' (KIP-848)
// session timeout and heartbeat interval out of props; the interval must
// stay below the timeout, as Kafka's config validation requires.
func takeConsumerGroupProperties(props map[string]string) (session, heartbeat time.Duration, err error) {
	session, heartbeat = engine.DefaultConsumerGroupTimings()
	if n, ok, err := takeNumber(props, "group.consumer.session.timeout.ms", 1, math.MaxInt32); err != nil {
		return 0, 0, err
	} else if ok {
		session = time.Duration(n) * time.Millisecond
	}
	if n, ok, err := takeNumber(props, "group.consumer.heartbeat.interval.ms", 1, math.MaxInt32); err != nil {
		return 0, 0, err
	} else if ok {
		heartbeat = time.Duration(n) * time.Millisecond
	}
	if heartbeat >= session {
		return 0, 0, fmt.Errorf("mirrord: group.consumer.heartbeat.interval.ms %d out of range [1, %d): it must be below group.consumer.session.timeout.ms",
			heartbeat.Milliseconds(), session.Milliseconds())
	}
	return session, heartbeat, nil
}

// boundedPropertyNames are keys ApplyServerProperties takes that
// checkBoundedProperties bounds first.
var boundedPropertyNames = []string{"message.max.bytes", "transaction.max.timeout.ms", "transaction.abort.timed.out.transaction.cleanup.interval.ms",
	"transactional.id.expiration.ms", "producer.id.expiration.ms"}

// checkBoundedProperties refuses message.max.bytes and the transaction
// settings outside [1, 2^31-1] (Kafka's are ints; a batch bound or a
// timeout of 0 serves nothing).
func checkBoundedProperties(props map[string]string) error {
	for _, key := range boundedPropertyNames {
		if text, ok := props[key]; ok {
			n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
			if err != nil || n < 1 || n > math.MaxInt32 {
				return fmt.Errorf("mirrord: %s %s out of range [1, %d]", key, strings.TrimSpace(text), math.MaxInt32)
			}
		}
	}
	return nil
}

// PropertyDefaults are the defaults, by Kafka's names, of the node
// settings Open applies when Properties leave them out and that `mirrord
// serve` also takes as flags: message.max.bytes, the transaction
// coordinator's, the log cleaner's and the consumer groups' (KIP-848).
// They are Kafka 4.4's.
func PropertyDefaults() map[string]string {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	t, c := engine.DefaultTransactionConfig, engine.DefaultCleanerConfig
	session, heartbeat := engine.DefaultConsumerGroupTimings()
	return map[string]string{
		"message.max.bytes":          strconv.Itoa(engine.DefaultMessageMaxBytes),
		"transaction.max.timeout.ms": ms(t.MaxTimeout),
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": ms(t.AbortTimedOutInterval),
		"transactional.id.expiration.ms":                              ms(t.TransactionalIDExpiration),
		"producer.id.expiration.ms":                                   ms(t.ProducerIDExpiration),
		"log.cleaner.enable":                                          strconv.FormatBool(!c.Disabled),
		"log.cleaner.threads":                                         strconv.Itoa(c.Threads),
		"log.cleaner.dedupe.buffer.size":                              strconv.FormatInt(c.DedupeBufferBytes, 10),
		"log.cleaner.backoff.ms":                                      ms(c.Backoff),
		"log.cleaner.io.max.bytes.per.second":                         "0",
		"group.consumer.session.timeout.ms":                           ms(session),
		"group.consumer.heartbeat.interval.ms":                        ms(heartbeat),
	}
}
