package vfs

import (
	"errors"
	"io"
)

// ErrNoMmap is returned by File.Map on files that cannot be mapped.
var ErrNoMmap = errors.New("vfs: file cannot be memory-mapped")

// FS is the file-system seam. Names are slash-separated paths as the OS
// takes them. Creating, renaming or removing a file is durable only after
// SyncDir of its parent directory; file contents only after File.Sync.
type FS interface {
	// Create makes a new file (truncating any existing one), open for
	// reading and writing.
	Create(name string) (File, error)
	// Open opens an existing file for reading and writing.
	Open(name string) (File, error)
	Remove(name string) error
	// RemoveAll removes a directory and everything under it.
	RemoveAll(name string) error
	Rename(oldname, newname string) error
	MkdirAll(dir string) error
	// List returns the names (not paths) in dir, sorted.
	List(dir string) ([]string, error)
	// Exists reports whether name exists; errors other than "not found" are returned.
	Exists(name string) (bool, error)
	// SyncDir makes creations, renames and removals in dir durable.
	SyncDir(dir string) error
}

// File is an open file. Writes go at the current write position, which
// starts at 0 on Create and at the end on Open; ReadAt is independent of it.
type File interface {
	io.ReaderAt
	io.Writer
	io.Closer
	// Size is the current length of the file.
	Size() (int64, error)
	// Truncate sets the file length and moves the write position to it.
	Truncate(size int64) error
	// Sync makes the contents durable (fdatasync).
	Sync() error
	// WriteBehind starts writing the range to the disk without waiting for
	// it (sync_file_range SYNC_FILE_RANGE_WRITE), so that dirty pages do
	// not pile up until a Sync that must then write them all. It promises
	// nothing about durability; Sync still does. Mem does nothing.
	WriteBehind(offset, length int64) error
	// Map maps the first size bytes (extending the file with zeros if it is
	// shorter) for reading and writing. The mapping holds no descriptor: it
	// stays valid after Close, until its Unmap. While it is live, Write and
	// Truncate of the file return ErrMapped.
	Map(size int) (Mapping, error)
	// Fd is the OS descriptor for sendfile, or ^uintptr(0) when there is none.
	Fd() uintptr
}

// Mapping is a file's bytes mapped into memory. Writes to Bytes are file
// writes, durable after Sync. It outlives the handle it was made through,
// so a process can keep many files mapped without holding a descriptor for
// each (Kafka's index files work the same way).
type Mapping interface {
	// Bytes is the mapped memory; reading it after Unmap is a fault.
	Bytes() []byte
	// Sync makes writes through Bytes durable (msync MS_SYNC, which also
	// syncs a size the mapping extended the file to).
	Sync() error
	// Unmap releases the memory; a second Unmap does nothing.
	Unmap() error
}
