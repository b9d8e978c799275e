package netio

// Reading a request within bounds of memory and time. Between requests a
// connection waits at most connections.max.idle.ms for the first byte of
// the next one, then is closed as idle. Once a frame has begun, the rest
// of it must arrive within Config.FrameReadTimeout, wherever the client
// pauses (a frame dribbled a byte at a time is closed). Before its body
// is read the frame's declared size is reserved from the node's request
// memory (request_memory.go); while that waits the connection reads
// nothing, and the wait does not count against the client's time.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

var (
	// errIdle closes a connection that sent no request within
	// connections.max.idle.ms.
	errIdle = errors.New("netio: connection idle")
	// errFrameTimeout closes a connection whose frame did not arrive whole
	// within the frame read timeout.
	errFrameTimeout = errors.New("netio: frame not complete in time")
)

// readSized reads one size-prefixed frame or token into c.frame, its size
// checked by size, its bytes reserved from the request memory until
// c.requestDone.
func (c *conn) readSized(ctx context.Context, size func([4]byte) (int32, error)) error {
	cfg := &c.server.cfg
	var prefix [4]byte
	idle := time.Time{}
	if cfg.ConnectionsMaxIdle > 0 {
		idle = time.Now().Add(cfg.ConnectionsMaxIdle)
	}
	if err := c.nc.SetReadDeadline(idle); err != nil {
		return err
	}
	if _, err := io.ReadFull(c.nc, prefix[:1]); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("%w: no request in %v (connections.max.idle.ms)", errIdle, cfg.ConnectionsMaxIdle)
		}
		return err
	}
	if err := c.readWithin(prefix[1:], cfg.FrameReadTimeout); err != nil {
		return err
	}
	n, err := size(prefix)
	if err != nil {
		return err
	}
	if n <= keptBufferBytes { // read into the connection's own buffer
		if err := c.server.memory.reserve(ctx, int64(n)); err != nil {
			return err
		}
		c.reserved = int64(n)
		c.frame = frameBuffer(c.own, n)
		c.own = c.frame
	} else {
		buf, err := c.server.memory.take(ctx, int64(n), true)
		if err != nil {
			return err
		}
		c.frame, c.large = buf, true
	}
	return c.readWithin(c.frame, cfg.FrameReadTimeout)
}

// readWithin fills buf from the connection within timeout.
func (c *conn) readWithin(buf []byte, timeout time.Duration) error {
	if err := c.nc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	read, err := io.ReadFull(c.nc, buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %d bytes of the frame missing after %v", errFrameTimeout, len(buf)-read, timeout)
	}
	return err
}

// requestDone gives the request's bytes back to the request memory (and
// a large frame's buffer with them), and drops a response buffer too
// large to keep.
func (c *conn) requestDone() {
	if c.large {
		c.server.memory.giveBuffer(c.frame)
		c.large = false
	}
	c.frame = nil
	c.server.memory.release(c.reserved)
	c.reserved = 0
	if cap(c.out) > keptBufferBytes {
		c.out = nil
	}
}
