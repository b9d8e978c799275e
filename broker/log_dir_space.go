package broker

// The log directory's free space and its reserve (log.dir.reserve.bytes,
// mirrord's own config). Below the reserve the node refuses the writes
// clients and mirrors cause (Produce to writable topics, CreateTopics,
// CreatePartitions, a mirror's appends) with netio.ErrStorage
// (KAFKA_STORAGE_ERROR), before the disk is completely full, so that what
// the node writes for itself (__mirror_state, group offsets, transaction
// state, producer-state and log checkpoints, the clean shutdown marker)
// still fits and the node can restart. Writes resume by themselves once
// space returns: every refused write looks at the file system again.
//
// Free space is statfs's Bavail of the data directory, refreshed on a
// ticker (logDirSpaceInterval), on every write while below the reserve,
// after every reserve/4 bytes appended, and after a write the disk
// refused. Between two looks the bytes appended since are subtracted, so a
// fast writer cannot run past the reserve between ticks.

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mirrord/mirrord/netio"
	"github.com/mirrord/mirrord/vfs"
)

// ErrLogDirLowSpace is a write refused because the log directory's free
// space is below log.dir.reserve.bytes; it is a netio.ErrStorage.
var ErrLogDirLowSpace = fmt.Errorf("broker: log directory free space below log.dir.reserve.bytes: %w", netio.ErrStorage)

const (
	// DefaultLogDirReserveBytesMax caps the default reserve: 1% of the
	// file system, at most 64 MiB. 64 MiB holds many times what the node
	// writes for itself between a refusal and an operator's action (a
	// __mirror_state record is ~200 bytes, a checkpoint a few KiB per
	// partition, an index entry 8-12 bytes) and is nothing on a data disk;
	// 1% keeps a small file system (a test's tmpfs) usable.
	DefaultLogDirReserveBytesMax = 64 << 20
	defaultLogDirReservePercent  = 1

	logDirSpaceInterval = time.Second
)

// FreeSpace reports the free bytes (for an unprivileged writer) and the
// size of the file system holding dir.
type FreeSpace func(dir string) (free, size int64, err error)

// Statfs is FreeSpace by statfs(2).
func Statfs(dir string) (free, size int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("broker: statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * st.Bsize, int64(st.Blocks) * st.Bsize, nil
}

// LogDirSpace is what the node knows of its log directory's space.
type LogDirSpace struct {
	Known        bool  // false: the file system cannot say (an in-memory one)
	FreeBytes    int64 // at the last look
	ReserveBytes int64 // log.dir.reserve.bytes in effect; 0: none
	Low          bool  // FreeBytes < ReserveBytes: client and mirror writes refused
}

// logDirSpace watches the free space; its methods are safe for concurrent
// use. A nil *logDirSpace admits every write.
type logDirSpace struct {
	dir     string
	reserve int64
	stat    FreeSpace
	log     *slog.Logger

	free     atomic.Int64 // at the last look
	appended atomic.Int64 // bytes written since the last look
	low      atomic.Bool

	mu   sync.Mutex // one look at a time
	stop chan struct{}
	done chan struct{}
}

// openLogDirSpace starts watching cfg's data directory: configured is
// log.dir.reserve.bytes (0: the default, negative: no reserve). It
// returns nil when the file system cannot report its space.
func openLogDirSpace(cfg Config, log *slog.Logger) (*logDirSpace, error) {
	stat := cfg.FreeSpace
	if stat == nil {
		if cfg.FS != vfs.OS {
			return nil, nil
		}
		stat = Statfs
	}
	free, size, err := stat(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	reserve := cfg.LogDirReserveBytes
	switch {
	case reserve == 0:
		reserve = min(DefaultLogDirReserveBytesMax, size*defaultLogDirReservePercent/100)
	case reserve < 0:
		reserve = 0
	}
	s := &logDirSpace{dir: cfg.DataDir, reserve: reserve, stat: stat, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	s.set(free)
	return s, nil
}

// start starts the ticker; close stops it.
func (s *logDirSpace) start() {
	if s != nil {
		go s.run()
	}
}

func (s *logDirSpace) run() {
	defer close(s.done)
	tick := time.NewTicker(logDirSpaceInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			s.refresh()
		}
	}
}

func (s *logDirSpace) close() {
	if s != nil {
		close(s.stop)
		<-s.done
	}
}

// refresh looks at the file system again.
func (s *logDirSpace) refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	free, _, err := s.stat(s.dir)
	if err != nil {
		s.log.Warn("log directory free space unknown", "error", err)
		return
	}
	s.appended.Store(0)
	s.set(free)
}

// set records free bytes and logs a change of side of the reserve.
func (s *logDirSpace) set(free int64) {
	s.free.Store(free)
	low := free < s.reserve
	if s.low.Swap(low) != low {
		if low {
			s.log.Warn("log directory low on space: refusing client writes and mirror appends", "dir", s.dir,
				"free_bytes", free, "log_dir_reserve_bytes", s.reserve)
		} else {
			s.log.Info("log directory has space again: writes resume", "dir", s.dir, "free_bytes", free, "log_dir_reserve_bytes", s.reserve)
		}
	}
}

// admit returns nil when a write of size bytes may go ahead, else an
// ErrLogDirLowSpace naming the space.
func (s *logDirSpace) admit(size int) error {
	if s == nil || s.reserve == 0 {
		return nil
	}
	appended := s.appended.Load()
	if s.low.Load() || s.free.Load()-appended-int64(size) < s.reserve || appended > s.reserve/4 {
		s.refresh()
	}
	if free := s.free.Load(); s.low.Load() || free-int64(size) < s.reserve {
		return fmt.Errorf("%w: %d bytes free in %s, log.dir.reserve.bytes %d", ErrLogDirLowSpace, free, s.dir, s.reserve)
	}
	return nil
}

// wrote counts a write of size bytes, or looks again if the disk refused
// it.
func (s *logDirSpace) wrote(size int, err error) {
	switch {
	case s == nil:
	case err == nil:
		s.appended.Add(int64(size))
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		s.refresh()
	}
}

// report is the space as LogDirSpace.
func (s *logDirSpace) report() LogDirSpace {
	if s == nil {
		return LogDirSpace{}
	}
	return LogDirSpace{Known: true, FreeBytes: s.free.Load(), ReserveBytes: s.reserve, Low: s.low.Load()}
}

// LogDirSpace reports the log directory's free space and reserve.
func (n *Node) LogDirSpace() LogDirSpace { return n.space.report() }

// space is the partition's node's log directory space (nil: none).
func (p *Partition) space() *logDirSpace {
	if p.node == nil {
		return nil
	}
	return p.node.space
}
