package faultproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

const (
	// FrameBytesMax bounds one frame; a larger size cuts the connection.
	FrameBytesMax = 256 << 20
	// InFlightMax bounds the requests of one connection awaiting a
	// response; more cut the connection.
	InFlightMax = 1024
	// ConnsMax bounds the live client connections; more are refused.
	ConnsMax = 256
	// dialWait bounds the dial to the target.
	dialWait = 5 * time.Second
)

// ErrClosed is returned by Listen's proxy methods once it is closed.
var ErrClosed = errors.New("faultproxy: closed")

// Kind is a fault.
type Kind int

const (
	// Cut closes both ends before the frame.
	Cut Kind = iota
	// Partial forwards a seeded prefix of the frame (at least one byte,
	// not all of it), then closes both ends.
	Partial
	// Delay holds the frame for a seeded time up to Plan.DelayMax, then
	// forwards it.
	Delay
	// Stall forwards nothing in the frame's direction for a seeded time in
	// [Plan.StallMin, Plan.StallMax], socket open, then the frame.
	Stall
	numKinds
)

func (k Kind) String() string {
	switch k {
	case Cut:
		return "cut"
	case Partial:
		return "partial"
	case Delay:
		return "delay"
	case Stall:
		return "stall"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Plan is how often and how the proxy breaks frames. The zero Plan
// injects nothing.
type Plan struct {
	// EveryMin and EveryMax bound the frames between two faults; 0 for
	// EveryMax: no faults.
	EveryMin, EveryMax int
	// Weights are the relative odds of each Kind (indexed by Kind).
	Weights [numKinds]int
	// DelayMax bounds a Delay; StallMin and StallMax bound a Stall.
	DelayMax, StallMin, StallMax time.Duration
}

// Direction is the way a frame travels.
type Direction int

const (
	ToTarget Direction = iota // a request, client to target
	ToClient                  // a response, target to client
)

// Exchange is a response forwarded whole, with its request's key and
// version. Response is the frame after the size: the correlation ID, the
// header's tagged fields when flexible, and the body; it is valid only
// during the Observe call.
type Exchange struct {
	Conn       int // the connection's number, from 1 in accept order
	APIKey     int16
	APIVersion int16
	Response   []byte
	Forwarded  time.Time // when its last byte was written to the client
}

// Config configures a proxy.
type Config struct {
	Seed uint64
	Plan Plan
	// Observe, if set, is called with each response forwarded whole, on
	// the connection's goroutine (it holds up that connection's
	// responses while it runs).
	Observe func(Exchange)
}

// Stats counts what the proxy did.
type Stats struct {
	Conns          int            // connections accepted
	Frames         [2]int64       // frames forwarded whole, by Direction
	Bytes          [2]int64       // bytes forwarded, by Direction (partial frames included)
	Faults         map[string]int // by Kind name
	StalledFor     time.Duration  // the sum of stalls and delays
	Holding        int            // delays and stalls under way (they outlast SetFaults(false))
	LastFaultEnded time.Time      // when the last fault ended (a cut: when it cut)
}

// Proxy forwards loopback connections to a target with faults.
type Proxy struct {
	ln     net.Listener
	config Config
	done   chan struct{} // closed when the accept loop has returned
	closed chan struct{} // closed by Close: waits end at once

	mu        sync.Mutex
	target    string // "": refuse connections
	faulting  bool
	random    *rand.Rand
	untilNext int // frames until the next fault
	stats     Stats
	conns     map[*conn]struct{}
	wg        sync.WaitGroup
	shut      bool
}

// Listen starts a proxy on a free loopback port, with no target and
// faults off.
func Listen(config Config) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{ln: ln, config: config, done: make(chan struct{}), closed: make(chan struct{}),
		random: rand.New(rand.NewPCG(config.Seed, config.Seed^0x66617571)), conns: map[*conn]struct{}{}}
	p.stats.Faults = map[string]int{}
	p.untilNext = p.drawEvery()
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget makes target the destination of new connections ("" refuses
// them); live connections keep theirs.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

// SetFaults turns fault injection on or off; a fault under way finishes.
func (p *Proxy) SetFaults(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faulting = on
}

// Stats returns a copy of the counts.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Faults = make(map[string]int, len(p.stats.Faults))
	for k, v := range p.stats.Faults {
		s.Faults[k] = v
	}
	return s
}

// Close stops accepting, cuts every connection and waits for every
// goroutine of the proxy.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.shut {
		p.mu.Unlock()
		return ErrClosed
	}
	p.shut = true
	close(p.closed)
	p.mu.Unlock()
	err := p.ln.Close()
	<-p.done
	p.mu.Lock()
	for c := range p.conns {
		c.cut()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer close(p.done)
	for { // ends when the listener closes
		client, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue // transient (EMFILE): the next may succeed
		}
		p.mu.Lock()
		target, refuse := p.target, p.shut || len(p.conns) >= ConnsMax
		p.stats.Conns++
		number := p.stats.Conns
		p.mu.Unlock()
		if target == "" || refuse {
			client.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(client, target, number)
	}
}

// drawEvery draws the frames until the next fault; p.mu held (or not yet
// shared).
func (p *Proxy) drawEvery() int {
	plan := p.config.Plan
	if plan.EveryMax <= 0 {
		return -1
	}
	return plan.EveryMin + p.random.IntN(max(plan.EveryMax-plan.EveryMin, 0)+1)
}

// fault is what happens to one frame.
type fault struct {
	kind   Kind
	prefix int           // Partial: bytes forwarded
	wait   time.Duration // Delay, Stall
	none   bool
}

// next counts one frame of size bytes and decides its fault.
func (p *Proxy) next(size int) fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.faulting || p.untilNext < 0 {
		return fault{none: true}
	}
	if p.untilNext > 0 {
		p.untilNext--
		return fault{none: true}
	}
	p.untilNext = p.drawEvery()
	plan := p.config.Plan
	total := 0
	for _, w := range plan.Weights {
		total += w
	}
	if total <= 0 {
		return fault{none: true}
	}
	pick := p.random.IntN(total)
	f := fault{kind: Cut}
	for k, w := range plan.Weights {
		if pick < w {
			f.kind = Kind(k)
			break
		}
		pick -= w
	}
	switch f.kind {
	case Partial:
		if size < 2 {
			f.kind = Cut
		} else {
			f.prefix = 1 + p.random.IntN(size-1)
		}
	case Delay:
		f.wait = time.Duration(p.random.Int64N(int64(plan.DelayMax) + 1))
		p.stats.Holding++
	case Stall:
		f.wait = plan.StallMin + time.Duration(p.random.Int64N(int64(plan.StallMax-plan.StallMin)+1))
		p.stats.Holding++
	}
	p.stats.Faults[f.kind.String()]++
	return f
}

// faultEnded notes the end of a fault; held: a delay or stall.
func (p *Proxy) faultEnded(waited time.Duration, held bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if held {
		p.stats.Holding--
	}
	p.stats.StalledFor += waited
	p.stats.LastFaultEnded = time.Now()
}

func (p *Proxy) forwarded(d Direction, bytes int, whole bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Bytes[d] += int64(bytes)
	if whole {
		p.stats.Frames[d]++
	}
}

// readFrame reads one frame: the 4-byte size and what it counts.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > FrameBytesMax {
		return nil, fmt.Errorf("faultproxy: frame of %d bytes, more than %d", n, FrameBytesMax)
	}
	frame := make([]byte, 4+int(n))
	copy(frame, size[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}
