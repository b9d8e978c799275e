package netio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// dialFrom connects to addr from the loopback address ip (127.0.0.2, ...),
// as a client on another host would.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	nc, err := dialer.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", ip, err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// apiVersions sends an ApiVersions request on nc and reads its answer
// within timeout: nil when the connection is served.
func apiVersions(nc net.Conn, timeout time.Duration) error {
	if err := nc.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "connections-test", "1"
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("connections-test")).AppendRequest(nil, req, 7)
	if _, err := nc.Write(frame); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, body); err != nil {
		return err
	}
	if len(body) < 4 || binary.BigEndian.Uint32(body) != 7 {
		return fmt.Errorf("response % x is not the answer to correlation ID 7", body[:min(len(body), 8)])
	}
	return nil
}

// closedWithin waits up to timeout for the server to close nc (a read
// returning EOF or a reset) and says how long that took.
func closedWithin(t *testing.T, nc net.Conn, timeout time.Duration) time.Duration {
	t.Helper()
	started := time.Now()
	if err := nc.SetReadDeadline(started.Add(timeout)); err != nil {
		t.Fatal(err)
	}
	var buf [64]byte
	for range 1000 { // a connection refused or closed sends nothing before EOF
		_, err := nc.Read(buf[:])
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
			return time.Since(started)
		}
		t.Fatalf("connection not closed by the server within %v: %v", timeout, err)
	}
	t.Fatalf("connection still sending after 1000 reads")
	return 0
}

func isReset(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) && !opErr.Timeout()
}

// Issue 19: 4,096 idle anonymous sockets from one host took every one of
// max.connections, and every other client was refused. With the default
// max.connections.per.ip, one host holds at most a quarter of them and a
// client elsewhere is served.
func TestIdleSocketsFromOneHostDoNotLockOthersOut(t *testing.T) {
	mem := newMemBackend()
	_, addr := startServerOf(t, Config{Backend: mem}, mem)
	const sockets = 4096
	for range sockets {
		dialFrom(t, "127.0.0.2", addr)
	}
	// Accepts are in order: the client's connection comes after every
	// idle one has been admitted or refused.
	if err := apiVersions(dialFrom(t, "127.0.0.1", addr), 30*time.Second); err != nil {
		t.Fatalf("a client after %d idle sockets from another host: %v", sockets, err)
	}
}

func TestMaxConnectionsPerIP(t *testing.T) {
	for _, tc := range []struct {
		name      string
		perIP     int
		overrides map[string]int
		dials     map[string]int // connections opened from each address
		served    map[string]int // of which the server admits
	}{
		{name: "limit", perIP: 2, dials: map[string]int{"127.0.0.2": 4, "127.0.0.3": 1}, served: map[string]int{"127.0.0.2": 2, "127.0.0.3": 1}},
		{name: "override raises and lowers", perIP: 2, overrides: map[string]int{"127.0.0.2": 3, "127.0.0.3": 1},
			dials: map[string]int{"127.0.0.2": 4, "127.0.0.3": 2, "127.0.0.4": 3}, served: map[string]int{"127.0.0.2": 3, "127.0.0.3": 1, "127.0.0.4": 2}},
		{name: "zero admits the overrides only", perIP: -1, overrides: map[string]int{"127.0.0.2": 1},
			dials: map[string]int{"127.0.0.2": 2, "127.0.0.3": 1}, served: map[string]int{"127.0.0.2": 1, "127.0.0.3": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMemBackend()
			server, addr := startServerOf(t, Config{Backend: mem, MaxConnectionsPerIP: tc.perIP, MaxConnectionsPerIPOverrides: tc.overrides}, mem)
			refused := 0
			for ip, n := range tc.dials {
				var conns []net.Conn
				for range n {
					conns = append(conns, dialFrom(t, ip, addr))
				}
				served := 0
				for _, nc := range conns {
					if apiVersions(nc, 10*time.Second) == nil {
						served++
					}
				}
				if served != tc.served[ip] {
					t.Errorf("%s: %d of %d connections served, want %d", ip, served, n, tc.served[ip])
				}
				refused += n - served
			}
			if got := testutil.ToFloat64(server.connMetrics.refused.WithLabelValues("PLAINTEXT", refusedPerIP)); got != float64(refused) {
				t.Errorf("mirrord_connections_refused_total{reason=per_ip} = %v, want %d", got, refused)
			}
			want := 0
			for _, n := range tc.served {
				want += n
			}
			if got := testutil.ToFloat64(server.connMetrics.open.WithLabelValues("PLAINTEXT")); got != float64(want) {
				t.Errorf("mirrord_connections = %v, want %d", got, want)
			}
		})
	}
}

func TestMaxConnectionsRefusalCounted(t *testing.T) {
	mem := newMemBackend()
	server, addr := startServerOf(t, Config{Backend: mem, MaxConnections: 2}, mem)
	for range 2 {
		if err := apiVersions(dialFrom(t, "127.0.0.1", addr), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	closedWithin(t, dialFrom(t, "127.0.0.2", addr), 10*time.Second)
	if got := testutil.ToFloat64(server.connMetrics.refused.WithLabelValues("PLAINTEXT", refusedMaxConnections)); got != 1 {
		t.Errorf("mirrord_connections_refused_total{reason=max_connections} = %v, want 1", got)
	}
}

func TestParseMaxConnectionsPerIPOverrides(t *testing.T) {
	for _, tc := range []struct {
		text string
		want map[string]int
		err  bool
	}{
		{text: "", want: map[string]int{}},
		{text: "127.0.0.2:5, 127.0.0.3 : 0", want: map[string]int{"127.0.0.2": 5, "127.0.0.3": 0}},
		{text: "::1:7,[fe80::1]:2", want: map[string]int{"::1": 7, "fe80::1": 2}},
		{text: "localhost:3", want: map[string]int{"127.0.0.1": 3}},
		{text: "127.0.0.2", err: true},
		{text: "127.0.0.2:x", err: true},
		{text: "127.0.0.2:-1", err: true},
	} {
		got, err := ParseMaxConnectionsPerIPOverrides(tc.text)
		if tc.err {
			if !errors.Is(err, ErrConnectionsConfig) {
				t.Errorf("%q: error %v, want ErrConnectionsConfig", tc.text, err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q: %v %v, want %v", tc.text, got, err, tc.want)
		}
	}
}

// connections.max.idle.ms: a connection that sends no request for that
// long is closed and counted; one that keeps asking stays open.
func TestIdleConnectionClosed(t *testing.T) {
	const idle = 400 * time.Millisecond
	mem := newMemBackend()
	server, addr := startServerOf(t, Config{Backend: mem, ConnectionsMaxIdle: idle}, mem)
	busy, quiet := dialFrom(t, "127.0.0.1", addr), dialFrom(t, "127.0.0.1", addr)
	if err := apiVersions(quiet, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	// busy asks every idle/4 until quiet has been closed.
	stop := make(chan struct{})
	busyErr := make(chan error, 1)
	go func() {
		ticker := time.NewTicker(idle / 4)
		defer ticker.Stop()
		for range 200 {
			if err := apiVersions(busy, 10*time.Second); err != nil {
				busyErr <- err
				return
			}
			select {
			case <-stop:
				busyErr <- nil
				return
			case <-ticker.C:
			}
		}
		busyErr <- errors.New("quiet connection not closed in 200 rounds")
	}()
	closedWithin(t, quiet, 20*time.Second)
	if since := time.Since(answered); since < idle/2 {
		t.Errorf("closed %v after its last request, before connections.max.idle.ms %v", since, idle)
	}
	close(stop)
	if err := <-busyErr; err != nil {
		t.Fatalf("the busy connection: %v", err)
	}
	if got := testutil.ToFloat64(server.connMetrics.idleClosed.WithLabelValues("PLAINTEXT")); got != 1 {
		t.Errorf("mirrord_connections_idle_closed_total = %v, want 1", got)
	}
}

// A frame that has begun must arrive whole within the frame read timeout,
// however its client paces it (issue 19: a frame could be dribbled
// forever), while other clients are served.
func TestDribbledFrameClosed(t *testing.T) {
	const timeout = time.Second
	for _, tc := range []struct {
		name  string
		first []byte // sent at once
		drip  bool   // then a byte every timeout/10
	}{
		{name: "size cut", first: []byte{0, 0}},
		{name: "body cut", first: []byte{0, 0, 0x10, 0, 0, 18, 0, 3}},
		{name: "body dribbled", first: []byte{0, 0, 0x10, 0}, drip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMemBackend()
			_, addr := startServerOf(t, Config{Backend: mem, FrameReadTimeout: timeout}, mem)
			slow, other := dialFrom(t, "127.0.0.2", addr), dialFrom(t, "127.0.0.1", addr)
			if _, err := slow.Write(tc.first); err != nil {
				t.Fatal(err)
			}
			started := time.Now()
			dripped := make(chan struct{})
			go func() {
				defer close(dripped)
				ticker := time.NewTicker(timeout / 10)
				defer ticker.Stop()
				for range 300 { // until the server closes it: 30 timeouts at most
					if !tc.drip {
						return
					}
					if _, err := slow.Write([]byte{0}); err != nil {
						return
					}
					<-ticker.C
				}
			}()
			if err := apiVersions(other, 10*time.Second); err != nil {
				t.Fatalf("another client while a frame is dribbled: %v", err)
			}
			closedWithin(t, slow, 20*time.Second)
			took := time.Since(started)
			if took < timeout || took > 10*timeout {
				t.Errorf("closed after %v, want within [%v, %v]", took, timeout, 10*timeout)
			}
			slow.Close()
			<-dripped
		})
	}
}
