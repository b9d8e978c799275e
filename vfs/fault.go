package vfs

import (
	"errors"
	"fmt"
)

// Sentinels shared by OS and Mem; test them with errors.Is. A closed handle
// reports fs.ErrClosed, a missing file fs.ErrNotExist (both also match the
// underlying syscall.Errno where there is one).
var (
	// ErrMapped is returned by Write, Truncate and a second Map on a file
	// that is mapped: writes must go through the mapping until Unmap.
	ErrMapped = errors.New("vfs: file is mapped")
	// ErrCrashed is returned by every operation on a Mem file handle that
	// was open when Mem.Crash or Mem.CrashClean ran; reopen the file.
	ErrCrashed = errors.New("vfs: file handle lost in a crash")
	// ErrInjected is a ready-made error for Mem.SetFault.
	ErrInjected = errors.New("vfs: injected fault")
)

// Op names a file-system operation, for fault injection and error messages.
type Op uint8

// The operations. Rename is reported with the old name.
const (
	OpCreate Op = iota
	OpOpen
	OpRemove
	OpRemoveAll
	OpRename
	OpMkdirAll
	OpList
	OpExists
	OpSyncDir
	OpRead
	OpWrite
	OpSize
	OpTruncate
	OpSync
	OpMap
	OpUnmap
	OpClose
	opCount // number of operations; not an operation
)

var opNames = [opCount]string{
	OpCreate:    "create",
	OpOpen:      "open",
	OpRemove:    "remove",
	OpRemoveAll: "removeall",
	OpRename:    "rename",
	OpMkdirAll:  "mkdirall",
	OpList:      "list",
	OpExists:    "exists",
	OpSyncDir:   "syncdir",
	OpRead:      "read",
	OpWrite:     "write",
	OpSize:      "size",
	OpTruncate:  "truncate",
	OpSync:      "sync",
	OpMap:       "map",
	OpUnmap:     "unmap",
	OpClose:     "close",
}

func (op Op) String() string {
	if op < opCount {
		return opNames[op]
	}
	return fmt.Sprintf("op(%d)", uint8(op))
}

// opError is the one error format of the package: "vfs: sync /x/y.log: <err>".
func opError(op Op, name string, err error) error {
	return fmt.Errorf("vfs: %s %s: %w", op, name, err)
}

// FailAfter returns a fault function for Mem.SetFault that lets the first n
// operations of kind op succeed and fails every later one with err, leaving
// other operations alone. FailAfter(OpWrite, 0, syscall.ENOSPC) is a full
// disk; the error then matches errors.Is(err, syscall.ENOSPC).
//
// The function counts without locking: Mem calls it under its own lock.
func FailAfter(op Op, n int, err error) func(Op, string) error {
	if err == nil {
		panic("vfs: FailAfter with a nil error")
	}
	seen := 0
	return func(got Op, _ string) error {
		if got != op {
			return nil
		}
		if seen < n {
			seen++
			return nil
		}
		return err
	}
}
