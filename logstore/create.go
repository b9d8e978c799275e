package logstore

import (
	"errors"
	"fmt"
	"path"

	"github.com/mirrord/mirrord/epoch"
	"github.com/mirrord/mirrord/vfs"
)

// NewPartition is one partition for CreateMany: its name and topic ID,
// and the configuration of its log.
type NewPartition struct {
	PartitionInfo
	Config Config
}

// createsAtOnce is how many partitions CreateMany works on at once in each
// of its phases: enough that the file system commits the syncs of one
// phase together, few enough to bound the goroutines and descriptors.
const createsAtOnce = 16

// createsChunk is how many partitions go through phases 1-3 of
// makePartitions together: each holds its partition.metadata.tmp open
// from phase 1 to phase 2, so a creation of 10,000 partitions must not
// hold 10,000 descriptors beside the logs' own (a source creating a
// 10,000-partition topic ran out of RLIMIT_NOFILE without it).
const createsChunk = 1024

// CreateMany makes empty partition logs, of one topic or of many, durable
// when it returns, in the order of news. On an error it removes what it
// made and returns the errors; nothing is registered. A crash before it
// returns may leave any of them, each whole (see makePartitions).
func (d *Dir) CreateMany(news []NewPartition) ([]*Log, error) {
	for _, p := range news {
		if err := ValidateTopicName(p.Topic); err != nil {
			return nil, err
		}
		if p.Partition < 0 {
			return nil, fmt.Errorf("logstore: partition %d of %q is negative", p.Partition, p.Topic)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	seen := make(map[TopicPartition]bool, len(news))
	for _, p := range news {
		if _, ok := d.partitions[p.TopicPartition]; ok || seen[p.TopicPartition] {
			return nil, fmt.Errorf("%w: %s", ErrExists, p.TopicPartition)
		}
		seen[p.TopicPartition] = true
	}
	logs, err := d.makePartitions(news)
	if err != nil {
		return nil, err
	}
	for i, log := range logs {
		d.partitions[news[i].TopicPartition] = &partition{info: news[i].PartitionInfo, log: log}
	}
	return logs, nil
}

// creation is one partition makePartitions is making.
type creation struct {
	NewPartition
	full     string   // the partition's directory
	metadata vfs.File // partition.metadata.tmp, written, until it is synced
	log      *Log
	err      error
}

// makePartitions makes the directories of news (d.mu held), each with its
// partition.metadata and an empty log, in phases that each run over all
// of them (in chunks of createsChunk), createsAtOnce at a time, so that their syncs overlap instead of
// following one another partition by partition:
//
//  1. make the directory, write partition.metadata.tmp (not synced) and
//     the empty segment's files;
//  2. sync partition.metadata.tmp and rename it to partition.metadata;
//  3. sync each partition directory;
//  4. sync the data directory, once for all.
//
// The syncs are those of one partition made alone (one file sync and one
// directory sync each, and the data directory's), in another order across
// partitions; within one partition the order is kept. Why a partition
// reported made survives kill -9 and power loss: its partition.metadata
// was synced before it was renamed (2), the rename is durable by its
// directory's sync (3), and the directory's entry in the data directory
// by 4, all before makePartitions returns. The empty segment's files are
// never synced here: Open makes a missing segment, and rebuilds missing
// indexes, as it does for any log. What a crash leaves of a partition not
// yet reported is either a directory without partition.metadata, which
// OpenDir removes (nothing in it was acknowledged), or a whole partition:
// partition.metadata exists only by the rename of a synced file, so it is
// never torn (TestDirCreateManyCrash crashes at every step).
func (d *Dir) makePartitions(news []NewPartition) ([]*Log, error) {
	cs := make([]creation, len(news))
	for i, p := range news {
		cs[i] = creation{NewPartition: p, full: path.Join(d.path, p.String())}
	}
	var errs []error
	for from := 0; from < len(cs) && len(errs) == 0; from += createsChunk {
		chunk := cs[from:min(from+createsChunk, len(cs))]
		phase := func(step func(c *creation) error) {
			eachAtOnceN(createsAtOnce, len(chunk), func(i int) {
				if c := &chunk[i]; c.err == nil {
					c.err = step(c)
				}
			})
		}
		phase(d.writePartition)
		phase(func(c *creation) error {
			err := c.metadata.Sync()
			err = errors.Join(err, c.metadata.Close())
			c.metadata = nil
			if err != nil {
				return err
			}
			return d.fs.Rename(path.Join(c.full, partitionMetadataName+tmpSuffix), path.Join(c.full, partitionMetadataName))
		})
		phase(func(c *creation) error { return d.fs.SyncDir(c.full) })
		for _, c := range chunk {
			if c.err != nil {
				errs = append(errs, c.err)
			}
		}
	}
	err := errors.Join(errs...)
	if err == nil {
		err = d.fs.SyncDir(d.path) // the partition directories' own entries
	}
	if err == nil {
		logs := make([]*Log, len(cs))
		for i := range cs {
			logs[i] = cs[i].log
		}
		return logs, nil
	}
	for _, c := range cs {
		if c.metadata != nil {
			c.metadata.Close()
		}
		if c.log != nil {
			c.log.discard()
		}
		if exists, xerr := d.fs.Exists(c.full); xerr != nil || exists {
			err = errors.Join(err, xerr, d.fs.RemoveAll(c.full))
		}
	}
	return nil, err
}

// writePartition is phase 1 of makePartitions for c.
func (d *Dir) writePartition(c *creation) error {
	if err := d.fs.MkdirAll(c.full); err != nil {
		return err
	}
	f, err := d.fs.Create(path.Join(c.full, partitionMetadataName+tmpSuffix))
	if err != nil {
		return err
	}
	c.metadata = f
	if _, err := fmt.Fprintf(f, partitionMetadataFormat, c.TopicID); err != nil {
		return err
	}
	cfg := c.Config
	cfg.files = d.files
	c.log, err = newLog(d.fs, c.full, cfg)
	return err
}

// newLog makes the empty log of a partition directory just made: Open's
// result for an empty directory, without Open's reads and syncs (there is
// nothing to load, and makePartitions syncs the directory). Only the log
// file of its segment is made: the indexes are made and mapped by the
// first append (unseal) or by Close (seal), so a new partition costs two
// files (partition.metadata, the log) and no mapping until it is written.
// The segment's files need no sync: Open remakes a missing log file, and
// rebuilds missing indexes (from an empty log, nothing), when a crash
// loses them.
func newLog(fs vfs.FS, dir string, cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	epochs, err := epoch.New(nil)
	if err != nil {
		return nil, err
	}
	s, err := createSegmentLog(fs, dir, 0, cfg, "")
	if err != nil {
		return nil, err
	}
	s.offsets = &index{fs: fs, name: segmentPath(dir, 0, extIndex), entrySize: offsetEntrySize, absent: true}
	s.times = &index{fs: fs, name: segmentPath(dir, 0, extTimeIndex), entrySize: timeEntrySize, absent: true}
	s.track(cfg.files)
	l := &Log{fs: fs, dir: dir, cfg: cfg, segments: []*segment{s}, epochs: epochs, cleanerOffset: noCleanerOffset}
	l.publishEnds() // as Open does: no epoch yet, not the zero value's epoch 0
	return l, nil
}

// discard releases the segments of a log that makePartitions made and is
// removing, without Close's syncs and checkpoints.
func (l *Log) discard() {
	for _, s := range l.segments {
		s.release()
	}
}
