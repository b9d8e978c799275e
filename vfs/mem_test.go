package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const testDir = "/d"

func newTestMem(t *testing.T) *Mem {
	t.Helper()
	mem := NewMem()
	if err := mem.MkdirAll(testDir); err != nil {
		t.Fatal(err)
	}
	return mem
}

// durableFile creates name with content, synced and with its name durable.
func durableFile(t *testing.T, mem *Mem, name, content string) {
	t.Helper()
	f := mustCreate(t, mem, name, content)
	mustSync(t, f)
	mustClose(t, f)
	mustSyncDir(t, mem, testDir)
}

func mustSync(t *testing.T, f File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func mustSyncDir(t *testing.T, mem *Mem, dir string) {
	t.Helper()
	if err := mem.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}

// TestMemCrashClean checks what a clean crash keeps: synced bytes under
// durable names, nothing else.
func TestMemCrashClean(t *testing.T) {
	const a, b = testDir + "/a", testDir + "/b"
	type want struct {
		name    string
		exists  bool
		content string // for a file that exists
		dir     bool
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, mem *Mem)
		want  []want
	}{
		{
			name: "unsynced write lost",
			setup: func(t *testing.T, mem *Mem) {
				f := mustCreate(t, mem, a, "")
				mustSyncDir(t, mem, testDir)
				mustWrite(t, f, "abc")
			},
			want: []want{{a, true, "", false}},
		},
		{
			name: "synced write kept",
			setup: func(t *testing.T, mem *Mem) {
				f := mustCreate(t, mem, a, "abc")
				mustSync(t, f)
				mustSyncDir(t, mem, testDir)
				mustWrite(t, f, "def")
			},
			want: []want{{a, true, "abc", false}},
		},
		{
			name: "file not dir-synced lost",
			setup: func(t *testing.T, mem *Mem) {
				mustSync(t, mustCreate(t, mem, a, "abc"))
			},
			want: []want{{a, false, "", false}},
		},
		{
			name: "rename undone without SyncDir",
			setup: func(t *testing.T, mem *Mem) {
				durableFile(t, mem, a, "A")
				if err := mem.Rename(a, b); err != nil {
					t.Fatal(err)
				}
			},
			want: []want{{a, true, "A", false}, {b, false, "", false}},
		},
		{
			name: "rename kept after SyncDir",
			setup: func(t *testing.T, mem *Mem) {
				durableFile(t, mem, a, "A")
				if err := mem.Rename(a, b); err != nil {
					t.Fatal(err)
				}
				mustSyncDir(t, mem, testDir)
			},
			want: []want{{a, false, "", false}, {b, true, "A", false}},
		},
		{
			name: "remove undone without SyncDir",
			setup: func(t *testing.T, mem *Mem) {
				durableFile(t, mem, a, "A")
				if err := mem.Remove(a); err != nil {
					t.Fatal(err)
				}
			},
			want: []want{{a, true, "A", false}},
		},
		{
			name: "remove kept after SyncDir",
			setup: func(t *testing.T, mem *Mem) {
				durableFile(t, mem, a, "A")
				if err := mem.Remove(a); err != nil {
					t.Fatal(err)
				}
				mustSyncDir(t, mem, testDir)
			},
			want: []want{{a, false, "", false}},
		},
		{
			name: "create over durable file, synced",
			setup: func(t *testing.T, mem *Mem) {
				durableFile(t, mem, a, "old")
				mustSync(t, mustCreate(t, mem, a, "new")) // same inode: no SyncDir needed
			},
			want: []want{{a, true, "new", false}},
		},
		{
			name: "create over durable file, unsynced",
			setup: func(t *testing.T, mem *Mem) {
				durableFile(t, mem, a, "old")
				mustCreate(t, mem, a, "new")
			},
			want: []want{{a, true, "old", false}},
		},
		{
			name: "unsynced truncate undone",
			setup: func(t *testing.T, mem *Mem) {
				durableFile(t, mem, a, "abcdef")
				f := mustOpen(t, mem, a)
				if err := f.Truncate(2); err != nil {
					t.Fatal(err)
				}
			},
			want: []want{{a, true, "abcdef", false}},
		},
		{
			name: "synced mapped writes kept, later ones lost",
			setup: func(t *testing.T, mem *Mem) {
				f := mustCreate(t, mem, a, "")
				mustSyncDir(t, mem, testDir)
				mapping := mustMap(t, f, 8)
				copy(mapping.Bytes(), "12345678")
				if err := mapping.Sync(); err != nil {
					t.Fatal(err)
				}
				copy(mapping.Bytes(), "xx")
			},
			want: []want{{a, true, "12345678", false}},
		},
		{
			name: "directories durable at once",
			setup: func(t *testing.T, mem *Mem) {
				if err := mem.MkdirAll("/e/f"); err != nil {
					t.Fatal(err)
				}
				if err := mem.MkdirAll(testDir + "/sub"); err != nil {
					t.Fatal(err)
				}
				if err := mem.RemoveAll(testDir + "/sub"); err != nil {
					t.Fatal(err)
				}
			},
			want: []want{{name: "/e/f", exists: true, dir: true}, {name: testDir + "/sub", dir: true}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := newTestMem(t)
			tc.setup(t, mem)
			for _, w := range tc.want {
				if content, ok := mem.Durable(w.name); ok && string(content) != w.content {
					t.Errorf("before crash: Durable(%s) = %q, want %q", w.name, content, w.content)
				}
			}
			mem.CrashClean()
			for _, w := range tc.want {
				assertExists(t, mem, w.name, w.exists)
				if w.exists && !w.dir {
					assertFile(t, mem, w.name, w.content)
				}
			}
		})
	}
}

func TestMemCrashInvalidatesHandles(t *testing.T) {
	mem := newTestMem(t)
	const name = testDir + "/a"
	f := mustCreate(t, mem, name, "")
	mustSyncDir(t, mem, testDir)
	mapping := mustMap(t, f, 4)
	copy(mapping.Bytes(), "abcd")
	mustSync(t, f)
	mem.CrashClean()

	calls := []struct {
		name string
		call func() error
	}{
		{"Write", func() error { _, err := f.Write([]byte("x")); return err }},
		{"ReadAt", func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err }},
		{"Size", func() error { _, err := f.Size(); return err }},
		{"Truncate", func() error { return f.Truncate(0) }},
		{"Sync", f.Sync},
		{"Map", func() error { _, err := f.Map(4); return err }},
		{"mapping Sync", mapping.Sync},
		{"Unmap", mapping.Unmap},
		{"Close", f.Close},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, ErrCrashed) {
			t.Errorf("%s after crash = %v, want ErrCrashed", c.name, err)
		}
	}
	if err := f.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("second Close after crash = %v, want fs.ErrClosed", err)
	}
	copy(mapping.Bytes(), "zzzz") // the old mapping no longer reaches the file
	g := mustOpen(t, mem, name)
	assertContent(t, g, "abcd")
	mustWrite(t, g, "e") // the crash released the mapping
	mustClose(t, g)
}

// TestMemTornTail crashes after an unsynced append under many seeds: what
// survives is the durable bytes plus a prefix of the tail, with at most one
// byte changed, and every shape (nothing, part, all, corrupted) occurs.
func TestMemTornTail(t *testing.T) {
	const name = testDir + "/00000000.log"
	durable := strings.Repeat("D", 16)
	tail := make([]byte, 64)
	for i := range tail {
		tail[i] = byte('a' + i%26)
	}
	crash := func(seed uint64) []byte {
		mem := newTestMem(t)
		durableFile(t, mem, name, durable)
		f := mustOpen(t, mem, name)
		mustWrite(t, f, string(tail))
		mem.Crash(rand.New(rand.NewPCG(seed, 0)))
		content, ok := mem.Durable(name)
		if !ok {
			t.Fatalf("seed %d: file lost", seed)
		}
		g := mustOpen(t, mem, name)
		defer mustClose(t, g)
		if got := readAll(t, g); !bytes.Equal(got, content) {
			t.Fatalf("seed %d: after crash current %q != durable %q", seed, got, content)
		}
		return content
	}
	var sawNone, sawPart, sawAll, sawCorrupt bool
	for seed := range uint64(500) {
		content := crash(seed)
		if !bytes.HasPrefix(content, []byte(durable)) || len(content) > len(durable)+len(tail) {
			t.Fatalf("seed %d: %q is not the durable bytes plus part of the tail", seed, content)
		}
		kept := content[len(durable):]
		differ := 0
		for i := range kept {
			if kept[i] != tail[i] {
				differ++
			}
		}
		if differ > 1 {
			t.Fatalf("seed %d: kept tail %q differs from %q in %d bytes, want at most 1", seed, kept, tail[:len(kept)], differ)
		}
		if again := crash(seed); !bytes.Equal(again, content) {
			t.Fatalf("seed %d: not deterministic: %q then %q", seed, content, again)
		}
		sawNone = sawNone || len(kept) == 0
		sawPart = sawPart || (len(kept) > 0 && len(kept) < len(tail))
		sawAll = sawAll || len(kept) == len(tail)
		sawCorrupt = sawCorrupt || differ == 1
	}
	if !sawNone || !sawPart || !sawAll || !sawCorrupt {
		t.Errorf("over 500 seeds: none %t, part %t, all %t, corrupt %t; want all true", sawNone, sawPart, sawAll, sawCorrupt)
	}
}

// TestMemNoTornTailAfterRewrite: a tail is kept only when the file was
// appended to since its last Sync, not truncated or overwritten.
func TestMemNoTornTailAfterRewrite(t *testing.T) {
	const name = testDir + "/a"
	for seed := range uint64(50) {
		mem := newTestMem(t)
		durableFile(t, mem, name, "abcdef")
		f := mustOpen(t, mem, name)
		if err := f.Truncate(2); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, f, "XXXXXXXXXXXX")
		mem.Crash(rand.New(rand.NewPCG(seed, 0)))
		if content, _ := mem.Durable(name); string(content) != "abcdef" {
			t.Fatalf("seed %d: %q, want %q", seed, content, "abcdef")
		}
	}
}

// TestMemFault fails each operation once and checks that it did nothing.
func TestMemFault(t *testing.T) {
	const a, b = testDir + "/a", testDir + "/b"
	cases := []struct {
		op    Op
		name  string // the file named in the error
		call  func(t *testing.T, mem *Mem, f File) error
		check func(t *testing.T, mem *Mem, f File)
	}{
		{OpCreate, b, func(_ *testing.T, mem *Mem, _ File) error { _, err := mem.Create(b); return err },
			func(t *testing.T, mem *Mem, _ File) { assertExists(t, mem, b, false) }},
		{OpOpen, a, func(_ *testing.T, mem *Mem, _ File) error { _, err := mem.Open(a); return err }, nil},
		{OpWrite, a, func(_ *testing.T, _ *Mem, f File) error { _, err := f.Write([]byte("x")); return err },
			func(t *testing.T, _ *Mem, f File) { assertContent(t, f, "A") }},
		{OpTruncate, a, func(_ *testing.T, _ *Mem, f File) error { return f.Truncate(0) },
			func(t *testing.T, _ *Mem, f File) { assertContent(t, f, "A") }},
		{OpSync, a, func(t *testing.T, _ *Mem, f File) error { mustWrite(t, f, "B"); return f.Sync() },
			func(t *testing.T, mem *Mem, _ File) { assertDurable(t, mem, a, "A") }},
		{OpMap, a, func(_ *testing.T, _ *Mem, f File) error { _, err := f.Map(8); return err },
			func(t *testing.T, _ *Mem, f File) { mustWrite(t, f, "B"); assertContent(t, f, "AB") }},
		{OpRename, a, func(_ *testing.T, mem *Mem, _ File) error { return mem.Rename(a, b) },
			func(t *testing.T, mem *Mem, _ File) { assertExists(t, mem, a, true); assertExists(t, mem, b, false) }},
		{OpRemove, a, func(_ *testing.T, mem *Mem, _ File) error { return mem.Remove(a) },
			func(t *testing.T, mem *Mem, _ File) { assertExists(t, mem, a, true) }},
		{OpSyncDir, testDir, func(t *testing.T, mem *Mem, _ File) error { mustCreate(t, mem, b, ""); return mem.SyncDir(testDir) },
			func(t *testing.T, mem *Mem, _ File) {
				if _, ok := mem.Durable(b); ok {
					t.Error("failed SyncDir made b durable")
				}
			}},
		{OpMkdirAll, testDir + "/x/y", func(_ *testing.T, mem *Mem, _ File) error { return mem.MkdirAll(testDir + "/x/y") },
			func(t *testing.T, mem *Mem, _ File) { assertExists(t, mem, testDir+"/x", false) }},
	}
	for _, tc := range cases {
		t.Run(tc.op.String(), func(t *testing.T) {
			mem := newTestMem(t)
			durableFile(t, mem, a, "A")
			f := mustOpen(t, mem, a)
			mem.SetFault(FailAfter(tc.op, 0, ErrInjected))
			err := tc.call(t, mem, f)
			if !errors.Is(err, ErrInjected) {
				t.Fatalf("%s = %v, want ErrInjected", tc.op, err)
			}
			if want := fmt.Sprintf("vfs: %s %s: ", tc.op, tc.name); !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
			mem.SetFault(nil)
			if tc.check != nil {
				tc.check(t, mem, f)
			}
		})
	}
}

func assertDurable(t *testing.T, mem *Mem, name, want string) {
	t.Helper()
	if got, ok := mem.Durable(name); !ok || string(got) != want {
		t.Fatalf("Durable(%s) = %q, %t; want %q", name, got, ok, want)
	}
}

// TestMemFullDisk: after two writes the disk is full; the error matches
// syscall.ENOSPC, the failed write wrote nothing, and freeing space helps.
func TestMemFullDisk(t *testing.T) {
	mem := newTestMem(t)
	f := mustCreate(t, mem, testDir+"/a", "")
	mem.SetFault(FailAfter(OpWrite, 2, syscall.ENOSPC))
	mustWrite(t, f, "ab")
	mustWrite(t, f, "cd")
	for range 2 {
		if _, err := f.Write([]byte("ef")); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write on a full disk = %v, want ENOSPC", err)
		}
	}
	mustSync(t, f) // other operations still work
	assertContent(t, f, "abcd")
	mem.SetFault(nil)
	mustWrite(t, f, "ef")
	assertContent(t, f, "abcdef")
}

// TestMemModel runs seeded random operations on one file and compares it
// with a model of two strings: current and durable bytes.
func TestMemModel(t *testing.T) {
	const name = testDir + "/a"
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 1))
		mem := newTestMem(t)
		f := mustCreate(t, mem, name, "")
		mustSyncDir(t, mem, testDir)
		var current, durable []byte
		for step := range 200 {
			switch op := rng.IntN(10); {
			case op < 5:
				chunk := make([]byte, rng.IntN(20))
				for i := range chunk {
					chunk[i] = byte(rng.Uint32())
				}
				mustWrite(t, f, string(chunk))
				current = append(current, chunk...)
			case op < 7:
				mustSync(t, f)
				durable = bytes.Clone(current)
			case op < 8:
				size := rng.IntN(len(current) + 1)
				if err := f.Truncate(int64(size)); err != nil {
					t.Fatal(err)
				}
				current = current[:size]
			default:
				mem.CrashClean()
				current = bytes.Clone(durable)
				f = mustOpen(t, mem, name)
			}
			if got := readAll(t, f); !bytes.Equal(got, current) {
				t.Fatalf("seed %d step %d: content %q, model %q", seed, step, got, current)
			}
			assertDurable(t, mem, name, string(durable))
		}
		mustClose(t, f)
	}
}

// TestMemConcurrent exercises the lock under -race: each goroutine owns a
// file; one more lists the directory.
func TestMemConcurrent(t *testing.T) {
	mem := newTestMem(t)
	const writers, rounds = 4, 100
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			name := fmt.Sprintf("%s/%d.log", testDir, w)
			f, err := mem.Create(name)
			if err != nil {
				t.Error(err)
				return
			}
			for range rounds {
				if _, err := f.Write([]byte("record")); err != nil {
					t.Error(err)
					return
				}
				if err := f.Sync(); err != nil {
					t.Error(err)
					return
				}
			}
			if err := f.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Go(func() {
		for range rounds {
			if _, err := mem.List(testDir); err != nil {
				t.Error(err)
				return
			}
			if err := mem.SyncDir(testDir); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	for w := range writers {
		assertFile(t, mem, fmt.Sprintf("%s/%d.log", testDir, w), strings.Repeat("record", rounds))
	}
}
