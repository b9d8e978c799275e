package group

import (
	"slices"
	"time"
)

// Offset retention (offsets.retention.minutes), as Kafka 3+ applies it
// (OffsetMetadataManager.cleanupExpiredOffsets, KIP-211): every
// OffsetsRetentionCheckInterval the loop drops the expired offsets of each
// Empty group by tombstones, and deletes an Empty group left without
// offsets. An offset expires
//   - at its expireTimestamp when the commit set one (OffsetCommit v1-4's
//     retention time);
//   - else OffsetsRetention after the group became Empty, for a group that
//     had members (it has a protocol type);
//   - else OffsetsRetention after its commit, for a group that only ever
//     committed (assign() consumers, kafka-consumer-groups).
// The offsets of a group with members never expire (Kafka also expires
// those of topics its consumers no longer subscribe to (KIP-496): not
// built).

// expireOffsets runs the retention check when it is due and returns the
// time of the next one.
func (c *Coordinator) expireOffsets() time.Time {
	if c.nextRetentionCheck.After(c.now) {
		return c.nextRetentionCheck
	}
	c.nextRetentionCheck = c.now.Add(c.cfg.OffsetsRetentionCheckInterval)
	names := make([]string, 0, len(c.groups))
	for name, g := range c.groups {
		if g.empty() {
			names = append(names, name)
		}
	}
	slices.Sort(names) // a deterministic order of appends
	for _, name := range names {
		c.expireGroupOffsets(c.groups[name])
	}
	return c.nextRetentionCheck
}

// expireGroupOffsets writes the tombstones of g's expired offsets (and of
// g when none are left) and then applies them; a failed append changes
// nothing and the next check tries again.
func (c *Coordinator) expireGroupOffsets(g *group) {
	type expired struct {
		topic     string
		partition int32
	}
	var gone []expired
	for topic, partitions := range g.offsets {
		for partition, o := range partitions {
			if c.offsetExpired(g, o) && !c.pending.has(g.name, topicPartition{topic, partition}) {
				gone = append(gone, expired{topic, partition})
			}
		}
	}
	deleteGroup := len(gone) == g.offsetCount() && len(g.pending) == 0 && !c.pending.hasGroup(g.name)
	if len(gone) == 0 && !deleteGroup {
		return
	}
	slices.SortFunc(gone, func(a, b expired) int {
		if a.topic != b.topic {
			if a.topic < b.topic {
				return -1
			}
			return 1
		}
		return int(a.partition - b.partition)
	})
	records := make([]Record, 0, len(gone)+1)
	for _, e := range gone {
		records = append(records, offsetTombstone(g.name, e.topic, e.partition))
	}
	if deleteGroup {
		records = append(records, groupTombstone(g.name))
	}
	if err := c.append(records...); err != nil {
		return
	}
	for _, e := range gone {
		g.deleteOffset(e.topic, e.partition)
	}
	c.log.Info("group: offsets expired", "group", g.name, "offsets", len(gone), "group_deleted", deleteGroup)
	if deleteGroup {
		g.transition(Dead, c.now)
	}
	c.done(g)
}

// offsetExpired says whether o, an offset of the Empty group g, is past
// its retention.
func (c *Coordinator) offsetExpired(g *group, o committed) bool {
	now := c.now.UnixMilli()
	if o.expireTimestamp >= 0 {
		return now >= o.expireTimestamp
	}
	base := o.commitTimestamp
	if g.protocolType != "" {
		base = g.stateTimestamp.UnixMilli()
	}
	return now-base >= c.cfg.OffsetsRetention.Milliseconds()
}

// empty is Kafka's group.isEmpty: a consumer group without members (a
// static member that left with epoch -2 is still one), a classic group in
// state Empty. (A consumer group's classic state is never moved: it is
// not its state.)
func (g *group) empty() bool {
	if g.consumer != nil {
		return len(g.consumer.members) == 0
	}
	return g.state == Empty
}

func (g *group) offsetCount() int {
	n := 0
	for _, partitions := range g.offsets {
		n += len(partitions)
	}
	return n
}
