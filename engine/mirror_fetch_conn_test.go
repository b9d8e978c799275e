package engine

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/mirrord/mirrord/engine/fetchwire"
	rb "github.com/mirrord/mirrord/recordbatch"
)

// fakeSource is a loopback listener that answers one connection's
// requests with answer (nil: close the connection). Its goroutine ends
// with the test.
type fakeSource struct {
	addr string
}

func startFakeSource(t testing.TB, answer func(key, version int16, correlationID int32, body []byte) []byte) fakeSource {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { listener.Close(); <-done })
	go func() {
		defer close(done)
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			serveFake(conn, answer)
		}
	}()
	return fakeSource{addr: listener.Addr().String()}
}

// serveFake answers one connection until it or the answer ends it.
func serveFake(conn net.Conn, answer func(key, version int16, correlationID int32, body []byte) []byte) {
	defer conn.Close()
	reader := bufio.NewReader(conn)
	var frame []byte
	for {
		var size [4]byte
		if _, err := io.ReadFull(reader, size[:]); err != nil {
			return
		}
		if n := int(binary.BigEndian.Uint32(size[:])); cap(frame) < n {
			frame = make([]byte, n)
		} else {
			frame = frame[:n]
		}
		if _, err := io.ReadFull(reader, frame); err != nil {
			return
		}
		b := kbin.Reader{Src: frame}
		key, version, correlationID := b.Int16(), b.Int16(), b.Int32()
		b.Span(int(max(b.Int16(), 0))) // client.id
		out := answer(key, version, correlationID, b.Src)
		if out == nil {
			return
		}
		if _, err := conn.Write(out); err != nil {
			return
		}
	}
}

// frameResponse frames resp as the answer to correlationID.
func frameResponse(resp kmsg.Response, correlationID int32) []byte {
	out := binary.BigEndian.AppendUint32(nil, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		out = append(out, 0) // no header tags
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

func apiVersionsAnswer(fetchMax int16, correlationID int32) []byte {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	for _, k := range []struct{ key, max int16 }{{kmsg.Fetch.Int16(), fetchMax}, {kmsg.SASLHandshake.Int16(), 1}, {kmsg.SASLAuthenticate.Int16(), 2}} {
		v := kmsg.NewApiVersionsResponseApiKey()
		v.ApiKey, v.MaxVersion = k.key, k.max
		resp.ApiKeys = append(resp.ApiKeys, v)
	}
	return frameResponse(resp, correlationID)
}

func testDialer() *sourceDialer {
	return &sourceDialer{dialTimeout: 5 * time.Second, requestTimeout: 5 * time.Second}
}

// TestFetchConnFraming: a response that does not frame as the request's
// answer fails the round trip, and the set-up refuses a broker without
// Fetch v13.
func TestFetchConnFraming(t *testing.T) {
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = fetchwire.Version
	good := kmsg.NewPtrFetchResponse()
	good.Version = fetchwire.Version
	good.SessionID = 42
	tests := []struct {
		name     string
		fetchMax int16
		answer   func(correlationID int32) []byte
		want     error // nil: the round trip works
	}{
		{"answer", 13, func(id int32) []byte { return frameResponse(good, id) }, nil},
		{"wrong correlation ID", 13, func(id int32) []byte { return frameResponse(good, id+1) }, errFetchConnFrame},
		{"size past the bound", 13, func(int32) []byte { return binary.BigEndian.AppendUint32(nil, fetchResponseBytesMax+1) }, errFetchConnFrame},
		{"size below a header", 13, func(int32) []byte { return binary.BigEndian.AppendUint32(nil, 3) }, errFetchConnFrame},
		{"connection closed", 13, func(int32) []byte { return nil }, io.EOF},
		{"no Fetch v13", 12, nil, errFetchConnUnsupported},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			source := startFakeSource(t, func(key, _ int16, id int32, _ []byte) []byte {
				if key == kmsg.ApiVersions.Int16() {
					return apiVersionsAnswer(test.fetchMax, id)
				}
				return test.answer(id)
			})
			conn, err := testDialer().dial(context.Background(), source.addr)
			if test.answer == nil {
				if !errors.Is(err, test.want) {
					t.Fatalf("dial: %v, want %v", err, test.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.close()
			body, buffer, err := conn.roundTrip(fetch, 0)
			defer fetchBuffers.release(buffer)
			if !errors.Is(err, test.want) {
				t.Fatalf("round trip: %v, want %v", err, test.want)
			}
			if test.want == nil {
				if resp, err := fetchwire.Parse(body); err != nil || resp.SessionID != 42 {
					t.Fatalf("answer: %+v, %v", resp, err)
				}
			}
		})
	}
}

// TestFetchBufferPool: a released buffer is the next one taken if it
// fits (last in, first out), a smaller one is dropped for one that fits,
// and the pool keeps neither oversized buffers nor more than its bound.
func TestFetchBufferPool(t *testing.T) {
	var pool fetchBufferPool
	first := pool.take(1000)
	if len(*first) != 1000 || cap(*first) != fetchBufferGrain {
		t.Fatalf("a buffer of %d bytes, cap %d", len(*first), cap(*first))
	}
	pool.release(first)
	if again := pool.take(5000); again != first || len(*again) != 5000 {
		t.Fatal("the released buffer was not taken again")
	}
	pool.release(first)
	if larger := pool.take(fetchBufferGrain + 1); larger == first || cap(*larger) != 2*fetchBufferGrain {
		t.Fatalf("a buffer too small was taken, or the new one has cap %d", cap(*larger))
	}
	huge := make([]byte, fetchBufferPooledBytesMax+1)
	pool.release(&huge)
	for range fetchBuffersIdleMax + 2 {
		pool.release(pool.take(10)) // taken from the pool: it holds none
	}
	held := make([]*[]byte, fetchBuffersIdleMax+2)
	for i := range held {
		held[i] = pool.take(10)
	}
	for _, buffer := range held {
		pool.release(buffer)
	}
	if len(pool.idle) != fetchBuffersIdleMax {
		t.Fatalf("%d idle buffers, want the bound %d", len(pool.idle), fetchBuffersIdleMax)
	}
	for _, buffer := range pool.idle {
		if buffer == &huge {
			t.Fatal("an oversized buffer was pooled")
		}
	}
}

// TestFetchConnClosesOnContextEnd: the fetcher's context ending fails a
// round trip the source holds, long before request.timeout.ms.
func TestFetchConnClosesOnContextEnd(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	source := startFakeSource(t, func(key, _ int16, id int32, _ []byte) []byte {
		if key == kmsg.ApiVersions.Int16() {
			return apiVersionsAnswer(13, id)
		}
		close(held)
		<-release // the source holds the Fetch until the test ends
		return nil
	})
	t.Cleanup(func() { close(release) }) // before the source's cleanup waits for it
	ctx, cancel := context.WithCancel(context.Background())
	dialer := testDialer()
	dialer.requestTimeout = time.Minute
	conn, err := dialer.dial(ctx, source.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.close()
	go func() { <-held; cancel() }()
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = fetchwire.Version
	started := time.Now()
	if _, _, err := conn.roundTrip(fetch, 0); err == nil {
		t.Fatal("the round trip answered")
	}
	if waited := time.Since(started); waited > 30*time.Second {
		t.Fatalf("the round trip failed after %v: the context's end did not close the connection", waited)
	}
}

// responseWithRecords is a Fetch answer of one topic whose partitions
// each carry recordBytes of whole batches.
func responseWithRecords(partitions int, recordBytes int) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = fetchwire.Version
	topic := kmsg.NewFetchResponseTopic()
	topic.TopicID = [16]byte{9}
	for i := range partitions {
		var batches []byte
		for base := rb.Offset(0); len(batches) < recordBytes; base += 16 {
			batches = appendTestBatch(batches, base, 1, 16, "bench")
		}
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition, p.HighWatermark, p.LastStableOffset = int32(i), 1<<20, 1<<20
		p.RecordBatches = batches
		topic.Partitions = append(topic.Partitions, p)
	}
	resp.Topics = []kmsg.FetchResponseTopic{topic}
	return resp
}

// BenchmarkFetchResponsePath: one Fetch round trip over loopback and the
// hand-off of every partition's whole batches (what apply gives
// AppendMirrored), 64 partitions of 16 KiB: as it was over kgo (a fresh
// buffer per response, kmsg's structs) and over the fetcher's connection
// (a kept buffer, fetchwire in place).
func BenchmarkFetchResponsePath(b *testing.B) {
	// One encoding, its correlation ID patched per answer: the fake
	// source allocates nothing per round (allocs/op are the client's).
	answer := frameResponse(responseWithRecords(64, 16<<10), 0)
	source := startFakeSource(b, func(key, _ int16, id int32, _ []byte) []byte {
		if key == kmsg.ApiVersions.Int16() {
			return apiVersionsAnswer(13, id)
		}
		binary.BigEndian.PutUint32(answer[4:], uint32(id))
		return answer
	})
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = fetchwire.Version
	var handedOff int
	handOff := func(records []byte) { handedOff += len(wholeBatches(records)) }
	b.Run("kgo-kmsg", func(b *testing.B) {
		conn, err := net.Dial("tcp", source.addr)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		reader := bufio.NewReaderSize(conn, 4<<10) // as kgo reads
		formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID(fetchClientID))
		var request []byte
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			request = formatter.AppendRequest(request[:0], fetch, int32(i))
			if _, err := conn.Write(request); err != nil {
				b.Fatal(err)
			}
			var size [4]byte
			if _, err := io.ReadFull(reader, size[:]); err != nil {
				b.Fatal(err)
			}
			buffer := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(reader, buffer); err != nil {
				b.Fatal(err)
			}
			decoded := kmsg.NewPtrFetchResponse()
			decoded.Version = fetchwire.Version
			if err := decoded.ReadFrom(buffer[5:]); err != nil {
				b.Fatal(err)
			}
			for _, t := range decoded.Topics {
				for i := range t.Partitions {
					handOff(t.Partitions[i].RecordBatches)
				}
			}
		}
	})
	b.Run("fetchconn-fetchwire", func(b *testing.B) {
		conn, err := testDialer().dial(context.Background(), source.addr)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.close()
		b.ReportAllocs()
		for b.Loop() {
			body, buffer, err := conn.roundTrip(fetch, 0)
			if err != nil {
				b.Fatal(err)
			}
			parsed, err := fetchwire.Parse(body)
			if err != nil {
				b.Fatal(err)
			}
			for topics := parsed.Topics(); ; {
				t, ok := topics.Next()
				if !ok {
					break
				}
				for partitions := t.Partitions(); ; {
					p, ok := partitions.Next()
					if !ok {
						break
					}
					handOff(p.RecordBatches)
				}
			}
			fetchBuffers.release(buffer)
		}
	})
	if handedOff == 0 {
		b.Fatal("no records handed off")
	}
}

// TestFetchConnLogin: the connection logs in with the mechanism over
// SaslHandshake v1 and SaslAuthenticate, refuses what the source refuses,
// and redials before a session lifetime (KIP-368) ends.
func TestFetchConnLogin(t *testing.T) {
	tests := []struct {
		name           string
		password       string
		lifetimeMillis int64
		want           error
		wantExpiry     time.Duration // from the login; 0: none
	}{
		{"no lifetime", "secret", 0, nil, 0},
		{"lifetime", "secret", 100_000, nil, 95 * time.Second},
		{"short lifetime", "secret", 1500, nil, 500 * time.Millisecond},
		{"refused", "wrong", 0, kerr.SaslAuthenticationFailed, 0},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			var mechanisms []string // bounded: one login
			source := startFakeSource(t, func(key, version int16, id int32, body []byte) []byte {
				switch key {
				case kmsg.ApiVersions.Int16():
					return apiVersionsAnswer(13, id)
				case kmsg.SASLHandshake.Int16():
					req := kmsg.NewPtrSASLHandshakeRequest()
					req.Version = version
					if err := req.ReadFrom(body); err != nil {
						return nil
					}
					mechanisms = append(mechanisms, req.Mechanism)
					resp := kmsg.NewPtrSASLHandshakeResponse()
					resp.Version = version
					return frameResponse(resp, id)
				case kmsg.SASLAuthenticate.Int16():
					req := kmsg.NewPtrSASLAuthenticateRequest()
					req.Version = version
					if err := req.ReadFrom(body[1:]); err != nil { // after the header's tags (v2)
						return nil
					}
					resp := kmsg.NewPtrSASLAuthenticateResponse()
					resp.Version = version
					if string(req.SASLAuthBytes) != "\x00mirror\x00secret" {
						resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
						message := "Authentication failed: Invalid username or password"
						resp.ErrorMessage = &message
					}
					resp.SessionLifetimeMillis = test.lifetimeMillis
					return frameResponse(resp, id)
				}
				return nil
			})
			dialer := testDialer()
			dialer.mechanism = plain.Auth{User: "mirror", Pass: test.password}.AsMechanism()
			before := time.Now()
			conn, err := dialer.dial(context.Background(), source.addr)
			if !errors.Is(err, test.want) {
				t.Fatalf("dial: %v, want %v", err, test.want)
			}
			if err != nil {
				if strings.Contains(err.Error(), test.password) {
					t.Errorf("the error shows the password: %v", err)
				}
				return
			}
			defer conn.close()
			after := time.Now()
			if len(mechanisms) != 1 || mechanisms[0] != "PLAIN" {
				t.Errorf("handshakes %q, want one for PLAIN", mechanisms)
			}
			switch {
			case test.wantExpiry == 0 && !conn.expiry.IsZero():
				t.Errorf("expiry %v, want none", conn.expiry)
			case test.wantExpiry > 0 && (conn.expiry.Before(before.Add(test.wantExpiry)) || conn.expiry.After(after.Add(test.wantExpiry))):
				t.Errorf("expires in %v after the login, want %v", conn.expiry.Sub(before), test.wantExpiry)
			}
			if test.wantExpiry > 0 && (conn.expired(before) || !conn.expired(after.Add(test.wantExpiry+time.Millisecond))) {
				t.Error("expired does not follow the expiry")
			}
		})
	}
}
