package netio

// Fuzz targets for what netio decodes itself (frame.go) and for a whole
// request served against a memory backend, plus the framing tests a
// fuzzer cannot make: a bad frame closes only its own connection, and an
// oversized one is refused and logged.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// appendTestHeader encodes a request header without frame.go's help: key,
// version, correlation ID, client ID (int16 length) and, for a flexible
// header, an empty tag section.
func appendTestHeader(dst []byte, h RequestHeader, flexible bool) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Key))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.CorrelationID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(h.ClientID)))
	dst = append(dst, h.ClientID...)
	if flexible {
		dst = append(dst, 0)
	}
	return dst
}

// seedRequests are valid requests of every served key at its lowest and
// highest version, naming topic "t".
func seedRequests() []kmsg.Request {
	var out []kmsg.Request
	for _, key := range advertisedKeys() {
		for _, version := range []int16{apis[key.ApiKey].minVersion, key.MaxVersion} {
			req := kmsg.RequestForKey(key.ApiKey)
			req.SetVersion(version)
			fillSeedRequest(req)
			out = append(out, req)
		}
	}
	return out
}

// fillSeedRequest names topic "t", partition 0, in requests that take one.
func fillSeedRequest(req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.ListOffsetsRequest:
		r.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "t", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}}}
	case *kmsg.MetadataRequest:
		r.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
	case *kmsg.FindCoordinatorRequest:
		r.CoordinatorKey, r.CoordinatorKeys = "g", []string{"g"}
	case *kmsg.CreateTopicsRequest:
		r.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "u", NumPartitions: 2, ReplicationFactor: 1}}
	case *kmsg.DeleteTopicsRequest:
		r.TopicNames = []string{"t"}
		r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("t")}}
	case *kmsg.DeleteRecordsRequest:
		r.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "t", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	case *kmsg.InitProducerIDRequest:
		r.TransactionalID = kmsg.StringPtr("tx")
	case *kmsg.OffsetForLeaderEpochRequest:
		r.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: -1}}}}
	case *kmsg.AddPartitionsToTxnRequest:
		r.TransactionalID, r.ProducerID = "tx", 1
		r.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	case *kmsg.EndTxnRequest:
		r.TransactionalID, r.ProducerID, r.Commit = "tx", 1, true
	case *kmsg.CreatePartitionsRequest:
		r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "t", Count: 3}}
	case *kmsg.DescribeTopicPartitionsRequest:
		r.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "t"}}
	case *kmsg.ApiVersionsRequest:
		r.ClientSoftwareName, r.ClientSoftwareVersion = "fuzz", "1"
	case *kmsg.ProduceRequest:
		r.Acks = -1
		r.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0}}}}
	}
}

// seedFrames are the seed requests as frames without the size prefix.
func seedFrames() [][]byte {
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	var out [][]byte
	for i, req := range seedRequests() {
		out = append(out, formatter.AppendRequest(nil, req, int32(i))[4:])
	}
	return out
}

// TestAppendTestHeaderMatchesKmsg pins the test encoder to kmsg's.
func TestAppendTestHeaderMatchesKmsg(t *testing.T) {
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("check"))
	for _, req := range seedRequests() {
		want := formatter.AppendRequest(nil, req, 77)[4:]
		h := RequestHeader{Key: req.Key(), Version: req.GetVersion(), CorrelationID: 77, ClientID: "check"}
		got := req.AppendTo(appendTestHeader(nil, h, req.IsFlexible()))
		if !bytes.Equal(got, want) {
			t.Errorf("key %d v%d: test encoder differs from kmsg", h.Key, h.Version)
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	for _, frame := range seedFrames() {
		f.Add(frame)
	}
	f.Add([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 5, 1, 2, 3})       // null client ID, tags
	f.Add([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0, 0, 2, 0, 1, 7, 1, 3, 9, 9}) // two tags
	f.Add([]byte{0, 1, 0, 4, 0, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, body, err := parseHeader(frame, flexibility)
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("error %v does not wrap ErrFrame", err)
			}
			return
		}
		if !bytes.HasSuffix(frame, body) || len(body) > len(frame)-10 {
			t.Fatalf("body of %d bytes is not a suffix of the %d-byte frame after a header", len(body), len(frame))
		}
		if len(body) > 0 && &body[len(body)-1] != &frame[len(frame)-1] {
			t.Fatal("body does not alias the frame")
		}
		flexible, known := flexibility(h.Key, h.Version)
		again := append(appendTestHeader(nil, h, flexible && known), body...)
		h2, body2, err := parseHeader(again, flexibility)
		if err != nil {
			t.Fatalf("re-encoded header %+v: %v", h, err)
		}
		if h2 != h || !bytes.Equal(body2, body) {
			t.Fatalf("re-parsed %+v (%d body bytes), want %+v (%d)", h2, len(body2), h, len(body))
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	for _, frame := range seedFrames() {
		sized := binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
		f.Add(append(sized, frame...), int32(1<<20))
		f.Add(append(sized, frame...), int32(len(frame)-1))
	}
	f.Add([]byte{0, 0, 0, 7, 1, 2, 3, 4, 5, 6, 7}, int32(100))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff}, int32(1<<20))
	f.Add([]byte{0, 0, 0, 9, 1, 2}, int32(100))
	f.Fuzz(func(t *testing.T, data []byte, limit int32) {
		limit %= 1 << 20 // frame sizes the fuzzer can afford to allocate
		r := bytes.NewReader(data)
		var buf []byte
		consumed := 0
		for range len(data)/12 + 1 { // a frame takes at least 12 bytes
			var err error
			buf, err = readFrame(r, buf, limit)
			if len(buf) > max(int(limit), 0) {
				t.Fatalf("returned %d bytes with limit %d", len(buf), limit)
			}
			if err != nil {
				if !errors.Is(err, ErrFrame) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("error %v is neither ErrFrame nor an io error", err)
				}
				return
			}
			size := int(binary.BigEndian.Uint32(data[consumed:]))
			if len(buf) != size || len(buf) < 8 || !bytes.Equal(buf, data[consumed+4:consumed+4+size]) {
				t.Fatalf("frame of %d bytes, size prefix %d", len(buf), size)
			}
			consumed += 4 + size
		}
	})
}

// recordingConn is a net.Conn that keeps what is written to it and has
// nothing to read.
type recordingConn struct {
	bytes.Buffer
}

func (*recordingConn) Read([]byte) (int, error) { return 0, io.EOF }
func (*recordingConn) Close() error             { return nil }
func (*recordingConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092}
}
func (*recordingConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000}
}
func (*recordingConn) SetDeadline(time.Time) error      { return nil }
func (*recordingConn) SetReadDeadline(time.Time) error  { return nil }
func (*recordingConn) SetWriteDeadline(time.Time) error { return nil }

// fuzzBackend is a memory backend that refuses large topics, so a fuzzed
// CreateTopics or CreatePartitions cannot make it allocate without bound.
type fuzzBackend struct{ *memBackend }

const fuzzPartitionsMax = 64

func (b fuzzBackend) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string, validateOnly bool) (TopicInfo, error) {
	if partitions > fuzzPartitionsMax {
		return TopicInfo{}, kerr.PolicyViolation
	}
	return b.memBackend.CreateTopic(ctx, name, partitions, configs, validateOnly)
}

func (b fuzzBackend) CreatePartitions(ctx context.Context, name string, count int32, validateOnly bool) error {
	if count > fuzzPartitionsMax {
		return kerr.PolicyViolation
	}
	return b.memBackend.CreatePartitions(ctx, name, count, validateOnly)
}

// serveOneFrame hands frame to a fresh connection of a fresh server and
// returns what it wrote and the error that would close it.
func serveOneFrame(t *testing.T, frame []byte) ([]byte, error) {
	mem := newMemBackend()
	mustCreateTopic(t, mem, "t", 2)
	produceRecords(t, mem, "t", 0, 3)
	server := NewServer(Config{Backend: fuzzBackend{mem}})
	nc := &recordingConn{}
	c := &conn{server: server, nc: nc, w: bufio.NewWriterSize(nc, 64<<10)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // bounds a long poll
	defer cancel()
	err := c.handle(ctx, frame)
	server.sessions.forgetConn(c)
	return nc.Bytes(), err
}

func FuzzServeFrame(f *testing.F) {
	for _, frame := range seedFrames() {
		f.Add(frame)
	}
	f.Add([]byte{0, 18, 0, 9, 0, 0, 0, 5, 0, 0}) // ApiVersions above what is served
	f.Fuzz(func(t *testing.T, frame []byte) {
		out, err := serveOneFrame(t, frame)
		if err != nil {
			if len(out) != 0 {
				t.Fatalf("connection closed (%v) after writing %d bytes", err, len(out))
			}
			return
		}
		if len(out) == 0 {
			return // acks=0 produce
		}
		if len(out) < 8 || int(binary.BigEndian.Uint32(out)) != len(out)-4 {
			t.Fatalf("response of %d bytes with size prefix % x", len(out), out[:min(len(out), 4)])
		}
		h, _, _ := parseHeader(frame, flexibility)
		if got := int32(binary.BigEndian.Uint32(out[4:])); got != h.CorrelationID {
			t.Fatalf("correlation ID %d, want %d", got, h.CorrelationID)
		}
		checkResponseDecodes(t, h, out[8:])
	})
}

// checkResponseDecodes decodes a response body at the request's version
// (an UNSUPPORTED_VERSION ApiVersions answer is v0).
func checkResponseDecodes(t *testing.T, h RequestHeader, body []byte) {
	req := kmsg.RequestForKey(h.Key)
	req.SetVersion(h.Version)
	resp := req.ResponseKind()
	if h.Key == apiVersionsKey {
		if a := apis[apiVersionsKey]; h.Version < a.minVersion || h.Version > a.maxVersion {
			resp.SetVersion(0)
		}
	} else if resp.IsFlexible() {
		if len(body) == 0 || body[0] != 0 {
			t.Fatal("flexible response without an empty tag section")
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("key %d v%d: response does not decode: %v", h.Key, h.Version, err)
	}
}

func TestServeFrameSeeds(t *testing.T) {
	for _, frame := range seedFrames() {
		out, err := serveOneFrame(t, frame)
		h, _, _ := parseHeader(frame, flexibility)
		if errors.Is(err, ErrNotBuilt) {
			continue
		}
		if err != nil || len(out) < 8 {
			t.Errorf("key %d v%d: %v, %d bytes", h.Key, h.Version, err, len(out))
			continue
		}
		checkResponseDecodes(t, h, out[8:])
	}
}

// TestMalformedFrameClosesOnlyItsConnection sends bad frames on one
// connection while another keeps being served.
func TestMalformedFrameClosesOnlyItsConnection(t *testing.T) {
	addr := startServer(t, newMemBackend())
	good := dialRaw(t, addr)
	apiVersions := func(raw *rawConn) {
		t.Helper()
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		if resp := raw.do(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
			t.Fatalf("api versions: %s, %d keys", errName(resp.ErrorCode), len(resp.ApiKeys))
		}
	}
	apiVersions(good)
	sized := func(frame []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)
	}
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.Version = 12
	validMetadata := kmsg.NewRequestFormatter().AppendRequest(nil, metadata, 1)
	for _, c := range []struct {
		name  string
		frame []byte
	}{
		{"too short", []byte{0, 0, 0, 4, 0, 3, 0, 1}},
		{"negative size", []byte{0xff, 0xff, 0xff, 0xf0}},
		{"unknown key", sized(appendTestHeader(nil, RequestHeader{Key: 999, CorrelationID: 1}, false))},
		{"version not served", sized(appendTestHeader(nil, RequestHeader{Key: 3, Version: 99, CorrelationID: 1}, false))},
		{"client ID past the end", sized([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 50, 'x'})},
		{"body cut short", validMetadata[:len(validMetadata)-1]},
		{"body that does not decode", sized(append(appendTestHeader(nil, RequestHeader{Key: 3, Version: 12, CorrelationID: 1}, true), 0xff, 0xff, 0xff))},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := dialRaw(t, addr)
			bad.send(c.frame)
			if c.name == "body cut short" {
				bad.nc.(*net.TCPConn).CloseWrite() // the server is still reading the frame
			}
			if _, _, err := bad.receive(); err == nil {
				t.Fatal("got a response to a malformed frame")
			}
			apiVersions(good)
			apiVersions(dialRaw(t, addr))
		})
	}
}

// TestOversizedFrameRefused checks the MaxRequestBytes bound: a frame at
// the bound is served, one byte more closes the connection with a log
// line, before its body is read.
func TestOversizedFrameRefused(t *testing.T) {
	const maxRequestBytes = 1024
	var logs lockedBuffer
	mem := newMemBackend()
	cfg := Config{Backend: mem, MaxRequestBytes: maxRequestBytes, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	addr := startServerConfig(t, cfg, mem)

	atLimit := dialRaw(t, addr)
	clientID := strings.Repeat("x", maxRequestBytes-10) // header: key, version, correlation, client ID length
	frame := appendTestHeader(nil, RequestHeader{Key: apiVersionsKey, Version: 0, CorrelationID: 1, ClientID: clientID}, false)
	if len(frame) != maxRequestBytes {
		t.Fatalf("frame of %d bytes", len(frame))
	}
	atLimit.send(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
	if _, _, err := atLimit.receive(); err != nil {
		t.Fatalf("frame at the limit: %v", err)
	}

	over := dialRaw(t, addr)
	over.send(binary.BigEndian.AppendUint32(nil, maxRequestBytes+1))
	if _, _, err := over.receive(); err == nil {
		t.Fatal("oversized frame answered")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "frame size 1025 outside [8, 1024]") {
		if time.Now().After(deadline) {
			t.Fatalf("no log line for the oversized frame; log:\n%s", logs.String())
		}
		runtime.Gosched()
	}
	if !strings.Contains(logs.String(), "closing connection") {
		t.Errorf("log:\n%s", logs.String())
	}
}
