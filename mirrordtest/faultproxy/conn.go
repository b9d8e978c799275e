package faultproxy

import (
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// conn is one client connection and its connection to the target.
type conn struct {
	number         int
	client, target net.Conn
	cutOnce        sync.Once

	mu       sync.Mutex
	inFlight map[int32]request // by correlation ID; at most InFlightMax
}

// request is what a response needs of its request.
type request struct{ key, version int16 }

// cut closes both ends; the copying goroutines then end.
func (c *conn) cut() {
	c.cutOnce.Do(func() {
		c.client.Close()
		c.target.Close()
	})
}

// serve dials target for client and forwards both ways until either side
// ends or a fault cuts them.
func (p *Proxy) serve(client net.Conn, target string, number int) {
	defer p.wg.Done()
	upstream, err := net.DialTimeout("tcp", target, dialWait)
	if err != nil {
		client.Close()
		return
	}
	c := &conn{number: number, client: client, target: upstream, inFlight: map[int32]request{}}
	p.mu.Lock()
	if p.shut {
		p.mu.Unlock()
		c.cut()
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	var both sync.WaitGroup
	both.Add(2)
	go func() {
		defer both.Done()
		p.pump(c, ToTarget)
	}()
	go func() {
		defer both.Done()
		p.pump(c, ToClient)
	}()
	both.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// pump forwards the frames of one direction until an error or a cut; it
// cuts the connection as it ends, so the other direction ends too.
func (p *Proxy) pump(c *conn, d Direction) {
	defer c.cut()
	from, to := c.client, c.target
	if d == ToClient {
		from, to = c.target, c.client
	}
	for { // ends with the connection: every read fails once it is cut
		frame, err := readFrame(from)
		if err != nil {
			return
		}
		if d == ToTarget && !c.noteRequest(frame) {
			return
		}
		f := p.next(len(frame))
		if !f.none {
			switch f.kind {
			case Cut:
				p.faultEnded(0, false)
				return
			case Partial:
				n, _ := to.Write(frame[:f.prefix])
				p.forwarded(d, n, false)
				p.faultEnded(0, false)
				return
			case Delay, Stall:
				if !p.wait(f.wait) {
					return
				}
				p.faultEnded(f.wait, true)
			}
		}
		n, err := to.Write(frame)
		p.forwarded(d, n, err == nil)
		if err != nil {
			return
		}
		if d == ToClient {
			p.observe(c, frame)
		}
	}
}

// wait holds a frame for d, or until Close; false after Close.
func (p *Proxy) wait(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-p.closed:
		return false
	}
}

// noteRequest records a request's key and version under its correlation
// ID; false (cut the connection) on a frame too short to be a request or
// too many requests in flight.
func (c *conn) noteRequest(frame []byte) bool {
	if len(frame) < 12 { // size, key, version, correlation ID
		return false
	}
	key := int16(binary.BigEndian.Uint16(frame[4:]))
	version := int16(binary.BigEndian.Uint16(frame[6:]))
	correlation := int32(binary.BigEndian.Uint32(frame[8:]))
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.inFlight) >= InFlightMax {
		return false
	}
	c.inFlight[correlation] = request{key, version}
	return true
}

// observe hands a response forwarded whole to Config.Observe.
func (p *Proxy) observe(c *conn, frame []byte) {
	if len(frame) < 8 {
		return
	}
	correlation := int32(binary.BigEndian.Uint32(frame[4:]))
	c.mu.Lock()
	req, ok := c.inFlight[correlation]
	delete(c.inFlight, correlation)
	c.mu.Unlock()
	if !ok || p.config.Observe == nil {
		return
	}
	p.config.Observe(Exchange{Conn: c.number, APIKey: req.key, APIVersion: req.version, Response: frame[4:], Forwarded: time.Now()})
}
