package e2e

// The Java transactional application of the transactional failover test
// (txn_failover_test.go): Kafka's own TransactionalMessageCopier, the
// exactly-once copier of Kafka's system tests (transactions_test.py kills
// brokers under it). It reads one input partition read_committed and, per
// poll of up to --transaction-size records, begins a transaction, sends
// the records to the output topic (same partition), sends the consumer's
// positions to the transaction (AddOffsetsToTxn, TxnOffsetCommit) and
// commits. On a KafkaException other than ProducerFencedException or
// OutOfOrderSequenceException it aborts the transaction and seeks back to
// the group's committed offsets, and goes on: what an application does.
// It stops after as many records as the input partition had offsets
// (LSO) when it started: the test starts it on an input that holds one
// large aborted transaction, so it runs as long as the test feeds it.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
)

const (
	copierClass           = "org.apache.kafka.tools.TransactionalMessageCopier"
	copierTransactionSize = 50 // records per transaction at most (its max.poll.records)
	copierStdoutMax       = 8 << 20
)

// copier is one running TransactionalMessageCopier.
type copier struct {
	proc      *kafkatest.ToolProcess
	read      int64  // bytes of standard output parsed
	partial   string // an unfinished last line
	processed int64  // totalProcessed of its last status line: records copied in committed transactions
}

// startCopier starts the copier of input partition 0 to output at addr,
// in group and with transactionalID.
func startCopier(t *testing.T, libs, addr, input, output, group, transactionalID string) *copier {
	t.Helper()
	// The Java client's transaction manager logs each request it
	// enqueues and each state change at DEBUG (slf4j-simple, to standard
	// error): the failover as the copier saw it.
	debug := []string{"-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.producer.internals.TransactionManager=debug"}
	proc, err := kafkatest.StartToolJVM(libs, t.TempDir(), "copier", debug, copierClass, "--broker-list", addr,
		"--input-topic", input, "--input-partition", "0", "--output-topic", output, "--consumer-group", group,
		"--transactional-id", transactionalID, "--transaction-size", fmt.Sprint(copierTransactionSize))
	if err != nil {
		t.Fatal(err)
	}
	c := &copier{proc: proc}
	t.Cleanup(func() {
		proc.Kill()
		if t.Failed() {
			t.Log(proc.StderrTail())
		}
	})
	return c
}

// copierStatus is a line the copier prints: its status every loop, and
// one when it shuts down.
type copierStatus struct {
	Progress       string `json:"progress"`
	Shutdown       string `json:"shutdown_complete"`
	TotalProcessed int64  `json:"totalProcessed"`
	Remaining      int64  `json:"remaining"`
}

// poll parses what the copier printed since the last poll and returns
// the records it copied in committed transactions; an error when it has
// exited (it never does while it has records to copy, unless an
// exception ended it).
func (c *copier) poll(t *testing.T) (int64, error) {
	t.Helper()
	f, err := os.Open(c.proc.StdoutPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(c.read, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(io.LimitReader(f, copierStdoutMax))
	if err != nil {
		t.Fatal(err)
	}
	c.read += int64(len(data))
	lines := strings.Split(c.partial+string(data), "\n")
	c.partial = lines[len(lines)-1]
	for _, line := range lines[:len(lines)-1] {
		if !strings.HasPrefix(line, "{") {
			continue // not a status line
		}
		var s copierStatus
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("copier printed %q: %v", line, err)
		}
		c.processed = s.TotalProcessed
	}
	select {
	case <-c.proc.Exited():
		return c.processed, fmt.Errorf("exited after copying %d records", c.processed)
	default:
		return c.processed, nil
	}
}

// waitProcessed waits until the copier has committed want records.
func (c *copier) waitProcessed(ctx context.Context, t *testing.T, want int64, wait time.Duration, what string) {
	t.Helper()
	if reason := c.tryWaitProcessed(ctx, t, want, wait); reason != "" {
		t.Fatalf("copier %s: %s\n%s", what, reason, c.proc.StderrTail())
	}
}

// tryWaitProcessed is waitProcessed that returns what failed ("": none).
func (c *copier) tryWaitProcessed(ctx context.Context, t *testing.T, want int64, wait time.Duration) string {
	t.Helper()
	var exited error
	reason := pollUntil(ctx, wait, func(context.Context) string {
		got, err := c.poll(t)
		switch {
		case err != nil:
			exited = err
			return "" // nothing more to wait for
		case got != want:
			return fmt.Sprintf("%d records copied, want %d", got, want)
		}
		return ""
	})
	switch {
	case exited != nil:
		return exited.Error()
	case reason != "":
		return fmt.Sprintf("not within %v: %s", wait, reason)
	}
	return ""
}

// stderrSize is how much the copier has written to standard error.
func (c *copier) stderrSize() int64 {
	info, err := os.Stat(c.proc.StderrPath)
	if err != nil {
		return 0
	}
	return info.Size()
}

// stderrSince is what the copier wrote to standard error from offset on
// (its client's log: the failover as the Java client saw it), at most
// limit bytes, and the offset after it.
func (c *copier) stderrSince(offset int64, limit int) (string, int64) {
	f, err := os.Open(c.proc.StderrPath)
	if err != nil {
		return err.Error(), offset
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return err.Error(), offset
	}
	data, _ := io.ReadAll(io.LimitReader(f, int64(limit)))
	return string(data), offset + int64(len(data))
}
