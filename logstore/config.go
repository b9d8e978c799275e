package logstore

import (
	"fmt"
	"time"
)

// FlushPolicy says when appended bytes are made durable with fdatasync.
type FlushPolicy int

const (
	// FlushEveryAppend syncs the segment before Append returns.
	FlushEveryAppend FlushPolicy = iota
	// FlushInterval syncs every Config.FlushInterval (the Dir runs the timer);
	// an append is durable at the next tick.
	FlushInterval
	// FlushOS leaves writeback to the OS; segments are still synced on roll,
	// truncation and close.
	FlushOS
)

// CleanupPolicy is a topic's cleanup.policy.
type CleanupPolicy int

const (
	CleanupDelete        CleanupPolicy = iota // "delete", Kafka's default
	CleanupCompact                            // "compact"
	CleanupCompactDelete                      // "compact,delete"
	CleanupNone                               // "": neither (Kafka 4.1+): the log keeps everything
)

// Compact reports whether the cleaner compacts the log.
func (p CleanupPolicy) Compact() bool { return p == CleanupCompact || p == CleanupCompactDelete }

// Delete reports whether retention (retention.ms, retention.bytes) applies.
func (p CleanupPolicy) Delete() bool { return p == CleanupDelete || p == CleanupCompactDelete }

func (p CleanupPolicy) String() string {
	switch p {
	case CleanupDelete:
		return "delete"
	case CleanupCompact:
		return "compact"
	case CleanupCompactDelete:
		return "compact,delete"
	case CleanupNone:
		return ""
	}
	return fmt.Sprintf("CleanupPolicy(%d)", int(p))
}

func (p FlushPolicy) String() string {
	switch p {
	case FlushEveryAppend:
		return "every-append"
	case FlushInterval:
		return "interval"
	case FlushOS:
		return "os"
	}
	return fmt.Sprintf("FlushPolicy(%d)", int(p))
}

// Config holds the per-log settings. Names follow Kafka's topic configs.
type Config struct {
	// SegmentBytes rolls the active segment before an append would make it
	// larger (segment.bytes). At most 2 GiB - 1: positions are uint32.
	SegmentBytes int64
	// SegmentAge rolls the active segment once its first append is this old
	// (segment.ms); 0 disables.
	SegmentAge time.Duration
	// IndexIntervalBytes is the distance between sparse index entries
	// (index.interval.bytes).
	IndexIntervalBytes int64
	// IndexBytesMax is the preallocated size of each index file; a full
	// index rolls the segment (segment.index.bytes).
	IndexBytesMax int
	Flush         FlushPolicy
	FlushInterval time.Duration
	// RetentionAge and RetentionBytes bound the log for ApplyRetention
	// (retention.ms, retention.bytes); 0 disables each. Mirror topics take
	// their log start offset from the source instead.
	RetentionAge   time.Duration
	RetentionBytes int64
	// Cleanup is cleanup.policy: delete (the zero value) applies the
	// retention above; compact has the cleaner keep the latest record of
	// each key (see Clean) and applies no retention; compact,delete both.
	Cleanup CleanupPolicy
	// DeleteRetention is how long a tombstone, and a transaction marker
	// the cleaner may drop, outlives the cleaning that first kept it
	// (delete.retention.ms, 1 day).
	DeleteRetention time.Duration
	// MinCleanableDirtyRatio is the share of dirty bytes above which the
	// cleaner picks the log (min.cleanable.dirty.ratio, 0.5).
	MinCleanableDirtyRatio float64
	// MinCompactionLag keeps segments holding records younger than this
	// out of cleaning (min.compaction.lag.ms, 0); MaxCompactionLag makes a
	// log with dirty records older than this eligible whatever its ratio
	// (max.compaction.lag.ms; 0 means unlimited, Kafka's Long.MAX_VALUE).
	MinCompactionLag time.Duration
	MaxCompactionLag time.Duration
	// Now is the clock; nil means time.Now. Tests pass a virtual clock.
	Now func() time.Time
	// RecoveryTruncated is told of each cut recovery made at open, once
	// the removed bytes are kept and cut (see Truncation); nil logs each
	// at WARN through slog.Default. The node logs and counts them. A Dir
	// opens its partitions several at once: it may be called from as many
	// goroutines at a time.
	RecoveryTruncated func(Truncation)

	// OpenFilesMax (log.open.files.max, mirrord's own) bounds the log
	// files the segments of a Dir keep open, and IndexCacheBytesMax
	// (log.index.cache.max.bytes) the bytes of index mappings of idle
	// segments: past either, the least recently read idle segments are
	// closed and unmapped, and opened again when read (files.go). Each
	// open segment maps at most two indexes, so mappings stay below
	// twice OpenFilesMax. Segments being written to are never closed:
	// they count, and may keep the process above the bound. OpenDir
	// reads them; 0 takes DefaultOpenFilesMax and
	// DefaultIndexCacheBytesMax.
	OpenFilesMax       int
	IndexCacheBytesMax int64
	files              *fileCache // the Dir's (nil: a Log of its own, no bound)
}

const (
	// openFilesMaxCap keeps the mappings of a node's open segments (two
	// indexes each) well below vm.max_map_count's default of 65530.
	openFilesMaxCap = 20000
	// DefaultIndexCacheBytesMax bounds idle segments' index mappings;
	// a sealed 1 GiB segment's indexes are about 5 MiB.
	DefaultIndexCacheBytesMax = 1 << 30
	// openFilesMaxMin is the least DefaultOpenFilesMax gives, whatever
	// the descriptor limit.
	openFilesMaxMin = 64
)

// DefaultOpenFilesMax is half the process's descriptor limit
// (RLIMIT_NOFILE; Go raises the soft limit to the hard one at start),
// leaving the rest to connections, at most 20,000 (so at most 40,000
// index mappings) and at least 64.
func DefaultOpenFilesMax() int {
	return min(max(int(fileLimit()/2), openFilesMaxMin), openFilesMaxCap)
}

// DefaultConfig is Kafka's defaults: 1 GiB segments rolled after 7 days,
// data kept 7 days (log.retention.hours=168) without a size bound.
func DefaultConfig() Config {
	return Config{
		RetentionAge:       7 * 24 * time.Hour,
		SegmentBytes:       1 << 30,
		SegmentAge:         7 * 24 * time.Hour,
		IndexIntervalBytes: 4096,
		IndexBytesMax:      10 << 20,
		Flush:              FlushOS,
		FlushInterval:      time.Second,

		DeleteRetention:        24 * time.Hour,
		MinCleanableDirtyRatio: 0.5,
	}
}

// Validate reports the first bad setting by name.
func (c Config) Validate() error {
	switch {
	case c.SegmentBytes < 1024 || c.SegmentBytes > 1<<31-1:
		return fmt.Errorf("logstore: config segment.bytes %d out of range [1024, 2147483647]", c.SegmentBytes)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("logstore: config index.interval.bytes %d is negative", c.IndexIntervalBytes)
	case c.IndexBytesMax < 4*timeEntrySize:
		return fmt.Errorf("logstore: config segment.index.bytes %d below %d", c.IndexBytesMax, 4*timeEntrySize)
	case c.Flush < FlushEveryAppend || c.Flush > FlushOS:
		return fmt.Errorf("logstore: config flush policy %d unknown", int(c.Flush))
	case c.Flush == FlushInterval && c.FlushInterval <= 0:
		return fmt.Errorf("logstore: config flush.ms %v must be positive", c.FlushInterval)
	case c.SegmentAge < 0 || c.RetentionAge < 0 || c.RetentionBytes < 0:
		return fmt.Errorf("logstore: config segment.ms, retention.ms and retention.bytes must not be negative")
	case c.Cleanup < CleanupDelete || c.Cleanup > CleanupCompactDelete:
		return fmt.Errorf("logstore: config cleanup.policy %d unknown", int(c.Cleanup))
	case c.DeleteRetention < 0 || c.MinCompactionLag < 0 || c.MaxCompactionLag < 0:
		return fmt.Errorf("logstore: config delete.retention.ms, min.compaction.lag.ms and max.compaction.lag.ms must not be negative")
	case c.MinCleanableDirtyRatio < 0 || c.MinCleanableDirtyRatio > 1:
		return fmt.Errorf("logstore: config min.cleanable.dirty.ratio %v out of range [0, 1]", c.MinCleanableDirtyRatio)
	case c.OpenFilesMax < 0 || c.IndexCacheBytesMax < 0:
		return fmt.Errorf("logstore: config log.open.files.max and log.index.cache.max.bytes must not be negative")
	case c.MaxCompactionLag > 0 && c.MaxCompactionLag < c.MinCompactionLag:
		return fmt.Errorf("logstore: config max.compaction.lag.ms %v below min.compaction.lag.ms %v", c.MaxCompactionLag, c.MinCompactionLag)
	}
	return nil
}

func (c Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// writeBehindBytes is how many appended bytes of the active segment start
// their write-back at once (see segment.writeBehind): the roll's sync, on
// the append path, then writes only the last few MiB instead of up to a
// whole segment (a second for 1 GiB here). Every-append logs sync anyway.
func (c Config) writeBehindBytes() int64 {
	if c.Flush == FlushEveryAppend {
		return 0
	}
	return 4 << 20
}
