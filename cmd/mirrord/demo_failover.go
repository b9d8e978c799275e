package main

// The demo ends with a failover. Once the source's writes have ended and
// the mirror has caught up, the mirror node stops mirroring every demo
// topic (mirrord.StopMirroring, which returns when each partition is
// STOPPED). A stopped partition keeps the source's offsets and adds one,
// the invisible MIRROR_PID_RESET control batch at the last mirror offset
// (the log end offset when mirroring stopped), so the first record written
// to the former mirror lands at lastMirrorOffset+1:
//
//	offset  0 .. lastMirrorOffset-1   the source's records, byte for byte
//	offset  lastMirrorOffset          MIRROR_PID_RESET (a control batch)
//	offset  lastMirrorOffset+1 ..     records written after the stop
//
// The demo writes to the former mirror with an idempotent kgo producer and
// reads back with kgo consumers (assigned partitions: mirrord has no group
// coordinator) to show both.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mirrord/mirrord"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// failoverRecordsPerPartition are written to each partition of the
	// former mirror after the stop.
	failoverRecordsPerPartition = 600
	// failoverWithin bounds the writes and reads back after the stop.
	failoverWithin = 10 * time.Second
)

// failoverReport is what the demo's failover did.
type failoverReport struct {
	StopTook   time.Duration       // the StopMirroring call, all partitions
	Partitions []partitionFailover // sorted by topic, then partition
}

// partitionFailover is one partition of the failover.
type partitionFailover struct {
	Topic     string
	Partition int32
	// SourceHighWatermark is the source's, read after its writes ended.
	SourceHighWatermark int64
	// LastMirrorOffset is the mirror's log end offset when it stopped,
	// where the MIRROR_PID_RESET batch went; SourceHighWatermark when the
	// mirror had caught up.
	LastMirrorOffset int64
	// FirstWritten and LastWritten are the offsets of the first and last
	// record written after the stop, -1 before.
	FirstWritten, LastWritten int64
	// ReadBack counts the records written after the stop that a consumer
	// read back, in order and unchanged.
	ReadBack int
	// ComparedOffset is the offset, below LastMirrorOffset, of the
	// record read from both nodes and found identical; -1 when the
	// partition had no record to compare.
	ComparedOffset int64
}

func (p partitionFailover) String() string { return fmt.Sprintf("%s-%d", p.Topic, p.Partition) }

// failover stops mirroring the demo topics on the mirror node, writes to
// them and reads back, printing each step; it returns an error when a
// partition is not writable or its offsets do not continue the mirrored
// ones.
func (d *mirrorDemo) failover(ctx context.Context) (failoverReport, error) {
	fmt.Fprintf(d.out, "\nfailover: the source's writes have ended; the mirror node stops mirroring and takes the writes\n")
	if err := d.printStopDryRun(ctx); err != nil {
		return failoverReport{}, err
	}
	var report failoverReport
	var err error
	if report.StopTook, err = d.stopMirroring(ctx); err != nil {
		return report, err
	}
	if report.Partitions, err = d.stoppedPartitions(ctx); err != nil {
		return report, err
	}
	fmt.Fprintf(d.out, "  stopped mirroring %s in %.1f ms: %d partitions STOPPED, writable\n",
		strings.Join(d.topicNames(), ", "), milliseconds(report.StopTook), len(report.Partitions))
	ctx, cancel := context.WithTimeout(ctx, failoverWithin)
	defer cancel()
	if err := writeAfterStop(ctx, d.target.addr, report.Partitions); err != nil {
		return report, err
	}
	if err := d.readBackAfterStop(ctx, report.Partitions); err != nil {
		return report, err
	}
	d.printFailover(report)
	return report, checkFailover(report.Partitions)
}

// printStopDryRun prints, per topic, the lag a stop now would leave
// behind, in records and in time: what `mirrord mirrors --stop --dry-run`
// shows.
func (d *mirrorDemo) printStopDryRun(ctx context.Context) error {
	descriptions, err := d.target.node.Admin().DescribeMirrors(ctx, []string{"demo"}, false)
	if err != nil {
		return fmt.Errorf("demo: stop dry run: %w", err)
	}
	if len(descriptions) != 1 || descriptions[0].Err != nil {
		return fmt.Errorf("demo: stop dry run: mirror demo not described: %v", descriptions)
	}
	type lag struct {
		records int64 // -1: unknown
		time    time.Duration
	}
	lags := map[string]lag{}
	for _, p := range descriptions[0].Partitions {
		l := lags[p.Topic]
		if p.Lag() < 0 || l.records < 0 {
			l.records = -1
		} else {
			l.records += p.Lag()
		}
		l.time = max(l.time, p.LagTime)
		lags[p.Topic] = l
	}
	var parts []string
	for _, name := range d.topicNames() {
		parts = append(parts, fmt.Sprintf("%s %s records, %v", name, offsetText(lags[name].records), lags[name].time))
	}
	fmt.Fprintf(d.out, "  dry run, what a stop now would leave behind on the source: %s\n", strings.Join(parts, "; "))
	return nil
}

// stopMirroring stops mirroring every demo topic and returns how long the
// stop took; a topic the stop answers with an error is an error.
func (d *mirrorDemo) stopMirroring(ctx context.Context) (time.Duration, error) {
	names := d.topicNames()
	start := time.Now()
	results, err := d.target.node.Admin().SetTopicsDesiredState(ctx, "demo", mirrord.StopMirroring, mirrord.TopicSelection{Names: names})
	took := time.Since(start)
	if err != nil {
		return took, fmt.Errorf("demo: stop mirroring: %w", err)
	}
	if len(results) != len(names) {
		return took, fmt.Errorf("demo: stop mirroring %v: %d topics answered", names, len(results))
	}
	return took, topicResultsError("stop mirroring", results)
}

// stoppedPartitions describes the mirror after the stop: every demo
// partition must be STOPPED with a last mirror offset no greater than the
// source's high watermark.
func (d *mirrorDemo) stoppedPartitions(ctx context.Context) ([]partitionFailover, error) {
	descriptions, err := d.target.node.Admin().DescribeMirrors(ctx, []string{"demo"}, false)
	if err != nil {
		return nil, fmt.Errorf("demo: describe after the stop: %w", err)
	}
	var parts []partitionFailover
	for _, p := range descriptions[0].Partitions {
		if state, _ := mirrord.ParsePartitionState(p.State); state != mirrord.Stopped || p.LastMirrorOffset < 0 {
			return nil, fmt.Errorf("demo: after the stop %s-%d is %s (last mirror offset %d, error %q), want STOPPED",
				p.Topic, p.Partition, p.State, p.LastMirrorOffset, p.Error)
		}
		source, err := d.source.node.Offsets(p.Topic, p.Partition)
		if err != nil {
			return nil, fmt.Errorf("demo: source partition: %w", err)
		}
		part := partitionFailover{Topic: p.Topic, Partition: p.Partition, SourceHighWatermark: int64(source.HighWatermark),
			LastMirrorOffset: p.LastMirrorOffset, FirstWritten: -1, LastWritten: -1, ComparedOffset: -1}
		if part.LastMirrorOffset > part.SourceHighWatermark {
			return nil, fmt.Errorf("demo: %s: last mirror offset %d beyond the source's high watermark %d", part, part.LastMirrorOffset, part.SourceHighWatermark)
		}
		parts = append(parts, part)
	}
	if want := d.partitionCount(); len(parts) != want {
		return nil, fmt.Errorf("demo: after the stop %d partitions described, want %d", len(parts), want)
	}
	return parts, nil
}

// writeAfterStop writes failoverRecordsPerPartition records to each
// partition of addr with an idempotent producer and sets their
// FirstWritten and LastWritten offsets.
func writeAfterStop(ctx context.Context, addr string, parts []partitionFailover) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(failoverWithin))
	if err != nil {
		return fmt.Errorf("demo: producer for the former mirror: %w", err)
	}
	defer client.Close()
	// The callbacks run on the client's goroutines: they write only
	// these, under mu, and parts is updated once all are done.
	var (
		mu          sync.Mutex
		first, last = make([]int64, len(parts)), make([]int64, len(parts))
		firstErr    error
	)
	for i, p := range parts {
		first[i], last[i] = -1, -1
		for n := range failoverRecordsPerPartition {
			record := &kgo.Record{Topic: p.Topic, Partition: p.Partition, Key: fmt.Appendf(nil, "failover-%d", n), Value: failoverValue(p, n)}
			client.Produce(ctx, record, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					firstErr = cmp.Or(firstErr, fmt.Errorf("demo: write to the former mirror %s-%d: %w", r.Topic, r.Partition, err))
					return
				}
				if first[i] < 0 || r.Offset < first[i] {
					first[i] = r.Offset
				}
				last[i] = max(last[i], r.Offset)
			})
		}
	}
	if err := client.Flush(ctx); err != nil {
		return fmt.Errorf("demo: write to the former mirror: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range parts {
		parts[i].FirstWritten, parts[i].LastWritten = first[i], last[i]
	}
	return firstErr
}

// failoverValue is the value of record n written to p after the stop.
func failoverValue(p partitionFailover, n int) []byte {
	return fmt.Appendf(nil, "written to the former mirror %s after the failover, record %d", p, n)
}

// readBackAfterStop reads each partition of the former mirror from the
// last mirrored record to the last record written, and that mirrored
// record from the source: it sets ComparedOffset when the two are
// identical and ReadBack to the written records read back unchanged.
func (d *mirrorDemo) readBackAfterStop(ctx context.Context, parts []partitionFailover) error {
	var fromMirror, fromSource []offsetRange
	for _, p := range parts {
		fromMirror = append(fromMirror, offsetRange{p.Topic, p.Partition, max(p.LastMirrorOffset-1, 0), p.LastWritten})
		if p.LastMirrorOffset > 0 {
			fromSource = append(fromSource, offsetRange{p.Topic, p.Partition, p.LastMirrorOffset - 1, p.LastMirrorOffset - 1})
		}
	}
	mirrored, err := consumeRanges(ctx, d.target.addr, fromMirror)
	if err != nil {
		return fmt.Errorf("demo: read back the former mirror: %w", err)
	}
	sourced, err := consumeRanges(ctx, d.source.addr, fromSource)
	if err != nil {
		return fmt.Errorf("demo: read the source: %w", err)
	}
	for i := range parts {
		key := partitionKey{parts[i].Topic, parts[i].Partition}
		if err := checkReadBack(&parts[i], mirrored[key], sourced[key]); err != nil {
			return err
		}
	}
	return nil
}

// checkReadBack checks what was read of p: the mirrored record at
// LastMirrorOffset-1, identical to the source's, then nothing visible at
// LastMirrorOffset (the control batch), then the records written.
func checkReadBack(p *partitionFailover, mirrored, sourced []*kgo.Record) error {
	if p.LastMirrorOffset > 0 {
		if len(mirrored) == 0 || len(sourced) == 0 || mirrored[0].Offset != p.LastMirrorOffset-1 {
			return fmt.Errorf("demo: %s: the last mirrored record, offset %d, not read from both nodes (%d records read from the mirror, %d from the source)",
				p, p.LastMirrorOffset-1, len(mirrored), len(sourced))
		}
		if err := sameRecord(mirrored[0], sourced[0]); err != nil {
			return fmt.Errorf("demo: %s: offset %d differs between the former mirror and the source: %w", p, p.LastMirrorOffset-1, err)
		}
		p.ComparedOffset = mirrored[0].Offset
		mirrored = mirrored[1:]
	}
	for n, r := range mirrored {
		if want := p.LastMirrorOffset + 1 + int64(n); r.Offset != want || !bytes.Equal(r.Value, failoverValue(*p, n)) {
			return fmt.Errorf("demo: %s: read back %q at offset %d, want record %d at offset %d", p, r.Value, r.Offset, n, want)
		}
	}
	p.ReadBack = len(mirrored)
	return nil
}

// checkFailover checks every partition's offsets: the writes continue
// right after the MIRROR_PID_RESET batch at the last mirror offset, and
// all of them were read back.
func checkFailover(parts []partitionFailover) error {
	var errs []error
	for _, p := range parts {
		if p.FirstWritten != p.LastMirrorOffset+1 {
			errs = append(errs, fmt.Errorf("%s: first offset written %d, want %d (last mirror offset %d, +1 for MIRROR_PID_RESET)",
				p, p.FirstWritten, p.LastMirrorOffset+1, p.LastMirrorOffset))
		}
		if written := p.LastWritten - p.FirstWritten + 1; written != failoverRecordsPerPartition || p.ReadBack != failoverRecordsPerPartition {
			errs = append(errs, fmt.Errorf("%s: offsets %d..%d written, %d read back, want %d", p, p.FirstWritten, p.LastWritten, p.ReadBack, failoverRecordsPerPartition))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("demo: failover: %w", err)
	}
	return nil
}

// printFailover prints each partition's offsets and the closing line.
func (d *mirrorDemo) printFailover(report failoverReport) {
	var written int64
	first, last := int64(-1), int64(-1)
	for _, p := range report.Partitions {
		compared := "no mirrored record to compare"
		if p.ComparedOffset >= 0 {
			compared = fmt.Sprintf("offset %d identical on source and mirror", p.ComparedOffset)
		}
		behind := ""
		if p.LastMirrorOffset < p.SourceHighWatermark {
			behind = fmt.Sprintf(" (%d records left behind on the source)", p.SourceHighWatermark-p.LastMirrorOffset)
		}
		fmt.Fprintf(d.out, "  %-10s source high watermark %6d, PID reset at %6d%s, written %d..%d (%d read back); %s\n",
			p, p.SourceHighWatermark, p.LastMirrorOffset, behind, p.FirstWritten, p.LastWritten, p.ReadBack, compared)
		written += p.LastWritten - p.FirstWritten + 1
		if first < 0 || p.FirstWritten < first {
			first = p.FirstWritten
		}
		last = max(last, p.LastWritten)
	}
	fmt.Fprintf(d.out, "\nfailover: %d partitions writable in %.1f ms; %d records written to the former mirror at offsets %d..%d\n",
		len(report.Partitions), milliseconds(report.StopTook), written, first, last)
}

// offsetRange is the offsets from and to, both included, of a partition.
type offsetRange struct {
	topic     string
	partition int32
	from, to  int64
}

type partitionKey struct {
	topic     string
	partition int32
}

// consumeRanges reads the ranges from addr with assigned partitions and
// returns each range's records, in offset order, until every range is
// read or ctx ends (an error).
func consumeRanges(ctx context.Context, addr string, ranges []offsetRange) (map[partitionKey][]*kgo.Record, error) {
	got := map[partitionKey][]*kgo.Record{} // bounded by the ranges
	if len(ranges) == 0 {
		return got, nil
	}
	assign := map[string]map[int32]kgo.Offset{}
	pending := map[partitionKey]int64{} // partition -> last offset to read
	for _, r := range ranges {
		if assign[r.topic] == nil {
			assign[r.topic] = map[int32]kgo.Offset{}
		}
		assign[r.topic][r.partition] = kgo.NewOffset().At(r.from)
		pending[partitionKey{r.topic, r.partition}] = r.to
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(assign), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer client.Close()
	for len(pending) > 0 { // ends when ctx does, at the latest
		fetches := client.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%d partitions not read to the end: %w", len(pending), err)
		}
		if err := fetches.Err(); err != nil {
			return nil, err
		}
		fetches.EachRecord(func(r *kgo.Record) {
			key := partitionKey{r.Topic, r.Partition}
			to, ok := pending[key]
			if !ok || r.Offset > to {
				return
			}
			got[key] = append(got[key], r)
			if r.Offset == to {
				delete(pending, key)
			}
		})
	}
	return got, nil
}

// sameRecord compares what the record batches hold of two records.
func sameRecord(a, b *kgo.Record) error {
	switch {
	case a.Offset != b.Offset:
		return fmt.Errorf("offset %d, %d", a.Offset, b.Offset)
	case !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Value, b.Value):
		return fmt.Errorf("key or value differ: %q=%q, %q=%q", a.Key, a.Value, b.Key, b.Value)
	case !a.Timestamp.Equal(b.Timestamp) || a.Attrs != b.Attrs:
		return fmt.Errorf("timestamp or attributes differ: %v %v, %v %v", a.Timestamp, a.Attrs, b.Timestamp, b.Attrs)
	case a.ProducerID != b.ProducerID || a.ProducerEpoch != b.ProducerEpoch || a.LeaderEpoch != b.LeaderEpoch:
		return fmt.Errorf("producer or leader epoch differ: %d/%d/%d, %d/%d/%d",
			a.ProducerID, a.ProducerEpoch, a.LeaderEpoch, b.ProducerID, b.ProducerEpoch, b.LeaderEpoch)
	case len(a.Headers) != len(b.Headers):
		return fmt.Errorf("%d headers, %d", len(a.Headers), len(b.Headers))
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return fmt.Errorf("header %d differs", i)
		}
	}
	return nil
}

// topicNames are the demo's topics, sorted.
func (d *mirrorDemo) topicNames() []string {
	names := make([]string, 0, len(d.topics))
	for name := range d.topics {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (d *mirrorDemo) partitionCount() int {
	count := 0
	for _, partitions := range d.topics {
		count += int(partitions)
	}
	return count
}

func milliseconds(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
