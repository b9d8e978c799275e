package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A raw Kafka connection: one request at a time at the exact version the
// test sets, so what the server stores can be read byte for byte, without
// a client's version negotiation or decoding in between.

const rawResponseBytesMax = 256 << 20

type rawConn struct {
	nc          net.Conn
	correlation int32
}

func dialRaw(ctx context.Context, addr string) (*rawConn, error) {
	var dialer net.Dialer
	nc, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &rawConn{nc: nc}, nil
}

func (c *rawConn) close() { c.nc.Close() }

// request sends req at req's version and decodes the response.
func (c *rawConn) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return nil, err
	}
	c.correlation++
	const clientID = "mirrord-e2e"
	frame := make([]byte, 4, 256)
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.GetVersion()))
	frame = binary.BigEndian.AppendUint32(frame, uint32(c.correlation))
	frame = binary.BigEndian.AppendUint16(frame, uint16(len(clientID)))
	frame = append(frame, clientID...)
	if req.IsFlexible() {
		frame = append(frame, 0) // no tagged fields
	}
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if _, err := c.nc.Write(frame); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return nil, fmt.Errorf("response size: %w", err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > rawResponseBytesMax {
		return nil, fmt.Errorf("response of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.nc, body); err != nil {
		return nil, fmt.Errorf("response body: %w", err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != c.correlation {
		return nil, fmt.Errorf("correlation ID %d, want %d", got, c.correlation)
	}
	body = body[4:]
	if req.IsFlexible() && req.Key() != 18 { // ApiVersions answers with header v0
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %T v%d: %w", resp, resp.GetVersion(), err)
	}
	return resp, nil
}

// skipTags skips a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 || count > 64 {
		return nil, errors.New("bad tagged fields in response header")
	}
	b = b[n:]
	for range count {
		_, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("bad tag in response header")
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < size {
			return nil, errors.New("bad tag size in response header")
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// storedPartition is what one partition holds, read with raw Fetches.
type storedPartition struct {
	batches          []byte // every whole batch from the log start, as served
	batchCount       int
	codecs           map[int8]int   // compression attribute -> data batches
	markers          map[string]int // control batches: "commit", "abort", "other"
	transactional    int            // data batches with the transactional bit
	highWatermark    int64
	lastStableOffset int64
	logStartOffset   int64
}

const (
	fetchVersion       = 12 // flexible, topics by name
	fetchRoundsMax     = 10000
	fetchPartitionMax  = 4 << 20
	batchHeaderBytes   = 61 // v2 record batch header, up to the record count
	batchLengthAt      = 8
	batchAttributesAt  = 21
	batchLastDeltaAt   = 23
	batchCRCAt         = 17
	batchCompressMask  = 0x07
	batchMagicAt       = 16
	batchMagicExpected = 2
	batchControlBit    = 0x20
	batchTxnBit        = 0x10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readPartition fetches a partition from its log start offset to its high
// watermark (read_uncommitted) and checks each batch's framing and CRC-32C.
func readPartition(ctx context.Context, addr, topic string, partition int32) (storedPartition, error) {
	addr, err := leaderAddress(ctx, addr, topicPartition{topic, partition})
	if err != nil {
		return storedPartition{}, err
	}
	c, err := dialRaw(ctx, addr)
	if err != nil {
		return storedPartition{}, err
	}
	defer c.close()
	stored := storedPartition{codecs: map[int8]int{}, markers: map[string]int{}}
	offset, err := earliestOffset(ctx, c, topic, partition)
	if err != nil {
		return stored, err
	}
	for round := 0; ; round++ {
		if round == fetchRoundsMax {
			return stored, fmt.Errorf("%s-%d: not read to the end in %d fetches", topic, partition, fetchRoundsMax)
		}
		fp, err := fetchOnce(ctx, c, topic, partition, offset)
		if err != nil {
			return stored, err
		}
		stored.highWatermark, stored.lastStableOffset, stored.logStartOffset = fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset
		if offset >= fp.HighWatermark {
			return stored, nil
		}
		next, err := stored.addBatches(fp.RecordBatches, offset)
		if err != nil {
			return stored, fmt.Errorf("%s-%d at offset %d: %w", topic, partition, offset, err)
		}
		if next == offset {
			return stored, fmt.Errorf("%s-%d: fetch at %d (high watermark %d) returned no whole batch", topic, partition, offset, fp.HighWatermark)
		}
		offset = next
	}
}

// earliestOffset asks for the partition's log start offset (ListOffsets
// v4, timestamp -2).
func earliestOffset(ctx context.Context, c *rawConn, topic string, partition int32) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 4, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = partition, -1, -2
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := c.request(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("ListOffsets %s-%d earliest: %w", topic, partition, err)
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("ListOffsets %s-%d earliest: %d topics in the answer", topic, partition, len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return 0, fmt.Errorf("ListOffsets %s-%d earliest: error code %d", topic, partition, p.ErrorCode)
	}
	return p.Offset, nil
}

func fetchOnce(ctx context.Context, c *rawConn, topic string, partition int32, offset int64) (kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = fetchVersion
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, 64<<20
	req.SessionID, req.SessionEpoch = 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, fetchPartitionMax
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := c.request(ctx, req)
	if err != nil {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("Fetch v%d %s-%d at %d: %w", fetchVersion, topic, partition, offset, err)
	}
	resp := kresp.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("Fetch %s-%d at %d: error code %d, %d topics", topic, partition, offset, resp.ErrorCode, len(resp.Topics))
	}
	fp := resp.Topics[0].Partitions[0]
	if fp.ErrorCode != 0 {
		return fp, fmt.Errorf("Fetch %s-%d at %d: partition error code %d", topic, partition, offset, fp.ErrorCode)
	}
	return fp, nil
}

// addBatches appends the whole batches of data that end at or after offset
// and returns the offset after the last one. A partial batch at the end
// (a Fetch may cut one) is dropped.
func (s *storedPartition) addBatches(data []byte, offset int64) (int64, error) {
	next := offset
	for len(data) >= batchHeaderBytes {
		size := 12 + int(int32(binary.BigEndian.Uint32(data[batchLengthAt:])))
		if size < batchHeaderBytes {
			return next, fmt.Errorf("batch length %d", size-12)
		}
		if size > len(data) {
			break // partial: read again from next
		}
		batch := data[:size]
		data = data[size:]
		if batch[batchMagicAt] != batchMagicExpected {
			return next, fmt.Errorf("batch magic %d", batch[batchMagicAt])
		}
		if want, got := binary.BigEndian.Uint32(batch[batchCRCAt:]), crc32.Checksum(batch[batchAttributesAt:], castagnoli); want != got {
			return next, fmt.Errorf("batch at %d: CRC-32C %08x, header says %08x", int64(binary.BigEndian.Uint64(batch)), got, want)
		}
		base := int64(binary.BigEndian.Uint64(batch))
		last := base + int64(int32(binary.BigEndian.Uint32(batch[batchLastDeltaAt:])))
		if last < next {
			continue // a batch that ends before offset: Kafka may send it
		}
		if base < next && next != offset {
			return next, fmt.Errorf("batch at %d overlaps the previous one (ends at %d)", base, next-1)
		}
		s.batches = append(s.batches, batch...)
		s.batchCount++
		attributes := batch[batchAttributesAt+1]
		switch {
		case attributes&batchControlBit != 0:
			s.markers[controlType(batch)]++
		default:
			s.codecs[int8(attributes&batchCompressMask)]++
			if attributes&batchTxnBit != 0 {
				s.transactional++
			}
		}
		next = last + 1
	}
	return next, nil
}

// controlType reads the type of a control batch's (single, uncompressed)
// record: its key is version int16, type int16 (0 abort, 1 commit).
func controlType(batch []byte) string {
	b := batch[batchHeaderBytes:]
	varint := func() (int64, bool) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	if _, ok := varint(); !ok || len(b) == 0 { // record length
		return "other"
	}
	b = b[1:] // record attributes
	_, okTimestamp := varint()
	_, okOffset := varint()
	keyLength, okKey := varint()
	if !okTimestamp || !okOffset || !okKey || keyLength < 4 || len(b) < 4 {
		return "other"
	}
	switch binary.BigEndian.Uint16(b[2:]) {
	case 0:
		return "abort"
	case 1:
		return "commit"
	}
	return "other"
}
