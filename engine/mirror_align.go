package engine

import (
	"context"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/mirrorwire"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Failback's log alignment (LOG_ALIGNMENT): before a mirror fetches a
// partition it has never fetched, or one whose mirroring was stopped, it
// asks the source for the last mirror epoch the source stored when it
// stopped mirroring that partition from us (DescribeClusterMirrors with
// LastMirrorEpochLookups and our cluster ID), and truncates the local log
// to the point both logs agree on (epoch.Cache.TruncationPointForLastMirrorEpoch;
// no stored epoch: zero). What the truncation removes is first copied,
// as raw batches, to truncated/<topic>-<partition>/<from>-<to>.batches in
// the data directory, for the operator to reconcile. A source that still
// mirrors the partition from us is a mirror loop: the partition fails,
// waiting for --recover. A source that does not serve the mirror RPCs (a
// Kafka cluster) stored nothing: the local log is truncated to zero,
// which is a no-op for the new, empty mirror topics of a first mirror.
//
// Alignment is idempotent (the same stored epoch gives the same point),
// so a crash during it simply runs it again.

// ErrMirrorLoop answers a last-mirror-epoch lookup for a partition this
// node still mirrors from the asking cluster (a private error code, as
// READ_ONLY_TOPIC's).
var ErrMirrorLoop = &kerr.Error{Message: "MIRROR_LOOP", Code: 1001, Description: "The cluster asked still mirrors this partition from the asking cluster."}

// lastMirrorEpochAnswer is the source's answer for one partition.
type lastMirrorEpochAnswer struct {
	epoch  rb.Epoch
	offset rb.Offset
	loop   bool
}

// align performs StartAlignment for the partitions of a round: one
// lookup for all of them, then each truncation; it returns each one's
// AlignmentDone or AlignmentFailed.
func (m *mirror) align(ctx context.Context, mps []*mirrorPartition) []partitionEvent {
	events := make([]partitionEvent, 0, len(mps))
	failed := func(mp *mirrorPartition, err error, retryable bool) {
		events = append(events, partitionEvent{mp, mirrorstate.AlignmentFailed{Err: err, Retryable: retryable, Now: time.Now()}})
	}
	answers, err := m.lookUpLastMirrorEpochs(ctx, mps)
	if err != nil {
		for _, mp := range mps {
			failed(mp, fmt.Errorf("log alignment: %w", err), true)
		}
		return events
	}
	m.mu.Lock()
	sourceClusterID := m.sourceClusterID
	m.mu.Unlock()
	for _, mp := range mps {
		answer := answers[mp]
		if answer.loop {
			failed(mp, fmt.Errorf("mirror loop: the source cluster %s still mirrors %s-%d from this cluster %s; stop that mirror's topic on the source first, then --recover",
				sourceClusterID, mp.topic, mp.partition, m.node.Cluster().ClusterID), false)
			continue
		}
		point, err := m.alignPartition(mp, answer)
		if err != nil {
			failed(mp, fmt.Errorf("log alignment: %w", err), true)
			continue
		}
		events = append(events, partitionEvent{mp, mirrorstate.AlignmentDone{TruncatedTo: point}})
	}
	return events
}

// lookUpLastMirrorEpochs asks the source for the stored last mirror
// epochs of partitions.
func (m *mirror) lookUpLastMirrorEpochs(ctx context.Context, mps []*mirrorPartition) (map[*mirrorPartition]lastMirrorEpochAnswer, error) {
	out := make(map[*mirrorPartition]lastMirrorEpochAnswer, len(mps))
	for _, mp := range mps {
		out[mp] = lastMirrorEpochAnswer{epoch: rb.NoEpoch, offset: -1}
	}
	served, err := m.sourceServesMirrorRPCs(ctx)
	if err != nil || !served {
		return out, err
	}
	req := &mirrorwire.DescribeClusterMirrorsRequest{MirrorNames: []string{}}
	clusterID := m.node.Cluster().ClusterID
	req.ClusterID = &clusterID
	index := map[[16]byte]int{}
	for _, mp := range mps {
		i, ok := index[mp.topicID]
		if !ok {
			i = len(req.LastMirrorEpochLookups)
			index[mp.topicID] = i
			req.LastMirrorEpochLookups = append(req.LastMirrorEpochLookups, mirrorwire.DescribeClusterMirrorsLookup{TopicID: mp.topicID})
		}
		req.LastMirrorEpochLookups[i].Partitions = append(req.LastMirrorEpochLookups[i].Partitions, mp.partition)
	}
	kresp, err := m.client.Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("last mirror epoch lookup: %w", err)
	}
	resp := kresp.(*mirrorwire.DescribeClusterMirrorsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("last mirror epoch lookup: %w", err)
	}
	type key struct {
		id        [16]byte
		partition int32
	}
	byKey := map[key]*mirrorPartition{}
	for _, mp := range mps {
		byKey[key{mp.topicID, mp.partition}] = mp
	}
	for _, t := range resp.LastMirrorEpochs {
		for _, p := range t.Partitions {
			mp := byKey[key{[16]byte(t.TopicID), p.PartitionIndex}]
			switch {
			case mp == nil:
				continue
			case p.ErrorCode == ErrMirrorLoop.Code:
				out[mp] = lastMirrorEpochAnswer{epoch: rb.NoEpoch, offset: -1, loop: true}
			case p.ErrorCode != 0:
				return nil, fmt.Errorf("last mirror epoch lookup of %s-%d: %w", mp.topic, mp.partition, kerr.ErrorForCode(p.ErrorCode))
			default:
				out[mp] = lastMirrorEpochAnswer{epoch: rb.Epoch(p.LastMirrorEpoch), offset: rb.Offset(p.LastMirrorOffset)}
			}
		}
	}
	return out, nil
}

// sourceServesMirrorRPCs asks the source's ApiVersions whether it answers
// DescribeClusterMirrors (mirrord does, Kafka does not yet).
func (m *mirror) sourceServesMirrorRPCs(ctx context.Context) (bool, error) {
	kresp, err := m.client.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		return false, fmt.Errorf("ApiVersions: %w", err)
	}
	for _, k := range kresp.(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == mirrorwire.DescribeClusterMirrorsKey {
			return true, nil
		}
	}
	return false, nil
}

// alignPartition truncates the local log to where it agrees with the
// source, keeping what it removes in a file, and returns the point.
func (m *mirror) alignPartition(mp *mirrorPartition, answer lastMirrorEpochAnswer) (rb.Offset, error) {
	p := mp.local
	point := rb.Offset(0)
	if answer.epoch != rb.NoEpoch && answer.offset >= 0 {
		point = p.TruncationPointForLastMirrorEpoch(answer.epoch, answer.offset)
	}
	return point, m.truncateKeeping(mp, point, "failback alignment truncates the local log; the removed batches are kept",
		"last_mirror_epoch", answer.epoch, "last_mirror_offset", answer.offset)
}

// recoverUnclean is ULE_RECOVERY's Truncate: the source elected a leader
// that lacks records the mirror copied; the local log is cut to where it
// agrees with the new leader, the removed batches kept.
func (m *mirror) recoverUnclean(mp *mirrorPartition, offset rb.Offset) error {
	if err := m.truncateKeeping(mp, offset, "unclean leader election on the source: truncating to the new leader's log; the removed batches are kept"); err != nil {
		return fmt.Errorf("engine: %s-%d: truncate to %d after the source's unclean leader election: %w", mp.topic, mp.partition, offset, err)
	}
	mp.metrics.uncleanTruncations.Add(1)
	return nil
}

// truncateKeeping truncates the local log to point, first copying what it
// removes to the truncated folder and logging why with attrs.
func (m *mirror) truncateKeeping(mp *mirrorPartition, point rb.Offset, why string, attrs ...any) error {
	end := mp.local.LogEndOffset()
	if point >= end {
		return nil
	}
	file, err := m.keepTruncated(mp, point, end)
	if err != nil {
		return err
	}
	m.log.Warn(why, append([]any{"topic", mp.topic, "partition", mp.partition, "from", point, "to", end, "file", file}, attrs...)...)
	return mp.local.TruncateTo(point)
}

// keepTruncated copies the batches of [from, to) to a file in the data
// directory's truncated folder, a bounded read at a time, and returns its
// path ("" when the range holds no batch: below the log start).
func (m *mirror) keepTruncated(mp *mirrorPartition, from, to rb.Offset) (string, error) {
	local := mp.local
	from = max(from, local.LogStartOffset())
	if from >= to {
		return "", nil
	}
	copyRange := func(w io.Writer) error {
		var buf []byte
		for offset := from; offset < to; { // bounded: each read moves past at least one batch
			var err error
			if buf, err = local.ReadBatches(buf[:0], offset, keepTruncatedReadBytes, to); err != nil {
				return fmt.Errorf("read the records to truncate: %w", err)
			}
			next := offset
			for it := rb.NewIter(buf, false); it.Next(); {
				next = it.Batch().LastOffset() + 1
			}
			if len(buf) == 0 || next <= offset {
				return nil
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
			offset = next
		}
		return nil
	}
	// One folder per partition, named as its log's folder (which fits any
	// legal topic name, as in Kafka), and a short name in it.
	fs := m.node.cfg.FS
	dir := path.Join(m.node.cfg.DataDir, logstore.TruncatedDir, logstore.TopicPartition{Topic: mp.topic, Partition: mp.partition}.String())
	if err := fs.MkdirAll(dir); err != nil {
		return "", err
	}
	name := fmt.Sprintf("%d-%d.batches", from, to)
	if err := logstore.WriteFileAtomicFrom(fs, dir, name, copyRange); err != nil {
		return "", fmt.Errorf("keep the records to truncate: %w", err)
	}
	return path.Join(dir, name), nil
}

// keepTruncatedReadBytes bounds one read of keepTruncated.
const keepTruncatedReadBytes = 8 << 20
