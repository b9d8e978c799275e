package netio

// Moving record bytes from a FileRange to a client. On a TCP connection
// with a RangeFile that has a descriptor the kernel copies them with
// sendfile(2), on the socket's own descriptor through syscall.RawConn (the
// runtime poller waits whenever the socket buffer is full). Elsewhere (a
// file without a descriptor, a connection that is not TCP, TLS) the
// bytes are read into the connection's write buffer and written from
// there.
//
// The frame length was sent before the bytes, so a range that turns out
// shorter than it promised (its file was truncated under it) cannot be
// answered correctly any more: the copy fails with errShortRange and the
// connection is closed. Wrong bytes are never sent.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// errShortRange marks a FileRange whose file ended before its Length.
var errShortRange = errors.New("netio: file range shorter than announced")

// noFd is RangeFile.Fd's answer when there is no descriptor.
const noFd = ^uintptr(0)

// sendfileCallBytesMax bounds one sendfile call (Linux moves at most
// 0x7ffff000 bytes per call anyway).
const sendfileCallBytesMax = 1 << 30

// fetchTransferStats counts how record bytes left the server.
type fetchTransferStats struct {
	sendfileBytes atomic.Int64 // moved by sendfile
	copiedBytes   atomic.Int64 // read into memory and written
}

// writeFileRange writes r's bytes to c after what c.w holds.
func writeFileRange(c *conn, r FileRange, stats *fetchTransferStats) error {
	if r.Length == 0 {
		return nil
	}
	if tcp, ok := c.nc.(*net.TCPConn); ok && r.File.Fd() != noFd {
		if err := c.w.Flush(); err != nil {
			return err
		}
		if err := sendFileRange(tcp, r); err != nil {
			return err
		}
		stats.sendfileBytes.Add(r.Length)
		return nil
	}
	if err := copyFileRange(c.w, r); err != nil {
		return err
	}
	stats.copiedBytes.Add(r.Length)
	return nil
}

// sendFileRange sends r with sendfile on tcp's descriptor.
func sendFileRange(tcp *net.TCPConn, r FileRange) error {
	raw, err := tcp.SyscallConn()
	if err != nil {
		return fmt.Errorf("netio: sendfile: %w", err)
	}
	position, remaining := r.Position, r.Length
	fileFd := int(r.File.Fd())
	var sendErr error
	err = raw.Write(func(socket uintptr) bool {
		for remaining > 0 {
			n, err := unix.Sendfile(int(socket), fileFd, &position, int(min(remaining, sendfileCallBytesMax)))
			if n > 0 {
				remaining -= int64(n)
			}
			switch {
			case errors.Is(err, unix.EAGAIN):
				return false // the poller waits until the socket is writable
			case errors.Is(err, unix.EINTR):
			case err != nil:
				sendErr = fmt.Errorf("netio: sendfile: %w", err)
				return true
			case n <= 0:
				sendErr = fmt.Errorf("%w: %d of %d bytes missing at position %d", errShortRange, remaining, r.Length, position)
				return true
			}
		}
		return true
	})
	runtime.KeepAlive(r.File) // its descriptor must stay open until here
	if err != nil {
		return fmt.Errorf("netio: sendfile: %w", err)
	}
	return sendErr
}

// copyFileRange reads r into w's buffer and writes it: the fallback.
func copyFileRange(w *bufio.Writer, r FileRange) error {
	position, remaining := r.Position, r.Length
	for remaining > 0 {
		if w.Available() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
		buf := w.AvailableBuffer()
		buf = buf[:min(int64(cap(buf)), remaining)]
		n, err := r.File.ReadAt(buf, position)
		if n < len(buf) {
			if err == nil || errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: %d of %d bytes missing at position %d", errShortRange, remaining-int64(n), r.Length, position+int64(n))
			}
			return fmt.Errorf("netio: reading records: %w", err)
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		position += int64(n)
		remaining -= int64(n)
	}
	return nil
}
