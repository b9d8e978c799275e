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

// Compression is a codec and its level, in Kafka's numbers (KIP-390:
// compression.gzip.level, compression.lz4.level, compression.zstd.level).
// Level 0 means the codec's default (DefaultLevel); none and snappy have
// no level.
type Compression struct {
	Codec recordbatch.Codec
	Level int
}

// Kafka 4.4's level bounds and defaults (CompressionType).
const (
	GzipLevelMin, GzipLevelMax, GzipLevelDefault = 1, 9, -1 // -1: Deflater's default, 6
	LZ4LevelMin, LZ4LevelMax, LZ4LevelDefault    = 1, 17, 9
	ZstdLevelMin, ZstdLevelMax, ZstdLevelDefault = -131072, 22, 3
)

// DefaultLevel is Kafka's default level of codec (0 for none and snappy).
func DefaultLevel(codec recordbatch.Codec) int {
	switch codec {
	case recordbatch.CodecGzip:
		return GzipLevelDefault
	case recordbatch.CodecLZ4:
		return LZ4LevelDefault
	case recordbatch.CodecZstd:
		return ZstdLevelDefault
	}
	return 0
}

// ValidLevel reports whether level is one Kafka accepts for codec, with
// its words for the range when not.
func ValidLevel(codec recordbatch.Codec, level int) error {
	switch codec {
	case recordbatch.CodecGzip:
		if level > GzipLevelMax || level < GzipLevelMin && level != GzipLevelDefault {
			return fmt.Errorf("records: gzip level %d: value must be between 1 and 9, or equal to -1", level)
		}
	case recordbatch.CodecLZ4:
		if level < LZ4LevelMin || level > LZ4LevelMax {
			return fmt.Errorf("records: lz4 level %d: value must be between 1 and 17", level)
		}
	case recordbatch.CodecZstd:
		if level < ZstdLevelMin || level > ZstdLevelMax {
			return fmt.Errorf("records: zstd level %d: value must be between -131072 and 22", level)
		}
	}
	return nil
}

// Compress appends section, compressed as c says, to dst, framed as
// Kafka 4.4's producer and broker write each codec: gzip one member,
// snappy in snappy-java's xerial framing of 32 KiB blocks, lz4 one frame
// of independent 64 KiB blocks without checksums (Kafka's
// Lz4BlockOutputStream), zstd one frame. Decompress reads all of them
// back. Encoders are pooled per level.
func Compress(dst, section []byte, c Compression) ([]byte, error) {
	level := c.Level
	if level == 0 {
		level = DefaultLevel(c.Codec)
	}
	if err := ValidLevel(c.Codec, level); err != nil {
		return dst, err
	}
	switch c.Codec {
	case recordbatch.CodecNone:
		return append(dst, section...), nil
	case recordbatch.CodecGzip:
		return compressGzip(dst, section, level)
	case recordbatch.CodecSnappy:
		return compressXerial(dst, section), nil
	case recordbatch.CodecLZ4:
		return compressLZ4(dst, section, level)
	case recordbatch.CodecZstd:
		return compressZstd(dst, section, level)
	}
	return dst, fmt.Errorf("records: cannot compress with unknown codec %d", uint8(c.Codec))
}

// appendWriter is an io.Writer appending to a slice, for the stream
// encoders.
type appendWriter struct{ buf []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// gzipPools hold writers by level: index level+1 (0 is -1, the default).
var gzipPools [GzipLevelMax + 2]sync.Pool

func compressGzip(dst, section []byte, level int) ([]byte, error) {
	pool := &gzipPools[level+1]
	out := &appendWriter{buf: dst}
	w, _ := pool.Get().(*gzip.Writer)
	if w == nil {
		var err error
		if w, err = gzip.NewWriterLevel(out, level); err != nil {
			return dst, fmt.Errorf("records: gzip level %d: %w", level, err)
		}
	} else {
		w.Reset(out)
	}
	defer pool.Put(w)
	defer w.Reset(nil) // drop the reference to the output
	if _, err := w.Write(section); err != nil {
		return dst, fmt.Errorf("records: gzip: %w", err)
	}
	if err := w.Close(); err != nil {
		return dst, fmt.Errorf("records: gzip: %w", err)
	}
	return out.buf, nil
}

// xerialBlockSize is snappy-java's default block size.
const xerialBlockSize = 32 << 10

// compressXerial writes snappy-java's framing: the magic, version 1 and
// compatible version 1, then each block's length and raw snappy block.
func compressXerial(dst, section []byte) []byte {
	dst = append(dst, xerialMagic...)
	dst = binary.BigEndian.AppendUint32(dst, 1)
	dst = binary.BigEndian.AppendUint32(dst, 1)
	for len(section) > 0 {
		block := section[:min(len(section), xerialBlockSize)]
		section = section[len(block):]
		at := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		dst = append(dst, make([]byte, s2.MaxEncodedLen(len(block)))...)
		encoded := s2.EncodeSnappy(dst[at+4:], block)
		binary.BigEndian.PutUint32(dst[at:], uint32(len(encoded)))
		dst = dst[:at+4+len(encoded)]
	}
	return dst
}

// lz4Level maps Kafka's lz4 level to pierrec/lz4's: Kafka uses lz4-java's
// fast compressor at the default level 9 and its high compressor at the
// given level otherwise; pierrec's high levels stop at 9.
func lz4Level(level int) lz4.CompressionLevel {
	if level == LZ4LevelDefault {
		return lz4.Fast
	}
	return []lz4.CompressionLevel{lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4, lz4.Level5,
		lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}[min(level, 9)-1]
}

// lz4Pools hold writers by Kafka level (index level).
var lz4Pools [LZ4LevelMax + 1]sync.Pool

func compressLZ4(dst, section []byte, level int) ([]byte, error) {
	pool := &lz4Pools[level]
	out := &appendWriter{buf: dst}
	w, _ := pool.Get().(*lz4.Writer)
	if w == nil {
		w = lz4.NewWriter(nil)
		if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false),
			lz4.BlockChecksumOption(false), lz4.ConcurrencyOption(1), lz4.CompressionLevelOption(lz4Level(level))); err != nil {
			return dst, fmt.Errorf("records: lz4 level %d: %w", level, err)
		}
	}
	w.Reset(out)
	defer pool.Put(w)
	defer w.Reset(nil)
	if _, err := w.Write(section); err != nil {
		return dst, fmt.Errorf("records: lz4: %w", err)
	}
	if err := w.Close(); err != nil {
		return dst, fmt.Errorf("records: lz4: %w", err)
	}
	return out.buf, nil
}

// zstdEncoderPools hold encoders by klauspost's level, which groups
// zstd's levels into four (zstd.EncoderLevelFromZstd).
var zstdEncoderPools [zstd.SpeedBestCompression + 1]sync.Pool

func compressZstd(dst, section []byte, level int) ([]byte, error) {
	speed := zstd.EncoderLevelFromZstd(level)
	pool := &zstdEncoderPools[speed]
	e, _ := pool.Get().(*zstd.Encoder)
	if e == nil {
		var err error
		e, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(speed), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		if err != nil {
			return dst, fmt.Errorf("records: zstd level %d: %w", level, err)
		}
	}
	defer pool.Put(e)
	return e.EncodeAll(section, dst), nil
}

// isXerial reports whether a snappy section has snappy-java's framing.
func isXerial(section []byte) bool {
	return len(section) >= xerialHeaderSize && bytes.HasPrefix(section, xerialMagic)
}
