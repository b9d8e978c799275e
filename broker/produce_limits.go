package broker

import (
	"fmt"
	"math"
	"strconv"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
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
	// logAppendTime is message.timestamp.type=LogAppendTime: the node
	// stamps each batch with its clock (see Partition.formatForLog).
	logAppendTime bool
	// compression is compression.type: keepCodec for producer (each
	// batch keeps the codec it was sent in), else the codec every batch
	// is stored in; levels holds compression.<codec>.level by codec (0:
	// Kafka's default).
	keepCodec   bool
	compression rb.Codec
	levels      [rb.CodecZstd + 1]int
}

// compressionTypes are Kafka's compression.type values but producer.
var compressionTypes = map[string]rb.Codec{"uncompressed": rb.CodecNone, "gzip": rb.CodecGzip, "snappy": rb.CodecSnappy, "lz4": rb.CodecLZ4, "zstd": rb.CodecZstd}

// target is the compression a batch sent in codec is stored in, and
// whether that means rebuilding it (Kafka's LogValidator recompresses
// when the topic's type is not the batch's codec).
func (l produceLimits) target(codec rb.Codec) (records.Compression, bool) {
	if l.keepCodec || l.compression == codec {
		return records.Compression{Codec: codec}, false
	}
	return records.Compression{Codec: l.compression, Level: l.levels[l.compression]}, true
}

// compressionType is the compression.type value of the limits.
func (l produceLimits) compressionType() string {
	if l.keepCodec {
		return "producer"
	}
	for name, codec := range compressionTypes {
		if codec == l.compression {
			return name
		}
	}
	panic(fmt.Sprintf("broker: compression codec %d has no compression.type", l.compression))
}

// level is compression.<codec>.level: as set, else Kafka's default.
func (l produceLimits) level(codec rb.Codec) int {
	if l.levels[codec] != 0 {
		return l.levels[codec]
	}
	return records.DefaultLevel(codec)
}

// timestampType is the message.timestamp.type value of the limits.
func (l produceLimits) timestampType() string {
	if l.logAppendTime {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// nodeProduceLimits are the limits of a topic without configs of its own.
func nodeProduceLimits(cfg Config) produceLimits {
	limits := produceLimits{maxMessageBytes: DefaultMessageMaxBytes, timestampBeforeMax: defaultTimestampBeforeMax, timestampAfterMax: defaultTimestampAfterMax, keepCodec: true}
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
		case "message.timestamp.type":
			limits.logAppendTime, err = value == "LogAppendTime", oneOf(value, "CreateTime", "LogAppendTime")
		case "compression.type":
			limits.compression, limits.keepCodec = compressionTypes[value], value == "producer"
			if _, known := compressionTypes[value]; !known && !limits.keepCodec {
				err = fmt.Errorf("not one of uncompressed, zstd, lz4, snappy, gzip, producer")
			}
		case "compression.gzip.level":
			limits.levels[rb.CodecGzip], err = compressionLevel(rb.CodecGzip, value)
		case "compression.lz4.level":
			limits.levels[rb.CodecLZ4], err = compressionLevel(rb.CodecLZ4, value)
		case "compression.zstd.level":
			limits.levels[rb.CodecZstd], err = compressionLevel(rb.CodecZstd, value)
		}
		if err != nil {
			return base, fmt.Errorf("%w: topic config %s=%q: %w", kerr.InvalidConfig, key, value, err)
		}
	}
	return limits, nil
}

// compressionLevel parses a compression.<codec>.level within Kafka's
// bounds for codec.
func compressionLevel(codec rb.Codec, value string) (int, error) {
	n, err := strconv.ParseInt(value, 10, 32)
	if err != nil {
		return 0, err
	}
	return int(n), records.ValidLevel(codec, int(n))
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
