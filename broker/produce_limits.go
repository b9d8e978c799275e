package broker

import (
	"math"
	"strconv"
)

// Kafka's defaults of the broker and topic configs a Produce is checked
// against.
const (
	// DefaultMessageMaxBytes is message.max.bytes: the largest record
	// batch a topic without max.message.bytes takes.
	DefaultMessageMaxBytes = 1048588
	// defaultTimestampAfterMax is message.timestamp.after.max.ms (Kafka 4:
	// one hour).
	defaultTimestampAfterMax = 3600000
	// defaultTimestampBeforeMax is message.timestamp.before.max.ms.
	defaultTimestampBeforeMax = math.MaxInt64
)

// produceLimits are a topic's Produce checks, from its configs or the
// node's defaults (topic_configs.go sets them).
type produceLimits struct {
	// maxMessageBytes bounds one batch, header included
	// (max.message.bytes); larger is MESSAGE_TOO_LARGE.
	maxMessageBytes int64
	// timestampBeforeMax and timestampAfterMax bound a CreateTime
	// record's timestamp below and above the node's clock, in
	// milliseconds (message.timestamp.before.max.ms and .after.max.ms).
	timestampBeforeMax, timestampAfterMax int64
}

// nodeProduceLimits are the limits of a topic without configs of its own.
func nodeProduceLimits(cfg Config) produceLimits {
	limits := produceLimits{maxMessageBytes: DefaultMessageMaxBytes, timestampBeforeMax: defaultTimestampBeforeMax, timestampAfterMax: defaultTimestampAfterMax}
	if cfg.MessageMaxBytes > 0 {
		limits.maxMessageBytes = int64(cfg.MessageMaxBytes)
	}
	for key, into := range map[string]*int64{"log.message.timestamp.before.max.ms": &limits.timestampBeforeMax,
		"log.message.timestamp.after.max.ms": &limits.timestampAfterMax} {
		if n, err := strconv.ParseInt(cfg.StaticConfigs[key], 10, 64); err == nil {
			*into = n
		}
	}
	return limits
}
