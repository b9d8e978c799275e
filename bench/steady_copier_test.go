package bench

// kgo-copier-steady: the franz-go copier of copierScenarios (a kgo
// consumer of the source feeding a kgo producer into a writable topic on
// a second mirrord node) in the steady state of steady_test.go. The
// copier starts on the primed source and copies the prime; then each
// sample pauses its consumer (PauseFetchTopics), fills the source with the
// bulk, resumes the consumer and waits until the producer has every
// record of the bulk acknowledged. CPU is the source's, the target's and
// this process's (the copier) over the resume to the last acknowledgement.

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	copierSteadyPoll     = 5 * time.Millisecond
	copierSteadyPollsMax = 1 << 24 // PollFetches calls of one copier, at most
)

// copierSteady measures the copier on one case.
func copierSteady(tb testing.TB, mode benchMode, c mirrorCase) Measurement {
	tb.Helper()
	if c.partitions > 1000 {
		if _, err := scaleFit(tb, int(c.partitions)); err != nil {
			tb.Fatal(err)
		}
	}
	started := time.Now()
	dir := tb.TempDir()
	source := startMirrord(tb, filepath.Join(dir, "source"))
	target := startMirrord(tb, filepath.Join(dir, "target"))
	defer stopAndRemove(tb, c.partitions, target, source)
	ctx, cancel := context.WithTimeout(context.Background(), steadyWait)
	defer cancel()
	createSteadyTopic(tb, ctx, target.addr, c.partitions)
	// The run's "mirror" is the target: its end offsets are the copy's.
	run := newSteadyRun(tb, c, steadyNodes{source: source, mirrorAddr: target.addr, mirrorCPU: target.cpu,
		mirrorRSS: func() int64 { return processPeakRSS(tb, target.proc.Pid()) }})
	defer run.close()
	copier := startSteadyCopier(tb, source.addr, target.addr, c)
	defer copier.stop()
	copier.wait(tb, sum(run.want))
	run.waitMirrored()
	tb.Logf("kgo-copier-steady %s: copier caught up on the prime %v after the start", c, time.Since(started).Round(time.Millisecond))
	row := Measurement{Scenario: scenarioCopierSteady, Variant: variantName(c.partitions, c.codec),
		Note: fmt.Sprintf("franz-go consumer -> producer into a second node, consumer resumed to the bulk (%s per partition) acknowledged; copier caught up once before",
			formatBytes(run.bulkBytes()/int64(c.partitions)))}
	for range steadySamples(mode, c) {
		copier.consumer.PauseFetchTopics(mirrorTopic)
		copied := copier.acked.Load()
		run.fill(run.batches)
		if now := copier.acked.Load(); now != copied {
			tb.Fatalf("copier %s: %d records copied while its consumer was paused", c, now-copied)
		}
		sourceCPU, targetCPU, selfCPU := source.cpu(), target.cpu(), processCPU()
		started := time.Now()
		copier.consumer.ResumeFetchTopics(mirrorTopic)
		copier.wait(tb, sum(run.want))
		wall := time.Since(started)
		row.Samples = append(row.Samples, Sample{Wall: wall, Bytes: run.bulkBytes(), Records: sum(run.want) - copied,
			CPU:     source.cpu() - sourceCPU + target.cpu() - targetCPU + processCPU() - selfCPU,
			PeakRSS: processPeakRSS(tb, target.proc.Pid())})
		run.waitMirrored() // every record in its partition on the target
	}
	tb.Logf("kgo-copier-steady %s: %v in all", c, time.Since(started).Round(time.Millisecond))
	return row
}

// steadyCopier is the copier running in this process: PollFetches on the
// consumer, each record produced to the same partition of the target.
type steadyCopier struct {
	consumer, producer *kgo.Client
	acked              atomic.Int64 // records the target acknowledged
	mu                 sync.Mutex
	err                error // the first of the copier's errors
	cancel             context.CancelFunc
	done               chan struct{}
}

func startSteadyCopier(tb testing.TB, sourceAddr, targetAddr string, c mirrorCase) *steadyCopier {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), steadyWait)
	s := &steadyCopier{cancel: cancel, done: make(chan struct{})}
	s.consumer, s.producer = copierClients(tb, sourceAddr, targetAddr, c)
	go s.copy(ctx)
	return s
}

func (s *steadyCopier) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *steadyCopier) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *steadyCopier) copy(ctx context.Context) {
	defer close(s.done)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			s.fail(fmt.Errorf("copier produce: %w", err))
			return
		}
		s.acked.Add(1)
	}
	for polls := 0; polls < copierSteadyPollsMax; polls++ { // and ctx's deadline
		fetches := s.consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		if err := fetches.Err(); err != nil {
			s.fail(fmt.Errorf("copier consume: %w", err))
			return
		}
		fetches.EachRecord(func(r *kgo.Record) {
			s.producer.Produce(ctx, &kgo.Record{Topic: mirrorTopic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}, promise)
		})
	}
	s.fail(fmt.Errorf("copier: %d polls", copierSteadyPollsMax))
}

// wait polls until records records are acknowledged, or fails the test on
// a copier error or at steadyWait.
func (s *steadyCopier) wait(tb testing.TB, records int64) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), steadyWait)
	defer cancel()
	err := pollUntil(ctx, copierSteadyPoll, func() (bool, error) {
		if err := s.failed(); err != nil {
			return false, err
		}
		return s.acked.Load() >= records, nil
	})
	if err != nil {
		tb.Fatalf("copier: %d of %d records acknowledged: %v", s.acked.Load(), records, err)
	}
	if acked := s.acked.Load(); acked != records {
		tb.Fatalf("copier: %d records acknowledged, want %d", acked, records)
	}
}

func (s *steadyCopier) stop() {
	s.cancel()
	<-s.done
	s.producer.Close()
	s.consumer.Close()
}
