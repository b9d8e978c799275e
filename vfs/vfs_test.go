package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// implementation is one FS under the shared behavioural suite.
type implementation struct {
	name string
	// open returns a fresh file system and an existing directory in it.
	open func(t *testing.T) (FS, string)
	// hasFd: File.Fd returns a real descriptor.
	hasFd bool
}

var implementations = []implementation{
	{
		name:  "OS",
		open:  func(t *testing.T) (FS, string) { return OS, t.TempDir() },
		hasFd: true,
	},
	{
		name: "Mem",
		open: func(t *testing.T) (FS, string) {
			mem := NewMem()
			if err := mem.MkdirAll("/data/topic-0"); err != nil {
				t.Fatal(err)
			}
			return mem, "/data/topic-0"
		},
	},
}

// TestFS runs every case against every implementation, so the log store
// sees the same behaviour from Mem in tests as from OS in production.
func TestFS(t *testing.T) {
	for _, impl := range implementations {
		for _, tc := range fsCases {
			t.Run(impl.name+"/"+tc.name, func(t *testing.T) {
				fsys, dir := impl.open(t)
				tc.run(t, fsys, dir, impl)
			})
		}
	}
}

var fsCases = []struct {
	name string
	run  func(t *testing.T, fsys FS, dir string, impl implementation)
}{
	{"create write read", testCreateWriteRead},
	{"read past end", testReadPastEnd},
	{"create truncates existing", testCreateTruncates},
	{"create in missing dir", testCreateMissingDir},
	{"open appends", testOpenAppends},
	{"open missing", testOpenMissing},
	{"truncate", testTruncate},
	{"rename", testRename},
	{"remove", testRemove},
	{"list", testList},
	{"exists", testExists},
	{"mkdirall removeall", testMkdirAllRemoveAll},
	{"map write through", testMapWriteThrough},
	{"map zero", testMapZero},
	{"map shorter than file", testMapShorter},
	{"mapped refuses write and truncate", testMappedRefuses},
	{"mapping outlives close", testMappingOutlivesClose},
	{"closed handle", testClosedHandle},
	{"reopen", testReopen},
	{"sync and syncdir", testSyncDir},
	{"write behind", testWriteBehind},
	{"fd", testFd},
}

func testCreateWriteRead(t *testing.T, fsys FS, dir string, _ implementation) {
	f := mustCreate(t, fsys, path.Join(dir, "00000000.log"), "hello ")
	mustWrite(t, f, "world")
	assertContent(t, f, "hello world")
	buf := make([]byte, 5)
	n, err := f.ReadAt(buf, 6)
	if n != 5 || err != nil || string(buf) != "world" {
		t.Fatalf("ReadAt(5, 6) = %d, %v, %q; want 5, nil, %q", n, err, buf[:n], "world")
	}
	mustClose(t, f)
}

func testReadPastEnd(t *testing.T, fsys FS, dir string, _ implementation) {
	f := mustCreate(t, fsys, path.Join(dir, "a"), "0123456789")
	defer mustClose(t, f)
	for _, tc := range []struct {
		off  int64
		size int
		want string
	}{
		{off: 6, size: 10, want: "6789"},
		{off: 10, size: 1, want: ""},
		{off: 100, size: 1, want: ""},
	} {
		buf := make([]byte, tc.size)
		n, err := f.ReadAt(buf, tc.off)
		if err != io.EOF || string(buf[:n]) != tc.want {
			t.Errorf("ReadAt(%d, %d) = %q, %v; want %q, io.EOF", tc.size, tc.off, buf[:n], err, tc.want)
		}
	}
}

func testCreateTruncates(t *testing.T, fsys FS, dir string, _ implementation) {
	name := path.Join(dir, "a")
	mustClose(t, mustCreate(t, fsys, name, "abcdef"))
	f := mustCreate(t, fsys, name, "")
	assertContent(t, f, "")
	mustWrite(t, f, "xy")
	mustClose(t, f)
	f = mustOpen(t, fsys, name)
	assertContent(t, f, "xy")
	mustClose(t, f)
}

func testCreateMissingDir(t *testing.T, fsys FS, dir string, _ implementation) {
	_, err := fsys.Create(path.Join(dir, "missing", "a"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Create in a missing directory: %v, want fs.ErrNotExist", err)
	}
}

func testOpenAppends(t *testing.T, fsys FS, dir string, _ implementation) {
	name := path.Join(dir, "a")
	mustClose(t, mustCreate(t, fsys, name, "abc"))
	f := mustOpen(t, fsys, name)
	mustWrite(t, f, "def")
	assertContent(t, f, "abcdef")
	mustWrite(t, f, "g") // ReadAt did not move the write position
	assertContent(t, f, "abcdefg")
	mustClose(t, f)
}

func testOpenMissing(t *testing.T, fsys FS, dir string, _ implementation) {
	name := path.Join(dir, "missing.log")
	_, err := fsys.Open(name)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open(missing) = %v, want fs.ErrNotExist", err)
	}
	if want := "vfs: open " + name + ": "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start with %q", err, want)
	}
}

func testTruncate(t *testing.T, fsys FS, dir string, _ implementation) {
	f := mustCreate(t, fsys, path.Join(dir, "a"), "0123456789")
	defer mustClose(t, f)
	steps := []struct {
		truncate int64 // -1: none
		write    string
		want     string
	}{
		{truncate: 4, want: "0123"},
		{truncate: -1, write: "X", want: "0123X"},
		{truncate: 8, want: "0123X\x00\x00\x00"},
		{truncate: -1, write: "Y", want: "0123X\x00\x00\x00Y"},
		{truncate: 0, write: "Z", want: "Z"},
	}
	for i, step := range steps {
		if step.truncate >= 0 {
			if err := f.Truncate(step.truncate); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		if step.write != "" {
			mustWrite(t, f, step.write)
		}
		assertContent(t, f, step.want)
	}
}

func testRename(t *testing.T, fsys FS, dir string, _ implementation) {
	a, b := path.Join(dir, "a"), path.Join(dir, "b")
	mustClose(t, mustCreate(t, fsys, a, "A"))
	mustClose(t, mustCreate(t, fsys, b, "B"))
	if err := fsys.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	assertExists(t, fsys, a, false)
	assertFile(t, fsys, b, "A")
	if err := fsys.Rename(a, b); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Rename(missing) = %v, want fs.ErrNotExist", err)
	}
	// A directory renames with its contents (Kafka's "-delete" suffix).
	sub := path.Join(dir, "p-0")
	if err := fsys.MkdirAll(sub); err != nil {
		t.Fatal(err)
	}
	mustClose(t, mustCreate(t, fsys, path.Join(sub, "x"), "X"))
	if err := fsys.Rename(sub, sub+".delete"); err != nil {
		t.Fatal(err)
	}
	assertExists(t, fsys, sub, false)
	assertFile(t, fsys, path.Join(sub+".delete", "x"), "X")
}

func testRemove(t *testing.T, fsys FS, dir string, _ implementation) {
	name := path.Join(dir, "a")
	f := mustCreate(t, fsys, name, "abc")
	if err := fsys.Remove(name); err != nil {
		t.Fatal(err)
	}
	assertExists(t, fsys, name, false)
	assertContent(t, f, "abc") // an open handle outlives the name
	mustClose(t, f)
	if err := fsys.Remove(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Remove(missing) = %v, want fs.ErrNotExist", err)
	}
	// Remove takes a directory only once it is empty.
	sub := path.Join(dir, "sub")
	if err := fsys.MkdirAll(sub); err != nil {
		t.Fatal(err)
	}
	mustClose(t, mustCreate(t, fsys, path.Join(sub, "x"), ""))
	if err := fsys.Remove(sub); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("Remove(non-empty directory) = %v, want ENOTEMPTY", err)
	}
	for _, name := range []string{path.Join(sub, "x"), sub} {
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	assertExists(t, fsys, sub, false)
}

func testList(t *testing.T, fsys FS, dir string, _ implementation) {
	for _, name := range []string{"b.log", "a.index", "c.log"} {
		mustClose(t, mustCreate(t, fsys, path.Join(dir, name), ""))
	}
	if err := fsys.MkdirAll(path.Join(dir, "d", "deeper")); err != nil {
		t.Fatal(err)
	}
	names, err := fsys.List(dir)
	if want := []string{"a.index", "b.log", "c.log", "d"}; err != nil || !slices.Equal(names, want) {
		t.Fatalf("List = %q, %v; want %q", names, err, want)
	}
	if _, err := fsys.List(path.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("List(missing) = %v, want fs.ErrNotExist", err)
	}
}

func testExists(t *testing.T, fsys FS, dir string, _ implementation) {
	mustClose(t, mustCreate(t, fsys, path.Join(dir, "a"), ""))
	assertExists(t, fsys, path.Join(dir, "a"), true)
	assertExists(t, fsys, dir, true)
	assertExists(t, fsys, path.Join(dir, "b"), false)
	assertExists(t, fsys, path.Join(dir, "b", "c"), false)
}

func testMkdirAllRemoveAll(t *testing.T, fsys FS, dir string, _ implementation) {
	deep := path.Join(dir, "x", "y", "z")
	for range 2 { // the second MkdirAll finds everything there
		if err := fsys.MkdirAll(deep); err != nil {
			t.Fatal(err)
		}
	}
	mustClose(t, mustCreate(t, fsys, path.Join(deep, "f"), "F"))
	assertFile(t, fsys, path.Join(deep, "f"), "F")
	if err := fsys.MkdirAll(path.Join(deep, "f")); err == nil {
		t.Fatal("MkdirAll over a file succeeded")
	}
	if err := fsys.RemoveAll(path.Join(dir, "x")); err != nil {
		t.Fatal(err)
	}
	assertExists(t, fsys, path.Join(dir, "x"), false)
	assertExists(t, fsys, path.Join(deep, "f"), false)
	if err := fsys.RemoveAll(path.Join(dir, "x")); err != nil {
		t.Fatalf("RemoveAll(missing) = %v, want nil", err)
	}
}

func testMapWriteThrough(t *testing.T, fsys FS, dir string, _ implementation) {
	name := path.Join(dir, "00000000.index")
	f := mustCreate(t, fsys, name, "head")
	mapping := mustMap(t, f, 64)
	b := mapping.Bytes()
	if len(b) != 64 || string(b[:4]) != "head" {
		t.Fatalf("mapping = %d bytes starting %q; want 64 starting %q", len(b), b[:4], "head")
	}
	copy(b[10:], "mapped")
	want := "head" + strings.Repeat("\x00", 6) + "mapped" + strings.Repeat("\x00", 48)
	assertContent(t, f, want) // ReadAt sees writes through the mapping
	if err := mapping.Sync(); err != nil {
		t.Fatal(err)
	}
	mustUnmap(t, mapping)
	mustUnmap(t, mapping) // a second Unmap does nothing
	mustClose(t, f)
	assertFile(t, fsys, name, want)
}

func testMapZero(t *testing.T, fsys FS, dir string, _ implementation) {
	f := mustCreate(t, fsys, path.Join(dir, "a"), "")
	defer mustClose(t, f)
	mapping := mustMap(t, f, 0)
	if b := mapping.Bytes(); b == nil || len(b) != 0 {
		t.Fatalf("Map(0) = %v (nil %t), want an empty non-nil slice", b, b == nil)
	}
	mustWrite(t, f, "x") // Map(0) maps nothing, so writing is fine
	if err := mapping.Sync(); err != nil {
		t.Fatal(err)
	}
	mustUnmap(t, mapping)
	assertContent(t, f, "x")
}

func testMapShorter(t *testing.T, fsys FS, dir string, _ implementation) {
	content := strings.Repeat("0123456789", 10)
	f := mustCreate(t, fsys, path.Join(dir, "a"), content)
	defer mustClose(t, f)
	mapping := mustMap(t, f, 10)
	if string(mapping.Bytes()) != content[:10] {
		t.Fatalf("mapping = %q, want %q", mapping.Bytes(), content[:10])
	}
	mustUnmap(t, mapping)
	assertContent(t, f, content) // not shortened
}

func testMappedRefuses(t *testing.T, fsys FS, dir string, _ implementation) {
	f := mustCreate(t, fsys, path.Join(dir, "a"), "")
	defer mustClose(t, f)
	mapping := mustMap(t, f, 16)
	if _, err := f.Write([]byte("x")); !errors.Is(err, ErrMapped) {
		t.Errorf("Write while mapped = %v, want ErrMapped", err)
	}
	if err := f.Truncate(0); !errors.Is(err, ErrMapped) {
		t.Errorf("Truncate while mapped = %v, want ErrMapped", err)
	}
	if _, err := f.Map(16); !errors.Is(err, ErrMapped) {
		t.Errorf("second Map = %v, want ErrMapped", err)
	}
	mustUnmap(t, mapping)
	// Map extended the file but left the write position at 0.
	mustWrite(t, f, "z")
	assertContent(t, f, "z"+strings.Repeat("\x00", 15))
}

// testMappingOutlivesClose: a mapping stays usable after its handle is
// closed (so many files can be mapped without a descriptor each), its
// writes reach the file, and once it is unmapped the file can be written.
func testMappingOutlivesClose(t *testing.T, fsys FS, dir string, _ implementation) {
	name := path.Join(dir, "a")
	f := mustCreate(t, fsys, name, "")
	mapping := mustMap(t, f, 8)
	mustClose(t, f)
	copy(mapping.Bytes(), "mapped!!")
	if err := mapping.Sync(); err != nil {
		t.Fatalf("Sync after Close = %v", err)
	}
	f = mustOpen(t, fsys, name)
	assertContent(t, f, "mapped!!")
	mustUnmap(t, mapping)
	mustWrite(t, f, "more")
	assertContent(t, f, "mapped!!more")
	mustClose(t, f)
}

func testClosedHandle(t *testing.T, fsys FS, dir string, _ implementation) {
	f := mustCreate(t, fsys, path.Join(dir, "a"), "abc")
	mustClose(t, f)
	ops := []struct {
		name string
		call func() error
	}{
		{"Write", func() error { _, err := f.Write([]byte("x")); return err }},
		{"ReadAt", func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err }},
		{"Size", func() error { _, err := f.Size(); return err }},
		{"Truncate", func() error { return f.Truncate(0) }},
		{"Sync", f.Sync},
		{"WriteBehind", func() error { return f.WriteBehind(0, 3) }},
		{"Map", func() error { _, err := f.Map(8); return err }},
		{"Close", f.Close},
	}
	for _, op := range ops {
		if err := op.call(); !errors.Is(err, fs.ErrClosed) {
			t.Errorf("%s after Close = %v, want fs.ErrClosed", op.name, err)
		}
	}
}

func testReopen(t *testing.T, fsys FS, dir string, _ implementation) {
	name := path.Join(dir, "a")
	mustClose(t, mustCreate(t, fsys, name, ""))
	want := ""
	for i := range 5 {
		f := mustOpen(t, fsys, name)
		assertContent(t, f, want)
		chunk := strings.Repeat(string(rune('a'+i)), i+1)
		mustWrite(t, f, chunk)
		want += chunk
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		mustClose(t, f)
	}
	assertFile(t, fsys, name, "abbcccddddeeeee")
}

func testSyncDir(t *testing.T, fsys FS, dir string, _ implementation) {
	f := mustCreate(t, fsys, path.Join(dir, "a"), "abc")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, f)
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(path.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncDir(missing) = %v, want fs.ErrNotExist", err)
	}
}

func testFd(t *testing.T, fsys FS, dir string, impl implementation) {
	f := mustCreate(t, fsys, path.Join(dir, "a"), "")
	defer mustClose(t, f)
	if got := f.Fd() != ^uintptr(0); got != impl.hasFd {
		t.Fatalf("Fd() = %#x; real descriptor %t, want %t", f.Fd(), got, impl.hasFd)
	}
}

// Helpers shared with the Mem tests.

func mustCreate(t *testing.T, fsys FS, name, content string) File {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if content != "" {
		mustWrite(t, f, content)
	}
	return f
}

func mustOpen(t *testing.T, fsys FS, name string) File {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustWrite(t *testing.T, f File, content string) {
	t.Helper()
	if n, err := f.Write([]byte(content)); n != len(content) || err != nil {
		t.Fatalf("Write(%d bytes) = %d, %v", len(content), n, err)
	}
}

func mustMap(t *testing.T, f File, size int) Mapping {
	t.Helper()
	mapping, err := f.Map(size)
	if err != nil {
		t.Fatal(err)
	}
	return mapping
}

func mustUnmap(t *testing.T, m Mapping) {
	t.Helper()
	if err := m.Unmap(); err != nil {
		t.Fatal(err)
	}
}

func mustClose(t *testing.T, f File) {
	t.Helper()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// readAll reads the whole file through Size and ReadAt.
func readAll(t *testing.T, f File) []byte {
	t.Helper()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, size)
	if n, err := f.ReadAt(buf, 0); n != len(buf) || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt(%d bytes, 0) = %d, %v", len(buf), n, err)
	}
	return buf
}

func assertContent(t *testing.T, f File, want string) {
	t.Helper()
	if got := readAll(t, f); !bytes.Equal(got, []byte(want)) {
		t.Fatalf("content = %q, want %q", got, want)
	}
}

func assertFile(t *testing.T, fsys FS, name, want string) {
	t.Helper()
	f := mustOpen(t, fsys, name)
	defer mustClose(t, f)
	assertContent(t, f, want)
}

func assertExists(t *testing.T, fsys FS, name string, want bool) {
	t.Helper()
	got, err := fsys.Exists(name)
	if err != nil || got != want {
		t.Fatalf("Exists(%s) = %t, %v; want %t", name, got, err, want)
	}
}

// testWriteBehind: starting write-back changes nothing a reader sees, on
// any range, including past the end.
func testWriteBehind(t *testing.T, fsys FS, dir string, _ implementation) {
	f := mustCreate(t, fsys, path.Join(dir, "a"), "")
	defer mustClose(t, f)
	mustWrite(t, f, strings.Repeat("w", 10000))
	for _, r := range [][2]int64{{0, 4096}, {4096, 5904}, {0, 0}, {8192, 1 << 20}} {
		if err := f.WriteBehind(r[0], r[1]); err != nil {
			t.Fatalf("WriteBehind(%d, %d) = %v", r[0], r[1], err)
		}
	}
	assertContent(t, f, strings.Repeat("w", 10000))
}
