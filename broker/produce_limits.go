package broker

import (
	"fmt"
	"math"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
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
// node's defaults. Set when a partition is made, never changed.
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
	return limits
}

// topicProduceLimits applies a topic's configs to the node's limits, with
// Kafka's bounds (each at least 0). Other keys are topicConfig's.
func topicProduceLimits(base produceLimits, configs map[string]string) (produceLimits, error) {
	limits := base
	for key, value := range configs {
		var err error
		switch key {
		case "max.message.bytes":
			limits.maxMessageBytes, err = nonNegative(value, math.MaxInt32)
		case "message.timestamp.before.max.ms":
			limits.timestampBeforeMax, err = nonNegative(value, math.MaxInt64)
		case "message.timestamp.after.max.ms":
			limits.timestampAfterMax, err = nonNegative(value, math.MaxInt64)
		}
		if err != nil {
			return base, fmt.Errorf("%w: topic config %s=%q: %w", kerr.InvalidConfig, key, value, err)
		}
	}
	return limits, nil
}

func nonNegative(value string, highest int64) (int64, error) {
	n, err := strconv.ParseInt(value, 10, 64)
	switch {
	case err != nil:
		return 0, err
	case n < 0 || n > highest:
		return 0, fmt.Errorf("out of range [0, %d]", highest)
	}
	return n, nil
}
