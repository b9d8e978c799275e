package records

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/mirrord/mirrord/recordbatch"
)

// A sectionReader walks the records of a batch as its codec decompresses
// them, holding at most streamBufferSize bytes of the records section,
// so that validating a batch takes the codec's state and this buffer
// whatever the records decompress to (Kafka's LogValidator does the same
// with a skip buffer). An uncompressed section is read in place.
//
// A record that fits in the buffer is parsed by cursor.record, as Iter
// does; a larger one field by field, its key, value and header bytes
// skipped as they stream past. Errors are Iter's and Decompress's, with
// the same texts: as Decompress reads a section whole before Iter parses
// it, a decompression error or ErrTooLarge found anywhere in the section
// wins over a malformed record, and an error names the section's length.
// So on a malformed record the reader drains the rest of the section
// (bounded by the limit, without holding it) before it answers.
type sectionReader struct {
	b     recordbatch.Batch
	src   io.Reader // the codec's reader; nil when buf is the whole section
	own   []byte    // this reader's buffer, streamBufferSize bytes
	buf   []byte    // own, or the uncompressed section; unread: buf[start:end]
	start int
	end   int
	// position is the section offset of buf[start]; produced counts the
	// bytes the codec has produced so far, at most limit.
	position int
	produced int
	limit    int
	eof      bool  // src is exhausted, or there is no src
	codecErr error // the codec failed (or errTooLarge): the section is unreadable

	index  int          // records read so far
	record streamRecord // the record next read
	// The first malformed record: its start, its end as its length
	// declares (-1 before the length is read), and the cursor's failure.
	failed       bool
	failedStart  int
	failedEnd    int64
	failedLength int32
	failure      cursor
}

// streamRecord is a record as the validator needs it: its key only when
// it fits in the buffer (a control record's four bytes always do), else
// its lengths.
type streamRecord struct {
	attributes     int8
	timestampDelta int64
	offsetDelta    int32
	keyNull        bool
	keyLength      int    // 0 when null
	valueLength    int    // 0 when null
	key            []byte // the key's bytes, nil when null or not held
	keyHead        [controlKeySize]byte
}

// streamBufferSize is the window of section bytes a sectionReader holds:
// records up to this size (nearly all) are parsed in place.
const streamBufferSize = 64 << 10

// ZstdWindowMax bounds the window of a zstd frame this node decodes
// streaming (zstd.WithDecoderMaxWindow), and so a zstd decoder's memory
// (the window plus two 128 KiB blocks), whatever a frame's header
// declares: 8 MiB, the largest window libzstd uses at levels 1 to 19
// (windowLog 23) and klauspost's encoders' default. A frame declaring
// more (libzstd's "ultra" levels 20 to 22, with inputs past 8 MiB) is
// refused with ErrTooLarge. Below an 8 MiB limit the window is bounded
// by the limit rounded up to a power of two, as Decompress bounds it.
const ZstdWindowMax = 8 << 20

const zstdWindowLogMax = 23 // log2(ZstdWindowMax)

var sectionReaders = sync.Pool{New: func() any { return &sectionReader{own: make([]byte, streamBufferSize)} }}

// zstdStreams are streaming zstd decoders by the log2 k of their window
// bound, min(ZstdWindowMax, the limit rounded up to a power of two) (see
// zstdPools). WithDecoderConcurrency(1) decodes in the calling goroutine;
// the ring a decoder keeps is at most its window plus two blocks.
var zstdStreams [zstdWindowLogMax + 1]sync.Pool

// zstdStream is a streaming zstd decoder with the reader of its input.
type zstdStream struct {
	inner *zstd.Decoder
	src   bytes.Reader
	pool  *sync.Pool
}

func zstdStreamFor(limit int) *zstdStream {
	k := max(min(bits.Len(uint(limit-1)), zstdWindowLogMax), 10) // zstd's least window is 1 KiB
	pool := &zstdStreams[k]
	if d, ok := pool.Get().(*zstdStream); ok {
		return d
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(uint64(1)<<k), zstd.WithDecodeBuffersBelow(0))
	if err != nil {
		panic(fmt.Sprintf("records: zstd decoder options: %v", err)) // the options are valid for every k
	}
	return &zstdStream{inner: d, pool: pool}
}

func (d *zstdStream) Read(p []byte) (int, error) { return d.inner.Read(p) }

// openSection returns a reader of b's records section, decompressing at
// most limit bytes (normalized as Decompress does). b's framing must have
// been checked (checkFraming). Release it with close.
func openSection(b recordbatch.Batch, limit int) *sectionReader {
	r := sectionReaders.Get().(*sectionReader)
	r.open(b, limit)
	return r
}

// open starts r on b's records section, with r's own buffer.
func (r *sectionReader) open(b recordbatch.Batch, limit int) {
	*r = sectionReader{b: b, own: r.own, buf: r.own, limit: normalizeLimit(limit)}
	src := b.Records()
	switch b.Codec() {
	case recordbatch.CodecNone:
		r.buf, r.end, r.eof = src, len(src), true
		r.produced = len(src)
		if len(src) > r.limit {
			r.codecErr = errTooLarge
		}
	case recordbatch.CodecGzip:
		d := gzipPool.Get().(*gzipDecoder)
		d.src.Reset(src)
		if err := d.inner.Reset(&d.src); err != nil {
			r.codecErr = err
		}
		r.src = d
	case recordbatch.CodecLZ4:
		d := lz4Pool.Get().(*lz4Decoder)
		d.src.Reset(src)
		d.inner.Reset(&d.src)
		r.src = d
	case recordbatch.CodecZstd:
		d := zstdStreamFor(r.limit)
		d.src.Reset(src)
		r.codecErr = d.inner.Reset(&d.src)
		r.src = d
	case recordbatch.CodecSnappy:
		s := snappyStreams.Get().(*snappyStream)
		s.reset(src, r.limit)
		r.src = s
	}
	if r.codecErr != nil {
		r.eof = true
	}
}

// close returns the reader and its codec to their pools, dropping every
// reference to the batch.
func (r *sectionReader) close() {
	switch d := r.src.(type) {
	case *gzipDecoder:
		d.src.Reset(nil)
		gzipPool.Put(d)
	case *lz4Decoder:
		d.inner.Reset(nil)
		lz4Pool.Put(d)
	case *zstdStream:
		_ = d.inner.Reset(nil)
		d.src.Reset(nil)
		d.pool.Put(d)
	case *snappyStream:
		d.reset(nil, 0)
		snappyStreams.Put(d)
	}
	*r = sectionReader{own: r.own}
	sectionReaders.Put(r)
}

// gzipDecoder and lz4Decoder read their codec's output.
func (d *gzipDecoder) Read(p []byte) (int, error) { return d.inner.Read(p) }
func (d *lz4Decoder) Read(p []byte) (int, error)  { return d.inner.Read(p) }

func (r *sectionReader) available() int { return r.end - r.start }

// fill reads from the codec until want bytes are buffered, the buffer is
// full, or the section ends. Every Read either makes progress or ends the
// loop, except a Read returning (0, nil), which io.Reader allows but is
// bounded here.
func (r *sectionReader) fill(want int) {
	if r.eof || r.available() >= want {
		return
	}
	if r.start > 0 {
		r.end = copy(r.buf, r.buf[r.start:r.end])
		r.start = 0
	}
	const emptyReadsMax = 100
	for emptyReads := 0; r.end < min(want, len(r.buf)) && emptyReads < emptyReadsMax; {
		n, err := r.src.Read(r.buf[r.end:])
		r.end += n
		r.produced += n
		switch {
		case r.produced > r.limit:
			r.codecErr, r.eof = errTooLarge, true
			return
		case err == io.EOF:
			r.eof = true
			return
		case err != nil:
			r.codecErr, r.eof = err, true
			return
		case n == 0:
			emptyReads++
		}
	}
	if r.end < min(want, len(r.buf)) {
		r.codecErr, r.eof = io.ErrNoProgress, true
	}
}

// advance consumes n buffered bytes.
func (r *sectionReader) advance(n int) {
	r.start += n
	r.position += n
}

// skip consumes n section bytes, buffered or not; false if the section
// ends first.
func (r *sectionReader) skip(n int) bool {
	for n > 0 {
		if r.available() == 0 {
			r.fill(1)
			if r.available() == 0 {
				return false
			}
		}
		k := min(n, r.available())
		r.advance(k)
		n -= k
	}
	return true
}

// next reads the next record into r.record; false at the end of the
// section, a malformed record or a codec error (see err).
func (r *sectionReader) next() bool {
	if r.failed || r.codecErr != nil {
		return false
	}
	r.fill(5) // a length
	if r.available() == 0 {
		return false
	}
	start := r.position
	if r.eof { // all the section is buffered (always, uncompressed)
		return r.parse(start)
	}
	head := cursor{buf: r.buf[r.start:r.end]}
	length := head.varint("length")
	if head.failed() {
		return r.fail(start, -1, -1, head)
	}
	size := head.pos + int(max(length, 0))
	if size > r.available() && size <= len(r.buf) {
		r.fill(size)
	}
	if size <= r.available() || r.eof {
		return r.parse(start)
	}
	if r.codecErr != nil {
		return false
	}
	r.advance(head.pos)
	return r.large(start, length)
}

// parse reads a record that is whole in the buffer, or runs past all the
// section, which is: as Iter does (a length past the section fails
// there).
func (r *sectionReader) parse(start int) bool {
	c := cursor{buf: r.buf[r.start:r.end]}
	var record Record
	if !c.record(&record) {
		// The end a length declares matters only for a record larger
		// than the buffer (see finish): here the section is all read.
		return r.fail(start, -1, -1, c)
	}
	r.record = streamRecord{attributes: record.Attributes, timestampDelta: record.TimestampDelta, offsetDelta: record.OffsetDelta,
		keyNull: record.Key == nil, keyLength: len(record.Key), valueLength: len(record.Value), key: record.Key}
	r.advance(c.pos)
	r.index++
	return true
}

// fail records the first malformed record and ends the walk.
// end is the record's end as its length (-1 when unread) declares.
func (r *sectionReader) fail(start int, length int32, end int64, c cursor) bool {
	r.failed, r.failedStart, r.failedLength, r.failedEnd = true, start, length, end
	r.failure = cursor{field: c.field, why: c.why, value: c.value}
	return false
}

// large reads a record longer than the buffer, whose length field is
// consumed: the checks of cursor.record, field by field, in its order
// and words, skipping the bytes of keys, values and headers.
func (r *sectionReader) large(start int, length int32) bool {
	end := int64(r.position) + int64(length)
	rest := int(length)
	// field reads with a cursor over the buffered part of the record.
	field := func(want int, read func(c *cursor)) bool {
		r.fill(min(rest, want))
		c := cursor{buf: r.buf[r.start : r.start+min(rest, r.available())]}
		read(&c)
		if c.failed() {
			return r.fail(start, length, end, c)
		}
		r.advance(c.pos)
		rest -= c.pos
		return true
	}
	// skipField skips a field of n bytes (null when n < 0 and nullable).
	skipField := func(name string, n int32, nullable bool) bool {
		if n < 0 && nullable {
			return true
		}
		if n < 0 || int(n) > rest {
			why := "length past the end of the record"
			if n < 0 {
				name, why = "header key length", "null header key"
			}
			return r.fail(start, length, end, cursor{field: name, why: why, value: int64(n)})
		}
		if !r.skip(int(n)) {
			// The section ends inside the record; finish names it.
			return r.fail(start, length, end, cursor{field: "length", why: "beyond the records section", value: int64(length)})
		}
		rest -= int(n)
		return true
	}
	record := streamRecord{}
	var keyLength, valueLength, headerCount int32
	if !field(21, func(c *cursor) {
		record.attributes = c.int8("attributes")
		record.timestampDelta = c.varlong("timestamp delta")
		record.offsetDelta = c.varint("offset delta")
		keyLength = c.varint("key")
	}) {
		return false
	}
	record.keyNull, record.keyLength = keyLength < 0, int(max(keyLength, 0))
	if keyLength >= 0 && int(keyLength) <= min(rest, controlKeySize) {
		r.fill(int(keyLength))
		if r.available() >= int(keyLength) {
			record.key = record.keyHead[:copy(record.keyHead[:], r.buf[r.start:r.start+int(keyLength)])]
		}
	}
	if !skipField("key", keyLength, true) ||
		!field(5, func(c *cursor) { valueLength = c.varint("value") }) || !skipField("value", valueLength, true) ||
		!field(5, func(c *cursor) { headerCount = c.varint("header count") }) {
		return false
	}
	record.valueLength = int(max(valueLength, 0))
	if headerCount < 0 || int(headerCount) > rest/2 {
		return r.fail(start, length, end, cursor{field: "header count", why: "out of range", value: int64(headerCount)})
	}
	for range headerCount {
		var keyLength, valueLength int32
		if !field(5, func(c *cursor) { keyLength = c.varint("header key length") }) || !skipField("header key", keyLength, false) ||
			!field(5, func(c *cursor) { valueLength = c.varint("header value") }) || !skipField("header value", valueLength, true) {
			return false
		}
	}
	if rest != 0 {
		return r.fail(start, length, end, cursor{field: "length", why: "bytes left after the headers", value: int64(rest)})
	}
	r.record = record
	r.index++
	return true
}

// finish drains the section and returns the error that ends the walk:
// the codec's (wrapping ErrTooLarge or recordbatch.ErrCorrupt, as
// Decompress words them), else the malformed record's, as Iter words it
// and validateSection wraps it, else nil. length is the section's length
// after it.
func (r *sectionReader) finish() (length int, err error) {
	for !r.eof {
		r.advance(r.available())
		r.fill(len(r.buf))
	}
	length = r.position + r.available()
	if r.codecErr != nil {
		return length, r.decompressError()
	}
	if !r.failed {
		return length, nil
	}
	failure := r.failure
	if r.failedEnd > int64(length) { // cursor.record checks this first
		failure = cursor{field: "length", why: "beyond the records section", value: int64(r.failedLength)}
	}
	return length, fmt.Errorf("records: base offset %d: %w: record %d at byte %d of %d: %s",
		r.b.BaseOffset(), recordbatch.ErrCorrupt, r.index, r.failedStart, length, failure.failure())
}

// decompressError words a codec failure as Decompress does.
func (r *sectionReader) decompressError() error {
	b, err := r.b, r.codecErr
	switch {
	case errors.Is(err, errTooLarge):
		return fmt.Errorf("records: base offset %d: %w: %s records of %d compressed bytes decompress to more than %d bytes",
			b.BaseOffset(), ErrTooLarge, b.Codec(), len(b.Records()), r.limit)
	case errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return fmt.Errorf("records: base offset %d: %w: a zstd frame's window is over the %d bytes decoded for a limit of %d",
			b.BaseOffset(), ErrTooLarge, min(ZstdWindowMax, 1<<bits.Len(uint(r.limit-1))), r.limit)
	}
	return fmt.Errorf("records: base offset %d: %w: %s decompression of %d bytes: %w",
		b.BaseOffset(), recordbatch.ErrCorrupt, b.Codec(), len(b.Records()), err)
}

// sectionSize is the length of b's records section decompressed, read
// streaming: Decompress's errors, in constant memory.
func sectionSize(b recordbatch.Batch, limit int) (int, error) {
	r := openSection(b, limit)
	defer r.close()
	return r.finish()
}
