package records

import (
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/s2"
)

// DecompressBudget bounds, node-wide, the decompressed bytes held in
// memory at once by the work that cannot stream: a raw snappy block (the
// framing franz-go, librdkafka and Sarama write: one block for the
// section, which snappy cannot decode in parts) or a xerial block larger
// than snappyBlockKeep, and Recompress, which holds a batch's records
// decompressed, rewritten and compressed (three times the section,
// clamped to the budget). 128 MiB: two sections at DefaultLimit; a
// request for more than the budget takes all of it, so none waits for
// ever. Everything else decodes streaming, in constant memory (see
// sectionReader and the package doc).
const DecompressBudget = 2 * DefaultLimit

// decompressed is the node's DecompressBudget.
var decompressed = newBudget(DecompressBudget)

// budget is a weighted semaphore, first come first served (as
// golang.org/x/sync/semaphore, not a dependency of this module). A
// holder never waits for anything while it holds (it decodes and
// releases), so a wait lasts at most as long as the holders ahead take to
// decode the budget's bytes; acquire takes no context for that reason.
type budget struct {
	mu       sync.Mutex
	capacity int64
	used     int64
	peak     int64           // the most ever held, for tests
	waiters  []chan struct{} // FIFO; bounded by the goroutines acquiring
	wants    []int64         // what each waiter asks for
}

func newBudget(capacity int64) *budget { return &budget{capacity: capacity} }

// acquire waits until n bytes are free and takes them. n is clamped to
// the capacity, so that one holder may take all of it; it returns what it
// took, for release.
func (b *budget) acquire(n int64) int64 {
	n = min(max(n, 0), b.capacity)
	if n == 0 {
		return 0 // nothing to wait for (an uncompressed section)
	}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.capacity {
		b.take(n)
		b.mu.Unlock()
		return n
	}
	ready := make(chan struct{})
	b.waiters = append(b.waiters, ready)
	b.wants = append(b.wants, n)
	b.mu.Unlock()
	<-ready // release took n for us
	return n
}

func (b *budget) take(n int64) {
	b.used += n
	b.peak = max(b.peak, b.used)
	if b.used > b.capacity {
		panic(fmt.Sprintf("records: decompression budget over its capacity: %d of %d", b.used, b.capacity))
	}
}

// release returns n bytes and wakes the waiters, in order, that now fit.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.used < 0 {
		panic(fmt.Sprintf("records: decompression budget released %d more than held", -b.used))
	}
	for len(b.waiters) > 0 && b.used+b.wants[0] <= b.capacity {
		b.take(b.wants[0])
		close(b.waiters[0])
		b.waiters, b.wants = b.waiters[1:], b.wants[1:]
	}
}

// snappyBlockKeep is the largest snappy block a snappyStream decodes
// into its own buffer: twice snappy-java's 32 KiB block. Larger blocks
// are decoded into a buffer the budget pays for.
const snappyBlockKeep = 64 << 10

// snappyRatioMax bounds what a snappy block decodes to: every element
// of the snappy format yields at most 64 bytes for 3 (a two-byte-offset
// copy). s2.Decode accepts S2's extensions, which Kafka's snappy-java
// does not; a block claiming more is refused before anything is
// allocated for it.
const snappyRatioMax = 64.0 / 3

// snappyDecodedLen is s2.DecodedLen, refusing a length a snappy block
// of its size cannot hold.
func snappyDecodedLen(block []byte) (int, error) {
	n, err := s2.DecodedLen(block)
	if err == nil && float64(n) > snappyRatioMax*float64(len(block)) {
		return 0, fmt.Errorf("a snappy block of %d bytes cannot hold the %d it declares", len(block), n)
	}
	return n, err
}

// snappyStream reads a snappy section (xerial-framed or one raw block)
// block by block.
type snappyStream struct {
	rest     []byte // blocks not yet decoded
	xerial   bool
	rawRead  bool // the one raw block, however short, is decoded
	produced int
	limit    int
	out      []byte  // decoded bytes not yet read
	keep     []byte  // this stream's own block buffer, snappyBlockKeep bytes
	large    *[]byte // a pooled scratch buffer (scratchPool) for a larger block
	held     int64   // budget held for the large block
}

var snappyStreams = sync.Pool{New: func() any { return &snappyStream{keep: make([]byte, snappyBlockKeep)} }}

func (s *snappyStream) reset(section []byte, limit int) {
	s.releaseBlock()
	s.rest, s.xerial, s.rawRead, s.produced, s.limit, s.out = section, false, section == nil, 0, limit, nil
	if isXerial(section) {
		s.rest, s.xerial = section[xerialHeaderSize:], true
	}
}

func (s *snappyStream) releaseBlock() {
	if s.large != nil {
		if cap(*s.large) <= scratchKeepMax {
			scratchPool.Put(s.large)
		}
		s.large = nil
	}
	decompressed.release(s.held)
	s.held = 0
}

func (s *snappyStream) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		s.releaseBlock()
		if s.xerial && len(s.rest) == 0 || !s.xerial && s.rawRead {
			return 0, io.EOF
		}
		block := s.rest
		if s.xerial {
			var err error
			if block, s.rest, err = xerialBlock(s.rest); err != nil {
				return 0, err
			}
		} else {
			s.rest, s.rawRead = nil, true
		}
		n, err := snappyDecodedLen(block)
		if err != nil {
			return 0, err
		}
		if n > s.limit-s.produced {
			return 0, errTooLarge
		}
		buf := s.keep
		if n > len(s.keep) {
			s.held = decompressed.acquire(int64(n))
			s.large = scratchPool.Get().(*[]byte)
			*s.large = slices.Grow((*s.large)[:0], n)
			buf = *s.large
		}
		if s.out, err = s2.Decode(buf[:n], block); err != nil {
			return 0, err
		}
		s.produced += n
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}
