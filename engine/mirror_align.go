package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"

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

// truncatedDir is the data directory's folder of records failback
// truncation removed.
const truncatedDir = "truncated"

// lastMirrorEpochAnswer is the source's answer for one partition.
type lastMirrorEpochAnswer struct {
	epoch  rb.Epoch
	offset rb.Offset
	loop   bool
}

// alignPartitions aligns the partitions not aligned yet, skipping those
// that wait for recover. Failures fail the partition. m.mu is not held:
// it reads no field m.mu guards (sourceClusterID comes in).
func (m *mirror) alignPartitions(ctx context.Context, mps []*mirrorPartition, sourceClusterID string) {
	var pending []*mirrorPartition
	for _, mp := range mps {
		if state, _, failures := mp.status(); !(state == "FAILED" && failures < 0) {
			pending = append(pending, mp)
		}
	}
	if len(pending) == 0 {
		return
	}
	answers, err := m.lookUpLastMirrorEpochs(ctx, pending)
	if err != nil {
		for _, mp := range pending {
			mp.fail(fmt.Errorf("log alignment: %w", err), true)
		}
		return
	}
	var aligned []*mirrorPartition
	for _, mp := range pending {
		answer := answers[mp]
		if answer.loop {
			mp.fail(fmt.Errorf("mirror loop: the source cluster %s still mirrors %s-%d from this cluster %s; stop that mirror's topic on the source first, then --recover",
				sourceClusterID, mp.topic, mp.partition, m.node.cluster.ClusterID), false)
			continue
		}
		if err := m.alignPartition(mp, answer); err != nil {
			mp.fail(fmt.Errorf("log alignment: %w", err), true)
			continue
		}
		aligned = append(aligned, mp)
	}
	m.persistAligned(aligned)
}

// persistAligned records the aligned partitions as MIRRORING in one group
// commit (a new mirror of many partitions pays one sync, not one each),
// and lets the fetchers take them. A failed write fails them, retryably:
// alignment runs again.
func (m *mirror) persistAligned(mps []*mirrorPartition) {
	if len(mps) == 0 {
		return
	}
	m.node.crashPoint("align:PERSIST")
	entries := make([]stateEntry, 0, len(mps))
	for _, mp := range mps {
		mp.mu.Lock()
		previous := mp.state
		mp.state, mp.err, mp.failures = "MIRRORING", "", 0
		entries = append(entries, stateEntry{mp.stateKey(), mp.stateValueLocked(previous, 0)})
		mp.mu.Unlock()
	}
	if err := m.node.states.putAll(entries); err != nil {
		for _, mp := range mps {
			mp.fail(fmt.Errorf("log alignment: %w", err), true)
		}
		return
	}
	for i, mp := range mps {
		mp.mu.Lock()
		mp.stateEpoch, mp.aligned = entries[i].value.StateEpoch, true
		mp.mu.Unlock()
	}
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
	clusterID := m.node.cluster.ClusterID
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
// source and keeps what it removes in a file; persistAligned then lets it
// be fetched.
func (m *mirror) alignPartition(mp *mirrorPartition, answer lastMirrorEpochAnswer) error {
	p := mp.local
	end := p.log.LogEndOffset()
	point := rb.Offset(0)
	if answer.epoch != rb.NoEpoch && answer.offset >= 0 {
		point = p.log.TruncationPointForLastMirrorEpoch(answer.epoch, answer.offset)
	}
	m.node.crashPoint("align:TRUNCATE")
	if point < end {
		file, err := m.keepTruncated(mp, point, end)
		if err != nil {
			return err
		}
		m.log.Warn("failback alignment truncates the local log; the removed batches are kept", "topic", mp.topic, "partition", mp.partition,
			"from", point, "to", end, "last_mirror_epoch", answer.epoch, "last_mirror_offset", answer.offset, "file", file)
		if err := p.alignTo(point); err != nil {
			return err
		}
	}
	return nil
}

// keepTruncated copies the batches of [from, to) to a file in the data
// directory's truncated folder, a bounded read at a time, and returns its
// path ("" when the range holds no batch: below the log start).
func (m *mirror) keepTruncated(mp *mirrorPartition, from, to rb.Offset) (string, error) {
	log := mp.local.log
	from = max(from, log.LogStartOffset())
	if from >= to {
		return "", nil
	}
	copyRange := func(w io.Writer) error {
		var buf []byte
		for offset := from; offset < to; { // bounded: each read moves past at least one batch
			var err error
			if buf, err = log.ReadBytes(buf[:0], offset, keepTruncatedReadBytes, to, true); err != nil {
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
	dir := path.Join(m.node.cfg.DataDir, truncatedDir, logstore.TopicPartition{Topic: mp.topic, Partition: mp.partition}.String())
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

// alignTo truncates the log to offset for failback and rebuilds the
// producer state; a point below the log start empties the log there.
func (p *partition) alignTo(offset rb.Offset) error {
	if offset < p.log.LogStartOffset() {
		return p.restartAt(int64(offset))
	}
	_, err := p.truncateTo(offset, 0)
	return errors.Join(err, p.log.Flush())
}
