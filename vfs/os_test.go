package vfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// mapNoMemoryEnv makes TestMapOutOfMemoryNamesTheLimit's child run.
const mapNoMemoryEnv = "MIRRORD_VFS_MAP_ENOMEM_CHILD"

// TestMapOutOfMemoryNamesTheLimit: when mmap fails for lack of address
// space or mappings, the error says which setting to raise. A child
// process caps its address space (RLIMIT_AS) so that mapping 1 GiB fails
// as it would past vm.max_map_count, without touching the machine.
func TestMapOutOfMemoryNamesTheLimit(t *testing.T) {
	if dir := os.Getenv(mapNoMemoryEnv); dir != "" {
		f, err := OS.Create(filepath.Join(dir, "big.index"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var limit syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_AS, &limit); err != nil {
			t.Fatal(err)
		}
		status, err := os.ReadFile("/proc/self/status")
		if err != nil {
			t.Fatal(err)
		}
		var size uint64 // VmSize, kB
		for line := range strings.Lines(string(status)) {
			if rest, ok := strings.CutPrefix(line, "VmSize:"); ok {
				if size, err = strconv.ParseUint(strings.Fields(rest)[0], 10, 64); err != nil {
					t.Fatal(err)
				}
			}
		}
		if size == 0 {
			t.Fatal("no VmSize in /proc/self/status")
		}
		limit.Cur = size<<10 + 256<<20
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &limit); err != nil {
			t.Fatal(err)
		}
		_, err = f.Map(1 << 30)
		if err == nil || !strings.Contains(err.Error(), "vm.max_map_count") {
			t.Fatalf("Map past the address space limit: %v, want an error naming vm.max_map_count", err)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestMapOutOfMemoryNamesTheLimit$", "-test.count=1")
	cmd.Env = append(os.Environ(), mapNoMemoryEnv+"="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
