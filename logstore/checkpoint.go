package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

const (
	offsetsCheckpointName = "log-offsets-checkpoint"
	epochCheckpointName   = "leader-epoch-checkpoint"
	cleanShutdownName     = ".clean-shutdown"
	tmpSuffix             = ".tmp"
)

// errReplaced marks a WriteFileAtomic error after the rename: the new
// contents are in place, perhaps not durably. An error without it left the
// old contents in place.
var errReplaced = errors.New("logstore: file replaced, directory not synced")

// WriteFileAtomic replaces dir/name with data: write a temporary file,
// sync it, rename it over the old one, sync the directory. A crash leaves
// either the old or the new contents, never a mix.
func WriteFileAtomic(fs vfs.FS, dir, name string, data []byte) error {
	return WriteFileAtomicFrom(fs, dir, name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFileAtomicFrom is WriteFileAtomic for contents written by write,
// for files too large to hold in memory at once.
func WriteFileAtomicFrom(fs vfs.FS, dir, name string, write func(io.Writer) error) error {
	if err := writeFileSyncedFrom(fs, dir, name, write); err != nil {
		return err
	}
	if err := fs.SyncDir(dir); err != nil {
		return fmt.Errorf("%w: %w", errReplaced, err)
	}
	return nil
}

func writeFileSyncedFrom(fs vfs.FS, dir, name string, write func(io.Writer) error) error {
	target := path.Join(dir, name)
	tmp := target + tmpSuffix
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fs.Rename(tmp, target)
}

// ReadFile returns the whole file, or ok=false when it does not exist.
func ReadFile(fs vfs.FS, name string) (data []byte, ok bool, err error) {
	exists, err := fs.Exists(name)
	if err != nil || !exists {
		return nil, false, err
	}
	f, err := fs.Open(name)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, false, err
	}
	data = make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && int64(len(data)) > 0 {
		return nil, false, fmt.Errorf("logstore: read %s: %w", name, err)
	}
	return data, true, nil
}

// offsetsCheckpoint is the partition's log-offsets-checkpoint file:
//
//	0
//	log-start-offset <n>
//	high-watermark <n>
type offsetsCheckpoint struct {
	logStartOffset rb.Offset
	highWatermark  rb.Offset
}

func (c offsetsCheckpoint) encode() []byte {
	return fmt.Appendf(nil, "0\nlog-start-offset %d\nhigh-watermark %d\n", c.logStartOffset, c.highWatermark)
}

func decodeOffsetsCheckpoint(name string, data []byte) (offsetsCheckpoint, error) {
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	if len(lines) != 3 || string(lines[0]) != "0" {
		return offsetsCheckpoint{}, fmt.Errorf("%w: %s: want a version line \"0\" and two offsets, got %q", ErrCorrupt, name, data)
	}
	var c offsetsCheckpoint
	for i, want := range []string{"log-start-offset", "high-watermark"} {
		key, value, _ := bytes.Cut(lines[i+1], []byte(" "))
		n, err := strconv.ParseInt(string(value), 10, 64)
		if string(key) != want || err != nil || n < 0 {
			return offsetsCheckpoint{}, fmt.Errorf("%w: %s: line %d: want %q and an offset, got %q", ErrCorrupt, name, i+2, want, lines[i+1])
		}
		if i == 0 {
			c.logStartOffset = rb.Offset(n)
		} else {
			c.highWatermark = rb.Offset(n)
		}
	}
	return c, nil
}
