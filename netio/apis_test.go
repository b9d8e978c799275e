package netio

// Tests of the handlers other than Produce, Metadata and Fetch: kmsg
// requests at chosen versions over a loopback connection (rawConn), and
// franz-go's kgo and kadm against the same server. stubBackend lets a
// test set a partition's epochs and offsets and the coordinator's answers.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn sends kmsg requests at the version they carry and decodes the
// answers, one at a time.
type rawConn struct {
	t           *testing.T
	nc          net.Conn
	correlation int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// send writes one request frame.
func (r *rawConn) send(frame []byte) {
	r.t.Helper()
	r.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.nc.Write(frame); err != nil {
		r.t.Fatal(err)
	}
}

// receive reads one response frame: the correlation ID and the rest.
func (r *rawConn) receive() (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r.nc, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.nc, body); err != nil {
		return 0, nil, err
	}
	if len(body) < 4 {
		return 0, nil, fmt.Errorf("response of %d bytes", len(body))
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
}

// do sends req and returns its decoded response.
func (r *rawConn) do(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	r.correlation++
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("apis-test"))
	r.send(formatter.AppendRequest(nil, req, r.correlation))
	correlation, body, err := r.receive()
	if err != nil {
		r.t.Fatalf("key %d v%d: %v", req.Key(), req.GetVersion(), err)
	}
	if correlation != r.correlation {
		r.t.Fatalf("correlation %d, want %d", correlation, r.correlation)
	}
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != apiVersionsKey {
		if len(body) == 0 || body[0] != 0 {
			r.t.Fatalf("key %d v%d: response header tags % x", req.Key(), req.GetVersion(), body[:min(len(body), 1)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatalf("key %d v%d: decoding response: %v", req.Key(), req.GetVersion(), err)
	}
	return resp
}

// stubBackend is a memBackend whose partitions and coordinator a test can
// replace.
type stubBackend struct {
	*memBackend
	partitions   map[topicPartition]*stubPartition
	transactions Transactions
}

func newStubBackend() *stubBackend {
	return &stubBackend{memBackend: newMemBackend(), partitions: map[topicPartition]*stubPartition{}}
}

func (b *stubBackend) Partition(topic string, partition int32) (Partition, error) {
	if p, ok := b.partitions[topicPartition{topic, partition}]; ok {
		return p, nil
	}
	return b.memBackend.Partition(topic, partition)
}

func (b *stubBackend) Transactions() Transactions {
	if b.transactions != nil {
		return b.transactions
	}
	return b.memBackend.Transactions()
}

// stubPartition answers ListOffsets and OffsetForLeaderEpoch as a test
// sets it, and records what it was asked.
type stubPartition struct {
	Partition // nil: the methods below are the only ones used

	epoch      rb.Epoch
	offsets    Offsets
	listOffset func(timestamp int64, isolation Isolation) (rb.Offset, int64, rb.Epoch, error)
	epochEnds  map[int32][2]int64 // requested epoch -> end epoch, end offset

	mu    sync.Mutex
	asked []string
}

func (p *stubPartition) LeaderEpoch() rb.Epoch { return p.epoch }
func (p *stubPartition) Offsets() Offsets      { return p.offsets }

func (p *stubPartition) ListOffset(timestamp int64, isolation Isolation) (rb.Offset, int64, rb.Epoch, error) {
	p.mu.Lock()
	p.asked = append(p.asked, fmt.Sprintf("ListOffset(%d, %d)", timestamp, isolation))
	p.mu.Unlock()
	return p.listOffset(timestamp, isolation)
}

func (p *stubPartition) EndOffsetForEpoch(epoch rb.Epoch) (rb.Epoch, rb.Offset) {
	p.mu.Lock()
	p.asked = append(p.asked, fmt.Sprintf("EndOffsetForEpoch(%d)", epoch))
	p.mu.Unlock()
	if end, ok := p.epochEnds[int32(epoch)]; ok {
		return rb.Epoch(end[0]), rb.Offset(end[1])
	}
	return -1, -1
}

func (p *stubPartition) calls() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := strings.Join(p.asked, " ")
	p.asked = nil
	return out
}

// stubTransactions is a coordinator that records its calls and answers
// err (AddPartitions: errs[topic], else err).
type stubTransactions struct {
	err  error
	errs map[string]error

	mu    sync.Mutex
	asked []string
}

func (s *stubTransactions) record(format string, args ...any) {
	s.mu.Lock()
	s.asked = append(s.asked, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *stubTransactions) calls() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := strings.Join(s.asked, " ")
	s.asked = nil
	return out
}

func (s *stubTransactions) InitProducerID(_ context.Context, transactionalID string, timeoutMillis int32, producerID int64, producerEpoch int16) (int64, int16, error) {
	s.record("Init(%q, %d, %d, %d)", transactionalID, timeoutMillis, producerID, producerEpoch)
	if s.err != nil {
		return 7, 7, s.err // a failure's values must not reach the client
	}
	return 42, 3, nil
}

func (s *stubTransactions) AddPartitions(_ context.Context, transactionalID string, producerID int64, producerEpoch int16, topic string, partitions []int32) []error {
	s.record("Add(%q, %d, %d, %s, %v)", transactionalID, producerID, producerEpoch, topic, partitions)
	err := s.err
	if topicErr, ok := s.errs[topic]; ok {
		err = topicErr
	}
	errs := make([]error, len(partitions))
	for i := range errs {
		errs[i] = err
	}
	return errs
}

func (s *stubTransactions) AddOffsets(_ context.Context, transactionalID string, producerID int64, producerEpoch int16, group string) error {
	s.record("AddOffsets(%q, %d, %d, %s)", transactionalID, producerID, producerEpoch, group)
	return s.err
}

func (s *stubTransactions) TransactionStates(context.Context, []string) []TransactionState {
	return nil
}

func (s *stubTransactions) VerifyPartitions(_ context.Context, transactionalID string, producerID int64, producerEpoch int16, topic string, partitions []int32) []error {
	s.record("Verify(%q, %d, %d, %s, %v)", transactionalID, producerID, producerEpoch, topic, partitions)
	errs := make([]error, len(partitions))
	for i := range errs {
		errs[i] = s.err
	}
	return errs
}

func (s *stubTransactions) EndTransaction(_ context.Context, transactionalID string, producerID int64, producerEpoch int16, commit, tv2 bool) (int64, int16, error) {
	s.record("End(%q, %d, %d, %v, tv2=%v)", transactionalID, producerID, producerEpoch, commit, tv2)
	if s.err != nil || !tv2 {
		return -1, -1, s.err
	}
	return producerID, producerEpoch + 1, nil
}

// lockedBuffer is a log sink safe to read while the server writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServerConfig serves cfg until the test ends; mem (the backend or
// the one inside it) advertises the listener's address.
func startServerConfig(t *testing.T, cfg Config, mem *memBackend) string {
	t.Helper()
	_, addr := startServerOf(t, cfg, mem)
	return addr
}

// startServerOf is startServerConfig returning the server too.
func startServerOf(t *testing.T, cfg Config, mem *memBackend) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	mem.cluster.Host, mem.cluster.Port = addr.IP.String(), int32(addr.Port)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	server := NewServer(cfg)
	go func() { done <- server.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return server, ln.Addr().String()
}

func startStubServer(t *testing.T, backend *stubBackend) *rawConn {
	t.Helper()
	return dialRaw(t, startServerConfig(t, Config{Backend: backend}, backend.memBackend))
}

func mustCreateTopic(t *testing.T, backend *memBackend, name string, partitions int32) TopicInfo {
	t.Helper()
	info, err := backend.CreateTopic(context.Background(), name, partitions, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}
