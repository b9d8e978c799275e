package broker

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/twmb/franz-go/pkg/kerr"
)

// topicConfig applies Kafka topic configs to the default log config.
// Configs this node cannot honour, and unknown ones, are errors that name
// the key (INVALID_CONFIG).
//
// Not yet kept across restarts: a reopened partition takes the node's
// defaults (see README).
func topicConfig(base logstore.Config, configs map[string]string) (logstore.Config, error) {
	cfg := base
	for key, value := range configs {
		var err error
		switch key {
		case "retention.ms":
			cfg.RetentionAge, err = millis(value, true)
		case "retention.bytes":
			cfg.RetentionBytes, err = integer(value, -1)
			cfg.RetentionBytes = max(cfg.RetentionBytes, 0)
		case "segment.bytes":
			cfg.SegmentBytes, err = integer(value, 1024)
		case "segment.ms":
			cfg.SegmentAge, err = millis(value, false)
		case "segment.index.bytes":
			var n int64
			n, err = integer(value, 1)
			cfg.IndexBytesMax = int(n)
		case "index.interval.bytes":
			cfg.IndexIntervalBytes, err = integer(value, 0)
		case "flush.messages":
			var n int64
			if n, err = integer(value, 1); err == nil && n == 1 {
				cfg.Flush = logstore.FlushEveryAppend
			}
		case "flush.ms":
			var d time.Duration
			if d, err = millis(value, false); err == nil && d > 0 && cfg.Flush != logstore.FlushEveryAppend {
				cfg.Flush, cfg.FlushInterval = logstore.FlushInterval, d
			}
		case "cleanup.policy":
			cfg.Cleanup, err = cleanupPolicy(value)
		case "delete.retention.ms":
			cfg.DeleteRetention, err = millis(value, false)
		case "min.compaction.lag.ms":
			cfg.MinCompactionLag, err = millis(value, false)
		case "max.compaction.lag.ms":
			cfg.MaxCompactionLag, err = millisUpTo(value, 1)
		case "min.cleanable.dirty.ratio":
			cfg.MinCleanableDirtyRatio, err = ratio(value)
		case "max.message.bytes", "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
			"message.timestamp.type", "compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level":
			// topicProduceLimits parses them
		case "min.insync.replicas", "unclean.leader.election.enable":
			_, err = integerOrBool(value)
		default:
			return cfg, fmt.Errorf("%w: topic config %q is unknown or not supported by mirrord", kerr.InvalidConfig, key)
		}
		if err != nil {
			return cfg, fmt.Errorf("%w: topic config %s=%q: %w", kerr.InvalidConfig, key, value, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%w: %w", kerr.InvalidConfig, err)
	}
	return cfg, nil
}

func integer(value string, lowest int64) (int64, error) {
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return 0, err
	}
	if n < lowest {
		return 0, fmt.Errorf("below %d", lowest)
	}
	return n, nil
}

// millis parses a millisecond count; -1 means unlimited (0) where allowed.
func millis(value string, unlimited bool) (time.Duration, error) {
	n, err := integer(value, -1)
	if err != nil {
		return 0, err
	}
	if n == -1 {
		if !unlimited {
			return 0, fmt.Errorf("must not be -1")
		}
		return 0, nil
	}
	return time.Duration(n) * time.Millisecond, nil
}

func oneOf(value string, allowed ...string) error {
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	return fmt.Errorf("mirrord supports only %q", allowed)
}

func integerOrBool(value string) (bool, error) {
	if value == "true" || value == "false" {
		return true, nil
	}
	_, err := strconv.ParseInt(value, 10, 64)
	return err == nil, err
}

// cleanupPolicy parses cleanup.policy: a list of delete and compact.
func cleanupPolicy(value string) (logstore.CleanupPolicy, error) {
	var compact, del bool
	for _, part := range strings.Split(value, ",") {
		switch strings.TrimSpace(part) {
		case "compact":
			compact = true
		case "delete":
			del = true
		default:
			return 0, fmt.Errorf("want delete, compact or both")
		}
	}
	switch {
	case compact && del:
		return logstore.CleanupCompactDelete, nil
	case compact:
		return logstore.CleanupCompact, nil
	}
	return logstore.CleanupDelete, nil
}

// millisUpTo parses a millisecond count of at least lowest; one too large
// for a Duration (Kafka's Long.MAX_VALUE default) means unlimited (0).
func millisUpTo(value string, lowest int64) (time.Duration, error) {
	n, err := integer(value, lowest)
	if err != nil || n > math.MaxInt64/int64(time.Millisecond) {
		return 0, err
	}
	return time.Duration(n) * time.Millisecond, nil
}

func ratio(value string) (float64, error) {
	f, err := strconv.ParseFloat(value, 64)
	if err == nil && (f < 0 || f > 1) {
		err = fmt.Errorf("out of range [0, 1]")
	}
	return f, err
}
