package logstore

import (
	"container/list"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
)

// fileCache bounds what the idle segments of a Dir hold open: the log
// file's descriptor and the mappings of its two indexes. With 100,000
// partitions, one open log file and one or two mapped indexes each would
// pass the process's RLIMIT_NOFILE and vm.max_map_count (65530 by
// default; a failed mmap takes the partition offline at open).
//
// A segment is held (never evicted) while it is written: from creation or
// open until idle (a clean open, a roll, a cleaning's swap), and again
// from unseal (the first append, a truncation) on. An idle segment is in
// the cache's LRU list while its files are open; a reader pins it (pin)
// for as long as it uses the descriptor or an index mapping (a Slice
// until Release, a walk, a lookup), and eviction takes only unpinned
// segments: an index is never unmapped under a lookup, nor a descriptor
// closed under a sendfile. A miss (pin of an evicted segment) opens the
// log file again by name; its indexes map again when a lookup needs them
// (index.readable).
//
// Lock order: fileCache.mu, then segment.hmu. pin takes hmu alone and
// then mu, never both at once.
//
// Why not ristretto (the DESIGN's cache library): its Set is admitted by
// TinyLFU and buffered (a Set may be dropped or applied later), and its
// eviction runs on its own goroutine without asking whether the entry is
// in use; a bound on mappings must count every mapping exactly and close
// only what no reader holds, which needs the pin count under the same
// lock as the eviction. An LRU list under one mutex does that.
type fileCache struct {
	maxFiles int64 // log.open.files.max
	maxBytes int64 // log.index.cache.max.bytes

	mu  sync.Mutex
	lru list.List // of *segment, idle ones with open files; front: most recent

	// Gauges of every segment of the Dir, held or idle.
	files, mappings, mappedBytes atomic.Int64
	idleBytes                    atomic.Int64 // mapped by idle segments' indexes
	hits, misses, evictions      atomic.Uint64
}

// FileCacheStats is what a Dir's segments hold open and how its cache of
// idle segments' files does (mirrord_log_* metrics).
type FileCacheStats struct {
	OpenFiles        int64 // log file descriptors held
	IndexMappings    int64 // index mappings held
	IndexMappedBytes int64
	// IdleMappedBytes is the part of IndexMappedBytes that idle segments
	// map (bounded by IndexCacheBytesMax); the rest is active segments'.
	IdleMappedBytes int64
	// OpenFilesMax and IndexCacheBytesMax are the bounds in effect
	// (log.open.files.max, log.index.cache.max.bytes).
	OpenFilesMax       int64
	IndexCacheBytesMax int64
	// Hits and Misses count pins of idle segments: open or reopened.
	Hits, Misses, Evictions uint64
}

// lowOpenFilesMax is a default bound worth a warning: a descriptor limit
// of less than 2,048 (1,024 is common) makes a node with more segments
// than that reopen files as it reads them.
const lowOpenFilesMax = 1024

// newFileCache makes the cache of a Dir with cfg's bounds (0: default).
func newFileCache(cfg Config) *fileCache {
	maxFiles, maxBytes := cfg.OpenFilesMax, cfg.IndexCacheBytesMax
	limit := fileLimit()
	switch {
	case maxFiles == 0:
		maxFiles = DefaultOpenFilesMax()
		if maxFiles < lowOpenFilesMax {
			slog.Warn("logstore: the descriptor limit (RLIMIT_NOFILE) bounds the open log files to half of it: "+
				"idle segments are closed and opened again when read; raise ulimit -n for fewer reopens",
				"rlimit_nofile", limit, "log_open_files_max", maxFiles)
		}
	case uint64(maxFiles) >= limit:
		slog.Warn("logstore: log.open.files.max is not below the descriptor limit (RLIMIT_NOFILE): "+
			"opening a segment or accepting a connection may fail with EMFILE",
			"rlimit_nofile", limit, "log_open_files_max", maxFiles)
	}
	if maxBytes == 0 {
		maxBytes = DefaultIndexCacheBytesMax
	}
	c := &fileCache{maxFiles: int64(maxFiles), maxBytes: maxBytes}
	c.lru.Init()
	return c
}

func (c *fileCache) stats() FileCacheStats {
	if c == nil {
		return FileCacheStats{}
	}
	return FileCacheStats{OpenFiles: c.files.Load(), IndexMappings: c.mappings.Load(), IndexMappedBytes: c.mappedBytes.Load(), IdleMappedBytes: c.idleBytes.Load(),
		OpenFilesMax: c.maxFiles, IndexCacheBytesMax: c.maxBytes, Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load()}
}

// fileOpened and mapped keep the gauges; c may be nil (a Log opened
// outside a Dir keeps no count and no bound).
func (c *fileCache) fileOpened(delta int64) {
	if c != nil {
		c.files.Add(delta)
	}
}

func (c *fileCache) mapped(bytes int, delta int64, idle bool) {
	if c != nil && bytes > 0 {
		c.mappings.Add(delta)
		c.mappedBytes.Add(delta * int64(bytes))
		if idle {
			c.idleBytes.Add(delta * int64(bytes))
		}
	}
}

// idleMapped moves bytes of mappings in (idle) or out of the bound.
func (c *fileCache) idleMapped(bytes int, idle bool) {
	if c != nil && idle {
		c.idleBytes.Add(int64(bytes))
	} else if c != nil {
		c.idleBytes.Add(-int64(bytes))
	}
}

func (c *fileCache) over() bool {
	return c.files.Load() > c.maxFiles || c.idleBytes.Load() > c.maxBytes
}

// evictLocked closes the least recently used unpinned idle segments
// while the cache is over a bound (c.mu held). Held and pinned segments
// count but stay: the bound is exceeded by at most what is written to or
// read at the moment.
func (c *fileCache) evictLocked() {
	for e := c.lru.Back(); e != nil && c.over(); {
		prev := e.Prev()
		s := e.Value.(*segment)
		s.hmu.Lock()
		if s.pins == 0 && !s.held && !s.evicted {
			s.closeFiles()
			s.evicted = true
			c.lru.Remove(e)
			s.elem = nil
			c.evictions.Add(1)
		}
		s.hmu.Unlock()
		e = prev
	}
}

// touch moves s to the front (inserting it when its files are open and
// it is idle) and evicts what is over the bounds.
func (c *fileCache) touch(s *segment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.elem != nil {
		c.lru.MoveToFront(s.elem)
	} else {
		s.hmu.Lock()
		if !s.held && !s.evicted && !s.gone {
			s.elem = c.lru.PushFront(s)
		}
		s.hmu.Unlock()
	}
	if c.over() {
		c.evictLocked()
	}
}

// pin makes the segment's log file and indexes usable until unpin: it
// opens the file again when it was evicted. Held segments need no pin
// (their writer holds the log's lock), but pinning one is harmless.
func (s *segment) pin() error {
	c := s.files
	if c == nil {
		return nil
	}
	s.hmu.Lock()
	if s.evicted {
		if err := s.reopenFiles(); err != nil {
			s.hmu.Unlock()
			return err
		}
		c.misses.Add(1)
	} else if !s.held {
		c.hits.Add(1)
	}
	s.pins++
	held := s.held
	s.hmu.Unlock()
	if !held {
		c.touch(s)
	}
	return nil
}

// unpin ends a pin; eviction may then close the files.
func (s *segment) unpin() {
	c := s.files
	if c == nil {
		return
	}
	s.hmu.Lock()
	s.pins--
	s.hmu.Unlock()
	c.evict()
}

// hold takes the segment out of the cache for writing: its files open
// (again) and stay open until idle.
func (s *segment) hold() error {
	c := s.files
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s.hmu.Lock()
	if s.evicted {
		if err := s.reopenFiles(); err != nil {
			s.hmu.Unlock()
			return err
		}
	}
	s.held = true
	s.offsets.setIdle(false)
	s.times.setIdle(false)
	if s.elem != nil {
		c.lru.Remove(s.elem)
		s.elem = nil
	}
	s.hmu.Unlock()
	c.evictLocked()
	return nil
}

// evict closes idle segments while the cache is over a bound.
func (c *fileCache) evict() {
	if c != nil && c.over() {
		c.mu.Lock()
		c.evictLocked()
		c.mu.Unlock()
	}
}

// idle ends writing to a sealed segment (the log's lock held): its
// indexes are unmapped until a lookup needs them, and its log file stays
// open until the cache evicts it.
func (s *segment) idle() {
	c := s.files
	if c == nil {
		s.unmapIndexes()
		return
	}
	s.hmu.Lock()
	if s.pins == 0 { // a cleaning may be looking up in it: eviction unmaps it later
		s.unmapIndexes()
	}
	s.held = false
	s.offsets.setIdle(true)
	s.times.setIdle(true)
	s.hmu.Unlock()
	c.touch(s)
}

// forget takes the segment out of the cache for good (its last reference
// is gone) and reports whether its files are still open to close.
func (s *segment) forget() (open bool) {
	c := s.files
	if c == nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s.hmu.Lock()
	defer s.hmu.Unlock()
	s.gone = true
	if s.elem != nil {
		c.lru.Remove(s.elem)
		s.elem = nil
	}
	return !s.evicted
}

// closeFiles closes the log file and unmaps the indexes (s.hmu held, no
// pin). Errors leave the file open or the index mapped and readable; a
// close error is the kernel's to report and changes nothing here.
func (s *segment) closeFiles() {
	s.offsets.unmapUntilRead()
	s.times.unmapUntilRead()
	_ = s.log.Close()
	s.files.fileOpened(-1)
}

// reopenFiles opens the log file of an evicted segment again (s.hmu
// held). Its indexes stay unmapped until a lookup maps them.
func (s *segment) reopenFiles() error {
	log, err := s.fs.Open(segmentPath(s.dir, s.base, extLog))
	if err != nil {
		return err
	}
	s.log = log
	s.evicted = false
	s.files.fileOpened(1)
	return nil
}

// isIdle reports whether the segment is in the cache's care (not held).
func (s *segment) isIdle() bool {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	return !s.held
}

// fileLimit is the process's soft RLIMIT_NOFILE (unbounded when it cannot
// be read).
func fileLimit() uint64 {
	var limit syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &limit); err != nil || limit.Cur > math.MaxInt32 {
		return math.MaxInt32
	}
	return limit.Cur
}
