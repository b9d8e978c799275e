package netio

// Request memory, bounded node-wide as Kafka's memory pool bounds it
// (queued.max.request.bytes): a connection reserves the size its frame
// declares before it reads the body, and gives it back when the request
// has been answered. A connection whose frame cannot have its bytes yet
// waits, reading nothing more (Kafka mutes it), until another request
// gives memory back; a frame larger than the whole budget is refused.
//
// Unlike Kafka's pool (non-strict: one allocation may overshoot what is
// left), the reservation is strict, so the bytes of request frames held
// at once never pass the budget: that is the first term of the node's
// memory ceiling (MemoryCeiling, README "Memory").

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// DefaultQueuedMaxRequestBytes is queued.max.request.bytes when unset:
// 256 MiB. Kafka's default, -1, is unbounded; here it must not be. It is
// at least socket.request.max.bytes (100 MiB, as Kafka requires), so two
// of the largest frames fit at once and every smaller request beside
// them, and it is small next to the memory of a machine that keeps a
// mirror.
const DefaultQueuedMaxRequestBytes = 256 << 20

// errRequestMemory is a frame declaring more bytes than the whole
// request budget: it could never be read, so the connection is closed.
var errRequestMemory = errors.New("netio: frame larger than queued.max.request.bytes")

// requestMemory is the node's budget of request bytes. It also keeps the
// buffers of frames larger than a connection keeps (keptBufferBytes) once
// their requests are done, for the next large frame: dropped, they would
// be garbage the collector frees only later (under serve's GOGC of 400,
// up to four times the live heap later), and a second wave of large
// frames would allocate anew (issue 19: 1.5 GB, then 3.2 GB). Kept
// buffers count against the budget too, and are dropped when a frame
// needs their room.
type requestMemory struct {
	budget int64
	gauge  func(float64) // mirrord_request_queue_bytes; nil: none

	mu      sync.Mutex
	used    int64         // bytes reserved by requests
	kept    [][]byte      // large buffers of finished requests
	keptSum int64         // their capacity
	waiting int           // connections waiting for memory (muted)
	freed   chan struct{} // closed (and replaced) when bytes are released
}

func newRequestMemory(budget int64, gauge func(float64)) *requestMemory {
	return &requestMemory{budget: budget, gauge: gauge, freed: make(chan struct{})}
}

// reserve takes n bytes of the budget, waiting until they are free or
// ctx is done.
func (m *requestMemory) reserve(ctx context.Context, n int64) error {
	_, err := m.take(ctx, n, false)
	return err
}

// take reserves n bytes of the budget, waiting until they are free or ctx
// is done; with buffer, it returns a buffer of length n too, a kept one
// when one is large enough (its whole capacity is then reserved: give it
// back with giveBuffer).
func (m *requestMemory) take(ctx context.Context, n int64, buffer bool) ([]byte, error) {
	if n > m.budget {
		return nil, fmt.Errorf("%w: frame size %d, queued.max.request.bytes %d", errRequestMemory, n, m.budget)
	}
	for {
		m.mu.Lock()
		if buffer {
			if buf, ok := m.reuse(n); ok {
				m.mu.Unlock()
				return buf, nil
			}
		}
		for m.used+m.keptSum+n > m.budget && len(m.kept) > 0 {
			m.drop()
		}
		if m.used+n <= m.budget {
			m.used += n
			m.report()
			m.mu.Unlock()
			if !buffer {
				return nil, nil
			}
			return make([]byte, n), nil
		}
		freed := m.freed
		m.waiting++
		m.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
		}
		m.mu.Lock()
		m.waiting--
		m.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// reuse hands out the smallest kept buffer of at least n bytes; m.mu is
// held.
func (m *requestMemory) reuse(n int64) ([]byte, bool) {
	best := -1
	for i, buf := range m.kept {
		if int64(cap(buf)) >= n && (best < 0 || cap(buf) < cap(m.kept[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil, false
	}
	buf := m.kept[best]
	m.kept = append(m.kept[:best], m.kept[best+1:]...)
	m.keptSum -= int64(cap(buf))
	m.used += int64(cap(buf))
	m.report()
	return buf[:n], true
}

// drop lets the largest kept buffer go; m.mu is held.
func (m *requestMemory) drop() {
	largest := 0
	for i, buf := range m.kept {
		if cap(buf) > cap(m.kept[largest]) {
			largest = i
		}
	}
	m.keptSum -= int64(cap(m.kept[largest]))
	m.kept = append(m.kept[:largest], m.kept[largest+1:]...)
}

// giveBuffer gives back a buffer from take and the bytes it holds, and
// keeps the buffer for the next large frame.
func (m *requestMemory) giveBuffer(buf []byte) {
	m.mu.Lock()
	m.used -= int64(cap(buf))
	m.kept = append(m.kept, buf[:0])
	m.keptSum += int64(cap(buf))
	m.released()
	m.mu.Unlock()
}

// release gives n reserved bytes back and wakes the waiting connections.
func (m *requestMemory) release(n int64) {
	if n == 0 {
		return
	}
	m.mu.Lock()
	m.used -= n
	m.released()
	m.mu.Unlock()
}

// released reports the bytes given back and wakes the waiting
// connections; m.mu is held.
func (m *requestMemory) released() {
	if m.used < 0 {
		panic("netio: request memory released more than reserved")
	}
	m.report()
	close(m.freed)
	m.freed = make(chan struct{})
}

// state is the bytes reserved now and the connections waiting for more.
func (m *requestMemory) state() (used int64, waiting int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used, m.waiting
}

// report sets the gauge; m.mu is held.
func (m *requestMemory) report() {
	if m.gauge != nil {
		m.gauge(float64(m.used))
	}
}

// Per-connection memory outside the budget, the second term of the
// ceiling: the response writer's buffer, the request and response
// buffers a connection keeps between requests (keptBufferBytes each) and
// its goroutine's stack.
const (
	writeBufferBytes = 64 << 10
	// keptBufferBytes is the largest request or response buffer a
	// connection keeps for its next request; a larger one is dropped
	// once answered.
	keptBufferBytes = 64 << 10
	// connectionStackBytes is what a connection's goroutine stack is
	// allowed for in the ceiling (Go grows stacks on demand; a request's
	// handlers stay well under it).
	connectionStackBytes = 64 << 10
	// ConnectionFixedBytes is one connection's memory outside the request
	// budget.
	ConnectionFixedBytes = writeBufferBytes + 2*keptBufferBytes + connectionStackBytes
)

// BaseMemoryBytes is the node's memory before any request: the Go
// runtime, the engine's tables and mapped indexes of a node with a few
// hundred partitions, as measured (an idle node is 14-40 MB RSS).
const BaseMemoryBytes = 128 << 20

// MemoryCeiling is the node's memory ceiling for cfg (README "Memory"):
//
//	queued.max.request.bytes
//	+ max.connections x (ConnectionFixedBytes + perRequestDecompression)
//	+ BaseMemoryBytes
//
// perRequestDecompression is what validating one produce request may hold
// beyond its frame (its decompressed records); one request is in flight
// per connection, so there are at most max.connections of them.
func MemoryCeiling(cfg Config, perRequestDecompression int64) int64 {
	cfg = cfg.WithDefaults()
	return cfg.QueuedMaxRequestBytes + int64(cfg.MaxConnections)*(ConnectionFixedBytes+perRequestDecompression) + BaseMemoryBytes
}
