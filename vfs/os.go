package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"syscall"

	"golang.org/x/sys/unix"
)

// OS is the real file system: fdatasync for File.Sync, fsync of the
// directory for SyncDir, mmap(MAP_SHARED) for File.Map, msync for Mapping.Sync.
var OS FS = osFS{}

const (
	osFileMode = 0o644
	osDirMode  = 0o755
)

type osFS struct{}

var _ FS = osFS{}

func (osFS) Create(name string) (File, error) {
	file, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, osFileMode)
	if err != nil {
		return nil, osError(OpCreate, name, err)
	}
	return newOSFile(file, name, OpCreate)
}

func (osFS) Open(name string) (File, error) {
	file, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, osError(OpOpen, name, err)
	}
	if _, err := file.Seek(0, io.SeekEnd); err != nil {
		return nil, errors.Join(osError(OpOpen, name, err), file.Close())
	}
	return newOSFile(file, name, OpOpen)
}

func (osFS) Remove(name string) error {
	if err := os.Remove(name); err != nil {
		return osError(OpRemove, name, err)
	}
	return nil
}

func (osFS) RemoveAll(name string) error {
	if err := os.RemoveAll(name); err != nil {
		return osError(OpRemoveAll, name, err)
	}
	return nil
}

func (osFS) Rename(oldname, newname string) error {
	if err := os.Rename(oldname, newname); err != nil {
		return osError(OpRename, oldname+" -> "+newname, err)
	}
	return nil
}

func (osFS) MkdirAll(dir string) error {
	if err := os.MkdirAll(dir, osDirMode); err != nil {
		return osError(OpMkdirAll, dir, err)
	}
	return nil
}

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, osError(OpList, dir, err)
	}
	names := make([]string, len(entries))
	for i, entry := range entries {
		names[i] = entry.Name()
	}
	sort.Strings(names) // os.ReadDir sorts already; the contract is ours to keep
	return names, nil
}

func (osFS) Exists(name string) (bool, error) {
	_, err := os.Stat(name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, osError(OpExists, name, err)
	}
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return osError(OpSyncDir, dir, err)
	}
	syncErr := d.Sync()
	closeErr := d.Close()
	if syncErr != nil {
		return errors.Join(osError(OpSyncDir, dir, syncErr), closeErr)
	}
	if closeErr != nil {
		return osError(OpSyncDir, dir, closeErr)
	}
	return nil
}

// osError drops the os package's own "op path:" prefix (the message would
// name the file twice) and keeps the errno for errors.Is.
func osError(op Op, name string, err error) error {
	var pathErr *fs.PathError
	var linkErr *os.LinkError
	switch {
	case errors.As(err, &pathErr):
		err = pathErr.Err
	case errors.As(err, &linkErr):
		err = linkErr.Err
	}
	return opError(op, name, err)
}

// osFile is an open file of OS. ReadAt, Size and Fd may run concurrently
// with anything; the other methods are called by one goroutine at a time
// (the owner of the file).
type osFile struct {
	file *os.File
	raw  syscall.RawConn
	fd   int // the descriptor, for the calls that must not allocate
	name string
	// mapping is the last mapping made through this handle, nil if none;
	// Write and Truncate refuse while it is live.
	mapping *osMapping
	// closed is set by Close. os.File reports fs.ErrClosed itself except
	// through RawConn, which Sync and Map use.
	closed bool
}

var _ File = (*osFile)(nil)

func newOSFile(file *os.File, name string, op Op) (*osFile, error) {
	raw, err := file.SyscallConn()
	if err != nil {
		return nil, errors.Join(osError(op, name, err), file.Close())
	}
	var fd int
	if err := raw.Control(func(descriptor uintptr) { fd = int(descriptor) }); err != nil {
		return nil, errors.Join(osError(op, name, err), file.Close())
	}
	return &osFile{file: file, raw: raw, fd: fd, name: name}, nil
}

// ignoringEINTR retries fn while it is interrupted by a signal.
func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}

// control runs fn with the descriptor, which stays open while fn runs.
func (f *osFile) control(fn func(fd int) error) error {
	var inner error
	if err := f.raw.Control(func(fd uintptr) { inner = fn(int(fd)) }); err != nil {
		return err
	}
	return inner
}

func (f *osFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.file.ReadAt(p, off)
	if err != nil && err != io.EOF {
		return n, osError(OpRead, f.name, err)
	}
	return n, err
}

func (f *osFile) Write(p []byte) (int, error) {
	if f.isMapped() {
		return 0, opError(OpWrite, f.name, ErrMapped)
	}
	n, err := f.file.Write(p)
	if err != nil {
		return n, osError(OpWrite, f.name, err)
	}
	return n, nil
}

func (f *osFile) Size() (int64, error) {
	info, err := f.file.Stat()
	if err != nil {
		return 0, osError(OpSize, f.name, err)
	}
	return info.Size(), nil
}

func (f *osFile) Truncate(size int64) error {
	if f.isMapped() {
		return opError(OpTruncate, f.name, ErrMapped)
	}
	if err := f.file.Truncate(size); err != nil {
		return osError(OpTruncate, f.name, err)
	}
	if _, err := f.file.Seek(size, io.SeekStart); err != nil {
		return osError(OpTruncate, f.name, err)
	}
	return nil
}

func (f *osFile) Sync() error {
	if f.closed {
		return opError(OpSync, f.name, fs.ErrClosed)
	}
	// Straight on the descriptor, not through control: a closure there
	// costs an allocation per sync, and the owner does not Close while
	// it syncs.
	if err := ignoringEINTR(func() error { return unix.Fdatasync(f.fd) }); err != nil {
		return osError(OpSync, f.name, err)
	}
	return nil
}

// WriteBehind goes through the RawConn, which holds the descriptor while
// the call runs: a log starts it outside its lock, where a Close may race
// with it; the descriptor cannot be closed, and so reused, under it.
func (f *osFile) WriteBehind(offset, length int64) error {
	var err error
	if cerr := f.raw.Control(func(fd uintptr) {
		err = ignoringEINTR(func() error { return unix.SyncFileRange(int(fd), offset, length, unix.SYNC_FILE_RANGE_WRITE) })
	}); cerr != nil {
		return opError(OpSync, f.name, fs.ErrClosed) // Control fails only on a closed file
	}
	if err != nil {
		return osError(OpSync, f.name, err)
	}
	return nil
}

func (f *osFile) Map(size int) (Mapping, error) {
	switch {
	case f.closed:
		return nil, opError(OpMap, f.name, fs.ErrClosed)
	case size < 0:
		return nil, opError(OpMap, f.name, syscall.EINVAL)
	case f.isMapped():
		return nil, opError(OpMap, f.name, ErrMapped)
	case size == 0:
		return &osMapping{name: f.name, bytes: []byte{}}, nil
	}
	current, err := f.Size()
	if err != nil {
		return nil, err
	}
	if current < int64(size) {
		// ftruncate, not Truncate: the write position stays where it is.
		if err := f.file.Truncate(int64(size)); err != nil {
			return nil, osError(OpMap, f.name, err)
		}
	}
	var bytes []byte
	err = f.control(func(fd int) error {
		var err error
		bytes, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		return err
	})
	if errors.Is(err, unix.ENOMEM) {
		// mmap fails so when the process has vm.max_map_count mappings.
		return nil, osError(OpMap, f.name, fmt.Errorf("%w (indexes stay mapped once read: "+
			"with many partitions or segments raise vm.max_map_count, as for Kafka)", err))
	}
	if err != nil {
		return nil, osError(OpMap, f.name, err)
	}
	// Mappings here are indexes: binary searched and appended to, never
	// read in order, so the kernel's readahead on each fault is wasted.
	if err := unix.Madvise(bytes, unix.MADV_RANDOM); err != nil {
		unix.Munmap(bytes)
		return nil, osError(OpMap, f.name, err)
	}
	f.mapping = &osMapping{name: f.name, bytes: bytes, live: true}
	return f.mapping, nil
}

// isMapped reports whether the last mapping made through f is live.
func (f *osFile) isMapped() bool { return f.mapping != nil && f.mapping.live }

func (f *osFile) Close() error {
	f.closed = true
	if err := f.file.Close(); err != nil {
		return osError(OpClose, f.name, err)
	}
	return nil
}

// osMapping is an mmap(MAP_SHARED) of a file; the kernel keeps the file
// referenced while it is mapped, descriptor or not. Its methods are called
// by one goroutine at a time (the owner).
type osMapping struct {
	name  string
	bytes []byte
	live  bool // mapped: false for Map(0) and after Unmap
}

func (m *osMapping) Bytes() []byte { return m.bytes }

func (m *osMapping) Sync() error {
	if !m.live {
		return nil
	}
	if err := ignoringEINTR(func() error { return unix.Msync(m.bytes, unix.MS_SYNC) }); err != nil {
		return osError(OpSync, m.name, err)
	}
	return nil
}

func (m *osMapping) Unmap() error {
	if !m.live {
		return nil
	}
	if err := unix.Munmap(m.bytes); err != nil {
		return osError(OpUnmap, m.name, err)
	}
	m.bytes, m.live = nil, false
	return nil
}

func (f *osFile) Fd() uintptr {
	return f.file.Fd()
}
