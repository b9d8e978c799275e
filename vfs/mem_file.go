package vfs

import (
	"bytes"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"syscall"
)

// memFile is an open handle of Mem. Its fields are guarded by mem.mu.
type memFile struct {
	mem  *Mem
	name string // cleaned path it was opened by; names it in errors
	node *memNode
	// generation is mem.generation when opened; a crash makes it stale.
	generation uint64
	position   int64       // write position; may exceed len(node.data) after another handle truncates
	mapping    *memMapping // the last mapping made through this handle
	closed     bool
}

var _ File = (*memFile)(nil)

// begin checks that the handle is usable and runs the fault function.
// Call with mem.mu held.
func (f *memFile) begin(op Op) error {
	if err := f.usable(op); err != nil {
		return err
	}
	return f.mem.inject(op, f.name)
}

// usable checks that the handle is neither closed nor lost in a crash.
// Call with mem.mu held.
func (f *memFile) usable(op Op) error {
	switch {
	case f.closed:
		return opError(op, f.name, fs.ErrClosed)
	case f.generation != f.mem.generation:
		return opError(op, f.name, ErrCrashed)
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.mem.mu.Lock()
	defer f.mem.mu.Unlock()
	if err := f.begin(OpRead); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, opError(OpRead, f.name, syscall.EINVAL)
	}
	data := f.node.data
	if off >= int64(len(data)) {
		return 0, io.EOF
	}
	n := copy(p, data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.mem.mu.Lock()
	defer f.mem.mu.Unlock()
	if err := f.begin(OpWrite); err != nil {
		return 0, err
	}
	if f.node.mapCount > 0 {
		return 0, opError(OpWrite, f.name, ErrMapped)
	}
	end := f.position + int64(len(p))
	if end > memFileBytesMax {
		return 0, opError(OpWrite, f.name, syscall.EFBIG)
	}
	if end > int64(len(f.node.data)) {
		f.node.data = resize(f.node.data, int(end))
	}
	copy(f.node.data[f.position:], p)
	f.position = end
	return len(p), nil
}

func (f *memFile) Size() (int64, error) {
	f.mem.mu.Lock()
	defer f.mem.mu.Unlock()
	if err := f.begin(OpSize); err != nil {
		return 0, err
	}
	return int64(len(f.node.data)), nil
}

func (f *memFile) Truncate(size int64) error {
	f.mem.mu.Lock()
	defer f.mem.mu.Unlock()
	if err := f.begin(OpTruncate); err != nil {
		return err
	}
	switch {
	case f.node.mapCount > 0:
		return opError(OpTruncate, f.name, ErrMapped)
	case size < 0:
		return opError(OpTruncate, f.name, syscall.EINVAL)
	case size > memFileBytesMax:
		return opError(OpTruncate, f.name, syscall.EFBIG)
	}
	f.node.data = resize(f.node.data, int(size))
	f.position = size
	return nil
}

// Sync copies the current bytes, including writes through a mapping, to
// the durable bytes.
func (f *memFile) Sync() error {
	f.mem.mu.Lock()
	defer f.mem.mu.Unlock()
	if err := f.begin(OpSync); err != nil {
		return err
	}
	f.node.durable = append(f.node.durable[:0], f.node.data...)
	return nil
}

// WriteBehind checks the handle and does nothing else: Mem has no disk to
// start writing to, and durability is Sync's.
func (f *memFile) WriteBehind(offset, length int64) error {
	f.mem.mu.Lock()
	defer f.mem.mu.Unlock()
	if err := f.usable(OpSync); err != nil {
		return err
	}
	if offset < 0 || length < 0 {
		return opError(OpSync, f.name, syscall.EINVAL)
	}
	return nil
}

// Map returns a mapping aliasing the file's current bytes. While any
// mapping of the file is live, Write, Truncate, Create over it and a Map
// that would extend it fail with ErrMapped, so the bytes are never
// reallocated under a mapping.
func (f *memFile) Map(size int) (Mapping, error) {
	f.mem.mu.Lock()
	defer f.mem.mu.Unlock()
	if err := f.begin(OpMap); err != nil {
		return nil, err
	}
	switch {
	case size < 0:
		return nil, opError(OpMap, f.name, syscall.EINVAL)
	case size > memFileBytesMax:
		return nil, opError(OpMap, f.name, syscall.EFBIG)
	case f.mapping != nil && f.mapping.live:
		return nil, opError(OpMap, f.name, ErrMapped)
	case size == 0:
		return &memMapping{mem: f.mem, name: f.name, node: f.node, generation: f.generation, bytes: []byte{}}, nil
	}
	if size > len(f.node.data) {
		if f.node.mapCount > 0 {
			return nil, opError(OpMap, f.name, ErrMapped)
		}
		f.node.data = resize(f.node.data, size)
	}
	f.node.mapCount++
	f.mapping = &memMapping{mem: f.mem, name: f.name, node: f.node, generation: f.generation,
		bytes: f.node.data[:size:size], live: true}
	return f.mapping, nil
}

// Close releases the handle; its mapping, if any, stays. A handle lost in
// a crash is released too, and Close reports ErrCrashed.
func (f *memFile) Close() error {
	f.mem.mu.Lock()
	defer f.mem.mu.Unlock()
	if f.generation != f.mem.generation && !f.closed {
		f.closed = true
		return opError(OpClose, f.name, ErrCrashed)
	}
	if err := f.begin(OpClose); err != nil {
		return err
	}
	f.closed = true
	return nil
}

// memMapping is a mapping of a Mem file. Its fields are guarded by mem.mu.
type memMapping struct {
	mem        *Mem
	name       string
	node       *memNode
	generation uint64 // as for memFile: a crash makes it stale
	bytes      []byte
	live       bool // holds one of node.mapCount
}

func (m *memMapping) Bytes() []byte { return m.bytes }

// Sync copies the file's current bytes to its durable bytes, like File.Sync.
// After a crash it fails with ErrCrashed: the mapping no longer reaches the
// file.
func (m *memMapping) Sync() error {
	m.mem.mu.Lock()
	defer m.mem.mu.Unlock()
	if m.generation != m.mem.generation {
		return opError(OpSync, m.name, ErrCrashed)
	}
	if err := m.mem.inject(OpSync, m.name); err != nil {
		return err
	}
	m.node.durable = append(m.node.durable[:0], m.node.data...)
	return nil
}

// Unmap releases the mapping. After a crash it is released as well and
// reports ErrCrashed, like Close of a handle.
func (m *memMapping) Unmap() error {
	m.mem.mu.Lock()
	defer m.mem.mu.Unlock()
	if !m.live {
		return nil
	}
	if m.generation != m.mem.generation {
		m.live = false
		return opError(OpUnmap, m.name, ErrCrashed)
	}
	if err := m.mem.inject(OpUnmap, m.name); err != nil {
		return err
	}
	m.live = false
	m.node.mapCount--
	if m.node.mapCount < 0 {
		panic("vfs: negative map count")
	}
	return nil
}

func (f *memFile) Fd() uintptr {
	return ^uintptr(0)
}

// resize sets len(data) to size, zeroing any bytes it adds (the capacity
// beyond len may hold bytes from before a shrinking Truncate).
func resize(data []byte, size int) []byte {
	if size <= len(data) {
		return data[:size]
	}
	old := len(data)
	data = slices.Grow(data, size-old)[:size]
	clear(data[old:])
	return data
}

// crashCorruptOneIn is the chance (1 in this many) that Crash flips one byte
// of a kept torn tail.
const crashCorruptOneIn = 4

// Crash simulates power loss and reboot. Afterwards each directory holds
// its durable entries only; each file holds its durable bytes and, when its
// current bytes extend them (appends only since the last Sync), a prefix of
// random length of the unsynced tail, in which one byte is corrupted with
// probability 1/crashCorruptOneIn. What survives is on disk: it is both
// current and durable. Every handle open before the crash fails with
// ErrCrashed from then on, and slices from Map no longer alias the file.
//
// The outcome depends only on the operations since NewMem and on rng, which
// is read in a fixed order. Crash(nil) is CrashClean. The fault function
// stays installed.
func (m *Mem) Crash(rng *rand.Rand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.generation++
	reborn := map[*memNode]*memNode{} // a node under two durable names stays one node
	for _, dirName := range slices.Sorted(maps.Keys(m.dirs)) {
		dir := m.dirs[dirName]
		entries := make(map[string]*memNode, len(dir.durable))
		for _, name := range slices.Sorted(maps.Keys(dir.durable)) {
			if _, isDir := m.dirs[path.Join(dirName, name)]; isDir {
				// The file was removed (not yet durable) and a directory,
				// durable at once, took its name. The directory wins.
				continue
			}
			old := dir.durable[name]
			node, ok := reborn[old]
			if !ok {
				node = old.afterCrash(rng)
				reborn[old] = node
			}
			entries[name] = node
		}
		dir.current = entries
		dir.durable = maps.Clone(entries)
	}
}

// CrashClean is Crash keeping exactly the durable state: no torn tails.
func (m *Mem) CrashClean() {
	m.Crash(nil)
}

// afterCrash returns the node as found after reboot; rng nil keeps no tail.
func (n *memNode) afterCrash(rng *rand.Rand) *memNode {
	data := bytes.Clone(n.durable)
	appended := len(n.data) > len(n.durable) && bytes.Equal(n.data[:len(n.durable)], n.durable)
	if rng != nil && appended {
		tail := n.data[len(n.durable):]
		kept := rng.IntN(len(tail) + 1)
		start := len(data)
		data = append(data, tail[:kept]...)
		if kept > 0 && rng.IntN(crashCorruptOneIn) == 0 {
			data[start+rng.IntN(kept)] ^= byte(1 + rng.IntN(255))
		}
	}
	return &memNode{data: data, durable: bytes.Clone(data)}
}
