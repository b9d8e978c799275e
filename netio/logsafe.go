package netio

// Logs a client cannot use against the disk: what a client sent is echoed
// into the log cut to echoMaxBytes (a client ID may be 32 KiB), and the
// messages a client can cause at will (a connection closed for a bad
// frame, a failed authentication) pass a rate limit: closeLogBurst per
// closeLogWindow, the rest counted and reported in one line when the
// next window lets a message through.

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

const (
	// echoMaxBytes bounds a client's string (a client ID, a mechanism
	// name) echoed into a log line or an error.
	echoMaxBytes = 64
	// reasonMaxBytes bounds an error logged for a client's request,
	// which may quote what the client sent.
	reasonMaxBytes = 512
)

// echo is client input for a log line: at most echoMaxBytes of it.
func echo(s string) string { return clip(s, echoMaxBytes) }

// clip is s cut to max bytes, saying how long it was when cut.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:max], len(s))
}

const (
	closeLogWindow = time.Second
	closeLogBurst  = 20
)

// logLimiter lets burst messages through per window and counts the rest.
type logLimiter struct {
	now    func() time.Time
	window time.Duration
	burst  int

	mu         sync.Mutex
	started    time.Time // the current window's start
	passed     int       // messages logged in the current window
	suppressed int       // messages dropped since the last one logged
}

func newLogLimiter(now func() time.Time, window time.Duration, burst int) *logLimiter {
	return &logLimiter{now: now, window: window, burst: burst}
}

// log logs msg at Info unless the window's burst is spent; the first
// message a new window lets through says how many were dropped before it.
func (l *logLimiter) log(log *slog.Logger, msg string, args ...any) {
	l.mu.Lock()
	now := l.now()
	if now.Sub(l.started) >= l.window {
		l.started, l.passed = now, 0
	}
	if l.passed >= l.burst {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	l.passed++
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "suppressed_before", suppressed)
	}
	log.Info(msg, args...)
}
