package vfs

import (
	"bytes"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// Mem is an in-memory FS that models a crash strictly (see the package
// doc). Paths are cleaned with path.Clean; "/" and "." exist from the start
// as the roots of absolute and relative paths. Mem is safe for concurrent
// use: one mutex guards everything, including its files.
//
// Simplification: directories are durable at once. MkdirAll, removing a
// directory (Remove of an empty one, RemoveAll) and renaming a directory
// survive a crash without SyncDir. Only file names wait for SyncDir.
type Mem struct {
	mu sync.Mutex
	// dirs maps a cleaned directory path to its entries. Every directory's
	// parent is in dirs too (the roots are their own parents).
	dirs map[string]*memDir
	// generation counts crashes; a handle from an earlier generation is dead.
	generation uint64
	// fault, when set, runs at the start of every operation under mu.
	fault func(op Op, name string) error
}

// memDir holds the file entries of one directory; subdirectories are the
// keys of Mem.dirs whose path.Dir is this directory.
type memDir struct {
	current map[string]*memNode // what List sees
	durable map[string]*memNode // as of the last SyncDir; what a crash keeps
}

// memNode is a file's contents (an inode: several names and handles may
// share it).
type memNode struct {
	data    []byte // current bytes, including writes through a mapping
	durable []byte // bytes as of the last File.Sync; never aliases data
	// mapCount is the number of handles with a live mapping of data. While
	// it is above zero, data is never reallocated, so mappings stay valid.
	mapCount int
}

// memFileBytesMax bounds a Mem file: a larger Truncate or Map is a bug in
// the test, reported as EFBIG instead of exhausting memory.
const memFileBytesMax = 1 << 32

var _ FS = (*Mem)(nil)

// NewMem returns an empty in-memory file system.
func NewMem() *Mem {
	return &Mem{dirs: map[string]*memDir{
		"/": newMemDir(),
		".": newMemDir(),
	}}
}

func newMemDir() *memDir {
	return &memDir{current: map[string]*memNode{}, durable: map[string]*memNode{}}
}

// SetFault installs f, called at the start of every operation (after the
// check that a file handle is open) with the operation and the file's
// cleaned path. A non-nil error makes the operation do nothing and return
// the error wrapped ("vfs: write /d/x.log: no space left on device"), so
// errors.Is(err, syscall.ENOSPC) and errors.Is(err, ErrInjected) work.
// f runs under Mem's lock: it needs no locking of its own and must not call
// Mem. SetFault(nil) removes it; a crash leaves it in place.
func (m *Mem) SetFault(f func(op Op, name string) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fault = f
}

// inject runs the fault function. Call with mu held.
func (m *Mem) inject(op Op, name string) error {
	if m.fault == nil {
		return nil
	}
	if err := m.fault(op, name); err != nil {
		return opError(op, name, err)
	}
	return nil
}

// Durable returns a copy of what a clean crash would leave of name: its
// synced bytes, if its name is durable in its directory.
func (m *Mem) Durable(name string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	dir, ok := m.dirs[path.Dir(name)]
	if !ok {
		return nil, false
	}
	node, ok := dir.durable[path.Base(name)]
	if !ok {
		return nil, false
	}
	return bytes.Clone(node.durable), true
}

// parent returns the directory holding name. Call with mu held.
func (m *Mem) parent(name string) (*memDir, error) {
	dirName := path.Dir(name)
	if dir, ok := m.dirs[dirName]; ok {
		return dir, nil
	}
	if m.isFile(dirName) {
		return nil, syscall.ENOTDIR
	}
	return nil, syscall.ENOENT
}

// isFile reports whether name is a current file entry. Call with mu held.
func (m *Mem) isFile(name string) bool {
	dir, ok := m.dirs[path.Dir(name)]
	if !ok {
		return false
	}
	_, ok = dir.current[path.Base(name)]
	return ok
}

func isRoot(name string) bool {
	return name == "/" || name == "."
}

// under reports whether name is dir or inside it.
func under(name, dir string) bool {
	return name == dir || strings.HasPrefix(name, strings.TrimSuffix(dir, "/")+"/")
}

func (m *Mem) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	if err := m.inject(OpCreate, name); err != nil {
		return nil, err
	}
	dir, err := m.parent(name)
	if err != nil {
		return nil, opError(OpCreate, name, err)
	}
	if _, isDir := m.dirs[name]; isDir {
		return nil, opError(OpCreate, name, syscall.EISDIR)
	}
	node, ok := dir.current[path.Base(name)]
	switch {
	case !ok:
		node = &memNode{}
		dir.current[path.Base(name)] = node
	case node.mapCount > 0:
		return nil, opError(OpCreate, name, ErrMapped)
	default:
		node.data = node.data[:0] // O_TRUNC: same inode, durable bytes untouched
	}
	return m.newFile(name, node, 0), nil
}

func (m *Mem) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	if err := m.inject(OpOpen, name); err != nil {
		return nil, err
	}
	if _, isDir := m.dirs[name]; isDir {
		return nil, opError(OpOpen, name, syscall.EISDIR)
	}
	dir, err := m.parent(name)
	if err != nil {
		return nil, opError(OpOpen, name, err)
	}
	node, ok := dir.current[path.Base(name)]
	if !ok {
		return nil, opError(OpOpen, name, syscall.ENOENT)
	}
	return m.newFile(name, node, int64(len(node.data))), nil
}

func (m *Mem) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	if err := m.inject(OpRemove, name); err != nil {
		return err
	}
	if dir, isDir := m.dirs[name]; isDir {
		if isRoot(name) {
			return opError(OpRemove, name, syscall.EBUSY)
		}
		if len(dir.current) > 0 || m.hasSubdir(name) {
			return opError(OpRemove, name, syscall.ENOTEMPTY)
		}
		delete(m.dirs, name) // durable at once
		return nil
	}
	dir, err := m.parent(name)
	if err != nil {
		return opError(OpRemove, name, err)
	}
	if _, ok := dir.current[path.Base(name)]; !ok {
		return opError(OpRemove, name, syscall.ENOENT)
	}
	delete(dir.current, path.Base(name))
	return nil
}

func (m *Mem) hasSubdir(dirName string) bool {
	for name := range m.dirs {
		if name != dirName && path.Dir(name) == dirName {
			return true
		}
	}
	return false
}

// RemoveAll removes a file (durable after SyncDir, like Remove) or a
// directory tree (durable at once). A missing name is not an error.
func (m *Mem) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	if err := m.inject(OpRemoveAll, name); err != nil {
		return err
	}
	if isRoot(name) {
		return opError(OpRemoveAll, name, syscall.EBUSY)
	}
	if _, isDir := m.dirs[name]; isDir {
		for dirName := range m.dirs {
			if under(dirName, name) {
				delete(m.dirs, dirName)
			}
		}
		return nil
	}
	if dir, ok := m.dirs[path.Dir(name)]; ok {
		delete(dir.current, path.Base(name))
	}
	return nil
}

// Rename moves a file (durable after SyncDir of both directories) or a
// directory (durable at once; newname must not exist). The fault function
// sees oldname.
func (m *Mem) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldname, newname = path.Clean(oldname), path.Clean(newname)
	if err := m.inject(OpRename, oldname); err != nil {
		return err
	}
	if err := m.rename(oldname, newname); err != nil {
		return opError(OpRename, oldname+" -> "+newname, err)
	}
	return nil
}

func (m *Mem) rename(oldname, newname string) error {
	if _, isDir := m.dirs[oldname]; isDir {
		return m.renameDir(oldname, newname)
	}
	oldDir, err := m.parent(oldname)
	if err != nil {
		return err
	}
	node, ok := oldDir.current[path.Base(oldname)]
	if !ok {
		return syscall.ENOENT
	}
	newDir, err := m.parent(newname)
	if err != nil {
		return err
	}
	if _, isDir := m.dirs[newname]; isDir {
		return syscall.EISDIR
	}
	if oldname == newname {
		return nil
	}
	newDir.current[path.Base(newname)] = node
	delete(oldDir.current, path.Base(oldname))
	return nil
}

func (m *Mem) renameDir(oldname, newname string) error {
	switch {
	case oldname == newname:
		return nil
	case isRoot(oldname):
		return syscall.EBUSY
	case under(newname, oldname):
		return syscall.EINVAL
	}
	if _, isDir := m.dirs[newname]; isDir || m.isFile(newname) {
		return syscall.EEXIST
	}
	if _, err := m.parent(newname); err != nil {
		return err
	}
	moved := map[string]*memDir{}
	for dirName, dir := range m.dirs {
		if under(dirName, oldname) {
			moved[newname+strings.TrimPrefix(dirName, oldname)] = dir
			delete(m.dirs, dirName)
		}
	}
	maps.Copy(m.dirs, moved)
	return nil
}

// MkdirAll creates dir and its parents, durable at once.
func (m *Mem) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = path.Clean(dir)
	if err := m.inject(OpMkdirAll, dir); err != nil {
		return err
	}
	if err := m.mkdirAll(dir); err != nil {
		return opError(OpMkdirAll, dir, err)
	}
	return nil
}

// mkdirAll recurses once per path element.
func (m *Mem) mkdirAll(dir string) error {
	if _, ok := m.dirs[dir]; ok {
		return nil
	}
	if m.isFile(dir) {
		return syscall.ENOTDIR
	}
	if err := m.mkdirAll(path.Dir(dir)); err != nil {
		return err
	}
	m.dirs[dir] = newMemDir()
	return nil
}

func (m *Mem) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = path.Clean(dir)
	if err := m.inject(OpList, dir); err != nil {
		return nil, err
	}
	entries, ok := m.dirs[dir]
	if !ok {
		if m.isFile(dir) {
			return nil, opError(OpList, dir, syscall.ENOTDIR)
		}
		return nil, opError(OpList, dir, syscall.ENOENT)
	}
	names := slices.Collect(maps.Keys(entries.current))
	for name := range m.dirs {
		if name != dir && path.Dir(name) == dir {
			names = append(names, path.Base(name))
		}
	}
	slices.Sort(names)
	return names, nil
}

func (m *Mem) Exists(name string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	if err := m.inject(OpExists, name); err != nil {
		return false, err
	}
	_, isDir := m.dirs[name]
	return isDir || m.isFile(name), nil
}

// SyncDir makes dir's current file entries its durable ones.
func (m *Mem) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = path.Clean(dir)
	if err := m.inject(OpSyncDir, dir); err != nil {
		return err
	}
	entries, ok := m.dirs[dir]
	if !ok {
		if m.isFile(dir) {
			return opError(OpSyncDir, dir, syscall.ENOTDIR)
		}
		return opError(OpSyncDir, dir, syscall.ENOENT)
	}
	entries.durable = maps.Clone(entries.current)
	return nil
}

// newFile opens a handle on node. Call with mu held.
func (m *Mem) newFile(name string, node *memNode, position int64) *memFile {
	return &memFile{mem: m, name: name, node: node, generation: m.generation, position: position}
}
