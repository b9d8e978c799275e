package netio

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRequestMemoryReserve(t *testing.T) {
	var gauge float64
	m := newRequestMemory(100, func(v float64) { gauge = v })
	if err := m.reserve(context.Background(), 101); !errors.Is(err, errRequestMemory) {
		t.Fatalf("a reservation over the budget: %v, want errRequestMemory", err)
	}
	if err := m.reserve(context.Background(), 70); err != nil {
		t.Fatal(err)
	}
	if gauge != 70 {
		t.Fatalf("gauge %v, want 70", gauge)
	}
	got := make(chan error, 1)
	go func() { got <- m.reserve(context.Background(), 40) }()
	waitFor(t, "the second reservation to wait", func() bool { _, waiting := m.state(); return waiting == 1 })
	m.release(70)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if used, waiting := m.state(); used != 40 || waiting != 0 || gauge != 40 {
		t.Fatalf("used %d, waiting %d, gauge %v; want 40, 0, 40", used, waiting, gauge)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { got <- m.reserve(ctx, 61) }()
	waitFor(t, "the third reservation to wait", func() bool { _, waiting := m.state(); return waiting == 1 })
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v", err)
	}
	if used, _ := m.state(); used != 40 {
		t.Fatalf("used %d after a cancelled wait, want 40", used)
	}
}

// waitFor polls cond until it holds, for at most 20 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-poll.C
	}
}

// queued.max.request.bytes: a frame's declared size is held from the
// budget while it is read and served; a connection whose frame does not
// fit waits unread until the memory is given back, and a frame larger
// than the whole budget is refused.
func TestRequestMemoryBoundsFrames(t *testing.T) {
	const budget = 1 << 20
	mem := newMemBackend()
	server, addr := startServerOf(t, Config{Backend: mem, QueuedMaxRequestBytes: budget, MaxRequestBytes: 2 << 20}, mem)
	gauge := func() float64 { return testutil.ToFloat64(server.connMetrics.queuedBytes) }

	// A frame declaring most of the budget, half sent.
	big := dialFrom(t, "127.0.0.2", addr)
	const declared = budget - 16
	head := binary.BigEndian.AppendUint32(nil, declared)
	if _, err := big.Write(append(head, make([]byte, declared/2)...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the frame's reservation", func() bool { return gauge() == declared })

	// A small request does not fit: it waits, unanswered, until the big
	// frame's connection is gone.
	small := dialFrom(t, "127.0.0.3", addr)
	answered := make(chan error, 1)
	go func() { answered <- apiVersions(small, 30*time.Second) }()
	waitFor(t, "the small request to wait", func() bool { _, waiting := server.memory.state(); return waiting == 1 })
	big.Close()
	if err := <-answered; err != nil {
		t.Fatalf("the waiting request once memory was free: %v", err)
	}
	waitFor(t, "the memory given back", func() bool { return gauge() == 0 })

	// Larger than the whole budget: refused at once.
	huge := dialFrom(t, "127.0.0.4", addr)
	if _, err := huge.Write(binary.BigEndian.AppendUint32(nil, budget+1)); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, huge, 10*time.Second)
	if used, waiting := server.memory.state(); used != 0 || waiting != 0 {
		t.Fatalf("used %d, waiting %d after the refused frame", used, waiting)
	}
}

// The buffers of large frames are kept for the next ones, within the
// budget: a second wave of large frames reuses the first's memory rather
// than allocating its own beside the first's garbage.
func TestRequestMemoryKeepsLargeBuffers(t *testing.T) {
	ctx := context.Background()
	m := newRequestMemory(100, nil)
	first, err := m.take(ctx, 60, true)
	if err != nil || len(first) != 60 {
		t.Fatalf("take 60: %d bytes, %v", len(first), err)
	}
	m.giveBuffer(first)
	second, err := m.take(ctx, 50, true)
	if err != nil || len(second) != 50 || &second[0] != &first[0] {
		t.Fatalf("take 50 after giving back 60: not the kept buffer (%d bytes, %v)", len(second), err)
	}
	if used, _ := m.state(); used != 60 {
		t.Fatalf("used %d, want the kept buffer's whole 60", used)
	}
	m.giveBuffer(second)
	// 70 does not fit beside the kept 60: the kept buffer goes.
	third, err := m.take(ctx, 70, true)
	if err != nil || len(third) != 70 || &third[0] == &first[0] {
		t.Fatalf("take 70: %d bytes, %v, reused %v", len(third), err, &third[0] == &first[0])
	}
	if used, _ := m.state(); used != 70 || m.keptSum != 0 {
		t.Fatalf("used %d, kept %d; want 70, 0", used, m.keptSum)
	}
}
