package broker

import (
	"fmt"
	"math"
	"strconv"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/recordbatch/records"
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
	// logAppendTime is message.timestamp.type=LogAppendTime: the node
	// stamps each batch with its clock (see Partition.formatForLog).
	logAppendTime bool
	// minInSyncReplicas is min.insync.replicas: the ISR an acks=-1
	// produce needs on a cluster's leader (replica.go); 0 is Kafka's
	// default, 1.
	minInSyncReplicas int
	// keyRequired is cleanup.policy holding compact: a record without a
	// key is INVALID_RECORD (Kafka's LogValidator.validateKey).
	keyRequired bool
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
	for key, into := range map[string]*int64{"log.message.timestamp.before.max.ms": &limits.timestampBeforeMax,
		"log.message.timestamp.after.max.ms": &limits.timestampAfterMax} {
		if n, err := strconv.ParseInt(cfg.StaticConfigs[key], 10, 64); err == nil {
			*into = n
		}
	}
	return limits
}
