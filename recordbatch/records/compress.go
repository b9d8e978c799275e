package records

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/mirrord/mirrord/recordbatch"
)

// xerialBlockSize is snappy-java's default block size, which Kafka's
// producer and broker use when they write snappy batches.
const xerialBlockSize = 32 << 10

// Compress appends to dst a records section compressed with codec in the
// framing Kafka's own writers use, so that any Kafka client reads it:
// gzip, snappy in snappy-java's xerial framing, the LZ4 frame format, a
// zstd frame. CodecNone appends section as it is. The log cleaner uses it
// to rebuild a compressed batch it kept some records of, as Kafka's
// MemoryRecordsBuilder recompresses with the batch's own codec.
func Compress(dst []byte, codec recordbatch.Codec, section []byte) ([]byte, error) {
	switch codec {
	case recordbatch.CodecNone:
		return append(dst, section...), nil
	case recordbatch.CodecGzip:
		buf := bytes.NewBuffer(dst)
		w := gzip.NewWriter(buf)
		if _, err := w.Write(section); err != nil {
			return dst, fmt.Errorf("records: gzip: %w", err)
		}
		if err := w.Close(); err != nil {
			return dst, fmt.Errorf("records: gzip: %w", err)
		}
		return buf.Bytes(), nil
	case recordbatch.CodecSnappy:
		dst = append(dst, xerialMagic...)
		dst = binary.BigEndian.AppendUint32(dst, 1) // version
		dst = binary.BigEndian.AppendUint32(dst, 1) // compatible version
		for rest := section; len(rest) > 0; {
			block := rest[:min(len(rest), xerialBlockSize)]
			rest = rest[len(block):]
			encoded := s2.EncodeSnappy(nil, block)
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(encoded)))
			dst = append(dst, encoded...)
		}
		return dst, nil
	case recordbatch.CodecLZ4:
		buf := bytes.NewBuffer(dst)
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		w.Reset(buf)
		if _, err := w.Write(section); err != nil {
			return dst, fmt.Errorf("records: lz4: %w", err)
		}
		if err := w.Close(); err != nil {
			return dst, fmt.Errorf("records: lz4: %w", err)
		}
		return buf.Bytes(), nil
	case recordbatch.CodecZstd:
		e := zstdEncoders.Get().(*zstd.Encoder)
		defer zstdEncoders.Put(e)
		return e.EncodeAll(section, dst), nil
	}
	return dst, fmt.Errorf("records: %w: unknown compression codec %d", recordbatch.ErrCorrupt, uint8(codec))
}

// lz4Writers write the LZ4 frames of Kafka's KafkaLZ4BlockOutputStream:
// 64 KiB independent blocks.
var lz4Writers = sync.Pool{New: func() any {
	w := lz4.NewWriter(nil)
	if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ConcurrencyOption(1)); err != nil {
		panic("records: lz4 writer: " + err.Error())
	}
	return w
}}

var zstdEncoders = sync.Pool{New: func() any {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		panic("records: zstd encoder: " + err.Error())
	}
	return e
}}
