package faultproxy

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

const testWait = 10 * time.Second

// startAnswerer serves frames: each request frame is answered by a frame
// of respSize bytes carrying its correlation ID. It ends with the test.
func startAnswerer(t *testing.T, respSize int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				for {
					frame, err := readFrame(c)
					if err != nil {
						return
					}
					resp := make([]byte, 4+respSize)
					binary.BigEndian.PutUint32(resp, uint32(respSize))
					copy(resp[4:8], frame[8:12])
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// requestFrame is a frame with key, version and correlation ID.
func requestFrame(key, version int16, correlation int32) []byte {
	frame := make([]byte, 16)
	binary.BigEndian.PutUint32(frame, 12)
	binary.BigEndian.PutUint16(frame[4:], uint16(key))
	binary.BigEndian.PutUint16(frame[6:], uint16(version))
	binary.BigEndian.PutUint32(frame[8:], uint32(correlation))
	return frame
}

func startProxy(t *testing.T, config Config, target string) *Proxy {
	t.Helper()
	p, err := Listen(config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	p.SetTarget(target)
	p.SetFaults(true)
	return p
}

// roundTrip sends one request and reads what comes back: the frame, or
// the bytes read before the connection ended and the error.
func roundTrip(t *testing.T, c net.Conn, correlation int32, respSize int) ([]byte, error) {
	t.Helper()
	c.SetDeadline(time.Now().Add(testWait))
	if _, err := c.Write(requestFrame(1, 12, correlation)); err != nil {
		return nil, err
	}
	buf := make([]byte, 4+respSize)
	n, err := io.ReadFull(c, buf)
	return buf[:n], err
}

func TestProxyFaults(t *testing.T) {
	t.Parallel()
	const respSize = 1000
	only := func(k Kind) (w [numKinds]int) { w[k] = 1; return w }
	cases := []struct {
		name  string
		plan  Plan
		check func(t *testing.T, got []byte, err error, took time.Duration)
	}{
		{"none", Plan{}, func(t *testing.T, got []byte, err error, _ time.Duration) {
			if err != nil || len(got) != 4+respSize {
				t.Errorf("got %d bytes, %v; want the whole response", len(got), err)
			}
		}},
		{"cut", Plan{EveryMin: 2, EveryMax: 2, Weights: only(Cut)}, func(t *testing.T, got []byte, err error, _ time.Duration) {
			if len(got) != 0 || !errors.Is(err, io.EOF) {
				t.Errorf("got %d bytes, %v; want nothing and EOF", len(got), err)
			}
		}},
		{"partial", Plan{EveryMin: 3, EveryMax: 3, Weights: only(Partial)}, func(t *testing.T, got []byte, err error, _ time.Duration) {
			if len(got) == 0 || len(got) >= 4+respSize || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("got %d bytes, %v; want part of the response, then the cut", len(got), err)
			}
		}},
		{"stall", Plan{EveryMin: 3, EveryMax: 3, Weights: only(Stall), StallMin: 300 * time.Millisecond, StallMax: 300 * time.Millisecond},
			func(t *testing.T, got []byte, err error, took time.Duration) {
				if err != nil || len(got) != 4+respSize || took < 300*time.Millisecond {
					t.Errorf("got %d bytes, %v after %v; want the whole response after the stall", len(got), err, took)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var observed []Exchange
			p := startProxy(t, Config{Seed: 1, Plan: tc.plan, Observe: func(e Exchange) {
				mu.Lock()
				defer mu.Unlock()
				observed = append(observed, Exchange{Conn: e.Conn, APIKey: e.APIKey, APIVersion: e.APIVersion})
			}}, startAnswerer(t, respSize))
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// Frame 0 is the request, 1 its response, 2 the second
			// request, 3 its response: EveryMin 2 faults the second
			// request, 3 its response.
			if got, err := roundTrip(t, c, 7, respSize); err != nil || len(got) != 4+respSize {
				t.Fatalf("first round trip: %d bytes, %v", len(got), err)
			}
			started := time.Now()
			got, err := roundTrip(t, c, 8, respSize)
			tc.check(t, got, err, time.Since(started))
			whole := tc.name == "none" || tc.name == "stall"
			want := map[bool]int{true: 2, false: 1}[whole]
			// The client may read the response before Observe runs:
			// poll for it. A response cut short was cut before the
			// client saw the end, so none can come later.
			deadline := time.Now().Add(testWait)
			poll := time.NewTicker(time.Millisecond)
			defer poll.Stop()
			for range 10000 {
				mu.Lock()
				n := len(observed)
				mu.Unlock()
				if n >= want || time.Now().After(deadline) {
					break
				}
				<-poll.C
			}
			mu.Lock()
			defer mu.Unlock()
			if len(observed) == 0 || (observed[0].Conn != 1 || observed[0].APIKey != 1 || observed[0].APIVersion != 12) {
				t.Errorf("observed %+v, want the first response as Fetch v12 of connection 1", observed)
			}
			if len(observed) != want {
				t.Errorf("observed %d responses, want %d (a response cut short is not observed)", len(observed), want)
			}
			stats := p.Stats()
			if tc.name != "none" && stats.Faults[tc.name] != 1 {
				t.Errorf("faults %v, want one %s", stats.Faults, tc.name)
			}
		})
	}
}

// TestProxySeedReproducesPlan: two proxies with one seed draw the same
// faults for the same frames; another seed draws others.
func TestProxySeedReproducesPlan(t *testing.T) {
	t.Parallel()
	plan := Plan{EveryMin: 0, EveryMax: 3, Weights: [numKinds]int{1, 1, 1, 1}, DelayMax: time.Second, StallMin: time.Second, StallMax: 2 * time.Second}
	draw := func(seed uint64) []fault {
		p, err := Listen(Config{Seed: seed, Plan: plan})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		p.SetFaults(true)
		var out []fault
		for i := range 200 {
			out = append(out, p.next(100+i))
		}
		return out
	}
	a, b, c := draw(5), draw(5), draw(6)
	same := func(x, y []fault) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Errorf("seed 5 drew two plans")
	}
	if same(a, c) {
		t.Errorf("seeds 5 and 6 drew one plan")
	}
	faults := 0
	for _, f := range a {
		if !f.none {
			faults++
		}
	}
	if faults < 200/4 {
		t.Errorf("%d faults in 200 frames, want at least one every 4", faults)
	}
}
