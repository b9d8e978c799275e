package netio

import (
	"encoding/binary"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

func TestLogLimiter(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var sink lockedBuffer
	log := slog.New(slog.NewTextHandler(&sink, nil))
	l := newLogLimiter(func() time.Time { return now }, time.Second, 3)
	for range 10 {
		l.log(log, "closing connection")
	}
	if got := strings.Count(sink.String(), "closing connection"); got != 3 {
		t.Fatalf("%d lines in one window, want the burst of 3:\n%s", got, sink.String())
	}
	now = now.Add(time.Second)
	l.log(log, "closing connection")
	lines := strings.Split(strings.TrimSpace(sink.String()), "\n")
	if last := lines[len(lines)-1]; len(lines) != 4 || !strings.Contains(last, "suppressed_before=7") {
		t.Fatalf("the next window's first line %q of %d, want suppressed_before=7", last, len(lines))
	}
	l.log(log, "closing connection")
	if last := strings.TrimSpace(sink.String()); strings.Count(last, "suppressed_before") != 1 {
		t.Fatalf("the count is reported once:\n%s", last)
	}
}

// A client that sends malformed requests with a 32,000-byte client ID
// cannot grow the log by more than a bounded line per request, nor by
// more than the burst of lines per window (issue 19: 2,000 such requests
// grew the log by 35.6 MB).
func TestMalformedRequestsLogBounded(t *testing.T) {
	var sink lockedBuffer
	frozen := time.Unix(1_800_000_000, 0)
	addr, server := startFetchServer(t, newMemBackend(), nil, func(s *Server) {
		s.log = slog.New(slog.NewTextHandler(&sink, nil))
		s.closeLog = newLogLimiter(func() time.Time { return frozen }, closeLogWindow, closeLogBurst)
	})
	clientID := strings.Repeat("x", 32000)
	const requests = 100
	for i := range requests {
		frame := binary.BigEndian.AppendUint32(nil, 0)      // the size, below
		frame = binary.BigEndian.AppendUint16(frame, 30000) // no such api key
		frame = binary.BigEndian.AppendUint16(frame, 0)
		frame = binary.BigEndian.AppendUint32(frame, uint32(i))
		frame = binary.BigEndian.AppendUint16(frame, uint16(len(clientID)))
		frame = append(frame, clientID...)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write(frame); err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Read(make([]byte, 1)); err == nil { // the server closes it
			t.Fatal("the server answered an unknown api key")
		}
		nc.Close()
	}
	// The connections' goroutines log before they are untracked.
	deadline := time.Now().Add(10 * time.Second)
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for {
		server.mu.Lock()
		open := len(server.conns)
		server.mu.Unlock()
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open", open)
		}
		<-poll.C
	}
	log := sink.String()
	lines := strings.Split(strings.TrimSpace(log), "\n")
	if len(lines) != closeLogBurst {
		t.Fatalf("%d log lines for %d malformed requests in one window, want the burst of %d", len(lines), requests, closeLogBurst)
	}
	for _, line := range lines {
		if len(line) > 1024 || strings.Contains(line, strings.Repeat("x", echoMaxBytes+1)) {
			t.Fatalf("a line of %d bytes echoes the client ID: %.200s", len(line), line)
		}
		if !strings.Contains(line, "(32000 bytes)") {
			t.Fatalf("the line does not say how long the client ID was: %.300s", line)
		}
	}
}
