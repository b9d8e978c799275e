package logstore

import (
	"bytes"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

// blockingWriteBehindFS holds every WriteBehind of a segment file until
// release closes, after telling entered.
type blockingWriteBehindFS struct {
	vfs.FS
	entered chan struct{}
	release chan struct{}
}

type blockingWriteBehindFile struct {
	vfs.File
	fs *blockingWriteBehindFS
}

func (b *blockingWriteBehindFS) Create(name string) (vfs.File, error) {
	return b.wrap(b.FS.Create(name))
}
func (b *blockingWriteBehindFS) Open(name string) (vfs.File, error) { return b.wrap(b.FS.Open(name)) }

func (b *blockingWriteBehindFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return blockingWriteBehindFile{f, b}, nil
}

func (f blockingWriteBehindFile) WriteBehind(offset, length int64) error {
	f.fs.entered <- struct{}{}
	<-f.fs.release
	return f.File.WriteBehind(offset, length)
}

// TestWriteBehindOutsideTheLock: while an append's write-back is under
// way (sync_file_range can take milliseconds), readers of the log are not
// held: the append has released the log's lock before starting it.
func TestWriteBehindOutsideTheLock(t *testing.T) {
	fsys := &blockingWriteBehindFS{FS: vfs.NewMem(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	cfg := testConfig()
	cfg.Flush, cfg.SegmentBytes, cfg.IndexIntervalBytes, cfg.IndexBytesMax = FlushOS, 1<<30, 4096, 1<<20
	log := openLog(t, fsys, "/d", cfg)
	big := make([]rb.Record, 1000)
	for i := range big {
		big[i] = rb.Record{Value: bytes.Repeat([]byte{byte(i)}, 1000)}
	}
	appended := make(chan error, 1)
	go func() { // 5 MiB: one write-back is due after the fifth
		var err error
		for range 5 {
			if _, err = log.Append(rb.Append(nil, rb.Spec{BaseOffset: log.LogEndOffset(), BaseTimestamp: baseTimestamp, ProducerID: -1, Records: big})); err != nil {
				break
			}
		}
		appended <- err
	}()
	select {
	case <-fsys.entered:
	case err := <-appended:
		t.Fatalf("the appends ended (%v) without a write-back", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no write-back after 10s")
	}
	read := make(chan error, 1)
	go func() {
		slice, err := log.Read(0, 1<<20, log.LogEndOffset(), true)
		if err == nil {
			err = slice.Release()
		}
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatalf("read during the write-back: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read waited 10s behind an append's write-back")
	}
	close(fsys.release)
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	closeLog(t, log)
}
