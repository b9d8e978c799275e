// Package vfs is the file-system seam of the log store. OS is the real
// thing (fdatasync, mmap); Mem is an in-memory file system that models a
// crash: it keeps only what was synced (file contents after File.Sync,
// names after SyncDir) and may keep a torn piece of what was not.
//
// Mem exists so crash tests can run thousands of seeded crash points in a
// second, and so errors (a full disk, a failed sync) can be injected.
//
// # Mem's crash model
//
// Every file has current bytes and durable bytes; every directory has
// current entries and durable entries:
//
//	operation              current               durable
//	File.Write, Truncate   file bytes change     -
//	writes through Map     file bytes change     -
//	File.Sync              -                     file bytes := current bytes
//	Mapping.Sync           -                     file bytes := current bytes
//	Create, Rename, Remove dir entries change    -
//	SyncDir(dir)           -                     dir entries := current entries
//	MkdirAll, RemoveAll    directories change in both at once (simplification)
//
// Mem.Crash (power loss, then reboot) keeps the durable entries of every
// directory and the durable bytes of every file they name. When a file's
// current bytes extend its durable bytes (it was only appended to since its
// last Sync), a random-length prefix of the unsynced tail survives too, a
// torn write, and one byte of that kept prefix may be corrupted:
//
//	current:  [ durable ......... | unsynced tail ............ ]
//	after:    [ durable ......... | kept prefix (maybe 1 bad byte) ]
//
// So a file created and synced in a directory never synced is gone, and a
// rename without SyncDir may be undone. Mem.CrashClean keeps no tail.
// Handles open at a crash fail with ErrCrashed; callers reopen.
//
// # Rules both implementations enforce
//
// While a file is mapped (Map with size > 0, until Mapping.Unmap, which
// Close does not do), Write and Truncate return ErrMapped: a mapped file is
// written through the mapping. Mem enforces this across every handle of
// the file, OS on the handle that made the mapping. Closed handles return fs.ErrClosed, missing names fs.ErrNotExist.
// Errors name the operation and the file: "vfs: sync /d/00000042.log: ...".
//
// # Fault injection
//
// Mem.SetFault installs a function called at the start of every operation;
// a non-nil error fails the operation, which then does nothing. The error
// is wrapped with %w, so FailAfter(OpWrite, 0, syscall.ENOSPC) (a full
// disk) yields errors matching errors.Is(err, syscall.ENOSPC).
package vfs
