package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mirrord/mirrord/logstore"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
	"golang.org/x/sys/unix"
)

// runDemo is the storage demo: it appends --bytes of 16 KiB batches in 1 MiB
// appends to a fresh partition log, syncs, reads everything back checking
// every CRC, and prints throughput beside a plain file write of the same
// bytes measured in the same run.
func runDemo(args []string) error {
	flags := flag.NewFlagSet("demo", flag.ContinueOnError)
	dataDir := flags.String("data-dir", "", "data directory (default: a temporary one, removed at the end)")
	total := flags.Int64("bytes", 512<<20, "bytes to append")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *dataDir == "" {
		dir, err := os.MkdirTemp("", "mirrord-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*dataDir = dir
	}
	set := batchSet(1<<20, 16<<10)
	appends := max(1, *total/int64(len(set)))
	fmt.Printf("mirrord storage demo: %d MiB in %d appends of %d batches of 16 KiB, data dir %s\n",
		appends*int64(len(set))>>20, appends, len(set)/(16<<10), *dataDir)

	// A first write of fresh files in a process runs at a fraction of the
	// steady speed here; warm up so that both sides see a warm machine.
	if _, err := rawWrite(filepath.Join(*dataDir, "warm-up.bin"), set, appends); err != nil {
		return err
	}
	raw, err := rawWrite(filepath.Join(*dataDir, "raw-write.bin"), set, appends)
	if err != nil {
		return err
	}
	dir, err := logstore.OpenDir(vfs.OS, filepath.Join(*dataDir, "logs"), logstore.DefaultConfig())
	if err != nil {
		return err
	}
	defer dir.Close()
	log, err := dir.Create(logstore.TopicPartition{Topic: "demo", Partition: 0}, rb.NewTopicID(), logstore.DefaultConfig())
	if err != nil {
		return err
	}
	start := time.Now()
	for range appends {
		if _, err := log.AppendAssign(set, 0); err != nil {
			return err
		}
	}
	if err := log.Flush(); err != nil {
		return err
	}
	appended := time.Since(start)
	// The plain write again, after the log's: the better of the two is the
	// limit, so neither side pays alone for a cold page cache.
	if again, err := rawWrite(filepath.Join(*dataDir, "raw-write.bin"), set, appends); err != nil {
		return err
	} else {
		raw = min(raw, again)
	}
	start = time.Now()
	records, err := readBack(log)
	if err != nil {
		return err
	}
	read := time.Since(start)
	bytes := float64(appends * int64(len(set)))
	fmt.Printf("  plain write(2)+fdatasync  %8.0f MB/s\n", bytes/raw.Seconds()/1e6)
	fmt.Printf("  log append+fdatasync      %8.0f MB/s  (%.2fx the plain write)\n", bytes/appended.Seconds()/1e6, raw.Seconds()/appended.Seconds())
	fmt.Printf("  log read, CRC checked     %8.0f MB/s  (%d records, offsets 0..%d, %d segments)\n",
		bytes/read.Seconds()/1e6, records, log.LogEndOffset()-1, log.Segments())
	return nil
}

// batchSet returns size bytes of batches of batchSize bytes, 1 KiB records.
func batchSet(size, batchSize int) []byte {
	value := make([]byte, 1000)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	records := make([]rb.Record, (batchSize-rb.HeaderSize)/(len(value)+8))
	for i := range records {
		records[i] = rb.Record{Value: value}
	}
	var out []byte
	for offset := rb.Offset(0); len(out)+batchSize <= size; offset += rb.Offset(len(records)) {
		out = rb.Append(out, rb.Spec{BaseOffset: offset, BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, Records: records})
	}
	return out
}

func rawWrite(name string, set []byte, count int64) (time.Duration, error) {
	f, err := os.Create(name)
	if err != nil {
		return 0, err
	}
	defer os.Remove(name)
	defer f.Close()
	start := time.Now()
	for range count {
		if _, err := f.Write(set); err != nil {
			return 0, err
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// readBack reads the whole log with Read + ReadAt and checks every batch.
func readBack(log *logstore.Log) (int64, error) {
	buf := make([]byte, 0, 1<<20)
	var records int64
	for offset, end := log.LogStartOffset(), log.LogEndOffset(); offset < end; {
		var err error
		if buf, err = log.ReadBytes(buf[:0], offset, 1<<20, end, true); err != nil {
			return 0, err
		}
		it := rb.NewIter(buf, true)
		for it.Next() {
			records += int64(it.Batch().RecordCount())
			offset = it.Batch().NextOffset()
		}
		if err := it.Err(); err != nil && !errors.Is(err, rb.ErrTruncated) {
			return 0, err
		}
	}
	return records, nil
}
