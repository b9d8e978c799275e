package broker

import (
	"math"
	"strconv"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
)

// topicConfigEntries lists the effective value of every topic config
// this node honours (the ones topicConfig applies to the log, the Produce
// limits, plus the policies it allows only one value of), sorted by name:
// the value cfg or limits holds, from the topic when set names it, else
// the node's default. Configs accepted but not honoured
// (min.insync.replicas, unclean.leader.election.enable) are not listed:
// their value would claim a behaviour this node does not have.
func topicConfigEntries(cfg logstore.Config, limits produceLimits, set map[string]string) []netio.TopicConfig {
	unlimited := strconv.FormatInt(math.MaxInt64, 10)
	millisOr := func(d time.Duration, zero string) string {
		if d == 0 {
			return zero
		}
		return strconv.FormatInt(d.Milliseconds(), 10)
	}
	flushMessages, flushMillis := unlimited, unlimited
	switch cfg.Flush {
	case logstore.FlushEveryAppend:
		flushMessages = "1"
	case logstore.FlushInterval:
		flushMillis = millisOr(cfg.FlushInterval, unlimited)
	}
	retentionBytes := "-1"
	if cfg.RetentionBytes > 0 {
		retentionBytes = strconv.FormatInt(cfg.RetentionBytes, 10)
	}
	entries := []netio.TopicConfig{
		{Name: "cleanup.policy", Value: cfg.Cleanup.String()},
		{Name: "compression.gzip.level", Value: strconv.Itoa(limits.level(rb.CodecGzip))},
		{Name: "compression.lz4.level", Value: strconv.Itoa(limits.level(rb.CodecLZ4))},
		{Name: "compression.type", Value: limits.compressionType()},
		{Name: "compression.zstd.level", Value: strconv.Itoa(limits.level(rb.CodecZstd))},
		{Name: "delete.retention.ms", Value: strconv.FormatInt(cfg.DeleteRetention.Milliseconds(), 10)},
		{Name: "flush.messages", Value: flushMessages},
		{Name: "flush.ms", Value: flushMillis},
		{Name: "index.interval.bytes", Value: strconv.FormatInt(cfg.IndexIntervalBytes, 10)},
		{Name: "max.compaction.lag.ms", Value: millisOr(cfg.MaxCompactionLag, unlimited)},
		{Name: "max.message.bytes", Value: strconv.FormatInt(limits.maxMessageBytes, 10)},
		{Name: "message.timestamp.after.max.ms", Value: strconv.FormatInt(limits.timestampAfterMax, 10)},
		{Name: "message.timestamp.before.max.ms", Value: strconv.FormatInt(limits.timestampBeforeMax, 10)},
		{Name: "message.timestamp.type", Value: limits.timestampType()},
		{Name: "min.cleanable.dirty.ratio", Value: strconv.FormatFloat(cfg.MinCleanableDirtyRatio, 'g', -1, 64)},
		{Name: "min.compaction.lag.ms", Value: strconv.FormatInt(cfg.MinCompactionLag.Milliseconds(), 10)},
		{Name: "retention.bytes", Value: retentionBytes},
		{Name: "retention.ms", Value: millisOr(cfg.RetentionAge, "-1")},
		{Name: "segment.bytes", Value: strconv.FormatInt(cfg.SegmentBytes, 10)},
		{Name: "segment.index.bytes", Value: strconv.Itoa(cfg.IndexBytesMax)},
		{Name: "segment.ms", Value: millisOr(cfg.SegmentAge, unlimited)},
	}
	for i := range entries {
		entries[i].Source = netio.ConfigSourceDefault
		if _, ok := set[entries[i].Name]; ok {
			entries[i].Source = netio.ConfigSourceTopic
		}
	}
	return entries
}
